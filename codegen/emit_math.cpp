// Floating-point math. f32 is the working precision; f16/bf16 widen to f32 and round
// back once. Error bounds (f32 results, measured against float64):
//   sqrt   correctly rounded (sqrt.rn)
//   rsqrt  rsqrt.approx: relative error <= 2^-22.9
//   exp    ex2.approx of a two-part argument (Cody-Waite): relative error <= 4 ulp
//   log    lg2.approx * ln2: relative error <= 2^-21 away from 1, absolute <= 2^-22 near 1
//   tanh   |x| < 0.6: odd Taylor polynomial to x^15; else 1 - 2/(e^{2|x|}+1): <= 4 ulp
//   sin/cos  reduction by 2*pi (two-part constant) then sin/cos.approx:
//            absolute error <= 2^-20 for |x| <= 2^15
//   rcp    correctly rounded (rcp.rn); exp2 ex2.approx: <= 2 ulp; log2 lg2.approx: <= 2^-22 abs
//   erf    |x| < 0.5: Taylor series to x^13; else Abramowitz-Stegun 7.1.26 with exp above:
//          absolute error <= 4e-7
//   pow    exp2(y * log2|x|) with the sign of x for odd integer y, NaN for x < 0 and
//          non-integer y, pow(x, 0) = 1: relative error <= 2^-21 * (1 + |y log2 x|)
//   floor ceil trunc rint (half to even) round (half away from zero): exact
// fast_math: div.approx, sqrt.approx, rcp.approx, ex2 of x*log2(e) without correction,
// sin/cos.approx without range reduction, tanh.approx (relative error <= 2^-10.9).
// rcp_ftz, exp2_ftz: rcp.approx.ftz.f32, ex2.approx.ftz.f32 in every mode (subnormal operands
// and results flushed to zero; no range fix-ups from ptxas).
// f64 supports sqrt, rsqrt, rcp and the rounding functions.
#include <cmath>

#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

namespace {

struct F32Math {
  Emitter& e;
  bool fast = false;
  std::string tmp() { return e.fresh(RegClass::F32); }
  std::string op2(const char* m, const std::string& a, const std::string& b) {
    std::string r = tmp();
    e.ins(std::string(m) + " " + r + ", " + a + ", " + b);
    return r;
  }
  std::string op1(const char* m, const std::string& a) {
    std::string r = tmp();
    e.ins(std::string(m) + " " + r + ", " + a);
    return r;
  }
  std::string fma(const std::string& a, const std::string& b, const std::string& c) {
    std::string r = tmp();
    e.ins("fma.rn.f32 " + r + ", " + a + ", " + b + ", " + c);
    return r;
  }

  std::string exp(const std::string& x) {
    if (fast) return op1("ex2.approx.ftz.f32", op2("mul.rn.f32", x, fmt_f32(1.44269502f)));
    const std::string l2e = fmt_f32(1.44269502f), l2e_lo = fmt_f32(1.925963033e-8f), ln2 = fmt_f32(0.693147182f);
    std::string t = op2("mul.rn.f32", x, l2e);          // x*log2(e), rounded
    std::string nt = op1("neg.f32", t);
    std::string err = fma(x, l2e, nt);                    // exact rounding error of t
    err = fma(x, l2e_lo, err);                            // + x * (log2(e) - l2e)
    std::string p = op1("ex2.approx.f32", t);
    std::string c = op2("mul.rn.f32", err, ln2);          // 2^err ~ 1 + err*ln2
    std::string r = fma(p, c, p);
    // x = -inf or +inf makes err NaN (inf - inf), and an overflowing t makes p * c - inf + inf:
    // then 2^t itself (0, inf, or NaN for NaN) is the answer.
    std::string nan = e.fresh(RegClass::Pred), out = tmp();
    e.ins("testp.notanumber.f32 " + nan + ", " + r);
    e.ins("selp.f32 " + out + ", " + p + ", " + r + ", " + nan);
    return out;
  }

  std::string log(const std::string& x) {
    std::string l = op1("lg2.approx.f32", x);
    return op2("mul.rn.f32", l, fmt_f32(0.693147182f));
  }

  std::string tanh(const std::string& x) {
    if (fast) return op1("tanh.approx.f32", x);
    std::string ax = op1("abs.f32", x);
    // Large branch: 1 - 2 / (exp(2|x|) + 1)
    std::string two_ax = op2("add.rn.f32", ax, ax);
    std::string ex = exp(two_ax);
    std::string den = op2("add.rn.f32", ex, fmt_f32(1.0f));
    // rcp.approx (one MUFU op, <= 1 ulp) instead of div.rn: den >= 2, so 2/den <= 1 and its
    // error stays within the bound; the division made memory-bound bf16 maps compute-bound.
    std::string q = op2("mul.rn.f32", op1("rcp.approx.f32", den), fmt_f32(2.0f));
    std::string big = op2("sub.rn.f32", fmt_f32(1.0f), q);
    // Small branch: x * P(x^2), Taylor series of tanh to x^15
    static const float c[] = {-929569.0f / 638512875.0f, 21844.0f / 6081075.0f, -1382.0f / 155925.0f,
                              62.0f / 2835.0f, -17.0f / 315.0f, 2.0f / 15.0f, -1.0f / 3.0f};
    std::string x2 = op2("mul.rn.f32", ax, ax);
    std::string p = tmp();
    e.ins("mov.f32 " + p + ", " + fmt_f32(c[0]));
    for (int k = 1; k < 7; ++k) p = fma(p, x2, fmt_f32(c[k]));
    std::string px = op2("mul.rn.f32", p, x2);
    std::string small = fma(px, ax, ax);
    std::string sel = e.fresh(RegClass::Pred);
    e.ins("setp.lt.f32 " + sel + ", " + ax + ", " + fmt_f32(0.6f));
    std::string mag = tmp();
    e.ins("selp.f32 " + mag + ", " + small + ", " + big + ", " + sel);
    // copy the sign of x (keeps -0 and NaN payloads sensible)
    std::string r = tmp();
    e.ins("copysign.f32 " + r + ", " + x + ", " + mag);
    return r;
  }

  std::string sincos(const std::string& x, bool is_sin) {
    if (fast) return op1(is_sin ? "sin.approx.ftz.f32" : "cos.approx.ftz.f32", x);
    // k = rint(x / 2pi); r = x - k*2pi with 2pi split into hi + lo parts.
    std::string q = op2("mul.rn.f32", x, fmt_f32(0.159154943f));
    std::string k = op1("cvt.rni.f32.f32", q);
    std::string nk = op1("neg.f32", k);
    std::string r = fma(nk, fmt_f32(6.28318548f), x);
    r = fma(nk, fmt_f32(-1.74845553e-7f), r);
    return op1(is_sin ? "sin.approx.f32" : "cos.approx.f32", r);
  }

  std::string erf(const std::string& x) {
    std::string ax = op1("abs.f32", x);
    // Small: 2/sqrt(pi) * x * (1 - x^2/3 + x^4/10 - x^6/42 + x^8/216 - x^10/1320 + x^12/9360)
    static const float c[] = {1.0f / 9360, -1.0f / 1320, 1.0f / 216, -1.0f / 42, 1.0f / 10, -1.0f / 3, 1.0f};
    std::string x2 = op2("mul.rn.f32", x, x);
    std::string p = tmp();
    e.ins("mov.f32 " + p + ", " + fmt_f32(c[0]));
    for (int k = 1; k < 7; ++k) p = fma(p, x2, fmt_f32(c[k]));
    std::string small = op2("mul.rn.f32", op2("mul.rn.f32", p, x), fmt_f32(1.12837917f));
    // Large: 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + 0.3275911 |x|), sign of x
    // t in (0, 1]: rcp.approx (<= 1 ulp) is far inside the formula's own 1.5e-7 error.
    std::string t = op1("rcp.approx.f32", fma(ax, fmt_f32(0.3275911f), fmt_f32(1.0f)));
    static const float a[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
    std::string q = tmp();
    e.ins("mov.f32 " + q + ", " + fmt_f32(a[0]));
    for (int k = 1; k < 5; ++k) q = fma(q, t, fmt_f32(a[k]));
    q = op2("mul.rn.f32", q, t);
    std::string ex = exp(op1("neg.f32", x2));
    std::string big = fma(op1("neg.f32", q), ex, fmt_f32(1.0f));
    std::string signed_big = tmp();
    e.ins("copysign.f32 " + signed_big + ", " + x + ", " + big);
    std::string sel = e.fresh(RegClass::Pred), r = tmp();
    e.ins("setp.lt.f32 " + sel + ", " + ax + ", " + fmt_f32(0.5f));
    e.ins("selp.f32 " + r + ", " + small + ", " + signed_big + ", " + sel);
    return r;
  }

  std::string pow(const std::string& x, const std::string& y) {
    std::string ax = op1("abs.f32", x);
    std::string l = op1("lg2.approx.f32", ax);
    std::string r = op1("ex2.approx.f32", op2("mul.rn.f32", y, l));
    // x < 0: NaN unless y is an integer; negative for odd integers.
    std::string yi = op1("cvt.rzi.f32.f32", y);
    std::string is_int = e.fresh(RegClass::Pred), neg = e.fresh(RegClass::Pred), odd = e.fresh(RegClass::Pred);
    e.ins("setp.eq.f32 " + is_int + ", " + yi + ", " + y);
    e.ins("setp.lt.f32 " + neg + ", " + x + ", " + fmt_f32(0.0f));
    std::string half = op2("mul.rn.f32", y, fmt_f32(0.5f));
    std::string hi = op1("cvt.rzi.f32.f32", half);
    e.ins("setp.neu.f32 " + odd + ", " + hi + ", " + half);
    std::string negr = op1("neg.f32", r);
    std::string signed_r = tmp();
    e.ins("selp.f32 " + signed_r + ", " + negr + ", " + r + ", " + odd);
    std::string for_neg = tmp();
    e.ins("selp.f32 " + for_neg + ", " + signed_r + ", " + fmt_f32(std::nanf("")) + ", " + is_int);
    std::string out = tmp();
    e.ins("selp.f32 " + out + ", " + for_neg + ", " + r + ", " + neg);
    // pow(x, 0) = 1, also for x = 0, inf, NaN
    std::string y0 = e.fresh(RegClass::Pred), res = tmp();
    e.ins("setp.eq.f32 " + y0 + ", " + y + ", " + fmt_f32(0.0f));
    e.ins("selp.f32 " + res + ", " + fmt_f32(1.0f) + ", " + out + ", " + y0);
    return res;
  }

  // Round half away from zero: trunc, then step away when the remainder is >= 0.5.
  std::string round(const std::string& x, const char* t) {
    std::string tr = op1((std::string("cvt.rzi.") + t + "." + t).c_str(), x);
    std::string rem = op1((std::string("abs.") + t).c_str(), op2((std::string("sub.") + t).c_str(), x, tr));
    std::string one = t[1] == '3' ? fmt_f32(1.0f) : "0d3FF0000000000000";
    std::string half = t[1] == '3' ? fmt_f32(0.5f) : "0d3FE0000000000000";
    std::string step = op2((std::string("copysign.") + t).c_str(), x, one);
    std::string away = op2((std::string("add.") + t).c_str(), tr, step);
    std::string p = e.fresh(RegClass::Pred), r = tmp();
    e.ins(std::string("setp.ge.") + t + " " + p + ", " + rem + ", " + half);
    e.ins(std::string("selp.") + t + " " + r + ", " + away + ", " + tr + ", " + p);
    return r;
  }
};

}  // namespace

void emit_math(Emitter& e, const ir::Inst& i) {
  Scalar s = e.type(i.args[0]).elem;
  const std::string d = e.reg(i.result);
  bool fast = e.k.fast_math;
  if (i.op == Op::IsNan || i.op == Op::IsInf) {
    std::string x = s == Scalar::F64 ? e.reg(i.args[0]) : e.widen_to_f32(i.args[0]);
    return e.ins(std::string(i.op == Op::IsNan ? "testp.notanumber." : "testp.infinite.") +
                 (s == Scalar::F64 ? "f64 " : "f32 ") + d + ", " + x);
  }
  if (s == Scalar::F64) {
    const std::string& a = e.reg(i.args[0]);
    switch (i.op) {
      case Op::Sqrt: return e.ins("sqrt.rn.f64 " + d + ", " + a);
      case Op::Rsqrt: return e.ins("rsqrt.approx.f64 " + d + ", " + a);
      case Op::Rcp: return e.ins("rcp.rn.f64 " + d + ", " + a);
      case Op::Floor: return e.ins("cvt.rmi.f64.f64 " + d + ", " + a);
      case Op::Ceil: return e.ins("cvt.rpi.f64.f64 " + d + ", " + a);
      case Op::Trunc: return e.ins("cvt.rzi.f64.f64 " + d + ", " + a);
      case Op::Rint: return e.ins("cvt.rni.f64.f64 " + d + ", " + a);
      case Op::CopySign: return e.ins("copysign.f64 " + d + ", " + e.reg(i.args[1]) + ", " + a);
      case Op::Round: {
        // as F32Math::round, on f64 registers
        std::string tr = e.fresh(RegClass::F64), df = e.fresh(RegClass::F64), step = e.fresh(RegClass::F64),
                    away = e.fresh(RegClass::F64);
        std::string p = e.fresh(RegClass::Pred);
        e.ins("cvt.rzi.f64.f64 " + tr + ", " + a);
        e.ins("sub.f64 " + df + ", " + a + ", " + tr);
        e.ins("abs.f64 " + df + ", " + df);
        e.ins("copysign.f64 " + step + ", " + a + ", 0d3FF0000000000000");
        e.ins("add.f64 " + away + ", " + tr + ", " + step);
        e.ins("setp.ge.f64 " + p + ", " + df + ", 0d3FE0000000000000");
        return e.ins("selp.f64 " + d + ", " + away + ", " + tr + ", " + p);
      }
      default:
        e.unsupported(i, std::string(ir::op_name(i.op)) + " on f64");
    }
  }
  F32Math m{e, fast};
  std::string x = e.widen_to_f32(i.args[0]);
  std::string r;
  switch (i.op) {
    case Op::Sqrt: r = m.op1(fast ? "sqrt.approx.f32" : "sqrt.rn.f32", x); break;
    case Op::Rsqrt: r = m.op1("rsqrt.approx.f32", x); break;
    case Op::Rcp: r = m.op1(fast ? "rcp.approx.f32" : "rcp.rn.f32", x); break;
    case Op::Exp: r = m.exp(x); break;
    case Op::Exp2: r = m.op1("ex2.approx.f32", x); break;
    case Op::Log: r = m.log(x); break;
    case Op::Log2: r = m.op1("lg2.approx.f32", x); break;
    case Op::RcpFtz: r = m.op1("rcp.approx.ftz.f32", x); break;
    case Op::Exp2Ftz: r = m.op1("ex2.approx.ftz.f32", x); break;
    case Op::Tanh: r = m.tanh(x); break;
    case Op::Sin: r = m.sincos(x, true); break;
    case Op::Cos: r = m.sincos(x, false); break;
    case Op::Erf: r = m.erf(x); break;
    case Op::Floor: r = m.op1("cvt.rmi.f32.f32", x); break;
    case Op::Ceil: r = m.op1("cvt.rpi.f32.f32", x); break;
    case Op::Trunc: r = m.op1("cvt.rzi.f32.f32", x); break;
    case Op::Rint: r = m.op1("cvt.rni.f32.f32", x); break;
    case Op::Round: r = m.round(x, "f32"); break;
    case Op::Pow: r = m.pow(x, e.widen_to_f32(i.args[1])); break;
    case Op::CopySign: {  // PTX copysign copies the sign of its first operand
      r = m.tmp();
      e.ins("copysign.f32 " + r + ", " + e.widen_to_f32(i.args[1]) + ", " + x);
      break;
    }
    default: e.no_emitter(i);
  }
  if (s == Scalar::F32) {
    e.ins("mov.f32 " + d + ", " + r);
  } else {
    e.narrow_from_f32(r, s, d);
  }
}

}  // namespace kaio::codegen
