// Internal to the matmul builders: the kernel parameters, operand element indices by
// layout, element-wise tile staging, and the epilogue C = act(alpha * acc + beta * C + bias).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_engine.h"

namespace kaio::ops::detail {

struct MatmulArgs {
  ir::Value A, B, C, m, n, lda, ldb, ldc, alpha, beta;
  ir::Value k_begin, k;              // this block's k range [k_begin, k) (split-K: one chunk)
  ir::Value splits;                  // split-K factor (> 1: C += alpha * partial, atomically)
  ir::Value base_a, base_b, base_c;  // u64 element offsets of this block's batch
  ir::Value stride_c;                // u64 elements between C's batches
  ir::Value bias;                    // the fused epilogue's bias (const Out*), when the config has one
  std::function<ir::Value(ir::Value)> act;  // the fused epilogue's activation, when the config has one
  // Where the epilogue reads bias[col + off] (f32) instead of the bias pointer (Wgmma: a copy
  // in shared memory, 0 past n).
  std::function<ir::Value(ir::Value col, uint32_t off)> bias_of;
};

// An activation registered by matmul_activation(): its map's name and body.
struct MatmulActivation {
  std::string name;
  MapBody body;
};
const MatmulActivation& matmul_activation_of(uint64_t serial);

// The epilogue's part of a kernel's name: "_bias", "_<activation>".
inline std::string epilogue_suffix(const MatmulConfig& c) {
  std::string s = c.bias ? "_bias" : "";
  if (c.activation) s += "_" + matmul_activation_of(c.activation).name;
  if (c.fast_math) s += "_fast";
  return s;
}

// A variant's register cap, for its kernels without a fused epilogue: the caps bring the
// plain kernels to an occupancy step with no room to spare, and the epilogue's bias and
// activation next to all the accumulators may need more (simt_db_128x128x8_8x8, capped at
// 128, spills 40 bytes on sm_90 with a bias alone).
inline uint32_t register_cap(const MatmulVariant& v, const MatmulConfig& c) {
  return c.bias || c.activation ? 0 : v.max_registers;
}

// Declares the epilogue's parameter (the bias, the kernel's last) and builds its
// activation. Every builder calls it after its other parameters.
inline void epilogue_params(ir::KernelBuilder& b, const MatmulConfig& c, MatmulArgs& a) {
  if (c.bias) a.bias = b.param("bias", ir::Type::pointer(c.out, true));
  if (c.fast_math) b.fast_math();  // the kernel's only f32 division and transcendentals are the activation's
  if (c.activation) {
    MapBody body = matmul_activation_of(c.activation).body;
    a.act = [&b, body](ir::Value x) {
      ir::Value in[1] = {x};
      ir::Value r = body(b, in, {});
      return r.type() == x.type() ? r : ir::cast<float>(r);
    };
  }
}

// v (f32: alpha * acc + beta * C) through the epilogue: + bias[col0 + off], then the
// activation. With `check_col` the bias is read only where the column is below n (the
// callers of store_c check it themselves). The bias index is 64-bit from col0 on, so that
// the loads of one thread's columns share one address and differ by immediate offsets.
inline ir::Value epilogue(ir::KernelBuilder& b, const MatmulArgs& a, ir::Value col0, uint32_t off, ir::Value v,
                          bool check_col = false) {
  if (a.bias_of) {
    v = v + a.bias_of(col0, off);
  } else if (a.bias.valid()) {
    auto f32 = [](ir::Value x) { return x.type() == ir::Type::scalar(ir::Scalar::F32) ? x : ir::cast<float>(x); };
    ir::Value idx = ir::cast<uint64_t>(col0) + uint64_t(off);
    if (check_col) {
      ir::Var x = b.var<float>(0.0f);
      b.if_(col0 + off < a.n, [&] { x = f32(a.bias[idx]); });
      v = v + ir::Value(x);
    } else {
      v = v + f32(a.bias[idx]);
    }
  }
  return a.act ? a.act(v) : v;
}

// The parameters every tiled engine's kernel starts with (matmul.h lists them), declared
// in the builder and packed at launch from this one struct (ops/kernel/signature.h).
struct MatmulSignature {
  kernel::Ptr a{"a"}, b{"b"}, c{"c"};
  kernel::Param<uint32_t> m{"m"}, n{"n"}, k{"k"}, lda{"lda"}, ldb{"ldb"}, ldc{"ldc"};
  kernel::Param<float> alpha{"alpha"}, beta{"beta"};
  kernel::Param<uint64_t> stride_a{"stride_a"}, stride_b{"stride_b"}, stride_c{"stride_c"};
  kernel::Param<uint32_t> splits{"splits"}, k_chunk{"k_chunk"};
  explicit MatmulSignature(const MatmulConfig& cfg) {
    a.elem = b.elem = cfg.in;
    a.is_const = b.is_const = true;
    c.elem = cfg.out;
  }
  auto fields() { return std::tie(a, b, c, m, n, k, lda, ldb, ldc, alpha, beta, stride_a, stride_b, stride_c, splits, k_chunk); }
};

// Declares the parameters (see matmul.h), the batch offsets and the split-K range:
// blockIdx.z = batch * splits + split, and split s covers k in [s * k_chunk, (s + 1) * k_chunk).
inline MatmulArgs matmul_params(ir::KernelBuilder& b, const MatmulConfig& c) {
  MatmulSignature sig(c);
  kernel::declare(b, sig);
  MatmulArgs a;
  a.A = sig.a.ir;
  a.B = sig.b.ir;
  a.C = sig.c.ir;
  a.m = sig.m.ir;
  a.n = sig.n.ir;
  a.k = sig.k.ir;  // the whole k until the split range replaces it below
  a.lda = sig.lda.ir;
  a.ldb = sig.ldb.ir;
  a.ldc = sig.ldc.ir;
  a.alpha = sig.alpha.ir;
  a.beta = sig.beta.ir;
  ir::Value sa = sig.stride_a.ir, sb = sig.stride_b.ir, sc = sig.stride_c.ir;
  a.splits = sig.splits.ir;
  ir::Value chunk = sig.k_chunk.ir;
  ir::Value k_full = a.k;
  ir::Value zz = b.block_idx_z();
  a.k_begin = (zz % a.splits) * chunk;
  a.k = ir::max(a.k_begin, ir::min(k_full, a.k_begin + chunk));  // an empty split: no k at all
  ir::Value z = ir::cast<uint64_t>(zz / a.splits);
  a.base_a = z * sa;
  a.base_b = z * sb;
  a.base_c = z * sc;
  a.stride_c = sc;
  return a;
}

// The block's tile origin (m0, n0). Blocks are renumbered in groups of 8 block rows,
// walking down the rows of a group before moving one column on, so that the blocks
// resident at once cover about 8 panels of A and a few panels of B, which L2 then holds,
// rather than one or two panels of A and every panel of B (Triton's GROUP_M ordering).
// A bijection of the grid (its last group may have fewer rows); blockIdx.z is untouched.
inline std::pair<ir::Value, ir::Value> tile_origin(ir::KernelBuilder& b, uint32_t bm, uint32_t bn) {
  constexpr uint32_t kGroup = 8;
  ir::Value gx = b.grid_dim_x(), gy = b.grid_dim_y();
  ir::Value id = b.block_idx_y() * gx + b.block_idx_x();
  ir::Value per_group = gx * kGroup;
  ir::Value first = (id / per_group) * kGroup;
  ir::Value rows = ir::min(gy - first, kGroup);
  ir::Value in = id % per_group;
  return {(first + in % rows) * bm, (in / rows) * bn};
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

// One operand's BK-deep tile staged element by element into shared memory (the Simt and
// Mma engines: any layout, any alignment). Thread t loads elements t, t + threads, ... of
// the tile, numbered along the operand's contiguous dimension so that a warp's loads
// coalesce. What does not depend on the k-step is computed once, before the loop: element
// 0's global offset and shared index, and the distance from one element to the next
// (element e lies e * (threads / L) rows or columns after element 0, L the tile's extent
// along the contiguous dimension, when threads is a multiple of L). A step then loads
// without checks (one add per element) when the block's tile lies inside the matrix along
// the operand's outer dimension and the step lies inside k; the other blocks and the
// last, partial step mask every element.
class ElementTile {
 public:
  // is_a: A (outer = m) or B (outer = n); `lay` with `outer_is_row`: the shared layout,
  // whose rows run along the outer index (else along k).
  ElementTile(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, bool is_a, uint32_t outer_tile, uint32_t bk,
              uint32_t threads, ir::Value tid, ir::Value outer0, ir::SmemLayout lay, bool outer_is_row)
      : b_(b), a_(a), c_(c), is_a_(is_a), outer_tile_(outer_tile), bk_(bk), threads_(threads), tid_(tid), outer0_(outer0),
        lay_(lay), outer_is_row_(outer_is_row), koff_(b.var<uint64_t>(uint64_t(0))) {
    contiguous_k_ = is_a ? c.a == MatLayout::RowMajor : c.b == MatLayout::ColMajor;
    L_ = contiguous_k_ ? bk : outer_tile;
    count_ = outer_tile * bk / threads;
    linear_ = threads % L_ == 0;
    if (!linear_) return;
    ir::Value o0 = contiguous_k_ ? tid / L_ : tid % L_, k0 = contiguous_k_ ? tid % L_ : tid / L_;
    const uint32_t d_outer = contiguous_k_ ? threads / L_ : 0, d_k = contiguous_k_ ? 0 : threads / L_;
    ir::Value ld = is_a ? a.lda : a.ldb;
    off0_ = index(outer0 + o0, a.k_begin + k0);
    step_ = ir::cast<uint64_t>(ld) * uint64_t(threads / L_);  // rows (or k) apart: ld elements each
    inc_ = contiguous_k_ ? b.constant<uint64_t>(uint64_t(bk)) : ir::cast<uint64_t>(ld) * uint64_t(bk);
    s0_ = sindex(o0, k0);
    sstep_ = outer_is_row ? lay.index(d_outer, d_k) : lay.index(d_k, d_outer);  // the layouts are linear
  }

  // Stages k-step k0 (the steps are staged in order, each once) into `smem`.
  void load(ir::Value k0, ir::Value smem) {
    if (!linear_) return load_masked(k0, smem);
    ir::Value outer_n = is_a_ ? a_.m : a_.n;
    b_.if_(k0 + bk_ <= a_.k && outer0_ + outer_tile_ <= outer_n, [&] {
       ir::Value at = off0_ + ir::Value(koff_);
       ir::Value P = is_a_ ? a_.A : a_.B;
       for (uint32_t e = 0; e < count_; ++e) {
         if (e) at = at + step_;  // one add per element, no products
         ir::Value x = P[at];
         smem[s0_ + e * sstep_] = x;
       }
     }).else_([&] { load_masked(k0, smem); });
    koff_ += inc_;
  }

 private:
  ir::Value index(ir::Value outer, ir::Value k) const { return is_a_ ? a_index(a_, c_, outer, k) : b_index(a_, c_, k, outer); }
  ir::Value sindex(ir::Value outer, ir::Value k) const { return outer_is_row_ ? lay_.index(outer, k) : lay_.index(k, outer); }
  // A(row, kk) or 0 outside the matrix, every element checked.
  void load_masked(ir::Value k0, ir::Value smem) {
    ir::Value outer_n = is_a_ ? a_.m : a_.n;
    for (uint32_t e = 0; e < count_; ++e) {
      ir::Value lin = tid_ + e * threads_;
      ir::Value kk = contiguous_k_ ? lin % L_ : lin / L_, oo = contiguous_k_ ? lin / L_ : lin % L_;
      ir::Value go = outer0_ + oo, gk = k0 + kk;
      smem[sindex(oo, kk)] = load_or_zero(b_, is_a_ ? a_.A : a_.B, go < outer_n && gk < a_.k, [&] { return index(go, gk); });
    }
  }

  ir::KernelBuilder& b_;
  const MatmulArgs& a_;
  const MatmulConfig& c_;
  bool is_a_;
  uint32_t outer_tile_, bk_, threads_;
  ir::Value tid_, outer0_;
  ir::SmemLayout lay_;
  bool outer_is_row_;
  ir::Var koff_;  // the next staged step's offset from the first
  bool contiguous_k_ = false, linear_ = false;
  uint32_t L_ = 1, count_ = 0, sstep_ = 0;
  ir::Value off0_, step_, inc_, s0_;
};

// C(row, col) = alpha * acc + beta * C(row, col) (C not read when beta == 0), rounded once
// to the output type; with split-K (f32 output), C += alpha * acc atomically (C was scaled
// by beta beforehand). The caller checks row < m and col < n.
inline void store_c(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, ir::Value row, ir::Value col,
                    ir::Value acc) {
  ir::Value idx = a.base_c + ir::cast<uint64_t>(row * a.ldc + col);
  ir::Value v = a.alpha * acc;
  auto put = [&](ir::Value x) {
    x = epilogue(b, a, col, 0, x);
    if (c.out == ir::Scalar::F32) a.C[idx] = x;
    else a.C[idx] = ir::cast(x, ir::Type::scalar(c.out));
  };
  if (c.out == ir::Scalar::F32 && !c.bias && !c.activation) {  // split-K takes no epilogue (can_implement)
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

// Whether C(row, col .. col + w - 1) may be stored as one w-element vector for every col
// that is a multiple of w: C's element index is then a multiple of w (ldc and the batch
// stride multiples of w) and split-K (atomic adds) is off. Uniform; the caller's C pointer
// must be aligned to the vector (MmaAsync, SimtDb: 16-byte aligned pointers).
inline ir::Value c_vectors_ok(const MatmulArgs& a, uint32_t w) {
  return (a.ldc % w) == 0u && (a.stride_c % uint64_t(w)) == uint64_t(0) && a.splits == 1u;
}

// C(row, col + i) from accs[i], i < w = accs.size() (2 or 4; col a multiple of w, row < m
// checked by the caller): one vector store (and load, for beta) when `vectors` holds and
// all w columns lie inside the matrix, else store_c per element.
inline void store_c_vec_epilogue(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, ir::Value vectors,
                                 ir::Value row, ir::Value col, const std::vector<ir::Value>& accs);

inline void store_c_vec(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, ir::Value vectors, ir::Value row,
                        ir::Value col, const std::vector<ir::Value>& accs) {
  if (a.bias.valid() || a.act) return store_c_vec_epilogue(b, a, c, vectors, row, col, accs);
  const uint32_t w = static_cast<uint32_t>(accs.size());
  b.if_(vectors && col + (w - 1) < a.n, [&] {
     ir::Value idx = a.base_c + ir::cast<uint64_t>(row * a.ldc + col);
     auto out = [&](ir::Value x) { return c.out == ir::Scalar::F32 ? x : ir::cast(x, ir::Type::scalar(c.out)); };
     b.if_(a.beta == 0.0f, [&] {
        std::vector<ir::Value> v;
        for (uint32_t i = 0; i < w; ++i) v.push_back(out(a.alpha * accs[i]));
        ir::store_vec(a.C, idx, v);
      }).else_([&] {
       std::vector<ir::Value> old = ir::load_vec(a.C, idx, static_cast<int>(w)), v;
       for (uint32_t i = 0; i < w; ++i) {
         ir::Value o = c.out == ir::Scalar::F32 ? old[i] : ir::cast<float>(old[i]);
         v.push_back(out(ir::fma(a.beta, o, a.alpha * accs[i])));
       }
       ir::store_vec(a.C, idx, v);
     });
   }).else_([&] {
    for (uint32_t i = 0; i < w; ++i) b.if_(col + i < a.n, [&] { store_c(b, a, c, row, col + i, accs[i]); });
  });
}

// store_c_vec with a fused epilogue: the epilogue's code (an activation may be long) once
// per element, between the reads of C (vector or per element) and the stores.
inline void store_c_vec_epilogue(ir::KernelBuilder& b, const MatmulArgs& a, const MatmulConfig& c, ir::Value vectors,
                                 ir::Value row, ir::Value col, const std::vector<ir::Value>& accs) {
  const uint32_t w = static_cast<uint32_t>(accs.size());
  ir::Value idx = a.base_c + ir::cast<uint64_t>(row * a.ldc + col);
  ir::Value whole = vectors && col + (w - 1) < a.n;
  auto f32 = [&](ir::Value x) { return c.out == ir::Scalar::F32 ? x : ir::cast<float>(x); };
  std::vector<ir::Var> x;
  for (uint32_t i = 0; i < w; ++i) x.push_back(b.var<float>(a.alpha * accs[i]));
  b.if_(a.beta != 0.0f, [&] {
    b.if_(whole, [&] {
       std::vector<ir::Value> old = ir::load_vec(a.C, idx, static_cast<int>(w));
       for (uint32_t i = 0; i < w; ++i) x[i] = ir::fma(a.beta, f32(old[i]), x[i]);
     }).else_([&] {
      for (uint32_t i = 0; i < w; ++i) b.if_(col + i < a.n, [&] { x[i] = ir::fma(a.beta, f32(a.C[idx + uint64_t(i)]), x[i]); });
    });
  });
  std::vector<ir::Value> y;
  for (uint32_t i = 0; i < w; ++i) {
    ir::Value v = epilogue(b, a, col, i, x[i], true);
    y.push_back(c.out == ir::Scalar::F32 ? v : ir::cast(v, ir::Type::scalar(c.out)));
  }
  b.if_(whole, [&] { ir::store_vec(a.C, idx, y); }).else_([&] {
    for (uint32_t i = 0; i < w; ++i) b.if_(col + i < a.n, [&] { a.C[idx + uint64_t(i)] = y[i]; });
  });
}

}  // namespace kaio::ops::detail
