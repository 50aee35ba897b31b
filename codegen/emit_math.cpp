// Floating-point math. f32 is the working precision; f16/bf16 widen to f32 and round
// back once. Error bounds (f32 results, measured against float64):
//   sqrt   correctly rounded (sqrt.rn)
//   rsqrt  rsqrt.approx: relative error <= 2^-22.9
//   exp    ex2.approx of a two-part argument (Cody-Waite): relative error <= 4 ulp
//   log    lg2.approx * ln2: relative error <= 2^-21 away from 1, absolute <= 2^-22 near 1
//   tanh   |x| < 0.6: odd Taylor polynomial to x^15; else 1 - 2/(e^{2|x|}+1): <= 4 ulp
//   sin/cos  reduction by 2*pi (two-part constant) then sin/cos.approx:
//            absolute error <= 2^-20 for |x| <= 2^15
// f64 supports sqrt (sqrt.rn.f64) and rsqrt (rsqrt.approx.f64) only.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

namespace {

struct F32Math {
  Emitter& e;
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
    const std::string l2e = fmt_f32(1.44269502f), l2e_lo = fmt_f32(1.925963033e-8f), ln2 = fmt_f32(0.693147182f);
    std::string t = op2("mul.rn.f32", x, l2e);          // x*log2(e), rounded
    std::string nt = op1("neg.f32", t);
    std::string err = fma(x, l2e, nt);                    // exact rounding error of t
    err = fma(x, l2e_lo, err);                            // + x * (log2(e) - l2e)
    std::string p = op1("ex2.approx.f32", t);
    std::string c = op2("mul.rn.f32", err, ln2);          // 2^err ~ 1 + err*ln2
    return fma(p, c, p);
  }

  std::string log(const std::string& x) {
    std::string l = op1("lg2.approx.f32", x);
    return op2("mul.rn.f32", l, fmt_f32(0.693147182f));
  }

  std::string tanh(const std::string& x) {
    std::string ax = op1("abs.f32", x);
    // Large branch: 1 - 2 / (exp(2|x|) + 1)
    std::string two_ax = op2("add.rn.f32", ax, ax);
    std::string ex = exp(two_ax);
    std::string den = op2("add.rn.f32", ex, fmt_f32(1.0f));
    std::string q = op2("div.rn.f32", fmt_f32(2.0f), den);
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
    // k = rint(x / 2pi); r = x - k*2pi with 2pi split into hi + lo parts.
    std::string q = op2("mul.rn.f32", x, fmt_f32(0.159154943f));
    std::string k = op1("cvt.rni.f32.f32", q);
    std::string nk = op1("neg.f32", k);
    std::string r = fma(nk, fmt_f32(6.28318548f), x);
    r = fma(nk, fmt_f32(-1.74845553e-7f), r);
    return op1(is_sin ? "sin.approx.f32" : "cos.approx.f32", r);
  }
};

}  // namespace

void emit_math(Emitter& e, const ir::Inst& i) {
  Scalar s = i.type.elem;
  const std::string d = e.reg(i.result);
  if (s == Scalar::F64) {
    if (i.op == Op::Sqrt) return e.ins("sqrt.rn.f64 " + d + ", " + e.reg(i.args[0]));
    if (i.op == Op::Rsqrt) return e.ins("rsqrt.approx.f64 " + d + ", " + e.reg(i.args[0]));
    e.unsupported(i, std::string(ir::op_name(i.op)) + " on f64");
  }
  F32Math m{e};
  std::string x = e.widen_to_f32(i.args[0]);
  std::string r;
  switch (i.op) {
    case Op::Sqrt: r = m.op1("sqrt.rn.f32", x); break;
    case Op::Rsqrt: r = m.op1("rsqrt.approx.f32", x); break;
    case Op::Exp: r = m.exp(x); break;
    case Op::Log: r = m.log(x); break;
    case Op::Tanh: r = m.tanh(x); break;
    case Op::Sin: r = m.sincos(x, true); break;
    case Op::Cos: r = m.sincos(x, false); break;
    default: e.unsupported(i, "this math op");
  }
  if (s == Scalar::F32) {
    e.ins("mov.f32 " + d + ", " + r);
  } else {
    e.narrow_from_f32(r, s, d);
  }
}

}  // namespace kaio::codegen
