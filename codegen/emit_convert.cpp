// Conversions (ir::cast). The rounding mode was resolved by the builder, so Default
// here means "exact" (widening, integer<->integer, pred).
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Rounding;
using ir::Scalar;

namespace {

bool is_half(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16; }

std::string rnd_float(Rounding r) {  // for float results
  switch (r) {
    case Rounding::Rz: return ".rz";
    case Rounding::Rm: return ".rm";
    case Rounding::Rp: return ".rp";
    default: return ".rn";
  }
}
std::string rnd_int(Rounding r) {  // for integer results from floats
  switch (r) {
    case Rounding::Rn: return ".rni";
    case Rounding::Rm: return ".rmi";
    case Rounding::Rp: return ".rpi";
    default: return ".rzi";
  }
}

// An f64 rounded to odd into f32 (truncate, then set the last bit if anything was lost):
// f32 has more than 2 bits beyond 16-bit (and 8-bit) precision, so a final rounding to
// f16/bf16/fp8 is then correct for both rn and rz.
std::string f64_to_f32_odd(Emitter& e, const std::string& src) {
  std::string f = e.fresh(RegClass::F32);
  std::string back = e.fresh(RegClass::F64), bits = e.fresh(RegClass::B32), p = e.fresh(RegClass::Pred);
  e.ins("cvt.rz.f32.f64 " + f + ", " + src);
  e.ins("cvt.f64.f32 " + back + ", " + f);
  e.ins("setp.neu.f64 " + p + ", " + back + ", " + src);
  e.ins("mov.b32 " + bits + ", " + f);
  e.ins("@" + p + " or.b32 " + bits + ", " + bits + ", 1");
  e.ins("mov.b32 " + f + ", " + bits);
  return f;
}

// fp8 <-> float through sm_89's packed conversions (the only ones PTX has). From fp8:
// cvt.rn.f16x2.{e4m3x2,e5m2x2} widens the register's two bytes to two f16 (exact); the
// low one is the value, widened further exactly. To fp8: cvt.rn.satfinite.{e4m3x2,e5m2x2}
// from f32 (hi, lo) with hi = 0, or from an f16x2 pair {x, +0}: the result's high byte is
// the code of +0, 0, as the fp8 register representation wants.
void emit_fp8_convert(Emitter& e, const ir::Inst& i) {
  const Scalar from = e.type(i.args[0]).elem, to = i.type.elem;
  const bool from8 = ir::scalar_bytes(from) == 1, to8 = ir::scalar_bytes(to) == 1;
  if (e.sm() < 89)
    e.unsupported(i, std::string("conversion ") + ir::scalar_name(from) + " -> " + ir::scalar_name(to) +
                         " (cvt with e4m3x2 / e5m2x2 needs sm_89)");
  const std::string d = e.reg(i.result);
  std::string h;  // the source as f16, when it is one (or an fp8 widened to one)
  std::string f;  // the source as f32, when it is one
  if (from8) {
    std::string pair = e.fresh(RegClass::B32), hi = e.fresh(RegClass::H16);
    h = e.fresh(RegClass::H16);
    e.ins(std::string("cvt.rn.f16x2.") + ir::scalar_name(from) + "x2 " + pair + ", " + e.reg(i.args[0]));
    e.ins("mov.b32 {" + h + ", " + hi + "}, " + pair);
    if (!to8) {
      if (to == Scalar::F16) return e.ins("mov.b16 " + d + ", " + h);
      f = e.fresh(RegClass::F32);
      e.ins("cvt.f32.f16 " + f + ", " + h);
      if (to == Scalar::F32) return e.ins("mov.f32 " + d + ", " + f);
      if (to == Scalar::F64) return e.ins("cvt.f64.f32 " + d + ", " + f);
      return e.narrow_from_f32(f, to, d);  // bf16: exact
    }
  } else if (from == Scalar::F16) {
    h = e.reg(i.args[0]);
  } else if (from == Scalar::F64) {
    f = f64_to_f32_odd(e, e.reg(i.args[0]));
  } else {
    f = e.widen_to_f32(i.args[0]);  // f32, or bf16 exactly
  }
  const std::string x2 = std::string(ir::scalar_name(to)) + "x2";
  if (!h.empty()) {
    std::string pair = e.fresh(RegClass::B32);
    e.ins("cvt.u32.u16 " + pair + ", " + h);  // {x, +0}
    return e.ins("cvt.rn.satfinite." + x2 + ".f16x2 " + d + ", " + pair);
  }
  e.ins("cvt.rn.satfinite." + x2 + ".f32 " + d + ", " + fmt_f32(0.0f) + ", " + f);
}

}  // namespace

void emit_convert_plain(Emitter& e, const ir::Inst& i, bool sat);

// Saturating float results clamp to [0, 1] (NaN becomes 0); integer results clamp to the
// target's range (float sources always do, as PTX cvt saturates them).
void emit_convert(Emitter& e, const ir::Inst& i) {
  bool sat = i.attr.saturate;
  Scalar to = i.type.elem;
  emit_convert_plain(e, i, sat);
  if (!sat || !i.type.is_float()) return;
  const std::string& d = e.reg(i.result);
  if (to == Scalar::F32 || to == Scalar::F64) {
    const char* t = to == Scalar::F32 ? "f32" : "f64";
    std::string zero = to == Scalar::F32 ? fmt_f32(0.0f) : "0d0000000000000000";
    std::string one = to == Scalar::F32 ? fmt_f32(1.0f) : "0d3FF0000000000000";
    e.ins(std::string("max.") + t + " " + d + ", " + d + ", " + zero);  // max(NaN, 0) = 0
    e.ins(std::string("min.") + t + " " + d + ", " + d + ", " + one);
    return;
  }
  // f16/bf16: clamp exactly representable bounds in f32 and narrow again (exact).
  std::string f = e.widen_to_f32(i.result);
  e.ins("max.f32 " + f + ", " + f + ", " + fmt_f32(0.0f));
  e.ins("min.f32 " + f + ", " + f + ", " + fmt_f32(1.0f));
  e.narrow_from_f32(f, to, d);
}

void emit_convert_plain(Emitter& e, const ir::Inst& i, bool sat) {
  Scalar from = e.type(i.args[0]).elem, to = i.type.elem;
  if (e.type(i.args[0]).is_fp8() || i.type.is_fp8()) return emit_fp8_convert(e, i);
  Rounding r = i.attr.rounding;
  const std::string d = e.reg(i.result);
  const std::string& src = e.reg(i.args[0]);
  ir::Type tt = i.type, ft = e.type(i.args[0]);

  if (from == Scalar::Pred) {  // true -> 1, false -> 0
    const char* t = is_half(to) ? "b16" : arith_type(to);
    e.ins(std::string("selp.") + t + " " + d + ", " + fmt_imm(tt, to == Scalar::F16 ? 0x3C00 : to == Scalar::BF16 ? 0x3F80 : to == Scalar::F32 ? 0x3F800000 : to == Scalar::F64 ? 0x3FF0000000000000ull : 1) +
          ", " + fmt_imm(tt, 0) + ", " + src);
    return;
  }
  if (to == Scalar::Pred) {  // x != 0 (NaN counts as true)
    if (ft.is_float()) {
      std::string x = is_half(from) ? e.widen_to_f32(i.args[0]) : src;
      const char* t = is_half(from) ? "f32" : arith_type(from);
      e.ins(std::string("setp.neu.") + t + " " + d + ", " + x + ", " + fmt_imm(ir::Type::scalar(is_half(from) ? Scalar::F32 : from), 0));
    } else {
      e.ins(std::string("setp.ne.") + arith_type(from) + " " + d + ", " + src + ", 0");
    }
    return;
  }

  bool ff = ft.is_float(), tf = tt.is_float();
  if (!ff && !tf) {  // integer <-> integer: truncate or extend; 8-bit targets named exactly
    std::string dt = (to == Scalar::S8 || to == Scalar::U8) ? ir::scalar_name(to) : arith_type(to);
    // A target that holds every source value cannot saturate: ptxas rejects .sat there.
    int fb = ir::scalar_bits(from), tb = ir::scalar_bits(to);
    bool fs = ft.is_signed(), ts = tt.is_signed();
    bool fits = (fs == ts && tb >= fb) || (!fs && ts && tb > fb);
    e.ins(std::string("cvt") + (sat && !fits ? ".sat." : ".") + dt + "." + arith_type(from) + " " + d + ", " + src);
    e.normalize(to, d);
    return;
  }
  if (ff && !tf) {  // float -> integer (saturating, as PTX cvt does)
    std::string x = is_half(from) ? e.widen_to_f32(i.args[0]) : src;
    const char* st = is_half(from) ? "f32" : arith_type(from);
    std::string dt = (to == Scalar::S8 || to == Scalar::U8) ? ir::scalar_name(to) : arith_type(to);
    e.ins("cvt" + rnd_int(r) + "." + dt + "." + st + " " + d + ", " + x);
    e.normalize(to, d);
    return;
  }
  if (!ff && tf) {  // integer -> float
    if (to == Scalar::BF16) {  // no direct cvt before sm_90: through f32
      std::string f = e.fresh(RegClass::F32);
      e.ins("cvt" + rnd_float(r) + ".f32." + arith_type(from) + " " + f + ", " + src);
      e.narrow_from_f32(f, to, d, r == Rounding::Rz ? "rz" : "rn");
      return;
    }
    e.ins("cvt" + rnd_float(r) + "." + arith_type(to) + "." + arith_type(from) + " " + d + ", " + src);
    return;
  }
  // float -> float
  if (from == to) return e.ins(std::string("mov.") + (is_half(to) ? "b16" : arith_type(to)) + " " + d + ", " + src);
  if (is_half(from)) {
    std::string f = e.widen_to_f32(i.args[0]);  // exact
    if (to == Scalar::F32) return e.ins("mov.f32 " + d + ", " + f);
    if (to == Scalar::F64) return e.ins("cvt.f64.f32 " + d + ", " + f);
    return e.narrow_from_f32(f, to, d, r == Rounding::Rz ? "rz" : "rn");
  }
  if (is_half(to)) {
    std::string f = from == Scalar::F64 ? f64_to_f32_odd(e, src) : src;
    return e.narrow_from_f32(f, to, d, r == Rounding::Rz ? "rz" : "rn");
  }
  if (from == Scalar::F32 && to == Scalar::F64) return e.ins("cvt.f64.f32 " + d + ", " + src);
  e.ins("cvt" + rnd_float(r) + ".f32.f64 " + d + ", " + src);
}

}  // namespace kaio::codegen
