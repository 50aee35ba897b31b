// Whether the GPU is idle, for re-tuning noisy records: NVML's utilization of the device
// this process runs on (matched by PCI bus id), loaded with dlopen like the driver, so that
// nothing is linked. Any failure answers "cannot tell" (false): a noisy record then keeps
// serving until KAIO_TUNE=force or an idle GPU.
#include <dlfcn.h>

#include <mutex>

#include <spdlog/spdlog.h>

#include "kaio/jit/buffer.h"
#include "kaio/jit/driver.h"
#include "kaio/jit/log.h"

namespace kaio::tuner::detail {

namespace {

struct Utilization {
  unsigned int gpu, memory;  // nvmlUtilization_t: percent of the last sample period
};
using InitFn = int (*)();
using HandleByBusFn = int (*)(const char*, void**);
using UtilFn = int (*)(void*, Utilization*);
using BusIdFn = int (*)(char*, int, int);
using DeviceGetFn = int (*)(int*, int);

// At most this share of the last sample period spent running kernels counts as idle.
constexpr unsigned kIdlePercent = 5;

struct Nvml {
  void* device = nullptr;
  UtilFn utilization = nullptr;
};

const Nvml* nvml() {
  static const Nvml* n = []() -> const Nvml* {
    if (jit::interpret_mode() || !jit::driver::available()) return nullptr;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib || !cuda) return nullptr;
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<HandleByBusFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    auto util = reinterpret_cast<UtilFn>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    auto bus_id = reinterpret_cast<BusIdFn>(dlsym(cuda, "cuDeviceGetPCIBusId"));
    auto dev_get = reinterpret_cast<DeviceGetFn>(dlsym(cuda, "cuDeviceGet"));
    if (!init || !by_bus || !util || !bus_id || !dev_get || init() != 0) return nullptr;
    jit::driver::ensure_context();
    int dev = 0;
    char bus[64] = {};
    if (dev_get(&dev, 0) != 0 || bus_id(bus, sizeof bus, dev) != 0) return nullptr;
    static Nvml state;
    if (by_bus(bus, &state.device) != 0) return nullptr;
    state.utilization = util;
    return &state;
  }();
  return n;
}

}  // namespace

bool nvml_idle() {
  const Nvml* n = nvml();
  if (!n) {
    jit::log().debug("tuner: cannot tell whether the GPU is idle (no NVML)");
    return false;
  }
  Utilization u{};
  if (n->utilization(n->device, &u) != 0) return false;
  return u.gpu <= kIdlePercent;
}

}  // namespace kaio::tuner::detail
