#include "kaio/ops/rows.h"

#include <atomic>
#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kaio/jit/device.h"

namespace kaio::ops {

namespace {

uint32_t pow2_ceil(uint32_t v) { return v <= 1 ? 1 : std::bit_ceil(v); }
uint32_t div_up(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

RowHolds row_holds(const std::string& op) {
  return op == "softmax" || op == "log_softmax" || op == "rms_norm" ? RowHolds::AtMostOneVector : RowHolds::More;
}

RowPlan plan_rows(uint32_t rows, uint32_t cols, uint32_t vec, uint32_t sms, RowHolds holds) {
  if (sms == 0) sms = 132;
  RowPlan p;
  p.vec = vec;
  const uint32_t nv = div_up(cols, vec);  // accesses per row
  // Grow the team until the row fits in row_items(vec) accesses per thread: as many
  // threads (warps to hide latency) as the row can use, each with 16 values in flight.
  const uint32_t most = row_items(vec);
  uint32_t team = 32;
  while (team < kMaxTeam && nv > team * most) team = team == 32 ? 128 : team * 2;  // 32, 128, 256, ...
  uint32_t items = pow2_ceil(div_up(nv, team));
  if (holds == RowHolds::AtMostOneVector && vec >= 8 && nv > 512 && nv <= 1024) {  // see rows.h
    p.team = 256;
    p.items = 4;
    return p;
  }
  if (items <= most) {
    p.team = team;
    p.items = items;
    // 16-bit rows (8 elements per 16-byte access) hold half the bytes per register that f32
    // rows do, so one-shot blocks leave the memory idle during their reductions (67-76% of
    // copy on an H200): they loop over rows with the next row's loads in flight instead.
    p.persist = vec >= 8;
    return p;
  }
  // Too long for registers: a block streams the row in chunks. With too few rows to give
  // every multiprocessor two blocks, the row is split over several blocks instead.
  p.team = kMaxTeam;
  p.items = 0;
  const uint64_t chunk = uint64_t(kMaxTeam) * most * vec;  // elements per block per pass
  uint64_t want = (2ull * sms + rows - 1) / rows;                  // blocks per row to fill the GPU
  uint64_t chunks = (cols + chunk - 1) / chunk;                    // at least one chunk per block
  uint64_t split = want < chunks ? want : chunks;
  p.split = split > 1 ? static_cast<uint32_t>(split) : 1;
  p.stage = p.split == 1 && uint64_t(cols) * 4 <= kMaxStageBytes;
  return p;
}

uint32_t vector_width(ir::Scalar dtype, uint32_t cols, std::initializer_list<const RowTensor*> tensors) {
  const uint32_t v = 16 / static_cast<uint32_t>(ir::scalar_bytes(dtype));
  if (cols % v) return 1;
  for (const RowTensor* t : tensors) {
    if (t->address % 16) return 1;
    if (t->rows > 1 && t->row_stride() % v) return 1;
  }
  return v;
}

std::string describe(const RowPlan& p) {
  std::string s = "vec " + std::to_string(p.vec) + ", " + (p.team == 32 ? std::string("warp") : std::to_string(p.team) + " threads") +
                  " per row, ";
  s += p.items ? std::to_string(p.items) + " vectors per thread in registers"
               : p.stage ? std::string("staged in shared memory") : std::string("streamed");
  if (p.split > 1) s += ", " + std::to_string(p.split) + " blocks per row";
  if (p.persist) s += ", persistent (next row prefetched)";
  return s;
}

namespace detail {

void check_dtype(const char* op, const char* arg, ir::Scalar dtype) {
  if (dtype != ir::Scalar::F32 && dtype != ir::Scalar::F16 && dtype != ir::Scalar::BF16)
    throw UsageError("", op, std::string(op) + ": " + arg + " has dtype " + ir::scalar_name(dtype) +
                                 ", which is not supported (f32, f16, bf16)");
}

void check_rows(const char* op, const char* arg, const RowTensor& t) {
  auto fail = [&](const std::string& m) { throw UsageError("", op, std::string(op) + ": " + arg + " " + m); };
  if (t.address == 0) fail("is a null pointer");
  check_dtype(op, arg, t.dtype);
  if (t.rows == 0 || t.cols == 0)
    fail("has zero size (" + std::to_string(t.rows) + " x " + std::to_string(t.cols) + ")");
  if (t.stride != 0 && t.stride < t.cols)
    fail("has a row stride of " + std::to_string(t.stride) + " elements, less than its " + std::to_string(t.cols) +
         " columns");
  if (t.capacity) {
    uint64_t need = uint64_t(t.rows - 1) * t.row_stride() + t.cols;
    if (need > t.capacity)
      fail("needs " + std::to_string(need) + " elements (" + std::to_string(t.rows) + " rows, stride " +
           std::to_string(t.row_stride()) + "), its buffer holds " + std::to_string(t.capacity));
  }
}

void check_same(const char* op, const char* arg, const RowTensor& t, const char* like_name, const RowTensor& like) {
  check_rows(op, arg, t);
  if (t.rows != like.rows || t.cols != like.cols)
    throw UsageError("", op, std::string(op) + ": " + arg + " is " + std::to_string(t.rows) + " x " +
                                 std::to_string(t.cols) + ", " + like_name + " is " + std::to_string(like.rows) + " x " +
                                 std::to_string(like.cols));
  if (t.dtype != like.dtype)
    throw UsageError("", op, std::string(op) + ": " + arg + " has dtype " + ir::scalar_name(t.dtype) + ", " + like_name +
                                 " has " + ir::scalar_name(like.dtype));
}

void check_vector(const char* op, const char* arg, const RowTensor& t, uint32_t n, ir::Scalar dtype) {
  check_rows(op, arg, t);
  if (t.rows != 1 || t.cols != n)
    throw UsageError("", op, std::string(op) + ": " + arg + " must be a vector of " + std::to_string(n) +
                                 " elements, it is " + std::to_string(t.rows) + " x " + std::to_string(t.cols));
  if (t.dtype != dtype)
    throw UsageError("", op, std::string(op) + ": " + arg + " has dtype " + ir::scalar_name(t.dtype) + ", x has " +
                                 ir::scalar_name(dtype));
}

ir::Scalar access_type(ir::Scalar dtype, uint32_t vec) {
  if (vec == 1) return dtype;
  if (dtype == ir::Scalar::F16) return ir::Scalar::F16x2;
  if (dtype == ir::Scalar::BF16) return ir::Scalar::BF16x2;
  return dtype;
}

jit::detail::Arg row_pointer_arg(uint64_t address, ir::Scalar dtype, uint32_t vec) {
  return jit::detail::Arg{jit::detail::Arg::Pointer, access_type(dtype, vec), 0, address, 0};
}

Workspace workspace(const jit::Stream* stream, size_t bytes) {
  static std::mutex m;
  static auto* buffers = new std::map<void*, jit::DeviceBuffer<uint8_t>>;  // never destroyed: used until exit
  std::unique_lock<std::mutex> g(m);
  jit::DeviceBuffer<uint8_t>& b = (*buffers)[stream ? stream->handle() : nullptr];
  // Freeing the old buffer (cuMemFree) waits for the kernels still using it.
  if (b.size() < bytes) b = jit::DeviceBuffer<uint8_t>(bytes < 4096 ? 4096 : bytes * 2);
  return Workspace{std::move(g), b.device_address()};
}

SplitSpan split_span(uint32_t cols, uint32_t split, uint32_t vec) {
  uint64_t span = (uint64_t(cols) + split - 1) / split;
  span = (span + vec - 1) / vec * vec;
  return SplitSpan{static_cast<uint32_t>(span), static_cast<uint32_t>((cols + span - 1) / span)};
}

namespace {
std::atomic<uint32_t> sm_override{0};
}

namespace {
thread_local bool has_override = false;
thread_local RowPlan override_plan;
}  // namespace

void set_plan_override(const RowPlan* plan) {
  has_override = plan != nullptr;
  if (plan) override_plan = *plan;
}

RowPlan choose_plan(uint32_t rows, uint32_t cols, uint32_t vec, RowHolds holds) {
  if (has_override && override_plan.vec == vec) return override_plan;
  return plan_rows(rows, cols, vec, sm_count(), holds);
}

void set_sm_count(uint32_t n) { sm_override.store(n, std::memory_order_relaxed); }

uint32_t sm_count() {
  if (uint32_t o = sm_override.load(std::memory_order_relaxed)) return o;
  return jit::device_info().sm_count;
}

}  // namespace detail

}  // namespace kaio::ops
