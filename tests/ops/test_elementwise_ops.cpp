// The elementwise ops (maps): every op in f32, f16 and bf16 at 1, 3x17 and 67x1025
// elements (none a multiple of the vector width), 16-byte aligned and one element off,
// in place, against float64; outputs and guard elements poisoned first. [gpu]: a device or
// KAIO_INTERPRET=1; 8192x8192 and the decode shapes on a device only.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "kaio/ops/elementwise.h"
#include "ops_support.h"

using namespace kaio;
using namespace kaio::test::ops;

namespace {

constexpr float kAlpha = 0.75f, kBeta = -1.25f;

template <class T>
void call(const std::string& op, uint64_t out, uint64_t a, uint64_t b, size_t n) {
  if (op == "add") ops::add<T>(out, a, b, n);
  else if (op == "sub") ops::sub<T>(out, a, b, n);
  else if (op == "mul") ops::mul<T>(out, a, b, n);
  else if (op == "axpby") ops::axpby<T>(out, a, b, kAlpha, kBeta, n);
  else if (op == "relu") ops::relu<T>(out, a, n);
  else if (op == "silu") ops::silu<T>(out, a, n);
  else if (op == "gelu") ops::gelu<T>(out, a, n);
  else if (op == "gelu_tanh") ops::gelu_tanh<T>(out, a, n);
  else if (op == "exp") ops::exp<T>(out, a, n);
  else if (op == "silu_gate") ops::silu_gate<T>(out, a, b, n);
  else if (op == "gelu_gate") ops::gelu_gate<T>(out, a, b, n);
  else if (op == "gelu_gate_tanh") ops::gelu_gate_tanh<T>(out, a, b, n);
  else FAIL("unknown op " << op);
}

double silu_d(double x) { return x / (1 + std::exp(-x)); }
double gelu_d(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double tanh_inner(double x) { return std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x); }
double gelu_tanh_d(double x) { return 0.5 * x * (1 + std::tanh(tanh_inner(x))); }

// The float64 result and the bound on the error of the f32 computation (before the final
// rounding to T). u = 2^-24. add/sub/mul: one rounding. axpby: fma(alpha, x, beta * y),
// two. exp: the IR's exp is within 4 ulp (8u relative). silu: exp, add, div: 16u. gelu
// (erf): erf's absolute bound 4e-7 and the rounding of x / sqrt(2), scaled by x / 2, plus
// 16u. gelu_tanh: tanh within 4 ulp, the inner polynomial a few roundings: 8u relative
// plus x / 2 * (8u |inner| + 16u). Gates: the activation's bound times |gate|, plus one
// rounding of the product. form16: f16/bf16 data, whose activations use the forms of
// ops/math16.h: exp2/rcp .approx and, for gelu, an erfc fit with relative error 2^-16.4;
// before the final rounding they are within 2^-14 relative of the result (gelu: 2^-14 |x|,
// as 1 - q may cancel near x = 0), plus the roundings of |w| <= 4 log2 e * 5 in the exponent.
struct Ref {
  double r, tol;
};
Ref reference(const std::string& op, double a, double b, bool form16 = false) {
  const double u = kU32;
  auto act = [&](const std::string& f, double x) -> Ref {
    if (form16) {
      const double r = f == "silu" ? silu_d(x) : f == "gelu" ? gelu_d(x) : gelu_tanh_d(x);
      return {r, 0x1p-14 * (f == "gelu" ? std::fabs(x) : std::fabs(r))};
    }
    if (f == "silu") return {silu_d(x), 16 * u * std::fabs(silu_d(x))};
    if (f == "gelu") return {gelu_d(x), 16 * u * std::fabs(gelu_d(x)) + 0.5 * std::fabs(x) * (4e-7 + 2 * u * std::fabs(x))};
    return {gelu_tanh_d(x), 8 * u * std::fabs(gelu_tanh_d(x)) +
                                0.5 * std::fabs(x) * (8 * u * std::fabs(tanh_inner(x)) + 16 * u)};
  };
  if (op == "add") return {a + b, u * (std::fabs(a) + std::fabs(b))};
  if (op == "sub") return {a - b, u * (std::fabs(a) + std::fabs(b))};
  if (op == "mul") return {a * b, u * std::fabs(a * b)};
  if (op == "axpby") {
    double ax = kAlpha * a, by = kBeta * b;
    return {ax + by, 3 * u * (std::fabs(ax) + std::fabs(by))};
  }
  if (op == "relu") return {a < 0 ? 0.0 : a, 0};
  if (op == "exp") return {std::exp(a), (form16 ? 0x1p-18 : 10 * u) * std::exp(a)};
  if (op == "silu" || op == "gelu" || op == "gelu_tanh") return act(op, a);
  std::string f = op == "silu_gate" ? "silu" : op == "gelu_gate" ? "gelu" : "gelu_tanh";
  Ref x = act(f, a);
  return {x.r * b, x.tol * std::fabs(b) + u * std::fabs(x.r * b)};
}

// Runs `op` on n elements at `offset` elements from a 16-byte boundary and counts wrong
// results. in_place: out is the first input.
template <class T>
size_t run_case(const std::string& op, size_t n, size_t offset, bool in_place = false) {
  Slice<T> a(n, offset), b(n, offset), out(n, offset);
  const bool gate = op.find("_gate") != std::string::npos;
  std::vector<T> ha = random_vec<T>(n, -4, 4), hb = random_vec<T>(n, gate ? -2 : -4, gate ? 2 : 4);
  a.upload(ha);
  b.upload(hb);
  out.poison();
  // offset 0 takes the 16-byte vector path, offset 1 the single-element one.
  CHECK((a.address() % 16 == 0) == (offset == 0));
  Slice<T>& dst = in_place ? a : out;
  call<T>(op, dst.address(), a.address(), b.address(), n);
  std::vector<T> got = dst.download();
  const double uT = unit<T>();
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    Ref ref = reference(op, as_double(ha[i]), as_double(hb[i]), !std::is_same_v<T, float>);
    // f16/bf16: the f32 error, then one rounding to T (relative uT, or the subnormal
    // spacing near zero).
    double tol = std::is_same_v<T, float> ? ref.tol : ref.tol + uT * std::fabs(ref.r) * 1.0001 + tiny<T>();
    double g = as_double(got[i]);
    if (!(std::fabs(g - ref.r) <= tol)) {
      if (bad < 5) UNSCOPED_INFO(op << "[" << i << "](" << as_double(ha[i]) << ", " << as_double(hb[i]) << ") = " << g
                                    << ", expected " << ref.r << " +- " << tol);
      ++bad;
    }
  }
  CHECK(dst.guards_intact());
  return bad;
}

template <class T>
void call_rows(const std::string& op, ops::SOut<T> o, ops::SIn<T> a, ops::SIn<T> b, uint32_t rows, uint32_t cols) {
  if (op == "add") ops::add<T>(o, a, b, rows, cols);
  else if (op == "sub") ops::sub<T>(o, a, b, rows, cols);
  else if (op == "mul") ops::mul<T>(o, a, b, rows, cols);
  else if (op == "axpby") ops::axpby<T>(o, a, b, kAlpha, kBeta, rows, cols);
  else if (op == "relu") ops::relu<T>(o, a, rows, cols);
  else if (op == "silu") ops::silu<T>(o, a, rows, cols);
  else if (op == "gelu") ops::gelu<T>(o, a, rows, cols);
  else if (op == "gelu_tanh") ops::gelu_tanh<T>(o, a, rows, cols);
  else if (op == "exp") ops::exp<T>(o, a, rows, cols);
  else if (op == "silu_gate") ops::silu_gate<T>(o, a, b, rows, cols);
  else if (op == "gelu_gate") ops::gelu_gate<T>(o, a, b, rows, cols);
  else if (op == "gelu_gate_tanh") ops::gelu_gate_tanh<T>(o, a, b, rows, cols);
  else FAIL("unknown op " << op);
}

struct RowsShape {
  uint32_t rows, cols;
  uint64_t lda, ldb, ldo;
  size_t offset;
};

// The strided form: rows x cols of arrays with their own row strides; the padding between
// out's rows must keep its poison.
template <class T>
size_t run_rows_case(const std::string& op, const RowsShape& s) {
  auto span = [&](uint64_t ld) { return size_t(s.rows - 1) * ld + s.cols; };
  Slice<T> a(span(s.lda), s.offset), b(span(s.ldb), s.offset), out(span(s.ldo), s.offset);
  const bool gate = op.find("_gate") != std::string::npos;
  std::vector<T> ha = random_vec<T>(span(s.lda), -4, 4), hb = random_vec<T>(span(s.ldb), gate ? -2 : -4, gate ? 2 : 4);
  a.upload(ha);
  b.upload(hb);
  out.poison();
  call_rows<T>(op, {out.address(), s.ldo}, {a.address(), s.lda}, {b.address(), s.ldb}, s.rows, s.cols);
  std::vector<T> got = out.download();
  size_t bad = 0;
  for (uint32_t r = 0; r < s.rows; ++r)
    for (uint64_t c = 0; c < s.ldo && r * s.ldo + c < got.size(); ++c) {
      double g = as_double(got[r * s.ldo + c]);
      if (c >= s.cols) {  // padding: untouched
        bad += !std::isnan(g);
        continue;
      }
      Ref ref = reference(op, as_double(ha[r * s.lda + c]), as_double(hb[r * s.ldb + c]), !std::is_same_v<T, float>);
      double tol = std::is_same_v<T, float> ? ref.tol : ref.tol + unit<T>() * std::fabs(ref.r) * 1.0001 + tiny<T>();
      if (!(std::fabs(g - ref.r) <= tol)) {
        if (bad < 5) UNSCOPED_INFO(op << "[" << r << ", " << c << "] = " << g << ", expected " << ref.r << " +- " << tol);
        ++bad;
      }
    }
  CHECK(out.guards_intact());
  return bad;
}

const std::vector<std::string>& all_ops() {
  static const std::vector<std::string> v = ops::elementwise_op_names();
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("elementwise ops against float64: edge sizes, aligned and misaligned", "[gpu][ops][elementwise]",
                   float, kaio::half, kaio::bfloat16) {
  using T = TestType;
  REQUIRE(all_ops().size() == 12);
  for (const std::string& op : all_ops())
    for (size_t n : {size_t(1), size_t(3 * 17), size_t(67 * 1025)})
      for (size_t offset : {size_t(0), size_t(1)}) {
        INFO(op << " " << type_name<T>() << " n = " << n << " offset = " << offset);
        CHECK(run_case<T>(op, n, offset) == 0);
      }
}

TEMPLATE_TEST_CASE("elementwise ops on strided rows", "[gpu][ops][elementwise]", float, kaio::half, kaio::bfloat16) {
  using T = TestType;
  const std::vector<RowsShape> shapes = {
      {1, 1, 1, 1, 1, 0},            {3, 17, 20, 25, 17, 0},  // 17 columns, rows not 16-byte apart
      {67, 1025, 1032, 1040, 1048, 0},                         // rows 16-byte apart (vector path)
      {5, 33, 40, 48, 40, 1},                                  // one element off
  };
  for (const std::string& op : all_ops())
    for (const RowsShape& sh : shapes) {
      INFO(op << " " << type_name<T>() << " " << sh.rows << "x" << sh.cols << " ld " << sh.lda << "/" << sh.ldb << "/"
              << sh.ldo << " offset " << sh.offset);
      CHECK(run_rows_case<T>(op, sh) == 0);
    }
}

TEMPLATE_TEST_CASE("elementwise ops in place (out is the first input)", "[gpu][ops][elementwise]", float,
                   kaio::bfloat16) {
  using T = TestType;
  for (const std::string& op : {std::string("add"), std::string("silu_gate"), std::string("gelu")}) {
    INFO(op);
    CHECK(run_case<T>(op, 1000, 0, true) == 0);
    CHECK(run_case<T>(op, 1001, 1, true) == 0);
  }
}

TEMPLATE_TEST_CASE("elementwise ops pick the vector width from the pointers' alignment", "[ops][elementwise]", float,
                   kaio::half, kaio::bfloat16) {
  using T = TestType;
  const ops::detail::MapKernels& k = ops::elementwise_op("add");
  const ir::Scalar d = ir::ScalarOf<T>::value;
  const uint32_t widest = 16 / sizeof(T);
  const uint64_t base = 0x10000;
  std::vector<uint64_t> in = {base, base + 256};
  CHECK(k.config_for(d, base + 512, in).vec == widest);
  CHECK(k.config_for(d, base + 512 + sizeof(T), in).vec == 1);           // out one element off
  std::vector<uint64_t> in8 = {base + 8, base};
  CHECK(k.config_for(d, base + 512, in8).vec == 8 / sizeof(T));  // an 8-byte aligned input
  // The tile shape: kMapBlock threads, kMapUnroll vectors each; at least one block.
  ops::MapConfig c = k.config_for(d, base, in);
  CHECK(k.launch_shape(c, 1, nullptr).grid.x == 1);
  CHECK(k.launch_shape(c, size_t(widest) * ops::kMapBlock * ops::kMapUnroll * 3 + 1, nullptr).grid.x == 3);
}

TEST_CASE("elementwise ops: bad input is a UsageError naming the op and the argument, before any build",
          "[ops][elementwise]") {
  const uint64_t a = 0x10000, b = 0x20000, out = 0x30000;  // never dereferenced: every call fails its checks
  uint64_t builds = 0;
  for (jit::FamilyBase* f : ops::elementwise_families()) builds += f->builds();
  auto e = test::usage_error_of([&] { ops::add<float>(out, uint64_t{0}, b, 10); });
  CHECK(e.op() == "add");
  CHECK_THAT(e.what(), Catch::Contains("'a'") && Catch::Contains("null"));
  e = test::usage_error_of([&] { ops::silu_gate<kaio::bfloat16>(out, a, uint64_t{0}, 10); });
  CHECK(e.op() == "silu_gate");
  CHECK_THAT(e.what(), Catch::Contains("'gate'"));
  e = test::usage_error_of([&] { ops::relu<float>(uint64_t{0}, a, 10); });
  CHECK_THAT(e.what(), Catch::Contains("'out'"));
  e = test::usage_error_of([&] { ops::gelu<float>(out, a, 0); });
  CHECK(e.op() == "gelu");
  CHECK_THAT(e.what(), Catch::Contains("'n'"));
  e = test::usage_error_of([&] { ops::mul<float>(out, ops::In<float>(a, 5), b, 10); });
  CHECK_THAT(e.what(), Catch::Contains("'a' holds 5 elements") && Catch::Contains("needs 10"));
  e = test::usage_error_of([&] { ops::exp<float>(ops::Out<float>(out, 9), a, 10); });
  CHECK_THAT(e.what(), Catch::Contains("'out' holds 9"));
  e = test::usage_error_of([&] { ops::add<float>(out, a + 2, b, 10); });  // not aligned to its floats
  CHECK_THAT(e.what(), Catch::Contains("'a'") && Catch::Contains("not aligned"));
  e = test::usage_error_of([&] { ops::axpby<kaio::half>(out, a, b, 1.0f, 1.0f, size_t(1) << 41); });
  CHECK(e.op() == "axpby");
  std::vector<uint64_t> in = {a, b};
  std::vector<size_t> sizes = {ops::kUnknownSize, ops::kUnknownSize};
  e = test::usage_error_of([&] {
    ops::elementwise_op("add").launch(ir::Scalar::F64, out, ops::kUnknownSize, in, sizes, {}, 10, nullptr);
  });
  CHECK_THAT(e.what(), Catch::Contains("dtype f64 is not supported"));
  e = test::usage_error_of([&] { ops::add<float>({out, 16}, {a, 15}, {b, 16}, 4, 16); });
  CHECK(e.op() == "add");
  CHECK_THAT(e.what(), Catch::Contains("'a'") && Catch::Contains("row stride 15"));
  e = test::usage_error_of([&] { ops::relu<float>({out, 16}, {ops::In<float>(a, 60), 16}, 4, 16); });
  CHECK_THAT(e.what(), Catch::Contains("'x' holds 60") && Catch::Contains("needs 64"));
  e = test::usage_error_of([&] { ops::relu<float>({out, 16}, {a, 16}, 0, 16); });
  CHECK_THAT(e.what(), Catch::Contains("'rows'"));
  uint64_t after = 0;
  for (jit::FamilyBase* f : ops::elementwise_families()) after += f->builds();
  CHECK(after == builds);  // nothing was built (hence nothing launched)
}

TEST_CASE("elementwise ops at 8192x8192 and the decode shapes (device only)", "[gpu][ops][elementwise][large]") {
  if (!on_device()) {
    WARN("interpreted: the large shapes run on a device only (skipped)");
    return;
  }
  for (size_t n : {size_t(8192) * 8192, size_t(4096), size_t(16) * 4096, size_t(128) * 4096}) {
    for (const std::string& op : {std::string("add"), std::string("gelu"), std::string("silu_gate")}) {
      INFO(op << " n = " << n);
      CHECK(run_case<float>(op, n, 0) == 0);
      CHECK(run_case<kaio::bfloat16>(op, n, 0) == 0);
    }
  }
  CHECK(run_case<kaio::bfloat16>("axpby", size_t(8192) * 8192 + 5, 1) == 0);
}
