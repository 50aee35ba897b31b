// The CUDA driver API, loaded with dlopen("libcuda.so.1") at first use, so that every tool
// and host test runs on a machine with no GPU and no driver. Internal to kaio (includes
// cuda.h for its types only; nothing links against libcuda).
#pragma once

#include <cuda.h>

#include <string>

namespace kaio::jit::driver {

struct Api {
  decltype(&cuInit) init;
  decltype(&cuDriverGetVersion) driver_get_version;
  decltype(&cuDeviceGetCount) device_get_count;
  decltype(&cuDeviceGet) device_get;
  decltype(&cuDeviceGetAttribute) device_get_attribute;
  decltype(&cuDeviceGetName) device_get_name;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain;
  decltype(&cuCtxSetCurrent) ctx_set_current;
  decltype(&cuCtxGetCurrent) ctx_get_current;
  decltype(&cuCtxSynchronize) ctx_synchronize;
  decltype(&cuModuleLoadData) module_load_data;
  decltype(&cuModuleLoadDataEx) module_load_data_ex;
  decltype(&cuModuleUnload) module_unload;
  decltype(&cuModuleGetFunction) module_get_function;
  decltype(&cuFuncGetAttribute) func_get_attribute;
  decltype(&cuFuncSetAttribute) func_set_attribute;
  decltype(&cuLaunchKernel) launch_kernel;
  decltype(&cuMemAlloc_v2) mem_alloc;
  decltype(&cuMemFree_v2) mem_free;
  decltype(&cuMemcpyHtoD_v2) memcpy_htod;
  decltype(&cuMemcpyDtoH_v2) memcpy_dtoh;
  decltype(&cuMemcpyDtoD_v2) memcpy_dtod;
  decltype(&cuMemsetD8_v2) memset_d8;
  decltype(&cuStreamCreate) stream_create;
  decltype(&cuStreamDestroy_v2) stream_destroy;
  decltype(&cuStreamSynchronize) stream_synchronize;
  decltype(&cuEventCreate) event_create;
  decltype(&cuEventDestroy_v2) event_destroy;
  decltype(&cuEventRecord) event_record;
  decltype(&cuEventSynchronize) event_synchronize;
  decltype(&cuEventElapsedTime_v2) event_elapsed_time;
  decltype(&cuGetErrorName) get_error_name;
  decltype(&cuGetErrorString) get_error_string;

  // Optional entry points (newer drivers): null when the driver lacks them. Call them through
  // require(), which turns a missing one into a ToolError instead of a null call.
  decltype(&cuLaunchKernelEx) launch_kernel_ex;               // CUDA 12.0: clusters
  decltype(&cuTensorMapEncodeTiled) tensor_map_encode_tiled;  // CUDA 12.0: TMA descriptors
  decltype(&cuOccupancyMaxActiveClusters) occupancy_max_active_clusters;  // CUDA 12.0: cluster residency
};

// Loads libcuda and calls cuInit once. Throws kaio::ToolError("CUDA driver", ...) with a
// clear message when there is no driver or no device.
const Api& api();
// True when a driver loads, initializes and reports at least one device. Never throws.
bool available();
// Throws ToolError("CUDA driver", <CUDA_ERROR_...>, what) when r is not CUDA_SUCCESS.
void check(CUresult r, const std::string& what);
// Returns `fn` when the driver has it; else throws ToolError("CUDA driver",
// "MISSING_ENTRY_POINT", "... lacks <name> ...").
[[noreturn]] void missing_entry_point(const char* name);
template <class F>
F require(F fn, const char* name) {
  if (!fn) missing_entry_point(name);
  return fn;
}
// Makes device 0's primary context current on the calling thread (once per thread).
void ensure_context();
// "sm_90" for the current device (cached).
const std::string& device_arch();
// The arch compile() uses when none is given: the backend's (the device's, or in interpret
// mode the nominal "sm_90", no driver needed).
const std::string& default_arch();
// The device's compute capability as a number (90 for sm_90).
int device_sm();
// The device's streaming multiprocessors (0 if the driver does not say).
int device_sm_count();

}  // namespace kaio::jit::driver
