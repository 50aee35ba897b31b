// Interpreter: conversions (ir::cast), as the PTX codegen emits them.
//   pred -> x: 1 or 0;  x -> pred: x != 0 (NaN is true)
//   integer -> integer: truncate or extend (by the source's signedness)
//   float -> integer: round by the mode (default rzi), saturate to the range; NaN as the
//   device gives it (see float_to_int)
//   integer -> float: one rounding by the mode; -> bf16 goes through f32 (mode, then rn or
//     rz), as the codegen does
//   float -> float: widening is exact; narrowing rounds once by the mode (f64 -> f16/bf16
//     through a round-to-odd f32, as the codegen does)
//   fp8 (e4m3, e5m2) <-> float: through the exact f16; to fp8 rounds to nearest even and
//     saturates to the largest finite value (cvt.rn.satfinite)
//   saturating (kCastSaturate, imm bit 8): integer -> integer clamps the source value to
//     the target's range (cvt.sat); float targets clamp to [0, 1] after the conversion, NaN
//     -> +0 (max(x, 0) then min(x, 1), as the codegen emits); float -> integer saturates
//     anyway
#include <cfenv>
#include <cmath>
#include <limits>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp::impl {

float f64_to_f32(double d, Rounding r) {
  float f = static_cast<float>(d);  // round to nearest even
  if (r == Rounding::Rn || r == Rounding::Default || std::isnan(d) || double(f) == d) return f;
  switch (r) {
    case Rounding::Rz:
      if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
      break;
    case Rounding::Rm:
      if (double(f) > d) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
      break;
    case Rounding::Rp:
      if (double(f) < d) f = std::nextafter(f, std::numeric_limits<float>::infinity());
      break;
    default:
      break;
  }
  return f;
}

float f64_to_f32_odd(double d) {
  float f = f64_to_f32(d, Rounding::Rz);
  if (!std::isnan(d) && !std::isinf(d) && double(f) != d)
    f = kaio::detail::bits_f32(kaio::detail::f32_bits(f) | 1u);
  return f;
}

uint16_t f32_to_half_bits(float f, bool bf16, Rounding r) {
  uint16_t h = bf16 ? kaio::bfloat16(f).bits : kaio::detail::f32_to_f16_bits(f);
  if (r == Rounding::Rn || r == Rounding::Default || std::isnan(f)) return h;
  float back = bf16 ? float(kaio::bfloat16::from_bits(h)) : kaio::detail::f16_bits_to_f32(h);
  if (back == f) return h;
  // Magnitude steps: bits are monotone in |value| for each sign.
  bool neg = (h & 0x8000u) != 0;
  auto toward_zero = [&] { return static_cast<uint16_t>(h - 1); };  // |h| > 0 here
  auto away = [&] { return static_cast<uint16_t>(h + 1); };
  switch (r) {
    case Rounding::Rz:
      if (std::fabs(back) > std::fabs(f)) h = toward_zero();
      break;
    case Rounding::Rm:
      if (back > f) h = neg ? away() : toward_zero();
      break;
    case Rounding::Rp:
      if (back < f) h = neg ? toward_zero() : away();
      break;
    default:
      break;
  }
  return h;
}

namespace {

// An integer source as an exact value: int64 or uint64 with its sign.
template <class I>
double int_to_f64_odd(I x) {
  double d = static_cast<double>(x);
  if constexpr (sizeof(I) == 8) {
    __int128 back = static_cast<__int128>(d);  // d is integral; |d| <= 2^64
    __int128 exact = static_cast<__int128>(x);
    if (back != exact) {
      if ((back > exact) == (d > 0)) d = std::nextafter(d, 0.0);
      d = std::bit_cast<double>(std::bit_cast<uint64_t>(d) | 1u);
    }
  }
  return d;
}

// An integer rounded to float type F by mode r (one rounding).
template <class F, class I>
F int_to_float(I x, Rounding r) {
  if constexpr (sizeof(I) < 8) {
    double d = static_cast<double>(x);  // exact
    if constexpr (std::is_same_v<F, double>) return d;
    else return f64_to_f32(d, r);
  } else {
    F f = static_cast<F>(x);  // nearest even
    if (r == Rounding::Rn || r == Rounding::Default) return f;
    __int128 back = static_cast<__int128>(f), exact = static_cast<__int128>(x);
    if (back == exact) return f;
    const F inf = std::numeric_limits<F>::infinity();
    switch (r) {
      case Rounding::Rz:
        if ((back > exact) == (exact > 0)) f = std::nextafter(f, F(0));
        break;
      case Rounding::Rm:
        if (back > exact) f = std::nextafter(f, -inf);
        break;
      case Rounding::Rp:
        if (back < exact) f = std::nextafter(f, inf);
        break;
      default:
        break;
    }
    return f;
  }
}

template <class I>
I float_to_int(double v, Rounding r, bool from_f64) {
  // NaN, as measured on sm_90: from f64, and from any float to a 64-bit integer, the
  // "integer indefinite" value (only the top bit set: INT_MIN, or 2^(bits-1) unsigned);
  // from f32 (f16, bf16 convert through it) to 8-, 16- and 32-bit integers, 0.
  if (std::isnan(v)) {
    if (from_f64 || sizeof(I) == 8) return static_cast<I>(uint64_t(1) << (sizeof(I) * 8 - 1));
    return 0;
  }
  switch (r) {
    case Rounding::Rn: v = std::nearbyint(v); break;  // default environment: to nearest even
    case Rounding::Rm: v = std::floor(v); break;
    case Rounding::Rp: v = std::ceil(v); break;
    default: v = std::trunc(v); break;
  }
  constexpr I lo = std::numeric_limits<I>::min(), hi = std::numeric_limits<I>::max();
  // 2^(bits) bounds are exact doubles; the extreme integers may not be.
  const double top = std::ldexp(1.0, int(sizeof(I) * 8) - (std::is_signed_v<I> ? 1 : 0));
  if (v >= top) return hi;
  if (v <= static_cast<double>(lo)) return lo;
  return static_cast<I>(v);
}

template <Scalar F, Scalar T>
uint64_t cast1(uint64_t x, Rounding r) {
  using VF = V<F>;
  using VT = V<T>;
  if constexpr (F == T) {
    return x;
  } else if constexpr (F == Scalar::Pred) {
    if constexpr (is_float_scalar(T)) return VT::put(x & 1 ? 1.0f : 0.0f);
    else return VT::put(static_cast<typename VT::C>(x & 1));
  } else if constexpr (T == Scalar::Pred) {
    if constexpr (is_float_scalar(F)) return VF::get(x) != 0 ? 1 : 0;  // NaN != 0
    else return VF::get(x) != 0 ? 1 : 0;
  } else if constexpr (is_int_scalar(F) && is_int_scalar(T)) {
    return VT::put(static_cast<typename VT::C>(VF::get(x)));
  } else if constexpr (is_float_scalar(F) && is_int_scalar(T)) {
    return VT::put(float_to_int<typename VT::C>(static_cast<double>(VF::get(x)), r, F == Scalar::F64));
  } else if constexpr (is_int_scalar(F) && is_float_scalar(T)) {
    auto v = VF::get(x);
    if constexpr (T == Scalar::F64) {
      return VT::put(int_to_float<double>(v, r));
    } else if constexpr (T == Scalar::F32) {
      return VT::put(int_to_float<float>(v, r));
    } else if constexpr (T == Scalar::F16) {
      // One rounding: exact (or round-to-odd for 64-bit) double -> odd f32 -> f16 by mode.
      return f32_to_half_bits(f64_to_f32_odd(int_to_f64_odd(v)), false, r);
    } else {  // BF16: int -> f32 (mode), then f32 -> bf16 (rz or rn), as the codegen does
      float f = int_to_float<float>(v, r);
      return f32_to_half_bits(f, true, r == Rounding::Rz ? Rounding::Rz : Rounding::Rn);
    }
  } else {  // float -> float
    if constexpr (is_half_scalar(F)) {
      float f = VF::get(x);  // exact
      if constexpr (T == Scalar::F32) return VT::put(f);
      else if constexpr (T == Scalar::F64) return VT::put(double(f));
      else return f32_to_half_bits(f, T == Scalar::BF16, r == Rounding::Rz ? Rounding::Rz : Rounding::Rn);
    } else if constexpr (is_half_scalar(T)) {
      Rounding hr = r == Rounding::Rz ? Rounding::Rz : Rounding::Rn;
      if constexpr (F == Scalar::F64) return f32_to_half_bits(f64_to_f32_odd(VF::get(x)), T == Scalar::BF16, hr);
      else return f32_to_half_bits(VF::get(x), T == Scalar::BF16, hr);
    } else if constexpr (F == Scalar::F32) {  // -> f64
      return VT::put(double(VF::get(x)));
    } else {  // f64 -> f32
      return VT::put(f64_to_f32(VF::get(x), r));
    }
  }
}

template <Scalar F, Scalar T>
void cast_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  Rounding r = p.src->attr.rounding;
  for_active(w.active, [&](int l) { d[l] = cast1<F, T>(a[l], r); });
}

template <Scalar F, Scalar T>
uint64_t cast_sat1(uint64_t x, Rounding r) {
  using VF = V<F>;
  using VT = V<T>;
  if constexpr (is_int_scalar(F) && is_int_scalar(T)) {
    using C = typename VT::C;
    __int128 v = static_cast<__int128>(VF::get(x));
    const __int128 lo = std::numeric_limits<C>::min(), hi = std::numeric_limits<C>::max();
    return VT::put(static_cast<C>(v < lo ? lo : v > hi ? hi : v));
  } else if constexpr (is_float_scalar(T)) {
    uint64_t y = cast1<F, T>(x, r);
    auto f = VT::get(y);  // f16/bf16: as f32 (exact)
    if (!(f > 0)) return VT::put(0);  // NaN, -0, negatives -> +0
    if (f > 1) return VT::put(1);
    return y;
  } else {
    return cast1<F, T>(x, r);  // float -> integer saturates already
  }
}

template <Scalar F, Scalar T>
void cast_sat_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  Rounding r = p.src->attr.rounding;
  for_active(w.active, [&](int l) { d[l] = cast_sat1<F, T>(a[l], r); });
}

// fp8 conversions, as the codegen's cvt pairs do them: from fp8 through its exact f16
// (NaN: 0x7fff), then widened exactly; to fp8 from the exact (or, from f64, round-to-odd
// f32) value, to nearest even, saturating to the largest finite value (satfinite).
template <bool From8, bool FromE5, Scalar F, bool To8, bool ToE5, Scalar T>
void fp8_cast_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for_active(w.active, [&](int l) {
    if constexpr (T == Scalar::F16) {  // fp8 -> f16: the device's f16 (NaN 0x7fff)
      d[l] = kaio::detail::fp8_bits_to_f16_bits(static_cast<uint8_t>(a[l]), FromE5);
      return;
    }
    float x;  // the source value (f64: rounded to odd, as the codegen does)
    if constexpr (From8) x = V<Scalar::F16>::get(kaio::detail::fp8_bits_to_f16_bits(static_cast<uint8_t>(a[l]), FromE5));
    else if constexpr (F == Scalar::F64) x = f64_to_f32_odd(V<F>::get(a[l]));
    else x = V<F>::get(a[l]);
    if constexpr (To8) d[l] = kaio::detail::f32_to_fp8_bits(x, ToE5, true);
    else if constexpr (T == Scalar::F64) d[l] = V<T>::put(double(x));
    else d[l] = V<T>::put(x);  // f32, bf16: exact
  });
}

template <bool From8, bool FromE5, Scalar F>
ExecFn pick_fp8_to(Scalar to) {
  switch (to) {
    case Scalar::E4M3: return &fp8_cast_fn<From8, FromE5, F, true, false, Scalar::U8>;
    case Scalar::E5M2: return &fp8_cast_fn<From8, FromE5, F, true, true, Scalar::U8>;
    case Scalar::F16: return From8 ? &fp8_cast_fn<From8, FromE5, F, false, false, Scalar::F16> : nullptr;
    case Scalar::BF16: return &fp8_cast_fn<From8, FromE5, F, false, false, Scalar::BF16>;
    case Scalar::F32: return &fp8_cast_fn<From8, FromE5, F, false, false, Scalar::F32>;
    case Scalar::F64: return &fp8_cast_fn<From8, FromE5, F, false, false, Scalar::F64>;
    default: return nullptr;
  }
}

ExecFn pick_fp8_cast(Scalar from, Scalar to) {
  switch (from) {
    case Scalar::E4M3: return pick_fp8_to<true, false, Scalar::U8>(to);
    case Scalar::E5M2: return pick_fp8_to<true, true, Scalar::U8>(to);
    case Scalar::F16: return pick_fp8_to<false, false, Scalar::F16>(to);
    case Scalar::BF16: return pick_fp8_to<false, false, Scalar::BF16>(to);
    case Scalar::F32: return pick_fp8_to<false, false, Scalar::F32>(to);
    case Scalar::F64: return pick_fp8_to<false, false, Scalar::F64>(to);
    default: return nullptr;
  }
}

}  // namespace

uint64_t normalize(Type t, uint64_t bits) {
  if (t.ptr || t.elem == Scalar::F64) return bits;
  if (is_half_scalar(t.elem)) return bits & 0xffffu;  // keep NaN payloads as written
  if (t.elem == Scalar::F32) return bits & 0xffffffffu;
  return with_scalar(t.elem, [&]<Scalar S>() -> uint64_t { return V<S>::put(V<S>::get(bits)); });
}

ExecFn pick_convert(const Kernel::Data& k, const Inst& i) {
  if (i.op != Op::Cast || i.args.empty()) return nullptr;
  Type from = k.values[i.args[0]].type, to = i.type;
  if (from.ptr || to.ptr) return nullptr;
  if (from.is_fp8() || to.is_fp8()) return i.attr.saturate ? nullptr : pick_fp8_cast(from.elem, to.elem);
  if (i.attr.saturate) {
    if (from.is_pred() || to.is_pred()) return nullptr;
    return with_scalar(from.elem, [&]<Scalar F>() -> ExecFn {
      return with_scalar(to.elem, []<Scalar T>() -> ExecFn { return &cast_sat_fn<F, T>; });
    });
  }
  return with_scalar(from.elem, [&]<Scalar F>() -> ExecFn {
    return with_scalar(to.elem, []<Scalar T>() -> ExecFn { return &cast_fn<F, T>; });
  });
}

}  // namespace kaio::ir::interp::impl
