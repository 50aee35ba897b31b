// The device noun: what kernels and launch configurations need to know about the GPU they
// run on, in one place, so that no op spells a device fact as a number.
//
//   const jit::DeviceInfo& d = jit::device_info();
//   if (need > d.smem_per_block_optin) ...;          // instead of 232448
//   grid = std::min(work, d.sm_count);                // instead of 132
//
// With a GPU (and not interpreting), the facts come from the driver (device 0). Under
// KAIO_INTERPRET they are the nominal facts of the interpreter's target arch, and without a
// driver those of sm_90 (device_info_for), with `present` false: launch configurations and
// can_implement checks computed on a build box then match a typical part of that arch.
#pragma once

#include <cstdint>
#include <string>

namespace kaio::jit {

struct DeviceInfo {
  std::string name;                   // "NVIDIA H200", or "sm_90 (nominal)" without a device
  std::string arch;                   // the arch kernels are compiled for: "sm_90", "sm_80"
  int sm = 0;                         // compute capability as a number: 80, 90, 100
  char suffix = '\0';                 // 'a' / 'f' where the arch string has one
  uint32_t sm_count = 0;              // streaming multiprocessors
  uint32_t smem_per_block_optin = 0;  // the most dynamic shared memory one block may opt into (bytes)
  uint32_t smem_per_sm = 0;           // shared memory per multiprocessor (bytes)
  uint32_t l2_bytes = 0;              // L2 cache size
  uint32_t clock_khz = 0;             // peak SM clock
  uint32_t max_threads_per_block = 1024;
  bool present = false;               // true: read from a device; false: nominal facts of `arch`

  bool hopper() const { return sm == 90; }
};

// The facts of the device kernels launch on (cached for the process).
const DeviceInfo& device_info();
// The nominal facts of an arch ("sm_80", "sm_90a", ...), with no device: a typical part of
// it (A100 for sm_80, H100 SXM for sm_90). UsageError for an arch string that does not parse.
DeviceInfo device_info_for(const std::string& arch);

}  // namespace kaio::jit
