// What a compiled kernel uses of the GPU, from nvJitLink's verbose info log and, when a
// device is present, from cuFuncGetAttribute.
#pragma once

#include <cstdint>
#include <string>

namespace kaio::jit {

struct Resources {
  int registers = 0;             // per thread
  uint64_t static_shared = 0;    // bytes per block
  uint64_t local_bytes = 0;      // per thread: stack frame / local memory (spills land here)
  uint64_t spill_stores = 0;     // bytes
  uint64_t spill_loads = 0;      // bytes
  int max_threads_per_block = 0; // device: exact; offline: estimated from registers
  bool from_device = false;      // filled by cuFuncGetAttribute
  // Loaded from the driver's whole-program compile of the PTX (a kernel with setmaxnreg):
  // registers and local bytes are the driver's; the spill counts, which only nvJitLink's
  // log gives and which describe its cubin, are left at 0.
  bool whole_program = false;
  std::string str() const;       // "24 registers, 0 B shared, 0 B local, ..."
};

// Parses "ptxas info : Used N registers", "N bytes stack frame, S bytes spill stores,
// L bytes spill loads" and "N bytes smem" lines.
Resources parse_resources(const std::string& info_log, uint32_t launch_bound_threads);

}  // namespace kaio::jit
