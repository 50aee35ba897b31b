// Parameters, global and shared memory. p[i] is base + i * sizeof(elem): 64-bit for
// global pointers, 32-bit (shared window) for shared ones.
#include <algorithm>

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
std::string space_op(const Emitter& e, const char* op, uint32_t ptr, CacheHint hint) {
  if (e.type(ptr).is_shared_ptr()) return std::string(op) + ".shared";
  if (e.type(ptr).space == ir::Space::Param) return op;  // a generic address (cvta.param)
  std::string s = std::string(op) + ".global";
  switch (hint) {
    case CacheHint::ReadOnly: return s + ".nc";
    case CacheHint::Streaming: return s + ".cs";
    case CacheHint::Global: return s + ".cg";
    case CacheHint::LastUse: return s + ".lu";
    default: return s;
  }
}

void emit_atomic(Emitter& e, const ir::Inst& i) {
  bool shared = e.type(i.args[0]).is_shared_ptr();
  std::string addr = address(e, i.args[0], i.args[1]);
  std::string space = shared ? "atom.shared." : "atom.global.";
  Scalar s = i.type.elem;
  const std::string d = e.reg(i.result);
  if (i.op == Op::AtomicCas) {
    e.ins(space + "cas.b" + std::to_string(ir::scalar_bits(s)) + " " + d + ", [" + addr + "], " + e.reg(i.args[2]) +
          ", " + e.reg(i.args[3]));
    return;
  }
  std::string t;
  switch (i.attr.atomic) {
    case ir::AtomicOp::Add:
      if (s == Scalar::BF16x2 && e.sm() < 90) e.unsupported(i, "atomic_add on bf16x2 (needs sm_90)");
      t = s == Scalar::S64 ? "add.u64"
          : (s == Scalar::F16x2 || s == Scalar::BF16x2) ? std::string("add.noftz.") + arith_type(s)
                                                         : std::string("add.") + arith_type(s);
      break;
    case ir::AtomicOp::Min: t = std::string("min.") + arith_type(s); break;
    case ir::AtomicOp::Max: t = std::string("max.") + arith_type(s); break;
    case ir::AtomicOp::Exch: t = "exch.b" + std::to_string(ir::scalar_bits(s)); break;
  }
  e.ins(space + t + " " + d + ", [" + addr + "], " + e.reg(i.args[2]));
}

}  // namespace

void emit_memory(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::Param: {
      const std::string d = e.reg(i.result);
      const std::string name = param_name(e, i.attr.index);
      if (e.k.params[i.attr.index].bytes) {  // by value: its generic address
        std::string raw = e.fresh(RegClass::B64);
        e.ins("mov.u64 " + raw + ", " + name);
        e.ins("cvta.param.u64 " + d + ", " + raw);
      } else if (i.type.ptr) {
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
      e.ins(space_op(e, "ld", i.args[0], i.attr.hint) + "." + mem_type(i.type.elem) + " " + e.reg(i.result) + ", [" + addr + "]");
      return;
    }
    case Op::Store: {
      std::string addr = address(e, i.args[0], i.args[1]);
      e.ins(space_op(e, "st", i.args[0], i.attr.hint) + "." + mem_type(i.type.elem) + " [" + addr + "], " + e.reg(i.args[2]));
      return;
    }
    case Op::LoadVec: case Op::StoreVec: {
      int width = static_cast<int>(i.op == Op::LoadVec ? i.nresults : i.args.size() - 2);
      std::string addr = address(e, i.args[0], i.args[1]);
      std::string regs = "{";
      for (int k = 0; k < width; ++k) {
        regs += k ? ", " : "";
        regs += i.op == Op::LoadVec ? e.reg(i.result + k) : e.reg(i.args[2 + k]);
      }
      regs += "}";
      std::string v = ".v" + std::to_string(width) + "." + mem_type(i.type.elem);
      if (i.op == Op::LoadVec) e.ins(space_op(e, "ld", i.args[0], i.attr.hint) + v + " " + regs + ", [" + addr + "]");
      else e.ins(space_op(e, "st", i.args[0], i.attr.hint) + v + " [" + addr + "], " + regs);
      return;
    }
    case Op::SharedAlloc: {
      uint64_t bytes = uint64_t(i.attr.count) * ir::scalar_bytes(i.type.elem);
      uint32_t align = i.attr.align;
      std::string name = "kaio_smem_" + std::to_string(i.result);
      e.shared_decls += "\t.shared .align " + std::to_string(align) + " .b8 " + name + "[" + std::to_string(bytes) + "];\n";
      e.static_shared = (e.static_shared + align - 1) / align * align + (bytes + 15) / 16 * 16;
      e.ins("mov.u32 " + e.reg(i.result) + ", " + name);
      return;
    }
    case Op::DynamicShared:
      e.dynamic_shared = std::max(e.dynamic_shared, uint32_t{i.attr.align});
      e.ins("mov.u32 " + e.reg(i.result) + ", kaio_dynamic_smem");
      return;
    case Op::SharedAddr:
      e.ins("mov.u32 " + e.reg(i.result) + ", " + address(e, i.args[0], i.args[1]));
      return;
    case Op::AtomicRmw: case Op::AtomicCas:
      return emit_atomic(e, i);
    default:
      e.no_emitter(i);
  }
}

// The byte address of ptr[index] (u32 for shared memory), for the ops of other families.
std::string element_address(Emitter& e, uint32_t ptr, uint32_t index) { return address(e, ptr, index); }

}  // namespace kaio::codegen
