// The Hopper matmul engine (sm_90a): warp-specialised, TMA-fed warpgroup MMA.
//
//   warpgroup 0        the producer: one thread issues the TMA loads of each k-step's A and
//                      B tiles into a ring of STAGES shared-memory stages; the loads
//                      complete the stage's "full" mbarrier (transaction bytes)
//   warpgroups 1..C    the consumers (C = BM / consumer_m): each owns 64 rows of the BM x BN block
//                      tile and accumulates them with wgmma m64nBNk16 (k8 for tf32, k32 for
//                      e4m3 / e5m2: always 32 bytes of k, so descriptors step alike) straight
//                      from shared memory, then releases the stage on its "empty" mbarrier
//
// Shared tiles are written by TMA with 128-byte swizzling, the layout the wgmma
// descriptors describe (K-major: rows of 128 bytes along k, 8-row groups 1024 bytes
// apart; MN-major: 64-element rows along m or n, one 8 KiB box per 64 of them). Each
// operand's contiguous dimension is its tensor map's innermost one, so both layouts of A
// and B load without a transpose (the MN-major ones use wgmma's transposing form).
//
// Clusters of 2 along m: the two CTAs compute tile rows m0 and m0 + BM of the same columns;
// each loads half of the B tile and multicasts it to both, halving B's L2 traffic (along n,
// `cluster_n`: tile columns n0 and n0 + BN of the same rows, sharing A). A stage is then
// written by both producers, so each consumer warp releases it in both CTAs.
// Pipeline per consumer: wait full[s]; fence; wgmma x (BK / k); commit; wait until one
// group is in flight, then the previous step's stage is free: arrive on its empty[s]. The
// producer waits for empty[s] (parity of the ring's previous lap) before reusing stage s.
// The grid is persistent (one block per SM): the ring runs on from one tile to the next,
// so the next tile's loads overlap this tile's epilogue.
// Registers: a 64 x 256 consumer tile is 128 f32 accumulators per thread, which fits the
// 168 registers a 384-thread block gets (setmaxnreg would move registers from the producer
// to the consumers, but kernels linked by nvJitLink are compiled separately, where ptxas
// ignores it).
// Edges: the tensor maps zero-fill everything outside A and B, so partial tiles compute
// with zeros. C's TMA stores are clipped to m x n by its map (the launch takes that path
// only where a row of C is whole 16-byte chunks: a TMA store writes a row's last chunk
// whole); the register path stores only rows < m and columns < n.

//
// Written with the kernel layer (ops/kernel/): kernel::WarpSpecialized (the producer and
// consumer warpgroups, ping-pong order), kernel::MbarrierRing (the stages), kernel::TmaTile
// (the operand tiles, their descriptors and TMA loads), kernel::AccTile (the accumulators)
// and kernel::swizzle128 (C's staging chunks); the parameters are WgmmaSignature.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "kaio/ir/layouts.h"
#include "kaio/ir/mma_layout.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/kernel/tile_scheduler.h"
#include "kaio/ops/kernel/tma_store.h"
#include "kaio/ops/kernel/wgmma.h"
#include "kaio/ops/kernel/warp_specialized.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

using kernel::kSwizzleBytes;                          // the rows TMA writes and wgmma reads
constexpr uint32_t kGroupRows = 8;                     // grouped raster: tile rows per group
constexpr uint32_t kCChunkBytes = kernel::TmaStoreChunks::kChunkBytes;  // a TMA-store box of C: 64 rows of 128 bytes

uint32_t elem_bytes(ir::Scalar s) { return static_cast<uint32_t>(ir::scalar_bytes(s)); }

uint32_t wgmma_bk(ir::Scalar in) { return kSwizzleBytes / elem_bytes(in); }  // the k of a stage: 128 bytes

uint32_t stage_bytes(const MatmulVariant& v) { return (v.bm + v.bn) * kSwizzleBytes; }

// The C staging buffers of the TMA-store epilogue start here (after the stages and the
// barriers, 1024-aligned for the 128-byte swizzle).
uint32_t c_offset(const MatmulVariant& v) { return (stage_bytes(v) * v.stages + 2 * v.stages * 8 + 1023) / 1024 * 1024; }

uint32_t consumers_of(const MatmulVariant& v) { return v.pingpong ? 2 : v.bm / v.consumer_m; }

// The producer's registers when the consumers take the rest (MatmulVariant::consumer_regs).
constexpr uint32_t kProducerRegs = 40;

// After the C buffers: each consumer's copy of the fused epilogue's bias for its tile's
// columns (BN f32). Reserved in every kernel of the variant (its launch asks for the
// variant's size); the 128x256 rows then use all of an sm_90 block's shared memory.
uint32_t bias_offset(const MatmulVariant& v) {
  return c_offset(v) + consumers_of(v) * 2 * kCChunkBytes;  // two chunk buffers per consumer
}

uint32_t shared_bytes(const MatmulVariant& v) { return bias_offset(v) + consumers_of(v) * v.bn * 4; }

// The operand tiles of a stage: A (BM rows) then B (BN rows), each K-major or MN-major.
kernel::TmaTile tile_a(const MatmulVariant& v, const MatmulConfig& c) {
  return {.rows = v.bm, .esize = elem_bytes(c.in), .k_major = c.a == MatLayout::RowMajor, .base = 0};
}
kernel::TmaTile tile_b(const MatmulVariant& v, const MatmulConfig& c) {
  return {.rows = v.bn, .esize = elem_bytes(c.in), .k_major = c.b == MatLayout::ColMajor,
          .base = v.bm * kSwizzleBytes * v.stages / elem_bytes(c.in)};
}

// The boxes TMA moves: K-major operands one box of (BK, rows); MN-major ones boxes of
// (64 / 32 elements of 128 bytes, BK) side by side. With a cluster, each CTA loads
// 1 / cluster of the shared tile (B, or A with cluster_n) and multicasts it.
struct TmaBox {
  uint32_t inner, outer;  // box dimensions: contiguous elements (128 bytes), rows
};
TmaBox box_of(const MatmulVariant& v, ir::Scalar in, bool a, bool k_major) {
  const uint32_t rows = a ? v.bm : v.bn, per_row = kSwizzleBytes / elem_bytes(in);
  const uint32_t share = a == v.cluster_n ? v.cluster : 1;  // the shared operand is split among the cluster
  if (k_major) return {per_row, rows / share};
  return {per_row, wgmma_bk(in)};
}

// The kernel's parameters (see matmul.h), declared by build and packed by launch.
struct WgmmaSignature {
  kernel::TensorMap a_map{"a_map"}, b_map{"b_map"}, c_map{"c_map"};  // c_map: used when tma_store != 0
  kernel::Ptr c{"c"};
  kernel::Param<uint32_t> m{"m"}, n{"n"}, k{"k"}, ldc{"ldc"};
  kernel::Param<float> alpha{"alpha"}, beta{"beta"};
  kernel::Param<uint64_t> stride_c{"stride_c"};
  kernel::Param<uint32_t> splits{"splits"}, k_chunk{"k_chunk"}, tiles_n{"tiles_n"}, tiles_m{"tiles_m"};
  kernel::Param<uint32_t> work{"work"};            // tiles_m * tiles_n * batch * splits
  kernel::Param<uint32_t> pairs{"pairs"};          // 1: C(row, col) and C(row, col + 1) may be stored as one vector
  kernel::Param<uint32_t> tma_store{"tma_store"};  // 1: C through shared memory and TMA stores (beta == 0, no split)
  // FP8: per-tensor scales, one f32 each in device memory (bit 0 / 1 of `scales`: A's / B's
  // is given, else 1), read by the kernel so that scales computed on the GPU need no sync.
  kernel::Opt<kernel::Ptr> scale_a{{"scale_a", ir::Scalar::F32, true}}, scale_b{{"scale_b", ir::Scalar::F32, true}};
  kernel::Opt<kernel::Param<uint32_t>> scales{{"scales"}};
  explicit WgmmaSignature(const MatmulConfig& cfg) {
    c.elem = cfg.out;
    scale_a.on = scale_b.on = scales.on = elem_bytes(cfg.in) == 1;
  }
  auto fields() {
    return std::tie(a_map, b_map, c_map, c, m, n, k, ldc, alpha, beta, stride_c, splits, k_chunk, tiles_n, tiles_m, work, pairs,
                    tma_store, scale_a, scale_b, scales);
  }
};

// The config's checks that depend on its layouts (the row's own are valid()'s).
void check_config(const MatmulVariant& v, const MatmulConfig& c) {
  const ir::Scalar in = c.in;
  if ((in == ir::Scalar::F32 || elem_bytes(in) == 1) && (c.a != MatLayout::RowMajor || c.b != MatLayout::ColMajor))
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": " + ir::scalar_name(in) +
                                             " wgmma reads A row-major and B column-major only");
  const kernel::TmaTile ta = tile_a(v, c), tb = tile_b(v, c);
  const uint32_t per_row = ta.per_row(), CX = v.cluster;  // elements in a 128-byte row
  if (shared_bytes(v) > jit::device_info_for("sm_90a").smem_per_block_optin)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": its stages and C buffers need " +
                                             std::to_string(shared_bytes(v)) + " bytes of shared memory, more than an sm_90 block has");
  // A cluster splits the shared tile (B, or A along n) between its CTAs: by rows (K-major)
  // or by 128-byte boxes.
  const bool shared_k = v.cluster_n ? ta.k_major : tb.k_major;
  const uint32_t shared_rows = v.cluster_n ? v.bm : v.bn;
  const bool split_ok = shared_k ? shared_rows % (8 * CX) == 0 : shared_rows % per_row == 0 && (shared_rows / per_row) % CX == 0;
  if (!split_ok || (!ta.k_major && v.bm % per_row))
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name +
                                             ": a cluster's CTAs split the shared tile by 8 rows (K-major) or by 128-byte "
                                             "boxes, and an MN-major A needs BM a multiple of a 128-byte row");
}

ir::Kernel build(const MatmulVariant& v, const MatmulConfig& c) {
  check_config(v, c);
  const ir::Scalar in = c.in;
  const uint32_t es = elem_bytes(in), BK = wgmma_bk(in), S = v.stages;
  // Consumers: BM / consumer_m warpgroups sharing each tile, or two taking alternate tiles (ping-pong).
  const uint32_t consumers = consumers_of(v), threads = v.threads();
  const uint32_t per_stage = v.pingpong ? 1 : consumers;  // consumer warpgroups reading each stage
  const uint32_t halves = v.consumer_m / 64;              // m64 wgmma row blocks of a consumer's tile
  const bool fp8 = es == 1;
  const kernel::TmaTile ta = tile_a(v, c), tb = tile_b(v, c);
  const bool a_k = ta.k_major, b_k = tb.k_major;  // K-major operands
  const uint32_t CX = v.cluster;

  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (a_k ? "_r" : "_c") + (b_k ? "c" : "r") + detail::epilogue_suffix(c));
  b.launch_bounds(threads, 1);
  WgmmaSignature sig(c);
  kernel::declare(b, sig);
  detail::MatmulArgs a;
  a.C = sig.c.ir;
  a.m = sig.m.ir;
  a.n = sig.n.ir;
  a.k = sig.k.ir;
  a.ldc = sig.ldc.ir;
  a.alpha = sig.alpha.ir;
  a.beta = sig.beta.ir;
  a.splits = sig.splits.ir;
  ir::Value map_a = sig.a_map.ir, map_b = sig.b_map.ir, map_c = sig.c_map.ir, stride_c = sig.stride_c.ir;
  ir::Value chunk = sig.k_chunk.ir, tiles_n = sig.tiles_n.ir, tiles_m = sig.tiles_m.ir, work = sig.work.ir;
  ir::Value pairs = sig.pairs.ir, tma_store = sig.tma_store.ir;
  ir::Value scale_a = sig.scale_a.ir, scale_b = sig.scale_b.ir, scales = sig.scales.ir;
  detail::epilogue_params(b, c, a);

  // One work item: a tile of one batch's split, in the scheduler's grouped raster.
  struct Item { ir::Value m0, n0, batch, k_begin, steps; };
  const kernel::TileScheduler sched{.tiles_m = tiles_m, .tiles_n = tiles_n, .cluster_n = v.cluster_n ? v.cluster : 1u,
                                    .group_rows = kGroupRows};
  auto item = [&](ir::Value w) {
    const kernel::TileScheduler::Tile t = sched.at(w);
    ir::Value k_begin = (t.slice % a.splits) * chunk;
    ir::Value k_end = ir::max(k_begin, ir::min(a.k, k_begin + chunk));
    return Item{t.m * v.bm, t.n * v.bn, t.slice / a.splits, k_begin, (k_end - k_begin + (BK - 1)) / BK};
  };

  auto smem = b.dynamic_shared(in, 1024);
  auto cbuf = b.dynamic_shared(c.out, 1024);
  const uint32_t oes = elem_bytes(c.out), c_off = c_offset(v);
  auto bars = b.dynamic_shared<uint64_t>(1024);
  auto sbias = b.dynamic_shared<float>(1024);
  // full[s] = bar0 + s, empty[s] = bar0 + S + s, after the stages
  const kernel::MbarrierRing ring(b, bars, stage_bytes(v) * S / 8, S, per_stage * 4u, CX);
  ir::Value tid = b.thread_idx_x(), warp = b.warp_id(), lane = b.lane_id();

  // Clusters: the CTAs of a cluster are consecutive blocks and take consecutive work items
  // (tile rows m0 and m0 + BM of the same columns, or with cluster_n columns n0 and n0 + BN
  // of the same rows: tiles_m, or tiles_n, is a multiple of the cluster).
  ir::Value rank = b.block_idx_x() % CX;
  ir::Value mask = ir::cast<uint16_t>(b.constant<uint32_t>((1u << CX) - 1));
  b.if_(tid == 0u, [&] { ring.init(); });
  if (CX > 1) b.cluster_sync();
  else b.barrier();

  // Persistent: each block takes work items blockIdx.x, + gridDim.x, ...; the stage ring
  // runs on across items (`step` counts the k-steps of all of them), so the producer loads
  // the next item while the consumers store this one.
  kernel::WarpSpecialized ws(b, consumers);
  if (v.consumer_regs) ws.producer_regs = kProducerRegs, ws.consumer_regs = v.consumer_regs;
  ws.run(warp, [&] {  // ---- producer warpgroup: one thread issues the TMA loads
    b.if_(tid == 0u, [&] {
      auto step = b.var<uint32_t>(0u);
      b.for_(b.block_idx_x(), work, b.grid_dim_x(), [&](ir::Value w) {
        const Item it = item(w);
        b.for_(0u, it.steps, [&](ir::Value t) {
          const kernel::MbarrierRing::Slot slot = ring.slot(step);
          ring.acquire(slot);  // the consumers freed it (a fresh ring passes)
          ring.expect(slot, stage_bytes(v));
          ir::Value kk = it.k_begin + t * BK;
          ir::Value sa = slot.stage * ta.stage_elements(), sb = slot.stage * tb.stage_elements() + tb.base;
          // The shared operand of a cluster (B, or A with cluster_n): this CTA's share,
          // multicast to every CTA of it.
          auto load = [&](const kernel::TmaTile& tile, ir::Value base, const ir::Value& map, ir::Value o0, bool shared) {
            const uint32_t share = shared ? CX : 1;
            ir::Value mc = share > 1 ? mask : ir::Value();
            ir::Value part = share > 1 ? rank : b.constant<uint32_t>(0u);
            tile.load(b, smem, base, map, kk, o0, it.batch, bars, [&] { return ring.full(slot); }, share, part, mc);
          };
          load(ta, sa, map_a, it.m0, v.cluster_n);
          load(tb, sb, map_b, it.n0, !v.cluster_n);
          step = slot.step + 1u;
        });
      });
    });
  }, [&](ir::Value wg) {  // ---- consumer warpgroups
    // this consumer's rows of the tile (shared tiles) or its turn (ping-pong)
    ir::Value row_wg = v.pingpong ? b.constant<uint32_t>(0u) : wg * v.consumer_m;
    // Descriptors of stage 0, k 0 (first 64 rows); each (stage, k, row block) adds its byte
    // offset / 16 to the start field.
    ir::Value desc_a = ta.descriptor(b, smem, ta.row_start(row_wg));
    ir::Value desc_b = tb.descriptor(b, smem, tb.base);
    const kernel::AccTile acc(b, halves, 1, v.bn / 8);  // per m64 row block: a warp's 16 rows x BN
    ir::Value bias0 = bias_offset(v) / 4 + wg * v.bn;  // f32 index of this consumer's bias copy
    ir::Value alpha = a.alpha;  // FP8: alpha * scale_a * scale_b, read once
    if (fp8) {
      auto s = b.var<float>(a.alpha);
      b.if_((scales & 1u) != 0u, [&] { s *= ir::Value(scale_a[0u]); });
      b.if_((scales & 2u) != 0u, [&] { s *= ir::Value(scale_b[0u]); });
      alpha = s;
    }
    // Ping-pong: consumer wg takes the block's items 2i + wg; the ring holds every item's
    // k-steps in order, so each consumer starts at its partner's item's steps and skips them
    // after each of its own. The ring also orders the two: one's MMAs, then the other's,
    // while the first stores its tile.
    auto step = b.var<uint32_t>(0u);
    ir::Value first = b.block_idx_x(), stride = b.grid_dim_x();
    if (v.pingpong) {
      b.if_(wg == 1u, [&] { step = item(first).steps; });
      first = first + wg * stride;
      stride = stride * 2u;
    }
    b.for_(first, work, stride, [&](ir::Value w) {
      const Item it = item(w);
      acc.zero();
      // The epilogue's bias for this tile's columns, into this consumer's copy in shared
      // memory (0 past n), read while the accumulators are free: the epilogue then reads it
      // from shared memory at immediate offsets, instead of holding global loads in flight
      // next to 128 accumulators. Its named barrier orders the copy after the last tile's
      // reads and before this tile's.
      if (c.bias) {
        ws.consumer_sync(wg);
        for (uint32_t e = 0; e < v.bn; e += 128) {
          ir::Value lc = tid % 128u + e, col = it.n0 + lc;  // BN 64: half of the threads
          ir::Var x = b.var<float>(0.0f);
          b.if_(col < a.n && lc < v.bn, [&] {
            ir::Value y = a.bias[col];
            x = c.out == ir::Scalar::F32 ? y : ir::cast<float>(y);
          });
          b.if_(lc < v.bn, [&] { sbias[bias0 + lc] = ir::Value(x); });
        }
        ws.consumer_sync(wg);
      }
      if (v.pingpong) ws.pingpong_wait(wg, w, first);
      b.for_(0u, it.steps, [&](ir::Value t) {
        const kernel::MbarrierRing::Slot slot = ring.slot(step);
        ring.wait(slot);
        ir::Value da = ta.stage_descriptor(desc_a, slot.stage), db = tb.stage_descriptor(desc_b, slot.stage);
        kernel::wgmma_stage(b, acc, ta, tb, da, db, in);
        b.wgmma_wait_group(1);  // the previous step's group is done: its stage is free
        b.if_(t > 0u, [&] { ring.release(ring.stage_of(slot.step + (S - 1)), lane); });
        step = slot.step + 1u;
      });
      if (v.pingpong) {  // the partner's next item may start its MMAs (under this one's last groups and epilogue)
        b.if_(w + stride / 2u < work, [&] { ws.pingpong_pass(wg); });
      }
      b.wgmma_wait_group(0);
      ir::Value last = step;
      b.if_(it.steps > 0u, [&] { ring.release(ring.stage_of(last + (S - 1)), lane); });  // the producer may refill it during the epilogue
      if (v.pingpong) {
        ir::Value next = w + stride / 2u;  // the partner's item, loaded into the ring before this consumer's next
        b.if_(next < work, [&] { step = step + item(next).steps; });
      }
      // Epilogue: the accumulator of m64nN has the m16n8 C layout per warp (16 rows each)
      // and per 8 columns; registers 2i and 2i + 1 are neighbours in a row.
      b.if_(tma_store != 0u, [&] {
        // Through shared memory in 64-row x 128-byte chunks and TMA stores that clip the edges.
        const kernel::TmaStoreChunks out{
            .b = b, .buffer = cbuf, .first = [&] { return wg * (2 * kCChunkBytes / oes) + c_off / oes; }, .esize = oes,
            .warp = warp, .lane = lane};
        ir::Value bias[2];  // the epilogue's bias at this thread's two columns of an n8 block (0 past n: the store clips)
        out.store(
            acc, v.bn, [&] { ws.consumer_sync(wg); },
            [&](uint32_t j) {
              if (!c.bias) return;
              std::vector<ir::Value> v2 = ir::load_vec(sbias, bias0 + acc.col(lane, j, 0), 2);
              bias[0] = v2[0];
              bias[1] = v2[1];
            },
            [&](uint32_t h, uint32_t j, uint32_t r, uint32_t q) {
              ir::Value x = alpha * acc.at(h, 0, j, r + q);
              if (c.bias) x = x + bias[q];
              if (a.act) x = a.act(x);
              return c.out == ir::Scalar::F32 ? x : ir::cast(x, ir::Type::scalar(c.out));
            },
            [&](uint32_t h, uint32_t c0, ir::Value buf) {
              b.tma_store(map_c, {it.n0 + c0, it.m0 + row_wg + h * 64u, it.batch}, cbuf, buf);
            });
      }).else_([&] {
        detail::MatmulArgs e = a;
        e.alpha = alpha;
        if (c.bias) e.bias_of = [&](ir::Value col, uint32_t off) { return ir::Value(sbias[bias0 + (col - it.n0) + off]); };
        e.base_c = ir::cast<uint64_t>(it.batch) * stride_c;
        for (uint32_t h = 0; h < halves; ++h) {
          ir::Value row0 = it.m0 + row_wg + (h * 64u) + (warp % 4u) * 16u;
          for (uint32_t j = 0; j < v.bn / 8; ++j)
            for (uint32_t r = 0; r < 4; r += 2) {
              ir::Value row = row0 + ir::frag_row(kernel::AccTile::layout(), lane, int(r)),
                        col = it.n0 + (ir::frag_col(kernel::AccTile::layout(), lane, int(r)) + j * 8);
              b.if_(row < a.m, [&] { detail::store_c_vec(b, e, c, pairs != 0u, row, col, {acc.at(h, 0, j, r), acc.at(h, 0, j, r + 1)}); });
            }
        }
      });
    });
  });
  // The consumers' last TMA stores complete before the block ends (their shared sources must stay).
  b.if_(warp >= 4u && warp % 4u == 0u && lane == 0u, [&] { b.bulk_wait_group(0, false); });
  if (CX > 1) b.cluster_sync();  // no CTA leaves while a peer may still arrive on its barriers
  return b.build();
}

// Work items of the persistent kernels: tiles x batches x splits. Tile rows and columns;
// along the cluster's direction a multiple of it (a CTA past the last tile still loads its
// share of the tiles its peer reads).
uint32_t tiles_m_of(const MatmulVariant& v, const MatmulProblem& p) {
  const uint32_t c = v.cluster_n ? 1 : v.cluster;
  return ((p.m + v.bm - 1) / v.bm + c - 1) / c * c;
}
uint32_t tiles_n_of(const MatmulVariant& v, const MatmulProblem& p) {
  const uint32_t c = v.cluster_n ? v.cluster : 1;
  return ((p.n + v.bn - 1) / v.bn + c - 1) / c * c;
}
uint32_t work_of(const MatmulVariant& v, const MatmulProblem& p) {
  const uint64_t w = uint64_t(tiles_n_of(v, p)) * tiles_m_of(v, p) * p.batch * p.split_k;
  return static_cast<uint32_t>(std::min<uint64_t>(w, 0xffffffffu));
}

uint32_t threads(const MatmulVariant& v) { return kernel::WarpSpecialized::threads(consumers_of(v)); }

bool valid(const MatmulVariant& v, std::string* why) {
  if (v.stages < 2 || v.stages > 8) return detail::refuse(v, why, "2 to 8 stages");
  if (v.bm % 64 || v.bm > 256 || v.bn % 64 || v.bn > 256 || v.bk != 64 || (v.cluster != 1 && v.cluster != 2) ||
      v.consumer_m % 64 || v.bm % v.consumer_m || v.consumer_m * v.bn > 128 * 256 || (v.pingpong && v.consumer_m != v.bm))
    return detail::refuse(v, why,
                          "BM and BN multiples of 64 up to 256; BK 64 (128 bytes of 16-bit k); clusters of 1 or 2; "
                          "consumer_m x BN at most 128 x 256; ping-pong with consumer_m == BM");
  if (shared_bytes(v) > jit::device_info_for("sm_90a").smem_per_block_optin)
    return detail::refuse(v, why, "its stages and C buffers need " + std::to_string(shared_bytes(v)) + " bytes of shared memory");
  if (v.consumer_regs && (v.consumer_regs % 8 || v.consumer_regs < 168 || v.consumer_regs > 248 ||
                          128 * (kProducerRegs + consumers_of(v) * v.consumer_regs) > 65536))
    return detail::refuse(v, why, "consumer_regs a multiple of 8 in 168..248 that, beside the producer's " +
                                      std::to_string(kProducerRegs) + ", fits the SM's 65,536 registers");
  return true;
}

bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int sm, std::string* why) {
  if (sm != 90)
    return detail::refuse(v, why, "wgmma and TMA run on sm_90 devices (compiled for sm_90a), the device is sm_" + std::to_string(sm));
  if (jit::interpret_mode()) return detail::refuse(v, why, "the interpreter does not model wgmma and TMA (an sm_90 GPU runs it)");
  const bool tf32 = p.in == ir::Scalar::F32 && p.tf32, fp8 = p.in == ir::Scalar::E4M3 || p.in == ir::Scalar::E5M2;
  if (p.in != ir::Scalar::F16 && p.in != ir::Scalar::BF16 && !tf32 && !fp8)
    return detail::refuse(v, why, "wgmma takes f16 or bf16 inputs, e4m3 or e5m2 too (f32 with problem.tf32), not " +
                                      std::string(ir::scalar_name(p.in)));
  if ((tf32 || fp8) && (p.a != MatLayout::RowMajor || p.b != MatLayout::ColMajor))
    return detail::refuse(v, why, std::string(fp8 ? "e4m3 / e5m2" : "tf32") +
                                      " wgmma reads K-major operands only: A row-major and B column-major (the transposing forms "
                                      "take 16-bit elements)");
  if (fp8 && p.out != ir::Scalar::F32 && p.out != ir::Scalar::F16 && p.out != ir::Scalar::BF16)
    return detail::refuse(v, why, "the output of e4m3 / e5m2 inputs is f32, f16 or bf16, not " + std::string(ir::scalar_name(p.out)));
  if (!fp8 && p.out != ir::Scalar::F32 && p.out != p.in)
    return detail::refuse(v, why, "the output is f32 or the input type, not " + std::string(ir::scalar_name(p.out)));
  return detail::vector_rows_ok(v, p, why);
}

// Persistent: at most one block per SM, each takes work items in turn.
jit::LaunchConfig launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  return {.grid = {std::min<uint32_t>(work_of(v, p), jit::device_info().sm_count / v.cluster * v.cluster), 1, 1},
          .block = {v.threads()},
          .shared_bytes = shared_bytes(v),
          .stream = stream,
          .cluster = {v.cluster, 1, 1}};
}

// The tensor map of operand A (is_a) or B: 3-D (contiguous, other, batch), 128-byte
// swizzle, out-of-bounds elements read as zeros.
jit::TensorMap operand_map(const MatmulVariant& v, const MatmulProblem& p, bool is_a, uint64_t addr) {
  const bool row = (is_a ? p.a : p.b) == MatLayout::RowMajor;
  const bool k_major = is_a ? row : !row;
  const uint64_t es = static_cast<uint64_t>(ir::scalar_bytes(p.in));
  const uint64_t outer = is_a ? p.m : p.n;  // the operand's m or n extent
  const uint64_t ld = is_a ? p.lda : p.ldb, stride = is_a ? p.stride_a : p.stride_b;
  const TmaBox box = box_of(v, p.in, is_a, k_major);
  jit::TensorMapTiled t;
  t.dtype = p.in;
  t.global_address = addr;
  t.global_dims = {k_major ? p.k : outer, k_major ? outer : p.k, p.batch};
  t.global_strides = {ld * es, stride * es};
  t.box_dims = {box.inner, box.outer, 1};
  t.swizzle = jit::TensorMapSwizzle::B128;
  t.l2_promotion = jit::TensorMapL2Promotion::B256;
  return jit::encode_tensor_map_tiled(t);
}

// A persistent grid of clusters holds only as many as can be resident at once: asked of the
// driver once per row.
uint32_t resident_clusters(const MatmulVariant& v, const jit::CompiledKernel& k, const jit::LaunchConfig& lc) {
  static std::atomic<int> resident[64];
  const size_t row = static_cast<size_t>(&v - matmul_variants().data());
  if (row >= std::size(resident)) return static_cast<uint32_t>(std::max(1, k.max_active_clusters(lc)));
  int n = resident[row].load(std::memory_order_relaxed);
  if (n == 0) resident[row].store(n = std::max(1, k.max_active_clusters(lc)), std::memory_order_relaxed);
  return static_cast<uint32_t>(n);
}

void launch(const MatmulVariant& v, const MatmulConfig& cfg, const detail::MatmulOperands& o, const MatmulProblem& p,
            const jit::Stream* stream) {
  WgmmaSignature sig(cfg);
  sig.a_map.host = operand_map(v, p, true, o.a);
  sig.b_map.host = operand_map(v, p, false, o.b);
  // C through shared memory and TMA stores where the map can describe it (16-byte aligned
  // rows and batches) and nothing needs reading or adding: beta == 0 and no split-K. The
  // rows' length in bytes must be a multiple of 16 too: a TMA store writes the last
  // 16-byte chunk of a row whole, so columns n.. up to the next 16 bytes would be written
  // (measured on an H100 with n = 257, bf16: the row padding came back zeroed).
  const uint64_t oes = static_cast<uint64_t>(ir::scalar_bytes(p.out));
  const uint32_t tma_store = p.beta == 0.0f && p.split_k == 1 && o.c % 16 == 0 && p.ldc * oes % 16 == 0 &&
                             p.n * oes % 16 == 0 && (p.batch == 1 || p.stride_c * oes % 16 == 0);
  if (tma_store) {
    jit::TensorMapTiled t;
    t.dtype = p.out;
    t.global_address = o.c;
    t.global_dims = {p.n, p.m, p.batch};
    t.global_strides = {p.ldc * oes, p.stride_c * oes};
    t.box_dims = {static_cast<uint32_t>(128 / oes), 64, 1};
    t.swizzle = jit::TensorMapSwizzle::B128;
    sig.c_map.host = jit::encode_tensor_map_tiled(t);
  }
  sig.c.host = o.c;
  sig.m.host = p.m;
  sig.n.host = p.n;
  sig.k.host = p.k;
  sig.ldc.host = p.ldc;
  sig.alpha.host = p.alpha;
  sig.beta.host = p.beta;
  sig.stride_c.host = p.stride_c;
  sig.splits.host = p.split_k;
  sig.k_chunk.host = matmul_k_chunk(p);
  sig.tiles_n.host = tiles_n_of(v, p);
  sig.tiles_m.host = tiles_m_of(v, p);
  sig.work.host = work_of(v, p);
  sig.pairs.host = p.ldc % 2 == 0 && (p.batch == 1 || p.stride_c % 2 == 0) && o.c % (2 * oes) == 0 && p.split_k == 1;
  sig.tma_store.host = tma_store;
  sig.scale_a.host = o.scales.a;
  sig.scale_b.host = o.scales.b;
  sig.scales.host = uint32_t(o.scales.a != 0) | uint32_t(o.scales.b != 0) << 1;
  kernel::PackedArgs args = kernel::pack(sig);
  if (cfg.bias) args.push(jit::detail::Arg{jit::detail::Arg::Pointer, p.out, 0, p.epilogue.bias, 0});  // the epilogue's, last
  const jit::CompiledKernel& k = matmul_family().get(cfg);
  jit::LaunchConfig lc = launch_config(v, p, stream);
  if (v.cluster > 1) lc.grid.x = std::min<uint64_t>(lc.grid.x, uint64_t(resident_clusters(v, k, lc)) * v.cluster);
  k.launch_packed(lc, args.data(), args.size());
}

void declare(uint32_t index, const MatmulVariant& v, std::vector<MatmulConfig>& out) {
  detail::declare_mma(index, v, out);
  // FP8: K-major operands, bf16 out (torch._scaled_mm's usual)
  for (ir::Scalar f8 : {ir::Scalar::E4M3, ir::Scalar::E5M2})
    out.push_back({index, f8, ir::Scalar::BF16, MatLayout::RowMajor, MatLayout::ColMajor});
}

}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineWgmma = {.name = "Wgmma", .build_sm = 0, .threads = threads, .valid = valid,
                                                .can_implement = can_implement, .build = build,
                                                .launch_config = launch_config, .launch = launch, .declare = declare};
}  // namespace detail

}  // namespace kaio::ops
