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
  ir::Kernel kernel;  // the IR: launches run it in the interpreter in interpret mode
  uint32_t launch_bound_threads = 0;
  int dynamic_smem_set = 0;  // the MAX_DYNAMIC_SHARED_SIZE_BYTES attribute set so far

  // Loaded lazily into the current device's context.
  std::once_flag load_once;      // cuModuleLoadData
  std::once_flag function_once;  // cuModuleGetFunction (with lazy loading, the real load)
  CUmodule module = nullptr;
  CUfunction function = nullptr;

  ~KernelState();
};

}  // namespace kaio::jit::detail
