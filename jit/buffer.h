// Device memory and streams for kernel authors: RAII, host copies, no CUDA header needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kaio/ir/error.h"

namespace kaio::jit {

// KAIO_INTERPRET=1 (read once, at first use): launches run in the CPU interpreter
// (ir/interp.h), DeviceBuffer memory lives in host RAM registered with the interpreter,
// streams and synchronize() do nothing, and compile() without an arch targets sm_90 with
// no driver. Applications and the [gpu] tests run unchanged on a machine without a GPU.
bool interpret_mode();

namespace detail {
uint64_t device_alloc(size_t bytes);
void device_free(uint64_t ptr) noexcept;
void copy_to_device(uint64_t dst, const void* src, size_t bytes);
void copy_to_host(void* dst, uint64_t src, size_t bytes);
void fill_device_bytes(uint64_t dst, uint8_t byte, size_t bytes);
}  // namespace detail

// A typed view of device memory owned elsewhere.
template <class T>
struct DevicePtr {
  uint64_t address = 0;
};

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `n` elements of uninitialized device memory.
  explicit DeviceBuffer(size_t n) : n_(n), ptr_(n ? detail::device_alloc(n * sizeof(T)) : 0) {}
  // A device copy of `host`.
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { detail::device_free(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(std::exchange(o.n_, 0)), ptr_(std::exchange(o.ptr_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      detail::device_free(ptr_);
      n_ = std::exchange(o.n_, 0);
      ptr_ = std::exchange(o.ptr_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  uint64_t device_address() const { return ptr_; }
  DevicePtr<T> ptr() const { return {ptr_}; }

  // Copies host data in; the sizes must match. Done when it returns, so work on any stream
  // sees it.
  void upload(const std::vector<T>& host) {
    if (host.size() != n_)
      throw UsageError("", "upload", "host vector has " + std::to_string(host.size()) + " elements, the buffer " + std::to_string(n_));
    detail::copy_to_device(ptr_, host.data(), bytes());
  }
  // Copies the buffer out. It waits for the default stream only: synchronize a Stream whose
  // kernels wrote the buffer first.
  std::vector<T> to_host() const {
    std::vector<T> out(n_);
    detail::copy_to_host(out.data(), ptr_, bytes());
    return out;
  }
  // Sets every byte (e.g. 0xFF to poison an output before a run); done when it returns, so
  // work on any stream sees it.
  void fill_bytes(uint8_t byte) { detail::fill_device_bytes(ptr_, byte, bytes()); }

 private:
  size_t n_ = 0;
  uint64_t ptr_ = 0;
};

// A CUDA stream of the current device.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void synchronize() const;
  void* handle() const { return h_; }  // CUstream

  // A stream created elsewhere (e.g. a framework's current stream, a CUstream): launches
  // go on it; it is not destroyed with this object. Null: the default stream.
  static Stream borrow(void* handle) { return Stream(handle); }

 private:
  explicit Stream(void* borrowed) : h_(borrowed), owned_(false) {}
  void* h_ = nullptr;
  bool owned_ = true;
};

// Waits for all work on the device.
void synchronize();

}  // namespace kaio::jit
