#include "kaio/jit/buffer.h"

#include "kaio/jit/driver.h"

namespace kaio::jit {

namespace detail {

uint64_t device_alloc(size_t bytes) {
  driver::ensure_context();
  CUdeviceptr p = 0;
  driver::check(driver::api().mem_alloc(&p, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
  return p;
}

void device_free(uint64_t ptr) noexcept {
  if (!ptr) return;
  driver::api().mem_free(ptr);  // errors here have no one to report to
}

void copy_to_device(uint64_t dst, const void* src, size_t bytes) {
  if (!bytes) return;
  driver::ensure_context();
  driver::check(driver::api().memcpy_htod(dst, src, bytes), "cuMemcpyHtoD");
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  if (!bytes) return;
  driver::ensure_context();
  driver::check(driver::api().memcpy_dtoh(dst, src, bytes), "cuMemcpyDtoH");
}

void fill_device_bytes(uint64_t dst, uint8_t byte, size_t bytes) {
  if (!bytes) return;
  driver::ensure_context();
  driver::check(driver::api().memset_d8(dst, byte, bytes), "cuMemsetD8");
}

}  // namespace detail

Stream::Stream() {
  driver::ensure_context();
  CUstream s = nullptr;
  driver::check(driver::api().stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  h_ = s;
}

Stream::~Stream() {
  if (h_) driver::api().stream_destroy(static_cast<CUstream>(h_));
}

void Stream::synchronize() const {
  driver::check(driver::api().stream_synchronize(static_cast<CUstream>(h_)), "cuStreamSynchronize");
}

void synchronize() {
  driver::ensure_context();
  driver::check(driver::api().ctx_synchronize(), "cuCtxSynchronize");
}

}  // namespace kaio::jit
