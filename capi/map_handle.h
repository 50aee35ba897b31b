// Internal to the C ABI: the handles behind kaio_builder and kaio_map, and the call path
// that maps and the library's elementwise ops share.
#pragma once

#include <memory>
#include <vector>

#include "kaio/capi/kaio.h"
#include "kaio/ir/builder.h"
#include "kaio/ops/map.h"

struct kaio_builder {
  std::unique_ptr<kaio::ir::KernelBuilder> owned;  // null for a map body's borrowed builder
  kaio::ir::KernelBuilder* b = nullptr;
  std::vector<kaio::ir::Value> values;  // value ids index this
  std::vector<kaio::ir::Var> vars;      // variable ids index this
  std::vector<kaio::ir::IfChain> chains;  // if chain ids index this (for else_)

  uint32_t add(const kaio::ir::Value& v) {
    values.push_back(v);
    return static_cast<uint32_t>(values.size() - 1);
  }
};

struct kaio_map {
  std::shared_ptr<const kaio::ops::detail::MapKernels> kernels;
};

namespace kaio::capi {

// Checks the tensors (as kaio_elementwise documents) and launches the map.
void launch_map(const ops::detail::MapKernels& m, const char* op, const kaio_tensor* out, const kaio_tensor* const* in,
                size_t n_in, const float* scalars, size_t n_scalars, void* stream);

}  // namespace kaio::capi
