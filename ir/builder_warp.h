// The builder's warp-level free functions (shuffles, votes, ballot) and atomics, beside
// builder.h (which includes this file at its end: include either one). They are thin
// templates over KernelBuilder::shfl / vote / atomic that accept host constants and
// handles alike, as the arithmetic operators do.
#pragma once

#include "kaio/ir/builder.h"

namespace kaio::ir {

// ---- warp-level free functions ----
// mask: the lanes taking part (all 32 by default); width: the segment size (power of 2).
template <ExprHandle V, Operand D>
Value shfl_down(const V& v, const D& delta, uint32_t width = 32, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(v);
  return x.builder()->shfl(ShflMode::Down, x, KernelBuilder::make_operand(delta), width, mask);
}
template <ExprHandle V, Operand D>
Value shfl_up(const V& v, const D& delta, uint32_t width = 32, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(v);
  return x.builder()->shfl(ShflMode::Up, x, KernelBuilder::make_operand(delta), width, mask);
}
template <ExprHandle V, Operand D>
Value shfl_xor(const V& v, const D& lane_mask, uint32_t width = 32, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(v);
  return x.builder()->shfl(ShflMode::Xor, x, KernelBuilder::make_operand(lane_mask), width, mask);
}
template <ExprHandle V, Operand D>
Value shfl_idx(const V& v, const D& lane, uint32_t width = 32, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(v);
  return x.builder()->shfl(ShflMode::Idx, x, KernelBuilder::make_operand(lane), width, mask);
}
template <ExprHandle P>
Value vote_all(const P& p, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(p);
  return x.builder()->vote(VoteMode::All, x, mask);
}
template <ExprHandle P>
Value vote_any(const P& p, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(p);
  return x.builder()->vote(VoteMode::Any, x, mask);
}
// A u32 with bit k set when lane k's predicate is true.
template <ExprHandle P>
Value ballot(const P& p, uint32_t mask = 0xffffffffu) {
  Value x = KernelBuilder::to_value(p);
  return x.builder()->vote(VoteMode::Ballot, x, mask);
}

// ---- atomics (global or shared pointers); each returns the previous value ----
#define KAIO_ATOMIC_FN(fname, OPC)                                                          \
  template <Operand I, Operand V>                                                           \
  Value fname(const Value& p, const I& index, const V& v) {                                 \
    Value i = p.builder()->index_operand(KernelBuilder::make_operand(index));               \
    return p.builder()->atomic(AtomicOp::OPC, p, i, KernelBuilder::make_operand(v));        \
  }
KAIO_ATOMIC_FN(atomic_add, Add)
KAIO_ATOMIC_FN(atomic_min, Min)
KAIO_ATOMIC_FN(atomic_max, Max)
KAIO_ATOMIC_FN(atomic_exch, Exch)
#undef KAIO_ATOMIC_FN
// Stores v at p[index] if it holds `compare`; returns what it held.
template <Operand I, Operand C, Operand V>
Value atomic_cas(const Value& p, const I& index, const C& compare, const V& v) {
  Value i = p.builder()->index_operand(KernelBuilder::make_operand(index));
  return p.builder()->atomic_cas(p, i, KernelBuilder::make_operand(compare), KernelBuilder::make_operand(v));
}

}  // namespace kaio::ir
