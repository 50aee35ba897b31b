// The ops launch helpers, which go through their kernel families: f32, f16 and bf16 at edge
// sizes against float64, outputs poisoned first; a second call runs no builder; size
// mismatches are usage errors naming the op. [gpu]: a device, or KAIO_INTERPRET=1.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

template <class T>
std::vector<T> random_vec(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(rng()));
  return v;
}

// Unit roundoff of the storage type.
template <class T>
double unit() {
  if constexpr (std::is_same_v<T, kaio::half>) return 1.0 / (1 << 11);
  else if constexpr (std::is_same_v<T, kaio::bfloat16>) return 1.0 / (1 << 8);
  else return 1.0 / (1 << 24);
}

// Absolute rounding error near zero: results below the smallest normal (f16: 2^-14) are
// rounded to the subnormal spacing (f16: 2^-24).
template <class T>
double tiny() {
  return std::is_same_v<T, kaio::half> ? 1.0 / (1 << 24) : 1e-37;
}

template <class T>
void poison(DeviceBuffer<T>& b) { b.fill_bytes(0xFF); }  // NaN in every float type

}  // namespace

TEMPLATE_TEST_CASE("ops::saxpy and ops::silu_gate through their families", "[gpu][ops]", float, kaio::half,
                   kaio::bfloat16) {
  using T = TestType;
  const double u = unit<T>();
  for (uint32_t n : {1u, 17u, 1023u, 4099u}) {
    INFO("n = " << n);
    auto x = random_vec<T>(n, -4, 4), y = random_vec<T>(n, -4, 4), g = random_vec<T>(n, -4, 4);
    T a = T(0.75f);
    DeviceBuffer<T> dx(x), dy(n), dg(g), dout(n);
    poison(dy);
    dy.upload(y);
    ops::saxpy(a, dx, dy);
    std::vector<T> got = dy.to_host();
    size_t bad = 0;
    for (uint32_t i = 0; i < n; ++i) {
      double ax = double(float(a)) * double(float(x[i])), r = ax + double(float(y[i]));
      // f32: mul + add may fuse (2 roundings); f16/bf16: native mul and add, each rounded once.
      double bound = 2 * u * (std::fabs(ax) + std::fabs(double(float(y[i])))) * 1.01 + 2 * tiny<T>();
      bad += !(std::fabs(double(float(got[i])) - r) <= bound);
    }
    CHECK(bad == 0);

    poison(dout);
    ops::silu_gate(dx, dg, dout);
    got = dout.to_host();
    bad = 0;
    for (uint32_t i = 0; i < n; ++i) {
      double xi = float(x[i]), r = xi / (1.0 + std::exp(-xi)) * double(float(g[i]));
      // f32: 8 ulp (exp 4 ulp, then add, div, mul); f16/bf16: computed in f32, rounded once.
      double bound = std::is_same_v<T, float> ? 8 * 2 * u * std::fabs(r) : (u + 16.0 / (1 << 24)) * std::fabs(r);
      bad += !(std::fabs(double(float(got[i])) - r) <= bound + tiny<T>());
    }
    CHECK(bad == 0);
  }
  // Every call after the first of a config is a family hit: no builder runs.
  uint64_t before = ops::saxpy_family().builds();
  DeviceBuffer<T> dx(random_vec<T>(64, -1, 1)), dy(random_vec<T>(64, -1, 1));
  for (int i = 0; i < 5; ++i) ops::saxpy(T(1.0f), dx, dy);
  CHECK(ops::saxpy_family().builds() == before);
}

TEST_CASE("ops::row_sum through its family, f32 and f16 input", "[gpu][ops]") {
  for (uint32_t rows : {1u, 17u, 1023u}) {
    const uint32_t cols = 37;
    INFO("rows = " << rows);
    auto m = random_vec<float>(size_t(rows) * cols, -4, 4);
    std::vector<kaio::half> mh(m.size());
    for (size_t i = 0; i < m.size(); ++i) mh[i] = kaio::half(m[i]);
    DeviceBuffer<float> dm(m), sums(rows);
    DeviceBuffer<kaio::half> dmh(mh);
    for (int pass = 0; pass < 2; ++pass) {
      poison(sums);
      if (pass == 0) ops::row_sum(dm, sums, rows, cols);
      else ops::row_sum(dmh, sums, rows, cols);
      std::vector<float> got = sums.to_host();
      size_t bad = 0;
      for (uint32_t r = 0; r < rows; ++r) {
        double ref = 0, mag = 0;
        for (uint32_t c = 0; c < cols; ++c) {
          double v = pass == 0 ? double(m[size_t(r) * cols + c]) : double(float(mh[size_t(r) * cols + c]));
          ref += v;
          mag += std::fabs(v);
        }
        bad += !(std::fabs(got[r] - ref) <= cols * (1.0 / (1 << 23)) * mag);
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("ops helpers reject mismatched sizes, naming the op", "[gpu][ops]") {
  DeviceBuffer<float> a(10), b(11), c(10);
  auto e = test::usage_error_of([&] { ops::saxpy(1.0f, a, b); });
  CHECK(e.op() == "saxpy");
  CHECK_THAT(e.what(), Contains("x has 10 elements, y 11"));
  e = test::usage_error_of([&] { ops::silu_gate(a, b, c); });
  CHECK(e.op() == "silu_gate");
  e = test::usage_error_of([&] { ops::row_sum(a, c, 3, 4); });
  CHECK(e.op() == "row_sum");
  CHECK_THAT(e.what(), Contains("rows x cols = 12"));
}
