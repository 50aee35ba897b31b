// Constants, special registers, variables and structured control flow.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

namespace {

const char* mov_type(ir::Type t) {
  switch (reg_class(t.elem)) {
    case RegClass::Pred: return "pred";
    case RegClass::B16: case RegClass::H16: return "b16";
    case RegClass::B32: return "b32";
    case RegClass::B64: return "b64";
    case RegClass::F32: return "f32";
    default: return "f64";
  }
}

}  // namespace

void emit_control(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::Const: {
      const std::string& d = e.reg(i.result);
      e.consts[i.result] = i.attr.bits;
      if (i.type.is_pred()) {
        e.ins(std::string("setp.") + (i.attr.bits ? "eq" : "ne") + ".u32 " + d + ", 0, 0");
      } else if (i.type.elem == Scalar::S8 || i.type.elem == Scalar::S16) {
        e.ins("mov.s16 " + d + ", " + fmt_imm(i.type, i.attr.bits));
      } else if (i.type.elem == Scalar::U8 || i.type.elem == Scalar::U16) {
        e.ins("mov.u16 " + d + ", " + fmt_imm(i.type, i.attr.bits));
      } else {
        e.ins(std::string("mov.") + (i.type.is_float() && reg_class(i.type.elem) != RegClass::H16 ? arith_type(i.type.elem) : mov_type(i.type)) +
              " " + d + ", " + fmt_imm(i.type, i.attr.bits));
      }
      return;
    }
    case Op::SReg:
      e.ins("mov.u32 " + e.reg(i.result) + ", %" + ir::sreg_name(i.attr.sreg));
      return;
    case Op::WarpIndex: {  // linear thread index / 32
      std::string t[6];
      const char* regs[] = {"%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y"};
      for (int k = 0; k < 5; ++k) {
        t[k] = e.fresh(RegClass::B32);
        e.ins("mov.u32 " + t[k] + ", " + regs[k]);
      }
      t[5] = e.fresh(RegClass::B32);
      e.ins("mad.lo.u32 " + t[5] + ", " + t[2] + ", " + t[4] + ", " + t[1]);  // tz * ny + ty
      e.ins("mad.lo.u32 " + t[5] + ", " + t[5] + ", " + t[3] + ", " + t[0]);  // (..) * nx + tx
      e.ins("shr.u32 " + e.reg(i.result) + ", " + t[5] + ", 5");
      return;
    }
    case Op::VarDecl:  // a variable, or a register array of nresults variables
      for (uint32_t r = 0; r < i.nresults; ++r)
        e.ins(std::string("mov.") + mov_type(i.type) + " " + e.reg(i.result + r) + ", " + e.reg(i.args[0]));
      return;
    case Op::VarRead:
      e.ins(std::string("mov.") + mov_type(i.type) + " " + e.reg(i.result) + ", " + e.reg(i.args[0]));
      return;
    case Op::VarWrite:
      e.ins(std::string("mov.") + mov_type(i.type) + " " + e.reg(i.args[0]) + ", " + e.reg(i.args[1]));
      return;
    case Op::If: {
      std::string l_else = e.label(), l_end = e.label();
      bool has_else = i.attr.has_else && !i.regions[1].insts.empty();
      e.ins("@!" + e.reg(i.args[0]) + " bra " + (has_else ? l_else : l_end));
      e.block(i.regions[0]);
      if (has_else) {
        e.ins("bra " + l_end);
        e.place(l_else);
        e.block(i.regions[1]);
      }
      e.place(l_end);
      return;
    }
    case Op::For: {
      // i = lo; while (i < hi) { body; i += step; }  -- i's register is the counter
      const std::string& iv = e.reg(i.result);
      std::string head = e.label(), end = e.label();
      std::string p = e.fresh(RegClass::Pred);
      e.ins(std::string("mov.") + mov_type(i.type) + " " + iv + ", " + e.reg(i.args[0]));
      e.place(head);
      e.ins(std::string("setp.ge.") + arith_type(i.type.elem) + " " + p + ", " + iv + ", " + e.reg(i.args[1]));
      e.ins("@" + p + " bra " + end);
      e.block(i.regions[0]);
      e.ins(std::string("add.") + arith_type(i.type.elem) + " " + iv + ", " + iv + ", " + e.reg(i.args[2]));
      e.normalize(i.type.elem, iv);
      e.ins("bra " + head);
      e.place(end);
      return;
    }
    case Op::While: {
      std::string head = e.label(), end = e.label();
      e.place(head);
      e.block(i.regions[0]);
      e.ins("@!" + e.reg(i.attr.cond) + " bra " + end);
      e.block(i.regions[1]);
      e.ins("bra " + head);
      e.place(end);
      return;
    }
    case Op::Return:
      e.ins("ret");
      return;
    case Op::Comment:
      e.body += "\t// " + e.k.comments[i.attr.index] + "\n";
      return;
    default:
      e.no_emitter(i);
  }
}

}  // namespace kaio::codegen
