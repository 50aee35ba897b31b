// Activations for 16-bit outputs; the forms and their measured errors are in ops/math16.h.
#include "kaio/ops/math16.h"

#include <vector>

#include "kaio/ops/map_dtype.h"

namespace kaio::ops::detail {

using ir::Value;

namespace {

constexpr float kLog2e = 1.44269504088896341f;

// The flush-to-zero ex2 gives 0 below 2^-126, yet bf16 keeps the f32 exponent range: x e^x
// for silu at x = -90 is 2^-123 (a normal bf16) from e = 2^-130, and the gated forms multiply
// such tails by the gate before rounding. So each tail exponential is 2^(w + kShift) 2^-kShift
// with kShift = 24: ex2 flushes only below 2^-150 (after the scale), which rounds to 0 in f32
// as well, and the multiply (which keeps f32 subnormals) rounds the rest once, as a
// non-flushing ex2 would: as accurate as with ex2.approx.f32, for every input and gate.
// (A shift of 16 was not enough: silu_gate bf16 with gates in [-4, 4] was off by 0.71 ulp at
// x = -98.5; no shift: silu bf16 off by 245 ulp near x = -90, gelu_tanh by 155 near -10.) The
// exponent's rounding stays small: 24 - |w| has spacing <= 2^-19 for |w| <= 8 (relative error
// of e <= 2^-20.5, 0.0014 f16 ulp at most).
constexpr float kShift = 24.0f, kUnshift = 0x1p-24f;

// sigmoid(w / log2 e) in log2 units, from s = kShift - |w| and w's sign: e = 2^-|w| <= 1, so
// 1 + e never overflows and e / (1 + e) keeps full relative accuracy for negative w (no
// 1 - x cancellation). rcp_ftz cannot flush: 1 + e is in [1, 2].
Value sigmoid_log2(Value w_nonneg, Value s) {
  Value e = ir::exp2_ftz(s) * kUnshift;
  Value r = ir::rcp_ftz(1.0f + e);
  return ir::select(w_nonneg, r, e * r);
}

}  // namespace

Value exp16(Value x) { return ir::exp2(x * kLog2e); }

// w = x log2 e; kShift - |w| as one fma.
Value silu16(Value x) { return x * sigmoid_log2(x >= 0.0f, ir::fma(ir::abs(x), -kLog2e, kShift)); }

// x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3); the constants carry
// 2 log2 e. w = x (c1 + c3 x^2) has x's sign (c1, c3 > 0), so kShift - |w| = |x| (-c1 - c3 x^2)
// + kShift.
Value gelu_tanh16(Value x) {
  constexpr float c1 = 1.5957691216057308f * kLog2e;             // 2 sqrt(2/pi) log2 e
  constexpr float c3 = 1.5957691216057308f * 0.044715f * kLog2e;  // ... times 0.044715
  return x * sigmoid_log2(x >= 0.0f, ir::fma(ir::abs(x), ir::fma(-c3, x * x, -c1), kShift));
}

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. With z = |x| / sqrt 2 and
// q = erfc(z) / 2 = t 2^(P(t) - 1 - z^2 log2 e), t = 1 / (1 + a z): Phi = q for x < 0, 1 - q
// otherwise. P is a near-minimax fit of log2(erfc(z) / t) + z^2 log2 e over z in [0, 10]
// (beyond, q < 2^-147: below every 16-bit output), coefficients rounded to f32, of the degree
// the output needs: f16 degree 5 (a = 0.5, largest error 2^-16.5: relative error of erfc
// 2^-17), bf16 degree 4 (a = 0.7, 2^-13.5: 2^-14, 0.016 bf16 ulp). For z -> inf, t -> 0 and P
// stays bounded, so q -> 0 without overflow. The constant term also carries kShift (see
// above): q = t 2^(... + kShift) 2^-kShift. rcp_ftz flushes t only for |x| > 2^127, where q is
// 0 anyway.
Value gelu16(Value x) {
  struct Fit {
    float a;
    std::vector<float> p;  // p[0] carries -1 (the 1/2) and kShift
  };
  static const Fit f16{0.5f, {21.1727657f, 1.46868336f, 0.367082834f, 0.68455106f, -1.02314794f, 0.330075234f}};
  static const Fit bf16{0.7f, {21.6633167f, 1.38244867f, 0.721923411f, -1.12948585f, 0.361737758f}};
  const Fit& f = building_map_dtype() == ir::Scalar::BF16 ? bf16 : f16;
  const float a = f.a * 0.70710678118654752f;    // a / sqrt 2, applied to |x|
  constexpr float half_log2e = -0.5f * kLog2e;  // -z^2 log2 e = x * (-log2 e / 2) * x
  Value t = ir::rcp_ftz(ir::fma(ir::abs(x), a, 1.0f));
  const size_t d = f.p.size() - 1;
  Value poly = ir::fma(f.p[d], t, f.p[d - 1]);
  for (size_t k = d - 1; k-- > 0;) poly = ir::fma(poly, t, f.p[k]);
  Value q = t * ir::exp2_ftz(ir::fma(x * half_log2e, x, poly)) * kUnshift;
  return x * ir::select(x < 0.0f, q, 1.0f - q);
}

}  // namespace kaio::ops::detail
