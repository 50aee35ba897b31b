// FP8 (e4m3, e5m2): the host types against an independent reference (all 256 codes, round
// trips, ties, saturation, NaN, infinity); the language's rules (storage only: arithmetic
// refused with a message that says to convert; conversions to and from the float types
// only, to nearest even); the printer, the hash; the interpreter's loads, stores and
// conversions on every code and at every rounding boundary, as the GPU's cvt does them.
#include <catch2/catch.hpp>

#include <cstring>

#include "kaio/ir/interp/interp.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "fp8_support.h"

using namespace kaio;
using Catch::Matchers::Contains;
namespace f8 = kaio::test::fp8;

namespace {

uint32_t bits(float x) { return detail::f32_bits(x); }

template <class T>
uint8_t code_of(float x) { return T(x).bits; }

}  // namespace

TEST_CASE("fp8: every code decodes to its value, exactly as f16 and f32", "[ir][fp8]") {
  for (const f8::Format& f : {f8::kE4M3, f8::kE5M2}) {
    for (int c = 0; c < 256; ++c) {
      INFO((f.e5m2 ? "e5m2" : "e4m3") << " code 0x" << std::hex << c);
      const double ref = f8::value(f, uint8_t(c));
      const float got = f.e5m2 ? float(fp8_e5m2::from_bits(uint8_t(c))) : float(fp8_e4m3::from_bits(uint8_t(c)));
      const uint16_t h = detail::fp8_bits_to_f16_bits(uint8_t(c), f.e5m2);
      if (std::isnan(ref)) {
        CHECK(std::isnan(got));
        CHECK(h == 0x7fff);  // the GPU's canonical f16 NaN, whatever the sign
        continue;
      }
      CHECK(double(got) == ref);
      CHECK(std::signbit(got) == bool(c & 0x80));  // -0 stays -0
      CHECK(double(float(half::from_bits(h))) == ref);
      CHECK(std::signbit(float(half::from_bits(h))) == bool(c & 0x80));
    }
  }
  // anchors of the formats
  CHECK(float(fp8_e4m3::from_bits(0x7e)) == 448.0f);
  CHECK(float(fp8_e4m3::from_bits(0x38)) == 1.0f);
  CHECK(float(fp8_e4m3::from_bits(0x08)) == 0x1p-6f);
  CHECK(float(fp8_e4m3::from_bits(0x01)) == 0x1p-9f);
  CHECK(std::isnan(float(fp8_e4m3::from_bits(0xff))));
  CHECK(float(fp8_e5m2::from_bits(0x7b)) == 57344.0f);
  CHECK(float(fp8_e5m2::from_bits(0x3c)) == 1.0f);
  CHECK(float(fp8_e5m2::from_bits(0x01)) == 0x1p-16f);
  CHECK(float(fp8_e5m2::from_bits(0xfc)) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(float(fp8_e5m2::from_bits(0x7d))));
}

TEST_CASE("fp8: float -> fp8 rounds to nearest even; e4m3 saturates, e5m2 overflows to inf, NaN is 0x7f", "[ir][fp8]") {
  for (const f8::Format& f : {f8::kE4M3, f8::kE5M2}) {
    for (float x : f8::inputs(f)) {
      INFO((f.e5m2 ? "e5m2 " : "e4m3 ") << x << " (0x" << std::hex << bits(x) << ")");
      const uint8_t host = f.e5m2 ? code_of<fp8_e5m2>(x) : code_of<fp8_e4m3>(x);
      REQUIRE(int(host) == int(f8::encode(f, x, false)));                                         // the host types
      REQUIRE(int(detail::f32_to_fp8_bits(x, f.e5m2, true)) == int(f8::encode(f, x, true)));      // the GPU's cvt
      REQUIRE(int(detail::f64_to_fp8_bits(double(x), f.e5m2, true)) == int(f8::encode(f, x, true)));
    }
    // every finite code survives the round trip; NaN codes come back as 0x7f
    for (int c = 0; c < 256; ++c) {
      const float x = float(f8::value(f, uint8_t(c)));
      const uint8_t back = f.e5m2 ? code_of<fp8_e5m2>(x) : code_of<fp8_e4m3>(x);
      CHECK(int(back) == (f8::is_nan(f, uint8_t(c)) ? 0x7f : c));
    }
  }
  // the boundaries, by hand
  CHECK(code_of<fp8_e4m3>(464.0f) == 0x7e);                      // the tie above 448 goes to the even 448
  CHECK(code_of<fp8_e4m3>(1e9f) == 0x7e);
  CHECK(code_of<fp8_e4m3>(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(code_of<fp8_e5m2>(61439.996f) == 0x7b);
  CHECK(code_of<fp8_e5m2>(61440.0f) == 0x7c);                    // the tie above 57344 (odd) overflows
  CHECK(detail::f32_to_fp8_bits(61440.0f, true, true) == 0x7b);  // satfinite: the GPU keeps it finite
  CHECK(detail::f32_to_fp8_bits(std::numeric_limits<float>::infinity(), true, true) == 0x7b);
  CHECK(code_of<fp8_e4m3>(0x1p-10f) == 0x00);                    // half the smallest subnormal: to even (0)
  CHECK(code_of<fp8_e4m3>(0x1.8p-9f) == 0x02);                   // 1.5 subnormal steps: to even (2)
  CHECK(code_of<fp8_e4m3>(-0x1p-12f) == 0x80);                   // underflow keeps the sign
  CHECK(code_of<fp8_e4m3>(-std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  CHECK(code_of<fp8_e5m2>(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
  // f64 inputs round once (not through f32)
  CHECK(detail::f64_to_fp8_bits(1.0625 + 1e-12, false, true) == 0x39);  // just above the tie 1.0625 -> 1.125
  CHECK(detail::f64_to_fp8_bits(1.0625, false, true) == 0x38);          // the tie itself -> 1.0 (even)
}

TEST_CASE("fp8: the language's types, names, printer and hash", "[ir][fp8]") {
  CHECK(ir::type_of<fp8_e4m3>() == ir::Type::scalar(ir::Scalar::E4M3));
  CHECK(ir::type_of<const fp8_e5m2*>() == ir::Type::pointer(ir::Scalar::E5M2, true));
  CHECK(std::string(ir::scalar_name(ir::Scalar::E4M3)) == "e4m3");
  CHECK(std::string(ir::scalar_name(ir::Scalar::E5M2)) == "e5m2");
  CHECK(ir::scalar_bytes(ir::Scalar::E4M3) == 1);
  CHECK(ir::Type::scalar(ir::Scalar::E5M2).is_fp8());
  CHECK_FALSE(ir::Type::scalar(ir::Scalar::E5M2).is_float());
  CHECK_FALSE(ir::Type::scalar(ir::Scalar::E5M2).is_int());
  auto build = [](ir::Scalar s, float lit) {
    ir::KernelBuilder b("fp8_store");
    auto out = b.param("out", ir::Type::pointer(s, false));
    auto x = b.param<float>("x");
    out[0] = lit;  // a literal meets the element type: rounded once on the host
    out[1] = ir::cast(x, ir::Type::scalar(s));
    return b.build();
  };
  ir::Kernel k = build(ir::Scalar::E4M3, 0.3f);
  const std::string text = k.print();
  INFO(text);
  CHECK_THAT(text, Contains("const 0.3125 : e4m3"));  // 0.3 rounds to 0.3125 in e4m3
  CHECK_THAT(text, Contains("cast.rn"));
  CHECK_THAT(text, Contains(": e4m3"));
  CHECK(k.hash() == build(ir::Scalar::E4M3, 0.3f).hash());
  CHECK(k.hash() != build(ir::Scalar::E5M2, 0.3f).hash());
  CHECK(k.hash() != build(ir::Scalar::E4M3, 0.5f).hash());
}

TEST_CASE("fp8: a storage type; arithmetic is refused with a message that says to convert", "[ir][fp8][verifier]") {
  auto attempt = [](int what) {
    ir::KernelBuilder b("fp8_misuse");
    auto p = b.param<const fp8_e4m3*>("p");
    auto q = b.param<const fp8_e5m2*>("q");
    auto out = b.param<float*>("out");
    ir::Value x = p[0], y = p[1];
    ir::Value r;
    if (what == 0) r = x + y;
    if (what == 1) r = x * 2.0f;
    if (what == 2) r = -x;
    if (what == 3) r = ir::select(x < y, x, y);
    if (what == 4) r = ir::fma(x, y, x);
    if (what == 5) r = ir::sqrt(x);
    if (what == 6) r = ir::max(x, y);
    if (what == 7) r = ir::cast<int32_t>(x);
    if (what == 8) r = ir::cast<fp8_e4m3>(b.thread_idx_x());
    if (what == 9) r = ir::cast_sat<float>(x);
    if (what == 10) r = ir::cast<fp8_e4m3>(ir::Value(out[0]), ir::Rounding::Rz);
    if (what == 11) r = x + ir::Value(q[0]);
    if (what == 12) r = ir::cast<float>(x, ir::Rounding::Rn);
    (void)r;
    return b.build();
  };
  struct E { const char* op; const char* text; };
  const E expect[] = {{"add", "convert it first"}, {"mul", "convert it first"}, {"neg", "convert it first"},
                      {"lt", "convert it first"},  {"fma", "convert it first"}, {"sqrt", "convert it first"},
                      {"max", "convert it first"}, {"cast", "f16, bf16, f32 and f64 only"},
                      {"cast", "f16, bf16, f32 and f64 only"}, {"cast_sat", "use ir::cast"},
                      {"cast", "nearest even only"}, {"add", "different types"}, {"cast", "is exact"}};
  for (int w = 0; w < 13; ++w) {
    INFO("case " << w);
    UsageError e = test::usage_error_of([&] { attempt(w); });
    CHECK(e.op() == expect[w].op);
    CHECK_THAT(e.what(), Contains(expect[w].text));
    if (w < 7) CHECK_THAT(e.what(), Contains("e4m3"));
  }
  // what fp8 values may do: move (variables, select, shuffles), load, store, convert
  ir::KernelBuilder b("fp8_moves");
  auto p = b.param<const fp8_e4m3*>("p");
  auto out = b.param<fp8_e4m3*>("out");
  auto v = b.var<fp8_e4m3>(1.5f);
  ir::Value x = p[b.thread_idx_x()];
  b.if_(b.thread_idx_x() == 0u, [&] { v = x; });
  ir::Value s = ir::shfl_xor(ir::select(b.thread_idx_x() == 1u, x, ir::Value(v)), 1u);
  out[b.thread_idx_x()] = s;
  CHECK_NOTHROW(b.build());
}

namespace {

// Runs out = cast<to>(x) in the interpreter over `in` (host values of the source type).
template <class From, class To>
std::vector<To> run_cast(const std::vector<From>& in) {
  const ir::Kernel k = f8::cast_kernel(ir::ScalarOf<From>::value, ir::ScalarOf<To>::value);
  std::vector<To> out(in.size());
  std::memset(static_cast<void*>(out.data()), 0xa5, out.size() * sizeof(To));  // poisoned
  ir::interpret(k, {.grid = {uint32_t(in.size() + 127) / 128}, .block = {128}}, in, out, uint32_t(in.size()));
  return out;
}

template <class T>
std::vector<T> all_codes() {
  std::vector<T> v;
  for (int c = 0; c < 256; ++c) v.push_back(T::from_bits(uint8_t(c)));
  return v;
}

template <class F8>
void check_interp_formats() {
  const f8::Format& f = std::is_same_v<F8, fp8_e5m2> ? f8::kE5M2 : f8::kE4M3;
  // fp8 -> f16 / f32 / bf16 / f64 on every code
  const std::vector<F8> codes = all_codes<F8>();
  const std::vector<half> h = run_cast<F8, half>(codes);
  const std::vector<float> s = run_cast<F8, float>(codes);
  const std::vector<bfloat16> bf = run_cast<F8, bfloat16>(codes);
  const std::vector<double> d = run_cast<F8, double>(codes);
  for (int c = 0; c < 256; ++c) {
    INFO("code 0x" << std::hex << c);
    const double ref = f8::value(f, uint8_t(c));
    CHECK(h[c].bits == detail::fp8_bits_to_f16_bits(uint8_t(c), f.e5m2));
    if (std::isnan(ref)) {
      CHECK(h[c].bits == 0x7fff);
      CHECK((std::isnan(s[c]) && std::isnan(float(bf[c])) && std::isnan(d[c])));
      continue;
    }
    CHECK((double(s[c]) == ref && double(float(bf[c])) == ref && d[c] == ref && double(float(h[c])) == ref));
    CHECK(std::signbit(s[c]) == bool(c & 0x80));
  }
  // f32 / f64 / f16 / bf16 -> fp8 at every boundary: nearest even, satfinite, NaN 0x7f
  const std::vector<float> xs = f8::inputs(f, 2000);
  const std::vector<F8> from_f32 = run_cast<float, F8>(xs);
  std::vector<double> xd(xs.begin(), xs.end());
  xd.push_back(1.0625 + 1e-12);  // only the f64 path sees it above the tie
  const std::vector<F8> from_f64 = run_cast<double, F8>(xd);
  std::vector<half> xh;
  std::vector<bfloat16> xb;
  for (float x : xs) {
    xh.push_back(half(x));
    xb.push_back(bfloat16(x));
  }
  const std::vector<F8> from_f16 = run_cast<half, F8>(xh), from_bf16 = run_cast<bfloat16, F8>(xb);
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO(xs[i] << " (0x" << std::hex << bits(xs[i]) << ")");
    REQUIRE(int(from_f32[i].bits) == int(f8::encode(f, xs[i], true)));
    REQUIRE(int(from_f64[i].bits) == int(f8::encode(f, xs[i], true)));
    REQUIRE(int(from_f16[i].bits) == int(f8::encode(f, float(xh[i]), true)));
    REQUIRE(int(from_bf16[i].bits) == int(f8::encode(f, float(xb[i]), true)));
  }
  CHECK(int(from_f64.back().bits) == int(f8::encode(f, 1.0625 + 1e-12, true)));
}

}  // namespace

TEST_CASE("fp8 interpreter: conversions on every code and at every rounding boundary", "[ir][fp8][interp]") {
  check_interp_formats<fp8_e4m3>();
  check_interp_formats<fp8_e5m2>();
  // between the formats: through the exact f16, rounded once
  const std::vector<fp8_e5m2> e5 = run_cast<fp8_e4m3, fp8_e5m2>(all_codes<fp8_e4m3>());
  const std::vector<fp8_e4m3> e4 = run_cast<fp8_e5m2, fp8_e4m3>(all_codes<fp8_e5m2>());
  for (int c = 0; c < 256; ++c) {
    INFO("code 0x" << std::hex << c);
    CHECK(int(e5[c].bits) == int(f8::encode(f8::kE5M2, f8::value(f8::kE4M3, uint8_t(c)), true)));
    CHECK(int(e4[c].bits) == int(f8::encode(f8::kE4M3, f8::value(f8::kE5M2, uint8_t(c)), true)));
  }
}

TEST_CASE("fp8 interpreter: loads and stores of global and shared bytes, vectors, scalar parameters", "[ir][fp8][interp]") {
  ir::KernelBuilder b("fp8_moves");
  auto in = b.param<const fp8_e4m3*>("in");
  auto out = b.param<fp8_e4m3*>("out");
  auto wide = b.param<float*>("wide");
  auto one = b.param<fp8_e5m2>("one");
  auto tile = b.shared<fp8_e4m3>(256);
  ir::Value t = b.thread_idx_x();
  std::vector<ir::Value> four = ir::load_vec(in, t * 4u, 4);
  for (uint32_t j = 0; j < 4; ++j) tile[(t * 4u + j) ^ 1u] = four[j];  // neighbours swapped
  b.barrier();
  ir::Value x = tile[t * 4u], y = tile[t * 4u + 1u], z = tile[t * 4u + 2u], w = tile[t * 4u + 3u];
  ir::store_vec(out, t * 4u, {x, y, z, w});
  wide[t] = ir::cast<float>(one);
  ir::Kernel k = b.build();
  const std::vector<fp8_e4m3> codes = all_codes<fp8_e4m3>();
  std::vector<fp8_e4m3> o(256, fp8_e4m3::from_bits(0x5a));
  std::vector<float> wv(64, -1.0f);
  ir::interpret(k, {.grid = {1}, .block = {64}}, codes, o, wv, fp8_e5m2(-0.75f));
  for (int c = 0; c < 256; ++c) CHECK(int(o[c].bits) == (c ^ 1));
  for (float v : wv) CHECK(v == -0.75f);
  // a host value of the other format (or a plain integer) is refused for an fp8 parameter
  UsageError e = test::usage_error_of([&] { ir::interpret(k, {.grid = {1}, .block = {64}}, codes, o, wv, fp8_e4m3(1.0f)); });
  CHECK_THAT(e.what(), Contains("fp8_e4m3"));
  CHECK_THROWS_AS(ir::interpret(k, {.grid = {1}, .block = {64}}, codes, o, wv, 3u), UsageError);
}
