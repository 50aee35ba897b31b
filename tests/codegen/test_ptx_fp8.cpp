// Golden PTX for FP8: loads and stores of the 8-bit storage (every target), conversions
// through sm_89's packed cvt forms (refused on sm_80 with the reason), and wgmma's
// m64nNk32 e4m3 / e5m2 forms (both operands K-major, mixed formats), each assembled by
// nvJitLink; QGMMA in the SASS where cuobjdump is installed.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "wgmma_8bit_check.h"
#include "ptx_check.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;

TEST_CASE("fp8 golden: conversions use the packed cvt forms and take one half", "[codegen][golden][fp8]") {
  // to fp8: the value in the low half, +0 (code 0) in the high one
  CHECK_PTX_T(float, fp8_e4m3, ir::cast<fp8_e4m3>(a), "cvt.rn.satfinite.e4m3x2.f32 %rs0, 0f00000000, %f0");
  CHECK_PTX_T(float, fp8_e5m2, ir::cast<fp8_e5m2>(a), "cvt.rn.satfinite.e5m2x2.f32 %rs0, 0f00000000, %f0");
  CHECK_PTX_T(half, fp8_e4m3, ir::cast<fp8_e4m3>(a), "cvt.u32.u16 %r0, %h0");  // {x, +0}
  CHECK_PTX_T(half, fp8_e4m3, ir::cast<fp8_e4m3>(a), "cvt.rn.satfinite.e4m3x2.f16x2 %rs0, %r0");
  CHECK_PTX_T(bfloat16, fp8_e5m2, ir::cast<fp8_e5m2>(a), "cvt.rn.satfinite.e5m2x2.f32 %rs0, 0f00000000, %f0");
  CHECK_PTX_T(double, fp8_e4m3, ir::cast<fp8_e4m3>(a), "cvt.rz.f32.f64 %f0, %fd0");  // round to odd first
  CHECK_PTX_T(double, fp8_e4m3, ir::cast<fp8_e4m3>(a), "@%p0 or.b32 %r0, %r0, 1");
  CHECK_PTX_T(double, fp8_e4m3, ir::cast<fp8_e4m3>(a), "cvt.rn.satfinite.e4m3x2.f32 %rs0, 0f00000000, %f0");
  // from fp8: both bytes widen to f16x2, the low half is the value
  CHECK_PTX_T(fp8_e4m3, half, ir::cast<half>(a), "cvt.rn.f16x2.e4m3x2 %r0, %rs0");
  CHECK_PTX_T(fp8_e4m3, half, ir::cast<half>(a), "mov.b32 {%h2, %h1}, %r0");
  CHECK_PTX_T(fp8_e4m3, half, ir::cast<half>(a), "mov.b16 %h0, %h2");
  CHECK_PTX_T(fp8_e5m2, float, ir::cast<float>(a), "cvt.rn.f16x2.e5m2x2 %r0, %rs0");
  CHECK_PTX_T(fp8_e5m2, float, ir::cast<float>(a), "cvt.f32.f16 %f1, %h1");
  CHECK_PTX_T(fp8_e4m3, double, ir::cast<double>(a), "cvt.f64.f32 %fd0, %f0");
  CHECK_PTX_T(fp8_e4m3, bfloat16, ir::cast<bfloat16>(a), "cvt.rn.bf16.f32 %h0, %f0");
  CHECK_PTX_T(fp8_e4m3, fp8_e5m2, ir::cast<fp8_e5m2>(a), "cvt.u32.u16 %r1, %h1");
  CHECK_PTX_T(fp8_e4m3, fp8_e5m2, ir::cast<fp8_e5m2>(a), "cvt.rn.satfinite.e5m2x2.f16x2 %rs3, %r1");
  // the storage: u8 parameters, loads and stores; literals as their code
  CHECK_PTX_T(fp8_e4m3, fp8_e4m3, a, "ld.param.u8 %rs0, [g_param_0]");
  CHECK_PTX_T(fp8_e4m3, fp8_e4m3, a, "st.global.u8 [%rd3], %rs0");
  CHECK_PTX_T(fp8_e4m3, fp8_e4m3, ir::select(b.thread_idx_x() == 0u, a, bb), "selp.b16 %rs3, %rs0, %rs1, %p0");
  CHECK_PTX_T(fp8_e5m2, fp8_e5m2, b.constant(fp8_e5m2(-2.0f)), "mov.b16 %rs3, 0x00C0");
}

namespace {

// Every conversion to and from both formats, loads and stores of global and shared bytes.
ir::Kernel all_conversions() {
  ir::KernelBuilder b("fp8_all");
  auto p4 = b.param<const fp8_e4m3*>("p4");
  auto p5 = b.param<const fp8_e5m2*>("p5");
  auto f = b.param<float*>("f");
  auto o4 = b.param<fp8_e4m3*>("o4");
  auto o5 = b.param<fp8_e5m2*>("o5");
  auto tile = b.shared<fp8_e4m3>(64);
  ir::Value t = b.thread_idx_x();
  tile[t] = ir::Value(p4[t]);
  b.barrier();
  ir::Value x4 = tile[t ^ 1u], x5 = p5[t];
  ir::Value sum = ir::cast<float>(x4) + ir::cast<float>(x5) + ir::cast<float>(ir::cast<half>(x4)) +
                  ir::cast<float>(ir::cast<bfloat16>(x5)) + ir::cast<float>(ir::cast<double>(x4));
  f[t] = sum;
  ir::Value v = f[t + 64u];
  o4[t] = ir::cast<fp8_e4m3>(v);
  o5[t] = ir::cast<fp8_e5m2>(ir::cast<half>(v));
  o4[t + 64u] = ir::cast<fp8_e4m3>(ir::cast<double>(v));
  o5[t + 64u] = ir::cast<fp8_e5m2>(ir::cast<bfloat16>(v));
  o4[t + 128u] = ir::cast<fp8_e4m3>(x5);
  o5[t + 128u] = ir::cast<fp8_e5m2>(x4);
  std::vector<ir::Value> vec = ir::load_vec(p4, t * 4u, 4);
  ir::store_vec(o4, t * 4u + 256u, vec);
  return b.build();
}

ir::Kernel moves_only() {
  ir::KernelBuilder b("fp8_moves_only");
  auto p = b.param<const fp8_e5m2*>("p");
  auto o = b.param<fp8_e5m2*>("o");
  ir::Value t = b.thread_idx_x();
  std::vector<ir::Value> v = ir::load_vec(p, t * 2u, 2);
  ir::store_vec(o, t * 2u, {v[1], v[0]});
  o[t + 128u] = 1.0f;
  return b.build();
}

}  // namespace

TEST_CASE("fp8: conversions assemble for sm_89 and sm_90, loads and stores everywhere; sm_80 is refused", "[codegen][fp8][nvjitlink]") {
  ir::Kernel k = all_conversions();
  CHECK_FALSE(k.arch_specific());
  for (const char* arch : {"sm_89", "sm_90"}) {
    INFO(arch);
    const std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
    CHECK_THAT(ptx, Contains("ld.shared.u8") && Contains("st.shared.u8") && Contains("ld.global.v4.u8") &&
                        Contains("st.global.v4.u8"));
    CHECK(test::link_ptx(ptx, arch, k.name()).cubin.size() > 4);
  }
  UsageError e = test::usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_80", 9, 0}); });
  CHECK(e.op() == "cast");
  CHECK_THAT(e.what(), Contains("needs sm_89") && Contains("sm_80"));
  ir::Kernel m = moves_only();
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(arch);
    const std::string ptx = codegen::emit_ptx(m, {arch, 9, 0});
    CHECK_THAT(ptx, Contains("ld.global.v2.u8") && Contains("st.global.u8"));
    CHECK(test::link_ptx(ptx, arch, m.name()).cubin.size() > 4);
  }
}

TEST_CASE("fp8 golden: wgmma m64nNk32 e4m3 / e5m2 forms, mixed too, assemble for sm_90a (QGMMA)", "[codegen][golden][fp8][hopper]") {
  using ir::Scalar;
  struct Case { Scalar a, b; uint32_t n; const char* form; };
  const Case cases[] = {{Scalar::E4M3, Scalar::E4M3, 16, "m64n16k32.f32.e4m3.e4m3 {"},
                        {Scalar::E5M2, Scalar::E5M2, 64, "m64n64k32.f32.e5m2.e5m2 {"},
                        {Scalar::E4M3, Scalar::E5M2, 128, "m64n128k32.f32.e4m3.e5m2 {"},
                        {Scalar::E5M2, Scalar::E4M3, 256, "m64n256k32.f32.e5m2.e4m3 {"}};
  for (const Case& c : cases)  // no transpose operands
    test::check_wgmma_8bit_form(c.a, c.b, c.n, c.form, "}, %rd0, %rd1, %p0, 1, 1", "QGMMA");
  CHECK(test::wgmma_8bit_kernel(Scalar::E4M3, Scalar::E5M2, 16).hash() != test::wgmma_8bit_kernel(Scalar::E4M3, Scalar::E4M3, 16).hash());
}

TEST_CASE("fp8: wgmma refuses MN-major 8-bit operands and mixed non-fp8 types", "[ir][fp8][hopper][verifier]") {
  auto attempt = [](int what) {
    ir::KernelBuilder b("wg_bad");
    auto d = b.param<uint64_t>("d");
    auto acc = b.array<float>(8, 0.0f);
    b.wgmma_fence();
    if (what == 0) b.wgmma(acc, d, d, ir::Scalar::E4M3, true, false);
    if (what == 1) b.wgmma(acc, d, d, ir::Scalar::E5M2, false, true);
    if (what == 2) b.wgmma(acc, d, d, ir::Scalar::E4M3, ir::Scalar::F16);
    if (what == 3) b.wgmma(acc, d, d, ir::Scalar::F16, ir::Scalar::BF16);
    if (what == 4) b.wgmma(acc, d, d, ir::Scalar::S16);
    b.wgmma_commit_group();
    b.wgmma_wait_group(0);
    return b.build();
  };
  const char* expect[] = {"e4m3 operands are K-major only", "e5m2 operands are K-major only", "except e4m3 with e5m2",
                          "except e4m3 with e5m2", "e5m2, s8 or u8, not s16"};
  for (int w = 0; w < 5; ++w) {
    INFO("case " << w);
    UsageError e = test::usage_error_of([&] { attempt(w); });
    CHECK(e.op() == "wgmma");
    CHECK_THAT(e.what(), Contains(expect[w]));
  }
}
