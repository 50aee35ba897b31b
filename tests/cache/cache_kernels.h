// Small kernels for the cache tests, shared by the test binary and kaio_cache_child.
#pragma once

#include <string>

#include "kaio/kaio.h"

namespace kaio::test {

// A distinct kernel per (prefix, i): the name and a constant differ.
inline ir::Kernel numbered_kernel(const std::string& prefix, int i) {
  ir::KernelBuilder b(prefix + "_" + std::to_string(i));
  auto x = b.param<float*>("x");
  auto n = b.param<uint32_t>("n");
  auto g = b.global_id_x();
  b.if_(g < n, [&] {
    ir::Value xi = x[g];
    x[g] = xi * (1.0f + 0.5f * static_cast<float>(i)) + 3.0f;
  });
  return b.build();
}

}  // namespace kaio::test
