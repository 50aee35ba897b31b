// The tensor-core matmul engine: f16 / bf16 in, f32 accumulate with mma.sync m16n8k16
// (f32 in: tf32 with mma.sync m16n8k8, fragments read element by element from shared, as
// ldmatrix cannot transpose 32-bit elements).
// The block's warps tile its BM x BN tile of C in warp tiles of TM x TN (TM/16 x TN/8 mma
// tiles of 4 accumulators each, one register array per thread). Each BK step stages
// A (BM x BK) and B (BK x BN) in padded shared tiles (rows padded by 8 elements, so the
// 16-byte ldmatrix rows of consecutive lanes fall in different banks), masked at the edges;
// ldmatrix.x4 reads A fragments, ldmatrix.x4.trans B fragments of two n8 tiles.
#include <string>

#include "kaio/ir/layouts.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

ir::Kernel build_matmul_mma(const MatmulVariant& v, const MatmulConfig& c) {
  const bool tf32 = c.in == ir::Scalar::F32;
  const ir::MmaKind kind = tf32 ? ir::MmaKind::TF32 : c.in == ir::Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16;
  const ir::MmaShape& s = ir::mma_shape(kind);
  const uint32_t threads = v.threads(), warps_n = v.bn / v.tn;
  const uint32_t mt = v.tm / 16, nt = v.tn / 8;  // mma tiles per warp
  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (c.a == MatLayout::RowMajor ? "_r" : "_c") + (c.b == MatLayout::RowMajor ? "r" : "c"));
  b.launch_bounds(threads);
  if (v.max_registers) b.max_registers(v.max_registers);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  const ir::SmemLayout la = ir::SmemLayout::padded(v.bk, 8), lb = ir::SmemLayout::padded(v.bn, 8);
  auto As = b.shared(c.in, la.elements(v.bm), 128);
  auto Bs = b.shared(c.in, lb.elements(v.bk), 128);
  ir::Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  ir::Value wm0 = (warp / warps_n) * v.tm, wn0 = (warp % warps_n) * v.tn;
  ir::Value m0 = b.block_idx_y() * v.bm, n0 = b.block_idx_x() * v.bn;
  auto acc = b.array<float>(mt * nt * 4, 0.0f);
  // The tiles' loads. A block whose tile lies inside the matrix along the operand's outer
  // dimension, in a k-step that lies inside k, loads without checks from offsets computed
  // before the loop (element e of a thread sits `e * (threads / L)` rows or columns after
  // element 0, L the tile's extent along the contiguous dimension) plus a per-step
  // increment; other blocks and the last, partial step mask every element.
  struct Tile {
    bool along;         // the thread's consecutive elements run along the operand's contiguous dimension
    uint32_t outer_tile, count;
    ir::Value P, outer0, outer_n, ld;
    std::function<ir::Value(ir::Value, ir::Value)> index;             // global (outer, k)
    std::function<ir::Value(ir::Value, ir::Value)> sindex;            // shared (outer, kk)
    bool linear = false;                                              // threads % L == 0
    ir::Value off0, step, inc, o0, k0, s0;                            // element 0's offsets, o, kk
    uint32_t d_outer = 0, d_k = 0, sstep = 0;                         // element e: + e * (d_outer, d_k), + e * sstep
  };
  auto tile_of = [&](bool is_a, bool contiguous_k, uint32_t outer_tile, ir::Value P, ir::Value outer0, ir::Value outer_n, ir::Value ld,
                     std::function<ir::Value(ir::Value, ir::Value)> index, std::function<ir::Value(ir::Value, ir::Value)> sindex) {
    Tile t{contiguous_k, outer_tile, outer_tile * v.bk / threads, P, outer0, outer_n, ld, std::move(index), std::move(sindex)};
    const uint32_t L = contiguous_k ? v.bk : outer_tile;  // elements along the contiguous dimension
    t.linear = threads % L == 0;
    ir::Value lin = tid;
    t.k0 = contiguous_k ? lin % L : lin / L;
    t.o0 = contiguous_k ? lin / L : lin % L;
    if (t.linear) {
      (contiguous_k ? t.d_outer : t.d_k) = threads / L;
      t.off0 = t.index(outer0 + t.o0, a.k_begin + t.k0);
      t.step = ir::cast<uint64_t>(ld) * uint64_t(threads / L);  // rows of A / B, or k, apart: ld elements each
      t.inc = contiguous_k ? b.constant<uint64_t>(uint64_t(v.bk)) : ir::cast<uint64_t>(ld) * uint64_t(v.bk);
      t.s0 = t.sindex(t.o0, t.k0);
      // the shared layouts are linear: element e lies e * sindex(d_outer, d_k) after element 0
      t.sstep = is_a ? la.index(t.d_outer, t.d_k) : lb.index(t.d_k, t.d_outer);
    }
    return t;
  };
  Tile ta = tile_of(true, c.a == MatLayout::RowMajor, v.bm, a.A, m0, a.m, a.lda,
                    [&](ir::Value row, ir::Value kk) { return detail::a_index(a, c, row, kk); },
                    [&](ir::Value mm, ir::Value kk) { return la.index(mm, kk); });
  Tile tb = tile_of(false, c.b == MatLayout::ColMajor, v.bn, a.B, n0, a.n, a.ldb,
                    [&](ir::Value col, ir::Value kk) { return detail::b_index(a, c, kk, col); },
                    [&](ir::Value nn, ir::Value kk) { return lb.index(kk, nn); });
  ir::Var koff_a = b.var<uint64_t>(uint64_t(0)), koff_b = b.var<uint64_t>(uint64_t(0));
  auto load_masked = [&](const Tile& t, ir::Value k0, ir::Value smem) {
    for (uint32_t e = 0; e < t.count; ++e) {
      ir::Value lin = tid + e * threads;
      const uint32_t L = t.along ? v.bk : t.outer_tile;
      ir::Value kk = t.along ? lin % L : lin / L, oo = t.along ? lin / L : lin % L;
      ir::Value go = t.outer0 + oo, gk = k0 + kk;
      smem[t.sindex(oo, kk)] = detail::load_or_zero(b, t.P, go < t.outer_n && gk < a.k, [&] { return t.index(go, gk); });
    }
  };
  auto load_fast = [&](const Tile& t, ir::Var& koff, ir::Value smem) {
    ir::Value at = t.off0 + ir::Value(koff);
    for (uint32_t e = 0; e < t.count; ++e) {
      if (e) at = at + t.step;  // one add per element, no products
      ir::Value x = t.P[at];
      smem[t.s0 + e * t.sstep] = x;
    }
  };
  // Each lane's fragment addresses for mma tile (0, 0) at ks 0; the others are constant
  // offsets from them (padded layouts are linear).
  const uint32_t sa_row = la.row_stride(), sb_row = lb.row_stride();
  std::vector<ir::Value> a_frag, b_frag;
  ir::Value a_ld, b_ld;
  if (tf32) {
    for (int r = 0; r < s.a.regs; ++r) a_frag.push_back(la.index(wm0 + ir::frag_row(s.a, lane, r), ir::frag_col(s.a, lane, r)));
    for (int r = 0; r < s.b.regs; ++r) b_frag.push_back(lb.index(ir::frag_row(s.b, lane, r), wn0 + ir::frag_col(s.b, lane, r)));
  } else {
    a_ld = la.index(wm0 + lane % 16u, (lane / 16u) * 8u);  // lanes 0-15 rows m, lanes 16-31 the same rows at k + 8
    b_ld = lb.index(lane % 16u, wn0 + (lane / 16u) * 8u);  // lanes 16-31: the next n8 tile
  }
  b.for_(a.k_begin, a.k, v.bk, [&](ir::Value k0) {
    ir::Value full_k = k0 + v.bk <= a.k;
    for (auto [t, koff, smem] : {std::tuple{&ta, &koff_a, As}, std::tuple{&tb, &koff_b, Bs}}) {
      if (!t->linear) {
        load_masked(*t, k0, smem);
        continue;
      }
      b.if_(full_k && t->outer0 + t->outer_tile <= t->outer_n, [&] { load_fast(*t, *koff, smem); }).else_([&] {
        load_masked(*t, k0, smem);
      });
      *koff += t->inc;
    }
    b.barrier();
    for (uint32_t ks = 0; tf32 && ks < v.bk / 8; ++ks) {  // tf32: fragments element by element
      std::vector<std::vector<ir::Value>> fa(mt), fb(nt);
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (int r = 0; r < s.a.regs; ++r) fa[mi].push_back(As[a_frag[r] + (mi * 16 * sa_row + ks * 8)]);
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (int r = 0; r < s.b.regs; ++r) fb[ni].push_back(Bs[b_frag[r] + (ks * 8 * sb_row + ni * 8)]);
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
    for (uint32_t ks = 0; !tf32 && ks < v.bk / 16; ++ks) {
      std::vector<std::vector<ir::Value>> fa, fb;
      for (uint32_t mi = 0; mi < mt; ++mi) fa.push_back(b.ldmatrix(As, a_ld + (mi * 16 * sa_row + ks * 16), 4));
      for (uint32_t ni = 0; ni < nt; ni += 2) {
        if (ni + 1 < nt) {  // matrices 0-1: tile ni, 2-3: tile ni + 1
          std::vector<ir::Value> q = b.ldmatrix(Bs, b_ld + (ks * 16 * sb_row + ni * 8), 4, true);
          fb.push_back({q[0], q[1]});
          fb.push_back({q[2], q[3]});
        } else {
          fb.push_back(b.ldmatrix(Bs, b_ld + (ks * 16 * sb_row + ni * 8), 2, true));
        }
      }
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
    b.barrier();
  });
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
