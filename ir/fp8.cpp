#include "kaio/ir/fp8.h"

#include <algorithm>
#include <cmath>

#include "kaio/ir/half.h"

namespace kaio::detail {

uint8_t f64_to_fp8_bits(double x, bool e5m2, bool satfinite) {
  const int m = e5m2 ? 2 : 3;  // mantissa bits
  const int emin = e5m2 ? -14 : -6;  // the exponent of the smallest normal value (1 - bias)
  const double max_finite = e5m2 ? 57344.0 : 448.0;
  const uint8_t overflow = satfinite || !e5m2 ? (e5m2 ? 0x7b : 0x7e) : 0x7c;  // max finite, or e5m2 infinity
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;
  // a's binade [2^exp, 2^(exp+1)) (the subnormal range counts as the binade of 2^emin):
  // y = a / 2^(exp - m) is exact (a power-of-two scaling) and below 2^(m+1); its nearest
  // integer, ties to even, is the rounded significand in units of the binade's quantum.
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1); 0 gives e = 0
  const int exp = std::max(e - 1, emin);
  const double y = std::ldexp(a, m - exp);
  double r = std::floor(y);
  const double frac = y - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) == 1.0)) r += 1.0;
  if (std::ldexp(r, exp - m) > max_finite) return sign | overflow;
  // The codes are monotone in the value: (exp - emin) binades of 2^m codes above the
  // subnormals, then r (r = 2^(m+1), a carry into the next binade, lands on its first code).
  return static_cast<uint8_t>(sign | ((exp - emin) * (1 << m) + static_cast<int>(r)));
}

uint16_t fp8_bits_to_f16_bits(uint8_t b, bool e5m2) {
  if (e5m2) {  // e5m2 is the top byte of an f16
    const uint16_t h = static_cast<uint16_t>(b << 8);
    return (h & 0x7fffu) > 0x7c00u ? 0x7fffu : h;
  }
  if ((b & 0x7fu) == 0x7fu) return 0x7fffu;
  const int E = (b >> 3) & 0xf, M = b & 7;
  const double v = E == 0 ? std::ldexp(M, -9) : std::ldexp(8 + M, E - 10);
  return static_cast<uint16_t>((b & 0x80u ? 0x8000u : 0u) | f32_to_f16_bits(static_cast<float>(v)));
}

float fp8_bits_to_f32(uint8_t b, bool e5m2) { return f16_bits_to_f32(fp8_bits_to_f16_bits(b, e5m2)); }

}  // namespace kaio::detail
