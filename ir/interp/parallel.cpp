// Interpreter: warp-level ops, as the PTX code generator emits them (codegen/emit_parallel.cpp).
//   shfl.sync: imm = mode | member mask << 8 | width << 40; the codegen passes
//     c = ((32 - width) << 8) | clamp (clamp 0 for up, 31 otherwise), and the PTX ISA then
//     defines, per lane l with segment mask sm = (32 - width) & 31:
//       min = l & sm, max = min | (clamp & ~sm)
//       up   j = l - b, valid if j >= max      down j = l + b, valid if j <= max
//       bfly j = l ^ b, valid if j <= max      idx  j = min | (b & 31 & ~sm), valid if j <= max
//     an invalid j gives the lane its own value. Values of every width move whole (the
//     codegen moves 64-bit values as two halves with the same lane, narrow ones widened).
//   vote.sync: over the active lanes of the member mask: all, any; ballot -> the u32 of
//     those lanes whose predicate is true.
// An active lane outside the member mask is undefined behaviour on the GPU; the
// interpreter stops with a UsageError.
#include <bit>
#include <cstdio>
#include <string>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp::impl {

namespace {

void check_members(Warp& w, const PInst& p, uint32_t mask) {
  uint32_t outside = w.active & ~mask;
  if (outside) {
    int l = std::countr_zero(outside);
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", mask);
    w.fail(p, l,
           "lane " + std::to_string(l) + " executes a warp-synchronous op but is not in its member mask " + buf +
               " (undefined on the GPU)");
  }
}

template <ShflMode M>
void shfl_fn(Warp& w, const PInst& p) {
  const uint32_t mask = p.src->attr.mask;
  const uint32_t width = p.src->attr.width;
  if (w.active & ~mask) check_members(w, p, mask);
  const int64_t sm = (32 - width) & 31;
  const int64_t clamp = M == ShflMode::Up ? 0 : 31;
  const uint64_t* v = w.slot(p.a);
  const uint64_t* b = w.slot(p.b);
  uint64_t out[kLanes];
  for_active(w.active, [&](int l) {
    const int64_t lo = l & sm, hi = lo | (clamp & ~sm);
    const int64_t bv = static_cast<uint32_t>(b[l]);
    int64_t j;
    bool ok;
    if constexpr (M == ShflMode::Up) {
      j = l - bv;
      ok = j >= hi;
    } else if constexpr (M == ShflMode::Down) {
      j = l + bv;
      ok = j <= hi;
    } else if constexpr (M == ShflMode::Xor) {
      j = l ^ bv;
      ok = j <= hi;
    } else {
      j = lo | (bv & 31 & ~sm);
      ok = j <= hi;
    }
    out[l] = v[ok ? j : l];
  });
  uint64_t* d = w.slot(p.dst);
  for_active(w.active, [&](int l) { d[l] = out[l]; });
}

template <VoteMode M>
void vote_fn(Warp& w, const PInst& p) {
  const uint32_t mask = p.src->attr.mask;
  if (w.active & ~mask) check_members(w, p, mask);
  const uint32_t m = w.active & mask;
  const uint32_t pred = w.mask_of(p.a) & m;
  uint64_t r;
  if constexpr (M == VoteMode::All) r = pred == m ? 1 : 0;
  else if constexpr (M == VoteMode::Any) r = pred != 0 ? 1 : 0;
  else r = pred;
  uint64_t* d = w.slot(p.dst);
  for_active(w.active, [&](int l) { d[l] = r; });
}

}  // namespace

ExecFn pick_parallel(const Kernel::Data& k, const Inst& i) {
  switch (i.op) {
    case Op::Shfl: {
      if (i.args.size() < 2 || k.values[i.args[0]].type.ptr) return nullptr;
      uint64_t width = i.attr.width;
      if (width == 0 || width > 32 || (width & (width - 1))) return nullptr;
      switch (i.attr.shfl) {
        case ShflMode::Up: return &shfl_fn<ShflMode::Up>;
        case ShflMode::Down: return &shfl_fn<ShflMode::Down>;
        case ShflMode::Xor: return &shfl_fn<ShflMode::Xor>;
        case ShflMode::Idx: return &shfl_fn<ShflMode::Idx>;
      }
      return nullptr;
    }
    case Op::Vote:
      if (i.args.empty()) return nullptr;
      switch (i.attr.vote) {
        case VoteMode::All: return &vote_fn<VoteMode::All>;
        case VoteMode::Any: return &vote_fn<VoteMode::Any>;
        case VoteMode::Ballot: return &vote_fn<VoteMode::Ballot>;
      }
      return nullptr;
    case Op::MbarInit: case Op::MbarArrive: case Op::MbarExpectTx: case Op::MbarTryWait:
      return pick_mbarrier(k, i);
    default:
      return nullptr;
  }
}

}  // namespace kaio::ir::interp::impl
