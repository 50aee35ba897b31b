// Host-side storage types for f16 and bf16 elements, so that applications need no CUDA
// header to fill or read half-precision buffers. Conversions round to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

namespace kaio {

namespace detail {
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_f16_bits(float f);  // round to nearest even, overflow to inf, NaN kept
float f16_bits_to_f32(uint16_t h);
}  // namespace detail

struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f) : bits(detail::f32_to_f16_bits(f)) {}
  static half from_bits(uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return detail::f16_bits_to_f32(bits); }
  bool operator==(const half&) const = default;
};

struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    uint32_t u = detail::f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  static bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return detail::bits_f32(uint32_t(bits) << 16); }
  bool operator==(const bfloat16&) const = default;
};

// Two halves packed in 32 bits, element 0 (lo) at the lower address: the element type of
// f16x2 / bf16x2 buffers.
struct half2 {
  half lo, hi;
  bool operator==(const half2&) const = default;
};
struct bfloat162 {
  bfloat16 lo, hi;
  bool operator==(const bfloat162&) const = default;
};

}  // namespace kaio
