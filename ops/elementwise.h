// Elementwise kernels built with the builder.
#pragma once

#include "kaio/ir/kernel.h"

namespace kaio::ops {

// y[i] = a * x[i] + y[i]  (params: f32 a, const f32* x, f32* y, u32 n)
ir::Kernel saxpy_kernel();
// out[i] = x[i] / (1 + exp(-x[i])) * gate[i]  (params: const f32* x, const f32* gate, f32* out, u32 n)
ir::Kernel silu_gate_kernel();
// 2D: c[r * ld + col] = a[r * ld + col] + alpha * b[r * ld + col] for r < rows, col < cols
// (params: const f32* a, const f32* b, f32* c, f32 alpha, u32 rows, u32 cols, u32 ld)
ir::Kernel axpby_2d_kernel();

}  // namespace kaio::ops
