// Activations built for 16-bit outputs. A bf16 result keeps 8 significant bits and an f16
// result 11, so the f32 work before the final rounding only needs a relative error well below
// 2^-12 (half an f16 ulp): these forms use ex2.approx and rcp.approx (one MUFU op each,
// relative error <= 2^-22) and one short polynomial, and never evaluate two branches of a
// transcendental. silu, gelu_tanh and gelu use the flush-to-zero forms (ir::exp2_ftz,
// ir::rcp_ftz): ptxas emits them without the ~3 range fix-ups each of the non-flushing ones.
// Their rcp operands are in [1, inf), where flushing changes nothing that reaches the output;
// their exponentials are taken as 2^(w + 24) 2^-24, so that the flush (below 2^-126) only
// removes values below 2^-150, which round to 0 in f32 anyway: bf16 has the f32 exponent range,
// and silu's negative tail reaches nonzero bf16 outputs from exponentials down to 2^-141
// (further with a gate > 1; ops/math16.cpp). SASS per element (sm_90, bf16_v8 maps): silu
// 20.1 -> 12.9, gelu_tanh 22.0 -> 15.0, gelu 29.2 -> 21.2.
// exp keeps exp2 (ex2.approx, subnormal results kept, as its bf16 outputs need).
//
// Measured over all 65,536 inputs of each 16-bit type against float64 (the interpreter, which
// computes exp2 and rcp exactly and rounds to f32: within 2 f32 ulp of the hardware's; the
// device run of the same test confirms), as the largest error in ulps of the output type:
//
//   op          bf16     f16      form
//   exp         0.5002   0.5000   exp2(x * log2 e)
//   silu        0.5000   0.5005   x * sigmoid(x), sigmoid from e = 2^(-|x| log2 e): 1/(1+e) or e/(1+e)
//   gelu_tanh   0.5000   0.5005   x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) (= x/2 (1 + tanh(..)))
//   gelu        0.5113   0.5142   x * Phi(x), Phi from q = erfc(|x|/sqrt 2)/2 (q or 1 - q), q by a
//                                 fit of the output's degree (bf16 4, f16 5: relative error 2^-14,
//                                 2^-17), with no cancellation for x < 0
//
// (0.5 is the rounding to the output type itself.) The gated forms multiply by the gate in
// f32 before the one rounding. tanh.approx.f32 (relative error 2^-10.99) was not used: it
// would cost f16 outputs up to 0.25 ulp more, and sigmoid(2u) gives the same tanh-gelu with
// two MUFU ops and no cancellation for negative x. Packed bf16x2 / f16x2 arithmetic was not
// used either: each step would round to 8 (11) bits, and the erfc and sigmoid steps need f32.
#pragma once

#include "kaio/ir/builder.h"

namespace kaio::ops::detail {

ir::Value exp16(ir::Value x);
ir::Value silu16(ir::Value x);
ir::Value gelu_tanh16(ir::Value x);
ir::Value gelu16(ir::Value x);

}  // namespace kaio::ops::detail
