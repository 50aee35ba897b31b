// Arithmetic, logic, comparison, select and fma.
// f32/f64 add, sub and mul carry no rounding suffix, so ptxas may contract a mul and an add
// into one fma (as nvcc does by default); use ir::fma for a guaranteed single rounding.
// f16 add/sub/mul/min/max/neg/abs/fma use the native instructions (sm_80+); bf16 does too
// where the target has them (add/sub/mul need sm_90; on sm_80 they are one fma.rn.bf16,
// also rounded once). Division and comparisons of halves go through f32, which rounds to
// the same result: f32 has more than twice the precision bits (+2) of f16 and bf16.
// 8-bit integers compute in 16-bit registers and are re-normalized after each op.
#include "kaio/codegen/emitter.h"

#include <bit>

#include "kaio/codegen/div_magic.h"

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

// Integer division or remainder by a constant divisor of 32 or 64 bits (codegen/div_magic.h):
// a shift or a mask for a power of two (signed: biased towards zero first), a multiply-high
// and shifts for other unsigned divisors. False where it leaves the op to the generic form
// (a signed divisor that is not a power of two; zero, which the generic form keeps as
// PTX defines it).
bool emit_div_const(Emitter& e, const ir::Inst& i, Scalar s, const std::string& dst) {
  const std::optional<uint64_t>& c = e.consts[i.args[1]];
  const int bits = ir::scalar_bits(s);
  if (!c || i.type.is_float() || bits < 32) return false;
  const bool sig = i.type.is_signed(), rem = i.op == Op::Rem;
  const uint64_t mask = bits == 64 ? ~uint64_t(0) : 0xffffffffull;
  const uint64_t d = *c & mask;
  const bool neg = sig && (d >> (bits - 1)) != 0;
  if (d == 0 || neg) return false;
  const std::string w = std::to_string(bits), x = e.reg(i.args[0]);
  const RegClass rc = bits == 64 ? RegClass::B64 : RegClass::B32;
  const std::string u = ".u" + w, b = ".b" + w, sx = ".s" + w;
  auto imm = [](uint64_t v) { return std::to_string(v) + "U"; };
  if (std::has_single_bit(d)) {
    const uint32_t k = uint32_t(std::countr_zero(d));
    if (!sig) {
      e.ins(rem ? "and" + b + " " + dst + ", " + x + ", " + imm(d - 1) : "shr" + u + " " + dst + ", " + x + ", " + std::to_string(k));
      return true;
    }
    if (k == 0) {  // x / 1, x % 1
      e.ins(rem ? "mov" + b + " " + dst + ", 0" : "mov" + b + " " + dst + ", " + x);
      return true;
    }
    // Towards zero: a negative x first gains d - 1 (its sign bits shifted down to k ones).
    const std::string t = e.fresh(rc);
    e.ins("shr" + sx + " " + t + ", " + x + ", " + std::to_string(bits - 1));
    e.ins("shr" + u + " " + t + ", " + t + ", " + std::to_string(bits - k));
    e.ins("add" + sx + " " + t + ", " + x + ", " + t);
    if (!rem) {
      e.ins("shr" + sx + " " + dst + ", " + t + ", " + std::to_string(k));
    } else {
      e.ins("and" + b + " " + t + ", " + t + ", " + imm(mask & ~(d - 1)));
      e.ins("sub" + sx + " " + dst + ", " + x + ", " + t);
    }
    return true;
  }
  if (sig) return false;
  const DivMagic m = udiv_magic(d, bits);
  const std::string t = e.fresh(rc), v = e.fresh(rc), q = rem ? e.fresh(rc) : dst;
  e.ins("mul.hi" + u + " " + t + ", " + x + ", " + imm(m.mul));
  e.ins("sub" + u + " " + v + ", " + x + ", " + t);
  e.ins("shr" + u + " " + v + ", " + v + ", 1");
  e.ins("add" + u + " " + v + ", " + v + ", " + t);
  e.ins("shr" + u + " " + q + ", " + v + ", " + std::to_string(m.shift - 1));
  if (rem) {
    e.ins("mul.lo" + u + " " + v + ", " + q + ", " + imm(d));
    e.ins("sub" + u + " " + dst + ", " + x + ", " + v);
  }
  return true;
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
  if ((i.op == Op::Div || i.op == Op::Rem) && emit_div_const(e, i, s, d)) return;
  e.ins(m + "." + arith_type(s) + " " + d + ", " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]));
  e.normalize(s, d);
}

}  // namespace kaio::codegen
