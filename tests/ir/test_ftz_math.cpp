// rcp_ftz and exp2_ftz: the opt-in flush-to-zero approximations (rcp.approx.ftz.f32,
// ex2.approx.ftz.f32). Their PTX in either math mode, the plain rcp / exp2 left as they were,
// and the interpreter's flush of subnormal operands and results (f32 and bf16), against rcp
// and exp2, which keep subnormals.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/kaio.h"
#include "../support.h"

using namespace kaio;
using ir::Value;

namespace {

ir::Kernel unary(const char* name, ir::Scalar s, Value (*f)(Value), bool fast = false) {
  ir::KernelBuilder b(name);
  auto a = b.param("a", ir::Type::pointer(s, true));
  auto o = b.param("out", ir::Type::pointer(s, false));
  auto n = b.param<uint32_t>("n");
  if (fast) b.fast_math();
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = a[i];
    o[i] = f(x);
  });
  return b.build();
}

Value rcp_ftz(Value x) { return ir::rcp_ftz(x); }
Value exp2_ftz(Value x) { return ir::exp2_ftz(x); }
Value rcp(Value x) { return ir::rcp(x); }
Value exp2(Value x) { return ir::exp2(x); }

std::vector<float> run_f32(const ir::Kernel& k, const std::vector<float>& in) {
  std::vector<float> out(in.size(), 12345.0f);
  ir::interpret(k, {.grid = {1}, .block = {64}}, in, out, uint32_t(in.size()));
  return out;
}

bool same(float a, float b) {  // bit-identical, so that -0 differs from +0; any NaN matches NaN
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

}  // namespace

TEST_CASE("ftz math: rcp_ftz and exp2_ftz emit the .ftz forms; rcp and exp2 keep theirs", "[ir][codegen][ftz]") {
  for (bool fast : {false, true}) {
    INFO("fast_math " << fast);
    std::string p = codegen::emit_ptx(unary("f_rcp_ftz", ir::Scalar::F32, rcp_ftz, fast), {"sm_90", 9, 0});
    CHECK_THAT(p, Catch::Contains("rcp.approx.ftz.f32"));
    p = codegen::emit_ptx(unary("f_ex2_ftz", ir::Scalar::BF16, exp2_ftz, fast), {"sm_90", 9, 0});
    CHECK_THAT(p, Catch::Contains("ex2.approx.ftz.f32"));
    p = codegen::emit_ptx(unary("f_rcp", ir::Scalar::F32, rcp, fast), {"sm_90", 9, 0});
    CHECK_THAT(p, Catch::Contains(fast ? "rcp.approx.f32" : "rcp.rn.f32"));
    CHECK_THAT(p, !Catch::Contains(".ftz"));
    p = codegen::emit_ptx(unary("f_ex2", ir::Scalar::F32, exp2, fast), {"sm_90", 9, 0});
    CHECK_THAT(p, Catch::Contains("ex2.approx.f32"));
    CHECK_THAT(p, !Catch::Contains(".ftz"));
  }
  ir::Kernel k = unary("f_print", ir::Scalar::F32, rcp_ftz);
  CHECK_THAT(k.print(), Catch::Contains("rcp_ftz"));
  CHECK_THAT(unary("f_print2", ir::Scalar::F32, exp2_ftz).print(), Catch::Contains("exp2_ftz"));
  // A different op: a different kernel hash from rcp's.
  CHECK(unary("same", ir::Scalar::F32, rcp_ftz).hash() != unary("same", ir::Scalar::F32, rcp).hash());
  CHECK(unary("same", ir::Scalar::F32, exp2_ftz).hash() != unary("same", ir::Scalar::F32, exp2).hash());
  // f16/bf16/f32 only, as exp2.
  ir::KernelBuilder b("f_f64");
  auto d = b.param<const double*>("d");
  Value v = d[0];
  CHECK_THROWS_AS(ir::rcp_ftz(v), UsageError);
}

TEST_CASE("ftz math: the interpreter flushes subnormal operands and results to signed zeros", "[ir][interp][ftz]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = 0x1p-140f, maxsub = 0x1.fffffcp-127f, minnorm = 0x1p-126f;
  SECTION("rcp_ftz, f32") {
    //                       x         rcp_ftz(x)       rcp(x) (keeps subnormals)
    const std::vector<std::array<float, 3>> cases = {
        {3.0f, 1.0f / 3.0f, 1.0f / 3.0f},
        {-0.25f, -4.0f, -4.0f},
        {sub, inf, inf},                      // 2^140 overflows either way
        {maxsub, inf, 0x1.000002p126f},       // the subnormal operand is a zero: +inf
        {-maxsub, -inf, -0x1.000002p126f},
        {minnorm, 0x1p126f, 0x1p126f},        // the smallest normal is not flushed
        {0x1p126f, minnorm, minnorm},         // result exactly 2^-126: normal
        {0x1p127f, 0.0f, 0x1p-127f},          // subnormal result flushed
        {-0x1.8p126f, -0.0f, -1.0f / 0x1.8p126f},
        {inf, 0.0f, 0.0f},
        {-0.0f, -inf, -inf},
        {nan, nan, nan},
    };
    std::vector<float> in;
    for (auto& c : cases) in.push_back(c[0]);
    std::vector<float> got = run_f32(unary("i_rcp_ftz", ir::Scalar::F32, rcp_ftz), in);
    std::vector<float> plain = run_f32(unary("i_rcp", ir::Scalar::F32, rcp), in);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO("x = " << cases[i][0] << ": rcp_ftz " << got[i] << ", rcp " << plain[i]);
      CHECK(same(got[i], cases[i][1]));
      CHECK(same(plain[i], cases[i][2]));
    }
  }
  SECTION("exp2_ftz, f32") {
    const std::vector<std::array<float, 3>> cases = {
        {3.0f, 8.0f, 8.0f},
        {-1.5f, float(std::exp2(-1.5)), float(std::exp2(-1.5))},
        {-126.0f, minnorm, minnorm},
        {-126.5f, 0.0f, float(std::exp2(-126.5))},  // subnormal result flushed
        {-140.0f, 0.0f, 0x1p-140f},
        {-150.0f, 0.0f, 0.0f},
        {sub, 1.0f, 1.0f},
        {-maxsub, 1.0f, 1.0f},
        {-inf, 0.0f, 0.0f},
        {inf, inf, inf},
        {200.0f, inf, inf},
        {nan, nan, nan},
    };
    std::vector<float> in;
    for (auto& c : cases) in.push_back(c[0]);
    std::vector<float> got = run_f32(unary("i_ex2_ftz", ir::Scalar::F32, exp2_ftz), in);
    std::vector<float> plain = run_f32(unary("i_ex2", ir::Scalar::F32, exp2), in);
    for (size_t i = 0; i < cases.size(); ++i) {
      INFO("x = " << cases[i][0] << ": exp2_ftz " << got[i] << ", exp2 " << plain[i]);
      CHECK(same(got[i], cases[i][1]));
      CHECK(same(plain[i], cases[i][2]));
    }
  }
  SECTION("bf16: a bf16 subnormal is an f32 subnormal; bf16 results below 2^-126 flush too") {
    auto bf = [](float v) { return kaio::bfloat16(v); };
    std::vector<kaio::bfloat16> in = {bf(-130.0f), bf(-126.0f), bf(2.0f), kaio::bfloat16::from_bits(0x0001),
                                      kaio::bfloat16::from_bits(0x8040), bf(0x1p127f)};
    auto run = [&](Value (*f)(Value), const char* name) {
      std::vector<kaio::bfloat16> out(in.size(), bf(7.0f));
      ir::interpret(unary(name, ir::Scalar::BF16, f), {.grid = {1}, .block = {64}}, in, out, uint32_t(in.size()));
      return out;
    };
    std::vector<kaio::bfloat16> e = run(exp2_ftz, "b_ex2_ftz"), ep = run(exp2, "b_ex2");
    CHECK(e[0].bits == 0x0000);             // 2^-130 flushed
    CHECK(ep[0].bits == 0x0008);            // exp2 keeps the bf16 subnormal 2^-130
    CHECK(float(e[1]) == minnorm);
    CHECK(float(e[2]) == 4.0f);
    CHECK(float(e[3]) == 1.0f);             // 2^(subnormal) = 1
    std::vector<kaio::bfloat16> r = run(rcp_ftz, "b_rcp_ftz"), rp = run(rcp, "b_rcp");
    CHECK(r[3].bits == 0x7f80);             // 1 / (+0 after the flush) = +inf
    CHECK(r[4].bits == 0xff80);             // -2^-127 (subnormal) -> -0 -> -inf
    CHECK(float(rp[4]) == -0x1p127f);       // rcp keeps it: -2^127
    CHECK(r[5].bits == 0x0000);             // 1 / 2^127 = 2^-127 flushed
    CHECK(rp[5].bits == 0x0040);            // rcp: the bf16 subnormal 2^-127
    CHECK(float(r[2]) == 0.5f);
  }
}
