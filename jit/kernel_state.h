// Internal: what a CompiledKernel shares between its copies.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/driver.h"

namespace kaio::jit::detail {

struct KernelState {
  Key key;
  std::string name, arch, ptx, cubin, info_log;
  std::vector<ir::Param> params;

  // Loaded lazily into the current device's context.
  std::once_flag load_once;      // cuModuleLoadData
  std::once_flag function_once;  // cuModuleGetFunction (with lazy loading, the real load)
  CUmodule module = nullptr;
  CUfunction function = nullptr;

  ~KernelState();
};

}  // namespace kaio::jit::detail
