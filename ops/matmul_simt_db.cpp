// The pipelined SIMT matmul engine (f32): as matmul_simt.cpp (a BM x BN block tile, BK
// deep, TM x TN accumulators per thread), with 16-byte global loads along each operand's
// contiguous dimension and double buffering: the next k-step's vectors are loaded into
// registers while the current step's tile is multiplied out of shared memory, then stored
// into the other shared buffer, one barrier per step.
//
//   prefetch(0); store(buffer 0); barrier
//   for t in 0 .. steps-1:
//     if t + 1 < steps: prefetch(t + 1)           (global -> registers)
//     multiply out of buffer t % 2
//     if t + 1 < steps: store(buffer (t + 1) % 2)  (registers -> shared; last read at t - 1)
//     barrier
//
// A vector that lies wholly inside the matrix is one 16-byte load; one at an edge loads its
// elements one by one, masked (zeros outside). Needs the contiguous leading dimensions and
// batch strides to be multiples of 4 elements and 16-byte aligned pointers (can_implement).
#include <string>

#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

ir::Kernel build_matmul_simt_db(const MatmulVariant& v, const MatmulConfig& c) {
  const uint32_t cols = v.bn / v.tn, threads = v.threads();
  const uint32_t va = v.bm * v.bk / 4 / threads, vb = v.bn * v.bk / 4 / threads;  // vectors per thread
  if (v.tm % 4 || v.tn % 4)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": TM and TN must be multiples of 4");
  if (va * threads * 4 != v.bm * v.bk || vb * threads * 4 != v.bn * v.bk || va == 0 || vb == 0)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": the tiles' 16-byte vectors do not divide among its threads");
  ir::KernelBuilder b(std::string("matmul_") + v.name + (c.a == MatLayout::RowMajor ? "_r" : "_c") +
                      (c.b == MatLayout::RowMajor ? "r" : "c"));
  b.launch_bounds(threads);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  auto As = b.shared<float>(2 * v.bk * v.bm);  // [buffer][kk][mm]
  auto Bs = b.shared<float>(2 * v.bk * v.bn);  // [buffer][kk][nn]
  ir::Value tid = b.thread_idx_x();
  ir::Value tx = tid % cols, ty = tid / cols;
  ir::Value m0 = b.block_idx_y() * v.bm, n0 = b.block_idx_x() * v.bn;
  ir::Value steps = (a.k - a.k_begin + (v.bk - 1)) / v.bk;
  auto ra = b.array<float>(4 * va, 0.0f), rb = b.array<float>(4 * vb, 0.0f);  // the prefetched vectors

  // One operand's vector e of this thread: (outer, kk) of its first element, and whether
  // the vector runs along k (else along the outer dimension).
  struct Vec { ir::Value outer, kk; bool along_k; };
  auto vec_of = [&](uint32_t e, uint32_t outer_tile, bool along_k) -> Vec {
    ir::Value id = tid + e * threads;
    if (along_k) return {id / (v.bk / 4), (id % (v.bk / 4)) * 4u, true};
    return {(id % (outer_tile / 4)) * 4u, id / (outer_tile / 4), false};
  };
  // Loads the vectors of k-step t of one operand into r (global (outer, k) via index()).
  auto prefetch = [&](const ir::RegArray& r, uint32_t nvec, uint32_t outer_tile, bool along_k, ir::Value P,
                      ir::Value outer0, ir::Value outer_n, ir::Value t,
                      const std::function<ir::Value(ir::Value, ir::Value)>& index) {
    for (uint32_t e = 0; e < nvec; ++e) {
      Vec x = vec_of(e, outer_tile, along_k);
      ir::Value go = outer0 + x.outer, gk = a.k_begin + t * v.bk + x.kk;
      ir::Value last_o = along_k ? go : go + 3u, last_k = along_k ? gk + 3u : gk;
      b.if_(last_o < outer_n && last_k < a.k, [&] {
         std::vector<ir::Value> q = ir::load_vec(P, index(go, gk), 4);
         for (uint32_t i = 0; i < 4; ++i) r[4 * e + i] = q[i];
       }).else_([&] {
        for (uint32_t i = 0; i < 4; ++i) {
          ir::Value o = along_k ? go : go + i, k = along_k ? gk + i : gk;
          r[4 * e + i] = 0.0f;
          b.if_(o < outer_n && k < a.k, [&] { r[4 * e + i] = ir::Value(P[index(o, k)]); });
        }
      });
    }
  };
  auto prefetch_step = [&](ir::Value t) {
    prefetch(ra, va, v.bm, c.a == MatLayout::RowMajor, a.A, m0, a.m, t,
             [&](ir::Value row, ir::Value k) { return detail::a_index(a, c, row, k); });
    prefetch(rb, vb, v.bn, c.b == MatLayout::ColMajor, a.B, n0, a.n, t,
             [&](ir::Value col, ir::Value k) { return detail::b_index(a, c, k, col); });
  };
  // Registers -> shared buffer `buf`, k-major ([kk][outer]): a vector along the outer
  // dimension is one 16-byte store, one along k four scalar stores.
  auto store = [&](ir::Value tile, const ir::RegArray& r, uint32_t nvec, uint32_t outer_tile, bool along_k, ir::Value buf) {
    for (uint32_t e = 0; e < nvec; ++e) {
      Vec x = vec_of(e, outer_tile, along_k);
      ir::Value base = buf * (v.bk * outer_tile);
      if (along_k) {
        for (uint32_t i = 0; i < 4; ++i) tile[base + (x.kk + i) * outer_tile + x.outer] = r[4 * e + i];
      } else {
        ir::store_vec(tile, base + x.kk * outer_tile + x.outer, {r[4 * e], r[4 * e + 1], r[4 * e + 2], r[4 * e + 3]});
      }
    }
  };
  auto store_step = [&](ir::Value buf) {
    store(As, ra, va, v.bm, c.a == MatLayout::RowMajor, buf);
    store(Bs, rb, vb, v.bn, c.b == MatLayout::ColMajor, buf);
  };

  auto acc = b.array<float>(v.tm * v.tn, 0.0f);
  ir::Value zero = b.constant<uint32_t>(0u);
  prefetch_step(zero);
  store_step(zero);
  b.barrier();
  b.for_(0u, steps, [&](ir::Value t) {
    ir::Value more = t + 1u < steps;
    b.if_(more, [&] { prefetch_step(t + 1u); });
    ir::Value cur = t % 2u;
    ir::Value abase = cur * (v.bk * v.bm) + ty * v.tm, bbase = cur * (v.bk * v.bn) + tx * v.tn;
    for (uint32_t kk = 0; kk < v.bk; ++kk) {
      std::vector<ir::Value> av, bv;
      for (uint32_t i = 0; i < v.tm; i += 4)
        for (ir::Value x : ir::load_vec(As, abase + (kk * v.bm + i), 4)) av.push_back(x);
      for (uint32_t j = 0; j < v.tn; j += 4)
        for (ir::Value x : ir::load_vec(Bs, bbase + (kk * v.bn + j), 4)) bv.push_back(x);
      for (uint32_t i = 0; i < v.tm; ++i)
        for (uint32_t j = 0; j < v.tn; ++j) acc[i * v.tn + j] = ir::fma(av[i], bv[j], acc[i * v.tn + j]);
    }
    b.if_(more, [&] { store_step((t + 1u) % 2u); });
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
