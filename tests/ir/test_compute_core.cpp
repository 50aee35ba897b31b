// The compute-wave core: register arrays, by-value parameters, named barriers under warp
// roles, mbarriers, shared addresses; checked in the interpreter, by the verifier, and by
// nvJitLink (PTX for sm_80 / sm_90 / sm_90a, no local memory).
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;

namespace {

constexpr uint32_t kAcc = 128;  // accumulator registers per consumer thread
constexpr uint32_t kCoef = 32;  // floats in the 128-byte by-value parameter

// Block of 256 threads = 2 warpgroups. Warpgroup 0 (producer) stages x * coef into shared
// memory and arrives at named barrier 1; warpgroup 1 (consumer) waits there, then runs
// `iters` rounds r of acc[k] = fma(stage[(k + t + r) % 128], coef[k % 32], acc[k]) over a
// 128-register accumulator, and stores it.
ir::Kernel warp_role_kernel() {
  ir::KernelBuilder b("warp_roles");
  auto coef = b.param_bytes<float>("coef", kCoef, 64);
  auto x = b.param<const float*>("x");
  auto out = b.param<float*>("out");
  auto iters = b.param<uint32_t>("iters");
  auto stage = b.shared<float>(128, 128);
  auto tid = b.thread_idx_x();
  auto wg = b.warp_id() / 4u;
  b.if_(wg == 0u, [&] {
     ir::Value xi = x[tid];
     ir::Value ci = coef[tid % kCoef];
     stage[tid] = xi * ci;
     b.barrier_arrive(1, 256);
   }).else_([&] {
    b.barrier(1, 256);
    ir::Value t = tid - 128u;
    auto acc = b.array<float>(kAcc, 0.0f);
    b.for_(0u, iters, [&](ir::Value r) {
      for (uint32_t k = 0; k < kAcc; ++k) {
        // (r in the index: loads the same every round would be hoisted out of the loop,
        // 128 more live registers beside the accumulator)
        ir::Value s = stage[(t + k + r) % 128u];
        ir::Value c = coef[k % kCoef];
        acc[k] = ir::fma(s, c, acc[k]);
      }
    });
    for (uint32_t k = 0; k < kAcc; ++k) out[t * kAcc + k] = acc[k];
  });
  return b.build();
}

}  // namespace

TEST_CASE("core: 128-register accumulator, named barrier, by-value parameter, warp roles", "[ir][core]") {
  ir::Kernel k = warp_role_kernel();

  // Interpreter: against a float64 reference (fma chains of exact products round once each).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::array<float, kCoef> coef;
  for (float& c : coef) c = u(rng);
  std::vector<float> x(128), out(128 * kAcc, std::numeric_limits<float>::quiet_NaN());
  for (float& v : x) v = u(rng);
  const uint32_t iters = 3;
  auto blob = std::as_bytes(std::span(coef));
  ir::interpret(k, {.grid = {1}, .block = {256}}, blob, x, out, iters);
  for (uint32_t t = 0; t < 128; ++t)
    for (uint32_t j = 0; j < kAcc; ++j) {
      double ref = 0;
      float accf = 0;
      for (uint32_t r = 0; r < iters; ++r) {
        const float s = x[(t + j + r) % 128] * coef[(t + j + r) % 128 % kCoef];
        accf = std::fma(s, coef[j % kCoef], accf);
        ref += double(s) * coef[j % kCoef];
      }
      INFO("t " << t << " k " << j);
      REQUIRE(out[t * kAcc + j] == accf);
      REQUIRE(std::abs(out[t * kAcc + j] - ref) <= 1e-5 * (1 + std::abs(ref)));
    }

  // PTX: the parameter is .param .align 64 .b8 [128]; named barriers; registers, no .local.
  std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  CHECK_THAT(ptx, Contains(".param .align 64 .b8 warp_roles_param_0[128]"));
  CHECK_THAT(ptx, Contains("cvta.param.u64"));
  CHECK_THAT(ptx, Contains("bar.arrive 1, 256;"));
  CHECK_THAT(ptx, Contains("bar.sync 1, 256;"));
  CHECK_THAT(ptx, Contains(".shared .align 128 .b8"));
  CHECK(ptx.find(".local") == std::string::npos);
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(arch);
    jit::LinkResult r = test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
    jit::Resources res = jit::parse_resources(r.info_log, 0);
    CHECK(res.local_bytes == 0);
    CHECK(res.spill_stores == 0);
    CHECK(res.registers >= static_cast<int>(kAcc));  // the accumulator really lives in registers
  }
}

namespace {

// barrier_unaligned: 4 warps run `rounds` rounds of a loop unrolled twice; warp w runs w
// steps before its first round, so warps 0 and 2 reach the barrier in the first copy of the
// body and warps 1 and 3 in the second. Each round every thread writes its value into a
// per-round buffer, meets the others at the barrier, then adds the value of the thread
// 32 places along the block (another warp): out[t] = sum over rounds of x[(t + 32) % 128] * (r + 1).
ir::Kernel unaligned_barrier_kernel() {
  ir::KernelBuilder b("unaligned_barrier");
  auto x = b.param<const float*>("x");
  auto out = b.param<float*>("out");
  auto rounds = b.param<uint32_t>("rounds");
  auto buf = b.shared<float>(2 * 128, 16);
  auto tid = b.thread_idx_x();
  auto w = b.warp_id();
  ir::Var sum = b.var<float>(0.0f);
  ir::Var r = b.var<uint32_t>(0u);
  ir::Value xv = x[tid];
  ir::Value total = rounds + w;  // warp w: w idle steps, then its rounds
  b.for_(0u, (total + 1u) / 2u, [&](ir::Value pair) {
    for (uint32_t copy = 0; copy < 2; ++copy) {  // the loop body, unrolled twice
      ir::Value step = pair * 2u + copy;
      b.if_(step >= w && step < total, [&] {
        ir::Value round = r.get();
        ir::Value slot = (round % 2u) * 128u;
        buf[slot + tid] = xv * ir::cast<float>(round + 1u);
        b.barrier_unaligned(1, 128);
        sum = sum.get() + buf[slot + (tid + 32u) % 128u];
        r = round + 1u;
      });
    }
  });
  out[tid] = sum.get();
  return b.build();
}

}  // namespace

TEST_CASE("core: warps reach an unaligned named barrier from different instructions", "[ir][core]") {
  ir::Kernel k = unaligned_barrier_kernel();
  std::vector<float> x(128), out(128, std::numeric_limits<float>::quiet_NaN());
  std::mt19937 rng(::kaio::test::case_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  const uint32_t rounds = 5;
  ir::interpret(k, {.grid = {1}, .block = {128}}, x, out, rounds);
  for (uint32_t t = 0; t < 128; ++t) {
    float ref = 0;
    for (uint32_t i = 0; i < rounds; ++i) ref = ref + x[(t + 32) % 128] * float(i + 1);
    INFO("thread " << t);
    CHECK(out[t] == ref);
  }
  // PTX: barrier.sync without .aligned (bar.sync is the aligned form); it assembles.
  const std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  CHECK_THAT(ptx, Contains("barrier.sync 1, 128;"));
  CHECK(ptx.find("bar.sync") == std::string::npos);
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"})
    CHECK(test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name()).cubin.size() > 4);
  // Under a condition on the lane it is a divergent barrier, as the aligned one.
  ir::KernelBuilder bad("unaligned_lane_cond");
  bad.if_(bad.lane_id() < 16u, [&] { bad.barrier_unaligned(1, 64); });
  CHECK(usage_error_of([&] { bad.build(); }).op() == "barrier_unaligned");
  CHECK(usage_error_of([&] { bad.barrier_unaligned(1, 40); }).op() == "barrier_unaligned");
}

TEST_CASE("core: the interpreter rejects a by-value argument of the wrong size", "[ir][core]") {
  ir::Kernel k = warp_role_kernel();
  std::array<float, 8> small{};
  std::vector<float> x(128), out(128 * kAcc);
  UsageError e = usage_error_of([&] {
    ir::interpret(k, {.grid = {1}, .block = {256}}, std::as_bytes(std::span(small)), x, out, 1u);
  });
  CHECK_THAT(e.what(), Contains("128 bytes"));
}

TEST_CASE("core: divergence levels: warp roles may use named barriers, threads may not", "[ir][core][verifier]") {
  {  // a named barrier under a condition on the lane: rejected
    ir::KernelBuilder b("lane_cond");
    auto tid = b.thread_idx_x();
    b.if_(tid < 16u, [&] { b.barrier(1, 64); });
    UsageError e = usage_error_of([&] { b.build(); });
    CHECK(e.op() == "barrier");
    CHECK_THAT(e.what(), Contains("divergent barrier") && Contains("warp_id()"));
  }
  {  // the whole block's barrier under a warp-role branch: rejected (the other role never comes)
    ir::KernelBuilder b("role_block_barrier");
    auto w = b.warp_id();
    b.if_(w / 4u == 0u, [&] { b.barrier(); });
    UsageError e = usage_error_of([&] { b.build(); });
    CHECK_THAT(e.what(), Contains("differs between warps"));
  }
  {  // a variable written under a lane condition taints a later loop bound
    ir::KernelBuilder b("tainted_var");
    auto n = b.var<uint32_t>(1u);
    b.if_(b.lane_id() == 0u, [&] { n = 2u; });
    b.for_(0u, n, [&](ir::Value) { b.barrier(2, 64); });
    CHECK(usage_error_of([&] { b.build(); }).op() == "barrier");
  }
  {  // setmaxnreg and bar.arrive under a warpgroup condition: accepted
    ir::KernelBuilder b("roles_ok");
    auto wg = b.warp_id() / 4u;
    b.if_(wg == 0u, [&] {
       b.setmaxnreg(40, false);
       b.barrier_arrive(3, 256);
     }).else_([&] {
      b.setmaxnreg(232, true);
      b.barrier(3, 256);
    });
    ir::Kernel k = b.build();
    std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
    CHECK_THAT(ptx, Contains("setmaxnreg.dec.sync.aligned.u32 40;"));
    CHECK_THAT(ptx, Contains("setmaxnreg.inc.sync.aligned.u32 232;"));
    CHECK(test::link_ptx(ptx, "sm_90a", k.name()).cubin.size() > 4);
    // setmaxnreg exists on sm_90a only
    UsageError e = usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_90", 9, 0}); });
    CHECK(e.op() == "setmaxnreg");
    CHECK_THAT(e.what(), Contains("sm_90a"));
  }
}

TEST_CASE("core: builder misuse of the new ops names the op", "[ir][core][builder]") {
  ir::KernelBuilder b("misuse");
  auto f = b.param<float*>("f");
  auto bars = b.shared<uint64_t>(2);
  auto words = b.shared<uint32_t>(2);
  CHECK(usage_error_of([&] { b.barrier(16, 64); }).op() == "barrier");
  CHECK(usage_error_of([&] { b.barrier(1, 48); }).op() == "barrier");
  CHECK(usage_error_of([&] { b.setmaxnreg(20, true); }).op() == "setmaxnreg");
  CHECK(usage_error_of([&] { b.mbarrier_init(words, 0, 1u); }).op() == "mbarrier_init");
  CHECK(usage_error_of([&] { b.mbarrier_arrive(f, 0); }).op() == "mbarrier_arrive");
  CHECK(usage_error_of([&] { (void)b.shared_addr(f, 0); }).op() == "shared_addr");
  CHECK(usage_error_of([&] { (void)b.shared<float>(4, 24); }).op() == "shared");
  CHECK(usage_error_of([&] { (void)b.param_bytes<float>("late", 0, 16); }).op() == "param_bytes");
  auto acc = b.array<float>(4, 0.0f);
  CHECK(usage_error_of([&] { (void)acc[4]; }).op() == "array");
  b.mbarrier_init(bars, 0, 1u);  // the right forms build
  (void)b.shared_addr(bars, 1);
}

TEST_CASE("core: mbarrier producer/consumer in the interpreter; races and hangs are reported", "[ir][core][interp]") {
  // Warp 0 fills a shared tile and arrives (32 arrivals complete phase 0); warps 1..3 wait
  // for phase 0 and read it. No barrier orders them: the mbarrier does.
  // Without the mbarrier (no arrive, no wait) the same accesses are a race. The detector
  // orders accesses block-wide at each phase completion, so it cannot tell a consumer that
  // skipped its wait from one that waited; the missing synchronization below it does see.
  auto build = [](bool wait) {
    ir::KernelBuilder b(wait ? "mbar_pc" : "mbar_race");
    auto out = b.param<uint32_t*>("out");
    auto tile = b.shared<uint32_t>(32);
    auto bar = b.shared<uint64_t>(1);
    auto tid = b.thread_idx_x();
    auto lane = b.lane_id();
    b.if_(tid == 0u, [&] { b.mbarrier_init(bar, 0, 32u); });
    b.barrier();
    auto w = b.warp_id();
    b.if_(w == 0u, [&] {
       tile[lane] = lane * 3u + 1u;
       if (wait) b.mbarrier_arrive(bar, 0);
     }).else_([&] {
      if (wait) b.mbarrier_wait(bar, 0, 0u);
      ir::Value v = tile[(lane + w) % 32u];
      out[tid] = v;
    });
    return b.build();
  };
  std::vector<uint32_t> out(128, 0xdeadbeef);
  ir::interpret(build(true), {.grid = {2}, .block = {128}}, out);
  for (uint32_t t = 32; t < 128; ++t) CHECK(out[t] == ((t % 32 + t / 32) % 32) * 3 + 1);
  CHECK(out[0] == 0xdeadbeefu);

  UsageError race = usage_error_of([&] { ir::interpret(build(false), {.grid = {1}, .block = {128}}, out); });
  CHECK_THAT(race.what(), Contains("race") || Contains("uninitialized"));

  ir::KernelBuilder h("mbar_hang");  // waits on a phase nobody completes
  auto bar = h.shared<uint64_t>(1);
  h.if_(h.thread_idx_x() == 0u, [&] { h.mbarrier_init(bar, 0, 2u); });
  h.barrier();
  h.mbarrier_wait(bar, 0, 0u);
  ir::Kernel hang = h.build();
  UsageError e = usage_error_of([&] { ir::interpret(hang, {.grid = {1}, .block = {64}}); });
  CHECK_THAT(e.what(), Contains("deadlock") && Contains("mbarrier"));
}

TEST_CASE("core: PTX of the new instruction forms, assembled for their targets", "[codegen][core][nvjitlink]") {
  ir::KernelBuilder b("forms");
  auto out = b.param<uint32_t*>("out");
  auto bar = b.shared<uint64_t>(2, 1024);
  auto tid = b.thread_idx_x();
  ir::Value a = b.shared_addr(bar, 1u);
  b.if_(tid == 0u, [&] { b.mbarrier_init(bar, 1, 1u); });
  b.fence_proxy_async();
  b.barrier();
  b.mbarrier_arrive_expect_tx(bar, 1, 0u);
  ir::Value done = b.mbarrier_try_wait(bar, 1, 0u);
  out[tid] = ir::select(done, a, 0u);
  ir::Kernel k = b.build();
  std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  INFO(ptx);
  CHECK_THAT(ptx, Contains(".shared .align 1024 .b8"));
  CHECK_THAT(ptx, Contains("\tfence.proxy.async.shared::cta;\n"));
  CHECK_THAT(ptx, Contains("\tmbarrier.init.shared::cta.b64 ["));
  CHECK_THAT(ptx, Contains("\tmbarrier.arrive.expect_tx.shared::cta.b64 _, ["));
  CHECK_THAT(ptx, Contains("\tmbarrier.try_wait.parity.shared::cta.b64 %p"));
  CHECK(test::link_ptx(ptx, "sm_90", k.name()).cubin.size() > 4);
  // expect_tx and fence.proxy.async are sm_90 instructions
  CHECK(usage_error_of([&] { (void)codegen::emit_ptx(k, {"sm_80", 9, 0}); }).op() == "fence_proxy_async");

  ir::KernelBuilder c("forms80");  // mbarriers on sm_80: test_wait
  auto o = c.param<uint32_t*>("out");
  auto m = c.shared<uint64_t>(1);
  c.if_(c.thread_idx_x() == 0u, [&] { c.mbarrier_init(m, 0, 1u); });
  c.barrier();
  c.if_(c.thread_idx_x() == 0u, [&] { c.mbarrier_arrive(m, 0); });
  ir::Value ok = c.mbarrier_try_wait(m, 0, 0u);
  o[c.thread_idx_x()] = ir::cast<uint32_t>(ok);
  ir::Kernel k80 = c.build();
  std::string p80 = codegen::emit_ptx(k80, {"sm_80", 9, 0});
  CHECK_THAT(p80, Contains("mbarrier.test_wait.parity.shared::cta.b64"));
  CHECK_THAT(p80, Contains("mbarrier.arrive.shared::cta.b64 _, ["));
  CHECK(test::link_ptx(p80, "sm_80", k80.name()).cubin.size() > 4);
}

TEST_CASE("core: the op table defines every op once", "[ir][core]") {
  std::set<std::string> names;
  for (int o = 0; o < ir::kOpCount; ++o) {
    const ir::OpDef& d = ir::op_def(static_cast<ir::Op>(o));
    INFO(d.name);
    CHECK(static_cast<int>(d.op) == o);
    CHECK(names.insert(d.name).second);
    CHECK(d.family < ir::Family::kCount);
    CHECK(d.min_sm >= 80);
  }
  CHECK(std::string(ir::op_name(ir::Op::Rcp)) == "rcp");
  CHECK((ir::op_def(ir::Op::Exp).types & ir::TC::F64) == 0);   // exp has no f64 form
  CHECK((ir::op_def(ir::Op::Sqrt).types & ir::TC::F64) != 0);  // sqrt has one
}

TEST_CASE("core: wgmma writes a register array asynchronously; the verifier guards it", "[ir][core][verifier]") {
  // acc += A * B (m64n64k16, f16), then a store after the wait.
  auto build = [](int variant) {
    ir::KernelBuilder b("wgmma_acc");
    auto da = b.param<uint64_t>("desc_a");
    auto db = b.param<uint64_t>("desc_b");
    auto out = b.param<float*>("out");
    auto acc = b.array<float>(32, 0.0f);
    auto acc2 = b.array<float>(32, 0.0f);
    b.wgmma_fence();
    b.wgmma(acc, da, db, ir::Scalar::F16);
    b.wgmma(acc, da, db, ir::Scalar::F16);  // chaining on the same accumulator is allowed
    b.wgmma_commit_group();
    if (variant == 1) out[0] = acc[0];       // read before the wait
    if (variant == 2) acc[3] = 1.0f;         // write before the wait
    b.wgmma(acc2, da, db, ir::Scalar::BF16);
    b.wgmma_commit_group();
    b.wgmma_wait_group(1);                   // the first group is done, the second may not be
    out[1] = acc[1];
    if (variant == 3) out[2] = acc2[0];      // still in flight
    b.if_(b.warp_id() / 4u == 0u, [&] {
      if (variant == 4) b.wgmma_wait_group(0);  // waits on one path only
    });
    if (variant == 4) out[3] = acc2[0];
    b.wgmma_wait_group(0);
    for (int k = 0; k < 32; ++k) out[4 + k] = acc2[k];
    return b.build();
  };
  ir::Kernel ok = build(0);
  std::string ptx = codegen::emit_ptx(ok, {"sm_90a", 9, 0});
  CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f"));
  CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%f"));
  CHECK_THAT(ptx, Contains("wgmma.wait_group.sync.aligned 1;"));
  CHECK(ptx.find(".local") == std::string::npos);
  jit::LinkResult r = test::link_ptx(ptx, "sm_90a", ok.name());
  CHECK(r.cubin.size() > 4);
  CHECK(jit::parse_resources(r.info_log, 0).local_bytes == 0);
  for (int v = 1; v <= 4; ++v) {
    INFO("variant " << v);
    UsageError e = usage_error_of([&] { build(v); });
    CHECK_THAT(e.what(), Contains("asynchronous op") && Contains("wgmma_wait_group"));
  }
  CHECK(usage_error_of([&] { (void)codegen::emit_ptx(ok, {"sm_90", 9, 0}); }).op() == "wgmma_fence");
  ir::KernelBuilder bad("wgmma_bad");
  auto d = bad.param<uint64_t>("d");
  auto small = bad.array<float>(3, 0.0f);
  CHECK(usage_error_of([&] { bad.wgmma(small, d, d, ir::Scalar::F16); }).op() == "wgmma");
  ir::KernelBuilder lane("wgmma_lane");  // a warpgroup op under a lane condition
  auto dl = lane.param<uint64_t>("d");
  auto al = lane.array<float>(4, 0.0f);
  lane.if_(lane.lane_id() == 0u, [&] { lane.wgmma(al, dl, dl, ir::Scalar::F16); });
  CHECK_THAT(usage_error_of([&] { lane.build(); }).what(), Contains("divergent"));
}

TEST_CASE("core: wgmma with A from registers (16-bit fragments, B from shared memory)", "[ir][core][verifier][nvjitlink]") {
  // acc (m64n64) += A (4 bf16x2 registers: an accumulator converted in place) x B (MN-major descriptor).
  ir::KernelBuilder b("wgmma_rs");
  auto db = b.param<uint64_t>("desc_b");
  auto out = b.param<float*>("out");
  auto x = b.param<float>("x");
  auto acc = b.array<float>(32, 0.0f);
  std::vector<ir::Value> a;
  for (int k = 0; k < 4; ++k) a.push_back(ir::pack2(ir::cast<kaio::bfloat16>(x * float(k)), ir::cast<kaio::bfloat16>(x)));
  b.wgmma_fence();
  b.wgmma(acc, a, db, ir::Scalar::BF16, true);
  b.wgmma_commit_group();
  b.wgmma_wait_group(0);
  for (int k = 0; k < 32; ++k) out[k] = acc[k];
  const ir::Kernel k = b.build();
  CHECK_THAT(k.print(), Contains(".b_mn.a_reg"));
  const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
  CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%f") && Contains("}, {%r") &&
                      Contains(", 1, 1, 1;"));
  const jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
  CHECK(jit::parse_resources(r.info_log, 0).local_bytes == 0);
  // Misuse names the op: A registers of the wrong type or count, a non-16-bit type.
  ir::KernelBuilder bad("wgmma_rs_bad");
  auto d = bad.param<uint64_t>("d");
  auto y = bad.param<float>("y");
  auto acc2 = bad.array<float>(32, 0.0f);
  std::vector<ir::Value> f16 = {ir::pack2(ir::cast<kaio::half>(y), ir::cast<kaio::half>(y))};
  f16.resize(4, f16[0]);
  CHECK_THAT(usage_error_of([&] { bad.wgmma(acc2, f16, d, ir::Scalar::BF16); }).what(), Contains("bf16x2"));
  CHECK_THAT(usage_error_of([&] { bad.wgmma(acc2, std::vector<ir::Value>(f16.begin(), f16.begin() + 2), d, ir::Scalar::F16); }).what(),
             Contains("4 registers"));
  CHECK(usage_error_of([&] { bad.wgmma(acc2, f16, d, ir::Scalar::F32); }).op() == "wgmma");
}
