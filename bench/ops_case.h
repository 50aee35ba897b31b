// One row of bench/ops: an op at a shape and dtype, the bytes it must move (each input read
// once, each output written once), and a call that enqueues it on a stream. bench/ops.cpp
// times every case with CUDA events (warm-up, median of rounds) beside a device-to-device
// copy of the same byte count, and prints GB/s and the ratio to the copy.
//
// Each op family's file contributes its cases through one function declared here; setup
// (allocation, random inputs) happens when the function is called, not in the timed loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kaio/ir/types.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::bench {

struct OpCase {
  std::string op;          // "softmax", "rms_norm", ... (the name PyTorch's rows use too)
  ir::Scalar dtype;        // f32, f16, bf16
  uint32_t rows, cols;     // the shape (elementwise ops: rows * cols elements)
  double bytes;            // bytes the op must move, counted once
  std::function<void(const jit::Stream*)> run;  // enqueues one call; holds its buffers
};

// Shapes: {8192, 8192} for the bandwidth table, {1|16|128, 4096} for the decode table.
std::vector<OpCase> elementwise_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols);
std::vector<OpCase> reduction_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols);
std::vector<OpCase> row_op_cases(ir::Scalar dtype, uint32_t rows, uint32_t cols);

}  // namespace kaio::bench
