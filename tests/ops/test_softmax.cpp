// softmax and log_softmax against a float64 reference, every dtype at the standard row
// layouts (tests/ops/row_support.h), outputs poisoned first and pads checked untouched.
// [gpu]: a device, or KAIO_INTERPRET=1.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <thread>

#include "kaio/ops/softmax.h"
#include "../support.h"
#include "row_support.h"

using namespace kaio;
using namespace kaio::test::rows;
using Catch::Matchers::Contains;

namespace {

// Tolerances: the dtype's rounding of the result (unit<T>() relative; f16 subnormals
// tiny<T>() absolute) plus the f32 computation: exp within 4 ulp and a sum of up to 70000
// terms, 1e-5 relative. log_softmax: the same relative to |y| + 1 (the log of the sum is
// absolute). Reference: float64 from the (rounded) inputs.
template <class T>
void check_softmax(bool log, const Layout& l) {
  INFO((log ? "log_softmax " : "softmax ") << str(l));
  Mat<T> x = random_mat<T>(l, -8, 8);
  if (l.cols >= 64) {  // a masked prefix (causal attention) in row 0: -inf must not poison the sums
    for (uint32_t c = 0; c < l.cols / 2; ++c) x.host[l.at(0, c)] = T(-std::numeric_limits<float>::infinity());
    x.dev.upload(x.host);
  }
  Mat<T> y = poisoned_mat<T>(l);
  if (log) ops::log_softmax(x.view(), y.view());
  else ops::softmax(x.view(), y.view());
  CHECK(fetch(y) == 0);
  size_t bad = 0;
  double worst = 0;
  for (uint32_t r = 0; r < l.rows; ++r) {
    double m = -INFINITY;
    for (uint32_t c = 0; c < l.cols; ++c) m = std::max(m, x.at(r, c));
    double s = 0;
    for (uint32_t c = 0; c < l.cols; ++c) s += std::exp(x.at(r, c) - m);
    for (uint32_t c = 0; c < l.cols; ++c) {
      double ref = log ? x.at(r, c) - m - std::log(s) : std::exp(x.at(r, c) - m) / s;
      double got = y.at(r, c);
      bool ok;
      if (std::isinf(ref)) {
        ok = got == ref;
      } else {
        double scale = log ? std::fabs(ref) + 1 : std::fabs(ref);
        double bound = unit<T>() * std::fabs(ref) + 1e-5 * scale + tiny<T>();
        ok = std::fabs(got - ref) <= bound;
        worst = std::max(worst, std::fabs(got - ref) / (bound > 0 ? bound : 1));
      }
      if (!ok && bad++ < 3) UNSCOPED_INFO("row " << r << " col " << c << ": got " << got << ", want " << ref);
    }
  }
  INFO("worst error / bound = " << worst);
  CHECK(bad == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("softmax and log_softmax match float64 at every layout", "[gpu][ops][rows]", float, kaio::half,
                   kaio::bfloat16) {
  for (const Layout& l : layouts(with_long_rows<TestType>())) {
    ScopedSms sms(sm_count_for(l));
    for (bool log : {false, true}) check_softmax<TestType>(log, l);
  }
}

TEST_CASE("softmax in place", "[gpu][ops][rows]") {
  {
    Layout l{7, 300, 0, 0, "in place"};
    Mat<float> x = random_mat<float>(l, -3, 3);
    std::vector<float> orig = x.host;
    ops::softmax(x.view(), x.view());
    x.host = x.dev.to_host();
    for (uint32_t r = 0; r < l.rows; ++r) {
      double m = -INFINITY, s = 0;
      for (uint32_t c = 0; c < l.cols; ++c) m = std::max(m, double(orig[l.at(r, c)]));
      for (uint32_t c = 0; c < l.cols; ++c) s += std::exp(orig[l.at(r, c)] - m);
      for (uint32_t c = 0; c < l.cols; ++c) {
        double ref = std::exp(orig[l.at(r, c)] - m) / s;
        CHECK(std::fabs(x.host[l.at(r, c)] - ref) <= 1e-5 * ref);
      }
    }
  }
}

// [large]: left out of sanitizer runs, where the float64 reference of 8192 x 8192 dominates.
TEST_CASE("softmax at 8192x8192 and the decode shapes on a device", "[gpu][ops][rows][large]") {
  if (jit::interpret_mode()) return;  // the big shapes run on a device only
  for (Layout l : {Layout{8192, 8192, 0, 0, "8192x8192"}, Layout{1, 4096, 0, 0, "decode 1"},
                   Layout{16, 4096, 0, 0, "decode 16"}, Layout{128, 4096, 0, 0, "decode 128"}}) {
    check_softmax<kaio::bfloat16>(false, l);
    check_softmax<float>(true, l);
  }
}

TEST_CASE("softmax: a second call of a shape runs no builder", "[gpu][ops][rows]") {
  Layout l{4, 100, 0, 0, "dense"};
  Mat<float> x = random_mat<float>(l, -1, 1), y = poisoned_mat<float>(l);
  ops::softmax(x.view(), y.view());
  uint64_t before = ops::softmax_family().builds();
  for (int i = 0; i < 5; ++i) ops::softmax(x.view(), y.view());
  CHECK(ops::softmax_family().builds() == before);
}

TEST_CASE("softmax rejects bad arguments before launching, naming op and argument", "[gpu][ops][rows]") {
  DeviceBuffer<float> a(64), b(64);
  DeviceBuffer<double> d(64);
  auto x = ops::as_rows(a, 4, 16), y = ops::as_rows(b, 4, 16);
  auto expect = [](auto f, const char* op, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == op);
    CHECK_THAT(e.what(), Contains(text));
  };
  expect([&] { ops::softmax(ops::as_rows(uint64_t(0), ir::Scalar::F32, 4, 16), y); }, "softmax", "x is a null pointer");
  expect([&] { ops::softmax(ops::as_rows(a, 0, 16), y); }, "softmax", "x has zero size");
  expect([&] { ops::softmax(x, ops::as_rows(b, 4, 15)); }, "softmax", "y is 4 x 15, x is 4 x 16");
  expect([&] { ops::log_softmax(ops::as_rows(a, 4, 16, 8), y); }, "log_softmax", "x has a row stride of 8");
  expect([&] { ops::softmax(ops::as_rows(a, 5, 16), ops::as_rows(b, 5, 16)); }, "softmax", "x needs 80 elements");
  expect([&] { ops::softmax(ops::as_rows(d, 4, 16), y); }, "softmax", "x has dtype f64");
  DeviceBuffer<kaio::half> h(64);
  expect([&] { ops::softmax(x, ops::as_rows(h, 4, 16)); }, "softmax", "y has dtype f16, x has f32");
}

TEST_CASE("row tensors from DevicePtr, typed pointers and raw addresses", "[gpu][ops][rows]") {
  Layout l{3, 40, 0, 0, "dense"};
  Mat<float> x = random_mat<float>(l, -2, 2);
  DeviceBuffer<float> a(120), b(120), c(120);
  for (auto* buf : {&a, &b, &c}) buf->fill_bytes(0xFF);
  ops::softmax(ops::as_rows(x.dev.ptr(), 3, 40), ops::as_rows(a.ptr(), 3, 40));
  ops::softmax(ops::as_rows(reinterpret_cast<const float*>(x.dev.device_address()), 3, 40),
               ops::as_rows(reinterpret_cast<float*>(b.device_address()), 3, 40));
  ops::softmax(ops::as_rows(x.dev.device_address(), ir::Scalar::F32, 3, 40),
               ops::as_rows(c.device_address(), ir::Scalar::F32, 3, 40));
  std::vector<float> ha = a.to_host(), hb = b.to_host(), hc = c.to_host();
  CHECK(ha == hb);
  CHECK(ha == hc);
  double s = 0;
  for (int i = 0; i < 40; ++i) s += ha[i];
  CHECK(std::fabs(s - 1.0) < 1e-5);
}

TEST_CASE("row ops from several threads, each on its own stream, split rows included", "[gpu][ops][rows][concurrency]") {
  // One long row (split over blocks through the per-stream workspace) and a short matrix;
  // every thread's results must equal the single-threaded ones.
  Layout split{1, 20000, 0, 0, "split"}, small{5, 300, 0, 0, "small"};
  Mat<float> xs = random_mat<float>(split, -4, 4), xm = random_mat<float>(small, -4, 4);
  Mat<float> ys = poisoned_mat<float>(split), ym = poisoned_mat<float>(small);
  ops::softmax(xs.view(), ys.view());
  ops::log_softmax(xm.view(), ym.view());
  const std::vector<float> ref_s = ys.dev.to_host(), ref_m = ym.dev.to_host();
  std::vector<size_t> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Stream s;
      Mat<float> a = poisoned_mat<float>(split), m = poisoned_mat<float>(small);
      for (int i = 0; i < 3; ++i) {
        ops::softmax(xs.view(), a.view(), &s);
        ops::log_softmax(xm.view(), m.view(), &s);
      }
      s.synchronize();
      bad[t] += a.dev.to_host() != ref_s;
      bad[t] += m.dev.to_host() != ref_m;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(bad[t] == 0);
}
