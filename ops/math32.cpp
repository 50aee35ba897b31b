// gelu and gelu_tanh for f32 outputs; the forms and their measured errors are in ops/math32.h.
#include "kaio/ops/math32.h"

namespace kaio::ops::detail {

using ir::Value;

namespace {

constexpr float kLog2e = 1.44269504088896341f;

// 2^w for w <= 0 as (2^(w/2))^2, from h = w/2: ex2.approx.ftz flushes only when w < -252.
Value exp2_squared(Value h) {
  Value e = ir::exp2_ftz(h);
  return e * e;
}

}  // namespace

// gelu(x) = x Phi(x). With z = |x| / sqrt 2 and t = 1 / (1 + 0.45 z),
// q = erfc(z) / 2 = t 2^(P(t) - 1 - z^2 log2 e). P fits log2(erfc(z) / t) + z^2 log2 e over
// z in [0, 10] (beyond it q < 2^-147 and the output is below the f32 range: P stays bounded
// as t -> 0, so the exponent only falls). The coefficients are f32 values, halved in use
// (exactly) for the half exponent; the constant term carries the -1 of the 1/2.
Value gelu32(Value x) {
  static constexpr float p[] = {-2.9779067f, 1.44655573f, 0.533899963f, 0.440031379f, -0.993455112f,
                                2.18566442f, -3.7934823f,  3.38341808f,  -1.48542166f, 0.260696113f};
  constexpr float a = 0.45f * 0.70710678118654752f;  // 0.45 / sqrt 2, applied to |x|
  constexpr float quarter_log2e = -0.25f * kLog2e;   // (-z^2 log2 e) / 2 = x * (-log2 e / 4) * x
  Value t = ir::rcp_ftz(ir::fma(ir::abs(x), a, 1.0f));
  Value poly = ir::fma(0.5f * p[9], t, 0.5f * p[8]);
  for (int k = 7; k >= 0; --k) poly = ir::fma(poly, t, 0.5f * p[k]);
  Value q = t * exp2_squared(ir::fma(x * quarter_log2e, x, poly));
  return x * ir::select(x < 0.0f, q, 1.0f - q);
}

// x sigmoid(2u): e = 2^(-|w|), w = 2u log2 e = x (c1 + c3 x^2) (c1, c3 > 0, so w has x's
// sign and -|w| / 2 = |x| (-c1 - c3 x^2) / 2). e <= 1, so 1 + e never overflows and e / (1 + e)
// keeps full relative accuracy for negative x.
Value gelu_tanh32(Value x) {
  constexpr float c1 = 1.5957691216057308f * kLog2e;             // 2 sqrt(2/pi) log2 e
  constexpr float c3 = 1.5957691216057308f * 0.044715f * kLog2e;  // ... times 0.044715
  Value e = exp2_squared(ir::abs(x) * ir::fma(-0.5f * c3, x * x, -0.5f * c1));
  Value r = ir::rcp_ftz(1.0f + e);
  return x * ir::select(x >= 0.0f, r, e * r);
}

}  // namespace kaio::ops::detail
