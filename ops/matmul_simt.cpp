// The SIMT matmul engine (f32): a BM x BN block tile of C, BK deep per step, TM x TN
// accumulators per thread in a register array (unrolled by C++ loops, so they never reach
// local memory). Each step stages A (BK x BM, k-major) and B (BK x BN) in shared memory,
// masked at the matrix edges (zeros, no loads outside), loaded along the dimension that is
// contiguous in global memory so a warp's loads coalesce for either layout.
#include <string>

#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

ir::Kernel build_matmul_simt(const MatmulVariant& v, const MatmulConfig& c) {
  const uint32_t cols = v.bn / v.tn, threads = v.threads();
  ir::KernelBuilder b(std::string("matmul_") + v.name + (c.a == MatLayout::RowMajor ? "_r" : "_c") +
                      (c.b == MatLayout::RowMajor ? "r" : "c"));
  b.launch_bounds(threads);
  if (v.max_registers) b.max_registers(v.max_registers);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  auto As = b.shared<float>(v.bk * v.bm);
  auto Bs = b.shared<float>(v.bk * v.bn);
  ir::Value tid = b.thread_idx_x();
  ir::Value tx = tid % cols, ty = tid / cols;
  ir::Value m0 = b.block_idx_y() * v.bm, n0 = b.block_idx_x() * v.bn;
  auto acc = b.array<float>(v.tm * v.tn, 0.0f);
  b.for_(a.k_begin, a.k, v.bk, [&](ir::Value k0) {
    for (uint32_t e = 0; e < v.bm * v.bk / threads; ++e) {  // A(m0 + mm, k0 + kk) -> As[kk][mm]
      ir::Value lin = tid + e * threads;
      const bool along_k = c.a == MatLayout::RowMajor;
      ir::Value kk = along_k ? lin % v.bk : lin / v.bm, mm = along_k ? lin / v.bk : lin % v.bm;
      ir::Value row = m0 + mm, col = k0 + kk;
      As[kk * v.bm + mm] = detail::load_or_zero(b, a.A, row < a.m && col < a.k, [&] { return detail::a_index(a, c, row, col); });
    }
    for (uint32_t e = 0; e < v.bn * v.bk / threads; ++e) {  // B(k0 + kk, n0 + nn) -> Bs[kk][nn]
      ir::Value lin = tid + e * threads;
      const bool along_n = c.b == MatLayout::RowMajor;
      ir::Value kk = along_n ? lin / v.bn : lin % v.bk, nn = along_n ? lin % v.bn : lin / v.bk;
      ir::Value row = k0 + kk, col = n0 + nn;
      Bs[kk * v.bn + nn] = detail::load_or_zero(b, a.B, row < a.k && col < a.n, [&] { return detail::b_index(a, c, row, col); });
    }
    b.barrier();
    for (uint32_t kk = 0; kk < v.bk; ++kk) {
      // the thread's TM (TN) consecutive values of this k: 16-byte shared loads when they
      // are a multiple of 4 (ty * TM, kk * BM are, so every vector is aligned)
      auto read = [&](ir::Value tile, ir::Value first, uint32_t n) {
        std::vector<ir::Value> out;
        for (uint32_t i = 0; i < n; i += (n % 4 == 0 ? 4 : 1)) {
          if (n % 4 == 0) {
            for (ir::Value x : ir::load_vec(tile, first + i, 4)) out.push_back(x);
          } else {
            out.push_back(tile[first + i]);
          }
        }
        return out;
      };
      std::vector<ir::Value> av = read(As, ty * v.tm + kk * v.bm, v.tm);
      std::vector<ir::Value> bv = read(Bs, tx * v.tn + kk * v.bn, v.tn);
      for (uint32_t i = 0; i < v.tm; ++i)
        for (uint32_t j = 0; j < v.tn; ++j) acc[i * v.tn + j] = ir::fma(av[i], bv[j], acc[i * v.tn + j]);
    }
    b.barrier();
  });
  for (uint32_t i = 0; i < v.tm; ++i)
    for (uint32_t j = 0; j < v.tn; ++j) {
      ir::Value row = m0 + ty * v.tm + i, col = n0 + tx * v.tn + j;
      b.if_(row < a.m && col < a.n, [&] { detail::store_c(b, a, c, row, col, acc[i * v.tn + j]); });
    }
  return b.build();
}

}  // namespace kaio::ops
