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

namespace {
ir::Kernel build_matmul_mma(const MatmulVariant& v, const MatmulConfig& c) {
  const bool tf32 = c.in == ir::Scalar::F32;
  const ir::MmaKind kind = tf32 ? ir::MmaKind::TF32 : c.in == ir::Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16;
  const ir::MmaShape& s = ir::mma_shape(kind);
  const uint32_t threads = v.threads(), warps_n = v.bn / v.warp_n;
  const uint32_t mt = v.warp_m / 16, nt = v.warp_n / 8;  // mma tiles per warp
  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (c.a == MatLayout::RowMajor ? "_r" : "_c") + (c.b == MatLayout::RowMajor ? "r" : "c") + detail::epilogue_suffix(c));
  b.launch_bounds(threads);
  if (const uint32_t cap = detail::register_cap(v, c)) b.max_registers(cap);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  detail::epilogue_params(b, c, a);
  const ir::SmemLayout la = ir::SmemLayout::padded(v.bk, 8), lb = ir::SmemLayout::padded(v.bn, 8);
  auto As = b.shared(c.in, la.elements(v.bm), 128);
  auto Bs = b.shared(c.in, lb.elements(v.bk), 128);
  ir::Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  ir::Value wm0 = (warp / warps_n) * v.warp_m, wn0 = (warp % warps_n) * v.warp_n;
  auto [m0, n0] = detail::tile_origin(b, v.bm, v.bn);
  auto acc = b.array<float>(mt * nt * 4, 0.0f);
  // The tiles' loads (matmul_common.h): unchecked from hoisted offsets inside the
  // matrix, masked at its edges.
  detail::ElementTile ta(b, a, c, true, v.bm, v.bk, threads, tid, m0, la, true);   // As[mm][kk]
  detail::ElementTile tb(b, a, c, false, v.bn, v.bk, threads, tid, n0, lb, false); // Bs[kk][nn]
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
    ta.load(k0, As);
    tb.load(k0, Bs);
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


}  // namespace

namespace {

bool valid(const MatmulVariant& v, std::string* why) {
  if (detail::warp_tile_threads(v) > 1024) return detail::refuse(v, why, "(BM / warp_m) x (BN / warp_n) warps must be at most 32");
  return true;
}

bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int sm, std::string* why) {
  if (sm < 80) return detail::refuse(v, why, "mma.sync needs sm_80 or newer, the device is sm_" + std::to_string(sm));
  const bool tf32 = p.in == ir::Scalar::F32 && p.tf32;
  if (tf32 && v.warp_m * v.warp_n > 32 * 32)  // its 64 x 64 warp tile spills
    return detail::refuse(v, why, "tf32 needs a warp tile of at most 32 x 32");
  return detail::mma_types_ok(v, p, why);
}

}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineMma = {.name = "Mma", .build_sm = 80, .threads = warp_tile_threads, .valid = valid,
                                                 .can_implement = can_implement, .build = build_matmul_mma,
                                                 .launch_config = tiled_launch, .launch = launch_with_config, .declare = declare_mma};
}  // namespace detail

}  // namespace kaio::ops
