// Row ops (softmax, norms, rope): the tensors they take and the strategy that maps rows to
// threads.
//
// A RowTensor is a matrix of `rows` x `cols` elements in device memory whose rows start
// `stride` elements apart (0: dense, stride = cols). Make one from a DeviceBuffer, a
// DevicePtr, a typed device pointer or a raw device address (with its dtype):
//
//   ops::softmax(ops::as_rows(x, 64, 4096), ops::as_rows(y, 64, 4096), &stream);
//   ops::rms_norm(ops::as_rows(x, R, C, ld), ops::as_vector(w), ops::as_rows(y, R, C), 1e-6f);
//
// The strategy (RowPlan) is chosen from the shape on every call, in a few integer
// operations: a warp per row for short rows (several rows per block), a block per row for
// long ones, the row held in registers when it fits (one read of the input) and streamed
// in chunks otherwise (two reads). Rows too long for a block are split over several
// blocks when there are too few rows to fill the GPU. Team sizes and register counts are
// powers of two, so a handful of kernels serve every shape; 16-byte vector accesses are
// used when every pointer is 16-byte aligned and every row starts on a 16-byte boundary,
// one element per access otherwise.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "kaio/ir/types.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::ops {

struct RowTensor {
  uint64_t address = 0;            // device address of element (0, 0)
  ir::Scalar dtype = ir::Scalar::F32;
  uint32_t rows = 0, cols = 0;
  uint64_t stride = 0;             // elements between row starts; 0: cols (dense rows)
  uint64_t capacity = 0;           // elements the allocation holds from `address`; 0: unknown

  uint64_t row_stride() const { return stride ? stride : cols; }
};

// rows x cols elements of `b` starting `offset` elements in; the extent is checked
// against the buffer's size when the op is called.
template <class T>
RowTensor as_rows(const jit::DeviceBuffer<T>& b, uint32_t rows, uint32_t cols, uint64_t stride = 0,
                  uint64_t offset = 0) {
  return RowTensor{b.device_address() + offset * sizeof(T), ir::ScalarOf<T>::value, rows, cols, stride,
                   b.size() > offset ? b.size() - offset : 0};
}
template <class T>
RowTensor as_rows(jit::DevicePtr<T> p, uint32_t rows, uint32_t cols, uint64_t stride = 0) {
  return RowTensor{p.address, ir::ScalarOf<std::remove_cv_t<T>>::value, rows, cols, stride, 0};
}
inline RowTensor as_rows(uint64_t address, ir::Scalar dtype, uint32_t rows, uint32_t cols, uint64_t stride = 0) {
  return RowTensor{address, dtype, rows, cols, stride, 0};
}
// A typed device pointer (e.g. a framework tensor's data pointer).
template <class T>
RowTensor as_rows(const T* p, uint32_t rows, uint32_t cols, uint64_t stride = 0) {
  return RowTensor{reinterpret_cast<uint64_t>(p), ir::ScalarOf<std::remove_cv_t<T>>::value, rows, cols, stride, 0};
}
// A vector of n elements (a norm's weight or bias): one row. The DeviceBuffer form takes
// the whole buffer.
template <class T>
RowTensor as_vector(const jit::DeviceBuffer<T>& b, uint64_t offset = 0) {
  uint64_t n = b.size() > offset ? b.size() - offset : 0;
  return RowTensor{b.device_address() + offset * sizeof(T), ir::ScalarOf<T>::value, 1,
                   static_cast<uint32_t>(n > 0xffffffffu ? 0xffffffffu : n), 0, n};
}
template <class T>
RowTensor as_vector(jit::DevicePtr<T> p, uint32_t n) {
  return RowTensor{p.address, ir::ScalarOf<std::remove_cv_t<T>>::value, 1, n, 0, 0};
}
inline RowTensor as_vector(uint64_t address, ir::Scalar dtype, uint32_t n) { return RowTensor{address, dtype, 1, n, 0, 0}; }
template <class T>
RowTensor as_vector(const T* p, uint32_t n) {
  return RowTensor{reinterpret_cast<uint64_t>(p), ir::ScalarOf<std::remove_cv_t<T>>::value, 1, n, 0, 0};
}

// How a row kernel maps rows to threads. Part of every row op's kernel config.
struct RowPlan {
  uint32_t vec = 1;    // elements per access: 16 bytes' worth when aligned, else 1
  uint32_t team = 32;  // threads per row: 32 (a warp per row) up to 1024 (a block per row)
  uint32_t items = 1;  // vectors per thread held in registers; 0: the row is streamed in chunks
  uint32_t split = 1;  // blocks per row (> 1 only for streamed rows; a second kernel finishes)
  bool stage = false;  // a streamed row kept in shared memory between its passes (read once)
  // Rows in registers (items > 0) of 16-bit data: a grid of resident teams walks the rows,
  // each team issuing its next row's loads before it reduces and stores the current one.
  bool persist = false;
  uint32_t block() const { return team < 128 ? 128 : team; }  // warps per row share a block
  uint32_t rows_per_block() const { return block() / team; }
  auto fields() const { return std::tie(vec, team, items, split, stage, persist); }
};

// Limits of the strategy: at most a block of 1024 threads per row, and at most
// row_items(vec) accesses per thread held in registers (also the chunk of a streamed row):
// 16 values (8 scalar loads), so that a thread fits in 64 registers and a multiprocessor
// keeps 1024 or more threads, with 16 to 64 KB of loads in flight, on each row kernel.
inline constexpr uint32_t kMaxTeam = 1024;
// A streamed row of at most this many bytes as f32 (40960 columns) is staged in shared
// memory during its first pass, so that it is read from global memory once (within the
// 164 KB a block may have on sm_80; sm_90 allows 227 KB).
inline constexpr uint32_t kMaxStageBytes = 160 * 1024;
constexpr uint32_t row_items(uint32_t vec) { return vec == 1 ? 8 : vec >= 16 ? 1 : 16 / vec; }

// The strategy for `rows` rows of `cols` elements accessed `vec` at a time (vec = 1 or
// 16 / element size). `sms` is the number of multiprocessors to fill (0: 132).
// `holds`: what the op reads per row beside the row (row_holds). One that holds at most one
// weight vector takes, for 16-bit rows of 513-1024 accesses (4097-8192 columns), 256
// threads x 4 accesses in one-shot blocks instead of 512 x 2 persistent teams: at 8192
// columns bf16, 3.5-4.6% faster on an H200 and 7-11% on an H100 for softmax and
// log_softmax (bench/ops_rows' sweep); layer_norm (w and b) is slower that way.
enum class RowHolds { AtMostOneVector, More };
RowPlan plan_rows(uint32_t rows, uint32_t cols, uint32_t vec, uint32_t sms = 0, RowHolds holds = RowHolds::More);
// What the row op `op` holds per row: softmax, log_softmax and rms_norm at most one vector;
// layer_norm (w and b), add_rms_norm (residual and sum) and any other name more.
RowHolds row_holds(const std::string& op);
// 16 / element size when every address is 16-byte aligned and every stride and `cols` a
// multiple of that, else 1. Vectors (rows = 1) only need the address aligned.
uint32_t vector_width(ir::Scalar dtype, uint32_t cols, std::initializer_list<const RowTensor*> tensors);
std::string describe(const RowPlan& p);

namespace detail {

// Argument checks shared by the row ops: each failure is a UsageError naming the op and
// the argument, raised before anything is launched.
void check_dtype(const char* op, const char* arg, ir::Scalar dtype);
void check_rows(const char* op, const char* arg, const RowTensor& t);
// `t` has the shape and dtype of `like` (named `like_name`).
void check_same(const char* op, const char* arg, const RowTensor& t, const char* like_name, const RowTensor& like);
// `t` is a vector of `n` elements of `dtype` (a norm's weight or bias).
void check_vector(const char* op, const char* arg, const RowTensor& t, uint32_t n, ir::Scalar dtype);

// A kernel pointer argument. Vector kernels see f16/bf16 data as f16x2/bf16x2 pairs.
jit::detail::Arg row_pointer_arg(uint64_t address, ir::Scalar dtype, uint32_t vec);
// The element type a row kernel's pointer parameter has for `dtype` accessed `vec` at a time.
ir::Scalar access_type(ir::Scalar dtype, uint32_t vec);

// Device scratch of at least `bytes` for the partial statistics of split rows, one per
// stream, with a lock: hold it while enqueueing the op's two kernels, so that another
// thread's split op on the same stream cannot slip its kernels in between (the kernels of
// one stream run in order). Grows, never shrinks; lives until the process ends.
struct Workspace {
  std::unique_lock<std::mutex> lock;
  uint64_t address = 0;
};
Workspace workspace(const jit::Stream* stream, size_t bytes);
// Columns per block of a row split over `split` blocks (a multiple of `vec`), and the
// number of blocks that leaves none empty.
struct SplitSpan {
  uint32_t span, split;
};
SplitSpan split_span(uint32_t cols, uint32_t split, uint32_t vec);

// The multiprocessor count of the current device (132 without one); read once.
uint32_t sm_count();
// The plan the ops use: plan_rows(rows, cols, vec, sm_count()), or the override of this
// thread when one is set for this access width (benchmarks sweep plans with it).
RowPlan choose_plan(uint32_t rows, uint32_t cols, uint32_t vec, RowHolds holds = RowHolds::More);
void set_plan_override(const RowPlan* plan);  // null: none
// Overrides sm_count() (0: the device's again). Tests use it to reach the streamed and the
// split strategies at small shapes.
void set_sm_count(uint32_t n);

}  // namespace detail

}  // namespace kaio::ops
