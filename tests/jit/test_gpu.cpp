// [gpu]: the example kernels on the device at n = 1, 17, 1023, 2^24, outputs poisoned
// (0xFF bytes = NaN) before each run, fresh random inputs, compared with float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "../support.h"

using namespace kaio;

namespace {

std::mt19937& rng() {
  static std::mt19937 r(std::random_device{}());
  return r;
}

std::vector<float> random_floats(size_t n, float lo = -4.f, float hi = 4.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

const uint32_t kSizes[] = {1, 17, 1023, 1u << 24};

// Counts elements outside |out - ref| <= bound(i); NaN (an unwritten element) always fails.
template <class Ref, class Bound>
size_t count_bad(const std::vector<float>& out, Ref ref, Bound bound) {
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double r = ref(i);
    if (!(std::fabs(double(out[i]) - r) <= bound(i, r))) {
      if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << out[i] << ", expected " << r);
      ++bad;
    }
  }
  return bad;
}

constexpr double kEps = 1.0 / (1 << 23);  // f32 unit roundoff * 2

}  // namespace

TEST_CASE("saxpy on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel());
  for (uint32_t n : kSizes) {
    INFO("n = " << n);
    auto x = random_floats(n), y = random_floats(n);
    float a = std::uniform_real_distribution<float>(-2.f, 2.f)(rng());
    DeviceBuffer<float> dx(x), dy(n);
    dy.fill_bytes(0xFF);  // poison, then the real input
    dy.upload(y);
    ck.launch({.grid = {(n + 255) / 256}, .block = {256}}, a, dx, dy, n);
    std::vector<float> out = dy.to_host();
    // mul + add (ptxas may fuse them): at most 2 roundings of magnitude <= |a x| + |y|.
    CHECK(count_bad(out, [&](size_t i) { return double(a) * x[i] + double(y[i]); },
                    [&](size_t i, double) { return 2 * kEps * (std::fabs(double(a) * x[i]) + std::fabs(y[i])); }) == 0);
  }
}

TEST_CASE("fused silu-gate on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::silu_gate_kernel());
  for (uint32_t n : kSizes) {
    INFO("n = " << n);
    auto x = random_floats(n, -20.f, 20.f), g = random_floats(n);
    DeviceBuffer<float> dx(x), dg(g), dout(n);
    dout.fill_bytes(0xFF);
    ck.launch({.grid = {(n + 255) / 256}, .block = {256}}, dx, dg, dout, n);
    std::vector<float> out = dout.to_host();
    // exp within 4 ulp, then add, div, mul: relative error <= 8 ulp of f32.
    CHECK(count_bad(out, [&](size_t i) { double xi = x[i]; return xi / (1.0 + std::exp(-xi)) * g[i]; },
                    [&](size_t, double r) { return 8 * kEps * std::fabs(r) + 1e-37; }) == 0);
  }
}

TEST_CASE("a loop kernel (row sums) on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::row_sum_kernel());
  for (uint32_t rows : kSizes) {
    uint32_t cols = rows == (1u << 24) ? 3 : 37;
    INFO("rows = " << rows << ", cols = " << cols);
    auto m = random_floats(size_t(rows) * cols);
    DeviceBuffer<float> dm(m), dsum(rows);
    dsum.fill_bytes(0xFF);
    ck.launch({.grid = {(rows + 127) / 128}, .block = {128}}, dm, dsum, rows, cols);
    std::vector<float> out = dsum.to_host();
    auto ref = [&](size_t r) {
      double s = 0;
      for (uint32_t c = 0; c < cols; ++c) s += m[r * cols + c];
      return s;
    };
    // Sequential f32 sum: |error| <= cols * eps * sum |m|.
    auto bound = [&](size_t r, double) {
      double s = 0;
      for (uint32_t c = 0; c < cols; ++c) s += std::fabs(m[r * cols + c]);
      return cols * kEps * s;
    };
    CHECK(count_bad(out, ref, bound) == 0);
  }
}

TEST_CASE("a 2D kernel on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::axpby_2d_kernel());
  struct Shape { uint32_t rows, cols; };
  for (Shape s : {Shape{1, 1}, Shape{17, 1}, Shape{1023, 17}, Shape{4096, 4096}}) {
    uint32_t ld = s.cols + 3;  // padded rows: the padding must stay untouched
    INFO("rows = " << s.rows << ", cols = " << s.cols);
    size_t total = size_t(s.rows) * ld;
    auto a = random_floats(total), b = random_floats(total);
    float alpha = 0.75f;
    DeviceBuffer<float> da(a), db(b), dc(total);
    dc.fill_bytes(0xFF);
    ck.launch({.grid = {(s.cols + 31) / 32, (s.rows + 7) / 8}, .block = {32, 8}}, da, db, dc, alpha, s.rows, s.cols, ld);
    std::vector<float> out = dc.to_host();
    size_t bad = 0, pad_touched = 0;
    for (size_t r = 0; r < s.rows; ++r)
      for (size_t c = 0; c < ld; ++c) {
        size_t i = r * ld + c;
        if (c >= s.cols) {
          uint32_t bits;
          std::memcpy(&bits, &out[i], 4);
          pad_touched += bits != 0xFFFFFFFFu;
          continue;
        }
        double ref = double(alpha) * b[i] + a[i];
        bad += !(std::fabs(out[i] - ref) <= kEps * std::fabs(ref) + 1e-37);  // one rounding (fma)
      }
    CHECK(bad == 0);
    CHECK(pad_touched == 0);
  }
}

TEST_CASE("a fresh process launching from a disk hit gives the same results", "[gpu][cache]") {
  test::TempDir dir;
  std::string cmd = "KAIO_CACHE_DIR=" + dir.str() + " " + test::child_exe() + " --arch " +
                    std::string(jit::compile(ops::saxpy_kernel()).arch()) + " --launch 100003";
  test::CommandResult cold = test::run_command(cmd);
  test::CommandResult warm = test::run_command(cmd);
  REQUIRE(cold.status == 0);
  REQUIRE(warm.status == 0);
  std::string key = cold.out.substr(0, 32);
  CHECK(cold.out.substr(32, 3) == " 0\n");
  CHECK(warm.out.substr(0, 35) == key + " 1\n");
  // Same seed, same kernel: the outputs match to the bit (the child prints their error).
  CHECK(cold.out.substr(35) == warm.out.substr(35));
  double err = std::stod(warm.out.substr(warm.out.find("max_rel_err") + 12));
  CHECK(err < 1e-5);
}

TEST_CASE("a kernel compiled for another SM is refused at launch", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel(), {.arch = "sm_80", .use_cache = false});
  DeviceBuffer<float> x(4), y(4);
  if (jit::compile(ops::saxpy_kernel()).arch() == "sm_80") return;
  CHECK_THROWS_AS(ck.launch({.grid = {1}, .block = {4}}, 1.0f, x, y, 4u), UsageError);
}

TEST_CASE("launches on a stream", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel());
  const uint32_t n = 4099;
  auto x = random_floats(n), y = random_floats(n);
  DeviceBuffer<float> dx(x), dy(y);
  Stream s;
  ck.launch({.grid = {(n + 127) / 128}, .block = {128}, .stream = &s}, 3.0f, dx, dy, n);
  s.synchronize();
  std::vector<float> out = dy.to_host();
  CHECK(count_bad(out, [&](size_t i) { return 3.0 * x[i] + double(y[i]); },
                  [&](size_t i, double) { return 2 * kEps * (std::fabs(3.0 * x[i]) + std::fabs(y[i])); }) == 0);
}
