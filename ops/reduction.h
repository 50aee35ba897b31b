// Reductions built with the builder.
#pragma once

#include "kaio/ir/kernel.h"

namespace kaio::ops {

// One thread per row: sums[r] = sum_{c < cols} m[r * cols + c], accumulated in f32 with a
// loop (params: const f32* m, f32* sums, u32 rows, u32 cols).
ir::Kernel row_sum_kernel();

}  // namespace kaio::ops
