// gelu and gelu_tanh for f32 outputs: one short form each, with no second branch of a
// transcendental and no 1 + erf / 1 + tanh cancellation for negative x. The f32 kernels of
// gelu, gelu_tanh, gelu_gate and gelu_gate_tanh use them (silu and exp keep the IR's math).
//
//   gelu        x Phi(x): q = erfc(|x| / sqrt 2) / 2 = t 2^(P(t) - z^2 log2 e), t = 1 / (1 + 0.45 z),
//               P a degree-9 near-minimax fit (|error| 2^-24 in log2 units); Phi = q for
//               x < 0, 1 - q otherwise.
//   gelu_tanh   x sigmoid(2u) (= x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)),
//               sigmoid from e = 2^(-2|u| log2 e): 1 / (1 + e) or e / (1 + e).
//
// Their MUFU steps are the flush-to-zero ex2.approx and rcp.approx (no ptxas range
// fix-ups). The exponential is taken as (2^(w/2))^2: the half exponent flushes only below
// 2^-252, so the negative tails keep every normal and subnormal f32 output, rounded once by
// the multiplications. rcp's operands are in [1, inf].
//
// Errors against float64 (tests/ops/test_elementwise32.cpp: every 16384th f32 bit pattern
// and a dense sweep of [-14, 14]; the interpreter computes ex2 and rcp exactly and rounds to
// f32, the device's .approx steps add up to 2 ulp each), in f32 ulps, at most:
//
//   op               x >= -2          x < -2 (tail)
//   gelu             8.7 (x = 0.015)  120 (x = -13.2)
//   gelu_tanh        6.5 (x = -1.84)  166 (x = -9.9)
//   gelu_gate        8.4              147      (random gates in [-4, 4])
//   gelu_gate_tanh   6.4              190
//
// The tail's error is the rounding of the exponent itself: three roundings of a half
// exponent |h| <= 90 (beyond, the output is below f32's range), each <= |h| 2^-24, doubled by
// the squaring: relative error <= 2^-16.2 (<= 220 ulp). The IR's erf / tanh forms these
// replace computed 1 + erf(..) and 1 + tanh(..): ~100 ulp at x = -1.8 already and no correct
// bit below x = -5 (torch's gelu computes 1 + erf as well).
#pragma once

#include "kaio/ir/builder.h"

namespace kaio::ops::detail {

ir::Value gelu32(ir::Value x);
ir::Value gelu_tanh32(ir::Value x);

}  // namespace kaio::ops::detail
