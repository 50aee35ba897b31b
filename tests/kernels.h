// Kernels that exercise every op on every type; shared by the codegen and jit tests.
#pragma once

#include <string>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/catalog.h"

namespace kaio::test {

inline ir::Value lit(ir::KernelBuilder& b, ir::Type t, int v) {
  return b.constant(t, ir::Literal{ir::Literal::Int, v, 0, 0}, "const");
}

// Every arithmetic, logic, comparison, math and conversion op valid on scalar `s`.
inline ir::Kernel all_ops_kernel(ir::Scalar s) {
  using namespace ir;
  Type t = Type::scalar(s);
  KernelBuilder b(std::string("all_ops_") + scalar_name(s));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(s, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = in[i];
    Value y = in[i + 1u];
    Value one = lit(b, t, 1);
    auto acc = b.var(t, x);
    acc = acc + y;
    acc = acc - y;
    acc = acc * y;
    acc = acc / one;
    acc = ir::min(acc, y);
    acc = ir::max(acc, y);
    if (t.is_int()) {
      acc = acc % one;
      acc = (acc & y) | (acc ^ y);
      acc = ~acc;
      acc = (acc << one) >> one;
    }
    if (t.is_signed()) {
      acc = -acc;
      acc = ir::abs(acc);
    }
    if (t.is_float()) {
      acc = ir::fma(acc, y, x);
      acc = ir::sqrt(acc) + ir::rsqrt(y);
      if (s != Scalar::F64) acc = ir::exp(acc) + ir::log(y) + ir::tanh(x) + ir::sin(acc) + ir::cos(y);
    }
    for (Value c : {acc < y, acc <= y, acc > y, acc >= y, acc == y, acc != y}) acc = ir::select(c, acc, y);
    Value p = (acc < y) && !(x == y) || (x > y);
    acc = ir::select(p == (y > x), acc, x);
    acc = ir::select(ir::select(p, p, x < y), acc, y);
    // Every conversion out and back, with each rounding the pair accepts.
    for (Scalar u : {Scalar::S8, Scalar::S16, Scalar::S32, Scalar::S64, Scalar::U8, Scalar::U16, Scalar::U32,
                     Scalar::U64, Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64, Scalar::Pred}) {
      Type ut = Type::scalar(u);
      Value there = ir::cast(Value(acc), ut);
      acc = acc + ir::cast(there, t);
    }
    if (t.is_float()) {
      for (Rounding r : {Rounding::Rn, Rounding::Rz, Rounding::Rm, Rounding::Rp}) {
        acc = acc + ir::cast(ir::cast(Value(acc), Type::scalar(Scalar::S32), r), t, r);
      }
    }
    out[i] = acc;
  });
  return b.build();
}

// Loops, while, if/else, early return and 2D/3D indices.
inline ir::Kernel control_kernel() {
  using namespace ir;
  KernelBuilder b("control");
  auto out = b.param<int32_t*>("out");
  auto n = b.param<int32_t>("n");
  auto flag = b.param<bool>("flag");
  auto gx = b.global_id_x();
  auto gy = b.global_id_y();
  auto gz = b.global_id_z();
  b.if_(!flag, [&] { b.return_(); });
  auto acc = b.var<int32_t>(0);
  b.for_(0, n, 3, [&](Value k) {
    b.if_(k % 2 == 0, [&] { acc += k; }).else_([&] { acc -= 1; });
  });
  auto w = b.var<int32_t>(1);
  b.while_([&] { return w < n; }, [&] { w = w * 2; });
  Value gx32 = ir::cast<int32_t>(gx), gy32 = ir::cast<int32_t>(gy), gz32 = ir::cast<int32_t>(gz);
  Value gdx = ir::cast<int32_t>(b.grid_dim_x()), gdy = ir::cast<int32_t>(b.grid_dim_y());
  out[gx32 + gy32 * gdx + gz32 * gdx * gdy] = acc + w;
  return b.build();
}

// Shared memory, barriers, fences, shuffles, votes, reductions, scans, atomics.
inline ir::Kernel parallel_kernel(ir::Scalar s) {
  using namespace ir;
  KernelBuilder b(std::string("parallel_") + scalar_name(s));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(s, false));
  b.launch_bounds(256, 2);
  auto sm = b.shared(s, 256);
  auto dyn = b.dynamic_shared(s);
  auto tid = b.thread_idx_x();
  Value x = in[tid];
  sm[tid] = x;
  dyn[tid] = x;
  b.barrier();
  b.fence(FenceScope::Cta);
  b.fence(FenceScope::Gpu);
  b.fence(FenceScope::Sys);
  Value y = sm[(tid + 1u) & 255u];
  for (uint32_t w : {32u, 16u}) {
    y = ir::shfl_up(y, 1u, w);
    y = ir::shfl_down(y, 2u, w);
    y = ir::shfl_xor(y, 3u, w);
    y = ir::shfl_idx(y, b.lane_id(), w, 0x0000ffffu);
  }
  Value p = ir::vote_any(y == x) || ir::vote_all(y != x);
  Value bal = ir::ballot(p);
  out[tid] = ir::select(p, y, x);
  out[bal] = y;
  return b.build();
}

inline ir::Kernel reductions_kernel(ir::Scalar s) {
  using namespace ir;
  KernelBuilder b(std::string("reductions_") + scalar_name(s));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(ir::Scalar::F32, false));
  auto outs = b.param("outs", Type::pointer(s == Scalar::F16 || s == Scalar::BF16 ? Scalar::F32 : s, false));
  auto tid = b.thread_idx_x();
  Value x = in[tid];
  Value r1 = b.warp_reduce_sum(x), r2 = b.warp_reduce_max(x), r3 = b.warp_reduce_min(x);
  Value r4 = b.block_reduce_sum(x), r5 = b.block_reduce_max(x), r6 = b.block_reduce_min(x);
  for (Value r : {r1, r2, r3, r4, r5, r6}) outs[tid] = r;
  if (s == Scalar::S32 || s == Scalar::U32 || s == Scalar::F32) {
    outs[tid] = b.block_scan_inclusive(x);
    outs[tid] = b.block_scan_exclusive(x);
  }
  out[0] = 0.0f;
  return b.build();
}

inline ir::Kernel atomics_kernel() {
  using namespace ir;
  KernelBuilder b("atomics");
  auto gu = b.param<uint32_t*>("gu");
  auto gi = b.param<int32_t*>("gi");
  auto g64 = b.param<uint64_t*>("g64");
  auto gf = b.param<float*>("gf");
  auto gd = b.param<double*>("gd");
  auto su = b.shared<uint32_t>(32);
  auto sf = b.shared<float>(32);
  auto t = b.thread_idx_x();
  Value a1 = ir::atomic_add(gu, t, 1u), a2 = ir::atomic_min(gi, t, -5), a3 = ir::atomic_max(g64, t, uint64_t(7));
  Value a4 = ir::atomic_exch(gf, t, 2.0f), a5 = ir::atomic_add(gf, t, 1.5f), a6 = ir::atomic_add(gd, t, 0.5);
  Value a7 = ir::atomic_cas(gu, t, 3u, a1), a8 = ir::atomic_cas(g64, t, uint64_t(1), a3);
  Value s1 = ir::atomic_add(su, t & 31u, a1), s2 = ir::atomic_max(su, 0, s1), s3 = ir::atomic_add(sf, 1, a5);
  Value s4 = ir::atomic_cas(su, 2, s2, a7);
  gu[t] = s4;
  gf[t] = s3 + a4;
  gd[t] = a6;
  g64[t] = a8;
  gi[t] = a2;
  return b.build();
}

inline ir::Kernel vectors_math_kernel(bool fast) {
  using namespace ir;
  KernelBuilder b(fast ? "vectors_math_fast" : "vectors_math");
  if (fast) b.fast_math();
  auto xf = b.param<const float*>("xf");
  auto yf = b.param<float*>("yf");
  auto xd = b.param<const double*>("xd");
  auto yd = b.param<double*>("yd");
  auto xh = b.param<const kaio::half*>("xh");
  auto yh = b.param<kaio::half*>("yh");
  auto xb = b.param<const uint8_t*>("xb");
  auto yb = b.param<uint8_t*>("yb");
  auto i = b.global_id_x();
  Value i4 = i * 4u;
  auto f4 = ir::load_vec(xf, i4, 4, CacheHint::ReadOnly);
  auto d2 = ir::load_vec(xd, i * 2u, 2);
  auto h4 = ir::load_vec(xh, i4, 4, CacheHint::Streaming);
  auto b4 = ir::load_vec(xb, i4, 4);
  auto c4 = ir::load_vec_checked(xf, i + 1u, 4);
  Value f = f4[0];
  f = f + ir::rcp(f4[1]) + ir::exp2(f4[2]) + ir::log2(f4[3]) + ir::erf(f) + ir::floor(f) + ir::ceil(f);
  f = f + ir::round(f) + ir::trunc(f) + ir::rint(f) + ir::pow(f, c4[0]) + ir::copysign(f, c4[1]);
  f = f + ir::exp(f) + ir::log(f) + ir::sin(f) + ir::cos(f) + ir::tanh(f) + ir::sqrt(f) + f / c4[2];
  f = ir::select(ir::isnan(f) || ir::isinf(f), c4[3], f);
  f = ir::cast_sat<float>(f);
  Value d = d2[0];
  d = d + ir::rcp(d2[1]) + ir::floor(d) + ir::ceil(d) + ir::round(d) + ir::trunc(d) + ir::rint(d) + ir::copysign(d, d2[1]);
  d = ir::select(ir::isnan(d), d2[1], d);
  Value h = h4[0] + h4[1] * h4[2] - ir::min(h4[3], h4[0]) + ir::max(h4[1], h4[2]) + ir::abs(h4[3]) - (-h4[0]);
  h = h / h4[1] + ir::exp(h) + ir::round(h);
  h = ir::cast_sat<kaio::half>(h);
  Value bb = ir::cast_sat<uint8_t>(ir::cast<int32_t>(f) + ir::cast<int32_t>(b4[0]));
  ir::store_vec(yf, i4, {f, f4[1], f4[2], f4[3]}, CacheHint::Streaming);
  ir::store_vec(yd, i * 2u, {d, d2[1]});
  ir::store_vec(yh, i4, {h, h4[1], h4[2], h4[3]});
  ir::store_vec(yb, i4, {bb, b4[1], b4[2], b4[3]}, CacheHint::Global);
  ir::store(yf, i, ir::load(xf, i, CacheHint::LastUse), CacheHint::Global);
  return b.build();
}

inline ir::Kernel bf16_kernel() {
  using namespace ir;
  KernelBuilder b("bf16_arith");
  auto x = b.param<const kaio::bfloat16*>("x");
  auto y = b.param<kaio::bfloat16*>("y");
  auto i = b.global_id_x();
  Value a = x[i];
  Value c = x[i + 1u];
  Value r = a + c;
  r = r - a * c;
  r = ir::fma(r, a, c) + ir::min(a, c) - ir::max(a, c) + ir::abs(-a);
  y[i] = r;
  return b.build();
}

// f16x2 / bf16x2: pairwise arithmetic, pack/unpack, select, shuffles, f16x2 atomics.
inline ir::Kernel packed_kernel(ir::Scalar s, bool atomics) {
  using namespace ir;
  Scalar half = s == Scalar::F16x2 ? Scalar::F16 : Scalar::BF16;
  KernelBuilder b(std::string("packed_") + scalar_name(s) + (atomics ? "_atomics" : ""));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(s, false));
  auto halves = b.param("halves", Type::pointer(half, false));
  auto i = b.global_id_x();
  Value x = in[i];
  Value y = in[i + 1u];
  Value r = x + y;
  r = r - x * y;
  r = ir::fma(r, x, y) + ir::min(x, y) - ir::max(x, y);
  r = ir::abs(-r) * 0.5f;
  r = ir::select(i < 7u, r, ir::shfl_xor(r, 1u));
  Value lo = ir::unpack_lo(r), hi = ir::unpack_hi(r);
  halves[i * 2u] = lo;
  halves[i * 2u + 1u] = hi;
  r = ir::pack2(hi, lo);
  if (atomics) {
    auto sm = b.shared(s, 32);
    sm[b.lane_id()] = r;
    (void)ir::atomic_add(sm, 0, r);
    (void)ir::atomic_add(out, 0, r);
  }
  out[i] = r;
  return b.build();
}

// out (cols x rows) = transpose of in (rows x cols), through a padded 32x33 shared tile;
// launch with 32x8 blocks over ceil(cols/32) x ceil(rows/32). `pad` puts a small shared
// array first, so the tile's alignment after it is exercised too.
inline ir::Kernel transpose_kernel(const std::string& name, bool pad) {
  using namespace ir;
  KernelBuilder b(name);
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto rows = b.param<uint32_t>("rows");
  auto cols = b.param<uint32_t>("cols");
  if (pad) (void)b.shared<uint8_t>(3);
  auto tile = b.shared<float>(32 * 33);  // +1 column: no bank conflicts on the transposed read
  Value tx = b.thread_idx_x(), ty = b.thread_idx_y();
  Value bx = b.block_idx_x(), by = b.block_idx_y();
  Value c = bx * 32u + tx, r0 = by * 32u;
  b.for_(0u, 32u, 8u, [&](Value k) {
    Value r = r0 + ty + k;
    b.if_(r < rows && c < cols, [&] {
      Value v = in[r * cols + c];
      tile[(ty + k) * 33u + tx] = v;
    });
  });
  b.barrier();
  Value oc = by * 32u + tx, or0 = bx * 32u;
  b.for_(0u, 32u, 8u, [&](Value k) {
    Value orow = or0 + ty + k;
    b.if_(orow < cols && oc < rows, [&] {
      Value v = tile[tx * 33u + ty + k];
      out[orow * rows + oc] = v;
    });
  });
  return b.build();
}

// hist[v & 255] += 1 for every v of in[0 .. n): counts in shared memory with shared atomics,
// then one global atomic per non-empty bin and block. hist must start zeroed.
inline ir::Kernel histogram_kernel(const std::string& name) {
  using namespace ir;
  KernelBuilder b(name);
  auto in = b.param<const uint32_t*>("in");
  auto hist = b.param<uint32_t*>("hist");
  auto n = b.param<uint32_t>("n");
  auto local = b.shared<uint32_t>(256);
  Value tid = b.thread_idx_x(), nt = b.block_dim_x();
  b.for_(tid, 256u, nt, [&](Value k) { local[k] = 0u; });
  b.barrier();
  Value start = b.global_id_x();
  Value gd = b.grid_dim_x();
  Value stride = gd * nt;
  b.for_(start, n, stride, [&](Value i) {
    Value v = in[i];
    (void)ir::atomic_add(local, v & 255u, 1u);
  });
  b.barrier();
  b.for_(tid, 256u, nt, [&](Value k) {
    Value c = local[k];
    b.if_(c > 0u, [&] { (void)ir::atomic_add(hist, k, c); });
  });
  return b.build();
}

// The warp-level tensor-core and asynchronous-copy ops (sm_80): cp.async of 4 and 16 bytes
// (.ca, .cg, zero-filled), its groups, ldmatrix (plain and transposed) and mma.sync.
inline ir::Kernel tensor_ops_kernel() {
  using namespace ir;
  KernelBuilder b("tensor_ops");
  auto src = b.param<const half*>("src");
  auto out = b.param<float*>("out");
  auto n = b.param<uint32_t>("n");
  auto tile = b.shared<half>(1024);
  Value lane = b.lane_id();
  Value nb = select(lane < n, b.constant<uint32_t>(16u), b.constant<uint32_t>(0u));
  b.cp_async(tile, lane * 8u, src, lane * 8u, 16, CacheHint::Global, nb);
  b.cp_async(tile, 512u + lane * 2u, src, 256u + lane * 2u, 4, CacheHint::Default);
  b.cp_async_commit_group();
  b.cp_async_wait_group(0);
  b.barrier();
  auto a = b.ldmatrix(tile, lane * 8u, 4, false);
  auto bt = b.ldmatrix(tile, 512u + lane * 8u, 2, true);
  auto acc = b.array(Type::scalar(Scalar::F32), 4, b.constant<float>(0.0f));
  b.mma_sync(MmaKind::F16, acc, {a[0], a[1], a[2], a[3]}, {bt[0], bt[1]});
  for (uint32_t r = 0; r < 4; ++r) out[lane * 4u + r] = acc[r];
  return b.build();
}

// The language's own test kernels (every op family and type), without the ops library:
// the codegen corpus whose PTX is pinned to kCodegenVersion.
inline std::vector<ir::Kernel> language_kernels() {
  std::vector<ir::Kernel> ks;
  for (ir::Scalar s : {ir::Scalar::S8, ir::Scalar::S16, ir::Scalar::S32, ir::Scalar::S64, ir::Scalar::U8,
                       ir::Scalar::U16, ir::Scalar::U32, ir::Scalar::U64, ir::Scalar::F16, ir::Scalar::BF16,
                       ir::Scalar::F32, ir::Scalar::F64})
    ks.push_back(all_ops_kernel(s));
  ks.push_back(control_kernel());
  for (ir::Scalar s : {ir::Scalar::S32, ir::Scalar::U32, ir::Scalar::U64, ir::Scalar::F32, ir::Scalar::F64,
                       ir::Scalar::S8, ir::Scalar::F16, ir::Scalar::BF16})
    ks.push_back(parallel_kernel(s));
  for (ir::Scalar s : {ir::Scalar::S32, ir::Scalar::U32, ir::Scalar::F32, ir::Scalar::F16, ir::Scalar::BF16})
    ks.push_back(reductions_kernel(s));
  ks.push_back(atomics_kernel());
  ks.push_back(vectors_math_kernel(false));
  ks.push_back(vectors_math_kernel(true));
  ks.push_back(bf16_kernel());
  ks.push_back(packed_kernel(ir::Scalar::F16x2, true));
  ks.push_back(packed_kernel(ir::Scalar::BF16x2, false));
  ks.push_back(tensor_ops_kernel());
  return ks;
}

inline std::vector<ir::Kernel> test_kernels() {
  std::vector<ir::Kernel> ks = ops::catalog();
  for (ir::Kernel& k : language_kernels()) ks.push_back(std::move(k));
  return ks;
}

}  // namespace kaio::test
