// Interpreter: floating-point math. f32 (and f16/bf16, which widen to f32 exactly) compute
// in double and round once to f32; f16/bf16 then round to nearest even, as the codegen
// does. sqrt and rcp are correctly rounded (a double result rounded to f32 is: double holds
// more than 2 * 24 + 2 bits); rsqrt, exp, exp2, log, log2, tanh, sin, cos and erf are
// within 1 ulp of f32 (the double result rounded), far inside the GPU forms' bounds
// (codegen/emit_math.cpp, README). pow follows the codegen's definition: exp2(y * log2|x|)
// (in double), pow(x, 0) = 1, x < 0: NaN unless y is an integer, negative for odd y.
// floor, ceil, trunc, rint (half to even), round (half away from zero) and copysign (|a|
// with the sign of b) are exact; isnan / isinf give preds. f64: sqrt (correctly rounded),
// rsqrt (1 / sqrt in double: within 1 ulp), rcp (correctly rounded), the rounding
// functions, copysign, isnan, isinf. fast_math kernels are computed the same way (the GPU's
// approximate forms are within their bounds of these results). rcp_ftz and exp2_ftz are rcp
// and exp2 as above with the hardware's flush to zero around them: an f32-subnormal operand
// (a bf16 subnormal too: widening keeps it subnormal) is a zero of its sign, and a result that
// rounds to an f32 subnormal becomes a zero of its sign, before any rounding to f16/bf16.
#include <cmath>
#include <limits>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp::impl {

namespace {

struct Sqrt { static double f(double x) { return std::sqrt(x); } };
struct Rsqrt { static double f(double x) { return 1.0 / std::sqrt(x); } };
struct Exp { static double f(double x) { return std::exp(x); } };
struct Log { static double f(double x) { return std::log(x); } };
struct Tanh { static double f(double x) { return std::tanh(x); } };
struct Sin { static double f(double x) { return std::sin(x); } };
struct Cos { static double f(double x) { return std::cos(x); } };
struct Rcp { static double f(double x) { return 1.0 / x; } };
struct Exp2 { static double f(double x) { return std::exp2(x); } };
struct Log2 { static double f(double x) { return std::log2(x); } };
struct Erf { static double f(double x) { return std::erf(x); } };
struct Floor { static double f(double x) { return std::floor(x); } };
struct Ceil { static double f(double x) { return std::ceil(x); } };
struct Round { static double f(double x) { return std::round(x); } };  // half away from zero
struct Trunc { static double f(double x) { return std::trunc(x); } };
struct Rint { static double f(double x) { return std::nearbyint(x); } };  // default mode: half to even

template <class Op>
constexpr bool kF64 = std::is_same_v<Op, Sqrt> || std::is_same_v<Op, Rsqrt> || std::is_same_v<Op, Rcp> ||
                      std::is_same_v<Op, Floor> || std::is_same_v<Op, Ceil> || std::is_same_v<Op, Round> ||
                      std::is_same_v<Op, Trunc> || std::is_same_v<Op, Rint>;

template <Scalar S, class Op>
void math_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for_active(w.active, [&](int l) {
    if constexpr (S == Scalar::F64) {
      d[l] = T::put(Op::f(T::get(a[l])));
    } else if constexpr (std::is_same_v<Op, Sqrt>) {
      d[l] = T::put(std::sqrt(T::get(a[l])));  // sqrt.rn.f32
    } else {
      d[l] = T::put(static_cast<float>(Op::f(static_cast<double>(T::get(a[l])))));
    }
  });
}

// rcp.approx.ftz.f32 / ex2.approx.ftz.f32: the exact result rounded to f32, subnormal operands
// and results flushed to sign-preserving zeros. An Op of math_fn's kind (its f32 cast of the
// already-f32 result is exact); never f64 (pick_math refuses it).
float ftz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
template <class Op>
struct Ftz {
  static double f(double x) { return ftz(static_cast<float>(Op::f(ftz(static_cast<float>(x))))); }
};

// The codegen's pow on f32 values (see the top of this file), in double.
double pow_gpu(float x, float y) {
  if (y == 0.0f) return 1.0;
  double r = std::exp2(static_cast<double>(y) * std::log2(std::fabs(static_cast<double>(x))));
  if (!(x < 0.0f)) return r;
  if (std::trunc(y) != y) return std::numeric_limits<double>::quiet_NaN();
  float half = y * 0.5f;
  return std::trunc(half) != half ? -r : r;
}

template <Scalar S>
void pow_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for_active(w.active, [&](int l) { d[l] = T::put(static_cast<float>(pow_gpu(T::get(a[l]), T::get(b[l])))); });
}

// |a| with the sign of b, on the bits (exact for every float type).
template <Scalar S>
void copysign_fn(Warp& w, const PInst& p) {
  constexpr uint64_t sign = S == Scalar::F64 ? (uint64_t(1) << 63) : S == Scalar::F32 ? (uint64_t(1) << 31) : 0x8000u;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) d[l] = (a[l] & ~sign) | (b[l] & sign);
}

template <Scalar S, bool Nan>
void class_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) {
    auto x = T::get(a[l]);
    d[l] = Nan ? (x != x) : std::isinf(x);
  }
}

template <class Op>
ExecFn pick(Scalar s) {
  switch (s) {
    case Scalar::F16: return &math_fn<Scalar::F16, Op>;
    case Scalar::BF16: return &math_fn<Scalar::BF16, Op>;
    case Scalar::F32: return &math_fn<Scalar::F32, Op>;
    case Scalar::F64:
      if constexpr (kF64<Op>) return &math_fn<Scalar::F64, Op>;
      else return nullptr;
    default: return nullptr;
  }
}

template <template <Scalar> class F>
ExecFn pick_float(Scalar s, bool f64) {
  switch (s) {
    case Scalar::F16: return &F<Scalar::F16>::fn;
    case Scalar::BF16: return &F<Scalar::BF16>::fn;
    case Scalar::F32: return &F<Scalar::F32>::fn;
    case Scalar::F64: return f64 ? &F<Scalar::F64>::fn : nullptr;
    default: return nullptr;
  }
}
template <Scalar S> struct PowF { static void fn(Warp& w, const PInst& p) { pow_fn<S>(w, p); } };
template <Scalar S> struct CopySignF { static void fn(Warp& w, const PInst& p) { copysign_fn<S>(w, p); } };
template <Scalar S> struct IsNanF { static void fn(Warp& w, const PInst& p) { class_fn<S, true>(w, p); } };
template <Scalar S> struct IsInfF { static void fn(Warp& w, const PInst& p) { class_fn<S, false>(w, p); } };

}  // namespace

ExecFn pick_math(const Kernel::Data& k, const Inst& i) {
  if (i.args.empty()) return nullptr;
  Type t = k.values[i.args[0]].type;
  if (t.ptr) return nullptr;
  switch (i.op) {
    case Op::Sqrt: return pick<Sqrt>(t.elem);
    case Op::Rsqrt: return pick<Rsqrt>(t.elem);
    case Op::Exp: return pick<Exp>(t.elem);
    case Op::Log: return pick<Log>(t.elem);
    case Op::Tanh: return pick<Tanh>(t.elem);
    case Op::Sin: return pick<Sin>(t.elem);
    case Op::Cos: return pick<Cos>(t.elem);
    case Op::Rcp: return pick<Rcp>(t.elem);
    case Op::Exp2: return pick<Exp2>(t.elem);
    case Op::Log2: return pick<Log2>(t.elem);
    case Op::RcpFtz: return pick<Ftz<Rcp>>(t.elem);  // no f64 form (kF64 is false)
    case Op::Exp2Ftz: return pick<Ftz<Exp2>>(t.elem);
    case Op::Erf: return pick<Erf>(t.elem);
    case Op::Floor: return pick<Floor>(t.elem);
    case Op::Ceil: return pick<Ceil>(t.elem);
    case Op::Round: return pick<Round>(t.elem);
    case Op::Trunc: return pick<Trunc>(t.elem);
    case Op::Rint: return pick<Rint>(t.elem);
    case Op::Pow: return i.args.size() < 2 ? nullptr : pick_float<PowF>(t.elem, false);
    case Op::CopySign: return i.args.size() < 2 ? nullptr : pick_float<CopySignF>(t.elem, true);
    case Op::IsNan: return pick_float<IsNanF>(t.elem, true);
    case Op::IsInf: return pick_float<IsInfF>(t.elem, true);
    default: return nullptr;
  }
}

}  // namespace kaio::ir::interp::impl
