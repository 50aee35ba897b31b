// The CPU interpreter, op by op: integer, float, fma, math and conversions against exact or
// float64 references on random inputs, outputs poisoned first.
#include <catch2/catch.hpp>

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "interp_support.h"

using namespace kaio;
using namespace kaio::test::interp;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;


// ---------------- ops ----------------

TEST_CASE("interp: integer ops on every integer type, exact (wrap, clamped shifts)", "[interp]") {
  check_int_binary<int8_t>(Scalar::S8);
  check_int_binary<int16_t>(Scalar::S16);
  check_int_binary<int32_t>(Scalar::S32);
  check_int_binary<int64_t>(Scalar::S64);
  check_int_binary<uint8_t>(Scalar::U8);
  check_int_binary<uint16_t>(Scalar::U16);
  check_int_binary<uint32_t>(Scalar::U32);
  check_int_binary<uint64_t>(Scalar::U64);
}

TEST_CASE("interp: float ops correctly rounded on f16, bf16, f32, f64", "[interp]") {
  check_float_ops<kaio::half>(Scalar::F16);
  check_float_ops<kaio::bfloat16>(Scalar::BF16);
  check_float_ops<float>(Scalar::F32);
  check_float_ops<double>(Scalar::F64);
}

TEST_CASE("interp: fma rounds once, also on f16", "[interp]") {
  ir::KernelBuilder b("fma_h");
  auto a = b.param<const kaio::half*>("a");
  auto o = b.param<kaio::half*>("o");
  auto i = b.global_id_x();
  Value x = a[i * 3u];
  Value y = a[i * 3u + 1u];
  Value z = a[i * 3u + 2u];
  o[i] = ir::fma(x, y, z);
  ir::Kernel k = b.build();
  auto p2 = [](int e) { return std::ldexp(1.0f, e); };
  // (2^-11 + 2^-21) * (1 - 2^-10) + (1 + 2^-10) = 1 + 2^-10 + 2^-11 - 2^-31: just below the
  // tie, so 1 + 2^-10. Rounding through f32 first would make it a tie and give 1 + 2^-9.
  std::vector<float> triples = {p2(-11) + p2(-21), 1 - p2(-10), 1 + p2(-10), 3, 5, 7, -2.5f, 4, 0.125f};
  std::vector<float> expect = {1 + p2(-10), 22, -9.875f};
  std::vector<kaio::half> in;
  for (float f : triples) {
    in.push_back(kaio::half(f));
    REQUIRE(float(in.back()) == f);
  }
  std::vector<kaio::half> out(expect.size());
  ir::interpret(k, {.grid = {1}, .block = {uint32_t(expect.size())}}, in, out);
  for (size_t t = 0; t < expect.size(); ++t) CHECK(float(out[t]) == expect[t]);
}

TEST_CASE("interp: math within its bounds (f32 rounded from double)", "[interp]") {
  const size_t n = 2000;
  auto xs = random_doubles(n, -30, 30);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(xs[i]);
  struct Case {
    const char* name;
    std::function<Value(Value)> f;
    std::function<double(double)> ref;
    bool positive;
  };
  std::vector<Case> cases = {
      {"sqrt", [](Value v) { return ir::sqrt(v); }, [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", [](Value v) { return ir::rsqrt(v); }, [](double v) { return 1 / std::sqrt(v); }, true},
      {"exp", [](Value v) { return ir::exp(v); }, [](double v) { return std::exp(v); }, false},
      {"log", [](Value v) { return ir::log(v); }, [](double v) { return std::log(v); }, true},
      {"tanh", [](Value v) { return ir::tanh(v); }, [](double v) { return std::tanh(v); }, false},
      {"sin", [](Value v) { return ir::sin(v); }, [](double v) { return std::sin(v); }, false},
      {"cos", [](Value v) { return ir::cos(v); }, [](double v) { return std::cos(v); }, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::vector<float> in = x;
    if (c.positive)
      for (float& v : in) v = std::fabs(v) + 1e-3f;
    ir::Kernel k = unary_kernel(std::string("m_") + c.name, Scalar::F32, Scalar::F32, c.f);
    std::vector<float> out(n, NAN);
    ir::interpret(k, shape_for(n), in, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double r = c.ref(double(in[i]));
      double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(r), 1e-30)) - 23);
      bool sqrt_exact = std::string(c.name) == "sqrt";
      double bound = sqrt_exact ? 0.5 * ulp : ulp;  // sqrt correctly rounded; others <= 1 ulp
      if (!(std::fabs(double(out[i]) - r) <= bound)) {
        if (bad++ < 3) UNSCOPED_INFO(c.name << "(" << in[i] << ") = " << out[i] << ", want " << r);
      }
    }
    CHECK(bad == 0);
  }
  // f16 math rounds the f32 result once more; f64 sqrt is correctly rounded.
  ir::Kernel kh = unary_kernel("m_exp_h", Scalar::F16, Scalar::F16, [](Value v) { return ir::exp(v); });
  std::vector<kaio::half> hin, hout(200);
  for (int i = 0; i < 200; ++i) hin.push_back(kaio::half(float(i - 100) / 20.0f));
  ir::interpret(kh, shape_for(200), hin, hout, 200u);
  for (int i = 0; i < 200; ++i) CHECK(std::fabs(float(hout[i]) - std::exp(float(hin[i]))) <= std::exp(float(hin[i])) * 1e-3f);
  ir::Kernel kd = unary_kernel("m_sqrt_d", Scalar::F64, Scalar::F64, [](Value v) { return ir::sqrt(v); });
  std::vector<double> din = random_doubles(100, 0, 1e6), dout(100);
  ir::interpret(kd, shape_for(100), din, dout, 100u);
  for (int i = 0; i < 100; ++i) CHECK(dout[i] == std::sqrt(din[i]));
}

TEST_CASE("interp: float -> integer casts saturate, NaN as the device, each rounding", "[interp]") {
  std::vector<float> in = {1.5f, -1.5f, 2.5f, -2.5f, 0.49f, 1e10f, -1e10f, NAN, INFINITY, -INFINITY, 300.7f, -0.0f};
  const size_t n = in.size();
  struct R {
    ir::Rounding r;
    double (*f)(double);
  };
  for (R r : {R{ir::Rounding::Rz, std::trunc}, R{ir::Rounding::Rn, std::nearbyint}, R{ir::Rounding::Rm, std::floor},
              R{ir::Rounding::Rp, std::ceil}}) {
    auto check = [&]<class I>(Scalar s) {
      INFO(ir::scalar_name(s) << " rounding " << ir::rounding_name(r.r));
      ir::Kernel k = unary_kernel("f2i", Scalar::F32, s, [&](Value v) { return ir::cast(v, Type::scalar(s), r.r); });
      std::vector<I> out(n);
      poison(out);
      ir::interpret(k, shape_for(n), in, out, uint32_t(n));
      for (size_t i = 0; i < n; ++i) {
        double v = in[i];
        I want;
        if (std::isnan(v)) want = sizeof(I) == 8 ? static_cast<I>(uint64_t(1) << 63) : I(0);  // from f32, as the device
        else {
          double rv = r.f(v);
          if (rv <= double(std::numeric_limits<I>::min())) want = std::numeric_limits<I>::min();
          else if (rv >= std::ldexp(1.0, std::numeric_limits<I>::digits)) want = std::numeric_limits<I>::max();
          else want = static_cast<I>(rv);
        }
        CHECK(int64_t(out[i]) == int64_t(want));
      }
    };
    check.template operator()<int8_t>(Scalar::S8);
    check.template operator()<uint8_t>(Scalar::U8);
    check.template operator()<int16_t>(Scalar::S16);
    check.template operator()<int32_t>(Scalar::S32);
    check.template operator()<uint32_t>(Scalar::U32);
    check.template operator()<int64_t>(Scalar::S64);
  }
}

TEST_CASE("interp: conversions between floats and from integers round by their mode", "[interp]") {
  // f32 -> f16 / bf16, rn and rz
  std::vector<float> f = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -12), -1.0f - 3 * std::ldexp(1.0f, -12),
                          70000.0f, -70000.0f, 1e-8f, 3.14159f, NAN};
  const size_t n = f.size();
  for (ir::Rounding r : {ir::Rounding::Rn, ir::Rounding::Rz}) {
    ir::Kernel kh = unary_kernel("f2h", Scalar::F32, Scalar::F16, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F16), r); });
    ir::Kernel kb = unary_kernel("f2b", Scalar::F32, Scalar::BF16, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::BF16), r); });
    std::vector<kaio::half> h(n);
    std::vector<kaio::bfloat16> bf(n);
    ir::interpret(kh, shape_for(n), f, h, uint32_t(n));
    ir::interpret(kb, shape_for(n), f, bf, uint32_t(n));
    for (size_t i = 0; i < n; ++i) {
      INFO("x = " << f[i] << " rounding " << ir::rounding_name(r));
      if (std::isnan(f[i])) {
        CHECK(std::isnan(float(h[i])));
        CHECK(std::isnan(float(bf[i])));
        continue;
      }
      if (r == ir::Rounding::Rn) {
        CHECK(h[i].bits == kaio::half(f[i]).bits);
        CHECK(bf[i].bits == kaio::bfloat16(f[i]).bits);
      } else {
        // rz: the largest magnitude not above |x|, finite
        CHECK(std::fabs(float(h[i])) <= std::fabs(f[i]));
        CHECK(std::isfinite(float(h[i])));
        kaio::half up = kaio::half::from_bits(uint16_t(h[i].bits + 1));
        CHECK((std::fabs(float(up)) > std::fabs(f[i]) || (h[i].bits & 0x7fff) == 0x7bff));
        CHECK(bf[i].bits == uint16_t(kaio::detail::f32_bits(f[i]) >> 16));
      }
    }
  }
  // f64 -> f32 with rm / rp brackets the value; s64 -> f32 rn is nearest
  std::vector<double> d = {0.1, -0.1, 1.0 / 3, 1e300, -1e-300, 16777217.0};
  for (ir::Rounding r : {ir::Rounding::Rm, ir::Rounding::Rp, ir::Rounding::Rz, ir::Rounding::Rn}) {
    ir::Kernel k = unary_kernel("d2f", Scalar::F64, Scalar::F32, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F32), r); });
    std::vector<float> out(d.size());
    ir::interpret(k, shape_for(d.size()), d, out, uint32_t(d.size()));
    for (size_t i = 0; i < d.size(); ++i) {
      INFO("x = " << d[i] << " rounding " << ir::rounding_name(r));
      if (r == ir::Rounding::Rm) CHECK(double(out[i]) <= d[i]);
      if (r == ir::Rounding::Rp) CHECK(double(out[i]) >= d[i]);
      if (r == ir::Rounding::Rz) CHECK(std::fabs(double(out[i])) <= std::fabs(d[i]));
      if (r == ir::Rounding::Rn) CHECK(out[i] == static_cast<float>(d[i]));
      float next = std::nextafter(out[i], r == ir::Rounding::Rm ? INFINITY : -INFINITY);
      if (r == ir::Rounding::Rm) CHECK((double(next) > d[i] || std::isinf(next)));
      if (r == ir::Rounding::Rp) CHECK((double(next) < d[i] || std::isinf(next)));
    }
  }
  std::vector<int64_t> big = {(int64_t(1) << 40) + 1, -((int64_t(1) << 53) + 1), std::numeric_limits<int64_t>::max(), 7};
  for (ir::Rounding r : {ir::Rounding::Rm, ir::Rounding::Rp}) {
    ir::Kernel k = unary_kernel("l2f", Scalar::S64, Scalar::F32, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F32), r); });
    std::vector<float> out(big.size());
    ir::interpret(k, shape_for(big.size()), big, out, uint32_t(big.size()));
    for (size_t i = 0; i < big.size(); ++i) {
      long double x = (long double)big[i];
      if (r == ir::Rounding::Rm) CHECK((long double)out[i] <= x);
      else CHECK((long double)out[i] >= x);
      CHECK(std::fabs((long double)out[i] - x) <= std::fabs(x) * std::ldexp(1.0L, -23));
    }
  }
  // integer <-> integer and pred
  std::vector<int16_t> s16 = {-1, 300, -129, 127, 0};
  ir::Kernel k8 = unary_kernel("s16tou8", Scalar::S16, Scalar::U8, [](Value v) { return ir::cast<uint8_t>(v); });
  ir::Kernel k64 = unary_kernel("s16tou64", Scalar::S16, Scalar::U64, [](Value v) { return ir::cast<uint64_t>(v); });
  ir::Kernel kp = unary_kernel("s16top", Scalar::S16, Scalar::F32, [](Value v) { return ir::cast<float>(ir::cast<bool>(v)); });
  std::vector<uint8_t> o8(5);
  std::vector<uint64_t> o64(5);
  std::vector<float> op(5);
  ir::interpret(k8, shape_for(5), s16, o8, 5u);
  ir::interpret(k64, shape_for(5), s16, o64, 5u);
  ir::interpret(kp, shape_for(5), s16, op, 5u);
  CHECK(o8 == std::vector<uint8_t>{255, 44, 127, 127, 0});
  CHECK(o64 == std::vector<uint64_t>{~uint64_t(0), 300, uint64_t(-129), 127, 0});
  CHECK(op == std::vector<float>{1, 1, 1, 1, 0});
}

