#include "kaio/jit/buffer.h"

#include "kaio/jit/backend.h"

namespace kaio::jit {

namespace detail {

uint64_t device_alloc(size_t bytes) { return backend().alloc(bytes); }

void device_free(uint64_t ptr) noexcept {
  if (ptr) backend().free(ptr);
}

void copy_to_device(uint64_t dst, const void* src, size_t bytes) {
  if (bytes) backend().copy_to_device(dst, src, bytes);
}

void copy_to_host(void* dst, uint64_t src, size_t bytes) {
  if (bytes) backend().copy_to_host(dst, src, bytes);
}

void fill_device_bytes(uint64_t dst, uint8_t byte, size_t bytes) {
  if (bytes) backend().fill(dst, byte, bytes);
}

}  // namespace detail

Stream::Stream() : h_(detail::backend().stream_create()) {}

Stream::~Stream() {
  if (owned_) detail::backend().stream_destroy(h_);
}

void Stream::synchronize() const { detail::backend().stream_synchronize(h_); }

void synchronize() { detail::backend().synchronize(); }

}  // namespace kaio::jit
