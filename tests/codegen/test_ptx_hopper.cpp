// Golden PTX for the Hopper forms: TMA loads (ranks 1..5), wgmma in its transposing and
// tf32 forms, the wgmma matrix descriptor (its bits checked in the interpreter); misuse
// refused with messages; sm_90a selection; each form assembled by nvJitLink.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> lines_with(const std::string& ptx, const std::string& prefix) {
  std::vector<std::string> out;
  size_t p = 0;
  while ((p = ptx.find("\t" + prefix, p)) != std::string::npos) {
    size_t e = ptx.find(";\n", p);
    out.push_back(ptx.substr(p + 1, e - p - 1));
    p = e;
  }
  return out;
}

// One thread loads a box of a rank-`rank` tensor into shared memory and waits for it.
ir::Kernel tma_kernel(uint32_t rank) {
  ir::KernelBuilder b("tma" + std::to_string(rank));
  auto map = b.tensor_map_param("map");
  auto out = b.param<float*>("out");
  auto tile = b.shared<float>(256, 128);
  auto bar = b.shared<uint64_t>(1);
  ir::Value tid = b.thread_idx_x();
  b.if_(tid == 0u, [&] {
    b.mbarrier_init(bar, 0, 1u);
    b.fence_proxy_async();
    b.mbarrier_arrive_expect_tx(bar, 0, 1024u);
    std::vector<ir::Value> coords;
    for (uint32_t d = 0; d < rank; ++d) coords.push_back(b.block_idx_x() * (d + 1));
    b.tma_load(tile, 0, map, coords, bar, 0);
    b.mbarrier_wait(bar, 0, 0u);
    out[0] = ir::Value(tile[5]);
  });
  return b.build();
}

}  // namespace

TEST_CASE("hopper golden: TMA loads of every rank complete an mbarrier", "[codegen][golden][hopper]") {
  for (uint32_t rank = 1; rank <= 5; ++rank) {
    INFO("rank " << rank);
    ir::Kernel k = tma_kernel(rank);
    CHECK_FALSE(k.arch_specific());  // TMA is sm_90, not arch-specific
    const std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
    const auto l = lines_with(ptx, "cp.async.bulk.tensor");
    REQUIRE(l.size() == 1);
    std::string coords;
    CHECK_THAT(l[0], Contains("cp.async.bulk.tensor." + std::to_string(rank) +
                              "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r"));
    CHECK(std::count(l[0].begin(), l[0].end(), ',') == int(rank) + 2);  // dst], [map, {c0, ..}], [bar
    CHECK_THAT(ptx, Contains(".param .align 64 .b8"));
    CHECK(test::link_ptx(ptx, "sm_90", k.name()).cubin.size() > 4);
    UsageError e = test::usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_80", 9, 0}); });
    CHECK_THAT(e.what(), Contains("needs sm_90") && Contains("the target is sm_80"));
    INFO(l[0]);
  }
}

TEST_CASE("hopper: tma_load refuses what is not a tensor map, a bad rank or bad coordinates", "[ir][hopper][verifier]") {
  auto attempt = [](int what) {
    ir::KernelBuilder b("bad_tma");
    auto map = b.tensor_map_param("map");
    auto g = b.param<const float*>("g");
    auto small = b.param_bytes<uint8_t>("small", 64, 64);
    auto tile = b.shared<float>(256, 128);
    auto bar = b.shared<uint64_t>(1);
    auto words = b.shared<uint32_t>(2);
    ir::Value x = b.thread_idx_x();
    std::vector<ir::Value> two{x, x};
    if (what == 0) b.tma_load(tile, 0, g, two, bar, 0);
    if (what == 1) b.tma_load(tile, 0, small, two, bar, 0);
    if (what == 2) b.tma_load(tile, 0, map, {}, bar, 0);
    if (what == 3) b.tma_load(tile, 0, map, {x, x, x, x, x, x}, bar, 0);
    if (what == 4) b.tma_load(tile, 0, map, {x, ir::cast<float>(x)}, bar, 0);
    if (what == 5) b.tma_load(tile, 0, map, two, words, 0);
    if (what == 6) b.tma_load(g, 0, map, two, bar, 0);
    return b.build();
  };
  const char* expect[] = {"tensor map parameter", "not a 128-byte, 64-aligned parameter", "1 to 5", "1 to 5",
                          "s32 or u32", "mbarrier", "shared-memory pointer"};
  for (int w = 0; w < 7; ++w) {
    INFO("case " << w);
    UsageError e = test::usage_error_of([&] { attempt(w); });
    CHECK(e.op() == "tma_load");
    CHECK_THAT(e.what(), Contains(expect[w]));
  }
}

TEST_CASE("hopper golden: wgmma transposes and tf32; sm_90a is chosen, plain sm_90 refused", "[codegen][golden][hopper]") {
  auto build = [](ir::Scalar in, bool ta, bool tb) {
    ir::KernelBuilder b("wg");
    auto da = b.param<uint64_t>("da");
    auto db = b.param<uint64_t>("db");
    auto out = b.param<float*>("out");
    auto acc = b.array<float>(8, 0.0f);
    b.wgmma_fence();
    b.wgmma(acc, da, db, in, ta, tb);
    b.wgmma_commit_group();
    b.wgmma_wait_group(0);
    for (int k = 0; k < 8; ++k) out[b.thread_idx_x() * 8u + uint32_t(k)] = acc[k];
    return b.build();
  };
  struct Case { ir::Scalar in; bool ta, tb; const char* tail; };
  const Case cases[] = {{ir::Scalar::F16, false, false, "m64n16k16.f32.f16.f16 {"},
                        {ir::Scalar::BF16, true, false, "m64n16k16.f32.bf16.bf16 {"},
                        {ir::Scalar::F16, false, true, "m64n16k16.f32.f16.f16 {"},
                        {ir::Scalar::F32, false, false, "m64n16k8.f32.tf32.tf32 {"}};
  const char* flags[] = {", 1, 1, 0, 0", ", 1, 1, 1, 0", ", 1, 1, 0, 1", ", 1, 1"};
  for (int c = 0; c < 4; ++c) {
    INFO("case " << c);
    ir::Kernel k = build(cases[c].in, cases[c].ta, cases[c].tb);
    CHECK(k.arch_specific());
    const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
    const auto l = lines_with(ptx, "wgmma.mma_async");
    REQUIRE(l.size() == 1);
    CHECK_THAT(l[0], Contains(std::string("wgmma.mma_async.sync.aligned.") + cases[c].tail));
    CHECK(l[0].size() > 12);
    CHECK(l[0].substr(l[0].rfind('%')).find(flags[c]) != std::string::npos);
    CHECK(test::link_ptx(ptx, "sm_90a", k.name()).cubin.size() > 4);
    CHECK_THAT(test::usage_error_of([&] { (void)jit::compile(k, {.arch = "sm_90", .use_cache = false}); }).what(),
               Contains("sm_90a only, not sm_90"));
    CHECK_THAT(test::usage_error_of([&] { (void)jit::compile(k, {.arch = "sm_100a", .use_cache = false}); }).what(),
               Contains("sm_90a"));
  }
  CHECK(ir::KernelBuilder("p").build().arch_specific() == false);
  UsageError e = test::usage_error_of([&] { build(ir::Scalar::F32, true, false); });
  CHECK_THAT(e.what(), Contains("tf32 operands are K-major only"));
  e = test::usage_error_of([&] { build(ir::Scalar::S32, false, false); });
  CHECK_THAT(e.what(), Contains("f16, bf16, f32 (as tf32), e4m3, e5m2, s8 or u8"));
}

TEST_CASE("hopper: the wgmma descriptor packs address, offsets and swizzle", "[ir][hopper][interp]") {
  ir::KernelBuilder b("desc");
  auto out = b.param<uint64_t*>("out");
  auto smem = b.dynamic_shared<uint16_t>(1024);
  out[0] = b.wgmma_descriptor(smem, 512u, ir::WgmmaSwizzle::B128, 16, 1024);
  out[1] = b.wgmma_descriptor(smem, 0u, ir::WgmmaSwizzle::B64, 8192, 512);
  out[2] = ir::cast<uint64_t>(b.shared_addr(smem, 512u));
  out[3] = ir::cast<uint64_t>(b.shared_addr(smem, 0u));
  ir::Kernel k = b.build();
  std::vector<uint64_t> o(4, ~0ull);
  ir::interpret(k, {.grid = {1}, .block = {1}, .shared_bytes = 4096}, o);
  CHECK(o[0] == (((o[2] & 0x3ffff) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62)));
  CHECK(o[1] == (((o[3] & 0x3ffff) >> 4) | (512ull << 16) | (32ull << 32) | (2ull << 62)));
  ir::KernelBuilder bad("desc_bad");
  auto s2 = bad.dynamic_shared<uint16_t>(1024);
  CHECK_THAT(test::usage_error_of([&] { (void)bad.wgmma_descriptor(s2, 0u, ir::WgmmaSwizzle::B128, 8, 1024); }).what(),
             Contains("multiples of 16"));
  auto g = bad.param<uint16_t*>("g");
  CHECK_THAT(test::usage_error_of([&] { (void)bad.wgmma_descriptor(g, 0u, ir::WgmmaSwizzle::B128, 16, 1024); }).what(),
             Contains("shared memory"));
}

TEST_CASE("hopper golden: cluster barrier, mbarrier init fence, remote arrive, multicast TMA", "[codegen][golden][hopper]") {
  ir::KernelBuilder b("cluster_forms");
  auto map = b.tensor_map_param("map");
  auto tile = b.shared<float>(256, 128);
  auto bar = b.shared<uint64_t>(2);
  b.if_(b.thread_idx_x() == 0u, [&] {
    b.mbarrier_init(bar, 0, 2u);
    b.fence_mbarrier_init();
  });
  b.cluster_sync();
  ir::Value rank = b.block_idx_x() % 2u;
  b.if_(b.thread_idx_x() == 0u, [&] {
    b.tma_load(tile, 0, map, {rank, rank}, bar, 0, ir::cast<uint16_t>(b.constant<uint32_t>(3u)));
    b.mbarrier_arrive_cluster(bar, 1, rank ^ 1u);
  });
  b.cluster_sync();
  ir::Kernel k = b.build();
  const std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  CHECK(lines_with(ptx, "barrier.cluster.arrive.aligned").size() == 2);
  CHECK(lines_with(ptx, "barrier.cluster.wait.aligned").size() == 2);
  CHECK(lines_with(ptx, "fence.mbarrier_init.release.cluster").size() == 1);
  const auto t = lines_with(ptx, "cp.async.bulk.tensor.2d");
  REQUIRE(t.size() == 1);
  CHECK_THAT(t[0], Contains("complete_tx::bytes.multicast::cluster [%r") && Contains("], %rs"));
  const auto m = lines_with(ptx, "mapa.shared::cluster.u32 %r");
  REQUIRE(m.size() == 1);
  CHECK(lines_with(ptx, "mbarrier.arrive.shared::cluster.b64 _, [%r").size() == 1);
  CHECK(test::link_ptx(ptx, "sm_90", k.name()).cubin.size() > 4);
  CHECK_THAT(test::usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_80", 9, 0}); }).what(), Contains("sm_90"));
  ir::KernelBuilder bad("bad_mask");
  auto map2 = bad.tensor_map_param("map");
  auto tile2 = bad.shared<float>(256, 128);
  auto bar2 = bad.shared<uint64_t>(1);
  ir::Value x = bad.thread_idx_x();
  CHECK_THAT(test::usage_error_of([&] { bad.tma_load(tile2, 0, map2, {x}, bar2, 0, x); }).what(), Contains("cta_mask: a u16"));
}

TEST_CASE("hopper: wgmma and setmaxnreg need whole warpgroups; the verifier says so", "[ir][hopper][verifier]") {
  // cond 0..: warp_id() == 0, warp_id() % 2 == 0, lane-dependent: split a warpgroup (refused);
  // warp_id() / 4 == 1, warp_id() < 8, warp_id() >= 4, warp_id() >> 2 == 0, warp_id() <= 3: whole warpgroups
  auto build = [](int cond, bool setmaxnreg) {
    ir::KernelBuilder b("wg_roles");
    auto da = b.param<uint64_t>("da");
    auto out = b.param<float*>("out");
    ir::Value w = b.warp_id();
    ir::Value c = cond == 0   ? w == 0u
                  : cond == 1 ? w % 2u == 0u
                  : cond == 2 ? b.lane_id() == 0u
                  : cond == 3 ? w / 4u == 1u
                  : cond == 4 ? w < 8u
                  : cond == 5 ? w >= 4u
                  : cond == 6 ? (w >> 2u) == 0u
                              : w <= 3u;
    b.if_(c, [&] {
      if (setmaxnreg) {
        b.setmaxnreg(232, true);
        return;
      }
      auto acc = b.array<float>(8, 0.0f);
      b.wgmma_fence();
      b.wgmma(acc, da, da, ir::Scalar::F16);
      b.wgmma_commit_group();
      b.wgmma_wait_group(0);
      out[b.thread_idx_x()] = acc[0];
    });
    return b.build();
  };
  for (bool smr : {false, true})
    for (int cond = 0; cond < 8; ++cond) {
      INFO("condition " << cond << (smr ? " setmaxnreg" : " wgmma"));
      if (cond < 3) {
        UsageError e = test::usage_error_of([&] { build(cond, smr); });
        CHECK_THAT(e.what(), Contains(cond == 2 ? "whole warps" : "whole warpgroups"));
      } else {
        CHECK_NOTHROW(build(cond, smr));
      }
    }
}

TEST_CASE("hopper: the interpreter refuses TMA, wgmma and cluster ops by name", "[ir][hopper][interp]") {
  std::vector<uint8_t> bytes(128, 0);
  UsageError e = test::usage_error_of([&] {
    ir::interpret(tma_kernel(2), {.grid = {1}, .block = {32}}, std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), 128),
                  std::vector<float>(1));
  });
  CHECK(e.op() == "tma_load");
  CHECK_THAT(e.what(), Contains("not supported by the interpreter"));
  ir::KernelBuilder b("cluster_only");
  b.cluster_sync();
  e = test::usage_error_of([&] { ir::interpret(b.build(), {.grid = {1}, .block = {32}}); });
  CHECK(e.op() == "cluster_sync");
  ir::KernelBuilder w("wgmma_only");
  auto d = w.param<uint64_t>("d");
  auto acc = w.array<float>(8, 0.0f);
  w.wgmma_fence();
  w.wgmma(acc, d, d, ir::Scalar::F16);
  w.wgmma_commit_group();
  w.wgmma_wait_group(0);
  e = test::usage_error_of([&] { ir::interpret(w.build(), {.grid = {1}, .block = {128}}, uint64_t{0}); });
  CHECK_THAT(e.op(), Contains("wgmma"));
}

namespace {
ir::Kernel tma_store_kernel(uint32_t rank) {
  ir::KernelBuilder b("tma_store" + std::to_string(rank));
  auto map = b.tensor_map_param("map");
  auto tile = b.shared<float>(256, 128);
  ir::Value tid = b.thread_idx_x();
  tile[tid] = ir::cast<float>(tid);
  b.fence_proxy_async();
  b.barrier();
  b.if_(tid == 0u, [&] {
    std::vector<ir::Value> coords;
    for (uint32_t d = 0; d < rank; ++d) coords.push_back(b.block_idx_x() * (d + 1));
    b.tma_store(map, coords, tile, 0);
    b.bulk_commit_group();
    b.bulk_wait_group(0, true);
    b.bulk_wait_group(0, false);
  });
  return b.build();
}
}  // namespace

TEST_CASE("hopper golden: TMA stores of every rank, their bulk groups and waits", "[codegen][golden][hopper]") {
  for (uint32_t rank = 1; rank <= 5; ++rank) {
    INFO("rank " << rank);
    ir::Kernel k = tma_store_kernel(rank);
    CHECK_FALSE(k.arch_specific());
    const std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
    const auto l = lines_with(ptx, "cp.async.bulk.tensor");
    REQUIRE(l.size() == 1);
    INFO(l[0]);
    CHECK_THAT(l[0], Contains("cp.async.bulk.tensor." + std::to_string(rank) + "d.global.shared::cta.tile.bulk_group [%rd"));
    CHECK(std::count(l[0].begin(), l[0].end(), ',') == int(rank) + 1);  // [map, {c0, ..}], [src
    CHECK(lines_with(ptx, "cp.async.bulk.commit_group;").size() == 1);
    CHECK(lines_with(ptx, "cp.async.bulk.wait_group.read 0;").size() == 1);
    CHECK(lines_with(ptx, "cp.async.bulk.wait_group 0;").size() == 1);
    CHECK(test::link_ptx(ptx, "sm_90", k.name()).cubin.size() > 4);
    CHECK_THAT(test::usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_80", 9, 0}); }).what(), Contains("needs sm_90"));
  }
  // printed with its rank and the wait's scope
  const std::string text = tma_store_kernel(2).print();
  CHECK_THAT(text, Contains("tma_store"));
  CHECK_THAT(text, Contains("bulk_wait_group"));
}

TEST_CASE("hopper: tma_store refuses what is not a tensor map, a bad rank, coordinates or source", "[ir][hopper][verifier]") {
  auto attempt = [](int what) {
    ir::KernelBuilder b("bad_tma_store");
    auto map = b.tensor_map_param("map");
    auto g = b.param<float*>("g");
    auto small = b.param_bytes<uint8_t>("small", 64, 64);
    auto tile = b.shared<float>(256, 128);
    ir::Value x = b.thread_idx_x();
    std::vector<ir::Value> two{x, x};
    if (what == 0) b.tma_store(g, two, tile, 0);
    if (what == 1) b.tma_store(small, two, tile, 0);
    if (what == 2) b.tma_store(map, {}, tile, 0);
    if (what == 3) b.tma_store(map, {x, x, x, x, x, x}, tile, 0);
    if (what == 4) b.tma_store(map, {x, ir::cast<float>(x)}, tile, 0);
    if (what == 5) b.tma_store(map, two, g, 0);
    if (what == 6) b.bulk_wait_group(64, true);
    return b.build();
  };
  const char* expect[] = {"tensor map parameter", "not a 128-byte, 64-aligned parameter", "1 to 5", "1 to 5",
                          "s32 or u32", "shared-memory pointer", "at most 63"};
  for (int w = 0; w < 7; ++w) {
    INFO("case " << w);
    UsageError e = test::usage_error_of([&] { attempt(w); });
    CHECK(e.op() == (w == 6 ? "bulk_wait_group" : "tma_store"));
    CHECK_THAT(e.what(), Contains(expect[w]));
  }
  // the interpreter refuses it by name
  std::vector<uint8_t> bytes(128, 0);
  UsageError e = test::usage_error_of([&] {
    ir::interpret(tma_store_kernel(2), {.grid = {1}, .block = {32}},
                  std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), 128));
  });
  CHECK(e.op() == "tma_store");
  CHECK_THAT(e.what(), Contains("not supported by the interpreter"));
}

TEST_CASE("griddepcontrol: PTX on sm_90, nothing on sm_80; both assembled",
          "[codegen][hopper]") {
  ir::KernelBuilder b("griddep");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  b.launch_dependents();
  ir::Value i = b.global_id_x();
  b.grid_dependency_wait();
  y[i] = x[i] * 2.0f;
  ir::Kernel k = b.build();
  const std::string ptx90 = codegen::emit_ptx(k, {"sm_90", 9, 0});
  CHECK(lines_with(ptx90, "griddepcontrol.launch_dependents").size() == 1);
  CHECK(lines_with(ptx90, "griddepcontrol.wait").size() == 1);
  // The order the builder gave: the trigger first, the wait before the load.
  CHECK(ptx90.find("griddepcontrol.launch_dependents") < ptx90.find("griddepcontrol.wait"));
  CHECK(ptx90.find("griddepcontrol.wait") < ptx90.find("ld.global"));
  CHECK(test::link_ptx(ptx90, "sm_90", k.name()).cubin.size() > 4);
  const std::string ptx80 = codegen::emit_ptx(k, {"sm_80", 9, 0});
  CHECK(ptx80.find("griddepcontrol") == std::string::npos);
  CHECK(test::link_ptx(ptx80, "sm_80", k.name()).cubin.size() > 4);
  // Printed by name.
  CHECK_THAT(k.print(), Contains("grid_dependency_wait") && Contains("launch_dependents"));
}
