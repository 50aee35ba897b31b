// Internal to the C ABI (capi/*.cpp): how C++ exceptions become status codes, how DLPack
// tensors are checked and read, and how interpret mode lets kernels reach host arrays.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kaio/capi/kaio.h"
#include "kaio/ir/error.h"
#include "kaio/ir/types.h"
#include "kaio/jit/buffer.h"

namespace kaio::capi {

// Thrown when a caller's callback returns non-zero: the build stops, the call returns
// KAIO_ERR_CALLBACK and the callback's own error stays with the caller.
struct CallbackFailed {};

// Records the exception in flight as this thread's last error and returns its status.
int set_error_from_current();
void set_usage_error(const std::string& op, const std::string& message);

// Runs f(), turning any exception into a status.
template <class F>
int guard(F&& f) noexcept {
  try {
    f();
    return KAIO_OK;
  } catch (...) {
    return set_error_from_current();
  }
}

// A checked view of one DLPack tensor argument.
struct View {
  uint64_t address = 0;  // of element 0 (data + byte_offset)
  ir::Scalar dtype = ir::Scalar::F32;
  std::vector<int64_t> shape, strides;  // strides in elements, always filled in
  int64_t numel = 1;

  int ndim() const { return static_cast<int>(shape.size()); }
  bool contiguous() const;  // dense row-major
  uint64_t bytes() const;   // the span the view touches, in bytes (0 when empty)
  // The element span [first, last] the view touches, in elements from `address`.
  int64_t extent() const;
  std::string shape_str() const;
};

// Reads and checks a tensor: present, on the right device (CUDA device 0, or the host in
// interpret mode), one lane, a dtype kaio has, non-negative strides. Errors name op and arg.
View view(const char* op, const char* arg, const kaio_tensor* t);
const char* dtype_name(ir::Scalar s);
void require_dtype(const char* op, const char* arg, const View& v, ir::Scalar want);
void require_float(const char* op, const char* arg, const View& v);  // f32, f16 or bf16
void require_same(const char* op, const char* arg, const View& v, const char* like_name, const View& like);

// rows x cols with a unit inner stride and rows `ld` elements apart: the last dimension is
// cols, every leading dimension folds into rows. False when the strides do not allow it.
struct Rows {
  uint64_t rows = 1, cols = 1, ld = 1;
};
bool as_rows(const View& v, Rows& r);
Rows rows_of(const char* op, const char* arg, const View& v);  // UsageError when as_rows fails

// Whether calls register their arrays' memory with the interpreter (interpret mode, but not
// KAIO_INTERPRET=dry, which runs no kernel).
bool registers_host_memory();

// In interpret mode kernels may only touch registered memory: this registers each view's
// span for the duration of a call (counted, so that in-place arguments nest). Nothing in
// device mode.
class HostRegions {
 public:
  HostRegions() = default;
  HostRegions(const HostRegions&) = delete;
  HostRegions& operator=(const HostRegions&) = delete;
  ~HostRegions();
  void add(const View& v);
  void add(uint64_t address, uint64_t bytes);  // [address, address + bytes); nothing for 0 bytes

 private:
  std::vector<std::pair<uint64_t, uint64_t>> spans_;  // [begin, end) registered for this call
};

// The caller's CUstream as a jit::Stream (borrowed, not destroyed).
inline jit::Stream stream_of(void* s) { return jit::Stream::borrow(s); }

// Parses "f32", "ptr<const f32>", "const f32*", "f32*" ... (UsageError naming op otherwise).
ir::Type parse_type(const char* op, const char* text);

}  // namespace kaio::capi
