// Warp-level tensor cores and asynchronous copies (sm_80): mma.sync, ldmatrix, cp.async
// and its groups; the tensor memory accelerator's loads (sm_90). The mma accumulators are the register array's variables (D and C are the
// same registers, updated in place); the instruction text comes from the shape's
// descriptor (ir/mma_layout.h).
#include "kaio/codegen/emitter.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

std::string element_address(Emitter& e, uint32_t ptr, uint32_t index);  // emit_memory.cpp

namespace {

// "{%f0, %f1, %f2, %f3}" for args [first, first + n); f32 values that stand for tf32 move
// to b32 registers, the type the instruction's tf32 operands have.
std::string reg_list(Emitter& e, const ir::Inst& i, size_t first, size_t n, bool b32) {
  std::string s = "{";
  for (size_t k = 0; k < n; ++k) {
    uint32_t v = i.args[first + k];
    std::string r = e.reg(v);
    if (b32 && e.type(v).elem == Scalar::F32) {
      std::string w = e.fresh(RegClass::B32);
      e.ins("mov.b32 " + w + ", " + r);
      r = w;
    }
    s += (k ? ", " : "") + r;
  }
  return s + "}";
}

void emit_mma_sync(Emitter& e, const ir::Inst& i) {
  const ir::MmaShape& s = ir::mma_shape(i.attr.mma);
  const size_t nc = s.c.regs, na = s.a.regs, nb = s.b.regs;
  std::string acc = reg_list(e, i, 0, nc, false);
  std::string a = reg_list(e, i, nc, na, true);
  std::string b = reg_list(e, i, nc + na, nb, true);
  e.ins(std::string(s.ptx) + " " + acc + ", " + a + ", " + b + ", " + acc);
}

void emit_ldmatrix(Emitter& e, const ir::Inst& i) {
  std::string addr = element_address(e, i.args[0], i.args[1]);
  std::string d = "{";
  for (uint32_t k = 0; k < i.nresults; ++k) d += (k ? ", " : "") + e.reg(i.result + k);
  d += "}";
  e.ins("ldmatrix.sync.aligned.m8n8.x" + std::to_string(i.nresults) + (i.attr.trans ? ".trans" : "") +
        ".shared.b16 " + d + ", [" + addr + "]");
}

void emit_cp_async(Emitter& e, const ir::Inst& i) {
  std::string dst = element_address(e, i.args[0], i.args[1]);
  std::string src = element_address(e, i.args[2], i.args[3]);
  const char* level = i.attr.hint == ir::CacheHint::Global ? "cg" : "ca";
  std::string tail = i.args.size() == 5 ? ", " + e.reg(i.args[4]) : "";
  // .L2::128B: the L2 fetches the whole 128-byte line from DRAM on a miss, not only the
  // sectors this copy names. The copies of a warp (or of the warps beside it) take the rest
  // of the line soon after, so DRAM sees fewer, larger requests: measured on the H200, the
  // cp.async rings of decode attention read KV 2-3% faster and W4A16 at m <= 16 runs 2-9%
  // faster; .L2::256B was slower than both (bench/NOTES.md).
  e.ins(std::string("cp.async.") + level + ".shared.global.L2::128B [" + dst + "], [" + src + "], " +
        std::to_string(i.attr.count) + tail);
}

// The TMA load: one thread copies the box; its bytes complete the mbarrier's transaction
// count. The tensor map operand is the parameter's generic address.
void emit_tma_load(Emitter& e, const ir::Inst& i) {
  std::string dst = element_address(e, i.args[0], i.args[1]);
  std::string bar = element_address(e, i.args[3], i.args[4]);
  std::string coords;
  const size_t end = 5 + i.attr.count;
  for (size_t k = 5; k < end; ++k) coords += (k > 5 ? ", " : "") + e.reg(i.args[k]);
  const bool multicast = i.args.size() > end;
  e.ins("cp.async.bulk.tensor." + std::to_string(i.attr.count) + "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" +
        (multicast ? ".multicast::cluster" : "") + " [" + dst + "], [" + e.reg(i.args[2]) + ", {" + coords + "}], [" + bar + "]" +
        (multicast ? ", " + e.reg(i.args[end]) : ""));
}

// The TMA store: one thread writes the box from shared memory (bulk async-group completion).
void emit_tma_store(Emitter& e, const ir::Inst& i) {
  const size_t rank = i.attr.count;
  std::string coords;
  for (size_t k = 1; k <= rank; ++k) coords += (k > 1 ? ", " : "") + e.reg(i.args[k]);
  std::string src = element_address(e, i.args[rank + 1], i.args[rank + 2]);
  e.ins("cp.async.bulk.tensor." + std::to_string(rank) + "d.global.shared::cta.tile.bulk_group [" + e.reg(i.args[0]) + ", {" +
        coords + "}], [" + src + "]");
}

}  // namespace

void emit_tensor(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::MmaSync: return emit_mma_sync(e, i);
    case Op::Ldmatrix: return emit_ldmatrix(e, i);
    case Op::CpAsync: return emit_cp_async(e, i);
    case Op::CpAsyncCommit: return e.ins("cp.async.commit_group");
    case Op::CpAsyncWait: return e.ins("cp.async.wait_group " + std::to_string(i.attr.count));
    case Op::TmaLoad: return emit_tma_load(e, i);
    case Op::TmaStore: return emit_tma_store(e, i);
    case Op::BulkCommit: return e.ins("cp.async.bulk.commit_group");
    case Op::BulkWait:
      return e.ins(std::string("cp.async.bulk.wait_group") + (i.attr.scope == ir::FenceScope::Cta ? ".read " : " ") +
                   std::to_string(i.attr.count));
    default: e.no_emitter(i);
  }
}

}  // namespace kaio::codegen
