// The builder's warp-level free functions (shuffles, votes, ballot) and atomics, beside
// builder.h (which includes this file at its end: include either one). They are thin
// templates over KernelBuilder::shfl / vote / atomic that accept host constants and
// handles alike, as the arithmetic operators do.
#pragma once

#include "kaio/ir/builder.h"

namespace kaio::ir {

// ---- warp-level free functions ----
// mask: the lanes taking part (all 32 by default); width: the segment size (power of 2).
// shfl_down / shfl_up (by `delta` lanes), shfl_xor (to lane ^ `delta`), shfl_idx (from lane
// `delta`).
#define KAIO_SHFL_FN(fname, MODE)                                                            \
  template <ExprHandle V, Operand D>                                                         \
  Value fname(const V& v, const D& delta, uint32_t width = 32, uint32_t mask = 0xffffffffu) { \
    Value x = KernelBuilder::to_value(v);                                                    \
    return x.builder()->shfl(ShflMode::MODE, x, KernelBuilder::make_operand(delta), width, mask); \
  }
KAIO_SHFL_FN(shfl_down, Down)
KAIO_SHFL_FN(shfl_up, Up)
KAIO_SHFL_FN(shfl_xor, Xor)
KAIO_SHFL_FN(shfl_idx, Idx)
#undef KAIO_SHFL_FN
// vote_all / vote_any: whether the predicate holds on every / some lane; ballot: a u32 with
// bit k set when lane k's predicate is true.
#define KAIO_VOTE_FN(fname, MODE)                                  \
  template <ExprHandle P>                                          \
  Value fname(const P& p, uint32_t mask = 0xffffffffu) {           \
    Value x = KernelBuilder::to_value(p);                          \
    return x.builder()->vote(VoteMode::MODE, x, mask);             \
  }
KAIO_VOTE_FN(vote_all, All)
KAIO_VOTE_FN(vote_any, Any)
KAIO_VOTE_FN(ballot, Ballot)
#undef KAIO_VOTE_FN

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
