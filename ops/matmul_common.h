// Internal to the matmul builders: the kernel parameters, operand element indices by
// layout, and the epilogue C = alpha * acc + beta * C.
#pragma once

#include "kaio/ir/builder.h"
#include "kaio/ops/matmul.h"

namespace kaio::ops::detail {

struct MatmulArgs {
  ir::Value A, B, C, m, n, lda, ldb, ldc, alpha, beta;
  ir::Value k_begin, k;              // this block's k range [k_begin, k) (split-K: one chunk)
  ir::Value splits;                  // split-K factor (> 1: C += alpha * partial, atomically)
  ir::Value base_a, base_b, base_c;  // u64 element offsets of this block's batch
};

// Declares the parameters (see matmul.h), the batch offsets and the split-K range:
// blockIdx.z = batch * splits + split, and split s covers k in [s * k_chunk, (s + 1) * k_chunk).
inline MatmulArgs matmul_params(ir::KernelBuilder& b, const MatmulConfig& c) {
  MatmulArgs a;
  a.A = b.param("a", ir::Type::pointer(c.in, true));
  a.B = b.param("b", ir::Type::pointer(c.in, true));
  a.C = b.param("c", ir::Type::pointer(c.out, false));
  a.m = b.param<uint32_t>("m");
  a.n = b.param<uint32_t>("n");
  a.k = b.param<uint32_t>("k");  // the whole k until the split range replaces it below
  a.lda = b.param<uint32_t>("lda");
  a.ldb = b.param<uint32_t>("ldb");
  a.ldc = b.param<uint32_t>("ldc");
  a.alpha = b.param<float>("alpha");
  a.beta = b.param<float>("beta");
  auto sa = b.param<uint64_t>("stride_a");
  auto sb = b.param<uint64_t>("stride_b");
  auto sc = b.param<uint64_t>("stride_c");
  a.splits = b.param<uint32_t>("splits");
  auto chunk = b.param<uint32_t>("k_chunk");
  ir::Value k_full = a.k;
  ir::Value zz = b.block_idx_z();
  a.k_begin = (zz % a.splits) * chunk;
  a.k = ir::max(a.k_begin, ir::min(k_full, a.k_begin + chunk));  // an empty split: no k at all
  ir::Value z = ir::cast<uint64_t>(zz / a.splits);
  a.base_a = z * sa;
  a.base_b = z * sb;
  a.base_c = z * sc;
  return a;
}

// Element indices of A(row, kk) and B(kk, col) (row: 0..m, kk: 0..k, col: 0..n).
inline ir::Value a_index(const MatmulArgs& a, const MatmulConfig& c, ir::Value row, ir::Value kk) {
  ir::Value off = c.a == MatLayout::RowMajor ? row * a.lda + kk : kk * a.lda + row;
  return a.base_a + ir::cast<uint64_t>(off);
}
inline ir::Value b_index(const MatmulArgs& a, const MatmulConfig& c, ir::Value kk, ir::Value col) {
  ir::Value off = c.b == MatLayout::RowMajor ? kk * a.ldb + col : col * a.ldb + kk;
  return a.base_b + ir::cast<uint64_t>(off);
}

// A(row, kk) or 0 outside the matrix (no load happens there); f32 for Simt, the input
// type for Mma.
inline ir::Value load_or_zero(ir::KernelBuilder& b, ir::Value p, ir::Value ok, const std::function<ir::Value()>& index) {
  ir::Type t = ir::Type::scalar(p.type().elem);
  ir::Var v = b.var(t, b.constant(t, ir::Literal{ir::Literal::Int, 0, 0, 0}, "matmul"));
  b.if_(ok, [&] { v = ir::Value(p[index()]); });
  return v;
}

// C(row, col) = alpha * acc + beta * C(row, col) (C not read when beta == 0), rounded once
// to the output type; with split-K (f32 output), C += alpha * acc atomically (C was scaled
// by beta beforehand). The caller checks row < m and col < n.
inline void store_c(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, ir::Value row, ir::Value col,
                    ir::Value acc) {
  ir::Value idx = a.base_c + ir::cast<uint64_t>(row * a.ldc + col);
  ir::Value v = a.alpha * acc;
  auto put = [&](ir::Value x) {
    if (c.out == ir::Scalar::F32) a.C[idx] = x;
    else a.C[idx] = ir::cast(x, ir::Type::scalar(c.out));
  };
  if (c.out == ir::Scalar::F32) {
    b.if_(a.splits > 1u, [&] { (void)ir::atomic_add(a.C, idx, v); }).else_([&] {
      b.if_(a.beta == 0.0f, [&] { put(v); }).else_([&] {
        ir::Value old = a.C[idx];
        put(ir::fma(a.beta, old, v));
      });
    });
    return;
  }
  b.if_(a.beta == 0.0f, [&] { put(v); }).else_([&] {
    ir::Value old = a.C[idx];
    ir::Value o = c.out == ir::Scalar::F32 ? old : ir::cast<float>(old);
    put(ir::fma(a.beta, o, v));
  });
}

}  // namespace kaio::ops::detail
