// One-line PTX goldens per instruction family (asmjit / LLVM lit style). Parameters a, b,
// c load into the first three registers of their class; the result takes the next one.
#include <catch2/catch.hpp>

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "../kernels.h"
#include "ptx_check.h"

using namespace kaio;
using kaio::half;

TEST_CASE("ptx: integer and float arithmetic", "[codegen][golden]") {
  CHECK_PTX(int32_t, a + bb, "add.s32 %r3, %r0, %r1");
  CHECK_PTX(uint32_t, a - bb, "sub.u32 %r3, %r0, %r1");
  CHECK_PTX(uint32_t, a * bb, "mul.lo.u32 %r3, %r0, %r1");
  CHECK_PTX(int32_t, a / bb, "div.s32 %r3, %r0, %r1");
  CHECK_PTX(int32_t, a % bb, "rem.s32 %r3, %r0, %r1");
  CHECK_PTX(float, a * bb, "mul.f32 %f3, %f0, %f1");
  CHECK_PTX(float, a / bb, "div.rn.f32 %f3, %f0, %f1");
  CHECK_PTX(double, a - bb, "sub.f64 %fd3, %fd0, %fd1");
  CHECK_PTX(float, ir::min(a, bb), "min.f32 %f3, %f0, %f1");
  CHECK_PTX(int64_t, ir::max(a, bb), "max.s64 %rd5, %rd0, %rd1");
  CHECK_PTX(double, -a, "neg.f64 %fd3, %fd0");
  CHECK_PTX(int32_t, ir::abs(a), "abs.s32 %r3, %r0");
  CHECK_PTX(float, ir::fma(a, bb, c), "fma.rn.f32 %f3, %f0, %f1, %f2");
  CHECK_PTX(double, ir::fma(a, bb, c), "fma.rn.f64 %fd3, %fd0, %fd1, %fd2");
  CHECK_PTX(int32_t, ir::dp4a(a, bb, c), "dp4a.s32.s32 %r3, %r0, %r1, %r2");
}

TEST_CASE("ptx: bitwise and shifts", "[codegen][golden]") {
  CHECK_PTX(uint32_t, a & bb, "and.b32 %r3, %r0, %r1");
  CHECK_PTX(uint64_t, a ^ bb, "xor.b64 %rd5, %rd0, %rd1");
  CHECK_PTX(int32_t, ~a, "not.b32 %r3, %r0");
  CHECK_PTX(uint32_t, a << bb, "shl.b32 %r3, %r0, %r1");
  CHECK_PTX(int32_t, a >> bb, "shr.s32 %r3, %r0, %r1");
  CHECK_PTX(uint32_t, a >> bb, "shr.u32 %r3, %r0, %r1");
}

TEST_CASE("ptx: small integers compute in 16 bits and renormalize", "[codegen][golden]") {
  CHECK_PTX(int8_t, a + bb, "add.s16 %rs3, %rs0, %rs1");
  CHECK_PTX(int8_t, a + bb, "cvt.s16.s8 %rs3, %rs3");
  CHECK_PTX(uint8_t, a * bb, "cvt.u16.u8 %rs3, %rs3");
  CHECK_PTX(int16_t, a - bb, "sub.s16 %rs3, %rs0, %rs1");
}

TEST_CASE("ptx: half types use native instructions, else f32 rounded once", "[codegen][golden]") {
  CHECK_PTX(half, a + bb, "add.rn.f16 %h3, %h0, %h1");
  CHECK_PTX(half, ir::min(a, bb), "min.f16 %h3, %h0, %h1");
  CHECK_PTX(half, -a, "neg.f16 %h3, %h0");
  CHECK_PTX(half, ir::fma(a, bb, c), "fma.rn.f16 %h3, %h0, %h1, %h2");
  CHECK_PTX(bfloat16, a * bb, "mul.rn.bf16 %h3, %h0, %h1");
  // Division goes through f32.
  CHECK_PTX(half, a / bb, "cvt.f32.f16 %f0, %h0");
  CHECK_PTX(half, a / bb, "div.rn.f32 %f2, %f0, %f1");
  CHECK_PTX(half, a / bb, "cvt.rn.f16.f32 %h3, %f2");
  CHECK_PTX(bfloat16, a / bb, "shl.b32 %r0, %r0, 16");
  // bf16 add before sm_90 is one fma with 1.0.
  std::string ptx = test::ptx_of(ir::type_of<bfloat16>(), ir::type_of<bfloat16>(),
                                 [](auto&, auto a, auto bb, auto) -> ir::Value { return a + bb; }, "sm_80");
  CHECK(test::has_line(ptx, "mov.b16 %h4, 0x3F80"));
  CHECK(test::has_line(ptx, "fma.rn.bf16 %h3, %h0, %h4, %h1"));
}

TEST_CASE("ptx: named barriers: aligned, arrive, unaligned", "[codegen][golden]") {
  ir::KernelBuilder b("named");
  b.barrier(1, 64);
  b.barrier_arrive(2, 128);
  b.barrier_unaligned(3, 96);
  std::string ptx = codegen::emit_ptx(b.build(), {"sm_80", 8, 0});
  INFO(ptx);
  CHECK(test::has_line(ptx, "bar.sync 1, 64"));
  CHECK(test::has_line(ptx, "bar.arrive 2, 128"));
  CHECK(test::has_line(ptx, "barrier.sync 3, 96"));  // no .aligned: warps may come from different instructions
}

TEST_CASE("ptx: shared memory, barriers, fences, warp ops, atomics, vectors", "[codegen][golden]") {
  ir::KernelBuilder b("par");
  auto g = b.param<uint32_t*>("g");
  auto f = b.param<const float*>("f");
  auto s = b.shared<uint32_t>(128);
  auto l = b.lane_id();
  s[l] = l;
  b.barrier();
  b.fence(ir::FenceScope::Gpu);
  ir::Value v = s[l];
  auto x = ir::shfl_down(v, 1u, 16);
  auto bal = ir::ballot(x > 3u);
  auto any = ir::vote_any(x > 3u);
  auto old = ir::atomic_add(g, 0, ir::select(any, bal, 0u));
  auto sm = ir::atomic_max(s, 1, old);
  auto f4 = ir::load_vec(f, 4, 4, ir::CacheHint::ReadOnly);
  ir::store(g, 2, ir::cast<uint32_t>(f4[3]) + sm, ir::CacheHint::Streaming);
  std::string ptx = codegen::emit_ptx(b.build(), {"sm_90", 9, 0});
  INFO(ptx);
  CHECK(ptx.find("\t.shared .align 16 .b8 kaio_smem_2[512];\n") != std::string::npos);
  CHECK(test::has_line(ptx, "mov.u32 %r0, kaio_smem_2"));
  CHECK(test::has_line(ptx, "mov.u32 %r1, %laneid"));
  CHECK(test::has_line(ptx, "mad.lo.u32 %r2, %r1, 4, %r0"));
  CHECK(test::has_line(ptx, "st.shared.u32 [%r2], %r1"));
  CHECK(test::has_line(ptx, "bar.sync 0"));
  CHECK(test::has_line(ptx, "membar.gl"));
  CHECK(test::has_line(ptx, "shfl.sync.down.b32 %r6, %r4, %r5, 4127, 4294967295"));
  CHECK(test::has_line(ptx, "vote.sync.ballot.b32 %r8, %p0, 4294967295"));
  CHECK(test::has_line(ptx, "vote.sync.any.pred %p2, %p1, 4294967295"));
  CHECK(test::has_line(ptx, "atom.global.add.u32 %r13, [%rd5], %r11"));
  CHECK(test::has_line(ptx, "atom.shared.max.u32 %r16, [%r15], %r13"));
  CHECK(test::has_line(ptx, "ld.global.nc.v4.f32 {%f0, %f1, %f2, %f3}, [%rd7]"));
  CHECK(test::has_line(ptx, "st.global.cs.u32 [%rd9], %r19"));
}

TEST_CASE("ptx: launch bounds, comments, annotations, fast math", "[codegen][golden]") {
  ir::KernelBuilder b("attrs");
  auto x = b.param<float*>("x");
  b.launch_bounds(256, 2);
  b.fast_math();
  b.comment("scale by e");
  ir::Value v = x[0];
  x[0] = ir::exp(v) / v;
  ir::Kernel k = b.build();
  std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  INFO(ptx);
  CHECK(ptx.find(")\n.maxntid 256, 1, 1\n.minnctapersm 2\n{") != std::string::npos);
  CHECK(ptx.find("\t// scale by e\n") != std::string::npos);
  CHECK(test::has_line(ptx, "ex2.approx.ftz.f32 %f3, %f2"));
  CHECK(test::has_line(ptx, "div.approx.f32 %f4, %f1, %f0"));
  std::string annotated = codegen::emit_ptx(k, {"sm_90", 9, 0, true});
  CHECK(annotated.find("\t// %3 = exp %2 : f32\n") != std::string::npos);
}

namespace {
ir::Value swap_halves(ir::Value a, ir::Value bb) {  // one statement each: a fixed order
  ir::Value h = ir::unpack_hi(a);
  ir::Value l = ir::unpack_lo(bb);
  return ir::pack2(h, l);
}
}  // namespace

TEST_CASE("ptx: packed half pairs", "[codegen][golden]") {
  CHECK_PTX(kaio::half2, a + bb, "add.rn.f16x2 %r3, %r0, %r1");
  CHECK_PTX(kaio::half2, ir::fma(a, bb, c), "fma.rn.f16x2 %r3, %r0, %r1, %r2");
  CHECK_PTX(kaio::half2, a * 2.0f, "mov.b32 %r3, 0x40004000");
  CHECK_PTX(kaio::bfloat162, ir::max(a, bb), "max.bf16x2 %r3, %r0, %r1");
  CHECK_PTX(kaio::bfloat162, -a, "neg.bf16x2 %r3, %r0");
  CHECK_PTX(kaio::half2, swap_halves(a, bb), "mov.b32 {%h0, %h1}, %r0");
  CHECK_PTX(kaio::half2, swap_halves(a, bb), "mov.b32 {%h3, %h2}, %r1");
  CHECK_PTX(kaio::half2, swap_halves(a, bb), "mov.b32 %r3, {%h1, %h3}");
  std::string ptx = test::ptx_of(ir::type_of<kaio::bfloat162>(), ir::type_of<kaio::bfloat162>(),
                                 [](auto&, auto a, auto bb, auto) -> ir::Value { return a * bb; }, "sm_80");
  CHECK(test::has_line(ptx, "fma.rn.bf16x2 %r3, %r0, %r1, %r4"));
  // Packed atomics: f16x2 on sm_80 and sm_90, bf16x2 from sm_90.
  ir::Kernel k = test::packed_kernel(ir::Scalar::BF16x2, true);
  CHECK_NOTHROW(codegen::emit_ptx(k, {"sm_90", 9, 0}));
  CHECK(codegen::emit_ptx(k, {"sm_90", 9, 0}).find("atom.global.add.noftz.bf16x2") != std::string::npos);
  CHECK_THROWS_AS(codegen::emit_ptx(k, {"sm_80", 9, 0}), UsageError);
  CHECK(codegen::emit_ptx(test::packed_kernel(ir::Scalar::F16x2, true), {"sm_80", 9, 0}).find("atom.shared.add.noftz.f16x2") !=
        std::string::npos);
}

TEST_CASE("ptx: more math and saturating conversions", "[codegen][golden]") {
  CHECK_PTX(float, ir::floor(a), "cvt.rmi.f32.f32 %f4, %f0");
  CHECK_PTX(float, ir::rint(a), "cvt.rni.f32.f32 %f4, %f0");
  CHECK_PTX(float, ir::rcp(a), "rcp.rn.f32 %f4, %f0");
  CHECK_PTX(float, ir::rcp_ftz(a), "rcp.approx.ftz.f32 %f4, %f0");
  CHECK_PTX(float, ir::exp2_ftz(a), "ex2.approx.ftz.f32 %f4, %f0");
  CHECK_PTX(double, ir::ceil(a), "cvt.rpi.f64.f64 %fd3, %fd0");
  CHECK_PTX(float, ir::copysign(a, bb), "copysign.f32 %f4, %f1, %f0");
  CHECK_PTX(float, ir::select(ir::isnan(a), a, bb), "testp.notanumber.f32 %p0, %f0");
  CHECK_PTX_T(int32_t, int8_t, ir::cast_sat<int8_t>(a), "cvt.sat.s8.s32 %rs0, %r0");
  CHECK_PTX(float, ir::cast_sat<float>(a), "max.f32 %f3, %f3, 0f00000000");
  CHECK_PTX(float, ir::cast_sat<float>(a), "min.f32 %f3, %f3, 0f3F800000");
}

TEST_CASE("ptx: comparisons and select", "[codegen][golden]") {
  CHECK_PTX(float, ir::select(a < bb, a, c), "setp.lt.f32 %p0, %f0, %f1");
  CHECK_PTX(float, ir::select(a < bb, a, c), "selp.f32 %f3, %f0, %f2, %p0");
  CHECK_PTX(float, ir::select(a != bb, a, c), "setp.neu.f32 %p0, %f0, %f1");
  CHECK_PTX(uint32_t, ir::select(a >= bb, a, c), "setp.ge.u32 %p0, %r0, %r1");
  CHECK_PTX(int64_t, ir::select(a == bb, a, c), "setp.eq.s64 %p0, %rd0, %rd1");
}

TEST_CASE("ptx: math", "[codegen][golden]") {
  CHECK_PTX(float, ir::sqrt(a), "sqrt.rn.f32 %f4, %f0");
  CHECK_PTX(float, ir::rsqrt(a), "rsqrt.approx.f32 %f4, %f0");
  CHECK_PTX(double, ir::sqrt(a), "sqrt.rn.f64 %fd3, %fd0");
  CHECK_PTX(float, ir::exp(a), "mul.rn.f32 %f4, %f0, 0f3FB8AA3B");
  CHECK_PTX(float, ir::exp(a), "ex2.approx.f32 %f8, %f4");
  CHECK_PTX(float, ir::exp(a), "testp.notanumber.f32 %p0, %f10");  // exp(+-inf): 2^t, not inf - inf
  CHECK_PTX(float, ir::log(a), "lg2.approx.f32 %f4, %f0");
  CHECK_PTX(float, ir::sin(a), "sin.approx.f32 %f9, %f8");
  CHECK_PTX(float, ir::cos(a), "cos.approx.f32 %f9, %f8");
  CHECK_PTX(float, ir::tanh(a), "copysign.f32 %f29, %f0, %f28");
  CHECK_PTX(float, ir::tanh(a), "rcp.approx.f32 %f15, %f14");  // 2 / (e^2|x| + 1) without div.rn
  CHECK_PTX(float, ir::erf(a), "rcp.approx.f32 %f16, %f15");
}

TEST_CASE("ptx: conversions", "[codegen][golden]") {
  CHECK_PTX_T(float, int32_t, ir::cast<int32_t>(a), "cvt.rzi.s32.f32 %r0, %f0");
  CHECK_PTX_T(float, int32_t, ir::cast<int32_t>(a, ir::Rounding::Rn), "cvt.rni.s32.f32 %r0, %f0");
  CHECK_PTX_T(int32_t, float, ir::cast<float>(a), "cvt.rn.f32.s32 %f0, %r0");
  CHECK_PTX_T(uint32_t, float, ir::cast<float>(a, ir::Rounding::Rz), "cvt.rz.f32.u32 %f0, %r0");
  CHECK_PTX_T(float, half, ir::cast<half>(a), "cvt.rn.f16.f32 %h0, %f0");
  CHECK_PTX_T(float, bfloat16, ir::cast<bfloat16>(a, ir::Rounding::Rz), "cvt.rz.bf16.f32 %h0, %f0");
  CHECK_PTX_T(float, double, ir::cast<double>(a), "cvt.f64.f32 %fd0, %f0");
  CHECK_PTX_T(double, float, ir::cast<float>(a), "cvt.rn.f32.f64 %f0, %fd0");
  CHECK_PTX_T(uint32_t, int64_t, ir::cast<int64_t>(a), "cvt.s64.u32 %rd2, %r0");
  CHECK_PTX_T(int32_t, int8_t, ir::cast<int8_t>(a), "cvt.s8.s32 %rs0, %r0");
}

TEST_CASE("ptx: constants use one immediate format", "[codegen][golden]") {
  CHECK_PTX(float, a + 1.0f, "mov.f32 %f3, 0f3F800000");
  CHECK_PTX(double, a + 1.0, "mov.f64 %fd3, 0d3FF0000000000000");
  CHECK_PTX(half, a + 1.0f, "mov.b16 %h3, 0x3C00");
  CHECK_PTX(int8_t, a + (-1), "mov.s16 %rs3, -1");
  CHECK_PTX(uint64_t, a + 5u, "mov.b64 %rd5, 5");
}

TEST_CASE("ptx: parameters, loads, stores, special registers, branches", "[codegen][golden]") {
  std::string ptx = codegen::emit_ptx(ops::saxpy_kernel(), {"sm_90", 9, 0});
  INFO(ptx);
  CHECK(ptx.find(".version 9.0\n.target sm_90\n.address_size 64\n") != std::string::npos);
  CHECK(ptx.find(".visible .entry saxpy(\n\t.param .f32 saxpy_param_0,\n\t.param .u64 saxpy_param_1,") != std::string::npos);
  CHECK(test::has_line(ptx, "ld.param.f32 %f0, [saxpy_param_0]"));
  CHECK(test::has_line(ptx, "ld.param.u64 %rd1, [saxpy_param_1]"));
  CHECK(test::has_line(ptx, "cvta.to.global.u64 %rd0, %rd1"));
  CHECK(test::has_line(ptx, "mov.u32 %r1, %ctaid.x"));
  CHECK(test::has_line(ptx, "mov.u32 %r3, %tid.x"));
  CHECK(test::has_line(ptx, "setp.lt.u32 %p0, %r5, %r0"));
  CHECK(test::has_line(ptx, "@!%p0 bra $L__kaio_1"));
  CHECK(test::has_line(ptx, "mul.wide.u32 %rd4, %r5, 4"));
  CHECK(test::has_line(ptx, "ld.global.f32 %f1, [%rd5]"));
  CHECK(test::has_line(ptx, "st.global.f32 [%rd9], %f4"));

  std::string loop = codegen::emit_ptx(ops::row_sum_kernel(), {"sm_80", 9, 0});
  INFO(loop);
  CHECK(loop.find(".target sm_80\n") != std::string::npos);
  CHECK(test::has_line(loop, "setp.ge.u32 %p1, %r9, %r1"));
  CHECK(test::has_line(loop, "bra $L__kaio_2"));
  CHECK(test::has_line(loop, "mul.lo.s64 %rd9, %rd8, 4"));
}

TEST_CASE("ptx: targets and ISA versions", "[codegen]") {
  CHECK(codegen::ptx_isa_for_toolkit(13, 0) == std::pair{9, 0});
  CHECK(codegen::ptx_isa_for_toolkit(12, 8) == std::pair{8, 7});
  CHECK(codegen::parse_arch("sm_90a").suffix == 'a');
  CHECK(codegen::parse_arch("sm_100f").sm == 100);
  CHECK_THROWS_AS(codegen::parse_arch("sm90"), UsageError);
  CHECK_THROWS_AS(codegen::parse_arch("sm_70"), UsageError);
  CHECK_THROWS_AS(codegen::parse_arch("sm_90x"), UsageError);
  CHECK_THROWS_AS(codegen::emit_ptx(ops::saxpy_kernel(), {"sm_90a", 7, 8}), UsageError);
}
