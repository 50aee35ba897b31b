// The GPU backend: the CUDA driver (jit/driver.h), device 0's primary context.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kaio/jit/backend.h"
#include "kaio/jit/driver.h"
#include "kaio/jit/kernel_state.h"
#include "kaio/jit/log.h"

#include <spdlog/spdlog.h>

namespace kaio::jit::detail {

namespace {

class DeviceBackend final : public Backend {
 public:
  bool interpreted() const override { return false; }
  const std::string& default_arch() override { return driver::device_arch(); }

  uint64_t alloc(size_t bytes) override {
    driver::ensure_context();
    CUdeviceptr p = 0;
    driver::check(driver::api().mem_alloc(&p, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
    return p;
  }
  void free(uint64_t ptr) noexcept override {
    driver::api().mem_free(ptr);  // errors here have no one to report to
  }
  void copy_to_device(uint64_t dst, const void* src, size_t bytes) override {
    driver::ensure_context();
    driver::check(driver::api().memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
    // From pageable memory, cuMemcpyHtoD returns once the bytes are staged, before the DMA
    // into device memory is done, and kaio's streams (non-blocking) do not wait for the
    // default stream: finish here, so that work on any stream sees the uploaded bytes. (A
    // block table uploaded just before a launch on a kaio stream was read while the old
    // contents of recycled memory were still there: page numbers out of the pool.)
    driver::check(driver::api().stream_synchronize(nullptr), "cuStreamSynchronize");
  }
  void copy_to_host(void* dst, uint64_t src, size_t bytes) override {
    driver::ensure_context();
    driver::check(driver::api().memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
  }
  void fill(uint64_t dst, uint8_t byte, size_t bytes) override {
    driver::ensure_context();
    driver::check(driver::api().memset_d8(dst, byte, bytes), "cuMemsetD8");
    // cuMemsetD8 may return before the bytes are set, and kaio's streams do not wait for the
    // default stream: finish here, so that work on any stream sees the filled buffer.
    driver::check(driver::api().stream_synchronize(nullptr), "cuStreamSynchronize");
  }

  // Slow path of every kernel's first launch; serialized per kernel by device_mutex.
  void load(KernelState& s) override {
    driver::ensure_context();
    if (s.module.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> g(s.device_mutex);
    load_locked(s);
  }

  void resolve(KernelState& s) override {
    driver::ensure_context();
    if (s.function.load(std::memory_order_acquire)) return;
    resolve_slow(s);
  }

  void launch(KernelState& s, const LaunchConfig& cfg, const uint64_t*, void* const* ptrs, size_t n) override {
    driver::ensure_context();  // a thread-local flag after the first call on a thread
    CUfunction f = s.function.load(std::memory_order_acquire);
    if (!f) f = resolve_slow(s);
    if (cfg.shared_bytes > 48 * 1024 && cfg.shared_bytes > s.dynamic_smem_set.load(std::memory_order_acquire))
      raise_dynamic_shared(s, f, cfg.shared_bytes);
    const driver::Api& a = driver::api();
    CUstream stream = cfg.stream ? static_cast<CUstream>(cfg.stream->handle()) : nullptr;
    void** params = n ? const_cast<void**>(ptrs) : nullptr;  // the driver's signature is not const-correct
    const Dim3& g = cfg.grid;
    const Dim3& b = cfg.block;
    const Dim3& c = cfg.cluster;
    const bool cluster = !(c.x == 1 && c.y == 1 && c.z == 1);
    const bool overlap = cfg.overlap_previous && driver::device_sm() >= 90;
    if (!cluster && !overlap) {
      driver::check(a.launch_kernel(f, unsigned(g.x), unsigned(g.y), unsigned(g.z), unsigned(b.x), unsigned(b.y),
                                    unsigned(b.z), cfg.shared_bytes, stream, params, nullptr),
                    "cuLaunchKernel for kernel '" + s.name + "'");
      return;
    }
    if (cluster && driver::device_sm() < 90)
      throw UsageError(s.name, "launch", "thread-block clusters need an sm_90 or newer device; this one is " +
                                             driver::device_arch());
    auto launch_ex = driver::require(a.launch_kernel_ex, "cuLaunchKernelEx");
    CUlaunchAttribute attrs[2]{};
    unsigned n_attrs = 0;
    if (cluster) {
      CUlaunchAttribute& attr = attrs[n_attrs++];
      attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr.value.clusterDim.x = unsigned(c.x);
      attr.value.clusterDim.y = unsigned(c.y);
      attr.value.clusterDim.z = unsigned(c.z);
    }
    if (overlap) {
      CUlaunchAttribute& attr = attrs[n_attrs++];
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmaticStreamSerializationAllowed = 1;
    }
    CUlaunchConfig lc{};
    lc.gridDimX = unsigned(g.x);
    lc.gridDimY = unsigned(g.y);
    lc.gridDimZ = unsigned(g.z);
    lc.blockDimX = unsigned(b.x);
    lc.blockDimY = unsigned(b.y);
    lc.blockDimZ = unsigned(b.z);
    lc.sharedMemBytes = cfg.shared_bytes;
    lc.hStream = stream;
    lc.attrs = attrs;
    lc.numAttrs = n_attrs;
    driver::check(launch_ex(&lc, f, params, nullptr), "cuLaunchKernelEx for kernel '" + s.name + "'");
  }

  int max_active_clusters(KernelState& s, const LaunchConfig& cfg) override {
    const driver::Api& a = driver::api();
    if (!a.occupancy_max_active_clusters || driver::device_sm() < 90) return 0;
    driver::ensure_context();
    CUfunction f = s.function.load(std::memory_order_acquire);
    if (!f) f = resolve_slow(s);
    if (cfg.shared_bytes > 48 * 1024 && cfg.shared_bytes > s.dynamic_smem_set.load(std::memory_order_acquire))
      raise_dynamic_shared(s, f, cfg.shared_bytes);
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = unsigned(cfg.cluster.x);
    attr.value.clusterDim.y = unsigned(cfg.cluster.y);
    attr.value.clusterDim.z = unsigned(cfg.cluster.z);
    CUlaunchConfig lc{};
    lc.gridDimX = unsigned(cfg.grid.x);
    lc.gridDimY = unsigned(cfg.grid.y);
    lc.gridDimZ = unsigned(cfg.grid.z);
    lc.blockDimX = unsigned(cfg.block.x);
    lc.blockDimY = unsigned(cfg.block.y);
    lc.blockDimZ = unsigned(cfg.block.z);
    lc.sharedMemBytes = cfg.shared_bytes;
    lc.attrs = &attr;
    lc.numAttrs = 1;
    int n = 0;
    driver::check(a.occupancy_max_active_clusters(&n, f, &lc), "cuOccupancyMaxActiveClusters for kernel '" + s.name + "'");
    return n;
  }

  bool device_resources(KernelState& s, int& registers, int& shared, int& local, int& max_threads) override {
    if (!driver::available() || s.arch.compare(0, driver::device_arch().size(), driver::device_arch()) != 0) return false;
    resolve(s);
    const driver::Api& a = driver::api();
    CUfunction f = s.function.load(std::memory_order_acquire);
    a.func_get_attribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
    a.func_get_attribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
    a.func_get_attribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f);
    a.func_get_attribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f);
    return true;
  }

  void* stream_create() override {
    driver::ensure_context();
    CUstream s = nullptr;
    driver::check(driver::api().stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return s;
  }
  void stream_destroy(void* s) noexcept override {
    if (s) driver::api().stream_destroy(static_cast<CUstream>(s));
  }
  void stream_synchronize(void* s) override {
    driver::check(driver::api().stream_synchronize(static_cast<CUstream>(s)), "cuStreamSynchronize");
  }
  void synchronize() override {
    driver::ensure_context();
    driver::check(driver::api().ctx_synchronize(), "cuCtxSynchronize");
  }

  void* event_create() override {
    driver::ensure_context();
    CUevent e = nullptr;
    driver::check(driver::api().event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    return e;
  }
  void event_destroy(void* e) noexcept override {
    if (e) driver::api().event_destroy(static_cast<CUevent>(e));
  }
  void event_record(void* e, void* stream) override {
    driver::ensure_context();
    driver::check(driver::api().event_record(static_cast<CUevent>(e), static_cast<CUstream>(stream)), "cuEventRecord");
  }
  void event_synchronize(void* e) override {
    driver::check(driver::api().event_synchronize(static_cast<CUevent>(e)), "cuEventSynchronize");
  }
  float event_elapsed_ms(void* start, void* end) override {
    float ms = 0;
    driver::check(driver::api().event_elapsed_time(&ms, static_cast<CUevent>(start), static_cast<CUevent>(end)),
                  "cuEventElapsedTime");
    return ms;
  }

 private:
  static void load_locked(KernelState& s) {
    if (s.module.load(std::memory_order_relaxed)) return;
    const std::string& dev = driver::device_arch();
    // A cubin runs only on its own SM (an 'a'/'f' suffix keeps the number).
    if (s.arch.compare(0, dev.size(), dev) != 0)
      throw UsageError(s.name, "launch", "kernel compiled for " + s.arch + " cannot run on this " + dev + " device");
    CUmodule m = nullptr;
    // A kernel that moves registers (setmaxnreg) runs from the driver's compile of its PTX.
    if (s.kernel.reallocates_registers() && whole_program_allowed()) m = load_whole_program(s);
    if (!m)
      driver::check(driver::api().module_load_data(&m, s.cubin.data()), "cuModuleLoadData for kernel '" + s.name + "'");
    s.module.store(m, std::memory_order_release);
  }

  // KAIO_WHOLE_PROGRAM=0: always the cubin (read at each load, which is once per kernel).
  static bool whole_program_allowed() {
    const char* v = std::getenv("KAIO_WHOLE_PROGRAM");
    return !(v && std::string(v) == "0");
  }

  // A kernel that moves registers between warpgroups (setmaxnreg) needs ptxas to compile it as
  // a whole program: nvJitLink compiles separately, where ptxas ignores setmaxnreg (C7504) and
  // sizes every warp by .maxnreg (the consumers spill, and wgmma serialises). The driver's own
  // JIT of the PTX is a whole-program compile; its result is kept in the driver's compute cache
  // (CUDA_CACHE_PATH), so a later process pays a lookup, not a compile. When the driver refuses
  // (e.g. a PTX ISA newer than the driver), nvJitLink's cubin runs instead: correct, slower.
  static CUmodule load_whole_program(KernelState& s) {
    if (s.ptx.empty()) return nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    std::string err(8192, '\0');
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {err.data(), reinterpret_cast<void*>(err.size())};
    CUmodule m = nullptr;
    const CUresult r = driver::api().module_load_data_ex(&m, s.ptx.c_str(), 2, opts, vals);
    if (r != CUDA_SUCCESS) {
      err.resize(std::strlen(err.c_str()));
      const char* name = nullptr;
      driver::api().get_error_name(r, &name);
      warn_once("whole-program:" + s.name, "the driver could not compile kernel '" + s.name + "' from its PTX (" +
                                               (name ? name : "error") + (err.empty() ? "" : ": " + err) +
                                               "); running nvJitLink's cubin, where setmaxnreg is ignored");
      return nullptr;
    }
    s.loaded_from_ptx.store(true, std::memory_order_release);
    if (debug_enabled())
      log().debug("{}: loaded from its PTX by the driver (whole program, {:.3f} ms)", s.name,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return m;
  }

  static CUfunction resolve_slow(KernelState& s) {
    std::lock_guard<std::mutex> g(s.device_mutex);
    if (CUfunction f = s.function.load(std::memory_order_relaxed)) return f;
    load_locked(s);
    CUfunction f = nullptr;
    driver::check(driver::api().module_get_function(&f, s.module.load(std::memory_order_relaxed), s.name.c_str()),
                  "cuModuleGetFunction for kernel '" + s.name + "'");
    s.function.store(f, std::memory_order_release);
    return f;
  }

  // Dynamic shared memory above 48 KB needs the function's limit raised first; more than the
  // device allows per block (minus the static part) is a usage error, not a launch failure.
  // The limit only grows: concurrent launches asking for less than what is set go ahead.
  static void raise_dynamic_shared(KernelState& s, CUfunction f, uint32_t bytes) {
    std::lock_guard<std::mutex> g(s.device_mutex);
    if (bytes <= s.dynamic_smem_set.load(std::memory_order_relaxed)) return;
    const driver::Api& a = driver::api();
    CUdevice dev;
    int optin = 0, static_bytes = 0;
    driver::check(a.device_get(&dev, 0), "cuDeviceGet");
    driver::check(a.device_get_attribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                  "cuDeviceGetAttribute");
    driver::check(a.func_get_attribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "cuFuncGetAttribute");
    if (static_cast<int64_t>(bytes) + static_bytes > optin)
      throw UsageError(s.name, "launch",
                       "asked for " + std::to_string(bytes) + " bytes of dynamic shared memory; with " +
                           std::to_string(static_bytes) + " static bytes this device allows at most " +
                           std::to_string(optin - static_bytes));
    driver::check(a.func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for kernel '" + s.name + "'");
    s.dynamic_smem_set.store(bytes, std::memory_order_release);
  }
};

}  // namespace

Backend& device_backend() {
  static DeviceBackend b;
  return b;
}

}  // namespace kaio::jit::detail
