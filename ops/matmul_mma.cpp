// The tensor-core matmul engine: f16 / bf16 in, f32 accumulate with mma.sync m16n8k16
// (f32 in: tf32 with mma.sync m16n8k8, fragments read element by element from shared, as
// ldmatrix cannot transpose 32-bit elements).
// The block's warps tile its BM x BN tile of C in warp tiles of TM x TN (TM/16 x TN/8 mma
// tiles of 4 accumulators each, one register array per thread). Each BK step stages
// A (BM x BK) and B (BK x BN) in padded shared tiles (rows padded by 8 elements, so the
// 16-byte ldmatrix rows of consecutive lanes fall in different banks), masked at the edges;
// ldmatrix.x4 reads A fragments, ldmatrix.x2.trans B fragments.
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
  detail::MatmulArgs a = detail::matmul_params(b, c);
  const ir::SmemLayout la = ir::SmemLayout::padded(v.bk, 8), lb = ir::SmemLayout::padded(v.bn, 8);
  auto As = b.shared(c.in, la.elements(v.bm), 128);
  auto Bs = b.shared(c.in, lb.elements(v.bk), 128);
  ir::Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  ir::Value wm0 = (warp / warps_n) * v.tm, wn0 = (warp % warps_n) * v.tn;
  ir::Value m0 = b.block_idx_y() * v.bm, n0 = b.block_idx_x() * v.bn;
  auto acc = b.array<float>(mt * nt * 4, 0.0f);
  b.for_(a.k_begin, a.k, v.bk, [&](ir::Value k0) {
    for (uint32_t e = 0; e < v.bm * v.bk / threads; ++e) {  // A(m0 + mm, k0 + kk) -> As[mm][kk]
      ir::Value lin = tid + e * threads;
      const bool along_k = c.a == MatLayout::RowMajor;
      ir::Value kk = along_k ? lin % v.bk : lin / v.bm, mm = along_k ? lin / v.bk : lin % v.bm;
      ir::Value row = m0 + mm, col = k0 + kk;
      As[la.index(mm, kk)] = detail::load_or_zero(b, a.A, row < a.m && col < a.k, [&] { return detail::a_index(a, c, row, col); });
    }
    for (uint32_t e = 0; e < v.bn * v.bk / threads; ++e) {  // B(k0 + kk, n0 + nn) -> Bs[kk][nn]
      ir::Value lin = tid + e * threads;
      const bool along_n = c.b == MatLayout::RowMajor;
      ir::Value kk = along_n ? lin / v.bn : lin % v.bk, nn = along_n ? lin % v.bn : lin / v.bk;
      ir::Value row = k0 + kk, col = n0 + nn;
      Bs[lb.index(kk, nn)] = detail::load_or_zero(b, a.B, row < a.k && col < a.n, [&] { return detail::b_index(a, c, row, col); });
    }
    b.barrier();
    for (uint32_t ks = 0; tf32 && ks < v.bk / 8; ++ks) {  // tf32: fragments element by element
      std::vector<std::vector<ir::Value>> fa(mt), fb(nt);
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (int r = 0; r < s.a.regs; ++r)
          fa[mi].push_back(As[la.index(wm0 + (ir::frag_row(s.a, lane, r) + mi * 16), ir::frag_col(s.a, lane, r) + ks * 8)]);
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (int r = 0; r < s.b.regs; ++r)
          fb[ni].push_back(Bs[lb.index(ir::frag_row(s.b, lane, r) + ks * 8, wn0 + (ir::frag_col(s.b, lane, r) + ni * 8))]);
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
    for (uint32_t ks = 0; !tf32 && ks < v.bk / 16; ++ks) {
      std::vector<std::vector<ir::Value>> fa, fb;
      for (uint32_t mi = 0; mi < mt; ++mi)
        fa.push_back(b.ldmatrix(As, la.index(wm0 + (mi * 16 + lane % 16u), (lane / 16u) * 8u + ks * 16), 4));
      for (uint32_t ni = 0; ni < nt; ++ni)
        fb.push_back(b.ldmatrix(Bs, lb.index(lane % 16u + ks * 16, wn0 + ni * 8), 2, true));
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
