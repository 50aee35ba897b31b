#include "kaio/jit/buffer.h"

#include <cstring>
#include <new>

#include "kaio/ir/interp/interp.h"
#include "kaio/jit/driver.h"

namespace kaio::jit {

namespace detail {

// In interpret mode device memory is host RAM, aligned like cuMemAlloc's, and registered
// with the interpreter so that it can check every access.
namespace {
constexpr std::align_val_t kHostAlign{256};
}  // namespace

uint64_t device_alloc(size_t bytes) {
  if (interpret_mode()) {
    void* p = ::operator new(bytes, kHostAlign);
    uint64_t a = reinterpret_cast<uint64_t>(p);
    ir::interp::register_allocation(a, bytes);
    return a;
  }
  driver::ensure_context();
  CUdeviceptr p = 0;
  driver::check(driver::api().mem_alloc(&p, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
  return p;
}

void device_free(uint64_t ptr) noexcept {
  if (!ptr) return;
  if (interpret_mode()) {
    ir::interp::unregister_allocation(ptr);
    ::operator delete(reinterpret_cast<void*>(ptr), kHostAlign);
    return;
  }
  driver::api().mem_free(ptr);  // errors here have no one to report to
}

void copy_to_device(uint64_t dst, const void* src, size_t bytes) {
  if (!bytes) return;
  if (interpret_mode()) {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return;
  }
  driver::ensure_context();
  driver::check(driver::api().memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  if (!bytes) return;
  if (interpret_mode()) {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return;
  }
  driver::ensure_context();
  driver::check(driver::api().memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

void fill_device_bytes(uint64_t dst, uint8_t byte, size_t bytes) {
  if (!bytes) return;
  if (interpret_mode()) {
    std::memset(reinterpret_cast<void*>(dst), byte, bytes);
    return;
  }
  driver::ensure_context();
  driver::check(driver::api().memset_d8(dst, byte, bytes), "cuMemsetD8");
}

}  // namespace detail

// Interpret mode: launches are synchronous, so a stream is only a name.
Stream::Stream() {
  if (interpret_mode()) return;
  driver::ensure_context();
  CUstream s = nullptr;
  driver::check(driver::api().stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  h_ = s;
}

Stream::~Stream() {
  if (h_) driver::api().stream_destroy(static_cast<CUstream>(h_));
}

void Stream::synchronize() const {
  if (interpret_mode()) return;
  driver::check(driver::api().stream_synchronize(static_cast<CUstream>(h_)), "cuStreamSynchronize");
}

void synchronize() {
  if (interpret_mode()) return;
  driver::ensure_context();
  driver::check(driver::api().ctx_synchronize(), "cuCtxSynchronize");
}

}  // namespace kaio::jit
