// Helpers of the op library's tests: random inputs in each dtype, unit roundoffs, device
// arrays that start one element past a 16-byte boundary (misaligned), poisoning.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "kaio/kaio.h"
#include "../support.h"

namespace kaio::test::ops {

inline std::mt19937& rng() {
  return ::kaio::test::rng();
}

template <class T>
std::vector<T> random_vec(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(rng()));
  return v;
}

template <class T>
double as_double(T v) { return static_cast<double>(static_cast<float>(v)); }

// Unit roundoff of the storage type (half an ulp at 1).
template <class T>
double unit() {
  if constexpr (std::is_same_v<T, kaio::half>) return 1.0 / (1 << 11);
  else if constexpr (std::is_same_v<T, kaio::bfloat16>) return 1.0 / (1 << 8);
  else return 1.0 / (1 << 24);
}
inline constexpr double kU32 = 1.0 / (1 << 24);  // f32's, for the work done in f32

// Absolute rounding error near zero: f16 results below 2^-14 round to its subnormal
// spacing 2^-24; bf16 and f32 have f32's range.
template <class T>
double tiny() { return std::is_same_v<T, kaio::half> ? 1.0 / (1 << 24) : 1e-37; }

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, kaio::half>) return "f16";
  else if constexpr (std::is_same_v<T, kaio::bfloat16>) return "bf16";
  else return "f32";
}

// n elements of device memory at an offset of `offset` elements into a fresh allocation
// (offset 1: not 16-byte aligned, as a slice of a larger tensor may be).
template <class T>
struct Slice {
  DeviceBuffer<T> buf;
  size_t offset, n;
  // One guard element after the slice (and the `offset` before it) catch stray writes.
  Slice(size_t n_, size_t offset_) : buf(n_ + offset_ + 1), offset(offset_), n(n_) { buf.fill_bytes(0xFF); }
  uint64_t address() const { return buf.device_address() + offset * sizeof(T); }
  void upload(const std::vector<T>& v) {
    std::vector<T> all = buf.to_host();
    for (size_t i = 0; i < v.size(); ++i) all[offset + i] = v[i];
    buf.upload(all);
  }
  std::vector<T> download() const {
    std::vector<T> all = buf.to_host();
    return std::vector<T>(all.begin() + static_cast<long>(offset), all.begin() + static_cast<long>(offset + n));
  }
  void poison() { buf.fill_bytes(0xFF); }  // NaN in every float type
  // The guard elements still hold the poison bytes.
  bool guards_intact() const {
    std::vector<T> all = buf.to_host();
    auto poisoned = [](const T& v) {
      const unsigned char* p = reinterpret_cast<const unsigned char*>(&v);
      for (size_t i = 0; i < sizeof(T); ++i)
        if (p[i] != 0xFF) return false;
      return true;
    };
    for (size_t i = 0; i < offset; ++i)
      if (!poisoned(all[i])) return false;
    return poisoned(all[offset + n]);
  }
};

// True on a real device: the large shapes (8192 x 8192, decode) run only there.
inline bool on_device() { return !jit::interpret_mode(); }

}  // namespace kaio::test::ops
