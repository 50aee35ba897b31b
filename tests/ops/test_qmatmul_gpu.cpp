// Quantized matmul on the device (in CI: the interpreter, KAIO_INTERPRET=1), fresh random
// inputs, outputs poisoned with NaN first:
//   int8: the raw s32 product bit-exact against an integer reference on every tile; scaled
//         f16 / bf16 / f32 outputs (per tensor, per row / column, bias) within
//         (out unit + 4 * 2^-24) * |ref| + 2^-24 of a float64 reference; QKV equal to
//         three separate calls.
//   int4: the dequantisation bit-exact against the host decoder (unit rows of X select
//         rows of W: one exact product each), both paths, f16 and bf16, with and without
//         zero points, groups 32 / 64 / 128; the matmul within out unit * |ref| + k * 2^-24
//         * sum |terms| + 2^-24 of float64 on the dequantised weights (rounded to 16 bits, or
//         exact where the call applies the scales to its f32 sums); QKV equal to three
//         separate calls.
// [large] shapes (4096^3, 11008 x 4096, 4096 x 14336, M = 1, 16, 128, 4096) run on a
// device only.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <tuple>

#include "kaio/jit/device.h"
#include "kaio/kaio.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/qmatmul_int4_kernels.h"
#include "../support.h"

using namespace kaio;
using ir::Scalar;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

double unit_of(Scalar s) { return s == Scalar::F16 ? 0x1p-11 : s == Scalar::BF16 ? 0x1p-8 : 0x1p-24; }

// A buffer of 16-bit outputs filled with NaN (0xFFFF in both f16 and bf16), or f32 / s32 with
// 0xFFFFFFFF (NaN / -1).
template <class T>
jit::DeviceBuffer<T> poisoned(size_t n) {
  std::vector<T> h(n);
  std::memset(static_cast<void*>(h.data()), 0xff, n * sizeof(T));
  return jit::DeviceBuffer<T>(h);
}

template <class T>
double as_double(T x) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return double(float(x));
  else return double(x);
}

std::vector<int8_t> random_s8(size_t n) {
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = int8_t(d(rng()));
  return v;
}
std::vector<float> random_f32(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

// The rows a check compares: all of a small m, 48 random ones (and the last) of a large m.
std::vector<uint32_t> rows_of(uint32_t m) {
  std::vector<uint32_t> r;
  if (m <= 128) {
    for (uint32_t i = 0; i < m; ++i) r.push_back(i);
    return r;
  }
  std::uniform_int_distribution<uint32_t> d(0, m - 1);
  for (int i = 0; i < 48; ++i) r.push_back(d(rng()));
  r.push_back(m - 1);
  return r;
}

int64_t int_dot(const std::vector<int8_t>& a, const std::vector<int8_t>& b, uint32_t k, uint32_t i, uint32_t j) {
  int64_t s = 0;
  for (uint32_t kk = 0; kk < k; ++kk) s += int64_t(a[size_t(i) * k + kk]) * b[size_t(j) * k + kk];
  return s;
}

void check_int8_raw(uint32_t m, uint32_t n, uint32_t k, int tile) {
  INFO("int8 s32 m " << m << " n " << n << " k " << k << " tile " << tile);
  const auto a = random_s8(size_t(m) * k), b = random_s8(size_t(n) * k);
  jit::DeviceBuffer<int8_t> da(a), db(b);
  auto dc = poisoned<int32_t>(size_t(m) * n);
  ops::matmul_int8(da.device_address(), db.device_address(), dc.device_address(), {.m = m, .n = n, .k = k, .out = Scalar::S32, .tile = tile});
  const std::vector<int32_t> c = dc.to_host();
  size_t bad = 0;
  for (uint32_t i : rows_of(m))
    for (uint32_t j = 0; j < n; ++j) bad += c[size_t(i) * n + j] != int_dot(a, b, k, i, j);
  CHECK(bad == 0);
}

template <class Out>
void check_int8_scaled(uint32_t m, uint32_t n, uint32_t k, Scalar out, bool per_vec, bool bias, int tile) {
  INFO("int8 " << ir::scalar_name(out) << " m " << m << " n " << n << " k " << k << " per_vec " << per_vec << " bias " << bias << " tile " << tile);
  const auto a = random_s8(size_t(m) * k), b = random_s8(size_t(n) * k);
  const auto sa = random_f32(per_vec ? m : 1, 0.5f / 127, 2.0f / 127), sb = random_f32(per_vec ? n : 1, 0.5f / 127, 2.0f / 127);
  const auto bv = random_f32(n, -1.0f, 1.0f);
  jit::DeviceBuffer<int8_t> da(a), db(b);
  jit::DeviceBuffer<float> dsa(sa), dsb(sb), dbias(bv);
  auto dc = poisoned<Out>(size_t(m) * n);
  ops::Int8Scales s{.a = dsa.device_address(), .b = dsb.device_address(), .a_per_row = per_vec, .b_per_col = per_vec,
                    .bias = bias ? dbias.device_address() : 0};
  ops::matmul_int8(da.device_address(), db.device_address(), dc.device_address(), {.m = m, .n = n, .k = k, .out = out, .tile = tile}, s);
  const std::vector<Out> c = dc.to_host();
  size_t bad = 0;
  for (uint32_t i : rows_of(m))
    for (uint32_t j = 0; j < n; ++j) {
      const double prod = double(sa[per_vec ? i : 0]) * sb[per_vec ? j : 0] * double(int_dot(a, b, k, i, j));
      const double ref = prod + (bias ? bv[j] : 0.0);
      const double tol = (unit_of(out) + 4 * 0x1p-24) * (std::abs(prod) + (bias ? std::abs(bv[j]) : 0.0)) + 0x1p-24;
      const double got = as_double(c[size_t(i) * n + j]);
      if (!(std::abs(got - ref) <= tol)) {
        if (bad++ < 5) UNSCOPED_INFO("(" << i << ", " << j << "): " << got << " vs " << ref);
      }
    }
  CHECK(bad == 0);
}

struct Int4Case {
  uint32_t m, n, k, group;
  Scalar dtype;
  bool zeros;
};

// Device copies of host int4 weights.
struct DeviceInt4 {
  jit::DeviceBuffer<uint32_t> q;
  jit::DeviceBuffer<uint16_t> s;
  jit::DeviceBuffer<uint8_t> z;
  ops::Int4Weights w;
  explicit DeviceInt4(const ops::Int4Host& h) : q(h.q), s(h.scales), z(h.zeros.empty() ? std::vector<uint8_t>(16) : h.zeros) {
    w = {.q = q.device_address(), .scales = s.device_address(), .zeros = h.zeros.empty() ? 0 : z.device_address(),
         .k = h.k, .n = h.n, .group = h.group};
  }
};

template <class T>
std::vector<float> run_int4(const Int4Case& c, const ops::Int4Host& h, const std::vector<T>& x, const std::vector<T>* bias) {
  DeviceInt4 dw(h);
  jit::DeviceBuffer<T> dx(x);
  jit::DeviceBuffer<T> db(bias ? *bias : std::vector<T>(8));
  auto dy = poisoned<T>(size_t(c.m) * c.n);
  ops::matmul_int4(dx.device_address(), dw.w, dy.device_address(), c.m, c.dtype, bias ? db.device_address() : 0);
  std::vector<float> out;
  for (T v : dy.to_host()) out.push_back(float(v));
  return out;
}

template <class T>
void check_int4_dequant(const Int4Case& c) {
  INFO("int4 dequant " << ir::scalar_name(c.dtype) << " m " << c.m << " n " << c.n << " k " << c.k << " group " << c.group << " zeros " << c.zeros);
  const ops::Int4Host h = ops::quantize_int4(random_f32(size_t(c.k) * c.n, -1.0f, 1.0f), c.k, c.n, c.group, c.dtype, c.zeros);
  const std::vector<float> w = ops::dequantize_int4(h);
  std::vector<T> x(size_t(c.m) * c.k, T(0.0f));
  std::vector<uint32_t> pick(c.m);
  std::uniform_int_distribution<uint32_t> d(0, c.k - 1);
  for (uint32_t i = 0; i < c.m; ++i) x[size_t(i) * c.k + (pick[i] = d(rng()))] = T(1.0f);
  const std::vector<float> y = run_int4<T>(c, h, x, nullptr);
  size_t bad = 0;
  for (uint32_t i = 0; i < c.m; ++i)
    for (uint32_t j = 0; j < c.n; ++j) bad += !(y[size_t(i) * c.n + j] == w[size_t(pick[i]) * c.n + j]);
  CHECK(bad == 0);
}

template <class T>
void check_int4_matmul(const Int4Case& c, bool bias) {
  INFO("int4 " << ir::scalar_name(c.dtype) << " m " << c.m << " n " << c.n << " k " << c.k << " group " << c.group << " zeros " << c.zeros << " bias " << bias);
  const ops::Int4Host h = ops::quantize_int4(random_f32(size_t(c.k) * c.n, -1.0f, 1.0f), c.k, c.n, c.group, c.dtype, c.zeros);
  // The weights as the call's path takes them: rounded to 16 bits, or exact where the scales
  // go on the f32 sums.
  const bool exact = ops::detail::int4_exact_products(c.m, c.k, c.n, 1);
  INFO("exact products " << exact);
  const std::vector<float> w = ops::dequantize_int4(h, !exact);
  std::vector<T> x;
  for (float v : random_f32(size_t(c.m) * c.k, -1.0f, 1.0f)) x.push_back(T(v));
  std::vector<T> bv;
  for (float v : random_f32(c.n, -1.0f, 1.0f)) bv.push_back(T(v));
  const std::vector<float> y = run_int4<T>(c, h, x, bias ? &bv : nullptr);
  size_t bad = 0;
  for (uint32_t i : rows_of(c.m)) {
    std::vector<double> refs(c.n, 0.0), mags(c.n, 0.0);
    for (uint32_t kk = 0; kk < c.k; ++kk) {  // row-wise through W (large shapes stay cache friendly)
      const double xv = as_double(x[size_t(i) * c.k + kk]);
      for (uint32_t j = 0; j < c.n; ++j) {
        const double t = xv * w[size_t(kk) * c.n + j];
        refs[j] += t;
        mags[j] += std::abs(t);
      }
    }
    for (uint32_t j = 0; j < c.n; ++j) {
      const double ref = refs[j] + (bias ? as_double(bv[j]) : 0.0), mag = mags[j] + (bias ? std::abs(as_double(bv[j])) : 0.0);
      const double tol = unit_of(c.dtype) * std::abs(ref) + c.k * 0x1p-24 * mag + 0x1p-24;
      const double got = y[size_t(i) * c.n + j];
      if (!(std::abs(got - ref) <= tol)) {
        if (bad++ < 5) UNSCOPED_INFO("(" << i << ", " << j << "): " << got << " vs " << ref);
      }
    }
  }
  CHECK(bad == 0);
}

}  // namespace

// The wgmma tile runs on an sm_90 device only (the interpreter models neither TMA nor wgmma).
bool runs_tile(int t) {
  return ops::matmul_int8_tiles()[size_t(t)].rfind("wgmma", 0) != 0 ||
         (!jit::interpret_mode() && jit::device_info().present && jit::device_info().hopper());
}

TEST_CASE("matmul_int8: the raw s32 product is bit-exact on every tile at odd shapes", "[gpu][ops][qmatmul]") {
  const int tiles = int(ops::matmul_int8_tiles().size());
  for (int t = 0; t < tiles; ++t)
    if (runs_tile(t)) {
      check_int8_raw(65, 72, 128, t);
      check_int8_raw(129, 136, 272, t);  // past one tile in m and n, k past two 128-byte stages
    }
  check_int8_raw(1, 8, 256, -1);
  check_int8_raw(7, 72, 80, -1);  // k not a multiple of the 64-byte step
}

TEST_CASE("matmul_int8: scaled f16 / bf16 / f32 outputs within the bound of float64", "[gpu][ops][qmatmul]") {
  check_int8_scaled<half>(65, 72, 128, Scalar::F16, true, true, -1);
  check_int8_scaled<bfloat16>(7, 72, 256, Scalar::BF16, true, false, -1);
  check_int8_scaled<float>(1, 8, 128, Scalar::F32, false, true, -1);
  check_int8_scaled<half>(65, 8, 256, Scalar::F16, false, false, 0);
  const int wg = int(ops::matmul_int8_tiles().size()) - 1;
  if (runs_tile(wg)) {
    check_int8_scaled<bfloat16>(200, 264, 1040, Scalar::BF16, true, true, wg);
    check_int8_scaled<float>(7, 72, 128, Scalar::F32, false, true, wg);
  }
}

TEST_CASE("matmul_int8_qkv: three parts in one launch equal three separate calls", "[gpu][ops][qmatmul]") {
  const uint32_t m = 7, k = 128, ns[3] = {72, 24, 8};
  const auto a = random_s8(size_t(m) * k);
  const auto sa = random_f32(m, 0.5f / 127, 2.0f / 127);
  jit::DeviceBuffer<int8_t> da(a);
  jit::DeviceBuffer<float> dsa(sa);
  std::vector<jit::DeviceBuffer<int8_t>> b;
  std::vector<jit::DeviceBuffer<float>> sb, bias;
  std::vector<jit::DeviceBuffer<half>> c, c1;
  ops::Int8Part parts[3];
  for (int i = 0; i < 3; ++i) {
    b.emplace_back(random_s8(size_t(ns[i]) * k));
    sb.emplace_back(random_f32(ns[i], 0.5f / 127, 2.0f / 127));
    bias.emplace_back(random_f32(ns[i], -1.0f, 1.0f));
    c.push_back(poisoned<half>(size_t(m) * ns[i]));
    c1.push_back(poisoned<half>(size_t(m) * ns[i]));
  }
  for (int i = 0; i < 3; ++i)
    parts[i] = {b[i].device_address(), c[i].device_address(), ns[i], sb[i].device_address(), bias[i].device_address()};
  ops::matmul_int8_qkv(da.device_address(), parts, m, k, Scalar::F16, dsa.device_address(), true, true);
  for (int i = 0; i < 3; ++i) {
    ops::matmul_int8(da.device_address(), b[i].device_address(), c1[i].device_address(), {.m = m, .n = ns[i], .k = k},
                     {.a = dsa.device_address(), .b = sb[i].device_address(), .a_per_row = true, .b_per_col = true,
                      .bias = bias[i].device_address()});
    const std::vector<half> x = c[i].to_host(), y = c1[i].to_host();
    size_t bad = 0;
    for (size_t e = 0; e < x.size(); ++e) bad += x[e].bits != y[e].bits || std::isnan(float(x[e]));
    CHECK(bad == 0);
  }
}

// The streaming path's ring at both depths (the deep one is what small grids take; forced
// off, the 3-4 stage ring of the wide grids), reset at scope exit.
struct StreamDepth {
  explicit StreamDepth(int deep) { ops::detail::set_int4_stream_deep(deep); }
  ~StreamDepth() { ops::detail::set_int4_stream_deep(-1); }
};

TEST_CASE("matmul_int4: the dequantisation is bit-exact against the host decoder on both paths", "[gpu][ops][qmatmul]") {
  check_int4_dequant<half>({65, 72, 256, 128, Scalar::F16, false});
  check_int4_dequant<bfloat16>({65, 8, 128, 32, Scalar::BF16, false});
  for (int deep : {0, 1}) {
    INFO("deep ring " << deep);
    StreamDepth depth(deep);
    check_int4_dequant<half>({7, 72, 128, 32, Scalar::F16, true});
    check_int4_dequant<bfloat16>({1, 8, 128, 64, Scalar::BF16, true});
    check_int4_dequant<half>({16, 40, 512, 64, Scalar::F16, true});
  }
}

// Every streaming-path case (m <= 16).
static void check_int4_stream_matmuls() {
  check_int4_matmul<half>({1, 72, 256, 128, Scalar::F16, true}, true);
  check_int4_matmul<half>({7, 8, 128, 64, Scalar::F16, false}, false);
  check_int4_matmul<bfloat16>({16, 72, 128, 32, Scalar::BF16, true}, true);
  // The streaming tensor-core path: rows past 8 (the m16 tile's second half), m = 4, and k
  // long enough for every warp to take several unrolled rounds (and a last partial one).
  check_int4_matmul<half>({9, 40, 160, 32, Scalar::F16, true}, true);
  check_int4_matmul<bfloat16>({4, 24, 4096 + 96, 32, Scalar::BF16, true}, false);
  check_int4_matmul<half>({16, 8, 2048, 128, Scalar::F16, false}, true);
  check_int4_matmul<half>({1, 16, 16384 + 160, 32, Scalar::F16, true}, false);  // 4 trips of the 8-stage ring a warp, and a part
}

TEST_CASE("matmul_int4: the matmul within the bound of float64 on the dequantised weights", "[gpu][ops][qmatmul]") {
  check_int4_matmul<half>({65, 72, 128, 32, Scalar::F16, true}, true);
  check_int4_matmul<bfloat16>({65, 8, 256, 64, Scalar::BF16, false}, false);
  for (int deep : {0, 1}) {
    INFO("deep ring " << deep);
    StreamDepth depth(deep);
    CHECK(ops::detail::int4_stream_deep(16, 72, 1) == (deep == 1));  // m = 16's deep ring fits every sm_80+ block
    check_int4_stream_matmuls();
  }
}

// The persistent form (Int4Config::persistent), forced with 2 or 3 blocks so that a block
// takes several strips (the last one part of 32 columns): each thread's ring runs on from a
// strip into the next, and each strip's sums are added at its end.
struct StreamPersistent {
  explicit StreamPersistent(int blocks) { ops::detail::set_int4_stream_persistent(blocks); }
  ~StreamPersistent() { ops::detail::set_int4_stream_persistent(-1); }
};

TEST_CASE("matmul_int4: the persistent streaming form, several strips a block", "[gpu][ops][qmatmul]") {
  {  // by default: m = 16's rows where the strips outnumber the SMs, one block an SM
    const uint32_t sms = jit::device_info().sm_count, wide = 32 * (sms + 1);
    CHECK(ops::detail::int4_stream_persistent(16, 4096, wide, 1) == sms);
    CHECK(ops::detail::int4_stream_persistent(16, 4096, 32 * sms, 1) == 0);  // one wave of strips
    CHECK(ops::detail::int4_stream_persistent(8, 4096, wide, 1) == 0);
    CHECK(ops::detail::int4_stream_persistent(1, 4096, wide, 1) == 0);
    CHECK(ops::detail::int4_stream_persistent(16, 4096, wide, 3) == 0);  // QKV
    StreamPersistent never(0);
    CHECK(ops::detail::int4_stream_persistent(16, 4096, wide, 1) == 0);
  }
  for (int blocks : {2, 3}) {
    INFO("persistent blocks " << blocks);
    StreamPersistent persistent(blocks);
    // taken where it can serve: one part, k of 16 steps or more
    CHECK(ops::detail::int4_stream_persistent(4, 512, 136, 1) == uint32_t(blocks));
    CHECK(ops::detail::int4_stream_persistent(4, 480, 136, 1) == 0);
    CHECK(ops::detail::int4_stream_persistent(4, 512, 136, 3) == 0);
    CHECK(ops::detail::int4_stream_persistent(16, 512, 40, 1) == 2);  // no more blocks than strips
    // k = 512: one step a warp (a strip's end every step); 1056: runs of 2 and 3 steps, ending
    // inside groups; 4192: runs of 8-9 steps, several trips of the ring.
    check_int4_matmul<half>({1, 136, 512, 32, Scalar::F16, true}, true);
    check_int4_matmul<bfloat16>({4, 72, 1056, 32, Scalar::BF16, false}, false);
    check_int4_matmul<half>({9, 200, 1056, 32, Scalar::F16, true}, false);
    check_int4_matmul<bfloat16>({16, 136, 4096 + 96, 32, Scalar::BF16, true}, true);
    check_int4_matmul<half>({8, 72, 4096 + 128, 64, Scalar::F16, false}, true);
    check_int4_dequant<half>({3, 136, 1024, 128, Scalar::F16, true});
    check_int4_dequant<bfloat16>({16, 72, 512, 32, Scalar::BF16, false});
  }
}

// On an sm_90 device m > 16 takes the wgmma path (ops/qmatmul_int4_wgmma.cpp); these shapes
// cross its edges (m just past 16 and past a 128-row tile, n not a multiple of the 128-column
// tile, k of half a step), then run again on the mma path and with 256-row tiles, forced.
TEST_CASE("matmul_int4: every large-m path at edge shapes (the wgmma one on sm_90)", "[gpu][ops][qmatmul]") {
  struct Force { uint32_t mma, bx; };
  for (Force f : {Force{0, 0}, Force{1, 0}, Force{0, 256}}) {
    if (f.bx && (jit::interpret_mode() || !jit::device_info().hopper())) continue;
    INFO("forced mma " << f.mma << " bx " << f.bx);
    ops::detail::set_int4_override(f.mma, f.bx);
    struct Reset {
      ~Reset() { ops::detail::set_int4_override(0, 0); }
    } reset;
    check_int4_dequant<half>({17, 144, 96, 32, Scalar::F16, true});
    check_int4_dequant<bfloat16>({300, 72, 128, 64, Scalar::BF16, false});
    check_int4_matmul<half>({17, 144, 96, 32, Scalar::F16, true}, true);
    check_int4_matmul<bfloat16>({300, 200, 320, 64, Scalar::BF16, false}, true);
    check_int4_matmul<half>({129, 48, 32, 32, Scalar::F16, false}, false);
    check_int4_matmul<half>({257, 272, 1024 + 128, 128, Scalar::F16, true}, false);
  }
}

TEST_CASE("matmul_int4_qkv: three parts in one launch equal three separate calls", "[gpu][ops][qmatmul]") {
  // On an sm_90 device m > 16 runs each part on the wgmma path (and m = 65 with n = 72
  // and zeros takes the mma path in one launch: n not a multiple of 16).
  // k = 1024 with m = 3: each of the streaming path's warps takes several steps of every part.
  for (auto [m, k, deep] : {std::tuple{3u, 128u, -1}, std::tuple{65u, 128u, -1}, std::tuple{3u, 1024u, 0}, std::tuple{3u, 1024u, 1}}) {
    INFO("m " << m << " k " << k << " deep ring " << deep);
    StreamDepth depth(deep);
    const uint32_t ns[3] = {72, 16, 8};
    std::vector<half> x;
    for (float v : random_f32(size_t(m) * k, -1.0f, 1.0f)) x.push_back(half(v));
    jit::DeviceBuffer<half> dx(x);
    std::vector<std::unique_ptr<DeviceInt4>> w;
    std::vector<jit::DeviceBuffer<half>> bias, y, y1;
    ops::Int4Part parts[3];
    for (int i = 0; i < 3; ++i) {
      w.push_back(std::make_unique<DeviceInt4>(ops::quantize_int4(random_f32(size_t(k) * ns[i], -1.0f, 1.0f), k, ns[i], 32, Scalar::F16, true)));
      std::vector<half> bv;
      for (float v : random_f32(ns[i], -1.0f, 1.0f)) bv.push_back(half(v));
      bias.emplace_back(bv);
      y.push_back(poisoned<half>(size_t(m) * ns[i]));
      y1.push_back(poisoned<half>(size_t(m) * ns[i]));
      parts[i] = {w[i]->w, y[i].device_address(), bias[i].device_address()};
    }
    ops::matmul_int4_qkv(dx.device_address(), parts, m, Scalar::F16);
    for (int i = 0; i < 3; ++i) {
      ops::matmul_int4(dx.device_address(), w[i]->w, y1[i].device_address(), m, Scalar::F16, bias[i].device_address());
      const std::vector<half> a = y[i].to_host(), b = y1[i].to_host();
      size_t bad = 0;
      for (size_t e = 0; e < a.size(); ++e) bad += a[e].bits != b[e].bits || std::isnan(float(a[e]));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("quantized matmul: large shapes on the device", "[gpu][ops][qmatmul][large]") {
  if (jit::interpret_mode()) return;  // minutes in the interpreter; the shapes above cover the code paths
  for (uint32_t m : {1u, 5u, 16u, 128u, 4096u}) {  // 5: the streaming path of 8 rows, 3 of them padding
    check_int8_scaled<bfloat16>(m, 4096, 4096, Scalar::BF16, true, true, -1);
    check_int4_matmul<half>({m, 11008, 4096, 128, Scalar::F16, true}, false);
    check_int4_matmul<bfloat16>({m, 4096, 14336, 128, Scalar::BF16, false}, true);
  }
  check_int8_raw(4096, 4096, 4096, -1);
  const int wg = int(ops::matmul_int8_tiles().size()) - 1;
  if (runs_tile(wg)) {
    check_int8_raw(4096, 4096, 4096, wg);
    check_int8_scaled<bfloat16>(4096, 4096, 4096, Scalar::BF16, true, true, wg);
  }
}
