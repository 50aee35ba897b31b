// Shared by the matmul tests: fresh random inputs, exact widening for float64 references,
// and element addressing by layout.
#pragma once

#include <cmath>
#include <random>
#include <vector>

#include "kaio/ops/matmul.h"
#include "../support.h"

namespace kaio::test::matmul {

inline std::mt19937& rng() {
  return ::kaio::test::rng();
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

// The rows of the variant table that use `engine`, and a row's index (its configs' variant).
inline std::vector<const ops::MatmulVariant*> rows_of(ops::MatmulEngine engine) {
  std::vector<const ops::MatmulVariant*> out;
  for (const ops::MatmulVariant& v : ops::matmul_variants())
    if (v.engine == engine) out.push_back(&v);
  return out;
}
inline uint32_t index_of(const ops::MatmulVariant& v) { return static_cast<uint32_t>(&v - ops::matmul_variants().data()); }

// The float64 reference of C(z, i, j) = scale * sum_k A(i, k) B(k, j) + beta * C0(z, i, j)
// (scale: alpha, times the FP8 scales; C0 is not read when beta == 0, so it may be NaN
// poison) and the magnitude that bounds its rounding (the same sum of |terms|).
struct Reference {
  double ref, mag;
};
template <class In, class Out>
Reference reference_at(const ops::MatmulProblem& p, const std::vector<In>& a, const std::vector<In>& b,
                       const std::vector<Out>& c0, uint32_t z, uint32_t i, uint32_t j, double scale) {
  double ref = 0, mag = 0;
  for (uint32_t k = 0; k < p.k; ++k) {
    const double t = as_double(a[z * p.stride_a + at(p.a, p.lda, i, k)]) * as_double(b[z * p.stride_b + at(p.b, p.ldb, k, j)]);
    ref += t;
    mag += std::abs(t);
  }
  ref *= scale;
  mag *= std::abs(scale);
  if (p.beta != 0.0f) {
    const double old = double(p.beta) * as_double(c0[z * p.stride_c + size_t(i) * p.ldc + j]);
    ref += old;
    mag += std::abs(old);
  }
  return {ref, mag};
}

}  // namespace kaio::test::matmul
