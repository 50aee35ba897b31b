// Barriers (whole block and named), fences, setmaxnreg, warp shuffles and votes, mbarriers.
#include "kaio/codegen/emitter.h"

namespace kaio::codegen {

using ir::Op;
using ir::Scalar;

std::string element_address(Emitter& e, uint32_t ptr, uint32_t index);  // emit_memory.cpp

namespace {

// shfl.sync moves 32 bits: narrower values widen, 64-bit values move as two halves.
void emit_shfl(Emitter& e, const ir::Inst& i) {
  static const char* modes[] = {"up", "down", "bfly", "idx"};
  auto mode = i.attr.shfl;
  uint32_t mask = i.attr.mask;
  uint32_t width = i.attr.width;
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

}  // namespace

// wgmma: arch-specific (sm_90a). The accumulator registers are the array's variables,
// written in place by the tensor cores.
void emit_wgmma(Emitter& e, const ir::Inst& i) {
  if (parse_arch(e.target.arch).suffix != 'a')
    e.unsupported(i, std::string(ir::op_name(i.op)) + " (an sm_90a instruction; compile for " + e.target.arch + "a)");
  switch (i.op) {
    case Op::WgmmaFence: return e.ins("wgmma.fence.sync.aligned");
    case Op::WgmmaCommit: return e.ins("wgmma.commit_group.sync.aligned");
    case Op::WgmmaWait: return e.ins("wgmma.wait_group.sync.aligned " + std::to_string(i.attr.count));
    default: break;
  }
  const size_t nacc = i.attr.shape / 2;
  std::string d = "{";
  for (size_t k = 0; k < nacc; ++k) d += (k ? ", " : "") + e.reg(i.args[k]);
  d += "}";
  std::string scale_d = e.fresh(RegClass::Pred);  // 1: D = A*B + D
  e.ins("setp.ne.b32 " + scale_d + ", 1, 0");
  const std::string n = std::to_string(i.attr.shape);
  if (i.attr.trans & ir::kWgmmaARegs) {  // A from 4 registers: no A major operand
    const char* t = i.attr.elem == ir::Scalar::BF16 ? "bf16" : "f16";
    std::string a = "{";
    for (size_t k = 0; k < 4; ++k) a += (k ? ", " : "") + e.reg(i.args[nacc + k]);
    a += "}";
    return e.ins("wgmma.mma_async.sync.aligned.m64n" + n + "k16.f32." + t + "." + t + " " + d + ", " + a + ", " +
                 e.reg(i.args[nacc + 4]) + ", " + scale_d + ", 1, 1, " + std::to_string((i.attr.trans >> 1) & 1));
  }
  const std::string da = e.reg(i.args[nacc]), db = e.reg(i.args[nacc + 1]);
  if (i.attr.elem == ir::Scalar::F32)  // tf32: K = 8, both operands K-major (no transpose operands)
    return e.ins("wgmma.mma_async.sync.aligned.m64n" + n + "k8.f32.tf32.tf32 " + d + ", " + da + ", " + db + ", " + scale_d +
                 ", 1, 1");
  if (i.attr.elem == ir::Scalar::S8 || i.attr.elem == ir::Scalar::U8)  // s32 accumulators; no scale or transpose operands
    return e.ins("wgmma.mma_async.sync.aligned.m64n" + n + "k32.s32." + ir::scalar_name(i.attr.elem) + "." +
                 ir::scalar_name(i.attr.elem_b) + " " + d + ", " + da + ", " + db + ", " + scale_d);
  if (ir::scalar_bytes(i.attr.elem) == 1)  // e4m3 / e5m2: K = 32 (32 bytes, as k16 of f16), both K-major
    return e.ins("wgmma.mma_async.sync.aligned.m64n" + n + "k32.f32." + ir::scalar_name(i.attr.elem) + "." +
                 ir::scalar_name(i.attr.elem_b) + " " + d + ", " + da + ", " + db + ", " + scale_d + ", 1, 1");
  const char* t = i.attr.elem == ir::Scalar::BF16 ? "bf16" : "f16";
  e.ins("wgmma.mma_async.sync.aligned.m64n" + n + "k16.f32." + t + "." + t + " " + d + ", " + da + ", " + db + ", " +
        scale_d + ", 1, 1, " + std::to_string(i.attr.trans & 1) + ", " + std::to_string((i.attr.trans >> 1) & 1));
}

// The mbarrier's shared-window address (a u32) for ptr<shared u64>[index].
std::string mbar(Emitter& e, const ir::Inst& i) { return element_address(e, i.args[0], i.args[1]); }

void emit_parallel(Emitter& e, const ir::Inst& i) {
  switch (i.op) {
    case Op::Barrier:
      if (i.attr.threads) return e.ins("bar.sync " + std::to_string(i.attr.id) + ", " + std::to_string(i.attr.threads));
      return e.ins("bar.sync " + std::to_string(i.attr.id));
    case Op::BarrierArrive:
      return e.ins("bar.arrive " + std::to_string(i.attr.id) + ", " + std::to_string(i.attr.threads));
    case Op::BarrierUnaligned:
      return e.ins("barrier.sync " + std::to_string(i.attr.id) + ", " + std::to_string(i.attr.threads));
    case Op::Fence: {
      static const char* scopes[] = {"membar.cta", "membar.gl", "membar.sys"};
      return e.ins(scopes[static_cast<int>(i.attr.scope)]);
    }
    case Op::FenceProxyAsync:
      return e.ins("fence.proxy.async.shared::cta");
    case Op::GridDepWait:  // before sm_90 a kernel never starts before the previous one ends
      if (e.sm() >= 90) e.ins("griddepcontrol.wait");
      return;
    case Op::LaunchDependents:
      if (e.sm() >= 90) e.ins("griddepcontrol.launch_dependents");
      return;
    case Op::SetMaxNReg:
      if (parse_arch(e.target.arch).suffix != 'a')
        e.unsupported(i, "setmaxnreg (an sm_90a instruction; compile for " + e.target.arch + "a)");
      return e.ins(std::string("setmaxnreg.") + (i.attr.increase ? "inc" : "dec") + ".sync.aligned.u32 " +
                   std::to_string(i.attr.regs));
    case Op::Shfl:
      return emit_shfl(e, i);
    case Op::Vote: {
      auto mode = i.attr.vote;
      std::string mask = std::to_string(i.attr.mask);
      const char* m = mode == ir::VoteMode::All ? "all.pred" : mode == ir::VoteMode::Any ? "any.pred" : "ballot.b32";
      return e.ins(std::string("vote.sync.") + m + " " + e.reg(i.result) + ", " + e.reg(i.args[0]) + ", " + mask);
    }
    case Op::MbarInit:
      return e.ins("mbarrier.init.shared::cta.b64 [" + mbar(e, i) + "], " + e.reg(i.args[2]));
    case Op::MbarArrive:
      return e.ins("mbarrier.arrive.shared::cta.b64 _, [" + mbar(e, i) + "]");
    case Op::MbarExpectTx:
      return e.ins("mbarrier.arrive.expect_tx.shared::cta.b64 _, [" + mbar(e, i) + "], " + e.reg(i.args[2]));
    case Op::MbarArriveCluster: {  // the peer's address of the same barrier, then an arrive on it
      // The default .release.cta: a .release.cluster arrive is a cluster-wide memory fence
      // (MEMBAR) per arrival, which stalled a multicast matmul's consumers 46% of the time;
      // the arrival only says "done reading this stage", which needs no fence.
      std::string remote = e.fresh(RegClass::B32);
      e.ins("mapa.shared::cluster.u32 " + remote + ", " + mbar(e, i) + ", " + e.reg(i.args[2]));
      return e.ins("mbarrier.arrive.shared::cluster.b64 _, [" + remote + "]");
    }
    case Op::ClusterSync:
      e.ins("barrier.cluster.arrive.aligned");
      return e.ins("barrier.cluster.wait.aligned");
    case Op::FenceMbarInit:
      return e.ins("fence.mbarrier_init.release.cluster");
    case Op::MbarTryWait: {
      std::string addr = mbar(e, i);
      std::string parity = e.reg(i.args[2]);
      if (ir::scalar_bits(e.type(i.args[2]).elem) != 32) {
        parity = e.fresh(RegClass::B32);
        e.ins(std::string("cvt.u32.") + arith_type(e.type(i.args[2]).elem) + " " + parity + ", " + e.reg(i.args[2]));
      }
      // try_wait may suspend the thread for a while (sm_90); test_wait polls once (sm_80).
      const char* form = e.sm() >= 90 ? "mbarrier.try_wait.parity.shared::cta.b64 " : "mbarrier.test_wait.parity.shared::cta.b64 ";
      return e.ins(form + e.reg(i.result) + ", [" + addr + "], " + parity);
    }
    case Op::WgmmaFence:
    case Op::WgmmaMma:
    case Op::WgmmaCommit:
    case Op::WgmmaWait:
      return emit_wgmma(e, i);
    default:
      e.no_emitter(i);
  }
}

}  // namespace kaio::codegen
