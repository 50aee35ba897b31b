// The row ops' cases of bench/ops (bench/ops_case.h): softmax, log_softmax, rms_norm,
// layer_norm, add_rms_norm and rope at one shape and dtype, with their inputs allocated
// and filled here, outside the timed loop. Bytes count each input read once and each
// output written once (weights and cos/sin tables included).
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/norm.h"
#include "kaio/ops/rope.h"
#include "kaio/ops/softmax.h"
#include "ops_case.h"

namespace kaio::bench {

namespace {

// Deterministic values in [lo, hi): a cheap generator, 64M elements take well under a second.
template <class T>
std::vector<T> values(size_t n, float lo, float hi, uint64_t seed) {
  std::vector<T> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = T(lo + (hi - lo) * float(s >> 40) / float(1u << 24));
  }
  return v;
}

template <class T>
std::vector<OpCase> cases(uint32_t rows, uint32_t cols) {
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const double n = double(rows) * cols, es = sizeof(T);
  // Buffers shared by the cases (each case holds them alive).
  auto x = std::make_shared<DeviceBuffer<T>>(values<T>(size_t(rows) * cols, -4, 4, 1));
  auto r = std::make_shared<DeviceBuffer<T>>(values<T>(size_t(rows) * cols, -4, 4, 2));
  auto y = std::make_shared<DeviceBuffer<T>>(size_t(rows) * cols);
  auto s = std::make_shared<DeviceBuffer<T>>(size_t(rows) * cols);
  auto w = std::make_shared<DeviceBuffer<T>>(values<T>(cols, -2, 2, 3));
  auto b = std::make_shared<DeviceBuffer<T>>(values<T>(cols, -1, 1, 4));
  const ops::RowTensor X = ops::as_rows(*x, rows, cols), R = ops::as_rows(*r, rows, cols), Y = ops::as_rows(*y, rows, cols),
                       S = ops::as_rows(*s, rows, cols), W = ops::as_vector(*w), B = ops::as_vector(*b);
  std::vector<OpCase> out;
  out.push_back({"softmax", dt, rows, cols, 2 * n * es, [=](const jit::Stream* st) {
                   (void)x, (void)y;
                   ops::softmax(X, Y, st);
                 }});
  out.push_back({"log_softmax", dt, rows, cols, 2 * n * es, [=](const jit::Stream* st) {
                   (void)x, (void)y;
                   ops::log_softmax(X, Y, st);
                 }});
  out.push_back({"rms_norm", dt, rows, cols, (2 * n + cols) * es, [=](const jit::Stream* st) {
                   (void)x, (void)y, (void)w;
                   ops::rms_norm(X, W, Y, 1e-6f, st);
                 }});
  out.push_back({"layer_norm", dt, rows, cols, (2 * n + 2.0 * cols) * es, [=](const jit::Stream* st) {
                   (void)x, (void)y, (void)w, (void)b;
                   ops::layer_norm(X, W, B, Y, 1e-5f, st);
                 }});
  out.push_back({"add_rms_norm", dt, rows, cols, (4 * n + cols) * es, [=](const jit::Stream* st) {
                   (void)x, (void)r, (void)s, (void)y, (void)w;
                   ops::add_rms_norm(X, R, W, S, Y, 1e-6f, st);
                 }});
  // rope: heads of 128 (NeoX), token t at position t, f32 cos/sin tables of rows x 64
  // (what PyTorch's row reads too).
  if (cols % 128 == 0) {
    std::vector<float> c(size_t(rows) * 64), sn(size_t(rows) * 64);
    for (uint32_t p = 0; p < rows; ++p)
      for (uint32_t i = 0; i < 64; ++i) {
        double a = p * std::pow(10000.0, -2.0 * i / 128);
        c[size_t(p) * 64 + i] = float(std::cos(a));
        sn[size_t(p) * 64 + i] = float(std::sin(a));
      }
    auto ct = std::make_shared<DeviceBuffer<float>>(c), stab = std::make_shared<DeviceBuffer<float>>(sn);
    const ops::RowTensor C = ops::as_rows(*ct, rows, 64), SN = ops::as_rows(*stab, rows, 64);
    const ops::Rope rp{.style = ops::RopeStyle::NeoX, .heads = cols / 128, .head_dim = 128};
    out.push_back({"rope", dt, rows, cols, 2 * n * es + 2.0 * rows * 64 * 4, [=](const jit::Stream* st) {
                     (void)x, (void)y, (void)ct, (void)stab;
                     ops::rope(X, Y, C, SN, rp, st);
                   }});
  }
  return out;
}

}  // namespace

std::vector<OpCase> row_op_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols) {
  switch (dtype) {
    case ir::Scalar::F32: return cases<float>(rows, cols);
    case ir::Scalar::F16: return cases<kaio::half>(rows, cols);
    case ir::Scalar::BF16: return cases<kaio::bfloat16>(rows, cols);
    default: return {};
  }
}

}  // namespace kaio::bench
