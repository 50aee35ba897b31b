// Barriers, fences, warp shuffles and votes, atomics.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

std::string atomic_address(Emitter& e, uint32_t ptr, uint32_t index);  // emit_memory.cpp

namespace {

// shfl.sync moves 32 bits: narrower values widen, 64-bit values move as two halves.
void emit_shfl(Emitter& e, const ir::Inst& i) {
  static const char* modes[] = {"up", "down", "bfly", "idx"};
  auto mode = static_cast<ir::ShflMode>(i.imm & 0xff);
  uint32_t mask = static_cast<uint32_t>((i.imm >> 8) & 0xffffffffu);
  uint32_t width = static_cast<uint32_t>(i.imm >> 40);
  // c: segment mask in bits 8..12, clamp in 0..4 (0 for up, width-1 lane bound otherwise)
  uint32_t c = ((32 - width) << 8) | (mode == ir::ShflMode::Up ? 0u : 31u);
  std::string tail = ", " + e.reg(i.args[1]) + ", " + std::to_string(c) + ", " + std::to_string(mask);
  std::string op = std::string("shfl.sync.") + modes[static_cast<int>(mode)] + ".b32 ";
  Scalar s = i.type.elem;
  const std::string d = e.reg(i.result);
  const std::string& a = e.reg(i.args[0]);
  int bits = ir::scalar_bits(s);
  if (bits == 32) return e.ins(op + d + ", " + a + tail);
  if (bits == 64) {
    std::string lo = e.fresh(RegClass::B32), hi = e.fresh(RegClass::B32);
    e.ins("mov.b64 {" + lo + ", " + hi + "}, " + a);
    e.ins(op + lo + ", " + lo + tail);
    e.ins(op + hi + ", " + hi + tail);
    return e.ins("mov.b64 " + d + ", {" + lo + ", " + hi + "}");
  }
  std::string w = e.fresh(RegClass::B32);
  e.ins("cvt.u32.u16 " + w + ", " + a);
  e.ins(op + w + ", " + w + tail);
  e.ins("cvt.u16.u32 " + d + ", " + w);
  e.normalize(s, d);
}

void emit_atomic(Emitter& e, const ir::Inst& i) {
  bool shared = e.type(i.args[0]).is_shared_ptr();
  std::string addr = atomic_address(e, i.args[0], i.args[1]);
  std::string space = shared ? "atom.shared." : "atom.global.";
  Scalar s = i.type.elem;
  const std::string d = e.reg(i.result);
  if (i.op == Op::AtomicCas) {
    e.ins(space + "cas.b" + std::to_string(ir::scalar_bits(s)) + " " + d + ", [" + addr + "], " + e.reg(i.args[2]) +
          ", " + e.reg(i.args[3]));
    return;
  }
  std::string t;
  switch (static_cast<ir::AtomicOp>(i.imm)) {
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

void emit_parallel(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::Barrier:
      return e.ins("bar.sync 0");
    case Op::Fence: {
      static const char* scopes[] = {"membar.cta", "membar.gl", "membar.sys"};
      return e.ins(scopes[i.imm]);
    }
    case Op::Shfl:
      return emit_shfl(e, i);
    case Op::Vote: {
      auto mode = static_cast<ir::VoteMode>(i.imm & 0xff);
      std::string mask = std::to_string((i.imm >> 8) & 0xffffffffu);
      const char* m = mode == ir::VoteMode::All ? "all.pred" : mode == ir::VoteMode::Any ? "any.pred" : "ballot.b32";
      return e.ins(std::string("vote.sync.") + m + " " + e.reg(i.result) + ", " + e.reg(i.args[0]) + ", " + mask);
    }
    case Op::AtomicRmw: case Op::AtomicCas:
      return emit_atomic(e, i);
    default:
      e.unsupported(i, "this op");
  }
}

}  // namespace kaio::codegen
