// Helpers of the row-op tests: matrices with a layout (rows, cols, row stride, offset from
// the buffer start), random inputs, poisoned outputs, float64 views, the standard shapes.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/rows.h"
#include "../support.h"

namespace kaio::test::rows {

inline std::mt19937& rng() {
  return ::kaio::test::rng();
}

struct Layout {
  uint32_t rows, cols;
  uint64_t stride = 0;  // 0: dense
  uint64_t offset = 0;  // elements between the buffer start and element (0, 0)
  std::string what;     // "dense", "strided", "misaligned", ...
  uint64_t ld() const { return stride ? stride : cols; }
  size_t size() const { return offset + (rows - 1) * ld() + cols; }
  size_t at(uint32_t r, uint32_t c) const { return offset + r * ld() + c; }
};

inline std::string str(const Layout& l) {
  return std::to_string(l.rows) + "x" + std::to_string(l.cols) + " stride " + std::to_string(l.ld()) + " offset " +
         std::to_string(l.offset) + " (" + l.what + ")";
}

// The shapes every row op is tested at: 1x1, 3x17, 67x1025, columns not a multiple of 4,
// vector-aligned rows, misaligned pointers (one element in), strided rows (vector and
// scalar), and rows long enough to be staged in shared memory or streamed (`long_rows`;
// the split strategy needs few rows and the device's multiprocessor count, the staged and
// streamed ones several rows and a count of 1: see detail::set_sm_count).
inline std::vector<Layout> layouts(bool long_rows) {
  std::vector<Layout> v = {
      {1, 1, 0, 0, "1x1"},           {3, 17, 0, 0, "3x17"},          {67, 1025, 0, 0, "67x1025"},
      {5, 1002, 0, 0, "cols % 4 != 0"}, {9, 256, 0, 0, "aligned"},   {4, 512, 0, 1, "misaligned"},
      {6, 256, 264, 0, "strided"},   {5, 17, 20, 3, "strided, misaligned"}, {40, 96, 0, 0, "warp per row"},
      // 16-bit rows in registers loop over rows (persistent teams); with one multiprocessor
      // each team walks several rows: warps (32 teams, 12 of 32 lanes with columns), 128-thread
      // blocks (8 blocks for 41 rows, the last 6 accesses of each row past its end) and
      // 512-thread blocks (2 blocks for 37 rows).
      {300, 96, 0, 0, "persistent, warp per row"}, {41, 2000, 2008, 0, "persistent, block per row"},
      {37, 8192, 0, 0, "persistent, 512 threads"},
  };
  if (long_rows) {
    v.push_back({2, 20000, 0, 0, "staged"});
    v.push_back({2, 17001, 17003, 1, "staged, misaligned"});
    v.push_back({2, 70000, 0, 0, "streamed"});
    v.push_back({2, 50001, 50010, 1, "streamed, misaligned"});
    v.push_back({1, 70000, 0, 0, "split"});
    v.push_back({3, 9001, 0, 1, "split, misaligned"});
  }
  return v;
}
// The streamed and persistent layouts above need one multiprocessor, the split ones the
// default count.
inline uint32_t sm_count_for(const Layout& l) {
  return l.what.rfind("streamed", 0) == 0 || l.what.rfind("staged", 0) == 0 || l.what.rfind("persistent", 0) == 0 ? 1u
                                                                                                                  : 0u;
}

template <class T>
double to_d(T v) { return double(float(v)); }

// Unit roundoff of the storage type (0 for f32: the f32 part of each bound covers it).
template <class T>
double unit() {
  if constexpr (std::is_same_v<T, kaio::half>) return 1.0 / (1 << 11);
  else if constexpr (std::is_same_v<T, kaio::bfloat16>) return 1.0 / (1 << 8);
  else return 0.0;
}
// Absolute rounding near zero: f16 subnormal spacing, bf16/f32 negligible.
template <class T>
double tiny() {
  return std::is_same_v<T, kaio::half> ? 1.0 / (1 << 24) : 1e-30;
}

template <class T>
struct Mat {
  Layout l;
  std::vector<T> host;
  DeviceBuffer<T> dev;
  ops::RowTensor view() const { return ops::as_rows(dev, l.rows, l.cols, l.stride, l.offset); }
  double at(uint32_t r, uint32_t c) const { return to_d(host[l.at(r, c)]); }
};

// Random values in [lo, hi) everywhere (pads too), uploaded.
template <class T>
Mat<T> random_mat(const Layout& l, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> h(l.size());
  for (auto& x : h) x = T(d(rng()));
  DeviceBuffer<T> dev(h);
  return Mat<T>{l, std::move(h), std::move(dev)};
}

// An output with every byte 0xFF (NaN in every float type).
template <class T>
Mat<T> poisoned_mat(const Layout& l) {
  DeviceBuffer<T> dev(l.size());
  dev.fill_bytes(0xFF);
  return Mat<T>{l, {}, std::move(dev)};
}

// Downloads `m` and counts elements outside the matrix (pads, the offset) that are not
// poison any more: an op must not write them.
template <class T>
size_t fetch(Mat<T>& m) {
  m.host = m.dev.to_host();
  std::vector<bool> inside(m.host.size(), false);
  for (uint32_t r = 0; r < m.l.rows; ++r)
    for (uint32_t c = 0; c < m.l.cols; ++c) inside[m.l.at(r, c)] = true;
  size_t touched = 0;
  for (size_t i = 0; i < m.host.size(); ++i)
    if (!inside[i]) touched += m.host[i].bits != 0xFFFF;
  return touched;
}
template <>
inline size_t fetch<float>(Mat<float>& m) {
  m.host = m.dev.to_host();
  std::vector<bool> inside(m.host.size(), false);
  for (uint32_t r = 0; r < m.l.rows; ++r)
    for (uint32_t c = 0; c < m.l.cols; ++c) inside[m.l.at(r, c)] = true;
  size_t touched = 0;
  for (size_t i = 0; i < m.host.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &m.host[i], 4);
    if (!inside[i]) touched += bits != 0xFFFFFFFFu;
  }
  return touched;
}

// Random vector of n elements (a weight or bias), 16-byte aligned (a fresh buffer).
template <class T>
Mat<T> random_vector(uint32_t n, float lo, float hi) {
  return random_mat<T>(Layout{1, n, 0, 0, "vector"}, lo, hi);
}

// Sets detail::set_sm_count for a scope.
struct ScopedSms {
  explicit ScopedSms(uint32_t n) { ops::detail::set_sm_count(n); }
  ~ScopedSms() { ops::detail::set_sm_count(0); }
};

// The long-row layouts take the interpreter a while: run them on a device, or in the
// interpreter only for f32 (the strategy does not depend on the dtype beyond the width).
template <class T>
bool with_long_rows() {
  return !jit::interpret_mode() || std::is_same_v<T, float>;
}

}  // namespace kaio::test::rows
