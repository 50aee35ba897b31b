// Interpreter: arithmetic, logic, comparison, select and fma, with the PTX codegen's
// semantics: integers wrap at their width (8-bit values compute in 16 bits and are
// re-normalized), shifts clamp (amount >= register width gives 0, or the sign for shr.s),
// f16/bf16 compute in f32 and round once, float min/max return the non-NaN operand and
// order -0 below +0, fma rounds once (f16/bf16 too).
#include <cmath>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp::impl {

namespace {

template <class C>
using Wrap = std::conditional_t<sizeof(C) <= 4, uint32_t, uint64_t>;

template <class C>
constexpr bool kInt = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// ---- binary operators on compute values ----
struct Add { template <class C> static C f(C a, C b) { if constexpr (kInt<C>) return C(Wrap<C>(a) + Wrap<C>(b)); else return a + b; } };
struct Sub { template <class C> static C f(C a, C b) { if constexpr (kInt<C>) return C(Wrap<C>(a) - Wrap<C>(b)); else return a - b; } };
struct Mul { template <class C> static C f(C a, C b) { if constexpr (kInt<C>) return C(Wrap<C>(a) * Wrap<C>(b)); else return a * b; } };
// Integer division by zero is unspecified in PTX; the interpreter gives all ones (-1) for
// div and the dividend for rem. MIN / -1 wraps to MIN, MIN % -1 is 0.
struct Div {
  template <class C>
  static C f(C a, C b) {
    if constexpr (kInt<C>) {
      if (b == 0) return C(~Wrap<C>(0));
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return C(Wrap<C>(0) - Wrap<C>(a));
      return C(a / b);
    } else {
      return a / b;
    }
  }
};
struct Rem {
  template <class C>
  static C f(C a, C b) {
    if constexpr (kInt<C>) {
      if (b == 0) return a;
      if constexpr (std::is_signed_v<C>)
        if (b == C(-1)) return C(0);
      return C(a % b);
    } else {
      return a;  // not reachable: the builder rejects % on floats
    }
  }
};
template <bool IsMin>
struct MinMax {
  template <class C>
  static C f(C a, C b) {
    if constexpr (std::is_floating_point_v<C>) {
      if (a != a) return b;
      if (b != b) return a;
      if (a == b) return (std::signbit(a) == IsMin) ? a : b;  // min(-0, +0) = -0
    }
    if constexpr (IsMin) return b < a ? b : a;
    else return a < b ? b : a;
  }
};
// Bitwise ops are not defined on floats (the builder rejects them); the float branches
// only keep the templates instantiable.
struct And { template <class C> static C f(C a, C b) { if constexpr (std::is_floating_point_v<C>) return a; else return C(a & b); } };
struct Or { template <class C> static C f(C a, C b) { if constexpr (std::is_floating_point_v<C>) return a; else return C(a | b); } };
struct Xor { template <class C> static C f(C a, C b) { if constexpr (std::is_floating_point_v<C>) return a; else return C(a ^ b); } };

struct Eq { template <class C> static bool f(C a, C b) { return a == b; } };
struct Ne { template <class C> static bool f(C a, C b) { return a != b; } };  // NaN != x
struct Lt { template <class C> static bool f(C a, C b) { return a < b; } };
struct Le { template <class C> static bool f(C a, C b) { return a <= b; } };
struct Gt { template <class C> static bool f(C a, C b) { return a > b; } };
struct Ge { template <class C> static bool f(C a, C b) { return a >= b; } };

// ---- unary ----
struct Neg { template <class C> static C f(C a) { if constexpr (kInt<C>) return C(Wrap<C>(0) - Wrap<C>(a)); else return -a; } };
struct Abs {
  template <class C>
  static C f(C a) {
    if constexpr (kInt<C> && std::is_signed_v<C>) return a < 0 ? C(Wrap<C>(0) - Wrap<C>(a)) : a;
    else if constexpr (std::is_floating_point_v<C>) return std::fabs(a);
    else return a;
  }
};
struct Not {
  template <class C>
  static C f(C a) {
    if constexpr (std::is_same_v<C, bool>) return !a;
    else if constexpr (std::is_floating_point_v<C>) return a;
    else return C(~a);
  }
};

// ---- executors ----
template <Scalar S, class Op>
void bin_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) d[l] = T::put(Op::template f<typename T::C>(T::get(a[l]), T::get(b[l])));
}

// Division can be costly (and min/max of halves): only active lanes.
template <Scalar S, class Op>
void bin_active_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for_active(w.active, [&](int l) { d[l] = T::put(Op::template f<typename T::C>(T::get(a[l]), T::get(b[l]))); });
}

template <Scalar S, class Op>
void cmp_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) d[l] = Op::template f<typename T::C>(T::get(a[l]), T::get(b[l])) ? 1 : 0;
}

template <Scalar S, class Op>
void un_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = T::put(Op::template f<typename T::C>(T::get(a[l])));
}

// Register width of the codegen (8-bit values live in 16-bit registers) and the bits of the
// amount register that cvt.u32 keeps.
template <Scalar S>
constexpr unsigned reg_bits() { return sizeof(typename V<S>::C) <= 2 ? 16 : sizeof(typename V<S>::C) * 8; }

template <Scalar S>
void shl_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  using C = typename T::C;
  constexpr unsigned rw = reg_bits<S>();
  constexpr uint64_t amask = rw == 16 ? 0xffffu : 0xffffffffu;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) {
    uint64_t n = b[l] & amask;
    uint64_t r = n >= rw ? 0 : a[l] << n;
    d[l] = T::put(static_cast<C>(r));
  }
}

template <Scalar S>
void shr_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  using C = typename T::C;
  constexpr unsigned rw = reg_bits<S>();
  constexpr uint64_t amask = rw == 16 ? 0xffffu : 0xffffffffu;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) {
    uint64_t n = b[l] & amask;
    uint64_t r;
    if constexpr (std::is_signed_v<C>) {
      int64_t x = static_cast<int64_t>(a[l]);  // sign-extended
      r = static_cast<uint64_t>(n >= rw ? (x < 0 ? -1 : 0) : x >> n);
    } else {
      r = n >= rw ? 0 : a[l] >> n;
    }
    d[l] = T::put(static_cast<C>(r));
  }
}

void select_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* c = w.slot(p.a);
  const uint64_t* a = w.slot(p.b);
  const uint64_t* b = w.slot(p.c);
  for (int l = 0; l < kLanes; ++l) d[l] = (c[l] & 1) ? a[l] : b[l];
}

// f16/bf16 fma rounded once: a*b is exact in double, a*b + c is made round-to-odd in double
// and then in f32 (both have >= 2 more bits than the target), so the final rounding to
// nearest even is that of the exact result.
float fma_odd(float a, float b, float c) {
  double p = double(a) * double(b);
  double s = p + double(c);
  if (!std::isfinite(s)) return float(s);
  double bb = s - p;
  double err = (p - (s - bb)) + (double(c) - bb);  // exact: p + c = s + err
  if (err != 0) {
    if ((err < 0) == (s > 0)) s = std::nextafter(s, 0.0);  // s overshot: truncate
    s = std::bit_cast<double>(std::bit_cast<uint64_t>(s) | 1u);
  }
  return f64_to_f32_odd(s);
}

template <Scalar S>
void fma_fn(Warp& w, const PInst& p) {
  using T = V<S>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  const uint64_t* c = w.slot(p.c);
  for_active(w.active, [&](int l) {
    if constexpr (S == Scalar::F32 || S == Scalar::F64) d[l] = T::put(std::fma(T::get(a[l]), T::get(b[l]), T::get(c[l])));
    else d[l] = T::put(fma_odd(T::get(a[l]), T::get(b[l]), T::get(c[l])));
  });
}

// dp4a.s32.s32: four signed byte products added to c, wrapping at 32 bits.
void dp4a_fn(Warp& w, const PInst& p) {
  using T = V<Scalar::S32>;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  const uint64_t* c = w.slot(p.c);
  for_active(w.active, [&](int l) {
    const uint32_t x = uint32_t(T::get(a[l])), y = uint32_t(T::get(b[l]));
    uint32_t s = uint32_t(T::get(c[l]));
    for (int k = 0; k < 32; k += 8) s += uint32_t(int32_t(int8_t(x >> k)) * int32_t(int8_t(y >> k)));
    d[l] = T::put(int32_t(s));
  });
}

// ---- packed f16x2 / bf16x2: two halves in one 32-bit slot, low half first ----
template <bool BF>
float half_to_f(uint64_t h) {
  return BF ? kaio::detail::bits_f32(static_cast<uint32_t>(h & 0xffff) << 16)
            : kaio::detail::f16_bits_to_f32(static_cast<uint16_t>(h & 0xffff));
}
template <bool BF>
uint64_t f_to_half(float f) {
  return BF ? kaio::bfloat16(f).bits : kaio::half(f).bits;
}
// Each half computed in f32 and rounded once: f32 holds the exact sum, difference and
// product of two halves to within one rounding that the final one cannot turn (24 bits >=
// 2 * 11 + 2), as for the scalar halves.
template <bool BF, int Op>
float packed_op(float a, float b) {
  if constexpr (Op == 0) return a + b;
  else if constexpr (Op == 1) return a - b;
  else if constexpr (Op == 2) return a * b;
  else if constexpr (Op == 3) return std::fmin(a, b);
  else return std::fmax(a, b);
}
template <bool BF, int Op>
void packed_bin_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for_active(w.active, [&](int l) {
    uint64_t lo = f_to_half<BF>(packed_op<BF, Op>(half_to_f<BF>(a[l]), half_to_f<BF>(b[l])));
    uint64_t hi = f_to_half<BF>(packed_op<BF, Op>(half_to_f<BF>(a[l] >> 16), half_to_f<BF>(b[l] >> 16)));
    d[l] = lo | (hi << 16);
  });
}
template <bool BF>
void packed_fma_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  const uint64_t* c = w.slot(p.c);
  for_active(w.active, [&](int l) {
    uint64_t lo = f_to_half<BF>(fma_odd(half_to_f<BF>(a[l]), half_to_f<BF>(b[l]), half_to_f<BF>(c[l])));
    uint64_t hi = f_to_half<BF>(fma_odd(half_to_f<BF>(a[l] >> 16), half_to_f<BF>(b[l] >> 16), half_to_f<BF>(c[l] >> 16)));
    d[l] = lo | (hi << 16);
  });
}
void packed_neg_fn(Warp& w, const PInst& p) {  // sign bits flipped, as neg.f16x2
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = (a[l] ^ 0x80008000u) & 0xffffffffu;
}
void packed_abs_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = a[l] & 0x7fff7fffu;
}
void pack_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  for (int l = 0; l < kLanes; ++l) d[l] = (a[l] & 0xffff) | ((b[l] & 0xffff) << 16);
}
void bitcast_fn(Warp& w, const PInst& p) {  // u32, f16x2, bf16x2: the same 32 bits
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = a[l] & 0xffffffffu;
}
template <int Half>
void unpack_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = (a[l] >> (16 * Half)) & 0xffff;
}

template <bool BF>
ExecFn pick_packed_arith(Op op) {
  switch (op) {
    case Op::Add: return &packed_bin_fn<BF, 0>;
    case Op::Sub: return &packed_bin_fn<BF, 1>;
    case Op::Mul: return &packed_bin_fn<BF, 2>;
    case Op::Min: return &packed_bin_fn<BF, 3>;
    case Op::Max: return &packed_bin_fn<BF, 4>;
    case Op::Fma: return &packed_fma_fn<BF>;
    case Op::Neg: return &packed_neg_fn;
    case Op::Abs: return &packed_abs_fn;
    default: return nullptr;
  }
}

template <class Op, bool NumericOnly>
ExecFn pick_bin(Scalar s, bool active_only) {
  return with_scalar(s, [&]<Scalar S>() -> ExecFn {
    if constexpr (NumericOnly && S == Scalar::Pred) return nullptr;
    else if (active_only) return &bin_active_fn<S, Op>;
    else return &bin_fn<S, Op>;
  });
}
template <class Op>
ExecFn pick_cmp(Scalar s) {
  return with_scalar(s, []<Scalar S>() -> ExecFn { return &cmp_fn<S, Op>; });
}
template <class Op, bool NumericOnly>
ExecFn pick_un(Scalar s) {
  return with_scalar(s, []<Scalar S>() -> ExecFn {
    if constexpr (NumericOnly && S == Scalar::Pred) return nullptr;
    else return &un_fn<S, Op>;
  });
}

}  // namespace

ExecFn less_fn(Scalar s) { return pick_cmp<Lt>(s); }
ExecFn add_fn(Scalar s) { return pick_bin<Add, true>(s, false); }

ExecFn pick_packed(const Kernel::Data& k, const Inst& i) {
  if (i.op == Op::Pack) return &pack_fn;
  if (i.op == Op::Bitcast) return &bitcast_fn;
  if (i.op == Op::Unpack) return i.attr.high ? &unpack_fn<1> : &unpack_fn<0>;
  Scalar s = k.values[i.args[0]].type.elem;
  return s == Scalar::BF16x2 ? pick_packed_arith<true>(i.op) : pick_packed_arith<false>(i.op);
}

ExecFn pick_arith(const Kernel::Data& k, const Inst& i) {
  if (i.args.empty()) return nullptr;
  Type t = k.values[i.args[0]].type;
  if (t.ptr && i.op != Op::Select) return nullptr;
  Scalar s = t.elem;
  if (t.is_packed() && i.op != Op::Select) return pick_packed(k, i);
  bool fl = is_float_scalar(s), in = is_int_scalar(s);
  switch (i.op) {
    case Op::Neg: return (fl || in) ? pick_un<Neg, true>(s) : nullptr;
    case Op::Abs: return (fl || in) ? pick_un<Abs, true>(s) : nullptr;
    case Op::Not: return fl ? nullptr : pick_un<Not, false>(s);
    case Op::Add: return pick_bin<Add, true>(s, false);
    case Op::Sub: return pick_bin<Sub, true>(s, false);
    case Op::Mul: return pick_bin<Mul, true>(s, false);
    case Op::Div: return pick_bin<Div, true>(s, true);
    case Op::Rem: return in ? pick_bin<Rem, true>(s, true) : nullptr;
    case Op::Min: return pick_bin<MinMax<true>, true>(s, is_half_scalar(s));
    case Op::Max: return pick_bin<MinMax<false>, true>(s, is_half_scalar(s));
    case Op::And: return fl ? nullptr : pick_bin<And, false>(s, false);
    case Op::Or: return fl ? nullptr : pick_bin<Or, false>(s, false);
    case Op::Xor: return fl ? nullptr : pick_bin<Xor, false>(s, false);
    case Op::Shl: return in ? with_scalar(s, []<Scalar S>() -> ExecFn { return &shl_fn<S>; }) : nullptr;
    case Op::Shr: return in ? with_scalar(s, []<Scalar S>() -> ExecFn { return &shr_fn<S>; }) : nullptr;
    case Op::Eq: return pick_cmp<Eq>(s);
    case Op::Ne: return pick_cmp<Ne>(s);
    case Op::Lt: return s == Scalar::Pred ? nullptr : pick_cmp<Lt>(s);
    case Op::Le: return s == Scalar::Pred ? nullptr : pick_cmp<Le>(s);
    case Op::Gt: return s == Scalar::Pred ? nullptr : pick_cmp<Gt>(s);
    case Op::Ge: return s == Scalar::Pred ? nullptr : pick_cmp<Ge>(s);
    case Op::Select: return &select_fn;
    case Op::Dp4a: return s == Scalar::S32 ? &dp4a_fn : nullptr;
    case Op::Fma:
      if (!fl) return nullptr;
      return with_scalar(s, []<Scalar S>() -> ExecFn {
        if constexpr (is_float_scalar(S)) return &fma_fn<S>;
        else return nullptr;
      });
    default: return nullptr;
  }
}

}  // namespace kaio::ir::interp::impl
