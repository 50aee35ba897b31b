// The Hopper matmul engine (sm_90a): warp-specialised, TMA-fed warpgroup MMA.
//
//   warpgroup 0        the producer: one thread issues the TMA loads of each k-step's A and
//                      B tiles into a ring of STAGES shared-memory stages; the loads
//                      complete the stage's "full" mbarrier (transaction bytes)
//   warpgroups 1..C    the consumers (C = BM / 64): each owns 64 rows of the BM x BN block
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
#include <string>
#include <vector>

#include "kaio/ir/layouts.h"
#include "kaio/ir/mma_layout.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

constexpr uint32_t kSwizzleBytes = 128;  // the rows TMA writes and wgmma reads
constexpr uint32_t kGroupRows = 8;       // grouped raster: tile rows per group
constexpr uint32_t kCChunkBytes = 64 * kSwizzleBytes;  // a TMA-store box of C: 64 rows of 128 bytes

uint32_t elem_bytes(ir::Scalar s) { return static_cast<uint32_t>(ir::scalar_bytes(s)); }

}  // namespace

uint32_t matmul_wgmma_bk(ir::Scalar in) { return kSwizzleBytes / elem_bytes(in); }

uint32_t matmul_wgmma_stage_bytes(const MatmulVariant& v) { return (v.bm + v.bn) * kSwizzleBytes; }

// The C staging buffers of the TMA-store epilogue start here (after the stages and the
// barriers, 1024-aligned for the 128-byte swizzle).
uint32_t matmul_wgmma_c_offset(const MatmulVariant& v) {
  return (matmul_wgmma_stage_bytes(v) * v.stages + 2 * v.stages * 8 + 1023) / 1024 * 1024;
}

uint32_t matmul_wgmma_consumers(const MatmulVariant& v) { return v.pingpong ? 2 : v.bm / v.tm; }

// After the C buffers: each consumer's copy of the fused epilogue's bias for its tile's
// columns (BN f32). Reserved in every kernel of the variant (its launch asks for the
// variant's size); the 128x256 rows then use all of sm_90's 232448 bytes.
uint32_t matmul_wgmma_bias_offset(const MatmulVariant& v) {
  return matmul_wgmma_c_offset(v) + matmul_wgmma_consumers(v) * 2 * kCChunkBytes;  // two chunk buffers per consumer
}

uint32_t matmul_wgmma_shared_bytes(const MatmulVariant& v) {
  return matmul_wgmma_bias_offset(v) + matmul_wgmma_consumers(v) * v.bn * 4;
}

// The boxes TMA moves: K-major operands one box of (BK, rows); MN-major ones boxes of
// (64 / 32 elements of 128 bytes, BK) side by side.
// With a cluster, each CTA loads 1 / cluster of the shared tile (B, or A with cluster_n) and
// multicasts it.
MatmulTmaBox matmul_wgmma_box(const MatmulVariant& v, ir::Scalar in, bool a, bool k_major) {
  const uint32_t rows = a ? v.bm : v.bn, per_row = kSwizzleBytes / elem_bytes(in);
  const uint32_t share = a == v.cluster_n ? v.cluster : 1;  // the shared operand is split among the cluster
  if (k_major) return {per_row, rows / share, 1};
  return {per_row, matmul_wgmma_bk(in), rows / per_row / share};
}

ir::Kernel build_matmul_wgmma(const MatmulVariant& v, const MatmulConfig& c) {
  const ir::Scalar in = c.in;
  const uint32_t es = elem_bytes(in), BK = matmul_wgmma_bk(in), S = v.stages;
  // Consumers: BM / TM warpgroups sharing each tile, or two taking alternate tiles (ping-pong).
  const uint32_t consumers = matmul_wgmma_consumers(v), threads = v.threads();
  const uint32_t per_stage = v.pingpong ? 1 : consumers;  // consumer warpgroups reading each stage
  const uint32_t halves = v.tm / 64;                       // m64 wgmma row blocks of a consumer's tile
  const bool tf32 = in == ir::Scalar::F32, fp8 = es == 1;
  const uint32_t k_inst = tf32 ? 8 : fp8 ? 32 : 16, k_inst_bytes = k_inst * es;  // 32 bytes of k per wgmma
  const bool a_k = c.a == MatLayout::RowMajor, b_k = c.b == MatLayout::ColMajor;  // K-major operands
  const uint32_t a_stage = v.bm * kSwizzleBytes, b_stage = v.bn * kSwizzleBytes;  // bytes
  const uint32_t per_row = kSwizzleBytes / es;                                    // elements in a 128-byte row
  const uint32_t box_bytes = per_row * BK * es;                                   // one MN-major box (8 KiB)
  if (S < 2 || S > 8) throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": 2 to 8 stages");
  const uint32_t CX = v.cluster;
  if (matmul_wgmma_shared_bytes(v) > 232448)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": its stages and C buffers need " +
                                             std::to_string(matmul_wgmma_shared_bytes(v)) + " bytes of shared memory, sm_90 has 232448");
  // A cluster splits the shared tile (B, or A along n) between its CTAs: by rows (K-major)
  // or by 128-byte boxes.
  const bool shared_k = v.cluster_n ? a_k : b_k;
  const uint32_t shared_rows = v.cluster_n ? v.bm : v.bn;
  const bool split_ok = shared_k ? shared_rows % (8 * CX) == 0 : shared_rows % per_row == 0 && (shared_rows / per_row) % CX == 0;
  if (v.bm % 64 || v.bm > 256 || v.bn % 64 || v.bn > 256 || v.bk != 64 || (CX != 1 && CX != 2) || !split_ok ||
      (!a_k && v.bm % per_row) || v.tm % 64 || v.bm % v.tm || v.tm * v.bn > 128 * 256 || (v.pingpong && v.tm != v.bm))
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name +
                                             ": BM and BN multiples of 64 up to 256 (and of a 128-byte row of MN-major "
                                             "operands); BK 64; clusters of 1 or 2; TM x BN at most 128 x 256 per "
                                             "consumer; ping-pong with TM == BM");

  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (a_k ? "_r" : "_c") + (b_k ? "c" : "r") + detail::epilogue_suffix(c));
  b.launch_bounds(threads, 1);
  auto map_a = b.tensor_map_param("a_map");
  auto map_b = b.tensor_map_param("b_map");
  auto map_c = b.tensor_map_param("c_map");  // used when tma_store != 0
  detail::MatmulArgs a;
  a.C = b.param("c", ir::Type::pointer(c.out, false));
  a.m = b.param<uint32_t>("m");
  a.n = b.param<uint32_t>("n");
  a.k = b.param<uint32_t>("k");
  a.ldc = b.param<uint32_t>("ldc");
  a.alpha = b.param<float>("alpha");
  a.beta = b.param<float>("beta");
  auto stride_c = b.param<uint64_t>("stride_c");
  a.splits = b.param<uint32_t>("splits");
  auto chunk = b.param<uint32_t>("k_chunk");
  auto tiles_n = b.param<uint32_t>("tiles_n");
  auto tiles_m = b.param<uint32_t>("tiles_m");
  auto work = b.param<uint32_t>("work");    // tiles_m * tiles_n * batch * splits
  auto pairs = b.param<uint32_t>("pairs");  // 1: C(row, col) and C(row, col + 1) may be stored as one vector
  auto tma_store = b.param<uint32_t>("tma_store");  // 1: C through shared memory and TMA stores (beta == 0, no split)
  // FP8: per-tensor scales, one f32 each in device memory (bit 0 / 1 of `scales`: A's / B's
  // is given, else 1), read by the kernel so that scales computed on the GPU need no sync.
  ir::Value scale_a, scale_b, scales;
  if (fp8) {
    scale_a = b.param<const float*>("scale_a");
    scale_b = b.param<const float*>("scale_b");
    scales = b.param<uint32_t>("scales");
  }
  detail::epilogue_params(b, c, a);

  // One work item: a tile of one batch's split. Tiles are visited in groups of kGroupRows
  // tile rows, column by column (grouped raster), so that the blocks working at the same
  // time share their A and B tiles in L2.
  // With a cluster along n, a unit of `cn` consecutive items (the cluster's CTAs) takes
  // neighbouring columns of one tile row, and the units follow the grouped raster.
  struct Item { ir::Value m0, n0, batch, k_begin, steps; };
  const uint32_t cn = v.cluster_n ? v.cluster : 1;
  auto item = [&](ir::Value w) {
    ir::Value unit = w / cn, units_n = tiles_n / cn;
    ir::Value per_slice = tiles_m * units_n;
    ir::Value zz = unit / per_slice, pid = unit % per_slice;
    ir::Value per_group = units_n * kGroupRows;
    ir::Value first_m = (pid / per_group) * kGroupRows;
    ir::Value group_m = ir::min(tiles_m - first_m, kGroupRows);
    ir::Value tile_m = first_m + (pid % per_group) % group_m, tile_n = (pid % per_group) / group_m * cn + w % cn;
    ir::Value k_begin = (zz % a.splits) * chunk;
    ir::Value k_end = ir::max(k_begin, ir::min(a.k, k_begin + chunk));
    return Item{tile_m * v.bm, tile_n * v.bn, zz / a.splits, k_begin, (k_end - k_begin + (BK - 1)) / BK};
  };

  auto smem = b.dynamic_shared(in, 1024);
  auto cbuf = b.dynamic_shared(c.out, 1024);
  const uint32_t oes = elem_bytes(c.out), c_off = matmul_wgmma_c_offset(v);
  auto bars = b.dynamic_shared<uint64_t>(1024);
  auto sbias = b.dynamic_shared<float>(1024);
  const uint32_t bar0 = matmul_wgmma_stage_bytes(v) * S / 8;  // full[s] = bar0 + s, empty[s] = bar0 + S + s
  const uint32_t b_off = a_stage * S / es;                    // element index of the B stages
  ir::Value tid = b.thread_idx_x(), warp = b.warp_id(), lane = b.lane_id();

  // Clusters: the CTAs of a cluster are consecutive blocks and take consecutive work items
  // (tile rows m0 and m0 + BM of the same columns, or with cluster_n columns n0 and n0 + BN
  // of the same rows: tiles_m, or tiles_n, is a multiple of the cluster).
  ir::Value rank = b.block_idx_x() % CX;
  ir::Value mask = ir::cast<uint16_t>(b.constant<uint32_t>((1u << CX) - 1));
  b.if_(tid == 0u, [&] {
    for (uint32_t s = 0; s < S; ++s) {
      b.mbarrier_init(bars, bar0 + s, 1u);                       // the producer's expect_tx arrival
      b.mbarrier_init(bars, bar0 + S + s, per_stage * 4u * CX);  // each consumer warp reading it, in each CTA of the cluster
    }
    if (CX > 1) b.fence_mbarrier_init();  // the peers' multicasts and arrivals may use them
    b.fence_proxy_async();                 // the initialised barriers are visible to the TMA unit
  });
  if (CX > 1) b.cluster_sync();
  else b.barrier();

  // Persistent: each block takes work items blockIdx.x, + gridDim.x, ...; the stage ring
  // runs on across items (`step` counts the k-steps of all of them), so the producer loads
  // the next item while the consumers store this one.
  b.if_(warp < 4u, [&] {  // ---- producer warpgroup
    b.if_(tid == 0u, [&] {
      auto step = b.var<uint32_t>(0u);
      b.for_(b.block_idx_x(), work, b.grid_dim_x(), [&](ir::Value w) {
        const Item it = item(w);
        b.for_(0u, it.steps, [&](ir::Value t) {
          ir::Value g = step;
          ir::Value s = g % S;
          b.mbarrier_wait(bars, bar0 + S + s, ((g / S) & 1u) ^ 1u);  // the consumers freed it (a fresh ring passes)
          b.mbarrier_arrive_expect_tx(bars, bar0 + s, b.constant<uint32_t>(matmul_wgmma_stage_bytes(v)));
          ir::Value kk = it.k_begin + t * BK;
          ir::Value sa = s * (a_stage / es), sb = s * (b_stage / es) + b_off;
          // One operand's tile (rows x BK at element `base` of the stage): K-major one box of
          // rows, MN-major boxes of 128-byte rows side by side. The shared operand of a
          // cluster (B, or A with cluster_n): this CTA's share, multicast to every CTA of it.
          auto load = [&](ir::Value base, const ir::Value& map, bool k_major, uint32_t rows, ir::Value o0, bool shared) {
            const uint32_t share = shared ? CX : 1;
            ir::Value mc = share > 1 ? mask : ir::Value();
            ir::Value part = share > 1 ? rank : b.constant<uint32_t>(0u);
            if (k_major) {
              ir::Value r0 = part * (rows / share);
              b.tma_load(smem, base + r0 * (kSwizzleBytes / es), map, {kk, o0 + r0, it.batch}, bars, bar0 + s, mc);
            } else {
              for (uint32_t j = 0; j < rows / per_row / share; ++j) {
                ir::Value box = part * (rows / per_row / share) + j;
                b.tma_load(smem, base + box * (box_bytes / es), map, {o0 + box * per_row, kk, it.batch}, bars, bar0 + s, mc);
              }
            }
          };
          load(sa, map_a, a_k, v.bm, it.m0, v.cluster_n);
          load(sb, map_b, b_k, v.bn, it.n0, !v.cluster_n);
          step = g + 1u;
        });
      });
    });
  }).else_([&] {  // ---- consumer warpgroups
    ir::Value wg = warp / 4u - 1u;  // this consumer's rows of the tile (shared tiles) or its turn (ping-pong)
    ir::Value row_wg = v.pingpong ? b.constant<uint32_t>(0u) : wg * v.tm;
    const ir::WgmmaSwizzle sw = ir::WgmmaSwizzle::B128;
    // Descriptors of stage 0, k 0 (first 64 rows); each (stage, k, row block) adds its byte
    // offset / 16 to the start field.
    ir::Value desc_a = a_k ? b.wgmma_descriptor(smem, row_wg * (kSwizzleBytes / es), sw, 16, 1024)
                           : b.wgmma_descriptor(smem, row_wg / 64u * (box_bytes / es), sw, box_bytes, 1024);
    ir::Value desc_b = b_k ? b.wgmma_descriptor(smem, b_off, sw, 16, 1024) : b.wgmma_descriptor(smem, b_off, sw, box_bytes, 1024);
    const uint32_t a_k_step = a_k ? k_inst_bytes : k_inst / 8 * 1024;  // bytes per wgmma along k
    const uint32_t b_k_step = b_k ? k_inst_bytes : k_inst / 8 * 1024;
    const uint32_t a_half = a_k ? 64 * kSwizzleBytes : box_bytes;       // bytes between m64 row blocks of A
    const ir::FragLayout& fc = ir::mma_shape(ir::MmaKind::F16).c;
    std::vector<ir::RegArray> acc;
    for (uint32_t h = 0; h < halves; ++h) acc.push_back(b.array<float>(v.bn / 2, 0.0f));
    const uint32_t bar_id = 3;  // named barriers 3.. : one per consumer (1, 2: ping-pong)
    auto consumer_barrier = [&] {  // this consumer's 128 threads (named barrier ids are immediates)
      for (uint32_t q = 0; q < consumers; ++q) b.if_(wg == q, [&] { b.barrier(bar_id + q, 128); });
    };
    ir::Value bias0 = matmul_wgmma_bias_offset(v) / 4 + wg * v.bn;  // f32 index of this consumer's bias copy
    auto release = [&](ir::Value s) {  // on this CTA's and every peer's empty[s]: their multicasts write here
      b.if_(lane == 0u, [&] {
        if (CX == 1) b.mbarrier_arrive(bars, bar0 + S + s);
        else
          for (uint32_t r = 0; r < CX; ++r) b.mbarrier_arrive_cluster(bars, bar0 + S + s, b.constant<uint32_t>(r));
      });
    };
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
      for (auto& a_h : acc)
        for (uint32_t r = 0; r < v.bn / 2; ++r) a_h[r] = 0.0f;
      // The epilogue's bias for this tile's columns, into this consumer's copy in shared
      // memory (0 past n), read while the accumulators are free: the epilogue then reads it
      // from shared memory at immediate offsets, instead of holding global loads in flight
      // next to 128 accumulators. Its named barrier orders the copy after the last tile's
      // reads and before this tile's.
      if (c.bias) {
        consumer_barrier();
        for (uint32_t e = 0; e < v.bn; e += 128) {
          ir::Value lc = tid % 128u + e, col = it.n0 + lc;  // BN 64: half of the threads
          ir::Var x = b.var<float>(0.0f);
          b.if_(col < a.n && lc < v.bn, [&] {
            ir::Value y = a.bias[col];
            x = c.out == ir::Scalar::F32 ? y : ir::cast<float>(y);
          });
          b.if_(lc < v.bn, [&] { sbias[bias0 + lc] = ir::Value(x); });
        }
        consumer_barrier();
      }
      // Ping-pong order (named barriers 1 and 2 of both consumers): a consumer starts its
      // MMAs once its partner has issued those of the item before. Without it, a consumer
      // could wait on a stage's full barrier two phases ahead, which parity cannot tell apart.
      if (v.pingpong) {
        b.if_(wg == 0u, [&] { b.if_(w != first, [&] { b.barrier(2, 256); }); }).else_([&] { b.barrier(1, 256); });
      }
      b.for_(0u, it.steps, [&](ir::Value t) {
        ir::Value g = step;
        ir::Value s = g % S;
        b.mbarrier_wait(bars, bar0 + s, (g / S) & 1u);
        ir::Value da = desc_a + ir::cast<uint64_t>(s * (a_stage / 16)), db = desc_b + ir::cast<uint64_t>(s * (b_stage / 16));
        b.wgmma_fence();
        for (uint32_t ki = 0; ki < BK / k_inst; ++ki)
          for (uint32_t h = 0; h < halves; ++h)
            b.wgmma(acc[h], da + b.constant<uint64_t>((ki * a_k_step + h * a_half) / 16), db + b.constant<uint64_t>(ki * b_k_step / 16),
                    in, !a_k, !b_k);
        b.wgmma_commit_group();
        b.wgmma_wait_group(1);  // the previous step's group is done: its stage is free
        b.if_(t > 0u, [&] { release((g + (S - 1)) % S); });
        step = g + 1u;
      });
      if (v.pingpong) {  // the partner's next item may start its MMAs (under this one's last groups and epilogue)
        b.if_(w + stride / 2u < work, [&] {
          b.if_(wg == 0u, [&] { b.barrier_arrive(1, 256); }).else_([&] { b.barrier_arrive(2, 256); });
        });
      }
      b.wgmma_wait_group(0);
      ir::Value last = step;
      b.if_(it.steps > 0u, [&] { release((last + (S - 1)) % S); });  // the producer may refill it during the epilogue
      if (v.pingpong) {
        ir::Value next = w + stride / 2u;  // the partner's item, loaded into the ring before this consumer's next
        b.if_(next < work, [&] { step = step + item(next).steps; });
      }
      // Epilogue: the accumulator of m64nN has the m16n8 C layout per warp (16 rows each)
      // and per 8 columns; registers 2i and 2i + 1 are neighbours in a row.
      b.if_(tma_store != 0u, [&] {
        // Through shared memory: 64 rows x 128 bytes of C at a time, written in the 128-byte
        // swizzled layout of C's tensor map (conflict-free: the 8 rows of a store land in 8
        // different 16-byte chunks), then stored by one TMA store that clips the edges.
        // Two chunk buffers per consumer: one fills while the other's store reads it.
        const uint32_t cols = kSwizzleBytes / oes;  // C columns of a chunk
        ir::Value leader = (warp % 4u == 0u) && (lane == 0u);
        ir::Value buf0 = wg * (2 * kCChunkBytes / oes) + c_off / oes;  // element index of this consumer's buffers
        uint32_t chunk = 0;
        for (uint32_t h = 0; h < halves; ++h)
          for (uint32_t c0 = 0; c0 < v.bn; c0 += cols, ++chunk) {
            ir::Value buf = buf0 + (chunk % 2) * (kCChunkBytes / oes);
            b.if_(leader, [&] { b.bulk_wait_group(1, true); });  // the store that read this buffer two chunks ago is done
            consumer_barrier();
            for (uint32_t j = c0 / 8; j < (c0 + cols) / 8; ++j) {
              // The epilogue's bias at this thread's two columns of j (the same for both of its
              // rows), from the consumer's copy (0 past n; the TMA store clips those columns).
              ir::Value bias[2];
              if (c.bias) {
                std::vector<ir::Value> v2 = ir::load_vec(sbias, bias0 + (ir::frag_col(fc, lane, 0) + j * 8), 2);
                bias[0] = v2[0];
                bias[1] = v2[1];
              }
              for (int r = 0; r < 4; r += 2) {
                ir::Value row = (warp % 4u) * 16u + ir::frag_row(fc, lane, r);  // within the 64-row chunk
                const uint32_t cb = (j * 8 - c0) * oes;                          // the pair's byte column, + frag col
                ir::Value byte = ir::frag_col(fc, lane, r) * oes + cb;
                ir::Value off = row * kSwizzleBytes + (((byte / 16u) ^ (row % 8u)) * 16u) + byte % 16u;
                std::vector<ir::Value> pair;
                for (int q = 0; q < 2; ++q) {
                  ir::Value x = alpha * acc[h][4 * j + r + q];
                  if (c.bias) x = x + bias[q];
                  if (a.act) x = a.act(x);
                  pair.push_back(c.out == ir::Scalar::F32 ? x : ir::cast(x, ir::Type::scalar(c.out)));
                }
                ir::store_vec(cbuf, buf + off / oes, pair);
              }
            }
            b.fence_proxy_async();  // the generic-proxy writes, before the TMA (async proxy) reads them
            consumer_barrier();
            b.if_(leader, [&] {
              b.tma_store(map_c, {it.n0 + c0, it.m0 + row_wg + h * 64u, it.batch}, cbuf, buf);
              b.bulk_commit_group();
            });
          }
      }).else_([&] {
        detail::MatmulArgs e = a;
        e.alpha = alpha;
        if (c.bias) e.bias_of = [&](ir::Value col, uint32_t off) { return ir::Value(sbias[bias0 + (col - it.n0) + off]); };
        e.base_c = ir::cast<uint64_t>(it.batch) * stride_c;
        for (uint32_t h = 0; h < halves; ++h) {
          ir::Value row0 = it.m0 + row_wg + (h * 64u) + (warp % 4u) * 16u;
          for (uint32_t j = 0; j < v.bn / 8; ++j)
            for (int r = 0; r < 4; r += 2) {
              ir::Value row = row0 + ir::frag_row(fc, lane, r), col = it.n0 + (ir::frag_col(fc, lane, r) + j * 8);
              b.if_(row < a.m, [&] { detail::store_c_vec(b, e, c, pairs != 0u, row, col, {acc[h][4 * j + r], acc[h][4 * j + r + 1]}); });
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

}  // namespace kaio::ops
