// The pipelined tensor-core matmul engine: as matmul_mma.cpp (f16 / bf16 in, mma.sync
// m16n8k16, f32 accumulate, warp tiles of TM x TN), with the operand tiles brought in by
// cp.async in 16-byte chunks through a ring of STAGES shared-memory stages, so the copies
// of the next STAGES - 1 k-steps overlap the tensor-core work of the current one.
//
// Each operand is staged with its contiguous dimension along the shared rows (padded by 8
// elements), so every 16-byte chunk is one cp.async for either layout:
//   A row-major: As[m][k], ldmatrix.x4           A col-major: As[k][m], ldmatrix.x4.trans
//   B row-major: Bs[k][n], ldmatrix.x2.trans     B col-major: Bs[n][k], ldmatrix.x2
// Edges: a chunk past the matrix reads only its valid bytes (src_bytes, the rest zero),
// with its source address clamped into the matrix. Needs the contiguous leading
// dimensions and batch strides to be multiples of 8 elements and 16-byte aligned pointers
// (can_implement).
//
// The pipeline (per thread; cp.async groups are per thread, the barrier publishes them):
//   for s in 0 .. STAGES-2: load k-step s into stage s; commit
//   for t in 0 .. steps-1:
//     wait_group(STAGES-2); barrier        k-step t has landed, everyone is done with t-1
//     load k-step t+STAGES-1 into stage (t+STAGES-1) % STAGES (the one t-1 used); commit
//     ldmatrix + mma on stage t % STAGES
#include <string>

#include "kaio/ir/layouts.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

struct Operand {
  bool contiguous_k;     // A row-major / B col-major: the shared rows run along k
  uint32_t outer;        // the tile's extent in m (A) or n (B)
  ir::SmemLayout lay;    // rows of the contiguous dimension, padded
  uint32_t elements;     // one stage
};

Operand operand(bool contiguous_k, uint32_t outer, uint32_t bk) {
  ir::SmemLayout l = contiguous_k ? ir::SmemLayout::padded(bk, 8) : ir::SmemLayout::padded(outer, 8);
  return {contiguous_k, outer, l, l.elements(contiguous_k ? outer : bk)};
}

Operand operand_a(const MatmulVariant& v, MatLayout a) { return operand(a == MatLayout::RowMajor, v.bm, v.bk); }
Operand operand_b(const MatmulVariant& v, MatLayout b) { return operand(b == MatLayout::ColMajor, v.bn, v.bk); }

}  // namespace

uint32_t matmul_async_shared_bytes(const MatmulVariant& v, ir::Scalar in, MatLayout a, MatLayout b) {
  return (operand_a(v, a).elements + operand_b(v, b).elements) * v.stages * static_cast<uint32_t>(ir::scalar_bytes(in));
}

ir::Kernel build_matmul_mma_async(const MatmulVariant& v, const MatmulConfig& c) {
  const ir::MmaKind kind = c.in == ir::Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16;
  const ir::MmaShape& s = ir::mma_shape(kind);
  const uint32_t threads = v.threads(), warps_n = v.bn / v.tn, S = v.stages;
  const uint32_t mt = v.tm / 16, nt = v.tn / 8;
  if (S < 2 || S > 4) throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": 2 to 4 stages");
  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (c.a == MatLayout::RowMajor ? "_r" : "_c") + (c.b == MatLayout::RowMajor ? "r" : "c"));
  b.launch_bounds(threads);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  const Operand oa = operand_a(v, c.a), ob = operand_b(v, c.b);
  // One dynamic shared array (the stages of large tiles pass the 48 KB of static shared
  // memory): the A stages, then the B stages. LaunchConfig::shared_bytes sizes it
  // (matmul_async_shared_bytes).
  auto smem = b.dynamic_shared(c.in, 128);
  const uint32_t a_off = 0, b_off = oa.elements * S;
  ir::Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  ir::Value wm0 = (warp / warps_n) * v.tm, wn0 = (warp % warps_n) * v.tn;
  ir::Value m0 = b.block_idx_y() * v.bm, n0 = b.block_idx_x() * v.bn;
  ir::Value steps = (a.k - a.k_begin + (v.bk - 1)) / v.bk;
  ir::Value zero = b.constant<uint32_t>(0u);

  // Issues the cp.async chunks of k-step `t` (any value; past the last step every chunk
  // is empty) into stage `st` of one operand. Global (outer, kk) -> shared row/col.
  auto load_operand = [&](const Operand& o, ir::Value P, ir::Value outer0, ir::Value outer_n, ir::Value ld,
                          ir::Value base, uint32_t off, ir::Value t, ir::Value st) {
    const uint32_t row_len = o.contiguous_k ? v.bk : o.outer;  // contiguous elements per shared row
    const uint32_t rows = o.contiguous_k ? o.outer : v.bk;
    const uint32_t chunks = rows * row_len / 8;
    if (chunks % threads)
      throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": a tile's 16-byte chunks do not divide among its threads");
    for (uint32_t e = 0; e < chunks / threads; ++e) {
      ir::Value ch = tid + e * threads;
      ir::Value r = ch / (row_len / 8), c8 = (ch % (row_len / 8)) * 8u;
      // global coordinates: contiguous index (along the row) and the other one
      ir::Value k0 = a.k_begin + t * v.bk;
      ir::Value g_row = o.contiguous_k ? outer0 + r : k0 + r;   // outer index, or k
      ir::Value g_col = o.contiguous_k ? k0 + c8 : outer0 + c8; // k, or outer index
      ir::Value row_n = o.contiguous_k ? outer_n : a.k, col_n = o.contiguous_k ? a.k : outer_n;
      ir::Value ok = g_row < row_n && g_col < col_n;
      ir::Value valid = ir::select(ok, ir::min((col_n - ir::select(ok, g_col, zero)) * 2u, 16u), zero);
      ir::Value src_row = ir::select(ok, g_row, zero), src_col = ir::select(ok, g_col, zero);  // stay inside the matrix
      ir::Value src = base + ir::cast<uint64_t>(src_row * ld + src_col);
      b.cp_async(smem, st * o.elements + (o.lay.index(r, c8) + off), P, src, 16, ir::CacheHint::Global, valid);
    }
  };
  auto load_step = [&](ir::Value t) {
    ir::Value st = t % S;
    load_operand(oa, a.A, m0, a.m, a.lda, a.base_a, a_off, t, st);
    load_operand(ob, a.B, n0, a.n, a.ldb, a.base_b, b_off, t, st);
    b.cp_async_commit_group();
  };

  auto acc = b.array<float>(mt * nt * 4, 0.0f);
  for (uint32_t t = 0; t + 1 < S; ++t) load_step(b.constant<uint32_t>(t));
  b.for_(0u, steps, [&](ir::Value t) {
    b.cp_async_wait_group(S - 2);
    b.barrier();
    load_step(t + (S - 1));
    ir::Value sa = (t % S) * oa.elements + a_off, sb = (t % S) * ob.elements + b_off;
    for (uint32_t ks = 0; ks < v.bk / 16; ++ks) {
      std::vector<std::vector<ir::Value>> fa, fb;
      for (uint32_t mi = 0; mi < mt; ++mi) {
        ir::Value mrow = wm0 + mi * 16;
        if (oa.contiguous_k)  // As[m][k]: lanes 0-15 rows m, lanes 16-31 the same rows at k + 8
          fa.push_back(b.ldmatrix(smem, sa + oa.lay.index(mrow + lane % 16u, (lane / 16u) * 8u + ks * 16), 4));
        else  // As[k][m]: matrix j = lane / 8 holds k + 8 (j / 2), m + 8 (j % 2), transposed
          fa.push_back(b.ldmatrix(smem, sa + oa.lay.index((lane / 16u) * 8u + lane % 8u + ks * 16,
                                                        mrow + ((lane / 8u) % 2u) * 8u), 4, true));
      }
      for (uint32_t ni = 0; ni < nt; ++ni) {
        ir::Value ncol = wn0 + ni * 8;
        if (ob.contiguous_k)  // Bs[n][k]: matrix j = lane / 8 holds k + 8 j
          fb.push_back(b.ldmatrix(smem, sb + ob.lay.index(ncol + lane % 8u, ((lane / 8u) % 2u) * 8u + ks * 16), 2));
        else  // Bs[k][n]
          fb.push_back(b.ldmatrix(smem, sb + ob.lay.index(lane % 16u + ks * 16, ncol), 2, true));
      }
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
  });
  b.cp_async_wait_group(0);  // no copy outlives the kernel's use of shared memory
  for (uint32_t mi = 0; mi < mt; ++mi)
    for (uint32_t ni = 0; ni < nt; ++ni)
      for (int r = 0; r < 4; ++r) {
        ir::Value row = m0 + wm0 + (ir::frag_row(s.c, lane, r) + mi * 16);
        ir::Value col = n0 + wn0 + (ir::frag_col(s.c, lane, r) + ni * 8);
        b.if_(row < a.m && col < a.n, [&] { detail::store_c(b, a, c, row, col, acc[4 * (mi * nt + ni) + r]); });
      }
  return b.build();
}

}  // namespace kaio::ops
