// Internal: what a CompiledKernel shares between its copies. Copies of one CompiledKernel
// may be launched from many threads at once, so everything a launch writes is atomic: the
// hot path reads `function` and `dynamic_smem_set` once each, and only the rare first load
// and the rare raise of the shared-memory limit take `device_mutex`.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/driver.h"

namespace kaio::jit::detail {

struct KernelState {
  // Immutable once compile() has returned it.
  Key key;
  std::string name, arch, ptx, cubin, info_log;
  std::vector<ir::Param> params;
  ir::Kernel kernel;  // the IR: launches run it in the interpreter in interpret mode
  uint32_t launch_bound_threads = 0;

  // Device backend: loaded lazily into the current device's context. Written under
  // device_mutex, read lock-free (release/acquire) on every launch.
  std::mutex device_mutex;
  std::atomic<CUmodule> module{nullptr};      // cuModuleLoadData
  std::atomic<CUfunction> function{nullptr};  // cuModuleGetFunction (with lazy loading, the real load)
  // The MAX_DYNAMIC_SHARED_SIZE_BYTES attribute set so far. It only grows, so a launch that
  // reads a value >= its own need may go ahead without the lock.
  std::atomic<uint32_t> dynamic_smem_set{0};
  // True once the module came from the driver's whole-program compile of the PTX (not the cubin).
  std::atomic<bool> loaded_from_ptx{false};

  ~KernelState();
};

}  // namespace kaio::jit::detail
