// Arithmetic, logic, comparison, select and fma.
// f32/f64 add, sub and mul carry no rounding suffix, so ptxas may contract a mul and an add
// into one fma (as nvcc does by default); use ir::fma for a guaranteed single rounding.
// f16 add/sub/mul/min/max/neg/abs/fma use the native instructions (sm_80+); bf16 does too
// where the target has them (add/sub/mul need sm_90; on sm_80 they are one fma.rn.bf16,
// also rounded once). Division and comparisons of halves go through f32, which rounds to
// the same result: f32 has more than twice the precision bits (+2) of f16 and bf16.
// 8-bit integers compute in 16-bit registers and are re-normalized after each op.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

namespace {

bool is_half(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16; }
bool is_cmp(Op op) { return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge; }

const char* cmp_name(Op op, bool is_float) {
  switch (op) {
    case Op::Eq: return "eq";
    case Op::Ne: return is_float ? "neu" : "ne";  // C semantics: NaN != x is true
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    default: return "ge";
  }
}

// The PTX mnemonic (without type) of a binary op on a given scalar.
std::string bin_mnemonic(Op op, Scalar s, bool fast = false) {
  bool fl = s == Scalar::F32 || s == Scalar::F64 || is_half(s);
  switch (op) {
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return fl ? "mul" : "mul.lo";
    case Op::Div: return fl ? (fast && s == Scalar::F32 ? "div.approx" : "div.rn") : "div";
    case Op::Rem: return "rem";
    case Op::Min: return "min";
    case Op::Max: return "max";
    default: return {};  // not a binary arithmetic op: the caller reports it
  }
}

const char* bit_type(Scalar s) {
  switch (ir::scalar_bits(s)) {
    case 1: return "pred";
    case 8: case 16: return "b16";
    case 32: return "b32";
    default: return "b64";
  }
}

}  // namespace

// f16x2 / bf16x2: the pairwise instructions, each half rounded once (bf16x2 add/sub/mul
// need sm_90; before it they are one fma.rn.bf16x2).
void emit_packed(Emitter& e, const ir::Inst& i, Scalar s, const std::string& d) {
  const char* t = arith_type(s);
  switch (i.op) {
    case Op::Neg: case Op::Abs:
      return e.ins(std::string(i.op == Op::Neg ? "neg." : "abs.") + t + " " + d + ", " + e.reg(i.args[0]));
    case Op::Fma:
      return e.ins(std::string("fma.rn.") + t + " " + d + ", " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]) + ", " +
                   e.reg(i.args[2]));
    case Op::Select:
      return e.ins("selp.b32 " + d + ", " + e.reg(i.args[1]) + ", " + e.reg(i.args[2]) + ", " + e.reg(i.args[0]));
    case Op::Min: case Op::Max:
      return e.ins(std::string(i.op == Op::Min ? "min." : "max.") + t + " " + d + ", " + e.reg(i.args[0]) + ", " +
                   e.reg(i.args[1]));
    default:
      break;
  }
  const std::string& a = e.reg(i.args[0]);
  const std::string& b = e.reg(i.args[1]);
  const char* m = i.op == Op::Add ? "add" : i.op == Op::Sub ? "sub" : "mul";
  if (s == Scalar::F16x2 || e.sm() >= 90) return e.ins(std::string(m) + ".rn." + t + " " + d + ", " + a + ", " + b);
  std::string k = e.fresh(RegClass::B32);
  if (i.op == Op::Add) {
    e.ins("mov.b32 " + k + ", 0x3F803F80");
    return e.ins("fma.rn.bf16x2 " + d + ", " + a + ", " + k + ", " + b);
  }
  if (i.op == Op::Sub) {
    e.ins("mov.b32 " + k + ", 0xBF80BF80");
    return e.ins("fma.rn.bf16x2 " + d + ", " + b + ", " + k + ", " + a);
  }
  e.ins("mov.b32 " + k + ", 0x80008000");
  return e.ins("fma.rn.bf16x2 " + d + ", " + a + ", " + b + ", " + k);
}

void emit_arith(Emitter& e, const ir::Inst& i) {
  Scalar s = e.type(i.args[0]).elem;
  const std::string d = e.reg(i.result);
  Scalar vs = i.op == Op::Select ? e.type(i.args[1]).elem : s;
  if (vs == Scalar::F16x2 || vs == Scalar::BF16x2) return emit_packed(e, i, vs, d);

  if (is_cmp(i.op)) {
    if (s == Scalar::Pred) {  // pred == pred: xor (+ not)
      const std::string& a = e.reg(i.args[0]);
      const std::string& b = e.reg(i.args[1]);
      e.ins("xor.pred " + d + ", " + a + ", " + b);
      if (i.op == Op::Eq) e.ins("not.pred " + d + ", " + d);
      return;
    }
    bool fl = e.type(i.args[0]).is_float();
    std::string a = is_half(s) ? e.widen_to_f32(i.args[0]) : e.reg(i.args[0]);
    std::string b = is_half(s) ? e.widen_to_f32(i.args[1]) : e.reg(i.args[1]);
    const char* t = is_half(s) ? "f32" : arith_type(s);
    e.ins(std::string("setp.") + cmp_name(i.op, fl) + "." + t + " " + d + ", " + a + ", " + b);
    return;
  }

  switch (i.op) {
    case Op::Neg: case Op::Abs: {
      const char* m = i.op == Op::Neg ? "neg" : "abs";
      if (is_half(s)) {
        e.ins(std::string(m) + "." + arith_type(s) + " " + d + ", " + e.reg(i.args[0]));
        return;
      }
      if (false) {
        std::string f = e.widen_to_f32(i.args[0]);
        std::string r = e.fresh(RegClass::F32);
        e.ins(std::string(m) + ".f32 " + r + ", " + f);
        e.narrow_from_f32(r, s, d);
      } else {
        e.ins(std::string(m) + "." + arith_type(s) + " " + d + ", " + e.reg(i.args[0]));
        e.normalize(s, d);
      }
      return;
    }
    case Op::Not:
      e.ins(std::string("not.") + bit_type(s) + " " + d + ", " + e.reg(i.args[0]));
      e.normalize(s, d);
      return;
    case Op::And: case Op::Or: case Op::Xor: {
      const char* m = i.op == Op::And ? "and" : i.op == Op::Or ? "or" : "xor";
      e.ins(std::string(m) + "." + bit_type(s) + " " + d + ", " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]));
      return;
    }
    case Op::Shl: case Op::Shr: {
      // PTX takes the shift amount as a u32 register.
      std::string amount = e.reg(i.args[1]);
      int bits = ir::scalar_bits(s);
      if (bits != 32) {
        std::string r = e.fresh(RegClass::B32);
        e.ins(std::string("cvt.u32.") + (bits == 64 ? "u64" : "u16") + " " + r + ", " + amount);
        amount = r;
      }
      std::string m = i.op == Op::Shl ? std::string("shl.") + bit_type(s)
                                      : std::string("shr.") + arith_type(s);
      e.ins(m + " " + d + ", " + e.reg(i.args[0]) + ", " + amount);
      e.normalize(s, d);
      return;
    }
    case Op::Select: {
      Scalar vt = e.type(i.args[1]).elem;
      const std::string& c = e.reg(i.args[0]);
      if (vt == Scalar::Pred) {
        std::string t1 = e.fresh(RegClass::Pred), t2 = e.fresh(RegClass::Pred);
        e.ins("and.pred " + t1 + ", " + c + ", " + e.reg(i.args[1]));
        e.ins("not.pred " + t2 + ", " + c);
        e.ins("and.pred " + t2 + ", " + t2 + ", " + e.reg(i.args[2]));
        e.ins("or.pred " + d + ", " + t1 + ", " + t2);
        return;
      }
      // a pointer (a global address) is 64 bits whatever it points to
      const char* t = e.type(i.args[1]).ptr ? "b64" : is_half(vt) ? "b16" : arith_type(vt);
      e.ins(std::string("selp.") + t + " " + d + ", " + e.reg(i.args[1]) + ", " + e.reg(i.args[2]) + ", " + c);
      return;
    }
    case Op::Dp4a:
      e.ins("dp4a.s32.s32 " + d + ", " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]) + ", " + e.reg(i.args[2]));
      return;
    case Op::Fma: {
      Scalar vt = i.type.elem;
      e.ins(std::string("fma.rn.") + arith_type(vt) + " " + d + ", " + e.reg(i.args[0]) + ", " +
            e.reg(i.args[1]) + ", " + e.reg(i.args[2]));
      return;
    }
    default:
      break;
  }

  // add sub mul div rem min max
  std::string m = bin_mnemonic(i.op, s, e.k.fast_math);
  if (m.empty()) e.no_emitter(i);
  if (is_half(s) && i.op != Op::Div) {
    const std::string& a = e.reg(i.args[0]);
    const std::string& b = e.reg(i.args[1]);
    bool native = s == Scalar::F16 || i.op == Op::Min || i.op == Op::Max || e.sm() >= 90;
    // .rn: each half op rounds once, never contracted with a neighbour into an fma.
    if (native) {
      bool minmax = i.op == Op::Min || i.op == Op::Max;
      return e.ins(m + (minmax ? "." : ".rn.") + arith_type(s) + " " + d + ", " + a + ", " + b);
    }
    // bf16 add/sub/mul before sm_90: one fma, one rounding.
    std::string k = e.fresh(RegClass::H16);
    if (i.op == Op::Add) {
      e.ins("mov.b16 " + k + ", 0x3F80");  // 1.0
      return e.ins("fma.rn.bf16 " + d + ", " + a + ", " + k + ", " + b);
    }
    if (i.op == Op::Sub) {
      e.ins("mov.b16 " + k + ", 0xBF80");  // -1.0
      return e.ins("fma.rn.bf16 " + d + ", " + b + ", " + k + ", " + a);
    }
    e.ins("mov.b16 " + k + ", 0x8000");  // -0.0 keeps the sign of a zero product
    return e.ins("fma.rn.bf16 " + d + ", " + a + ", " + b + ", " + k);
  }
  if (is_half(s)) {  // division through f32
    std::string a = e.widen_to_f32(i.args[0]);
    std::string b = e.widen_to_f32(i.args[1]);
    std::string r = e.fresh(RegClass::F32);
    e.ins(bin_mnemonic(i.op, Scalar::F32, e.k.fast_math) + ".f32 " + r + ", " + a + ", " + b);
    e.narrow_from_f32(r, s, d);
    return;
  }
  e.ins(m + "." + arith_type(s) + " " + d + ", " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]));
  e.normalize(s, d);
}

}  // namespace kaio::codegen
