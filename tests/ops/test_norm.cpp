// rms_norm, layer_norm and add_rms_norm against a float64 reference, every dtype at the
// standard row layouts (tests/ops/row_support.h), outputs poisoned first and pads checked
// untouched. [gpu]: a device, or KAIO_INTERPRET=1.
#include <catch2/catch.hpp>

#include <cmath>

#include "kaio/ops/norm.h"
#include "kaio/ops/softmax.h"
#include "../support.h"
#include "row_support.h"

using namespace kaio;
using namespace kaio::test::rows;
using Catch::Matchers::Contains;

namespace {

enum class Kind { Rms, Layer, AddRms };

// Tolerances: the dtype's rounding of the result (unit<T>() relative; f16 subnormals
// tiny<T>() absolute) plus the f32 computation, 1e-5 relative to the magnitude of the
// terms ((|x| + |mean|) * rstd * |w| + |b| for layer_norm, |x * rstd * w| for the rms norms): sums of up to 70000 terms in f32, rsqrt within
// 2^-22.9. add_rms_norm's stored sum is exact: x + residual rounded once to the dtype.
template <class T>
void check_norm(Kind kind, const Layout& l) {
  const char* name = kind == Kind::Rms ? "rms_norm" : kind == Kind::Layer ? "layer_norm" : "add_rms_norm";
  INFO(name << " " << str(l));
  // layer_norm gets an offset mean, which a naive one-pass variance would lose.
  Mat<T> x = kind == Kind::Layer ? random_mat<T>(l, 6, 10) : random_mat<T>(l, -4, 4);
  Mat<T> res = random_mat<T>(l, -4, 4);
  Mat<T> w = random_vector<T>(l.cols, -2, 2), bias = random_vector<T>(l.cols, -1, 1);
  Mat<T> y = poisoned_mat<T>(l), sum = poisoned_mat<T>(l);
  const float eps = 1e-5f;
  if (kind == Kind::Rms) ops::rms_norm(x.view(), ops::as_vector(w.dev), y.view(), eps);
  else if (kind == Kind::Layer) ops::layer_norm(x.view(), ops::as_vector(w.dev), ops::as_vector(bias.dev), y.view(), eps);
  else ops::add_rms_norm(x.view(), res.view(), ops::as_vector(w.dev), sum.view(), y.view(), eps);
  CHECK(fetch(y) == 0);
  if (kind == Kind::AddRms) CHECK(fetch(sum) == 0);
  size_t bad = 0, bad_sum = 0;
  double worst = 0;
  std::vector<double> v(l.cols);
  for (uint32_t r = 0; r < l.rows; ++r) {
    for (uint32_t c = 0; c < l.cols; ++c) {
      v[c] = x.at(r, c);
      if (kind == Kind::AddRms) {
        v[c] = to_d(T(float(v[c] + res.at(r, c))));  // f32 sum of two T values is exact here; one rounding
        bad_sum += !(sum.at(r, c) == v[c]);
      }
    }
    double mean = 0, q = 0;
    for (double e : v) mean += e;
    mean /= l.cols;
    for (double e : v) q += kind == Kind::Layer ? (e - mean) * (e - mean) : e * e;
    double rstd = 1.0 / std::sqrt(q / l.cols + eps);
    for (uint32_t c = 0; c < l.cols; ++c) {
      double wc = to_d(w.host[c]), bc = to_d(bias.host[c]);
      double centred = kind == Kind::Layer ? v[c] - mean : v[c];
      double ref = centred * rstd * wc + (kind == Kind::Layer ? bc : 0.0);
      // layer_norm: x - mean cancels, so its f32 error scales with |x| + |mean|, not |x - mean|.
      double terms = kind == Kind::Layer ? (std::fabs(v[c]) + std::fabs(mean)) * rstd * std::fabs(wc) + std::fabs(bc)
                                         : std::fabs(centred * rstd * wc);
      double bound = unit<T>() * std::fabs(ref) + 1e-5 * (terms + 1e-3) + tiny<T>();
      double err = std::fabs(y.at(r, c) - ref);
      worst = std::max(worst, err / bound);
      if (!(err <= bound) && bad++ < 3) UNSCOPED_INFO("row " << r << " col " << c << ": got " << y.at(r, c) << ", want " << ref);
    }
  }
  INFO("worst error / bound = " << worst);
  CHECK(bad == 0);
  CHECK(bad_sum == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("rms_norm, layer_norm, add_rms_norm match float64 at every layout", "[gpu][ops][rows]", float,
                   kaio::half, kaio::bfloat16) {
  for (const Layout& l : layouts(with_long_rows<TestType>())) {
    ScopedSms sms(sm_count_for(l));
    for (Kind k : {Kind::Rms, Kind::Layer, Kind::AddRms}) check_norm<TestType>(k, l);
  }
}

TEST_CASE("add_rms_norm in place", "[gpu][ops][rows]") {
  {  // sum written over the residual (the usual in-place form), y over x
    Layout l{5, 200, 0, 0, "in place"};
    Mat<float> x = random_mat<float>(l, -2, 2), res = random_mat<float>(l, -2, 2);
    Mat<float> w = random_vector<float>(l.cols, -1, 1);
    std::vector<float> x0 = x.host, r0 = res.host;
    ops::add_rms_norm(x.view(), res.view(), ops::as_vector(w.dev), res.view(), x.view(), 1e-6f);
    x.host = x.dev.to_host();
    res.host = res.dev.to_host();
    for (uint32_t r = 0; r < l.rows; ++r) {
      double q = 0;
      for (uint32_t c = 0; c < l.cols; ++c) {
        float s = x0[l.at(r, c)] + r0[l.at(r, c)];
        CHECK(res.host[l.at(r, c)] == s);
        q += double(s) * s;
      }
      double rstd = 1.0 / std::sqrt(q / l.cols + 1e-6);
      for (uint32_t c = 0; c < l.cols; ++c) {
        double ref = double(res.host[l.at(r, c)]) * rstd * w.host[c];
        CHECK(std::fabs(x.host[l.at(r, c)] - ref) <= 1e-5 * (std::fabs(ref) + 1e-3));
      }
    }
  }
}

TEST_CASE("norms at 8192x8192 and the decode shapes on a device", "[gpu][ops][rows][large]") {
  if (jit::interpret_mode()) return;
  for (Layout l : {Layout{8192, 8192, 0, 0, "8192x8192"}, Layout{1, 4096, 0, 0, "decode 1"},
                   Layout{16, 4096, 0, 0, "decode 16"}, Layout{128, 4096, 0, 0, "decode 128"}}) {
    for (Kind k : {Kind::Rms, Kind::Layer, Kind::AddRms}) {
      check_norm<kaio::bfloat16>(k, l);
      check_norm<float>(k, l);
    }
  }
}

TEST_CASE("norms reject bad arguments before launching, naming op and argument", "[gpu][ops][rows]") {
  DeviceBuffer<float> a(64), b(64), w(16), w2(15);
  DeviceBuffer<kaio::half> wh(16);
  auto x = ops::as_rows(a, 4, 16), y = ops::as_rows(b, 4, 16);
  auto expect = [](auto f, const char* op, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == op);
    CHECK_THAT(e.what(), Contains(text));
  };
  expect([&] { ops::rms_norm(x, ops::as_vector(w2), y, 1e-6f); }, "rms_norm", "w must be a vector of 16 elements");
  expect([&] { ops::rms_norm(x, ops::as_vector(wh), y, 1e-6f); }, "rms_norm", "w has dtype f16, x has f32");
  expect([&] { ops::rms_norm(x, ops::as_vector(w), y, -1.0f); }, "rms_norm", "eps must be finite and non-negative");
  expect([&] { ops::layer_norm(x, ops::as_vector(w), ops::as_vector(uint64_t(0), ir::Scalar::F32, 16), y, 1e-6f); },
         "layer_norm", "b is a null pointer");
  expect([&] { ops::add_rms_norm(x, ops::as_rows(b, 2, 16), ops::as_vector(w), y, y, 1e-6f); }, "add_rms_norm",
         "residual is 2 x 16, x is 4 x 16");
  expect([&] { ops::add_rms_norm(x, y, ops::as_vector(w), ops::as_rows(b, 4, 16, 4), y, 1e-6f); }, "add_rms_norm",
         "sum has a row stride of 4");
  expect([&] { ops::layer_norm(ops::as_rows(a, 4, 0), ops::as_vector(w), ops::as_vector(w), y, 1e-6f); }, "layer_norm",
         "x has zero size");
}

TEST_CASE("norms: a second call of a shape runs no builder", "[gpu][ops][rows]") {
  Layout l{4, 100, 0, 0, "dense"};
  Mat<float> x = random_mat<float>(l, -1, 1), y = poisoned_mat<float>(l), w = random_vector<float>(100, -1, 1);
  ops::rms_norm(x.view(), ops::as_vector(w.dev), y.view(), 1e-6f);
  uint64_t before = ops::rms_norm_family().builds();
  for (int i = 0; i < 5; ++i) ops::rms_norm(x.view(), ops::as_vector(w.dev), y.view(), 1e-6f);
  CHECK(ops::rms_norm_family().builds() == before);
}

TEST_CASE("every row strategy gives the same result (plan override)", "[gpu][ops][rows]") {
  // 3 rows of 2048 f32 (512 float4 accesses): registers with 128 x 4, 256 x 2, 512 x 1,
  // the first and last as persistent teams too (one multiprocessor: two 512-thread blocks,
  // one of which walks two rows), staged, streamed, and split over 3 blocks; all must match
  // the default plan's output.
  ScopedSms sms(1);
  Layout l{3, 2048, 0, 0, "dense"};
  Mat<float> x = random_mat<float>(l, -3, 3), r = random_mat<float>(l, -3, 3);
  Mat<float> w = random_vector<float>(l.cols, -1, 1), b = random_vector<float>(l.cols, -1, 1);
  std::vector<ops::RowPlan> plans = {{4, 128, 4, 1, false},       {4, 256, 2, 1, false}, {4, 512, 1, 1, false},
                                     {4, 128, 4, 1, false, true}, {4, 512, 1, 1, false, true},
                                     {4, 1024, 0, 1, true},       {4, 1024, 0, 1, false}, {4, 1024, 0, 3, false}};
  for (int op = 0; op < 4; ++op) {
    auto run = [&](const ops::RowPlan* p) {
      Mat<float> y = poisoned_mat<float>(l), s = poisoned_mat<float>(l);
      ops::detail::set_plan_override(p);
      if (op == 0) ops::softmax(x.view(), y.view());
      if (op == 1) ops::rms_norm(x.view(), ops::as_vector(w.dev), y.view(), 1e-6f);
      if (op == 2) ops::layer_norm(x.view(), ops::as_vector(w.dev), ops::as_vector(b.dev), y.view(), 1e-6f);
      if (op == 3) ops::add_rms_norm(x.view(), r.view(), ops::as_vector(w.dev), s.view(), y.view(), 1e-6f);
      ops::detail::set_plan_override(nullptr);
      return y.dev.to_host();
    };
    std::vector<float> ref = run(nullptr);
    for (const ops::RowPlan& p : plans) {
      INFO("op " << op << ": " << ops::describe(p));
      std::vector<float> got = run(&p);
      size_t bad = 0;
      // 1e-5 of the terms' magnitude (outputs are O(1)): sums in another order, layer_norm's
      // shifted one-pass variance on the streamed paths.
      for (size_t i = 0; i < ref.size(); ++i) bad += !(std::fabs(got[i] - ref[i]) <= 1e-5 * (std::fabs(ref[i]) + 1));
      CHECK(bad == 0);
    }
  }
}
