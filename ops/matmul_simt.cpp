// The SIMT matmul engine (f32): a BM x BN block tile of C, BK deep per step, thread_m x thread_n
// accumulators per thread in a register array (unrolled by C++ loops, so they never reach
// local memory). Each step stages A (BK x BM, k-major) and B (BK x BN) in shared memory,
// masked at the matrix edges (zeros, no loads outside), loaded along the dimension that is
// contiguous in global memory so a warp's loads coalesce for either layout (ElementTile in
// matmul_common.h: offsets hoisted out of the loop, checks only at the edges).
#include <string>

#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {
ir::Kernel build_matmul_simt(const MatmulVariant& v, const MatmulConfig& c) {
  const uint32_t cols = v.bn / v.thread_n, threads = v.threads();
  ir::KernelBuilder b(std::string("matmul_") + v.name + (c.a == MatLayout::RowMajor ? "_r" : "_c") +
                      (c.b == MatLayout::RowMajor ? "r" : "c") + detail::epilogue_suffix(c));
  b.launch_bounds(threads);
  if (const uint32_t cap = detail::register_cap(v, c)) b.max_registers(cap);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  detail::epilogue_params(b, c, a);
  auto As = b.shared<float>(v.bk * v.bm);
  auto Bs = b.shared<float>(v.bk * v.bn);
  ir::Value tid = b.thread_idx_x();
  ir::Value tx = tid % cols, ty = tid / cols;
  auto [m0, n0] = detail::tile_origin(b, v.bm, v.bn);
  auto acc = b.array<float>(v.thread_m * v.thread_n, 0.0f);
  // A(m0 + mm, k0 + kk) -> As[kk][mm], B(k0 + kk, n0 + nn) -> Bs[kk][nn] (matmul_common.h:
  // unchecked from hoisted offsets inside the matrix, masked at its edges)
  detail::ElementTile ta(b, a, c, true, v.bm, v.bk, threads, tid, m0, ir::SmemLayout::row_major(v.bm), false);
  detail::ElementTile tb(b, a, c, false, v.bn, v.bk, threads, tid, n0, ir::SmemLayout::row_major(v.bn), false);
  // A thread's TM rows (TN columns): with TM a multiple of 4, groups of 4 at ty * 4 + g *
  // rows * 4, read as 16-byte vectors (the 8 lanes of a quarter warp then read 128
  // contiguous bytes, no bank conflict); else TM consecutive rows at ty * TM.
  const uint32_t rows = v.bm / v.thread_m;
  auto at = [](uint32_t i, uint32_t t, uint32_t threads_along) { return t % 4 ? i : (i / 4) * threads_along * 4 + i % 4; };
  ir::Value a_th = ty * (v.thread_m % 4 ? v.thread_m : 4u), b_th = tx * (v.thread_n % 4 ? v.thread_n : 4u);
  auto read = [&](ir::Value tile, ir::Value th, uint32_t k_off, uint32_t t, uint32_t threads_along) {
    std::vector<ir::Value> out;
    for (uint32_t i = 0; i < t; i += (t % 4 ? 1 : 4)) {
      if (t % 4) out.push_back(tile[th + (k_off + at(i, t, threads_along))]);
      else
        for (ir::Value x : ir::load_vec(tile, th + (k_off + at(i, t, threads_along)), 4)) out.push_back(x);
    }
    return out;
  };
  b.for_(a.k_begin, a.k, v.bk, [&](ir::Value k0) {
    ta.load(k0, As);
    tb.load(k0, Bs);
    b.barrier();
    for (uint32_t kk = 0; kk < v.bk; ++kk) {
      std::vector<ir::Value> av = read(As, a_th, kk * v.bm, v.thread_m, rows), bv = read(Bs, b_th, kk * v.bn, v.thread_n, cols);
      for (uint32_t i = 0; i < v.thread_m; ++i)
        for (uint32_t j = 0; j < v.thread_n; ++j) acc[i * v.thread_n + j] = ir::fma(av[i], bv[j], acc[i * v.thread_n + j]);
    }
    b.barrier();
  });
  for (uint32_t i = 0; i < v.thread_m; ++i)
    for (uint32_t j = 0; j < v.thread_n; ++j) {
      ir::Value row = m0 + (a_th + at(i, v.thread_m, rows)), col = n0 + (b_th + at(j, v.thread_n, cols));
      b.if_(row < a.m && col < a.n, [&] { detail::store_c(b, a, c, row, col, acc[i * v.thread_n + j]); });
    }
  return b.build();
}


}  // namespace


namespace {
bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int, std::string* why) {
  return detail::simt_types_ok(v, p, why);
}
}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineSimt = {.name = "Simt", .build_sm = 80, .threads = simt_threads, .valid = simt_valid,
                                                 .can_implement = can_implement, .build = build_matmul_simt,
                                                 .launch_config = tiled_launch, .launch = launch_with_config, .declare = declare_f32};
}  // namespace detail

}  // namespace kaio::ops
