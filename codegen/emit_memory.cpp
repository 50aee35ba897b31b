// Parameters and global memory: p[i] is base + i * sizeof(elem), widened to 64 bits.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

namespace {

std::string param_name(const Emitter& e, uint64_t index) { return e.k.name + "_param_" + std::to_string(index); }

// Byte address of ptr[index].
std::string address(Emitter& e, uint32_t ptr, uint32_t index) {
  Scalar is = e.type(index).elem;
  int size = ir::scalar_bytes(e.type(ptr).elem);
  std::string off = e.fresh(RegClass::B64);
  std::string idx = e.reg(index);
  int bits = ir::scalar_bits(is);
  bool sgn = e.type(index).is_signed();
  if (bits < 32) {  // 8/16-bit indices widen to 32 bits first
    std::string w = e.fresh(RegClass::B32);
    e.ins(std::string("cvt.") + (sgn ? "s32." : "u32.") + arith_type(is) + " " + w + ", " + idx);
    idx = w;
    bits = 32;
  }
  if (bits == 32) {
    e.ins(std::string("mul.wide.") + (sgn ? "s32 " : "u32 ") + off + ", " + idx + ", " + std::to_string(size));
  } else {
    e.ins("mul.lo.s64 " + off + ", " + idx + ", " + std::to_string(size));
  }
  std::string addr = e.fresh(RegClass::B64);
  e.ins("add.s64 " + addr + ", " + e.reg(ptr) + ", " + off);
  return addr;
}

}  // namespace

void emit_memory(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::Param: {
      const std::string d = e.reg(i.result);
      const std::string name = param_name(e, i.imm);
      if (i.type.ptr) {
        std::string raw = e.fresh(RegClass::B64);
        e.ins("ld.param.u64 " + raw + ", [" + name + "]");
        e.ins("cvta.to.global.u64 " + d + ", " + raw);
      } else if (i.type.is_pred()) {  // passed as a u8
        std::string b = e.fresh(RegClass::B16);
        e.ins("ld.param.u8 " + b + ", [" + name + "]");
        e.ins("setp.ne.u16 " + d + ", " + b + ", 0");
      } else {
        e.ins(std::string("ld.param.") + mem_type(i.type.elem) + " " + d + ", [" + name + "]");
      }
      return;
    }
    case Op::Load: {
      std::string addr = address(e, i.args[0], i.args[1]);
      e.ins(std::string("ld.global.") + mem_type(i.type.elem) + " " + e.reg(i.result) + ", [" + addr + "]");
      return;
    }
    case Op::Store: {
      std::string addr = address(e, i.args[0], i.args[1]);
      e.ins(std::string("st.global.") + mem_type(i.type.elem) + " [" + addr + "], " + e.reg(i.args[2]));
      return;
    }
    default:
      e.unsupported(i, "this memory op");
  }
}

}  // namespace kaio::codegen
