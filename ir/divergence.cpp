// Rejects barriers that not every thread of a block can reach: a barrier inside an if_,
// for_ or while_ whose condition (or bounds) depends on the thread. A value depends on the
// thread when it derives from tid / laneid, from a shuffle, a vote or an atomic, or from a
// variable written with such a value or under such control. Runs to a fixpoint, since a
// loop can carry a thread-dependent value into a variable read earlier in its body.
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

struct Divergence {
  const Kernel::Data& k;
  std::vector<uint8_t> tainted;
  bool changed = false;
  bool checking = false;

  void taint(uint32_t id) {
    if (id != kNoValue && !tainted[id]) {
      tainted[id] = 1;
      changed = true;
    }
  }
  bool any_arg(const Inst& i) const {
    for (int a = 0; a < i.nargs; ++a)
      if (tainted[i.args[a]]) return true;
    return false;
  }

  void block(const Block& b, bool divergent) {
    for (const Inst& i : b.insts) inst(i, divergent);
  }

  void inst(const Inst& i, bool divergent) {
    switch (i.op) {
      case Op::SReg: {
        auto r = static_cast<SpecialReg>(i.imm);
        if (r == SpecialReg::TidX || r == SpecialReg::TidY || r == SpecialReg::TidZ || r == SpecialReg::LaneId) taint(i.result);
        return;
      }
      case Op::Shfl: case Op::Vote: case Op::AtomicRmw: case Op::AtomicCas:
        taint(i.result);
        return;
      case Op::VarDecl:
        if (divergent || tainted[i.args[0]]) taint(i.result);
        return;
      case Op::VarWrite:
        if (divergent || tainted[i.args[1]]) taint(i.args[0]);
        return;
      case Op::Barrier:
        if (checking && divergent)
          throw UsageError(k.name, "barrier",
                           "a barrier inside an if_/for_/while_ whose condition depends on the thread index: not every "
                           "thread of the block reaches it (divergent barrier)");
        return;
      case Op::If: {
        bool d = divergent || tainted[i.args[0]];
        block(i.regions[0], d);
        block(i.regions[1], d);
        return;
      }
      case Op::For: {
        bool d = divergent || any_arg(i);
        if (any_arg(i)) taint(i.result);
        block(i.regions[0], d);
        return;
      }
      case Op::While: {
        bool d = divergent || tainted[static_cast<uint32_t>(i.imm)];
        block(i.regions[0], d);
        d = d || tainted[static_cast<uint32_t>(i.imm)];
        block(i.regions[1], d);
        return;
      }
      default:
        if (i.result != kNoValue && any_arg(i))
          for (uint32_t r = 0; r < i.nresults; ++r) taint(i.result + r);
        return;
    }
  }
};

}  // namespace

void check_barriers(const Kernel::Data& k) {
  Divergence d{k, std::vector<uint8_t>(k.values.size(), 0)};
  do {
    d.changed = false;
    d.block(k.body, false);
  } while (d.changed);
  d.checking = true;
  d.block(k.body, false);
}

}  // namespace kaio::ir
