#include "kaio/jit/driver.h"

#include <dlfcn.h>

#include <mutex>

#include "kaio/ir/error.h"
#include "kaio/jit/backend.h"

namespace kaio::jit::driver {

namespace {

struct Loaded {
  Api api{};
  std::string error;  // why the driver is unusable; empty when it works
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  std::string arch;
  int sm = 0;
  int sm_count = 0;  // streaming multiprocessors
};

std::string error_name(const Api& a, CUresult r) {
  const char* s = nullptr;
  if (a.get_error_name && a.get_error_name(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

Loaded& loaded() {
  static Loaded L = [] {
    Loaded l;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      l.error = "libcuda.so.1 could not be loaded (no NVIDIA driver on this machine?): " + std::string(dlerror());
      return l;
    }
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) {
        ok = false;
        l.error = std::string("libcuda.so.1 lacks ") + name + " (driver too old?)";
      }
    };
    Api& a = l.api;
    sym(a.init, "cuInit");
    sym(a.driver_get_version, "cuDriverGetVersion");
    sym(a.device_get_count, "cuDeviceGetCount");
    sym(a.device_get, "cuDeviceGet");
    sym(a.device_get_attribute, "cuDeviceGetAttribute");
    sym(a.device_get_name, "cuDeviceGetName");
    sym(a.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    sym(a.ctx_set_current, "cuCtxSetCurrent");
    sym(a.ctx_get_current, "cuCtxGetCurrent");
    sym(a.ctx_synchronize, "cuCtxSynchronize");
    sym(a.module_load_data, "cuModuleLoadData");
    sym(a.module_load_data_ex, "cuModuleLoadDataEx");
    sym(a.module_unload, "cuModuleUnload");
    sym(a.module_get_function, "cuModuleGetFunction");
    sym(a.func_get_attribute, "cuFuncGetAttribute");
    sym(a.func_set_attribute, "cuFuncSetAttribute");
    sym(a.launch_kernel, "cuLaunchKernel");
    sym(a.mem_alloc, "cuMemAlloc_v2");
    sym(a.mem_free, "cuMemFree_v2");
    sym(a.memcpy_htod, "cuMemcpyHtoD_v2");
    sym(a.memcpy_dtoh, "cuMemcpyDtoH_v2");
    sym(a.memcpy_dtod, "cuMemcpyDtoD_v2");
    sym(a.memset_d8, "cuMemsetD8_v2");
    sym(a.stream_create, "cuStreamCreate");
    sym(a.stream_destroy, "cuStreamDestroy_v2");
    sym(a.stream_synchronize, "cuStreamSynchronize");
    sym(a.event_create, "cuEventCreate");
    sym(a.event_destroy, "cuEventDestroy_v2");
    sym(a.event_record, "cuEventRecord");
    sym(a.event_synchronize, "cuEventSynchronize");
    sym(a.event_elapsed_time, "cuEventElapsedTime_v2");
    sym(a.get_error_name, "cuGetErrorName");
    sym(a.get_error_string, "cuGetErrorString");
    if (!ok) return l;
    // Optional: a driver without them still runs everything else.
    a.launch_kernel_ex = reinterpret_cast<decltype(a.launch_kernel_ex)>(dlsym(h, "cuLaunchKernelEx"));
    a.tensor_map_encode_tiled = reinterpret_cast<decltype(a.tensor_map_encode_tiled)>(dlsym(h, "cuTensorMapEncodeTiled"));
    a.occupancy_max_active_clusters =
        reinterpret_cast<decltype(a.occupancy_max_active_clusters)>(dlsym(h, "cuOccupancyMaxActiveClusters"));
    CUresult r = a.init(0);
    if (r != CUDA_SUCCESS) {
      l.error = "cuInit failed: " + error_name(a, r);
      return l;
    }
    int n = 0;
    if (a.device_get_count(&n) != CUDA_SUCCESS || n == 0) {
      l.error = "no CUDA device is present";
      return l;
    }
    int major = 0, minor = 0;
    if (a.device_get(&l.device, 0) != CUDA_SUCCESS ||
        a.device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, l.device) != CUDA_SUCCESS ||
        a.device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, l.device) != CUDA_SUCCESS ||
        a.primary_ctx_retain(&l.ctx, l.device) != CUDA_SUCCESS) {
      l.error = "device 0 could not be opened";
      return l;
    }
    l.sm = major * 10 + minor;
    l.arch = "sm_" + std::to_string(l.sm);
    if (a.device_get_attribute(&l.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, l.device) != CUDA_SUCCESS) l.sm_count = 0;
    return l;
  }();
  return L;
}

}  // namespace

const Api& api() {
  Loaded& l = loaded();
  if (!l.error.empty()) throw ToolError("CUDA driver", "NO_DEVICE", l.error + "; this operation needs a GPU");
  return l.api;
}

bool available() { return loaded().error.empty(); }

void check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const Api& a = loaded().api;
  std::string desc;
  const char* s = nullptr;
  if (a.get_error_string && a.get_error_string(r, &s) == CUDA_SUCCESS && s) desc = s;
  throw ToolError("CUDA driver", error_name(a, r), what + (desc.empty() ? "" : ": " + desc));
}

void missing_entry_point(const char* name) {
  throw ToolError("CUDA driver", "MISSING_ENTRY_POINT",
                  std::string("libcuda.so.1 lacks ") + name + " (the driver is too old for this feature; update the NVIDIA driver)");
}

void ensure_context() {
  thread_local bool done = false;
  if (done) return;
  const Api& a = api();
  CUcontext cur = nullptr;
  check(a.ctx_get_current(&cur), "cuCtxGetCurrent");
  if (!cur) check(a.ctx_set_current(loaded().ctx), "cuCtxSetCurrent(primary context of device 0)");
  done = true;
}

const std::string& device_arch() {
  api();
  return loaded().arch;
}

int device_sm() {
  api();
  return loaded().sm;
}

int device_sm_count() {
  api();
  return loaded().sm_count;
}

const std::string& default_arch() { return detail::backend().default_arch(); }

}  // namespace kaio::jit::driver
