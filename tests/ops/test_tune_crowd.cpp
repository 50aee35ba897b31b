// The crowd: 12 threads, each on its own stream, make their first calls at once from a cold
// cache: matmul_auto bf16 -> f32 and bf16 -> bf16, softmax and rms_norm on four shapes.
// Every matmul bucket is tuned exactly once and every result is right (float64 reference on
// sampled rows). In the interpreter the timer is a fake one; on a device tuning is real.
#include <catch2/catch.hpp>

#include <cmath>
#include <latch>
#include <random>
#include <thread>

#include "kaio/kaio.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/norm.h"
#include "kaio/ops/softmax.h"
#include "kaio/tuner/once.h"
#include "kaio/tuner/tuner.h"
#include "../support.h"

using kaio::test::ScopedEnv;
using kaio::test::TempDir;
namespace tn = kaio::tuner;
namespace ops = kaio::ops;
using kaio::bfloat16;
using kaio::DeviceBuffer;

namespace {

struct Shape {
  uint32_t m, n, k;
};

std::vector<Shape> shapes() {
  if (kaio::jit::interpret_mode()) return {{8, 16, 16}, {24, 32, 16}, {40, 16, 32}, {72, 32, 32}};
  return {{256, 256, 256}, {512, 384, 320}, {1000, 1000, 1000}, {64, 1024, 512}};
}

// Rows to check: the first, the last and a few between.
std::vector<uint32_t> sample_rows(uint32_t m) {
  std::vector<uint32_t> r;
  for (uint32_t i = 0; i < 8; ++i) r.push_back(uint32_t(uint64_t(i) * (m - 1) / 7));
  return r;
}

// One thread: every op on every shape on its own stream; returns what went wrong, or "".
std::string crowd_thread(std::latch& start) {
  kaio::jit::Stream stream;
  std::mt19937 rng(::kaio::test::case_seed());
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  struct Case {
    Shape s;
    std::vector<bfloat16> a, b, x, w;
    DeviceBuffer<bfloat16> da, db, dx, dw, c16, y1, y2;
    DeviceBuffer<float> c32;
  };
  std::vector<std::unique_ptr<Case>> cases;
  for (const Shape& s : shapes()) {
    auto c = std::make_unique<Case>();
    c->s = s;
    auto fill = [&](std::vector<bfloat16>& v, size_t n) {
      v.resize(n);
      for (auto& e : v) e = bfloat16(d(rng));
    };
    fill(c->a, size_t(s.m) * s.k);
    fill(c->b, size_t(s.k) * s.n);
    fill(c->x, size_t(s.m) * s.n);
    fill(c->w, s.n);
    c->da = DeviceBuffer<bfloat16>(c->a);
    c->db = DeviceBuffer<bfloat16>(c->b);
    c->dx = DeviceBuffer<bfloat16>(c->x);
    c->dw = DeviceBuffer<bfloat16>(c->w);
    c->c16 = DeviceBuffer<bfloat16>(size_t(s.m) * s.n);
    c->y1 = DeviceBuffer<bfloat16>(size_t(s.m) * s.n);
    c->y2 = DeviceBuffer<bfloat16>(size_t(s.m) * s.n);
    c->c32 = DeviceBuffer<float>(size_t(s.m) * s.n);
    for (auto* p : {&c->c16, &c->y1, &c->y2}) p->fill_bytes(0xFF);
    c->c32.fill_bytes(0xFF);
    cases.push_back(std::move(c));
  }
  start.arrive_and_wait();  // first calls at once
  for (auto& c : cases) {
    const Shape s = c->s;
    ops::matmul_auto(c->da, c->db, c->c32, {.m = s.m, .n = s.n, .k = s.k, .in = kaio::ir::Scalar::BF16}, &stream);
    ops::matmul_auto(c->da, c->db, c->c16,
                     {.m = s.m, .n = s.n, .k = s.k, .in = kaio::ir::Scalar::BF16, .out = kaio::ir::Scalar::BF16}, &stream);
    ops::softmax(ops::as_rows(c->dx, s.m, s.n), ops::as_rows(c->y1, s.m, s.n), &stream);
    ops::rms_norm(ops::as_rows(c->dx, s.m, s.n), ops::as_vector(c->dw), ops::as_rows(c->y2, s.m, s.n), 1e-6f, &stream);
  }
  stream.synchronize();
  for (auto& c : cases) {
    const Shape s = c->s;
    const auto c32 = c->c32.to_host();
    const auto c16 = c->c16.to_host();
    const auto y1 = c->y1.to_host();
    const auto y2 = c->y2.to_host();
    const std::string where = " at " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    for (uint32_t i : sample_rows(s.m)) {
      double mx = -1e300, sum = 0, sq = 0;
      for (uint32_t j = 0; j < s.n; ++j) {
        const double xv = float(c->x[size_t(i) * s.n + j]);
        mx = std::max(mx, xv);
        sq += xv * xv;
      }
      for (uint32_t j = 0; j < s.n; ++j) sum += std::exp(double(float(c->x[size_t(i) * s.n + j])) - mx);
      const double rms = 1.0 / std::sqrt(sq / s.n + 1e-6);
      for (uint32_t j = 0; j < s.n; ++j) {
        double ref = 0, scale = 0;
        for (uint32_t q = 0; q < s.k; ++q) {
          const double t = double(float(c->a[size_t(i) * s.k + q])) * double(float(c->b[size_t(q) * s.n + j]));
          ref += t;
          scale += std::fabs(t);
        }
        const size_t at = size_t(i) * s.n + j;
        const double xv = float(c->x[at]);
        const double sm = std::exp(xv - mx) / sum, rn = xv * rms * double(float(c->w[j]));
        if (!(std::fabs(c32[at] - ref) <= 1e-4 * scale)) return "matmul bf16->f32 C[" + std::to_string(i) + "][" + std::to_string(j) + "]" + where;
        if (!(std::fabs(float(c16[at]) - ref) <= std::fabs(ref) / 128 + 1e-4 * scale))
          return "matmul bf16->bf16 C[" + std::to_string(i) + "][" + std::to_string(j) + "]" + where;
        if (!(std::fabs(float(y1[at]) - sm) <= std::fabs(sm) / 128 + 1e-7)) return "softmax y[" + std::to_string(i) + "][" + std::to_string(j) + "]" + where;
        if (!(std::fabs(float(y2[at]) - rn) <= std::fabs(rn) / 128 + 1e-6)) return "rms_norm y[" + std::to_string(i) + "][" + std::to_string(j) + "]" + where;
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("the crowd: 12 threads on their own streams tune each matmul bucket once", "[gpu][ops][tuner]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  ScopedEnv wait("KAIO_TUNE_WAIT", std::nullopt);
  if (kaio::jit::interpret_mode())
    tn::set_timer([](const std::string& name, const std::function<void()>&, uint32_t runs, const kaio::jit::Stream*) {
      return std::vector<double>(runs, 1.0 + double(name.size() % 7));
    });
  ops::matmul_auto_reset();
  tn::reset_stats();
  constexpr int kThreads = 12;
  std::latch start(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      try {
        errors[size_t(t)] = crowd_thread(start);
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  tn::set_timer(nullptr);
  for (const auto& e : errors) CHECK(e == "");
  const auto by_key = tn::tunings_by_key();
  CHECK(by_key.size() == 8);  // 4 shapes x (bf16 -> f32, bf16 -> bf16)
  for (const auto& [key, n] : by_key) {
    INFO(key);
    CHECK(n == 1);
  }
  CHECK(tn::stats().tunings == 8);
  CHECK(tn::stats().fallbacks == 0);
  ops::matmul_auto_reset();
}
