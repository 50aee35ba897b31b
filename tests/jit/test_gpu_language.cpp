// [gpu] tests of the full language: block reductions and scans, shuffles and votes against
// a host model, a shared-memory transpose, a histogram with shared and global atomics,
// f16/bf16, vector loads, a 3D launch, dynamic shared memory beyond 48 KB, math bounds.
// Outputs are poisoned first; references are float64 or exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "kaio/kaio.h"
#include "../kernels.h"
#include "../support.h"

using namespace kaio;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

bool interpreted() {
  const char* v = std::getenv("KAIO_INTERPRET");
  return v && *v && std::string(v) != "0";
}

template <class T>
std::vector<T> random_vec(size_t n, double lo, double hi) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(static_cast<T>(lo), static_cast<T>(hi));
    for (auto& x : v) x = d(rng());
  } else {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (auto& x : v) x = static_cast<T>(d(rng()));
  }
  return v;
}

// One block per chunk: each thread folds a strided slice, then block_reduce_{op}.
template <class T>
ir::Kernel block_reduce_kernel(int op) {
  ir::KernelBuilder b(std::string("block_reduce_") + ir::scalar_name(ir::type_of<T>().elem) + "_" + std::to_string(op));
  auto in = b.param<const T*>("in");
  auto out = b.param<T*>("out");
  auto n = b.param<uint32_t>("n");
  auto chunk = b.param<uint32_t>("chunk");
  ir::Value blk = b.block_idx_x(), tid = b.thread_idx_x(), nt = b.block_dim_x();
  ir::Value start = blk * chunk;
  ir::Value end = ir::min(start + chunk, n);
  T ident = op == 0 ? T(0) : op == 1 ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  if constexpr (std::is_floating_point_v<T>) ident = op == 0 ? T(0) : op == 1 ? -INFINITY : INFINITY;
  auto acc = b.var<T>(ident);
  ir::Value first = start + tid;
  b.for_(first, end, nt, [&](ir::Value i) {
    ir::Value x = in[i];
    acc = op == 0 ? acc + x : op == 1 ? ir::max(acc, x) : ir::min(acc, x);
  });
  ir::Value r = op == 0 ? b.block_reduce_sum(acc) : op == 1 ? b.block_reduce_max(acc) : b.block_reduce_min(acc);
  b.if_(tid == 0u, [&] { out[blk] = r; });
  return b.build();
}

}  // namespace

TEMPLATE_TEST_CASE("block reductions on the device", "[gpu][lang]", float, int32_t, uint32_t) {
  using T = TestType;
  std::vector<uint32_t> sizes = {1, 17, 1000, 1023, 100000, 10000000};
  if (interpreted()) sizes = {1, 17, 1000, 1023, 20000};
  for (int op = 0; op < 3; ++op) {
    jit::CompiledKernel ck = jit::compile(block_reduce_kernel<T>(op));
    for (uint32_t n : sizes) {
      INFO("op " << op << " n " << n);
      auto x = std::is_floating_point_v<T> ? random_vec<T>(n, -1, 1) : random_vec<T>(n, std::is_signed_v<T> ? -1000 : 0, 1000);
      uint32_t blocks = std::min<uint32_t>(120, (n + 255) / 256);
      uint32_t chunk = (n + blocks - 1) / blocks;
      DeviceBuffer<T> din(x), dout(blocks);
      dout.fill_bytes(0xFF);
      for (uint32_t threads : {256u, 96u}) {  // a full and a partial last warp... 96 = 3 warps
        ck.launch({.grid = {blocks}, .block = {threads}}, din, dout, n, chunk);
        std::vector<T> out = dout.to_host();
        size_t bad = 0;
        for (uint32_t bi = 0; bi < blocks; ++bi) {
          uint32_t s = bi * chunk, e = std::min(n, s + chunk);
          double ref = op == 0 ? 0 : op == 1 ? -INFINITY : INFINITY, mag = 0;
          for (uint32_t i = s; i < e; ++i) {
            double v = static_cast<double>(x[i]);
            ref = op == 0 ? ref + v : op == 1 ? std::max(ref, v) : std::min(ref, v);
            mag += std::fabs(v);
          }
          if (s >= e) continue;
          double got = static_cast<double>(out[bi]);
          // f32 sums: error <= (elements per thread + log2 threads + 5) * eps * sum |x|
          double bound = std::is_floating_point_v<T> && op == 0 ? (double(chunk) / threads + 20) * 1.2e-7 * mag : 0;
          bad += !(std::fabs(got - ref) <= bound);
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("block scans on the device", "[gpu][lang]") {
  ir::KernelBuilder b("scans");
  auto in = b.param<const int32_t*>("in");
  auto incl = b.param<int32_t*>("incl");
  auto excl = b.param<int32_t*>("excl");
  ir::Value t = b.global_id_x();
  ir::Value x = in[t];
  ir::Value i = b.block_scan_inclusive(x);
  ir::Value e = b.block_scan_exclusive(x);
  incl[t] = i;
  excl[t] = e;
  jit::CompiledKernel ck = jit::compile(b.build());
  for (uint32_t threads : {32u, 100u, 1024u}) {
    uint32_t blocks = 3, n = blocks * threads;
    auto x = random_vec<int32_t>(n, -50, 50);
    DeviceBuffer<int32_t> dx(x), di(n), de(n);
    di.fill_bytes(0xFF);
    de.fill_bytes(0xFF);
    ck.launch({.grid = {blocks}, .block = {threads}}, dx, di, de);
    auto gi = di.to_host(), ge = de.to_host();
    size_t bad = 0;
    for (uint32_t bi = 0; bi < blocks; ++bi) {
      int32_t run = 0;
      for (uint32_t k = 0; k < threads; ++k) {
        uint32_t idx = bi * threads + k;
        bad += ge[idx] != run;
        run += x[idx];
        bad += gi[idx] != run;
      }
    }
    INFO("threads " << threads);
    CHECK(bad == 0);
  }
}

TEST_CASE("shuffles and votes against a host model", "[gpu][lang]") {
  ir::KernelBuilder b("warp_ops");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");  // 6 outputs per thread
  auto bits = b.param<uint32_t*>("bits");  // 3 outputs per thread
  ir::Value t = b.global_id_x();
  ir::Value lane = b.lane_id();
  ir::Value xv = in[t];
  ir::Value o = t * 6u;
  out[o] = ir::shfl_up(xv, 3u);
  out[o + 1u] = ir::shfl_down(xv, 5u);
  out[o + 2u] = ir::shfl_xor(xv, 7u);
  ir::Value src = (lane * 7u) & 31u;
  out[o + 3u] = ir::shfl_idx(xv, src);
  out[o + 4u] = ir::shfl_down(xv, 3u, 8);
  out[o + 5u] = ir::shfl_xor(xv, 5u, 16);
  ir::Value p = xv > 0.0f;
  ir::Value q = xv > -0.9f;
  ir::Value bo = t * 3u;
  bits[bo] = ir::ballot(p);
  ir::Value one = b.constant(1u), zero = b.constant(0u);
  bits[bo + 1u] = ir::select(ir::vote_all(q), one, zero);
  bits[bo + 2u] = ir::select(ir::vote_any(xv > 0.95f), one, zero);
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t n = 256;
  auto x = random_vec<float>(n, -1, 1);
  DeviceBuffer<float> dx(x), dout(n * 6);
  DeviceBuffer<uint32_t> dbits(n * 3);
  dout.fill_bytes(0xFF);
  dbits.fill_bytes(0xFF);
  ck.launch({.grid = {2}, .block = {128}}, dx, dout, dbits);
  auto got = dout.to_host();
  auto gb = dbits.to_host();
  size_t bad = 0;
  for (uint32_t t = 0; t < n; ++t) {
    uint32_t w = t & ~31u, l = t & 31u;
    auto at = [&](uint32_t lane) { return x[w + lane]; };
    auto seg = [&](uint32_t width, uint32_t lane) { return (l & ~(width - 1)) + lane; };
    float e[6] = {l >= 3 ? at(l - 3) : at(l),
                  l + 5 < 32 ? at(l + 5) : at(l),
                  at(l ^ 7),
                  at((l * 7) & 31),
                  (l % 8) + 3 < 8 ? at(seg(8, (l % 8) + 3)) : at(l),
                  at(seg(16, (l % 16) ^ 5))};
    for (int k = 0; k < 6; ++k) bad += got[t * 6 + k] != e[k];
    uint32_t ballot = 0;
    bool all = true, any = false;
    for (uint32_t k = 0; k < 32; ++k) {
      ballot |= (at(k) > 0.0f ? 1u : 0u) << k;
      all = all && at(k) > -0.9f;
      any = any || at(k) > 0.95f;
    }
    bad += gb[t * 3] != ballot;
    bad += gb[t * 3 + 1] != (all ? 1u : 0u);
    bad += gb[t * 3 + 2] != (any ? 1u : 0u);
  }
  CHECK(bad == 0);
}

TEST_CASE("shared-memory transpose of 1023 x 517 with barriers", "[gpu][lang]") {
  jit::CompiledKernel ck = jit::compile(test::transpose_kernel("transpose", false));
  const uint32_t R = 1023, C = 517;
  auto x = random_vec<float>(size_t(R) * C, -10, 10);
  DeviceBuffer<float> din(x), dout(size_t(R) * C);
  dout.fill_bytes(0xFF);
  ck.launch({.grid = {(C + 31) / 32, (R + 31) / 32}, .block = {32, 8}}, din, dout, R, C);
  auto got = dout.to_host();
  size_t bad = 0;
  for (uint32_t r = 0; r < R; ++r)
    for (uint32_t c = 0; c < C; ++c) bad += got[size_t(c) * R + r] != x[size_t(r) * C + c];
  CHECK(bad == 0);
}

TEST_CASE("histogram with shared and global atomics", "[gpu][lang]") {
  jit::CompiledKernel ck = jit::compile(test::histogram_kernel("histogram"));
  const uint32_t N = interpreted() ? 50000 : 3000017;
  auto x = random_vec<uint32_t>(N, 0, 1u << 30);
  std::vector<uint32_t> ref(256, 0);
  for (uint32_t v : x) ref[v & 255]++;
  DeviceBuffer<uint32_t> dx(x), dh(std::vector<uint32_t>(256, 0));
  ck.launch({.grid = {64}, .block = {256}}, dx, dh, N);
  CHECK(dh.to_host() == ref);
}

TEST_CASE("f16 and bf16: round trips and arithmetic", "[gpu][lang]") {
  ir::KernelBuilder b("halves");
  auto xf = b.param<const float*>("xf");
  auto h = b.param<kaio::half*>("h");
  auto bf = b.param<kaio::bfloat16*>("bf");
  auto back = b.param<float*>("back");
  auto n = b.param<uint32_t>("n");
  ir::Value i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value x = xf[i];
    ir::Value hx = ir::cast<kaio::half>(x);
    ir::Value bx = ir::cast<kaio::bfloat16>(x);
    ir::Value hy = ir::cast<kaio::half>(x * 0.75f);
    ir::Value by = ir::cast<kaio::bfloat16>(x * 0.75f);
    h[i * 2u] = hx;
    h[i * 2u + 1u] = ir::fma(hx, hy, hx) - hy * hx + (hx + hy);
    bf[i * 2u] = bx;
    bf[i * 2u + 1u] = ir::fma(bx, by, bx) - by * bx + (bx + by);
    back[i] = ir::cast<float>(hx) + ir::cast<float>(bx);
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t N = 100003;
  auto x = random_vec<float>(N, -60000, 60000);
  x[0] = 1e-7f;  // a subnormal in f16
  x[1] = 65519.f;  // rounds to the largest f16
  DeviceBuffer<float> dx(x), dback(N);
  DeviceBuffer<kaio::half> dh(2 * N);
  DeviceBuffer<kaio::bfloat16> db(2 * N);
  dh.fill_bytes(0xFF);
  db.fill_bytes(0xFF);
  dback.fill_bytes(0xFF);
  ck.launch({.grid = {(N + 255) / 256}, .block = {256}}, dx, dh, db, dback, N);
  auto gh = dh.to_host();
  auto gb = db.to_host();
  auto gback = dback.to_host();
  size_t bad = 0;
  for (uint32_t i = 0; i < N; ++i) {
    kaio::half hx(x[i]), hy(x[i] * 0.75f);
    kaio::bfloat16 bx(x[i]), by(x[i] * 0.75f);
    bad += gh[2 * i].bits != hx.bits;
    bad += gb[2 * i].bits != bx.bits;
    // Each half op rounds once, as the host model does step by step.
    auto hr = [](float f) { return float(kaio::half(f)); };
    auto br = [](float f) { return float(kaio::bfloat16(f)); };
    float hxf = float(hx), hyf = float(hy), bxf = float(bx), byf = float(by);
    float h_fma = hr(static_cast<float>(double(hxf) * hyf + hxf));
    float h_ref = hr(hr(h_fma - hr(hyf * hxf)) + hr(hxf + hyf));
    float b_fma = br(static_cast<float>(double(bxf) * byf + bxf));
    float b_ref = br(br(b_fma - br(byf * bxf)) + br(bxf + byf));
    float gh1 = float(gh[2 * i + 1]), gb1 = float(gb[2 * i + 1]);
    bad += !(gh1 == h_ref || (std::isnan(gh1) && std::isnan(h_ref)) || (std::isinf(gh1) && std::isinf(h_ref)));
    bad += !(gb1 == b_ref || (std::isnan(gb1) && std::isnan(b_ref)));
    bad += gback[i] != float(hx) + float(bx);
  }
  CHECK(bad == 0);
}

TEST_CASE("vector loads on aligned and unaligned data", "[gpu][lang]") {
  ir::KernelBuilder b("vec_copy");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto offset = b.param<uint32_t>("offset");  // element offset into `in`: unaligned when not % 4
  auto n4 = b.param<uint32_t>("n4");
  ir::Value i = b.global_id_x();
  b.if_(i < n4, [&] {
    ir::Value base = i * 4u;
    ir::Value src = base + offset;
    auto v = ir::load_vec_checked(in, src, 4);
    ir::Value scaled = v[0] * 2.0f;
    ir::store_vec(out, base, {scaled, v[1], v[2], v[3]});
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t N4 = 25001;
  auto x = random_vec<float>(N4 * 4 + 8, -5, 5);
  DeviceBuffer<float> din(x), dout(N4 * 4);
  for (uint32_t offset : {0u, 4u, 1u, 3u}) {
    dout.fill_bytes(0xFF);
    ck.launch({.grid = {(N4 + 127) / 128}, .block = {128}}, din, dout, offset, N4);
    auto got = dout.to_host();
    size_t bad = 0;
    for (uint32_t k = 0; k < N4 * 4; ++k) bad += got[k] != (k % 4 == 0 ? 2.0f * x[k + offset] : x[k + offset]);
    INFO("offset " << offset);
    CHECK(bad == 0);
  }
}

TEST_CASE("a 3D launch", "[gpu][lang]") {
  ir::KernelBuilder b("grid3d");
  auto out = b.param<uint32_t*>("out");
  auto nx = b.param<uint32_t>("nx");
  auto ny = b.param<uint32_t>("ny");
  auto nz = b.param<uint32_t>("nz");
  ir::Value x = b.global_id_x(), y = b.global_id_y(), z = b.global_id_z();
  b.if_(x < nx && y < ny && z < nz, [&] {
    ir::Value lin = (z * ny + y) * nx + x;
    out[lin] = x + y * 1000u + z * 1000000u;
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t NX = 37, NY = 19, NZ = 11;
  DeviceBuffer<uint32_t> d(NX * NY * NZ);
  d.fill_bytes(0xFF);
  ck.launch({.grid = {(NX + 7) / 8, (NY + 3) / 4, (NZ + 1) / 2}, .block = {8, 4, 2}}, d, NX, NY, NZ);
  auto got = d.to_host();
  size_t bad = 0;
  for (uint32_t z = 0; z < NZ; ++z)
    for (uint32_t y = 0; y < NY; ++y)
      for (uint32_t x = 0; x < NX; ++x) bad += got[(z * NY + y) * NX + x] != x + y * 1000 + z * 1000000;
  CHECK(bad == 0);
}

TEST_CASE("dynamic shared memory beyond 48 KB, launch bounds and the resource report", "[gpu][lang]") {
  ir::KernelBuilder b("big_dynamic");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto count = b.param<uint32_t>("count");
  b.launch_bounds(256);
  auto dyn = b.dynamic_shared<float>();
  ir::Value tid = b.thread_idx_x(), nt = b.block_dim_x();
  b.for_(tid, count, nt, [&](ir::Value k) { dyn[k] = in[k]; });
  b.barrier();
  b.for_(tid, count, nt, [&](ir::Value k) {
    ir::Value rev = count - 1u - k;
    out[k] = dyn[rev];
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t kCount = 24 * 1024;  // 96 KB of floats
  auto x = random_vec<float>(kCount, -1, 1);
  DeviceBuffer<float> din(x), dout(kCount);
  dout.fill_bytes(0xFF);
  ck.launch({.grid = {1}, .block = {256}, .shared_bytes = kCount * 4}, din, dout, kCount);
  auto got = dout.to_host();
  size_t bad = 0;
  for (uint32_t k = 0; k < kCount; ++k) bad += got[k] != x[kCount - 1 - k];
  CHECK(bad == 0);
  if (!interpreted()) {
    jit::Resources r = ck.resources();
    INFO(r.str());
    CHECK(r.from_device);
    CHECK(r.registers > 0);
    CHECK(r.max_threads_per_block <= 256);
    CHECK_THROWS_AS(ck.launch({.grid = {1}, .block = {256}, .shared_bytes = 1u << 30}, din, dout, kCount), UsageError);
  }
}

TEST_CASE("math functions within their stated bounds", "[gpu][lang]") {
  ir::KernelBuilder b("math_fns");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto n = b.param<uint32_t>("n");
  ir::Value i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value x = in[i];
    ir::Value ax = ir::abs(x) + 0.001f;
    ir::Value o = i * 10u;
    out[o] = ir::exp(x);
    out[o + 1u] = ir::log(ax);
    out[o + 2u] = ir::tanh(x);
    out[o + 3u] = ir::sin(x);
    out[o + 4u] = ir::erf(x);
    out[o + 5u] = ir::pow(ax, x * 0.5f);
    out[o + 6u] = ir::round(x * 4.0f);
    out[o + 7u] = ir::floor(x) + ir::ceil(x) * 10.0f;
    out[o + 8u] = ir::rcp(ax);
    out[o + 9u] = ir::exp2(x) + ir::log2(ax);
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const uint32_t N = 200000;
  auto x = random_vec<float>(N, -8, 8);
  x[0] = 0.125f;  // round(0.5) = 1: half away from zero
  x[1] = -0.625f; // round(-2.5) = -3
  DeviceBuffer<float> din(x), dout(N * 10);
  dout.fill_bytes(0xFF);
  ck.launch({.grid = {(N + 255) / 256}, .block = {256}}, din, dout, N);
  auto got = dout.to_host();
  double worst[10] = {0};
  for (uint32_t k = 0; k < N; ++k) {
    double v = x[k], av = std::fabs(x[k]) + 0.001f;  // the kernel rounds |x| + 0.001 to f32
    double ref[10] = {std::exp(v), std::log(av), std::tanh(v), std::sin(v), std::erf(v),
                      std::pow(av, v * 0.5), std::round(double(x[k] * 4.0f)), std::floor(v) + std::ceil(v) * 10,
                      1.0 / av, std::exp2(v) + std::log2(av)};
    for (int f = 0; f < 10; ++f) {
      double g = got[k * 10 + f];
      double err = std::fabs(g - ref[f]);
      // relative for exp, tanh, pow, rcp, exp2+log2; log relative away from 1; absolute for sin, erf
      if (f == 0 || f == 2 || f == 5 || f == 8) err /= std::max(std::fabs(ref[f]), 1e-30);
      if (f == 9) err /= std::exp2(v) + std::fabs(std::log2(av));  // the two terms may cancel
      if (f == 1) err /= std::max(std::fabs(ref[f]), 1.0);
      worst[f] = std::isnan(g) ? INFINITY : std::max(worst[f], err);
    }
  }
  INFO("exp " << worst[0] << " log " << worst[1] << " tanh " << worst[2] << " sin " << worst[3] << " erf " << worst[4]
              << " pow " << worst[5] << " round " << worst[6] << " floor/ceil " << worst[7] << " rcp " << worst[8]
              << " exp2+log2 " << worst[9]);
  // The README's bounds (1 ulp of f32 = 2^-23 relative, 1.19e-7).
  CHECK(worst[0] <= 4 * 1.2e-7);     // exp: 4 ulp
  CHECK(worst[1] <= 4.8e-7);         // log: 2^-21 relative (absolute near 1)
  CHECK(worst[2] <= 4 * 1.2e-7);     // tanh: 4 ulp
  CHECK(worst[3] <= 1e-6);           // sin: 2^-20 absolute
  CHECK(worst[4] <= 4e-7);           // erf: 4e-7 absolute
  CHECK(worst[5] <= 4.8e-7 * 5);     // pow: 2^-21 (1 + |y log2 x|), |y log2 x| <= 4 * 3.1 here
  CHECK(worst[6] == 0);
  CHECK(worst[7] == 0);
  CHECK(worst[8] <= 6e-8);           // rcp: correctly rounded
  CHECK(worst[9] <= 3 * 1.2e-7);     // exp2 (2 ulp) + log2 (2^-22 absolute)
}

// Infinities, NaN, overflow and underflow: exp's two-part argument once turned exp(-inf)
// into NaN (inf - inf), which poisoned every softmax row with a masked (-inf) prefix and
// every team member holding no element.
TEST_CASE("exp, tanh and erf at infinities, NaN and the ends of the range", "[gpu][lang]") {
  ir::KernelBuilder b("math_special");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto n = b.param<uint32_t>("n");
  ir::Value i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value x = in[i];
    ir::Value o = i * 3u;
    out[o] = ir::exp(x);
    out[o + 1u] = ir::tanh(x);
    out[o + 2u] = ir::erf(x);
  });
  jit::CompiledKernel ck = jit::compile(b.build());
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf, inf, std::nanf(""), -1e30f, 1e30f, -200.0f, -104.0f, -103.0f, -87.5f, 80.0f,
                          88.5f, 88.75f, 89.0f, 100.0f, -50.0f, 50.0f, -45.0f, 45.0f, -9.0f, 9.0f, 0.0f, -0.0f};
  const uint32_t N = static_cast<uint32_t>(x.size());
  DeviceBuffer<float> din(x), dout(N * 3);
  dout.fill_bytes(0x7F);
  ck.launch({.grid = {1}, .block = {64}}, din, dout, N);
  auto got = dout.to_host();
  for (uint32_t k = 0; k < N; ++k) {
    const double v = x[k];
    const double ref[3] = {std::exp(v), std::tanh(v), std::erf(v)};
    for (int f = 0; f < 3; ++f) {
      const double g = got[k * 3 + f];
      INFO("f" << f << "(" << v << ") = " << g << ", want " << ref[f]);
      if (std::isnan(ref[f])) {
        CHECK(std::isnan(g));
      } else if (std::isinf(ref[f]) || ref[f] > std::numeric_limits<float>::max()) {
        CHECK(g == inf);
      } else {
        // exp, tanh: 4 ulp relative (and below the smallest normal, 2 subnormal steps);
        // erf: 4e-7 absolute
        const double bound = f == 2 ? 4e-7 : 4 * 1.2e-7 * std::fabs(ref[f]) + 3e-45;
        CHECK(std::fabs(g - ref[f]) <= bound);
      }
    }
  }
}

TEST_CASE("packed f16x2 and bf16x2 arithmetic and f16x2 atomics", "[gpu][lang]") {
  auto build = [](bool bf) {
    ir::Scalar ps = bf ? ir::Scalar::BF16x2 : ir::Scalar::F16x2;
    ir::KernelBuilder b(bf ? "packed_bf16" : "packed_f16");
    auto in = b.param("in", ir::Type::pointer(ps, true));
    auto out = b.param("out", ir::Type::pointer(ps, false));
    auto count = b.param("count", ir::Type::pointer(ps, false));
    auto n = b.param<uint32_t>("n");
    ir::Value i = b.global_id_x();
    b.if_(i < n, [&] {
      ir::Value x = in[i * 2u];
      ir::Value y = in[i * 2u + 1u];
      ir::Value f = ir::fma(x, y, x);
      ir::Value p = x * y;
      ir::Value s = x + y;
      ir::Value d = f - p;
      ir::Value r = ir::max(d + s, ir::min(x, y));
      out[i] = ir::pack2(ir::unpack_hi(r), ir::unpack_lo(r));  // swapped halves
      if (!bf) (void)ir::atomic_add(count, 0, b.constant(ir::Type::scalar(ps), ir::Literal{ir::Literal::Float, 0, 0, 1.0}, "one"));
    });
    return b.build();
  };
  const uint32_t N = 2000;  // the f16x2 count stays exact (<= 2048)
  for (bool bf : {false, true}) {
    INFO((bf ? "bf16x2" : "f16x2"));
    jit::CompiledKernel ck = jit::compile(build(bf));
    auto x = random_vec<float>(4 * N, -4, 4);
    auto round = [&](float v) { return bf ? float(kaio::bfloat16(v)) : float(kaio::half(v)); };
    auto bits = [&](float v) -> uint16_t { return bf ? kaio::bfloat16(v).bits : kaio::half(v).bits; };
    std::vector<uint32_t> in(2 * N);
    for (size_t k = 0; k < 2 * N; ++k) in[k] = uint32_t(bits(x[2 * k])) | (uint32_t(bits(x[2 * k + 1])) << 16);
    DeviceBuffer<uint32_t> din(in), dout(N), dcount(std::vector<uint32_t>(1, 0));
    dout.fill_bytes(0xFF);
    // The kernel's buffers are f16x2/bf16x2: view the same bytes with the packed types.
    jit::DevicePtr<kaio::half2> hin{din.device_address()}, hout{dout.device_address()}, hcount{dcount.device_address()};
    jit::DevicePtr<kaio::bfloat162> bin{din.device_address()}, bout{dout.device_address()}, bcount{dcount.device_address()};
    jit::LaunchConfig cfg{.grid = {(N + 127) / 128}, .block = {128}};
    if (bf) ck.launch(cfg, bin, bout, bcount, N);
    else ck.launch(cfg, hin, hout, hcount, N);
    auto got = dout.to_host();
    size_t bad = 0;
    for (uint32_t i = 0; i < N; ++i) {
      float r[2];
      for (int h = 0; h < 2; ++h) {
        float xv = round(x[4 * i + h]), yv = round(x[4 * i + 2 + h]);
        float f = round(static_cast<float>(double(xv) * yv + xv));
        float d = round(f - round(xv * yv));
        r[h] = std::max(round(d + round(xv + yv)), std::min(xv, yv));
      }
      uint32_t want = uint32_t(bits(r[1])) | (uint32_t(bits(r[0])) << 16);  // swapped
      bad += got[i] != want;
    }
    CHECK(bad == 0);
    if (!bf) {
      uint32_t c = dcount.to_host()[0];
      CHECK(float(kaio::half::from_bits(uint16_t(c & 0xffff))) == float(N));
      CHECK(float(kaio::half::from_bits(uint16_t(c >> 16))) == float(N));
    }
  }
}
