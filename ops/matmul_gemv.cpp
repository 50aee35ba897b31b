// The GEMV matmul engine: C = alpha * A * B + beta * C for m <= BM rows of A (a decoder's
// 1..8 tokens times a weight matrix). Such a problem is bound by reading B once: every
// element of B is loaded from memory once, by one thread, and used for all m rows, so no
// block tile of rows sits idle (a 64 x 64 tile at m = 1 wastes 63 of its 64 rows).
//
//   B row-major   a block covers TN 16-byte vectors of a row of B (4 * TN f32 or 8 * TN
//                 f16 / bf16 columns); its 32 * TM threads are TN threads along n times
//                 32 * TM / TN groups along k. Each thread owns one vector of columns and
//                 walks k in steps of BK rows: those rows' vectors of B (one 16-byte load
//                 each) and the BM rows' A values for them into BM x (vector) fma
//                 accumulators. The k groups are summed by warp shuffles (the groups of a
//                 warp) and through shared memory (the warps).
//   B col-major   each warp owns TN columns of B (a block TM * TN columns); its lanes read
//                 16-byte vectors along k (each column is contiguous in k), BK / TN vectors
//                 per lane and column per step, and the warp sums its dot products with
//                 shuffles at the end: no shared memory, no barrier.
//
// Either way a thread has BK 16-byte loads of B in flight per step, which is what hides
// the memory's latency in a kernel that streams B once.
//
// The k split: within the block as above, and across blocks with problem.split_k (f32
// output, atomic adds, as the other engines). A is read through the L1 (ld.global.nc): as
// vectors along k of up to 16 bytes where A is row-major and this batch's rows start on a
// 16-byte vector (checked per block), else element by element. Rows of A past m and columns past n are clamped to the last valid
// one (no masks in the loop) and never stored. The last k rows that do not fill a step are
// done one at a time.
//
// Needs 16-byte aligned A and B, ldb and B's batch stride multiples of a 16-byte vector
// (can_implement). 16-bit vectors are read through extra f16x2 / bf16x2 pointer params.
#include <algorithm>
#include <string>

#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

using ir::Value;

uint32_t vec_of(ir::Scalar in) { return 16u / static_cast<uint32_t>(ir::scalar_bytes(in)); }

// An operand read as f32 values: 16-byte vectors (through the pair pointer for 16-bit
// types) or single elements.
struct Operand {
  Value elems, pairs;  // pairs: f16x2 / bf16x2 view of the same memory (invalid for f32)
  bool f32;
  // `width` values from element e on in one load of up to 16 bytes: 2 or 4 for f32, 2, 4 or
  // 8 for 16-bit types (e u64, a multiple of width)
  std::vector<Value> vec(Value e, uint32_t width) const {
    std::vector<Value> out;
    if (f32) return ir::load_vec(elems, e, static_cast<int>(width), ir::CacheHint::ReadOnly);
    std::vector<Value> ps;
    if (width == 2) ps.push_back(ir::load(pairs, e >> uint64_t(1), ir::CacheHint::ReadOnly));
    else ps = ir::load_vec(pairs, e >> uint64_t(1), static_cast<int>(width / 2), ir::CacheHint::ReadOnly);
    for (Value p : ps) {
      out.push_back(ir::cast<float>(ir::unpack_lo(p)));
      out.push_back(ir::cast<float>(ir::unpack_hi(p)));
    }
    return out;
  }
  Value one(Value e) const {
    Value x = ir::load(elems, e, ir::CacheHint::ReadOnly);
    return f32 ? x : ir::cast<float>(x);
  }
};

struct Gemv {
  ir::KernelBuilder& b;
  const MatmulVariant& v;
  const MatmulConfig& c;
  detail::MatmulArgs a;
  Operand A, B;
  uint32_t vec, mr;
  Value m0, a_vec;
  std::vector<Value> a_off;  // u64 offset of A(row r, 0) for the block's rows (clamped to m - 1)
  Value a_kstride;           // u64 elements from A(r, kk) to A(r, kk + 1)

  Value a_at(uint32_t r, Value kk) const {
    return c.a == MatLayout::RowMajor ? a_off[r] + ir::cast<uint64_t>(kk) : a_off[r] + ir::cast<uint64_t>(kk) * a_kstride;
  }
  // The BM rows' A values at k = kk .. kk + count - 1; vectors: loads of min(count, vector)
  // elements (count a multiple of it, kk too).
  std::vector<std::vector<Value>> a_values(Value kk, uint32_t count, bool vectors) const {
    std::vector<std::vector<Value>> out(mr);
    const uint32_t w = std::min(count, vec);
    for (uint32_t r = 0; r < mr; ++r) {
      if (vectors) {
        for (uint32_t q = 0; q < count; q += w)
          for (Value x : A.vec(a_off[r] + ir::cast<uint64_t>(q ? kk + q : kk), w)) out[r].push_back(x);
      } else {
        for (uint32_t u = 0; u < count; ++u) out[r].push_back(A.one(a_at(r, kk + u)));
      }
    }
    return out;
  }
  // `body(vectors)` twice behind a uniform branch when A may be read as vectors, else once.
  void with_a_vectors(bool allowed, const std::function<void(bool)>& body) {
    if (!allowed || c.a != MatLayout::RowMajor) return body(false);
    b.if_(a_vec, [&] { body(true); }).else_([&] { body(false); });
  }

  void rows_b();  // B row-major
  void cols_b();  // B column-major
};

void Gemv::rows_b() {
  const uint32_t threads = v.threads(), tpr = v.lanes, groups = threads / tpr, bn = tpr * vec, warps = v.warps;
  const uint32_t rows = v.bk;  // k rows per thread and step: one 16-byte vector of B each
  Value tid = b.thread_idx_x();
  Value lane_c = tid % tpr, group = tid / tpr;
  Value n0 = b.block_idx_x() * bn;
  Value col = n0 + lane_c * vec;
  Value ldb = ir::cast<uint64_t>(a.ldb);
  std::vector<Value> ldb_u;  // u * ldb, hoisted out of the loop
  for (uint32_t u = 0; u < rows; ++u) ldb_u.push_back(ldb * uint64_t(u));
  auto acc = b.array<float>(mr * vec, 0.0f);
  auto fmas = [&](const std::vector<Value>& brow, const std::vector<std::vector<Value>>& av, uint32_t u) {
    for (uint32_t r = 0; r < mr; ++r)
      for (uint32_t j = 0; j < vec; ++j) acc[r * vec + j] = ir::fma(av[r][u], brow[j], acc[r * vec + j]);
  };
  // The thread's columns of the B row at `row_off` (u64: base_b + kk * ldb): one vector, or
  // element by element with the columns past n clamped to n - 1 (the last block).
  auto b_row = [&](Value row_off, bool vectors) {
    if (vectors) return B.vec(row_off + ir::cast<uint64_t>(col), vec);
    std::vector<Value> out;
    for (uint32_t j = 0; j < vec; ++j) out.push_back(B.one(row_off + ir::cast<uint64_t>(ir::min(col + j, a.n - 1u))));
    return out;
  };
  auto run = [&](bool avec) {  // the thread's columns lie inside n
    auto kk = b.var<uint32_t>(a.k_begin + group * rows);
    auto off = b.var<uint64_t>(a.base_b + ir::cast<uint64_t>(Value(kk)) * ldb + ir::cast<uint64_t>(col));  // B(kk, col)
    Value step = ldb * uint64_t(groups * rows);
    b.while_([&] { return Value(kk) + rows <= a.k; }, [&] {
      std::vector<std::vector<Value>> brows;
      for (uint32_t u = 0; u < rows; ++u) brows.push_back(B.vec(u ? Value(off) + ldb_u[u] : Value(off), vec));
      const auto av = a_values(kk, rows, avec);
      for (uint32_t u = 0; u < rows; ++u) fmas(brows[u], av, u);
      kk += groups * rows;
      off += step;
    });
    // the thread's last rows, fewer than a step
    b.for_(Value(kk), a.k, [&](Value q) {
      std::vector<Value> brow = b_row(a.base_b + ir::cast<uint64_t>(q) * ldb, true);
      fmas(brow, a_values(q, 1, false), 0);
    });
  };
  // A as vectors of min(BK, vector) elements (a thread's rows start on one; 16-bit: pairs at least)
  const bool a_vectors = rows >= 2 && (rows % vec == 0 || vec % rows == 0);
  b.if_(col + vec <= a.n, [&] { with_a_vectors(a_vectors, [&](bool avec) { run(avec); }); }).else_([&] {
    // the last block's vector that crosses n: one row at a time, element by element (a
    // step of BK rows here would keep BK x vector addresses live for ptxas)
    b.if_(col < a.n, [&] {
      b.for_(a.k_begin + group, a.k, groups, [&](Value q) {
        fmas(b_row(a.base_b + ir::cast<uint64_t>(q) * ldb, false), a_values(q, 1, false), 0);
      });
    });
  });

  // The k groups: those of a warp by shuffles (lanes tpr, 2 tpr, ... apart hold the same
  // columns), then the warps' partial sums through shared memory.
  for (uint32_t d = tpr; d < 32; d *= 2)
    for (uint32_t i = 0; i < mr * vec; ++i) acc[i] = acc[i] + ir::shfl_xor(acc[i], d);
  const uint32_t outs = mr * bn;  // the block's outputs: each warp's partial sums of them,
  Value red = b.shared<float>(warps * outs);  // warp w's at w * outs (row r, column j at r * bn + j)
  Value lane = b.lane_id(), warp = b.warp_id();
  b.if_(lane < tpr, [&] {
    for (uint32_t r = 0; r < mr; ++r)
      for (uint32_t j = 0; j < vec; ++j) red[warp * outs + (lane * vec + (r * bn + j))] = acc[r * vec + j];
  });
  b.barrier();
  for (uint32_t q = 0; q * threads < outs; ++q) {  // thread t sums outputs t, t + threads, ...
    Value e = tid + q * threads;
    auto out = [&] {
      Value sum = red[e];
      for (uint32_t w = 1; w < warps; ++w) sum = sum + red[e + w * outs];
      Value row = m0 + e / bn, cc = n0 + e % bn;
      b.if_(row < a.m && cc < a.n, [&] { detail::store_c(b, a, c, row, cc, sum); });
    };
    if ((q + 1) * threads <= outs) out();
    else b.if_(e < outs, out);
  }
}

void Gemv::cols_b() {
  const uint32_t cw = v.lanes, per_step = v.bk / v.lanes;  // columns per warp; vectors per lane and column per step
  Value lane = b.lane_id(), warp = b.warp_id();
  Value n0 = b.block_idx_x() * (v.warps * cw);
  Value ldb = ir::cast<uint64_t>(a.ldb);
  std::vector<Value> cols, b_off;  // B(0, col) of the warp's columns (clamped to n - 1)
  for (uint32_t j = 0; j < cw; ++j) {
    cols.push_back(n0 + warp * cw + j);
    b_off.push_back(a.base_b + ir::cast<uint64_t>(ir::min(cols.back(), a.n - 1u)) * ldb);
  }
  auto acc = b.array<float>(mr * cw, 0.0f);
  Value lane_k = lane * vec;
  // `count` vectors per lane and column from kk0: lane l's u-th at kk0 + (32 u + l) * vec.
  auto step = [&](Value kk0, uint32_t count, bool avec) {
    std::vector<std::vector<std::vector<Value>>> bv(count), av(count);
    for (uint32_t u = 0; u < count; ++u) {
      Value kk = kk0 + (lane_k + u * 32 * vec);
      for (uint32_t j = 0; j < cw; ++j) bv[u].push_back(B.vec(b_off[j] + ir::cast<uint64_t>(kk), vec));
      av[u] = a_values(kk, vec, avec);
    }
    for (uint32_t u = 0; u < count; ++u)
      for (uint32_t r = 0; r < mr; ++r)
        for (uint32_t j = 0; j < cw; ++j)
          for (uint32_t e = 0; e < vec; ++e) acc[r * cw + j] = ir::fma(av[u][r][e], bv[u][j][e], acc[r * cw + j]);
  };
  with_a_vectors(true, [&](bool avec) {
    auto kk = b.var<uint32_t>(a.k_begin);
    const uint32_t wide = 32 * vec * per_step, narrow = 32 * vec;
    b.while_([&] { return Value(kk) + wide <= a.k; }, [&] {
      step(kk, per_step, avec);
      kk += wide;
    });
    if (per_step > 1)
      b.while_([&] { return Value(kk) + narrow <= a.k; }, [&] {
        step(kk, 1, avec);
        kk += narrow;
      });
    // fewer than 32 vectors of k left: element by element, lane l at kk + l, kk + l + 32, ...
    b.for_(Value(kk) + lane, a.k, 32u, [&](Value q) {
      std::vector<Value> bq;
      for (uint32_t j = 0; j < cw; ++j) bq.push_back(B.one(b_off[j] + ir::cast<uint64_t>(q)));
      const auto aq = a_values(q, 1, false);
      for (uint32_t r = 0; r < mr; ++r)
        for (uint32_t j = 0; j < cw; ++j) acc[r * cw + j] = ir::fma(aq[r][0], bq[j], acc[r * cw + j]);
    });
  });
  // the warp's dot products: every lane ends with the sums; lane i % 32 stores the i-th
  for (uint32_t r = 0; r < mr; ++r)
    for (uint32_t j = 0; j < cw; ++j) {
      Value sum = b.warp_reduce_sum(acc[r * cw + j]);
      Value row = m0 + r;
      b.if_(lane == (r * cw + j) % 32 && row < a.m && cols[j] < a.n, [&] { detail::store_c(b, a, c, row, cols[j], sum); });
    }
}

}  // namespace

namespace {

ir::Kernel build(const MatmulVariant& v, const MatmulConfig& c) {
  const std::string why = std::string("variant ") + v.name + ": ";
  if (v.warps == 0 || v.warps > 32 || v.bm == 0 || v.lanes == 0 || 32 % v.lanes || v.bk == 0 || v.bk % v.lanes)
    throw UsageError("matmul", "matmul", why + "a Gemv row needs 1..32 warps (TM), BM > 0, TN dividing 32, BK a multiple of TN");
  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (c.a == MatLayout::RowMajor ? "_r" : "_c") + (c.b == MatLayout::RowMajor ? "r" : "c") + detail::epilogue_suffix(c));
  b.launch_bounds(v.threads());
  if (const uint32_t cap = detail::register_cap(v, c)) b.max_registers(cap);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  const bool f32 = c.in == ir::Scalar::F32;
  Value a_pairs, b_pairs;
  if (!f32) {  // the same addresses as a and b, read as pairs by the 16-byte loads
    const ir::Scalar pair = c.in == ir::Scalar::BF16 ? ir::Scalar::BF16x2 : ir::Scalar::F16x2;
    a_pairs = b.param("a_pairs", ir::Type::pointer(pair, true));
    b_pairs = b.param("b_pairs", ir::Type::pointer(pair, true));
  }
  detail::epilogue_params(b, c, a);
  Gemv g{b, v, c, a, {a.A, a_pairs, f32}, {a.B, b_pairs, f32}, vec_of(c.in), v.bm, {}, {}, {}, {}};
  g.m0 = b.block_idx_y() * v.bm;
  // A's rows as vectors: row-major, and every row of this batch starts on a vector
  g.a_vec = (a.lda % g.vec) == 0u && (a.base_a % uint64_t(g.vec)) == uint64_t(0);
  const bool ar = c.a == MatLayout::RowMajor;
  g.a_kstride = ar ? b.constant<uint64_t>(uint64_t(1)) : ir::cast<uint64_t>(a.lda);
  for (uint32_t r = 0; r < v.bm; ++r) {
    Value row = ir::cast<uint64_t>(ir::min(g.m0 + r, a.m - 1u));
    g.a_off.push_back(a.base_a + (ar ? row * ir::cast<uint64_t>(a.lda) : row));
  }
  if (c.b == MatLayout::RowMajor) g.rows_b();
  else g.cols_b();
  return b.build();
}

jit::LaunchConfig launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  const uint32_t bn = p.b == MatLayout::RowMajor ? v.lanes * vec_of(p.in) : v.warps * v.lanes;
  return {.grid = {(p.n + bn - 1) / bn, (p.m + v.bm - 1) / v.bm, p.batch * p.split_k}, .block = {v.threads()}, .stream = stream};
}

bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int, std::string* why) {
  auto fail = [&](const std::string& msg) {
    if (why) *why = std::string("variant ") + v.name + ": " + msg;
    return false;
  };
  if (p.in != ir::Scalar::F32 && p.in != ir::Scalar::F16 && p.in != ir::Scalar::BF16)
    return fail(std::string("the GEMV engine takes f32, f16 or bf16 inputs, not ") + ir::scalar_name(p.in));
  if (p.out != ir::Scalar::F32 && p.out != p.in)
    return fail(std::string("the output is f32 or the input type, not ") + ir::scalar_name(p.out));
  if (p.m > v.bm)
    return fail("the GEMV engine serves m <= " + std::to_string(v.bm) + " rows of A, got m = " + std::to_string(p.m));
  const uint64_t per = vec_of(p.in);
  const bool br = p.b == MatLayout::RowMajor;
  const uint64_t ldb = p.ldb ? p.ldb : (br ? p.n : p.k), sb = p.stride_b ? p.stride_b : ldb * (br ? p.k : p.n);
  if (p.ptr_align % 16)
    return fail("16-byte loads of B need 16-byte aligned A and B, the problem promises " + std::to_string(p.ptr_align));
  if (ldb % per)
    return fail("16-byte loads of B: ldb must be a multiple of " + std::to_string(per) + " elements, got " + std::to_string(ldb));
  if (p.batch > 1 && sb % per)
    return fail("16-byte loads of B: B's batch stride must be a multiple of " + std::to_string(per) + " elements");
  return true;
}

void launch(const MatmulVariant& v, const MatmulConfig& c, const detail::MatmulOperands& o, const MatmulProblem& p,
            const jit::Stream* stream) {
  // f16 / bf16: A and B again as pairs, for the 16-byte loads
  const ir::Scalar pair = p.in == ir::Scalar::BF16 ? ir::Scalar::BF16x2 : ir::Scalar::F16x2;
  const jit::detail::Arg pairs[] = {jit::detail::Arg{jit::detail::Arg::Pointer, pair, 0, o.a, 0},
                                    jit::detail::Arg{jit::detail::Arg::Pointer, pair, 0, o.b, 0}};
  detail::launch_common(c, o, p, launch_config(v, p, stream),
                        std::span<const jit::detail::Arg>(pairs, p.in == ir::Scalar::F32 ? 0 : 2));
}

uint32_t threads(const MatmulVariant& v) { return 32 * v.warps; }

bool valid(const MatmulVariant& v, std::string* why) {
  if (v.warps == 0 || v.warps > 32 || v.lanes == 0 || 32 % v.lanes || v.bk % v.lanes)
    return detail::refuse(v, why, "1..32 warps, lanes dividing 32 and BK");
  return true;
}

}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineGemv = {.name = "Gemv", .build_sm = 80, .threads = threads, .valid = valid,
                                               .can_implement = can_implement, .build = build,
                                               .launch_config = launch_config, .launch = launch, .declare = declare_mma};
}  // namespace detail

}  // namespace kaio::ops
