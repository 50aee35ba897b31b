// Reductions, as kernel families (jit/family.h).
//
// Along the last axis: out[r] = op(x[r * ld + c] for c < cols), r < rows, for sum, max,
// min, mean (f32 results) and argmax (int64 index of the first maximum). Over a whole
// array: sum, max, min into one f32. Input f32, f16 or bf16; accumulation in f32.
//
//   ops::reduce_rows<kaio::bfloat16>(ops::Reduce::Sum, sums, x, rows, cols, &stream);  // dense rows
//   ops::reduce_rows<float>(ops::Reduce::Max, maxes, x, rows, cols, ld, &stream);       // rows ld apart
//   ops::argmax_rows<float>(idx, logits, rows, vocab);
//   ops::reduce<float>(ops::Reduce::Sum, total, x, n, &stream);                        // deterministic
//
// Strategy, from the shape: 16-byte vector loads when the address and the row stride in
// bytes are multiples of 16, narrower ones otherwise; then by vectors per row: a warp per
// row (8 rows per 256-thread block) up to 256 vectors, else a block per row of 128 (up to
// 1024 vectors), 256 (up to 4096) or 1024 threads; four vectors in flight per thread. Each (dtype, op, team,
// vector width) is one config of one family, so a handful of kernels serve all shapes.
//
// The whole-array reduction is deterministic: for a given n, the split into blocks (at
// most kReduceMaxBlocks of 256 threads), each thread's order and the reduction tree are
// fixed, and the block results are combined by the last block to finish in index order
// (an integer counter, no float atomics): the same input gives bit-identical output on
// every run. It uses a small scratch buffer per stream (8 KiB, allocated on the first
// call on that stream); calls on one stream are ordered, so they never share it at once.
//
// NaN: sum and mean propagate it; max and min ignore NaN elements (as fmaxf/fminf: NaN
// only when every element is NaN); argmax treats NaN as the largest value (as PyTorch).
// Ties: argmax returns the lowest index. Bad input (null or misaligned address, zero
// sizes, ld < cols, an array shorter than the shape, unsupported dtype) is a UsageError
// naming the op and the argument, raised before anything is launched.
#pragma once

#include <cstdint>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/family.h"
#include "kaio/ops/device_arg.h"

namespace kaio::ops {

enum class Reduce : uint8_t { Sum, Max, Min, Mean, ArgMax };
const char* reduce_name(Reduce op);  // "sum", "max", ...

inline constexpr uint32_t kReduceMaxBlocks = 2048;

struct RowReduceConfig {
  ir::Scalar dtype = ir::Scalar::F32;
  Reduce op = Reduce::Sum;
  uint32_t team = 32;  // threads per row: 32 (a warp per row), 128, 256 or 1024 (a block per row)
  uint32_t vec = 1;    // elements per load
  auto fields() const { return std::tie(dtype, op, team, vec); }
};

struct ReduceAllConfig {
  ir::Scalar dtype = ir::Scalar::F32;
  Reduce op = Reduce::Sum;  // sum, max or min
  uint32_t vec = 1;
  auto fields() const { return std::tie(dtype, op, vec); }
};

// Sum, max, min or mean of each row into f32 (ArgMax: use argmax_rows).
template <class T>
void reduce_rows(Reduce op, Out<float> out, In<T> x, uint32_t rows, uint32_t cols, uint64_t ld,
                 const jit::Stream* stream = nullptr);
template <class T>
void reduce_rows(Reduce op, Out<float> out, In<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
// The index of each row's maximum.
template <class T>
void argmax_rows(Out<int64_t> out, In<T> x, uint32_t rows, uint32_t cols, uint64_t ld, const jit::Stream* stream = nullptr);
template <class T>
void argmax_rows(Out<int64_t> out, In<T> x, uint32_t rows, uint32_t cols, const jit::Stream* stream = nullptr);
// Sum, max or min of x[0 .. n) into out[0]; deterministic.
template <class T>
void reduce(Reduce op, Out<float> out, In<T> x, size_t n, const jit::Stream* stream = nullptr);

// The strategy a call uses (exposed for tests and benchmarks).
RowReduceConfig row_reduce_config(ir::Scalar dtype, Reduce op, uint32_t rows, uint32_t cols, uint64_t ld,
                                  uint64_t address);
ReduceAllConfig reduce_all_config(ir::Scalar dtype, Reduce op, uint64_t address);
uint32_t reduce_all_blocks(const ReduceAllConfig& c, size_t n);  // the grid of a whole-array reduction
jit::Family<RowReduceConfig>& reduce_rows_family();
jit::Family<ReduceAllConfig>& reduce_all_family();
// Kernel builders (params: rows: x [x_e], out, rows u32, cols u32, ld u64; all: x [x_e],
// out, partials f32*, counter u32*, n u64).
ir::Kernel build_reduce_rows(const RowReduceConfig& c);
ir::Kernel build_reduce_all(const ReduceAllConfig& c);

struct RowSumConfig {
  ir::Scalar dtype = ir::Scalar::F32;  // the matrix's element type: f32, f16 or bf16; sums are f32
  auto fields() const { return std::tie(dtype); }
};

// One thread per row: sums[r] = sum_{c < cols} m[r * cols + c], accumulated in f32 with a
// loop (params: const T* m, f32* sums, u32 rows, u32 cols). f32 declared.
jit::Family<RowSumConfig>& row_sum_family();
// The f32 kernel.
ir::Kernel row_sum_kernel();

// Launch helper: m holds rows x cols elements, sums gets rows. UsageError (op "row_sum") on
// mismatched sizes.
template <class T>
void row_sum(const jit::DeviceBuffer<T>& m, jit::DeviceBuffer<float>& sums, uint32_t rows, uint32_t cols,
             const jit::Stream* stream = nullptr);

}  // namespace kaio::ops
