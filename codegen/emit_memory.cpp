// Parameters, global and shared memory. p[i] is base + i * sizeof(elem): 64-bit for
// global pointers, 32-bit (shared window) for shared ones.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::CacheHint;
using ir::Op;
using ir::Scalar;

namespace {

std::string param_name(const Emitter& e, uint64_t index) { return e.k.name + "_param_" + std::to_string(index); }

// Byte address of ptr[index].
std::string address(Emitter& e, uint32_t ptr, uint32_t index) {
  Scalar is = e.type(index).elem;
  bool shared = e.type(ptr).is_shared_ptr();
  int size = ir::scalar_bytes(e.type(ptr).elem);
  std::string idx = e.reg(index);
  int bits = ir::scalar_bits(is);
  bool sgn = e.type(index).is_signed();
  if (bits < 32) {  // 8/16-bit indices widen to 32 bits first
    std::string w = e.fresh(RegClass::B32);
    e.ins(std::string("cvt.") + (sgn ? "s32." : "u32.") + arith_type(is) + " " + w + ", " + idx);
    idx = w;
    bits = 32;
  }
  if (shared) {  // the shared window is 32-bit
    if (bits == 64) {
      std::string w = e.fresh(RegClass::B32);
      e.ins(std::string("cvt.u32.") + arith_type(is) + " " + w + ", " + idx);
      idx = w;
    }
    std::string addr = e.fresh(RegClass::B32);
    e.ins("mad.lo.u32 " + addr + ", " + idx + ", " + std::to_string(size) + ", " + e.reg(ptr));
    return addr;
  }
  std::string off = e.fresh(RegClass::B64);
  if (bits == 32) {
    e.ins(std::string("mul.wide.") + (sgn ? "s32 " : "u32 ") + off + ", " + idx + ", " + std::to_string(size));
  } else {
    e.ins("mul.lo.s64 " + off + ", " + idx + ", " + std::to_string(size));
  }
  std::string addr = e.fresh(RegClass::B64);
  e.ins("add.s64 " + addr + ", " + e.reg(ptr) + ", " + off);
  return addr;
}

// "ld.global.nc", "st.shared", ... for an access through `ptr`.
std::string space_op(const Emitter& e, const char* op, uint32_t ptr, uint64_t imm) {
  if (e.type(ptr).is_shared_ptr()) return std::string(op) + ".shared";
  std::string s = std::string(op) + ".global";
  switch (static_cast<CacheHint>(imm & 0xff)) {
    case CacheHint::ReadOnly: return s + ".nc";
    case CacheHint::Streaming: return s + ".cs";
    case CacheHint::Global: return s + ".cg";
    case CacheHint::LastUse: return s + ".lu";
    default: return s;
  }
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
      e.ins(space_op(e, "ld", i.args[0], i.imm) + "." + mem_type(i.type.elem) + " " + e.reg(i.result) + ", [" + addr + "]");
      return;
    }
    case Op::Store: {
      std::string addr = address(e, i.args[0], i.args[1]);
      e.ins(space_op(e, "st", i.args[0], i.imm) + "." + mem_type(i.type.elem) + " [" + addr + "], " + e.reg(i.args[2]));
      return;
    }
    case Op::LoadVec: case Op::StoreVec: {
      int width = static_cast<int>((i.imm >> 8) & 0xff);
      std::string addr = address(e, i.args[0], i.args[1]);
      std::string regs = "{";
      for (int k = 0; k < width; ++k) {
        regs += k ? ", " : "";
        regs += i.op == Op::LoadVec ? e.reg(i.result + k) : e.reg(i.args[2 + k]);
      }
      regs += "}";
      std::string v = ".v" + std::to_string(width) + "." + mem_type(i.type.elem);
      if (i.op == Op::LoadVec) e.ins(space_op(e, "ld", i.args[0], i.imm) + v + " " + regs + ", [" + addr + "]");
      else e.ins(space_op(e, "st", i.args[0], i.imm) + v + " [" + addr + "], " + regs);
      return;
    }
    case Op::SharedAlloc: {
      uint64_t bytes = i.imm * ir::scalar_bytes(i.type.elem);
      std::string name = "kaio_smem_" + std::to_string(i.result);
      e.shared_decls += "\t.shared .align 16 .b8 " + name + "[" + std::to_string(bytes) + "];\n";
      e.static_shared += (bytes + 15) / 16 * 16;
      e.ins("mov.u32 " + e.reg(i.result) + ", " + name);
      return;
    }
    case Op::DynamicShared:
      e.dynamic_shared = true;
      e.ins("mov.u32 " + e.reg(i.result) + ", kaio_dynamic_smem");
      return;
    default:
      e.unsupported(i, "this memory op");
  }
}

// Atomics live with the parallel ops but share the addressing above.
std::string atomic_address(Emitter& e, uint32_t ptr, uint32_t index) { return address(e, ptr, index); }

}  // namespace kaio::codegen
