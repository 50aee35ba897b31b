// Row normalisations as kernel families: rms_norm, layer_norm and the fused residual add +
// rms_norm of transformer blocks.
//
//   ops::rms_norm(ops::as_rows(x, R, C), ops::as_vector(w), ops::as_rows(y, R, C), 1e-6f, &stream);
//
//   rms_norm:     y = x * rsqrt(mean(x^2) + eps) * w
//   layer_norm:   y = (x - mean(x)) * rsqrt(var(x) + eps) * w + b      (biased variance)
//   add_rms_norm: sum = x + residual (rounded to the dtype, then stored);
//                 y = sum * rsqrt(mean(sum^2) + eps) * w               (one pass over x, residual)
//
// Statistics are accumulated in f32, the output rounded once to the dtype. w and b are
// vectors of `cols` elements of x's dtype. y may be x, and sum may be x or residual (in
// place). A row held in registers is read once; a longer row is streamed twice (layer_norm
// then sums values shifted by the row's first element, which keeps the one-pass variance
// accurate). f32, f16, bf16; each UsageError names the op and the argument and is raised
// before anything is launched.
#pragma once

#include "kaio/jit/family.h"
#include "kaio/ops/row_kernel.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

void rms_norm(const RowTensor& x, const RowTensor& w, const RowTensor& y, float eps, const jit::Stream* stream = nullptr);
void layer_norm(const RowTensor& x, const RowTensor& w, const RowTensor& b, const RowTensor& y, float eps,
                const jit::Stream* stream = nullptr);
void add_rms_norm(const RowTensor& x, const RowTensor& residual, const RowTensor& w, const RowTensor& sum,
                  const RowTensor& y, float eps, const jit::Stream* stream = nullptr);

// Kernel params (u32 rows, cols; u64 strides; f32 eps; u32 span, split for split rows):
//   rms_norm:     x, w, y, workspace, rows, cols, x_stride, y_stride, eps, span, split
//   layer_norm:   x, w, b, y, workspace, rows, cols, x_stride, y_stride, eps, span, split
//   add_rms_norm: x, residual, w, sum, y, workspace, rows, cols, x_stride, residual_stride,
//                 sum_stride, y_stride, eps, span, split
jit::Family<RowKernelConfig>& rms_norm_family();
jit::Family<RowKernelConfig>& layer_norm_family();
jit::Family<RowKernelConfig>& add_rms_norm_family();

}  // namespace kaio::ops
