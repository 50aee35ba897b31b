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
    std::string f = src;
    if (from == Scalar::F64) {
      // Round to odd into f32 (truncate, then set the last bit if anything was lost):
      // f32 has more than 2 bits beyond 16-bit precision, so the final rounding to
      // f16/bf16 is then correct for both rn and rz.
      f = e.fresh(RegClass::F32);
      std::string back = e.fresh(RegClass::F64), bits = e.fresh(RegClass::B32), p = e.fresh(RegClass::Pred);
      e.ins("cvt.rz.f32.f64 " + f + ", " + src);
      e.ins("cvt.f64.f32 " + back + ", " + f);
      e.ins("setp.neu.f64 " + p + ", " + back + ", " + src);
      e.ins("mov.b32 " + bits + ", " + f);
      e.ins("@" + p + " or.b32 " + bits + ", " + bits + ", 1");
      e.ins("mov.b32 " + f + ", " + bits);
    }
    return e.narrow_from_f32(f, to, d, r == Rounding::Rz ? "rz" : "rn");
  }
  if (from == Scalar::F32 && to == Scalar::F64) return e.ins("cvt.f64.f32 " + d + ", " + src);
  e.ins("cvt" + rnd_float(r) + ".f32.f64 " + d + ", " + src);
}

}  // namespace kaio::codegen
