// Host-side storage types for the 8-bit floats of FP8 tensor-core math (the OCP 8-bit
// formats, as CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2), so that applications need no CUDA
// header to fill or read FP8 buffers:
//
//   e4m3  1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities: S.1111.111 (0x7f,
//         0xff) is NaN, the largest finite value is 448 (0x7e), the smallest subnormal 2^-9.
//   e5m2  1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like: S.11111.00 is
//         infinity, S.11111.{01,10,11} NaN; largest finite 57344 (0x7b), smallest
//         subnormal 2^-16.
//
// Every fp8 value is exact in f16 (and so in bf16, f32, f64). Conversions to fp8 round to
// nearest even. The host types' constructors: e4m3 saturates to +-448 (infinities too),
// e5m2 overflows to infinity (from +-61440, the midpoint above 57344). NaN becomes 0x7f
// in both, whatever its sign, as the GPU's cvt gives it.
//
// The GPU's conversion (cvt.rn.satfinite.{e4m3x2,e5m2x2}, the only form PTX has) saturates
// both formats to their largest finite value, infinities included: `satfinite = true`
// below, which is what kernels and the interpreter do.
#pragma once

#include <cstdint>

namespace kaio {

namespace detail {
// x rounded to nearest even in e4m3 (e5m2 when `e5m2`); beyond the largest finite value:
// that value with x's sign when `satfinite` (or always for e4m3), else infinity (e5m2).
uint8_t f64_to_fp8_bits(double x, bool e5m2, bool satfinite);
inline uint8_t f32_to_fp8_bits(float x, bool e5m2, bool satfinite) { return f64_to_fp8_bits(x, e5m2, satfinite); }
// The f16 bits of an fp8 value (exact). NaN gives 0x7fff whatever its sign, as the GPU's
// cvt.rn.f16x2.{e4m3x2,e5m2x2} does.
uint16_t fp8_bits_to_f16_bits(uint8_t b, bool e5m2);
float fp8_bits_to_f32(uint8_t b, bool e5m2);  // exact (NaN: a quiet NaN)
}  // namespace detail

struct fp8_e4m3 {
  uint8_t bits = 0;
  fp8_e4m3() = default;
  explicit fp8_e4m3(float f) : bits(detail::f32_to_fp8_bits(f, false, true)) {}
  static fp8_e4m3 from_bits(uint8_t b) {
    fp8_e4m3 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return detail::fp8_bits_to_f32(bits, false); }
  bool operator==(const fp8_e4m3&) const = default;  // bitwise
};

struct fp8_e5m2 {
  uint8_t bits = 0;
  fp8_e5m2() = default;
  explicit fp8_e5m2(float f) : bits(detail::f32_to_fp8_bits(f, true, false)) {}
  static fp8_e5m2 from_bits(uint8_t b) {
    fp8_e5m2 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return detail::fp8_bits_to_f32(bits, true); }
  bool operator==(const fp8_e5m2&) const = default;  // bitwise
};

}  // namespace kaio
