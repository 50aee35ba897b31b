// Shared by the matmul tests: fresh random inputs, exact widening for float64 references,
// and element addressing by layout.
#pragma once

#include <random>
#include <vector>

#include "kaio/ops/matmul.h"

namespace kaio::test::matmul {

inline std::mt19937& rng() {
  static std::mt19937 r(std::random_device{}());
  return r;
}

// n values uniform in [-1, 1), rounded to T.
template <class T>
std::vector<T> random_vec(size_t n) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) x = T(u(rng()));
  return v;
}

template <class T>
double as_double(T x) { return static_cast<double>(static_cast<float>(x)); }

// Element (i, j) of a matrix stored with `layout` and leading dimension ld.
inline size_t at(ops::MatLayout layout, uint32_t ld, uint32_t i, uint32_t j) {
  return layout == ops::MatLayout::RowMajor ? size_t(i) * ld + j : size_t(j) * ld + i;
}

}  // namespace kaio::test::matmul
