// Reductions built with the builder, as kernel families (jit/family.h).
#pragma once

#include <cstdint>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

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
