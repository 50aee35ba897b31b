// float64 references of the activations, without cancellation (gelu by erfc, the tanh form
// as a sigmoid), and one call per op name: for the 16-bit and f32 accuracy tests.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "kaio/ops/elementwise.h"
#include "ops_support.h"

namespace kaio::test::ops {

inline double silu_d(double x) { return x / (1 + std::exp(-x)); }
inline double gelu_d(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double gelu_tanh_d(double x) {
  double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1 + std::exp(-2 * u));
}
inline double act_d(const std::string& op, double x) {
  if (op.rfind("silu", 0) == 0) return silu_d(x);
  if (op == "gelu" || op == "gelu_gate") return gelu_d(x);
  if (op == "exp") return std::exp(x);
  return gelu_tanh_d(x);
}

template <class T>
void call_act(const std::string& op, uint64_t out, uint64_t x, uint64_t g, size_t n) {
  if (op == "exp") kaio::ops::exp<T>(out, x, n);
  else if (op == "silu") kaio::ops::silu<T>(out, x, n);
  else if (op == "gelu") kaio::ops::gelu<T>(out, x, n);
  else if (op == "gelu_tanh") kaio::ops::gelu_tanh<T>(out, x, n);
  else if (op == "silu_gate") kaio::ops::silu_gate<T>(out, x, g, n);
  else if (op == "gelu_gate") kaio::ops::gelu_gate<T>(out, x, g, n);
  else kaio::ops::gelu_gate_tanh<T>(out, x, g, n);
}

// op on device copies of x and gate (gate read by the gated ops only) into a poisoned output
// with guards: the output read back.
template <class T>
std::vector<T> run_act(const std::string& op, const std::vector<T>& x, const std::vector<T>& gate) {
  const size_t n = x.size();
  Slice<T> dx(n, 0), dg(n, 0), out(n, 0);
  dx.upload(x);
  dg.upload(gate);
  out.poison();
  call_act<T>(op, out.address(), dx.address(), dg.address(), n);
  std::vector<T> got = out.download();
  CHECK(out.guards_intact());
  return got;
}

}  // namespace kaio::test::ops
