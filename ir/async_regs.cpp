// The asynchronous-register rule. An op with Effect::AsyncIssue (wgmma.mma_async) reads and
// writes its variable operands (a register array: an accumulator tile) after it is issued,
// until a wait covers it. In between, no other instruction may read or write those
// registers: a read would see a partial result, and a write (or the register copy a
// variable write makes) would race with the tensor core. Only further async ops of the
// same kind may name them (they chain on the accumulator in hardware order).
//
// Groups: AsyncCommit closes the ops issued since the last commit into one group;
// AsyncWait with attr.count = N returns once at most N committed groups are in flight, so
// it completes every group but the newest N. Ops not yet committed stay in flight.
//
// Control flow is handled conservatively: a branch's in-flight set is the union of both
// arms, and a loop body is walked twice so that what one iteration leaves in flight is
// seen by the next.
#include <algorithm>
#include <string>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

constexpr int kIdle = -2;       // not in flight
constexpr int kUncommitted = -1;

struct State {
  std::vector<int> group;  // per value id: kIdle, kUncommitted or the committed group's number
  int committed = 0;       // groups committed so far on this path

  void merge(const State& o) {
    for (size_t v = 0; v < group.size(); ++v) group[v] = std::max(group[v], o.group[v]);
    committed = std::max(committed, o.committed);
  }
};

struct AsyncRegs {
  const Kernel::Data& k;

  [[noreturn]] void reject(const Inst& i, uint32_t var) const {
    throw UsageError(k.name, op_name(i.op),
                     "register %" + std::to_string(var) +
                         " is still written by an asynchronous op (issued, not yet waited for): wait for its group "
                         "(e.g. wgmma_wait_group(0)) before reading or writing it");
  }

  void block(const Block& b, State& s) const {
    for (const Inst& i : b.insts) inst(i, s);
  }

  void inst(const Inst& i, State& s) const {
    const OpDef& d = i.def();
    // cp.async groups are a queue of their own (per thread, shared memory only): its
    // commits and waits never close or complete wgmma groups. Its ordering is checked where
    // the bytes are, by the interpreter's shared-memory race detector.
    if (d.has(Effect::AsyncCopy)) return;
    if (d.has(Effect::AsyncIssue)) {
      for (uint32_t a : i.args)
        if (k.values[a].is_var) s.group[a] = kUncommitted;
      return;
    }
    if (d.has(Effect::AsyncCommit)) {
      for (int& g : s.group)
        if (g == kUncommitted) g = s.committed;
      ++s.committed;
      return;
    }
    if (d.has(Effect::AsyncWait)) {
      int done_below = s.committed - static_cast<int>(i.attr.count);
      for (int& g : s.group)
        if (g >= 0 && g < done_below) g = kIdle;
      return;
    }
    for (uint32_t a : i.args)
      if (a < s.group.size() && s.group[a] != kIdle) reject(i, a);
    switch (i.op) {
      case Op::If: {
        State other = s;
        block(i.regions[0], s);
        block(i.regions[1], other);
        s.merge(other);
        return;
      }
      case Op::For:
      case Op::While:
        for (int pass = 0; pass < 2; ++pass) {
          State entry = s;
          for (const Block& r : i.regions) block(r, s);
          s.merge(entry);
        }
        return;
      default:
        return;
    }
  }
};

}  // namespace

// The verifier calls this only for kernels that issue an asynchronous op.
void check_async_regs(const Kernel::Data& k) {
  State s{std::vector<int>(k.values.size(), kIdle), 0};
  AsyncRegs{k}.block(k.body, s);
}

}  // namespace kaio::ir
