// Golden PTX for wgmma's integer forms: m64nNk32 with s8 / u8 operands (mixed too), s32
// accumulators, both operands K-major, no scale or transpose operands; every N the form
// takes assembled by nvJitLink for sm_90a (IGMMA in the SASS where cuobjdump is installed);
// the builder refuses an f32 accumulator, an N the form lacks and MN-major operands.
// [gpu] (an sm_90 device): one m64n16k32 tile from unswizzled shared memory, exact against
// an integer reference.
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "wgmma_8bit_check.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

// One warpgroup: D (64 x 16, s32) = A (64 x 32, row-major) * B (32 x 16, column-major: 16
// rows of k). Both operands go to shared memory unswizzled, as 8 x 16-byte core matrices:
// core matrix (r / 8, k / 16) at ((r / 8) * 2 + k / 16) * 128 bytes, so the descriptors'
// leading (k) byte offset is 128 and the stride (m or n) byte offset 256.
ir::Kernel wgmma_int8_tile(ir::Scalar ta, ir::Scalar tb) {
  ir::KernelBuilder b(std::string("wg_tile_") + ir::scalar_name(ta) + "_" + ir::scalar_name(tb));
  auto A = b.param("a", ir::Type::pointer(ta, true));
  auto B = b.param("b", ir::Type::pointer(tb, true));
  auto D = b.param<int32_t*>("d");
  auto sa = b.shared(ta, 64 * 32, 128);
  auto sb = b.shared(tb, 16 * 32, 128);
  ir::Value tid = b.thread_idx_x();
  auto core = [](ir::Value r, ir::Value k) { return ((r / 8u) * 2u + k / 16u) * 128u + (r % 8u) * 16u + k % 16u; };
  for (uint32_t e = 0; e < 16; ++e) {
    ir::Value i = tid + e * 128;
    sa[core(i / 32u, i % 32u)] = ir::Value(A[i]);
  }
  for (uint32_t e = 0; e < 4; ++e) {
    ir::Value i = tid + e * 128;
    sb[core(i / 32u, i % 32u)] = ir::Value(B[i]);
  }
  b.fence_proxy_async();  // the threads' shared stores, before wgmma (the async proxy) reads them
  b.barrier();
  auto acc = b.array<int32_t>(8, 0);
  ir::Value da = b.wgmma_descriptor(sa, 0u, ir::WgmmaSwizzle::None, 128, 256);
  ir::Value db = b.wgmma_descriptor(sb, 0u, ir::WgmmaSwizzle::None, 128, 256);
  b.wgmma_fence();
  if (ta == tb) b.wgmma(acc, da, db, ta);
  else b.wgmma(acc, da, db, ta, tb);
  b.wgmma_commit_group();
  b.wgmma_wait_group(0);
  // the m64nN accumulator: warp w holds rows 16w.., per 8 columns the m16n8 C fragment
  ir::Value w = tid / 32u, lane = tid % 32u;
  for (uint32_t j = 0; j < 2; ++j)
    for (uint32_t r = 0; r < 4; ++r) {
      ir::Value row = w * 16u + lane / 4u + (r >= 2 ? 8u : 0u), col = (lane % 4u) * 2u + (j * 8 + (r & 1));
      D[row * 16u + col] = acc[4 * j + r];
    }
  return b.build();
}

}  // namespace

TEST_CASE("wgmma int8: one m64n16k32 tile on the device, exact against an integer reference", "[gpu][hopper][int8]") {
  if (jit::interpret_mode() || codegen::parse_arch(jit::detail::backend().default_arch()).sm != 90) {
    WARN("wgmma runs on sm_90 devices only; skipped here");
    return;
  }
  std::mt19937 rng(::kaio::test::case_seed());
  auto run = [&]<class TA, class TB>(TA, TB) {
    const ir::Scalar ta = ir::ScalarOf<TA>::value, tb = ir::ScalarOf<TB>::value;
    std::uniform_int_distribution<int> ua(std::numeric_limits<TA>::min(), std::numeric_limits<TA>::max()),
        ub(std::numeric_limits<TB>::min(), std::numeric_limits<TB>::max());
    std::vector<TA> a(64 * 32);
    std::vector<TB> bm(16 * 32);
    for (auto& x : a) x = static_cast<TA>(ua(rng));
    for (auto& x : bm) x = static_cast<TB>(ub(rng));
    a[0] = std::numeric_limits<TA>::min();  // the extremes, where a narrower sum would overflow
    bm[0] = std::numeric_limits<TB>::min();
    DeviceBuffer<TA> dA(a);
    DeviceBuffer<TB> dB(bm);
    DeviceBuffer<int32_t> dD(std::vector<int32_t>(64 * 16, 0x7fffffff));  // poisoned
    jit::compile(wgmma_int8_tile(ta, tb)).launch({.grid = {1}, .block = {128}}, dA, dB, dD);
    const std::vector<int32_t> d = dD.to_host();
    for (uint32_t i = 0; i < 64; ++i)
      for (uint32_t j = 0; j < 16; ++j) {
        int64_t ref = 0;
        for (uint32_t k = 0; k < 32; ++k) ref += int64_t(a[i * 32 + k]) * int64_t(bm[j * 32 + k]);
        INFO(ir::scalar_name(ta) << " x " << ir::scalar_name(tb) << " D[" << i << "][" << j << "]");
        REQUIRE(d[i * 16 + j] == ref);
      }
  };
  run(int8_t{}, int8_t{});
  run(uint8_t{}, int8_t{});
  run(uint8_t{}, uint8_t{});
}

TEST_CASE("wgmma int8 golden: m64nNk32 s32 forms of s8 / u8, mixed too, assemble for sm_90a (IGMMA)", "[codegen][golden][hopper][int8]") {
  using ir::Scalar;
  struct Case { Scalar a, b; uint32_t n; const char* form; };
  const Case cases[] = {{Scalar::S8, Scalar::S8, 8, "m64n8k32.s32.s8.s8 {"},     {Scalar::U8, Scalar::U8, 24, "m64n24k32.s32.u8.u8 {"},
                        {Scalar::S8, Scalar::U8, 48, "m64n48k32.s32.s8.u8 {"},   {Scalar::U8, Scalar::S8, 128, "m64n128k32.s32.u8.s8 {"},
                        {Scalar::S8, Scalar::S8, 256, "m64n256k32.s32.s8.s8 {"}};
  for (const Case& c : cases)  // scale-d only: no scale or transpose operands
    test::check_wgmma_8bit_form(c.a, c.b, c.n, c.form, "}, %rd0, %rd1, %p0", "IGMMA");
  // every N the integer form takes assembles
  for (uint32_t n : {8u, 16u, 24u, 32u, 64u, 96u, 160u, 208u, 240u}) {
    ir::Kernel k = test::wgmma_8bit_kernel(Scalar::S8, Scalar::S8, n);
    INFO(k.name());
    CHECK(test::link_ptx(codegen::emit_ptx(k, {"sm_90a", 9, 0}), "sm_90a", k.name()).cubin.size() > 4);
  }
  CHECK(test::wgmma_8bit_kernel(Scalar::S8, Scalar::U8, 16).hash() != test::wgmma_8bit_kernel(Scalar::S8, Scalar::S8, 16).hash());
  // the device test's tile kernel (unswizzled descriptors, 8-bit shared stores) assembles
  for (auto [ta, tb] : {std::pair{Scalar::S8, Scalar::S8}, std::pair{Scalar::U8, Scalar::S8}}) {
    ir::Kernel k = wgmma_int8_tile(ta, tb);
    INFO(k.name());
    CHECK(test::link_ptx(codegen::emit_ptx(k, {"sm_90a", 9, 0}), "sm_90a", k.name()).cubin.size() > 4);
  }
}

TEST_CASE("wgmma int8: the builder refuses f32 accumulators, missing N sizes, MN-major and mixed float operands", "[ir][hopper][int8][verifier]") {
  auto attempt = [](int what) {
    ir::KernelBuilder b("wg_bad");
    auto d = b.param<uint64_t>("d");
    auto f = b.array<float>(8, 0.0f);
    auto i8 = b.array<int32_t>(8, 0);
    auto i40 = b.array<int32_t>(20, 0);
    b.wgmma_fence();
    if (what == 0) b.wgmma(f, d, d, ir::Scalar::S8);
    if (what == 1) b.wgmma(i40, d, d, ir::Scalar::U8);
    if (what == 2) b.wgmma(i8, d, d, ir::Scalar::S8, true, false);
    if (what == 3) b.wgmma(i8, d, d, ir::Scalar::S8, ir::Scalar::E4M3);
    if (what == 4) b.wgmma(i8, d, d, ir::Scalar::F16);
    if (what == 5) b.wgmma(f, d, d, ir::Scalar::S16);
    b.wgmma_commit_group();
    b.wgmma_wait_group(0);
    return b.build();
  };
  const char* expect[] = {"s8 / u8 accumulate in an s32 register array", "got 20 values of s32",
                          "s8 operands are K-major only", "an s8 / u8 A takes an s8 or u8 B, not e4m3",
                          "the accumulator is an f32 register array", "e4m3, e5m2, s8 or u8, not s16"};
  for (int w = 0; w < 6; ++w) {
    INFO("case " << w);
    UsageError e = test::usage_error_of([&] { attempt(w); });
    CHECK(e.op() == "wgmma");
    CHECK_THAT(e.what(), Contains(expect[w]));
  }
}
