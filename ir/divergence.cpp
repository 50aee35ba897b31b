// Rejects barriers that not every participating thread can reach. Each value gets a
// divergence level:
//   uniform  the same in every thread of the block (params, constants, ctaid, ntid, ...)
//   group    the same in every thread of a warpgroup (4 warps from a multiple of 4):
//            warp_id() / 4k, warp_id() >> 2+, warp_id() < 4k / >= 4k (and <= / > 4k - 1),
//            and what derives from those
//   warp     the same in every thread of a warp: warp_id() and what derives from it,
//            votes, mbarrier waits
//   thread   may differ between the threads of a warp: tid, laneid, shuffles, atomics
// Derived values take the highest level of their operands; a variable takes the level of
// what is written to it and of the control it is written under. The analysis runs to a
// fixpoint, since a loop can carry a divergent value into a variable read earlier in its
// body. Then:
//   - a whole-block barrier (bar.sync 0 / a barrier without a thread count) must sit under
//     uniform control;
//   - a named barrier with a thread count and bar.arrive need whole warps: they may sit
//     under warp-level control (a warp-role branch), not thread-level control;
//   - warpgroup instructions (wgmma, setmaxnreg: .sync.aligned over 4 warps) need whole
//     warpgroups: they may sit under group-level control only.
// The level of each op's result comes from its Effect bits in the op table.
#include <algorithm>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

enum Level : uint8_t { kUniform = 0, kGroup = 1, kWarp = 2, kThread = 3 };

bool warpgroup_op(Op op) {
  return op == Op::WgmmaFence || op == Op::WgmmaMma || op == Op::WgmmaCommit || op == Op::WgmmaWait ||
         op == Op::SetMaxNReg;
}

struct Divergence {
  const Kernel::Data& k;
  std::vector<uint8_t> level;
  std::vector<uint8_t> warp_index;  // the value is warp_id() itself
  bool changed = false;
  bool checking = false;

  void raise(uint32_t id, uint8_t l) {
    if (id != kNoValue && level[id] < l) {
      level[id] = l;
      changed = true;
    }
  }
  uint8_t of_args(const Inst& i) const {
    uint8_t l = kUniform;
    for (uint32_t a : i.args) l = std::max(l, level[a]);
    return l;
  }

  void block(const Block& b, uint8_t ctrl) {
    for (const Inst& i : b.insts) inst(i, ctrl);
  }

  [[noreturn]] void reject(const Inst& i, const std::string& what) const {
    throw UsageError(k.name, op_name(i.op), what);
  }

  void check_sync(const Inst& i, uint8_t ctrl) const {
    if (!checking) return;
    bool whole_block = i.op == Op::Barrier && i.attr.threads == 0;
    if (whole_block && ctrl != kUniform)
      reject(i, std::string("a barrier of the whole block inside an if_/for_/while_ whose condition ") +
                    (ctrl == kThread ? "depends on the thread index" : "differs between warps") +
                    ": not every thread of the block reaches it (divergent barrier); a warp-role branch "
                    "synchronizes its warps with a named barrier, b.barrier(id, threads)");
    if (!whole_block && ctrl == kThread)
      reject(i, "a named barrier or warpgroup instruction inside an if_/for_/while_ whose condition depends on "
                "the thread index: it needs whole warps (divergent barrier); branch on warp_id() instead");
    if (warpgroup_op(i.op) && ctrl > kGroup)
      reject(i, std::string(op_name(i.op)) +
                    " is executed by whole warpgroups (4 warps from a multiple of 4), but it sits inside an "
                    "if_/for_/while_ whose condition can split a warpgroup; branch on warp_id() / 4 (or "
                    "warp_id() < 4k) instead");
  }

  // warp_id() / 4k, >> 2+, compared with a multiple of 4: the same in a whole warpgroup.
  bool warpgroup_split(const Inst& i) const {
    if (i.args.size() != 2 || !warp_index[i.args[0]] || !k.values[i.args[1]].is_const) return false;
    const uint64_t c = k.values[i.args[1]].bits;
    switch (i.op) {
      case Op::Div: case Op::Lt: case Op::Ge: return c % 4 == 0 && c > 0;
      case Op::Le: case Op::Gt: return (c + 1) % 4 == 0;
      case Op::Shr: return c >= 2;
      default: return false;
    }
  }

  void inst(const Inst& i, uint8_t ctrl) {
    const OpDef& d = i.def();
    if (d.has(Effect::Collective) || d.has(Effect::WarpCollective)) check_sync(i, ctrl);
    switch (i.op) {
      case Op::SReg: {
        SpecialReg r = i.attr.sreg;
        if (r == SpecialReg::TidX || r == SpecialReg::TidY || r == SpecialReg::TidZ || r == SpecialReg::LaneId)
          raise(i.result, kThread);
        return;
      }
      case Op::VarDecl:
        for (uint32_t r = 0; r < i.nresults; ++r) raise(i.result + r, std::max(ctrl, of_args(i)));
        return;
      case Op::VarWrite:
        raise(i.args[0], std::max(ctrl, level[i.args[1]]));
        return;
      case Op::MmaSync:  // writes its accumulator variables with per-lane fragments
        for (uint32_t a : i.args)
          if (k.values[a].is_var) raise(a, kThread);
        return;
      case Op::If: {
        uint8_t c = std::max(ctrl, level[i.args[0]]);
        block(i.regions[0], c);
        block(i.regions[1], c);
        return;
      }
      case Op::For: {
        uint8_t a = of_args(i);
        raise(i.result, a);
        block(i.regions[0], std::max(ctrl, a));
        return;
      }
      case Op::While: {
        uint8_t c = std::max(ctrl, level[i.attr.cond]);
        block(i.regions[0], c);
        c = std::max(c, level[i.attr.cond]);
        block(i.regions[1], c);
        return;
      }
      default: {
        if (i.result == kNoValue) return;
        if (i.op == Op::WarpIndex) warp_index[i.result] = 1;
        if (warpgroup_split(i)) {
          raise(i.result, kGroup);
          return;
        }
        uint8_t l = of_args(i);
        if (d.has(Effect::ThreadVarying)) l = kThread;
        if (d.has(Effect::WarpVarying)) l = std::max<uint8_t>(l, kWarp);
        for (uint32_t r = 0; r < i.nresults; ++r) raise(i.result + r, l);
        return;
      }
    }
  }
};

}  // namespace

void check_barriers(const Kernel::Data& k) {
  Divergence d{k, std::vector<uint8_t>(k.values.size(), kUniform), std::vector<uint8_t>(k.values.size(), 0)};
  do {
    d.changed = false;
    d.block(k.body, kUniform);
  } while (d.changed);
  d.checking = true;
  d.block(k.body, kUniform);
}

}  // namespace kaio::ir
