// The pipelined SIMT matmul engine (f32): a BM x BN block tile, BK deep, TM x TN
// accumulators per thread, with 16-byte global loads along each operand's contiguous
// dimension and double buffering: the next k-step's vectors are loaded into registers
// while the current step's tile is multiplied out of shared memory, then stored into the
// other shared buffer, one barrier per step. The loop is unrolled twice so that each copy
// reads and writes fixed buffers (no buffer arithmetic in the loop), or, for a `rolled`
// variant, takes one step an iteration with the buffer in a register (half the code).
//
//   prefetch(0); store(buffer 0); barrier
//   for t in 0 .. steps-1:
//     if t + 1 < steps: prefetch(t + 1)           (global -> registers)
//     multiply out of buffer t % 2
//     if t + 1 < steps: store(buffer (t + 1) % 2)  (registers -> shared; last read at t - 1)
//     barrier
//
// Mainloop cost: what does not depend on the k-step is computed once before the loop (each
// vector's tile coordinates, its global offset at the first step, its shared index,
// whether the block's tile lies inside the matrix); a step adds a per-step increment to one u64 offset per operand and checks
// once per operand whether the step lies inside k and the block's tile inside the matrix:
// then each vector is one 16-byte load without checks. Edge blocks and the last, partial
// step check each vector: one inside the matrix is one 16-byte load, one at an edge loads
// its elements one by one, masked (zeros outside).
//
// Shared memory is k-major ([kk][m] for A, [kk][n] for B), so a thread's TM (TN) values
// of one k are contiguous and are read with 16-byte ld.shared.v4 feeding the FFMAs. A
// thread's rows (columns) come in groups of 4 spread over the tile, {ty * 4 + g * BM / (TM
// / 4)}: the 8 lanes of a quarter warp then read 128 contiguous bytes (no bank conflict),
// where TM contiguous values per thread would make lanes 32 bytes apart collide. Tiles
// stored from vectors along k are padded by 4 floats per row, so the four scalar stores of
// such a vector do not collide across lanes either.
//
// Needs the contiguous leading dimensions and batch strides to be multiples of 4 elements
// and 16-byte aligned pointers (can_implement).
#include <string>

#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

// One operand's share of the prefetch: its vectors' coordinates and what is hoisted.
struct Operand {
  bool along_k;         // the operand's vectors run along k (A row-major, B col-major)
  uint32_t outer_tile;  // BM or BN
  uint32_t nvec;        // vectors per thread per step
  ir::Value P, outer0, outer_n, ld;
  ir::RegArray r;       // the prefetched vectors
  ir::Var koff;         // u64 element offset of the next prefetched step from the first (one vector: the vector's own)
  std::function<ir::Value(ir::Value, ir::Value)> index;  // global element index of (outer, k), u64
  uint32_t stride = 0;  // shared row stride (elements of one kk)
  std::vector<ir::Value> outer, kk, off0, sidx;  // per vector
  ir::Value inc;        // u64 element offset from one k-step to the next
  ir::Value inside;     // the block's tile lies inside the matrix along the outer dimension
};

}  // namespace

namespace {
ir::Kernel build_matmul_simt_db(const MatmulVariant& v, const MatmulConfig& c) {
  const uint32_t cols = v.bn / v.thread_n, rows = v.bm / v.thread_m, threads = v.threads();
  const uint32_t va = v.bm * v.bk / 4 / threads, vb = v.bn * v.bk / 4 / threads;  // vectors per thread
  if (v.thread_m % 4 || v.thread_n % 4)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": TM and TN must be multiples of 4");
  if (va * threads * 4 != v.bm * v.bk || vb * threads * 4 != v.bn * v.bk || va == 0 || vb == 0)
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": the tiles' 16-byte vectors do not divide among its threads");
  ir::KernelBuilder b(std::string("matmul_") + v.name + (c.a == MatLayout::RowMajor ? "_r" : "_c") +
                      (c.b == MatLayout::RowMajor ? "r" : "c") + detail::epilogue_suffix(c));
  b.launch_bounds(threads);
  if (const uint32_t cap = detail::register_cap(v, c)) b.max_registers(cap);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  detail::epilogue_params(b, c, a);
  ir::Value tid = b.thread_idx_x();
  ir::Value tx = tid % cols, ty = tid / cols;
  auto [m0, n0] = detail::tile_origin(b, v.bm, v.bn);
  ir::Value steps = (a.k - a.k_begin + (v.bk - 1)) / v.bk;
  ir::Value zero = b.constant<uint32_t>(0u);

  Operand A{c.a == MatLayout::RowMajor, v.bm, va, a.A, m0, a.m, a.lda, b.array<float>(4 * va, 0.0f),
            b.var<uint64_t>(uint64_t(0)), [&](ir::Value row, ir::Value k) { return detail::a_index(a, c, row, k); }};
  Operand B{c.b == MatLayout::ColMajor, v.bn, vb, a.B, n0, a.n, a.ldb, b.array<float>(4 * vb, 0.0f),
            b.var<uint64_t>(uint64_t(0)), [&](ir::Value col, ir::Value k) { return detail::b_index(a, c, k, col); }};
  for (Operand* o : {&A, &B}) {
    o->stride = o->outer_tile + (o->along_k ? 4 : 0);
    o->inside = o->outer0 + o->outer_tile <= o->outer_n;
    // k is contiguous for a vector along k: the next step is BK elements on, else BK rows on
    o->inc = o->along_k ? b.constant<uint64_t>(uint64_t(v.bk)) : ir::cast<uint64_t>(o->ld) * uint64_t(v.bk);
    for (uint32_t e = 0; e < o->nvec; ++e) {
      ir::Value id = tid + e * threads;
      ir::Value outer = o->along_k ? id / (v.bk / 4) : (id % (o->outer_tile / 4)) * 4u;
      ir::Value kk = o->along_k ? (id % (v.bk / 4)) * 4u : id / (o->outer_tile / 4);
      o->outer.push_back(outer);
      o->kk.push_back(kk);
      o->off0.push_back(o->index(o->outer0 + outer, a.k_begin + kk));  // used by blocks inside the matrix only
      o->sidx.push_back(kk * o->stride + outer);
    }
    // One vector a step: its offset is the running one (two fewer registers held across the
    // k-loop, which keeps the 8 x 8 row within its cap of 128).
    if (o->nvec == 1) o->koff = o->off0[0];
  }
  auto As = b.shared<float>(2 * v.bk * A.stride);  // [buffer][kk][mm]
  auto Bs = b.shared<float>(2 * v.bk * B.stride);  // [buffer][kk][nn]

  // Vector e of the k-step at k0 into o.r, element by element where the vector crosses an
  // edge of the matrix (zeros outside).
  auto load_masked = [&](const Operand& o, uint32_t e, ir::Value k0) {
    ir::Value go = o.outer0 + o.outer[e], gk = k0 + o.kk[e];
    ir::Value last_o = o.along_k ? go : go + 3u, last_k = o.along_k ? gk + 3u : gk;
    b.if_(last_o < o.outer_n && last_k < a.k, [&] {
       std::vector<ir::Value> q = ir::load_vec(o.P, o.index(go, gk), 4);
       for (uint32_t i = 0; i < 4; ++i) o.r[4 * e + i] = q[i];
     }).else_([&] {
      for (uint32_t i = 0; i < 4; ++i) {
        ir::Value oo = o.along_k ? go : go + i, k = o.along_k ? gk + i : gk;
        o.r[4 * e + i] = 0.0f;
        b.if_(oo < o.outer_n && k < a.k, [&] { o.r[4 * e + i] = ir::Value(o.P[o.index(oo, k)]); });
      }
    });
  };
  // Global -> registers for k-step t (the steps are prefetched in order: koff is t's offset).
  auto prefetch_step = [&](ir::Value t) {
    ir::Value k0 = a.k_begin + t * v.bk;
    ir::Value full = k0 + v.bk <= a.k;  // the whole step lies inside k
    for (Operand* o : {&A, &B}) {
      // a block whose tile lies inside the matrix: one 16-byte load per vector, no checks
      b.if_(full && o->inside, [&] {
         for (uint32_t e = 0; e < o->nvec; ++e) {
           std::vector<ir::Value> q = ir::load_vec(o->P, o->nvec == 1 ? ir::Value(o->koff) : o->off0[e] + ir::Value(o->koff), 4);
           for (uint32_t i = 0; i < 4; ++i) o->r[4 * e + i] = q[i];
         }
       }).else_([&] {
        for (uint32_t e = 0; e < o->nvec; ++e) load_masked(*o, e, k0);
      });
      o->koff += o->inc;
    }
  };
  // A shared buffer: 0 or 1 known while building (two steps a loop iteration), or a register
  // (rolled). at(base, buf, size): base in that buffer, buffers `size` elements apart (no
  // arithmetic at all for a fixed buffer 0).
  struct Buf {
    uint32_t fixed = 0;
    ir::Value reg;
  };
  auto in_buf = [&](ir::Value base, const Buf& buf, uint32_t size) {
    if (buf.reg.valid()) return base + buf.reg * size;
    return buf.fixed ? base + buf.fixed * size : base;
  };
  // Registers -> shared buffer `buf` (k-major): a vector along the outer dimension is one
  // 16-byte store, one along k four scalar stores (to rows padded by 4).
  auto store_step = [&](const Buf& buf) {
    for (auto [o, tile] : {std::pair{&A, As}, std::pair{&B, Bs}})
      for (uint32_t e = 0; e < o->nvec; ++e) {
        ir::Value at = in_buf(o->sidx[e], buf, v.bk * o->stride);
        if (o->along_k) {
          for (uint32_t i = 0; i < 4; ++i) tile[at + i * o->stride] = o->r[4 * e + i];
        } else {
          ir::store_vec(tile, at, {o->r[4 * e], o->r[4 * e + 1], o->r[4 * e + 2], o->r[4 * e + 3]});
        }
      }
  };

  // The thread's rows and columns: groups of 4, group g at g * rows * 4 + ty * 4 (A) and
  // g * cols * 4 + tx * 4 (B).
  auto row_of = [&](uint32_t i) { return (i / 4) * rows * 4 + i % 4; };
  auto col_of = [&](uint32_t j) { return (j / 4) * cols * 4 + j % 4; };
  ir::Value a_th = ty * 4u, b_th = tx * 4u;
  auto acc = b.array<float>(v.thread_m * v.thread_n, 0.0f);
  // a_at, b_at: the thread's first row and column in the buffer being read.
  auto multiply_at = [&](ir::Value a_at, ir::Value b_at) {
    for (uint32_t kk = 0; kk < v.bk; ++kk) {
      std::vector<ir::Value> av, bv;
      for (uint32_t i = 0; i < v.thread_m; i += 4)
        for (ir::Value x : ir::load_vec(As, a_at + (kk * A.stride + row_of(i)), 4)) av.push_back(x);
      for (uint32_t j = 0; j < v.thread_n; j += 4)
        for (ir::Value x : ir::load_vec(Bs, b_at + (kk * B.stride + col_of(j)), 4)) bv.push_back(x);
      for (uint32_t i = 0; i < v.thread_m; ++i)
        for (uint32_t j = 0; j < v.thread_n; ++j) acc[i * v.thread_n + j] = ir::fma(av[i], bv[j], acc[i * v.thread_n + j]);
    }
  };
  auto step = [&](ir::Value t, const Buf& buf, const Buf& next) {
    ir::Value more = t + 1u < steps;
    b.if_(more, [&] { prefetch_step(t + 1u); });
    multiply_at(in_buf(a_th, buf, v.bk * A.stride), in_buf(b_th, buf, v.bk * B.stride));
    b.if_(more, [&] { store_step(next); });
    b.barrier();
  };

  prefetch_step(zero);
  store_step(Buf{0});
  b.barrier();
  if (v.rolled) {
    // One step an iteration: half the loop's code. An 8 x 16 thread tile's step is ~1,100
    // instructions, so the two-step loop is ~35 KB of code, past what the instruction cache
    // keeps (ncu: warps stalled for no instruction), for one multiply-add per buffer switch.
    ir::Var buf = b.var<uint32_t>(0u);
    b.for_(0u, steps, 1u, [&](ir::Value t) {
      ir::Value cur = buf, next = cur ^ 1u;
      step(t, Buf{0, cur}, Buf{0, next});
      buf = next;
    });
  } else {
    b.for_(0u, steps, 2u, [&](ir::Value t) {  // two steps per iteration: buffers 0 and 1
      step(t, Buf{0}, Buf{1});
      b.if_(t + 1u < steps, [&] { step(t + 1u, Buf{1}, Buf{0}); });
    });
  }
  // The epilogue: each group of 4 columns one 16-byte store where C allows.
  ir::Value vectors = detail::c_vectors_ok(a, 4);
  for (uint32_t i = 0; i < v.thread_m; ++i) {
    ir::Value row = m0 + (a_th + row_of(i));
    b.if_(row < a.m, [&] {
      for (uint32_t j = 0; j < v.thread_n; j += 4)
        detail::store_c_vec(b, a, c, vectors, row, n0 + (b_th + col_of(j)),
                            {acc[i * v.thread_n + j], acc[i * v.thread_n + j + 1], acc[i * v.thread_n + j + 2], acc[i * v.thread_n + j + 3]});
    });
  }
  return b.build();
}


}  // namespace


namespace {
bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int, std::string* why) {
  return detail::simt_types_ok(v, p, why) && detail::vector_rows_ok(v, p, why);
}
}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineSimtDb = {.name = "SimtDb", .build_sm = 80, .threads = simt_threads, .valid = simt_valid,
                                                 .can_implement = can_implement, .build = build_matmul_simt_db,
                                                 .launch_config = tiled_launch, .launch = launch_with_config, .declare = declare_f32};
}  // namespace detail

}  // namespace kaio::ops
