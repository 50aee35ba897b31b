// Activations for 16-bit outputs; the forms and their measured errors are in ops/math16.h.
#include "kaio/ops/math16.h"

namespace kaio::ops::detail {

using ir::Value;

namespace {

constexpr float kLog2e = 1.44269504088896341f;

// sigmoid(w / log2 e) for w in log2 units: e = 2^-|w| <= 1, so 1 + e never overflows and
// e / (1 + e) keeps full relative accuracy for negative w (no 1 - x cancellation).
Value sigmoid_log2(Value w) {
  Value e = ir::exp2(-ir::abs(w));
  Value r = ir::rcp(1.0f + e);
  return ir::select(w >= 0.0f, r, e * r);
}

}  // namespace

Value exp16(Value x) { return ir::exp2(x * kLog2e); }

Value silu16(Value x) { return x * sigmoid_log2(x * kLog2e); }

// x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3); the constants carry
// 2 log2 e.
Value gelu_tanh16(Value x) {
  constexpr float c1 = 1.5957691216057308f * kLog2e;             // 2 sqrt(2/pi) log2 e
  constexpr float c3 = 1.5957691216057308f * 0.044715f * kLog2e;  // ... times 0.044715
  return x * sigmoid_log2(x * ir::fma(c3, x * x, c1));
}

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. With z = |x| / sqrt 2 and
// q = erfc(z) / 2 = t 2^(P(t) - 1 - z^2 log2 e), t = 1 / (1 + 0.45 z): Phi = q for x < 0, 1 - q
// otherwise. P is a degree-6 near-minimax fit of log2(erfc(z) / t) + z^2 log2 e over t in
// (0, 1] (all z >= 0), coefficients rounded to f32: largest error 1.6e-5 (relative error of
// erfc 2^-16.4). For z -> inf, t -> 0 and P stays bounded, so q -> 0 without overflow.
Value gelu16(Value x) {
  static constexpr float p[] = {-2.97776723f /* -1.97776723 - 1 (the 1/2) */, 1.44364262f, 0.567692101f,
                                0.189620972f,  0.0955204889f,  -0.558802545f, 0.240109712f};
  constexpr float a = 0.45f * 0.70710678118654752f;  // 0.45 / sqrt 2, applied to |x|
  constexpr float half_log2e = -0.5f * kLog2e;       // -z^2 log2 e = x * (-log2 e / 2) * x
  Value t = ir::rcp(ir::fma(ir::abs(x), a, 1.0f));
  Value poly = ir::fma(p[6], t, p[5]);
  for (int k = 4; k >= 0; --k) poly = ir::fma(poly, t, p[k]);
  Value q = t * ir::exp2(ir::fma(x * half_log2e, x, poly));
  return x * ir::select(x < 0.0f, q, 1.0f - q);
}

}  // namespace kaio::ops::detail
