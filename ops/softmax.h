// softmax and log_softmax along the rows of a matrix, as kernel families.
//
//   ops::softmax(ops::as_rows(x, rows, cols), ops::as_rows(y, rows, cols), &stream);
//
// y[r, c] = exp(x[r, c] - max_r) / sum_c exp(x[r, c] - max_r), and for log_softmax
// y[r, c] = x[r, c] - max_r - log(sum_c exp(x[r, c] - max_r)); computed in f32, rounded once
// to the dtype. A row held in registers is read once; a longer row is read twice, its
// statistics gathered in one pass with the online (running max, rescaled sum) update, so a
// row of -inf prefix values (a causal mask) is handled; a row of only -inf gives NaN, as
// in PyTorch. y may be x (in place). f32, f16, bf16; each UsageError names the op and the
// argument and is raised before anything is launched.
#pragma once

#include "kaio/jit/family.h"
#include "kaio/ops/row_kernel.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

void softmax(const RowTensor& x, const RowTensor& y, const jit::Stream* stream = nullptr);
void log_softmax(const RowTensor& x, const RowTensor& y, const jit::Stream* stream = nullptr);

// Kernel params: const T* x, T* y, f32* workspace, u32 rows, u32 cols, u64 x_stride,
// u64 y_stride, u32 span, u32 split (the last three only matter for split rows).
jit::Family<RowKernelConfig>& softmax_family();
jit::Family<RowKernelConfig>& log_softmax_family();

}  // namespace kaio::ops
