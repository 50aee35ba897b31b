// The device noun: facts from the driver when a GPU is there, else from a table of nominal
// parts per arch.
#include "kaio/jit/device.h"

#include <cuda.h>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/driver.h"

namespace kaio::jit {

namespace {

// Nominal parts: what a launch computed without a device assumes. The shared-memory
// figures are the hardware's (per-block opt-in limit, per-SM capacity).
struct Nominal {
  int sm;
  const char* part;
  uint32_t sm_count, smem_optin, smem_sm, l2, clock_khz;
};
constexpr Nominal kNominal[] = {
    {80, "A100", 108, 166912, 167936, 40u << 20, 1410000},
    {86, "RTX 3090", 82, 101376, 102400, 6u << 20, 1695000},
    {87, "Orin", 16, 166912, 167936, 4u << 20, 1300000},
    {89, "L40S", 142, 101376, 102400, 96u << 20, 2520000},
    {90, "H100 SXM", 132, 232448, 233472, 50u << 20, 1980000},
    {100, "B200", 148, 232448, 233472, 126u << 20, 1965000},
    {120, "RTX 5090", 170, 101376, 102400, 96u << 20, 2407000},
};

// Without a driver (a build box precompiling, tests computing launch configs).
constexpr const char* kNoDeviceArch = "sm_90";

const Nominal& nominal(int sm) {
  const Nominal* best = &kNominal[0];
  for (const Nominal& n : kNominal)
    if (n.sm <= sm) best = &n;  // the newest known arch not newer than sm
  return *best;
}

DeviceInfo from_driver() {
  const driver::Api& a = driver::api();
  CUdevice dev;
  driver::check(a.device_get(&dev, 0), "cuDeviceGet(0)");
  DeviceInfo d = device_info_for(driver::device_arch());
  char name[256] = {};
  if (a.device_get_name && a.device_get_name(name, sizeof name, dev) == CUDA_SUCCESS) d.name = name;
  auto attr = [&](CUdevice_attribute at, uint32_t& out) {
    int v = 0;
    if (a.device_get_attribute(&v, at, dev) == CUDA_SUCCESS && v > 0) out = static_cast<uint32_t>(v);
  };
  attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d.sm_count);
  attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d.smem_per_block_optin);
  attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, d.smem_per_sm);
  attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d.l2_bytes);
  attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d.clock_khz);
  attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d.max_threads_per_block);
  d.present = true;
  return d;
}

}  // namespace

DeviceInfo device_info_for(const std::string& arch) {
  const codegen::ArchInfo ai = codegen::parse_arch(arch);
  const Nominal& n = nominal(ai.sm);
  DeviceInfo d;
  d.arch = arch;
  d.sm = ai.sm;
  d.suffix = ai.suffix;
  d.name = arch + " (nominal " + n.part + ")";
  d.sm_count = n.sm_count;
  d.smem_per_block_optin = n.smem_optin;
  d.smem_per_sm = n.smem_sm;
  d.l2_bytes = n.l2;
  d.clock_khz = n.clock_khz;
  return d;
}

const DeviceInfo& device_info() {
  static const DeviceInfo d = [] {
    if (interpret_mode()) return device_info_for(detail::backend().default_arch());
    if (driver::available()) return from_driver();
    return device_info_for(kNoDeviceArch);  // a build box: launch configs computed for a typical part
  }();
  return d;
}

}  // namespace kaio::jit
