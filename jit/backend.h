// Internal: where launches run and where device memory lives. Two implementations:
// DeviceBackend (the GPU through the CUDA driver, jit/backend_device.cpp) and
// InterpreterBackend (the CPU interpreter of ir/interp, host RAM; KAIO_INTERPRET=1,
// jit/backend_interp.cpp). The backend is chosen once per process, at first use, so
// nothing else in jit/ asks which mode it is in.
//
// Everything above the backend (argument packing and checks, launch-shape validation,
// RAII buffers, streams and events) is shared; a backend receives only validated requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kaio::jit {

struct LaunchConfig;

namespace detail {

struct KernelState;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool interpreted() const = 0;
  // The arch compile() targets when the options name none.
  virtual const std::string& default_arch() = 0;

  // Memory. Addresses are device addresses (host addresses for the interpreter).
  virtual uint64_t alloc(size_t bytes) = 0;
  virtual void free(uint64_t ptr) noexcept = 0;
  virtual void copy_to_device(uint64_t dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, uint64_t src, size_t bytes) = 0;
  virtual void fill(uint64_t dst, uint8_t byte, size_t bytes) = 0;

  // Kernels. load(): the module; resolve(): the function (both idempotent, thread-safe).
  virtual void load(KernelState& s) = 0;
  virtual void resolve(KernelState& s) = 0;
  // `slots` holds one 8-byte value per parameter, `ptrs` points at each parameter's bytes
  // (its slot, or a by-value blob). The configuration has been validated.
  virtual void launch(KernelState& s, const LaunchConfig& cfg, const uint64_t* slots, void* const* ptrs, size_t n) = 0;
  // Fills in what the device knows about the function (registers, shared, ...), if anything.
  virtual bool device_resources(KernelState& s, int& registers, int& static_shared, int& local_bytes,
                                int& max_threads) = 0;
  // How many clusters of cfg's shape (and its block and dynamic shared memory) can be
  // resident at once; 0 when unknown (no device, or no cluster support).
  virtual int max_active_clusters(KernelState&, const LaunchConfig&) { return 0; }

  // Streams and events (opaque handles: CUstream / CUevent, or host-side records).
  virtual void* stream_create() = 0;
  virtual void stream_destroy(void* stream) noexcept = 0;
  virtual void stream_synchronize(void* stream) = 0;
  virtual void synchronize() = 0;
  virtual void* event_create() = 0;
  virtual void event_destroy(void* event) noexcept = 0;
  virtual void event_record(void* event, void* stream) = 0;
  virtual void event_synchronize(void* event) = 0;
  virtual float event_elapsed_ms(void* start, void* end) = 0;
};

// The process's backend: the interpreter when KAIO_INTERPRET is set (and not "0"), else the
// device. Chosen at first call; never changes afterwards.
Backend& backend();

Backend& device_backend();
Backend& interpreter_backend();

}  // namespace detail
}  // namespace kaio::jit
