// Shared by the fp8 tests: an independent reference of the two 8-bit float formats (decode
// by the textbook formula, encode by a nearest-value search over every finite code, ties to
// the even code), the inputs worth converting (every code, every midpoint between
// neighbours and the floats next to it, the overflow thresholds, specials, random values
// over the whole range) and one-conversion kernels.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kaio/kaio.h"
#include "../support.h"

namespace kaio::test::fp8 {

struct Format {
  bool e5m2;
  int mant, bias;
  uint8_t max_code;  // the largest finite positive code
};
inline constexpr Format kE4M3{false, 3, 7, 0x7e};
inline constexpr Format kE5M2{true, 2, 15, 0x7b};

inline bool is_nan(const Format& f, uint8_t c) {
  const uint8_t a = c & 0x7f;
  return f.e5m2 ? a > 0x7c : a == 0x7f;
}

// The value of a code: (-1)^s 2^(E - bias) (1 + M / 2^mant), subnormals 2^(1 - bias) M / 2^mant.
inline double value(const Format& f, uint8_t c) {
  const int E = (c & 0x7f) >> f.mant, M = c & ((1 << f.mant) - 1);
  const double s = (c & 0x80) ? -1.0 : 1.0;
  if (is_nan(f, c)) return std::numeric_limits<double>::quiet_NaN();
  if (f.e5m2 && (c & 0x7f) == 0x7c) return s * std::numeric_limits<double>::infinity();
  if (E == 0) return s * std::pow(2.0, 1 - f.bias) * (M / std::pow(2.0, f.mant));
  return s * std::pow(2.0, E - f.bias) * (1.0 + M / std::pow(2.0, f.mant));
}

// x to the nearest code, ties to the even code. Beyond the largest finite value:
// satfinite (the GPU's cvt; e4m3 always) gives it, else (e5m2) infinity once x reaches
// the midpoint above it. NaN: 0x7f.
inline uint8_t encode(const Format& f, double x, bool satfinite) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x), max = value(f, f.max_code), ulp = max - value(f, f.max_code - 1);
  if (a > max) {
    if (satfinite || !f.e5m2) return sign | f.max_code;
    return sign | (a >= max + ulp / 2 ? 0x7c : f.max_code);  // the max code is odd: the tie goes up
  }
  uint8_t best = 0;
  for (int c = 1; c <= f.max_code; ++c) {
    const double d = std::fabs(value(f, uint8_t(c)) - a), db = std::fabs(value(f, best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = uint8_t(c);
  }
  return sign | best;
}

// Inputs for conversions to fp8: every finite value of the format, each midpoint between
// neighbours and the floats next to it, the overflow region, specials, and random floats.
inline std::vector<float> inputs(const Format& f, size_t random = 4000) {
  std::vector<float> v;
  for (int c = 0; c <= f.max_code; ++c) {
    const float x = float(value(f, uint8_t(c)));
    v.insert(v.end(), {x, -x});
    if (c == f.max_code) continue;
    const float mid = float((value(f, uint8_t(c)) + value(f, uint8_t(c + 1))) / 2);  // exact in f32
    for (float y : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) v.insert(v.end(), {y, -y});
  }
  const double max = value(f, f.max_code), ulp = max - value(f, f.max_code - 1);
  for (double y : {max + ulp / 2, max + ulp / 4, max + ulp, 2 * max, 1e30, double(std::numeric_limits<float>::max())})
    for (float z : {float(y), std::nextafter(float(y), 0.0f), std::nextafter(float(y), 1e38f)}) v.insert(v.end(), {z, -z});
  const float inf = std::numeric_limits<float>::infinity();
  v.insert(v.end(), {inf, -inf, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                     std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min(), 0.0f, -0.0f});
  std::mt19937 rng(::kaio::test::case_seed());
  std::uniform_real_distribution<float> e(-20.0f, 18.0f);
  for (size_t i = 0; i < random; ++i) v.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(e(rng)));
  return v;
}

// out[i] = cast<To>(x[i]) for i < n.
inline ir::Kernel cast_kernel(ir::Scalar from, ir::Scalar to) {
  ir::KernelBuilder b(std::string("fp8_cast_") + ir::scalar_name(from) + "_" + ir::scalar_name(to));
  auto x = b.param("x", ir::Type::pointer(from, true));
  auto out = b.param("out", ir::Type::pointer(to, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value v = x[i];
    out[i] = ir::cast(v, ir::Type::scalar(to));
  });
  return b.build();
}

}  // namespace kaio::test::fp8
