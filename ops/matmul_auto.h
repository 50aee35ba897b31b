// C = alpha * A * B + beta * C with the variant the autotuner chose for the problem's
// bucket (ops/matmul_tune.h): the first call of a bucket in a process reads the tuning
// record or tunes (KAIO_TUNE), later calls look the bucket up in an in-process map and
// launch the chosen variant's loaded kernel (no IR rebuild, no tuning-table read).
//
//   ops::matmul_auto(dA, dB, dC, {.m = 4096, .n = 4096, .k = 4096, .in = ir::Scalar::F16});
#pragma once

#include <cstdint>

#include "kaio/jit/buffer.h"
#include "kaio/ops/matmul.h"

namespace kaio::ops {

// `scales`: FP8 inputs' per-tensor scales (ops/matmul.h), device addresses of one f32 each.
void matmul_auto(uint64_t a, uint64_t b, uint64_t c, const MatmulProblem& p, const jit::Stream* stream = nullptr,
                 const MatmulScales& scales = {});

template <class TA, class TB, class TC>
void matmul_auto(jit::DevicePtr<TA> a, jit::DevicePtr<TB> b, jit::DevicePtr<TC> c, const MatmulProblem& p,
                 const jit::Stream* stream = nullptr, const MatmulScales& scales = {}) {
  matmul_auto(a.address, b.address, c.address, p, stream, scales);
}
template <class TA, class TB, class TC>
void matmul_auto(const jit::DeviceBuffer<TA>& a, const jit::DeviceBuffer<TB>& b, jit::DeviceBuffer<TC>& c,
                 const MatmulProblem& p, const jit::Stream* stream = nullptr, const MatmulScales& scales = {}) {
  matmul_auto(a.device_address(), b.device_address(), c.device_address(), p, stream, scales);
}

// The variant matmul_auto uses for p (choosing it as a call would: tunes on a first call).
const MatmulVariant& matmul_auto_variant(const MatmulProblem& p, const jit::Stream* stream = nullptr);

// Forgets the in-process choices (the next call of each bucket reads the tuning table
// again). For tests and benchmarks.
void matmul_auto_reset();

}  // namespace kaio::ops
