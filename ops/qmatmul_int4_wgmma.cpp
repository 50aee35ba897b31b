// W4A16 on Hopper (sm_90a): Y = X . dequant(W) + bias computed as Y^T = W^T . X^T on
// warpgroup MMA, with the dequantised weights as wgmma's A operand straight from registers
// (no 16-bit copy of the weights in shared memory) and the activations as B from shared
// memory.
//
//   warpgroup 0     the producer: one thread issues each k-step's TMA loads into a ring of
//                   stages: the activation tile (BX rows x 64 k, 128-byte swizzled: wgmma's
//                   K-major B), the packed words (8 word rows x 128 columns), and two rows of
//                   scales and zeros (the groups the step touches; group 32 spans two)
//   warpgroups 1-2  the consumers: each owns 64 of the tile's 128 weight columns (the m64
//                   rows of Y^T) x BX activation rows (wgmma's n), f32 accumulators
//
// A fragment. For wgmma's k16 slice kk, thread (g = lane / 4, t = lane % 4) of warp w holds
// rows (weight columns) 16w + g and 16w + g + 8 at k 2t, 2t + 1 (registers 0, 1) and 2t + 8,
// 2t + 9 (registers 2, 3). The packed layout (ops/qmatmul.h) keeps 8 consecutive k of one
// column in a word with elements 2j, 2j + 1 in nibbles j, j + 4, so k 2t, 2t + 1 of word row
// 2kk are its pair t, and k 2t + 8, 2t + 9 pair t of word row 2kk + 1: each register is one
// word shifted by 4t and put through the magic-number dequantisation (int4_pair), with no
// reordering of the weights and the same single rounding as the other paths.
//
// Each slice is its own wgmma group: a thread dequantises slice kk while the tensor cores
// run the slices before it, and waits (wgmma_wait_group) only for the group four slices back
// (two with BX 256), whose registers it then reuses. The stage of step s goes back to the
// producer at the end of step s + 1 (by then its last group is complete). The per-step
// dequantisation is the same for every tile height, so only 256-row tiles give the tensor
// cores enough work to hide it (bench/NOTES.md: 128 rows run at 52-54% of cuBLAS, 256 at
// 89-105%).
//
// Epilogue: Y is the transpose of the accumulators, so each consumer writes its 64 columns x
// BX rows of Y as 16-bit elements into a 128-byte-swizzled staging buffer (the rows a warp
// writes at once fall in different 16-byte chunks: no bank conflicts) and one TMA store per
// tile, clipped to m x n by the map, writes them. The grid is persistent (one block per SM,
// kernel::TileScheduler), so the next tile's loads run under this tile's epilogue.
#include <algorithm>
#include <string>

#include "kaio/ir/layouts.h"
#include "kaio/jit/device.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/kernel/tile_scheduler.h"
#include "kaio/ops/kernel/warp_specialized.h"
#include "kaio/ops/qmatmul_common.h"
#include "kaio/ops/qmatmul_int4_kernels.h"

namespace kaio::ops::detail {

namespace {

using ir::Scalar;
using ir::Value;

constexpr uint32_t kBN = 128;  // weight columns per tile: 64 per consumer warpgroup
constexpr uint32_t kBK = 64;   // k per stage: one 128-byte row of 16-bit activations
constexpr uint32_t kWordRows = kBK / 8;
constexpr uint32_t kConsumers = 2;
constexpr uint32_t kGroupRows = 8;  // grouped raster: tile rows per group
constexpr uint32_t kSlices = kBK / 16;

// Shared memory, in bytes: the stages of each part side by side (activations first: their
// 1024-byte alignment for the swizzle), the ring's barriers, then the consumers' staging.
struct Layout {
  uint32_t bx, S;
  bool zeros;
  uint32_t x_bytes() const { return bx * 128; }
  static constexpr uint32_t w_bytes() { return kWordRows * kBN * 4; }
  static constexpr uint32_t s_bytes() { return 2 * kBN * 2; }
  static constexpr uint32_t z_bytes() { return 2 * kBN; }
  uint32_t w_off() const { return S * x_bytes(); }
  uint32_t s_off() const { return w_off() + S * w_bytes(); }
  uint32_t z_off() const { return s_off() + S * s_bytes(); }
  uint32_t bar_off() const { return z_off() + S * z_bytes(); }
  uint32_t y_off() const { return (bar_off() + 2 * S * 8 + 1023) / 1024 * 1024; }
  uint32_t y_bytes() const { return bx * 64 * 2; }  // one consumer's 64 columns x BX rows
  uint32_t total() const { return y_off() + kConsumers * y_bytes(); }
  uint32_t stage_tx() const { return x_bytes() + w_bytes() + s_bytes() + (zeros ? z_bytes() : 0); }
};
Layout layout_of(const Int4Config& c) { return {c.bx, c.bx == 256 ? 4u : 6u, c.zeros}; }

struct Sig {
  kernel::TensorMap x_map{"x_map"}, w_map{"w_map"}, s_map{"s_map"};
  kernel::Opt<kernel::TensorMap> z_map{{"z_map"}};
  kernel::TensorMap y_map{"y_map"};
  kernel::Opt<kernel::Ptr> bias{{"bias", Scalar::F16, true}};
  kernel::Param<uint32_t> n{"n"}, k{"k"}, gshift{"gshift"}, tiles_m{"tiles_m"}, tiles_n{"tiles_n"};
  explicit Sig(const Int4Config& c) {
    z_map.on = c.zeros;
    bias.on = c.bias;
    bias.elem = c.dtype;
  }
  auto fields() { return std::tie(x_map, w_map, s_map, z_map, y_map, bias, n, k, gshift, tiles_m, tiles_n); }
};

thread_local uint32_t force_mma = 0, force_bx = 0;  // set_int4_override

}  // namespace

void set_int4_override(uint32_t mma, uint32_t bx) {
  force_mma = mma;
  force_bx = bx;
}

// 256-row tiles run at 1.6-1.7x the rate of 128-row ones (bench/quant, H100: the same
// dequantisation per k-step feeds twice the MMAs), but make half as many tiles: take 256
// unless 128 fills the machine in fewer rounds than 256's by that factor (m = 512 x n = 4096
// is one round of 128 tiles on 132 SMs, and half the SMs with 256).
uint32_t int4_wgmma_rows(uint32_t m, uint32_t n, uint32_t sms) {
  if (force_bx > 1) return force_bx;
  const uint64_t tn = (n + kBN - 1) / kBN, sm = std::max(1u, sms);
  const uint64_t rounds128 = ((m + 127) / 128 * tn + sm - 1) / sm, rounds256 = ((m + 255) / 256 * tn + sm - 1) / sm;
  return double(rounds256) * 1.2 <= double(rounds128) ? 256 : 128;
}

bool int4_wgmma_takes(uint32_t m, bool maps_ok) {
  if (force_mma || m <= 16 || !maps_ok) return false;
  if (jit::interpret_mode()) return false;  // the interpreter models neither TMA nor wgmma
  const jit::DeviceInfo& d = jit::device_info();
  return d.present && d.hopper();
}

ir::Kernel build_int4_wgmma(const Int4Config& c) {
  if (c.bx != 128 && c.bx != 256) throw InternalError("matmul_int4: the Hopper path takes 128 or 256 rows per tile");
  const Layout L = layout_of(c);
  const uint32_t S = L.S;
  const Scalar pair = c.dtype == Scalar::F16 ? Scalar::F16x2 : Scalar::BF16x2;
  ir::KernelBuilder b(c.str());
  b.launch_bounds(kernel::WarpSpecialized::threads(kConsumers), 1);
  Sig sig(c);
  kernel::declare(b, sig);
  Value n = sig.n.ir, k = sig.k.ir, gshift = sig.gshift.ir;
  Value work = sig.tiles_m.ir * sig.tiles_n.ir, steps = (k + (kBK - 1)) / kBK;
  Value xs = b.dynamic_shared(c.dtype, 1024);  // activations, scales and Y's staging (16-bit)
  Value ws = b.dynamic_shared(Scalar::U32, 1024);
  Value zs = b.dynamic_shared(Scalar::U8, 1024);
  Value bars = b.dynamic_shared<uint64_t>(1024);
  const kernel::MbarrierRing ring(b, bars, L.bar_off() / 8, S, kConsumers * 4u);
  const kernel::TmaTile tx{.rows = c.bx, .esize = 2, .k_major = true, .base = 0};
  const kernel::TileScheduler sched{.tiles_m = sig.tiles_m.ir, .tiles_n = sig.tiles_n.ir, .cluster_n = 1, .group_rows = kGroupRows};
  Value tid = b.thread_idx_x(), warp = b.warp_id(), lane = b.lane_id();
  Value zero = b.constant<uint32_t>(0u);
  b.if_(tid == 0u, [&] { ring.init(); });
  b.barrier();

  const kernel::WarpSpecialized wsk(b, kConsumers);
  wsk.run(warp, [&] {  // ---- producer: one thread issues every stage's loads
    b.if_(tid == 0u, [&] {
      auto step = b.var<uint32_t>(0u);
      b.for_(b.block_idx_x(), work, b.grid_dim_x(), [&](Value w) {
        const kernel::TileScheduler::Tile t = sched.at(w);
        Value m0 = t.m * c.bx, n0 = t.n * kBN;
        b.for_(0u, steps, [&](Value s) {
          const kernel::MbarrierRing::Slot slot = ring.slot(step);
          ring.acquire(slot);
          ring.expect(slot, L.stage_tx());
          Value k0 = s * kBK, grow = k0 >> gshift;  // the first scale row the step touches
          Value full = ring.full(slot);
          tx.load(b, xs, slot.stage * tx.stage_elements(), sig.x_map.ir, k0, m0, zero, bars, [&] { return full; }, 1, zero,
                  Value());
          b.tma_load(ws, slot.stage * (L.w_bytes() / 4) + L.w_off() / 4, sig.w_map.ir, {n0, k0 / 8u}, bars, full);
          b.tma_load(xs, slot.stage * (L.s_bytes() / 2) + L.s_off() / 2, sig.s_map.ir, {n0, grow}, bars, full);
          if (c.zeros) b.tma_load(zs, slot.stage * L.z_bytes() + L.z_off(), sig.z_map.ir, {n0, grow}, bars, full);
          step = slot.step + 1u;
        });
      });
    });
  }, [&](Value wg) {  // ---- consumers
    Value w4 = warp % 4u, g = lane / 4u, shift = (lane % 4u) * 4u;
    Value r0 = wg * 64u + w4 * 16u + g;  // this thread's weight columns in the tile: r0 and r0 + 8
    Value desc_x = tx.descriptor(b, xs, zero);
    const kernel::AccTile acc(b, 1, 1, c.bx / 8);  // a warp's 16 weight columns x BX activation rows
    Value y_base = wg * (L.y_bytes() / 2) + L.y_off() / 2;  // this consumer's staging (16-bit elements)
    Value leader = w4 == 0u && lane == 0u;
    Value row2 = b.constant<uint32_t>(32u) >> gshift;  // the scale row of slices 2 and 3: 1 for group 32, else 0
    // The magic pair in a register: gshift is 5..7, so gshift >> 8 is 0, but ptxas cannot
    // know it and keeps the value in a register, which makes the dequantisation's and + or
    // one LOP3 (an immediate takes one of its operands only).
    Value magic = (gshift >> 8u) | (c.dtype == Scalar::F16 ? 0x64006400u : 0x43004300u);
    // Slices in flight: four with BX 128; two with BX 256, whose 128 accumulators leave no
    // room for four slices' fragments in the 168 registers a thread has (ptxas then
    // serialises every wgmma).
    const uint32_t in_flight = c.bx == 256 ? 2 : kSlices;
    auto step = b.var<uint32_t>(0u);
    b.for_(b.block_idx_x(), work, b.grid_dim_x(), [&](Value w) {
      const kernel::TileScheduler::Tile t = sched.at(w);
      Value m0 = t.m * c.bx, n0 = t.n * kBN;
      acc.zero();
      b.for_(0u, steps, [&](Value s) {
        const kernel::MbarrierRing::Slot slot = ring.slot(step);
        ring.wait(slot);
        Value db = tx.stage_descriptor(desc_x, slot.stage);
        Value wbase = slot.stage * (L.w_bytes() / 4) + (L.w_off() / 4) + r0;
        Value sbase = slot.stage * (L.s_bytes() / 2) + (L.s_off() / 2) + r0;
        Value zbase = slot.stage * L.z_bytes() + L.z_off() + r0;
        Value s2[2], z2[2];
        auto group = [&](Value row) {  // the scale and zero pairs of columns r0, r0 + 8 at scale row `row`
          for (uint32_t h = 0; h < 2; ++h) {
            Value sv = xs[sbase + row * kBN + h * 8];
            s2[h] = ir::pack2(sv, sv);
            Value zu = c.zeros ? ir::cast<uint32_t>(Value(zs[zbase + row * kBN + h * 8])) : b.constant<uint32_t>(8u);
            z2[h] = ir::bitcast(int4_zero_magic(zu, c.dtype), pair);
          }
        };
        for (uint32_t kk = 0; kk < kSlices; ++kk) {
          if (kk == 0) group(zero);
          if (kk == kSlices / 2) group(row2);
          std::vector<Value> a;  // (r0, k 2t), (r0 + 8, k 2t), (r0, k 2t + 8), (r0 + 8, k 2t + 8)
          for (uint32_t hk = 0; hk < 2; ++hk)
            for (uint32_t h = 0; h < 2; ++h) {
              Value q = ws[wbase + (2 * kk + hk) * kBN + h * 8];
              a.push_back(int4_pair(q >> shift, z2[h], s2[h], pair, magic));
            }
          b.wgmma_fence();  // this slice's registers were written since the last wgmma
          b.wgmma(acc.array(0), a, db + b.constant<uint64_t>(kk * tx.k_step_bytes(16) / 16), c.dtype, false);
          b.wgmma_commit_group();
          b.wgmma_wait_group(in_flight - 1);  // the group `in_flight` slices back is done
        }
        // ...so the previous step's last group is too: its stage goes back to the producer.
        // (Here, not right after the slice whose wait completes it: a branch between the
        // wgmmas makes ptxas wait for each one before the next, bench/NOTES.md.)
        b.if_(s > 0u, [&] { ring.release(ring.stage_of(slot.step + (S - 1)), lane); });
        step = slot.step + 1u;
      });
      b.wgmma_wait_group(0);
      Value last = step;
      b.if_(steps > 0u, [&] { ring.release(ring.stage_of(last + (S - 1)), lane); });

      // Epilogue: bias, the 16-bit type, Y's rows and columns swapped into the staging buffer.
      Value bias[2];
      for (uint32_t h = 0; h < 2; ++h) {
        bias[h] = b.constant<float>(0.0f);
        if (!c.bias) continue;
        Value col = n0 + r0 + h * 8u;
        ir::Var v = b.var<float>(0.0f);
        b.if_(col < n, [&] { v = ir::cast<float>(Value(sig.bias.ir[col])); });
        bias[h] = v;
      }
      b.if_(leader, [&] { b.bulk_wait_group(0, true); });  // the last tile's store has read the buffer
      wsk.consumer_sync(wg);
      // Register r of n8 block j is Y's row 8j + (its row in block 0) and column wcol(r):
      // blocks are 8 rows (1024 bytes) apart and the swizzle depends on the row mod 8 only, so
      // each r has one address and the blocks add immediates.
      Value at[4];
      for (uint32_t r = 0; r < 4; ++r) {
        Value wcol = w4 * 16u + ir::frag_row(kernel::AccTile::layout(), lane, int(r));  // Y's column among these 64
        at[r] = y_base + kernel::swizzle128(acc.col(lane, 0, r), wcol * 2u) / 2u;
      }
      for (uint32_t j = 0; j < c.bx / 8; ++j)
        for (uint32_t r = 0; r < 4; ++r) {
          Value v = acc.at(0, 0, j, r).get();
          if (c.bias) v = v + bias[r / 2];
          xs[at[r] + j * (8 * kernel::kSwizzleBytes / 2)] = ir::cast(v, ir::Type::scalar(c.dtype));
        }
      b.fence_proxy_async();  // the threads' writes, before the TMA store (async proxy) reads them
      wsk.consumer_sync(wg);
      b.if_(leader, [&] {
        b.tma_store(sig.y_map.ir, {n0 + wg * 64u, m0}, xs, y_base);
        b.bulk_commit_group();
      });
    });
  });
  // The last TMA stores complete before the block ends (their shared sources must stay).
  b.if_(warp >= 4u && warp % 4u == 0u && lane == 0u, [&] { b.bulk_wait_group(0, false); });
  return b.build();
}

void launch_int4_wgmma(const jit::CompiledKernel& kern, const Int4Config& c, uint64_t x, const Int4Weights& w, uint64_t y,
                       uint32_t m, uint64_t bias, const jit::Stream* stream) {
  const Layout L = layout_of(c);
  const uint64_t k = w.k, n = w.n, groups = w.k / w.group;
  auto map = [](Scalar dtype, uint64_t addr, std::vector<uint64_t> dims, std::vector<uint64_t> strides,
                std::vector<uint32_t> box, jit::TensorMapSwizzle sw) {
    jit::TensorMapTiled t;
    t.dtype = dtype;
    t.global_address = addr;
    t.global_dims = std::move(dims);
    t.global_strides = std::move(strides);
    t.box_dims = std::move(box);
    t.swizzle = sw;
    t.l2_promotion = jit::TensorMapL2Promotion::B256;
    return jit::encode_tensor_map_tiled(t);
  };
  using jit::TensorMapSwizzle;
  Sig sig(c);
  sig.x_map.host = map(c.dtype, x, {k, m, 1}, {k * 2, k * 2 * m}, {kBK, c.bx, 1}, TensorMapSwizzle::B128);
  sig.w_map.host = map(Scalar::U32, w.q, {n, k / 8}, {n * 4}, {kBN, kWordRows}, TensorMapSwizzle::None);
  sig.s_map.host = map(c.dtype, w.scales, {n, groups}, {n * 2}, {kBN, 2}, TensorMapSwizzle::None);
  if (c.zeros) sig.z_map.host = map(Scalar::U8, w.zeros, {n, groups}, {n}, {kBN, 2}, TensorMapSwizzle::None);
  sig.y_map.host = map(c.dtype, y, {n, m}, {n * 2}, {64, c.bx}, TensorMapSwizzle::B128);
  sig.bias.host = bias;
  sig.n.host = w.n;
  sig.k.host = w.k;
  sig.gshift.host = w.group == 32 ? 5 : w.group == 64 ? 6 : 7;
  sig.tiles_m.host = (m + c.bx - 1) / c.bx;
  sig.tiles_n.host = (w.n + kBN - 1) / kBN;
  const kernel::PackedArgs args = kernel::pack(sig);
  const uint32_t work = sig.tiles_m.host * sig.tiles_n.host;
  kern.launch_packed({.grid = {std::min(work, jit::device_info().sm_count), 1, 1},
                      .block = {kernel::WarpSpecialized::threads(kConsumers)},
                      .shared_bytes = L.total(),
                      .stream = stream},
                     args.data(), args.size());
}

}  // namespace kaio::ops::detail
