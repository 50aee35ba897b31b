// Host helpers of the quantized matmuls: int8 and int4 quantisation, the int4 packing the
// kernels read, and the host decoder the tests compare the kernels' dequantisation with.
#include <algorithm>
#include <cmath>
#include <string>

#include "kaio/ir/error.h"
#include "kaio/ir/half.h"
#include "kaio/ops/qmatmul.h"

namespace kaio::ops {

namespace {

uint16_t to_bits(float f, ir::Scalar t) { return t == ir::Scalar::BF16 ? bfloat16(f).bits : half(f).bits; }
float from_bits(uint16_t b, ir::Scalar t) {
  return t == ir::Scalar::BF16 ? float(bfloat16::from_bits(b)) : float(half::from_bits(b));
}

}  // namespace

Int8Quantized quantize_int8(std::span<const float> x, uint32_t rows, uint32_t cols) {
  if (x.size() != size_t(rows) * cols)
    throw UsageError("", "quantize_int8", "x: " + std::to_string(x.size()) + " values for " + std::to_string(rows) + " x " +
                                              std::to_string(cols));
  Int8Quantized out;
  out.q.resize(x.size());
  out.scale.resize(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    float mx = 0;
    for (uint32_t c = 0; c < cols; ++c) mx = std::max(mx, std::fabs(x[size_t(r) * cols + c]));
    const float s = mx > 0 ? mx / 127.0f : 1.0f;
    out.scale[r] = s;
    for (uint32_t c = 0; c < cols; ++c)
      out.q[size_t(r) * cols + c] = int8_t(std::clamp(std::lrint(x[size_t(r) * cols + c] / s), -127L, 127L));
  }
  return out;
}

std::vector<uint32_t> pack_int4(std::span<const uint8_t> v, uint32_t k, uint32_t n) {
  if (k % 8 || v.size() != size_t(k) * n)
    throw UsageError("", "pack_int4", "v: k x n values with k a multiple of 8, got " + std::to_string(v.size()) + " for k " +
                                          std::to_string(k) + ", n " + std::to_string(n));
  std::vector<uint32_t> q(size_t(k / 8) * n, 0);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t j = 0; j < n; ++j) {
      const uint8_t x = v[size_t(r) * n + j];
      if (x > 15) throw UsageError("", "pack_int4", "v: values 0..15, got " + std::to_string(x));
      q[size_t(r / 8) * n + j] |= uint32_t(x) << (4 * kInt4Nibble[r % 8]);
    }
  return q;
}

uint8_t int4_at(std::span<const uint32_t> q, uint32_t n, uint32_t r, uint32_t j) {
  return uint8_t((q[size_t(r / 8) * n + j] >> (4 * kInt4Nibble[r % 8])) & 15u);
}

Int4Host quantize_int4(std::span<const float> w, uint32_t k, uint32_t n, uint32_t group, ir::Scalar dtype, bool zero_points) {
  const char* op = "quantize_int4";
  if (group != 32 && group != 64 && group != 128) throw UsageError("", op, "group: 32, 64 or 128, got " + std::to_string(group));
  if (k == 0 || k % group) throw UsageError("", op, "k: a positive multiple of the group (" + std::to_string(group) + "), got " + std::to_string(k));
  if (n == 0 || n % 8) throw UsageError("", op, "n: a positive multiple of 8, got " + std::to_string(n));
  if (dtype != ir::Scalar::F16 && dtype != ir::Scalar::BF16) throw UsageError("", op, "dtype: f16 or bf16");
  if (w.size() != size_t(k) * n) throw UsageError("", op, "w: k x n values");
  Int4Host out;
  out.k = k, out.n = n, out.group = group, out.dtype = dtype;
  const uint32_t groups = k / group;
  out.scales.resize(size_t(groups) * n);
  if (zero_points) out.zeros.resize(size_t(groups) * n);
  std::vector<uint8_t> v(size_t(k) * n);
  for (uint32_t g = 0; g < groups; ++g)
    for (uint32_t j = 0; j < n; ++j) {
      float lo = 0, hi = 0, mx = 0;
      for (uint32_t r = g * group; r < (g + 1) * group; ++r) {
        const float x = w[size_t(r) * n + j];
        lo = std::min(lo, x), hi = std::max(hi, x), mx = std::max(mx, std::fabs(x));
      }
      float s = zero_points ? (hi - lo) / 15.0f : mx / 7.5f;
      if (!(s > 0)) s = 1.0f;
      const uint16_t sb = to_bits(s, dtype);
      const float sq = from_bits(sb, dtype);  // the scale as stored
      out.scales[size_t(g) * n + j] = sb;
      int z = 8;
      if (zero_points) {
        z = int(std::clamp(std::lrint(-lo / sq), 0L, 15L));
        out.zeros[size_t(g) * n + j] = uint8_t(z);
      }
      for (uint32_t r = g * group; r < (g + 1) * group; ++r)
        v[size_t(r) * n + j] = uint8_t(std::clamp(std::lrint(w[size_t(r) * n + j] / sq) + z, 0L, 15L));
    }
  out.q = pack_int4(v, k, n);
  return out;
}

std::vector<float> dequantize_int4(const Int4Host& w, bool round) {
  std::vector<float> out(size_t(w.k) * w.n);
  for (uint32_t r = 0; r < w.k; ++r)
    for (uint32_t j = 0; j < w.n; ++j) {
      const size_t gi = size_t(r / w.group) * w.n + j;
      const int z = w.zeros.empty() ? 8 : w.zeros[gi];
      const float s = from_bits(w.scales[gi], w.dtype);
      // (v - z) * s: the product of a 5-bit integer and a 16-bit float is exact in f32, so
      // one rounding to the 16-bit type, as the kernels' pair mul does.
      const float v = float(int(int4_at(w.q, w.n, r, j)) - z) * s;
      out[size_t(r) * w.n + j] = round ? from_bits(to_bits(v, w.dtype), w.dtype) : v;
    }
  return out;
}

}  // namespace kaio::ops
