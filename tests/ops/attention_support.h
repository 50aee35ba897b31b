// Helpers of the attention tests: tensors with strides in device memory, a float64
// reference of attention (every score modifier, varlen, run-time key lengths, paging
// through a key-position map) and the comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/attention.h"
#include "ops_support.h"

namespace kaio::test::attn {

using kaio::test::ops::as_double;
using kaio::test::ops::unit;

// A tensor in device memory with the host copy of what was uploaded.
template <class T>
struct Tensor {
  std::vector<T> host;
  jit::DeviceBuffer<T> dev;
  kaio::ops::AttentionTensor t;
  double at(uint64_t i) const { return as_double(host[i]); }
};

template <class T>
Tensor<T> random_tensor(size_t n, uint64_t bs, uint64_t ss, uint64_t hs) {
  Tensor<T> x{kaio::test::ops::random_vec<T>(n, -1.0f, 1.0f), jit::DeviceBuffer<T>(n), {}};
  x.dev.upload(x.host);
  x.t = {x.dev.device_address(), ir::ScalarOf<T>::value, bs, ss, hs};
  return x;
}

template <class T>
Tensor<T> poisoned_tensor(size_t n, uint64_t bs, uint64_t ss, uint64_t hs) {
  Tensor<T> x{std::vector<T>(n), jit::DeviceBuffer<T>(n), {}};
  x.dev.fill_bytes(0xFF);  // NaN in every float type
  x.t = {x.dev.device_address(), ir::ScalarOf<T>::value, bs, ss, hs};
  return x;
}

// What the reference needs to know about one problem. Keys of batch entry b are found at
// key_offset(b, j, h) (elements) in k and v (the same layout for both).
struct RefProblem {
  uint32_t batch, hq, hkv, d;
  double scale;
  int wl, wr;  // -1: unbounded
  double softcap;
  const std::vector<float>* alibi;  // null: none
  std::function<uint32_t(uint32_t)> sq, sk;                             // lengths of entry b
  std::function<uint64_t(uint32_t, uint32_t, uint32_t)> q_offset;       // (b, i, h) -> element
  std::function<uint64_t(uint32_t, uint32_t, uint32_t)> k_offset, v_offset;
};

// o and lse of one query row in float64; lse -inf and o = 0 for a row that sees no key.
template <class T>
void reference_row(const RefProblem& p, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, uint32_t b, uint32_t i,
                   uint32_t h, std::vector<double>& o, std::vector<double>& oabs, double& lse) {
  const uint32_t sq = p.sq(b), sk = p.sk(b), kvh = h / (p.hq / p.hkv);
  const long center = long(i) + long(sk) - long(sq);
  std::vector<double> s;
  std::vector<uint32_t> js;
  for (uint32_t j = 0; j < sk; ++j) {
    if (p.wl >= 0 && long(j) < center - p.wl) continue;
    if (p.wr >= 0 && long(j) > center + p.wr) continue;
    double dot = 0;
    for (uint32_t e = 0; e < p.d; ++e) dot += q.at(p.q_offset(b, i, h) + e) * k.at(p.k_offset(b, j, kvh) + e);
    double x = dot * p.scale;
    if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
    if (p.alibi) x -= (*p.alibi)[h] * std::fabs(double(center - long(j)));
    s.push_back(x);
    js.push_back(j);
  }
  o.assign(p.d, 0.0);
  oabs.assign(p.d, 0.0);
  if (s.empty()) {
    lse = -std::numeric_limits<double>::infinity();
    return;
  }
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double x : s) m = std::max(m, x);
  for (size_t n = 0; n < s.size(); ++n) {
    const double w = std::exp(s[n] - m);
    sum += w;
    for (uint32_t e = 0; e < p.d; ++e) {
      o[e] += w * v.at(p.v_offset(b, js[n], kvh) + e);
      oabs[e] += w * std::fabs(v.at(p.v_offset(b, js[n], kvh) + e));
    }
  }
  for (double& x : o) x /= sum;
  for (double& x : oabs) x /= sum;
  lse = m + std::log(sum);
}

// Compares every row of o (and lse, when given) with the reference; o_offset / lse_index
// place row (b, i, h). Tolerance: the dtype's rounding of the output plus the f32 work
// (scores of D products, exponentials of a few ulp), both relative to the inputs' scale 1,
// plus, for 16-bit data, P rounded to the dtype before the tensor-core P V product:
// unit<T>() x sum_j p_j |v_j| / l.
template <class T>
size_t compare(const RefProblem& p, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const std::vector<T>& o,
               const std::function<uint64_t(uint32_t, uint32_t, uint32_t)>& o_offset, const std::vector<float>* lse,
               const std::function<uint64_t(uint32_t, uint32_t, uint32_t)>& lse_index) {
  size_t bad = 0;
  std::vector<double> ro, rabs;
  double rl = 0;
  const double p_unit = std::is_same_v<T, float> ? 0.0 : unit<T>();
  const double f32_err = 2e-6 * p.d;
  for (uint32_t b = 0; b < p.batch; ++b)
    for (uint32_t i = 0; i < p.sq(b); ++i)
      for (uint32_t h = 0; h < p.hq; ++h) {
        reference_row(p, q, k, v, b, i, h, ro, rabs, rl);
        for (uint32_t e = 0; e < p.d; ++e) {
          const double got = as_double(o[o_offset(b, i, h) + e]);
          if (!(std::fabs(got - ro[e]) <= f32_err + 2 * unit<T>() * std::fabs(ro[e]) + p_unit * rabs[e]) && bad++ < 4)
            UNSCOPED_INFO("o at b " << b << " i " << i << " h " << h << " e " << e << ": got " << got << " want " << ro[e]);
        }
        if (lse) {
          const double got = (*lse)[lse_index(b, i, h)];
          const bool ok = std::isinf(rl) ? (std::isinf(got) && got < 0) : std::fabs(got - rl) <= f32_err * (1 + std::fabs(rl));
          if (!ok && bad++ < 4) UNSCOPED_INFO("lse at b " << b << " i " << i << " h " << h << ": got " << got << " want " << rl);
        }
      }
  return bad;
}

}  // namespace kaio::test::attn
