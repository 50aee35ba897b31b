// Bench inputs of normal(0, 1) values, as the peer's torch.randn makes them. Constant inputs
// flatter a tensor-core kernel: on a power-capped GPU the clock follows the power the MMAs
// draw, and that follows how many bits toggle. The values come from a pool of 2^20 (enough to
// look random to the tensor cores) repeated through the buffer, so multi-GB caches fill fast.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kaio/jit/buffer.h"

namespace kaio::bench {

template <class T>
void fill_randn(jit::DeviceBuffer<T>& b, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<T> pool(std::min<size_t>(b.size(), size_t(1) << 20));
  for (T& x : pool) x = T(d(rng));
  for (size_t at = 0; at < b.size(); at += pool.size()) {
    const size_t n = std::min(pool.size(), b.size() - at);
    jit::detail::copy_to_device(b.device_address() + at * sizeof(T), pool.data(), n * sizeof(T));
  }
}

}  // namespace kaio::bench
