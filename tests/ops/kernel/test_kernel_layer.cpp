// The kernel layer's nouns (ops/kernel/), each run in the interpreter against a host model,
// and assembled by nvJitLink for the archs that have their instructions:
//   MbarrierRing   a producer and two consumer warps through rings of 2..8 stages
//   CpAsyncRing    a copy through rings of 2..4 cp.async stages, read by other threads
//   ThreadRing     per-thread cp.async rings of 3..6 stages, no barrier
//   AccTile        row max / row sum across the m16n8 fragments of a warp vs float64
//   SharedTile     a store / load round trip through every layout and swizzle
//   signature      one struct declares the parameters and packs the arguments
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/half.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/ir/layouts.h"
#include "kaio/jit/compile.h"
#include "kaio/ops/kernel/online_softmax.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"

using namespace kaio;
namespace kn = kaio::ops::kernel;

namespace {

void assembles(const ir::Kernel& k, std::initializer_list<const char*> archs) {
  for (const char* arch : archs) {
    INFO(k.name() << " for " << arch);
    CHECK_NOTHROW(jit::compile(k, {.arch = arch, .use_cache = false}));
  }
}

// The start of the cp.async ring tests' kernels: a float input, a float output and 16-byte
// aligned dynamic shared floats (one 32-thread block: 128 floats a stage).
struct CopyRingKernel {
  ir::KernelBuilder b;
  ir::Value in, out, smem;
  explicit CopyRingKernel(const std::string& name)
      : b(name), in(b.param<const float*>("in")), out(b.param<float*>("out")), smem(b.dynamic_shared<float>(16)) {}
};

// Warp 0 (one thread) produces N steps of 32 values into a ring of S stages; warps 1 and 2
// each copy every step out. A stage reused before both consumers released it, or read
// before it was filled, shows up as a wrong value (or as the interpreter's race report).
ir::Kernel ring_kernel(uint32_t S, uint32_t N) {
  ir::KernelBuilder b("ring_" + std::to_string(S));
  auto out = b.param<uint32_t*>("out");
  auto data = b.shared<uint32_t>(S * 32);
  auto bars = b.shared<uint64_t>(2 * S);
  const kn::MbarrierRing ring(b, bars, 0, S, /*consumer warps*/ 2);
  ir::Value warp = b.warp_id(), lane = b.lane_id();
  b.if_(b.thread_idx_x() == 0u, [&] { ring.init(); });
  b.barrier();
  b.if_(warp == 0u, [&] {
    b.if_(lane == 0u, [&] {
      auto step = b.var<uint32_t>(0u);
      b.for_(0u, N, [&](ir::Value t) {
        const auto slot = ring.slot(step);
        ring.acquire(slot);
        for (uint32_t i = 0; i < 32; ++i) data[slot.stage * 32u + i] = ir::cast<uint32_t>(t * 1000u + i);
        ring.arrive(slot);
        step = slot.step + 1u;
      });
    });
  }).else_([&] {
    auto step = b.var<uint32_t>(0u);
    b.for_(0u, N, [&](ir::Value t) {
      const auto slot = ring.slot(step);
      ring.wait(slot);
      ir::Value x = data[slot.stage * 32u + lane];
      out[((warp - 1u) * N + ir::cast<uint32_t>(t)) * 32u + lane] = x;
      // the warp's reads are done before lane 0 releases the stage (named barrier per warp)
      b.if_(warp == 1u, [&] { b.barrier(1, 32); }).else_([&] { b.barrier(2, 32); });
      ring.release(slot.stage, lane);
      step = slot.step + 1u;
    });
  });
  return b.build();
}

}  // namespace

TEST_CASE("kernel layer: an mbarrier ring of 2..8 stages, one producer and two consumers", "[kernel_layer][interp]") {
  for (uint32_t S : {2u, 3u, 4u, 5u, 8u}) {
    const uint32_t N = 3 * S + 1;  // three laps and one step: every parity flips
    INFO("stages " << S);
    const ir::Kernel k = ring_kernel(S, N);
    std::vector<uint32_t> out(2 * N * 32, 0xdeadbeefu);
    ir::interpret(k, {.grid = {1}, .block = {96}}, out);
    for (uint32_t c = 0; c < 2; ++c)
      for (uint32_t t = 0; t < N; ++t)
        for (uint32_t i = 0; i < 32; ++i) REQUIRE(out[(c * N + t) * 32 + i] == t * 1000 + i);
    assembles(k, {"sm_90", "sm_90a"});
  }
}

TEST_CASE("kernel layer: an mbarrier ring's stage_of is step % S (a mask for 2, 4, 8 stages)", "[kernel_layer][interp]") {
  for (uint32_t S : {2u, 3u, 4u, 6u, 8u}) {
    INFO("stages " << S);
    ir::KernelBuilder b("stage_of_" + std::to_string(S));
    auto out = b.param<uint32_t*>("out");
    auto base = b.param<uint32_t>("base");
    auto bars = b.shared<uint64_t>(2 * S);
    const kn::MbarrierRing ring(b, bars, 0, S, 1);
    ir::Value i = b.thread_idx_x() + base;
    out[b.thread_idx_x() * 2u] = ring.slot(i).stage;
    out[b.thread_idx_x() * 2u + 1u] = ring.stage_of(i + (S - 1));  // the stage of the step before
    const ir::Kernel k = b.build();
    for (uint32_t from : {0u, 0x7ffffff0u}) {
      std::vector<uint32_t> got(2 * 64, 0xdeadbeefu);
      ir::interpret(k, {.grid = {1}, .block = {64}}, got, from);
      for (uint32_t t = 0; t < 64; ++t) {
        const uint32_t step = from + t;
        REQUIRE(got[2 * t] == step % S);
        REQUIRE(got[2 * t + 1] == (step + S - 1) % S);
      }
    }
  }
}

TEST_CASE("kernel layer: a cp.async ring of 2..4 stages carries every step, read by other threads", "[kernel_layer][interp]") {
  for (uint32_t S : {2u, 3u, 4u}) {
    const uint32_t steps = 7;
    INFO("stages " << S);
    CopyRingKernel ck("cp_ring_" + std::to_string(S));
    ir::KernelBuilder& b = ck.b;
    ir::Value in = ck.in, out = ck.out, smem = ck.smem;
    ir::Value tid = b.thread_idx_x();
    kn::CpAsyncRing ring(b, S, b.constant<uint32_t>(0u));
    ring.pipeline(
        b.constant<uint32_t>(steps),
        [&](ir::Value t) {  // 16 bytes per thread and step; steps past the last load nothing
          b.if_(t < steps, [&] {
            b.cp_async(smem, ring.load_stage() * 128u + tid * 4u, in, ir::cast<uint64_t>((t * 32u + tid) * 4u), 16);
          });
        },
        [&](ir::Value t) {  // each thread reads its neighbour's chunk: the barrier published it
          ir::Value src = (tid ^ 1u) * 4u;
          for (uint32_t j = 0; j < 4; ++j)
            out[(t * 32u + tid) * 4u + j] = ir::Value(smem[ring.read_stage() * 128u + src + j]) * 2.0f;
        });
    const ir::Kernel k = b.build();
    std::vector<float> x(steps * 128), y(steps * 128, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f;
    ir::interpret(k, {.grid = {1}, .block = {32}, .shared_bytes = S * 128 * 4}, x, y);
    for (uint32_t t = 0; t < steps; ++t)
      for (uint32_t tid = 0; tid < 32; ++tid)
        for (uint32_t j = 0; j < 4; ++j)
          REQUIRE(y[(t * 32 + tid) * 4 + j] == 2.0f * x[(t * 32 + (tid ^ 1)) * 4 + j]);
    assembles(k, {"sm_80", "sm_90", "sm_90a"});
  }
}

// ThreadRing: each thread copies its own 16 bytes per step and reads them back, with a
// per-thread step count (threads 0..steps - 1 of a warp run different counts) and no barrier.
// A stage refilled before it was read, or read before its copy landed, is a wrong value (or
// the interpreter's report of a read of busy bytes).
TEST_CASE("kernel layer: a per-thread cp.async ring of 3..6 stages carries every step, no barrier", "[kernel_layer][interp]") {
  // 0..9 steps a thread, so trips of S steps end at every step of the unrolled body.
  for (uint32_t most : {9u, 3u})
  for (uint32_t S : {3u, 4u, 6u}) {
    INFO("stages " << S << " most " << most);
    CopyRingKernel ck("thread_ring_" + std::to_string(S) + "_" + std::to_string(most));
    ir::KernelBuilder& b = ck.b;
    ir::Value in = ck.in, out = ck.out, smem = ck.smem;
    ir::Value tid = b.thread_idx_x();
    ir::Value count = most - tid % 4u;  // most - 3 .. most steps
    kn::ThreadRing ring(b, S);
    ring.pipeline(
        count,
        [&](ir::Value stage, ir::Value t) {
          b.if_(t < count, [&] { b.cp_async(smem, stage * 128u + tid * 4u, in, ir::cast<uint64_t>((t * 32u + tid) * 4u), 16); });
          b.cp_async_commit_group();
        },
        [&](ir::Value stage, ir::Value t, const std::function<void()>& refill) {
          std::vector<ir::Value> v;
          for (uint32_t j = 0; j < 4; ++j) v.push_back(smem[stage * 128u + tid * 4u + j]);
          refill();
          for (uint32_t j = 0; j < 4; ++j) {  // weighted by t + 1: the step index is checked too
            ir::Value at = tid * 4u + j;
            out[at] = ir::Value(out[at]) + v[j] * ir::cast<float>(t + 1u);
          }
        });
    const ir::Kernel k = b.build();
    std::vector<float> x(most * 128), y(128, 0.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) * 0.25f;
    ir::interpret(k, {.grid = {1}, .block = {32}, .shared_bytes = S * 128 * 4}, x, y);
    for (uint32_t tid = 0; tid < 32; ++tid)
      for (uint32_t j = 0; j < 4; ++j) {
        double want = 0;
        for (uint32_t t = 0; t < most - tid % 4; ++t) want += double(x[(t * 32 + tid) * 4 + j]) * (t + 1);
        REQUIRE(y[tid * 4 + j] == float(want));
      }
    assembles(k, {"sm_80", "sm_90"});
  }
}

TEST_CASE("kernel layer: AccTile row max and row sum across a warp's fragments against float64", "[kernel_layer][interp]") {
  std::mt19937 rng(20261125);
  std::uniform_real_distribution<float> d(-8.0f, 8.0f);
  for (auto [mt, nt] : {std::pair{1u, 1u}, std::pair{2u, 3u}, std::pair{1u, 16u}}) {
    const uint32_t rows = 16 * mt, cols = 8 * nt;
    INFO("mt " << mt << " nt " << nt);
    ir::KernelBuilder b("acc_rows");
    auto x = b.param<const float*>("x");
    auto mx = b.param<float*>("mx");
    auto sum = b.param<float*>("sum");
    auto scaled = b.param<float*>("scaled");
    ir::Value lane = b.lane_id();
    const kn::AccTile acc(b, 1, mt, nt);
    for (uint32_t mi = 0; mi < mt; ++mi)
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (uint32_t r = 0; r < 4; ++r) acc.at(0, mi, ni, r) = x[acc.row(lane, mi, r) * cols + acc.col(lane, ni, r)];
    const std::vector<ir::Value> m = acc.row_reduce(0, kn::AccTile::Reduce::Max);
    const std::vector<ir::Value> s = acc.row_reduce(0, kn::AccTile::Reduce::Sum);
    std::vector<ir::Value> inv;
    for (ir::Value v : m) inv.push_back(1.0f / v);
    acc.scale_rows(0, inv);
    for (uint32_t mi = 0; mi < mt; ++mi)
      for (uint32_t h = 0; h < 2; ++h) {
        ir::Value row = acc.row(lane, mi, 2 * h);
        b.if_(lane % 4u == 0u, [&] {  // the quad's four lanes agree; one writes
          mx[row] = m[2 * mi + h];
          sum[row] = s[2 * mi + h];
        });
      }
    for (uint32_t mi = 0; mi < mt; ++mi)
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (uint32_t r = 0; r < 4; ++r) scaled[acc.row(lane, mi, r) * cols + acc.col(lane, ni, r)] = acc.at(0, mi, ni, r);
    const ir::Kernel k = b.build();
    std::vector<float> in(rows * cols), omx(rows, NAN), osum(rows, NAN), osc(rows * cols, NAN);
    for (float& v : in) v = d(rng);
    ir::interpret(k, {.grid = {1}, .block = {32}}, in, omx, osum, osc);
    for (uint32_t r = 0; r < rows; ++r) {
      double ref_max = -INFINITY, ref_sum = 0, abs_sum = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        ref_max = std::max(ref_max, double(in[r * cols + c]));
        ref_sum += in[r * cols + c];
        abs_sum += std::fabs(in[r * cols + c]);
      }
      REQUIRE(omx[r] == float(ref_max));                                           // max is exact
      REQUIRE(std::fabs(osum[r] - ref_sum) <= abs_sum * cols * 0x1p-24 + 1e-30);   // f32 additions
      for (uint32_t c = 0; c < cols; ++c)
        REQUIRE(std::fabs(osc[r * cols + c] - in[r * cols + c] / ref_max) <= std::fabs(in[r * cols + c] / ref_max) * 0x1p-22);
    }
    assembles(k, {"sm_80", "sm_90a"});
  }
}

TEST_CASE("kernel layer: online_softmax over two score tiles against float64; p_fragment rounds P", "[kernel_layer][interp]") {
  // One warp, one m16 tile of 4 n8 tiles (32 keys) folded twice: the running max and sum end
  // as those of all 64 keys, P as exp(s - max) of the second tile, and O (set to 1 before the
  // second fold) as the correction exp(m1 - m12). Row 0's first tile is fully masked (-inf):
  // the fold must give 0, never NaN.
  const uint32_t nt = 4, cols = 8 * nt;
  ir::KernelBuilder b("online_softmax_tiles");
  auto x = b.param<const float*>("x");  // [2][16][cols]
  auto om = b.param<float*>("m"), ol = b.param<float*>("l"), op = b.param<float*>("p"), oo = b.param<float*>("o");
  auto of = b.param<uint32_t*>("frag");  // [nt / 2][32 lanes][4]
  ir::Value lane = b.lane_id();
  const kn::AccTile S(b, 1, 1, nt), O(b, 1, 1, 1);
  std::vector<ir::Var> m{b.var<float>(-INFINITY), b.var<float>(-INFINITY)}, l{b.var<float>(0.0f), b.var<float>(0.0f)};
  for (uint32_t tile = 0; tile < 2; ++tile) {
    for (uint32_t ni = 0; ni < nt; ++ni)
      for (uint32_t r = 0; r < 4; ++r) S.at(0, 0, ni, r) = x[(tile * 16u + S.row(lane, 0, r)) * cols + S.col(lane, ni, r)];
    if (tile == 1)
      for (uint32_t r = 0; r < 4; ++r) O.at(0, 0, 0, r) = b.constant<float>(1.0f);
    kn::online_softmax(S, O, m, l, nt);
  }
  for (uint32_t h = 0; h < 2; ++h)
    b.if_(lane % 4u == 0u, [&] {
      om[S.row(lane, 0, 2 * h)] = m[h].get();
      ol[S.row(lane, 0, 2 * h)] = l[h].get();
    });
  for (uint32_t ni = 0; ni < nt; ++ni)
    for (uint32_t r = 0; r < 4; ++r) op[S.row(lane, 0, r) * cols + S.col(lane, ni, r)] = S.at(0, 0, ni, r).get();
  for (uint32_t r = 0; r < 4; ++r) oo[O.row(lane, 0, r) * 8u + O.col(lane, 0, r)] = O.at(0, 0, 0, r).get();
  for (uint32_t ks = 0; ks < nt / 2; ++ks) {
    const std::vector<ir::Value> a = kn::p_fragment(S, ks, ir::Scalar::F16);
    for (uint32_t i = 0; i < 4; ++i) of[(ks * 32u + lane) * 4u + i] = ir::bitcast(a[i], ir::Scalar::U32);
  }
  const ir::Kernel k = b.build();

  std::mt19937 rng(20261129);
  std::uniform_real_distribution<float> d(-6.0f, 6.0f);
  std::vector<float> in(2 * 16 * cols);
  for (float& v : in) v = d(rng);
  for (uint32_t c = 0; c < cols; ++c) in[c] = -INFINITY;  // row 0 of the first tile: no key
  std::vector<float> gm(16, NAN), gl(16, NAN), gp(16 * cols, NAN), go(16 * 8, NAN);
  std::vector<uint32_t> gf(nt / 2 * 32 * 4, 0xffffffffu);
  ir::interpret(k, {.grid = {1}, .block = {32}}, in, gm, gl, gp, go, gf);
  const double tol = 0x1p-18;  // ex2.approx (2^-22) of an argument rounded at |x log2 e| <= 18
  for (uint32_t r = 0; r < 16; ++r) {
    INFO("row " << r);
    double m1 = -INFINITY, m12 = -INFINITY;
    for (uint32_t c = 0; c < cols; ++c) m1 = std::max(m1, double(in[r * cols + c]));
    for (uint32_t t = 0; t < 2; ++t)
      for (uint32_t c = 0; c < cols; ++c) m12 = std::max(m12, double(in[(t * 16 + r) * cols + c]));
    double sum = 0;
    for (uint32_t t = 0; t < 2; ++t)
      for (uint32_t c = 0; c < cols; ++c) sum += std::exp(double(in[(t * 16 + r) * cols + c]) - m12);
    REQUIRE(gm[r] == float(m12));  // max is exact
    REQUIRE(std::fabs(gl[r] - sum) <= sum * (tol + 2 * cols * 0x1p-24));
    const double corr = std::exp(m1 - m12);  // 0 for row 0
    for (uint32_t c = 0; c < 8; ++c) REQUIRE(std::fabs(go[r * 8 + c] - corr) <= corr * tol);
    for (uint32_t c = 0; c < cols; ++c) {
      const double p = std::exp(double(in[(16 + r) * cols + c]) - m12);
      REQUIRE(std::fabs(gp[r * cols + c] - p) <= p * tol);
    }
  }
  // p_fragment: register i of k-step ks holds the pair of key tile 2 ks + i / 2 at C registers
  // 2 (i % 2) and 2 (i % 2) + 1 (row lane / 4 + 8 (i % 2), columns 2 (lane % 4) and + 1),
  // each P rounded to f16 (the m16n8 C layout, ir/mma_layout.h).
  for (uint32_t ks = 0; ks < nt / 2; ++ks)
    for (uint32_t ln = 0; ln < 32; ++ln)
      for (uint32_t i = 0; i < 4; ++i) {
        const uint32_t row = ln / 4 + 8 * (i % 2), col = 8 * (2 * ks + i / 2) + 2 * (ln % 4);
        const uint32_t want = uint32_t(half(gp[row * cols + col]).bits) | uint32_t(half(gp[row * cols + col + 1]).bits) << 16;
        REQUIRE(gf[(ks * 32 + ln) * 4 + i] == want);
      }
  assembles(k, {"sm_80", "sm_90a"});
}

TEST_CASE("kernel layer: shared tiles round-trip through every layout and swizzle", "[kernel_layer][interp]") {
  struct Case {
    const char* what;
    ir::SmemLayout lay;
    ir::Scalar elem;
    uint32_t cols;
  };
  const Case cases[] = {
      {"row-major f32", ir::SmemLayout::row_major(48), ir::Scalar::F32, 48},
      {"padded f16", ir::SmemLayout::padded(64, 8), ir::Scalar::F16, 64},
      {"swizzled 32B f16", ir::SmemLayout::swizzled(64, ir::Scalar::F16, 32), ir::Scalar::F16, 64},
      {"swizzled 64B f16", ir::SmemLayout::swizzled(64, ir::Scalar::F16, 64), ir::Scalar::F16, 64},
      {"swizzled 128B f16", ir::SmemLayout::swizzled(64, ir::Scalar::F16, 128), ir::Scalar::F16, 64},
      {"swizzled 128B f32", ir::SmemLayout::swizzled(32, ir::Scalar::F32, 128), ir::Scalar::F32, 32},
      {"swizzled 128B bf16, 128-wide", ir::SmemLayout::swizzled(128, ir::Scalar::BF16, 128), ir::Scalar::BF16, 128},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const kn::SharedTile tile{.lay = c.lay, .rows = 16, .base = 0, .count = 2};
    // every element has its own slot inside the tile
    std::set<uint32_t> slots;
    for (uint32_t r = 0; r < tile.rows; ++r)
      for (uint32_t col = 0; col < c.cols; ++col) {
        const uint32_t i = tile.at(r, col);
        REQUIRE(i < tile.elements());
        slots.insert(i);
      }
    REQUIRE(slots.size() == size_t(tile.rows) * c.cols);
    // threads store row by row into copy 1, then load column by column (other threads' elements)
    const uint32_t n = tile.rows * c.cols, threads = 128;
    ir::KernelBuilder b("tile_round_trip");
    auto in = b.param("in", ir::Type::pointer(c.elem, true));
    auto out = b.param("out", ir::Type::pointer(c.elem, false));
    auto sm = b.shared(c.elem, tile.total(), 128);
    ir::Value tid = b.thread_idx_x();
    for (uint32_t e = 0; e < n / threads; ++e) {
      ir::Value i = tid + e * threads;
      sm[tile.stage(b.constant<uint32_t>(1u)) + tile.at(i / c.cols, i % c.cols)] = in[i];
    }
    b.barrier();
    for (uint32_t e = 0; e < n / threads; ++e) {
      ir::Value i = tid + e * threads, row = i % tile.rows, col = i / tile.rows;
      out[row * c.cols + col] = sm[tile.stage(b.constant<uint32_t>(1u)) + tile.at(row, col)];
    }
    const ir::Kernel k = b.build();
    // host buffers of the tile's element type (bit patterns i * 2654435761), compared bit for bit
    auto pattern = [](uint32_t i) { return i * 2654435761u; };
    if (c.elem == ir::Scalar::F32) {
      std::vector<float> x(n), y(n, -1.0f);
      for (uint32_t i = 0; i < n; ++i) x[i] = float(int32_t(pattern(i) >> 8));
      ir::interpret(k, {.grid = {1}, .block = {threads}}, x, y);
      REQUIRE(y == x);
    } else {
      auto run = [&](auto make) {
        using T = decltype(make(0));
        std::vector<T> x(n), y(n, make(0xffff));
        for (uint32_t i = 0; i < n; ++i) x[i] = make(uint16_t(pattern(i) >> 16) & 0x7bff);  // finite
        ir::interpret(k, {.grid = {1}, .block = {threads}}, x, y);
        for (uint32_t i = 0; i < n; ++i) REQUIRE(y[i].bits == x[i].bits);
      };
      if (c.elem == ir::Scalar::F16) run([](uint16_t v) { return kaio::half::from_bits(v); });
      else run([](uint16_t v) { return kaio::bfloat16::from_bits(v); });
    }
    assembles(k, {"sm_80", "sm_90"});
  }
}

TEST_CASE("kernel layer: swizzle128 is the 128-byte swizzled layout in bytes", "[kernel_layer][interp]") {
  for (ir::Scalar elem : {ir::Scalar::F16, ir::Scalar::F32}) {
    const uint32_t es = uint32_t(ir::scalar_bytes(elem)), cols = 128 / es;
    const ir::SmemLayout lay = ir::SmemLayout::swizzled(cols, elem, 128);
    ir::KernelBuilder b("swizzle128");
    auto out = b.param<uint32_t*>("out");
    ir::Value t = b.global_id_x(), row = t / cols, col = t % cols;
    out[t * 2u] = kn::swizzle128(row, col * es);
    out[t * 2u + 1u] = lay.index(row, col) * es;
    std::vector<uint32_t> o(16 * cols * 2);
    ir::interpret(b.build(), {.grid = {1}, .block = {16 * cols}}, o);
    for (uint32_t i = 0; i < 16 * cols; ++i) REQUIRE(o[2 * i] == o[2 * i + 1]);
  }
}

namespace {
struct ScaleSig {
  kn::Ptr x{"x", ir::Scalar::F32, true}, y{"y", ir::Scalar::F32};
  kn::Param<float> alpha{"alpha"};
  kn::Param<uint32_t> n{"n"};
  kn::Opt<kn::Ptr> bias{{"bias", ir::Scalar::F32, true}};
  auto fields() { return std::tie(x, y, alpha, n, bias); }
};
ir::Kernel scale_kernel(bool with_bias) {
  ir::KernelBuilder b(with_bias ? "sig_scale_bias" : "sig_scale");
  ScaleSig s;
  s.bias.on = with_bias;
  kn::declare(b, s);
  ir::Value i = b.global_id_x();
  b.if_(i < s.n.ir, [&] {
    ir::Value v = s.alpha.ir * ir::Value(s.x.ir[i]);
    if (with_bias) v = v + ir::Value(s.bias.ir[i]);
    s.y.ir[i] = v;
  });
  return b.build();
}
}  // namespace

TEST_CASE("kernel layer: a signature struct declares the parameters and packs the arguments alike", "[kernel_layer]") {
  for (bool with_bias : {false, true}) {
    const ir::Kernel k = scale_kernel(with_bias);
    ScaleSig s;
    s.bias.on = with_bias;
    s.x.host = 0x1000;
    s.y.host = 0x2000;
    s.alpha.host = 2.5f;
    s.n.host = 77;
    s.bias.host = 0x3000;
    const kn::PackedArgs args = kn::pack(s);
    REQUIRE(args.size() == k.params().size());
    REQUIRE(args.size() == (with_bias ? 5u : 4u));
    const char* names[] = {"x", "y", "alpha", "n", "bias"};
    for (size_t i = 0; i < args.size(); ++i) CHECK(k.params()[i].name == names[i]);
    CHECK(args[0].kind == jit::detail::Arg::Pointer);
    CHECK(args[0].u == 0x1000);
    CHECK(args[2].kind == jit::detail::Arg::F32);
    CHECK(args[2].d == 2.5);
    CHECK(args[3].u == 77);
    if (with_bias) CHECK(args[4].u == 0x3000);
  }
}
