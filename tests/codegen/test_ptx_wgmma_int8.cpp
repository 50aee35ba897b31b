// Golden PTX for wgmma's integer forms: m64nNk32 with s8 / u8 operands (mixed too), s32
// accumulators, both operands K-major, no scale or transpose operands; every N the form
// takes assembled by nvJitLink for sm_90a (IGMMA in the SASS where cuobjdump is installed);
// the builder refuses an f32 accumulator, an N the form lacks and MN-major operands.
#include <catch2/catch.hpp>

#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../ir/mma_kernels.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

ir::Kernel wgmma_int8(ir::Scalar ta, ir::Scalar tb, uint32_t n) {
  ir::KernelBuilder b(std::string("wg_") + ir::scalar_name(ta) + "_" + ir::scalar_name(tb) + "_n" + std::to_string(n));
  auto da = b.param<uint64_t>("da");
  auto db = b.param<uint64_t>("db");
  auto out = b.param<int32_t*>("out");
  auto acc = b.array<int32_t>(n / 2, 0);
  b.wgmma_fence();
  if (ta == tb) b.wgmma(acc, da, db, ta);
  else b.wgmma(acc, da, db, ta, tb);
  b.wgmma_commit_group();
  b.wgmma_wait_group(0);
  for (uint32_t k = 0; k < n / 2; ++k) out[b.thread_idx_x() * (n / 2) + k] = acc[k];
  return b.build();
}

}  // namespace

TEST_CASE("wgmma int8 golden: m64nNk32 s32 forms of s8 / u8, mixed too, assemble for sm_90a (IGMMA)", "[codegen][golden][hopper][int8]") {
  using ir::Scalar;
  struct Case { Scalar a, b; uint32_t n; const char* form; };
  const Case cases[] = {{Scalar::S8, Scalar::S8, 8, "m64n8k32.s32.s8.s8 {"},     {Scalar::U8, Scalar::U8, 24, "m64n24k32.s32.u8.u8 {"},
                        {Scalar::S8, Scalar::U8, 48, "m64n48k32.s32.s8.u8 {"},   {Scalar::U8, Scalar::S8, 128, "m64n128k32.s32.u8.s8 {"},
                        {Scalar::S8, Scalar::S8, 256, "m64n256k32.s32.s8.s8 {"}};
  for (const Case& c : cases) {
    ir::Kernel k = wgmma_int8(c.a, c.b, c.n);
    INFO(k.name());
    CHECK(k.arch_specific());
    const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
    const size_t at = ptx.find("\twgmma.mma_async");
    REQUIRE(at != std::string::npos);
    const std::string line = ptx.substr(at + 1, ptx.find(";\n", at) - at - 1);
    CHECK_THAT(line, Contains(std::string("wgmma.mma_async.sync.aligned.") + c.form));
    CHECK(line.substr(line.rfind('}')) == "}, %rd0, %rd1, %p0");  // scale-d only: no scale or transpose operands
    CHECK_THAT(k.print(), Contains(std::string("m64n") + std::to_string(c.n) + "k32 " + ir::scalar_name(c.a)));
    jit::LinkResult r = jit::link_ptx(ptx, "sm_90a", k.name());
    CHECK(r.cubin.size() > 4);
    const std::string sass = test::sass_of(r.cubin);
    if (!sass.empty()) CHECK_THAT(sass, Contains("IGMMA"));
    CHECK_THAT(test::usage_error_of([&] { (void)jit::compile(k, {.arch = "sm_90", .use_cache = false}); }).what(),
               Contains("sm_90a"));
  }
  // every N the integer form takes assembles
  for (uint32_t n : {8u, 16u, 24u, 32u, 64u, 96u, 160u, 208u, 240u}) {
    ir::Kernel k = wgmma_int8(Scalar::S8, Scalar::S8, n);
    INFO(k.name());
    CHECK(jit::link_ptx(codegen::emit_ptx(k, {"sm_90a", 9, 0}), "sm_90a", k.name()).cubin.size() > 4);
  }
  CHECK(wgmma_int8(Scalar::S8, Scalar::U8, 16).hash() != wgmma_int8(Scalar::S8, Scalar::S8, 16).hash());
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
