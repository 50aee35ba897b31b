// Interpreter: the warp-level tensor-core and asynchronous-copy ops, as the hardware
// distributes them over the lanes of a warp.
//
//   mma_sync     executed by the whole warp at once (all 32 lanes must be active: the
//                instruction is .sync.aligned). The A, B and C fragments are gathered from
//                every lane's registers through the shape's descriptor (mma_layout.h), the
//                product computed, and each lane's D registers written back. Floating
//                point: the products are exact and the sum C + sum_k A*B is formed in
//                double and rounded once to f32 (the tensor core adds in its own order,
//                with at least f32 precision: results agree to a few f32 ulp of the sum's
//                magnitude). tf32 operands ignore the low 13 bits of their f32 pattern, as
//                the hardware does. s8: exact, wrapping at 32 bits.
//   ldmatrix     the whole warp; lanes 8j..8j+7 give the row addresses of matrix j (each
//                16-byte aligned, checked against its shared array and the race shadow as a
//                16-byte load of that lane); each lane receives its fragment through
//                LdmatrixLayout.
//   cp_async     per lane: bounds and alignment of both sides are checked at issue, the
//                source bytes read (only src_bytes of them; the rest is zero) and kept with
//                the lane's open group; the destination bytes are marked busy. Any shared
//                access to busy bytes is an error. cp_async_commit_group closes the lane's
//                open group; cp_async_wait_group(n) completes all but the newest n groups:
//                the bytes land and count as stored by that lane (other lanes need a
//                barrier before reading them, as on the GPU). Copies never waited for are
//                dropped when the block ends.
#include <bit>
#include <cinttypes>
#include <cstdio>

#include "kaio/ir/interp/impl.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::ir::interp::impl {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

void need_whole_warp(Warp& w, const PInst& p) {
  if (w.active == kFullMask) return;
  int l = std::countr_zero(~w.active);
  w.fail(p, l,
         std::string(op_name(p.src->op)) + " is executed by the whole warp (.sync.aligned), but lane " + std::to_string(l) +
             " is not active (a partial warp, or a branch that splits the warp): undefined on the GPU");
}

// Element e of a fragment register as a double (or exact integer).
double element(const MmaShape& s, uint64_t reg, int e) {
  const uint32_t x = static_cast<uint32_t>(reg);
  switch (s.kind) {
    case MmaKind::F16: return kaio::detail::f16_bits_to_f32(static_cast<uint16_t>(x >> (16 * e)));
    case MmaKind::BF16: return kaio::detail::bits_f32((x >> (16 * e)) << 16);
    case MmaKind::TF32: return kaio::detail::bits_f32(x & ~uint32_t(0x1fff));
    case MmaKind::S8: return static_cast<int8_t>(static_cast<uint8_t>(x >> (8 * e)));
  }
  return 0;
}

template <MmaKind K>
void mma_fn(Warp& w, const PInst& p) {
  need_whole_warp(w, p);
  constexpr const MmaShape& s = mma_shape(K);
  const auto& args = p.src->args;
  const int nc = s.c.regs, na = s.a.regs;
  double A[16][32] = {}, B[32][8] = {};
  for (int l = 0; l < kLanes; ++l) {
    for (int r = 0; r < s.a.regs; ++r)
      for (int e = 0; e < s.a.per_reg; ++e)
        A[s.a.row_of(l, r, e)][s.a.col_of(l, r, e)] = element(s, w.slot(args[nc + r])[l], e);
    for (int r = 0; r < s.b.regs; ++r)
      for (int e = 0; e < s.b.per_reg; ++e)
        B[s.b.row_of(l, r, e)][s.b.col_of(l, r, e)] = element(s, w.slot(args[nc + na + r])[l], e);
  }
  // D for every lane before any register is written (the accumulators are read first).
  uint64_t D[kLanes][4];
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < nc; ++r) {
      const int i = s.c.row_of(l, r), j = s.c.col_of(l, r);
      const uint64_t c = w.slot(args[r])[l];
      if constexpr (K == MmaKind::S8) {
        int64_t sum = 0;
        for (int k = 0; k < s.k; ++k) sum += static_cast<int64_t>(A[i][k]) * static_cast<int64_t>(B[k][j]);
        uint32_t d = static_cast<uint32_t>(static_cast<int32_t>(c)) + static_cast<uint32_t>(sum);  // wraps
        D[l][r] = V<Scalar::S32>::put(static_cast<int32_t>(d));
      } else {
        double sum = V<Scalar::F32>::get(c);
        for (int k = 0; k < s.k; ++k) sum += A[i][k] * B[k][j];
        D[l][r] = V<Scalar::F32>::put(static_cast<float>(sum));
      }
    }
  for (int l = 0; l < kLanes; ++l)
    for (int r = 0; r < nc; ++r) w.slot(args[r])[l] = D[l][r];
}

void ldmatrix_fn(Warp& w, const PInst& p) {
  need_whole_warp(w, p);
  const Inst& i = *p.src;
  const uint32_t num = i.nresults;
  const bool trans = i.attr.trans;
  const uint32_t es = static_cast<uint32_t>(scalar_bytes(w.L->k->values[i.args[0]].type.elem));
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  uint16_t m[4][8][8];  // matrix, row, 16-bit column
  for (uint32_t j = 0; j < num; ++j)
    for (int r = 0; r < 8; ++r) {
      const int l = LdmatrixLayout::address_lane(static_cast<int>(j), r);
      uint32_t addr = shared_span(w, p, l, P[l], I[l], es, 16, 16, ShadowUse::Load);
      std::memcpy(m[j][r], w.B->shared.data() + addr, 16);
    }
  for (uint32_t j = 0; j < num; ++j) {
    uint64_t* d = w.slot(p.dst + j);
    for (int l = 0; l < kLanes; ++l) {
      uint32_t lo = m[j][LdmatrixLayout::row_of(l, 0, trans)][LdmatrixLayout::col_of(l, 0, trans)];
      uint32_t hi = m[j][LdmatrixLayout::row_of(l, 1, trans)][LdmatrixLayout::col_of(l, 1, trans)];
      d[l] = lo | (hi << 16);
    }
  }
}

void cp_async_fn(Warp& w, const PInst& p) {
  const Inst& i = *p.src;
  const Kernel::Data& k = *w.L->k;
  const uint32_t bytes = i.attr.count;
  const uint32_t es = static_cast<uint32_t>(scalar_bytes(k.values[i.args[0]].type.elem));
  const uint64_t *D = w.slot(i.args[0]), *DI = w.slot(i.args[1]), *S = w.slot(i.args[2]), *SI = w.slot(i.args[3]);
  const uint64_t* N = i.args.size() == 5 ? w.slot(i.args[4]) : nullptr;
  BlockCtx& B = *w.B;
  if (B.async_busy.size() < B.shared.size()) B.async_busy.assign(B.shared.size(), 0);
  for_active(w.active, [&](int l) {
    const uint64_t n = N ? static_cast<uint32_t>(N[l]) : bytes;
    const uint64_t src = S[l] + SI[l] * es;  // wraps like the codegen's mul.wide + add
    auto where = [&] {
      return "cp_async of " + std::to_string(bytes) + " bytes from " + std::string(k.values[i.args[2]].type.str()) +
             " %" + std::to_string(i.args[2]) + "[" + std::to_string(static_cast<int64_t>(SI[l])) + "] (address " +
             hex(src) + ")";
    };
    if (n > bytes) w.fail(p, l, where() + ": src_bytes " + std::to_string(n) + " exceeds the copy size");
    if (src % bytes) w.fail(p, l, "misaligned " + where() + ": the source must be aligned to " + std::to_string(bytes) + " bytes");
    if (n > 0) {
      const LRegion* rg = w.region_of(S[l]);
      if (!rg || src < rg->base || src > rg->end || rg->end - src < n)
        w.fail(p, l,
               "out-of-bounds " + where() + ": " + std::to_string(n) + " source bytes are not inside " +
                   (rg ? "the pointer's allocation of " + std::to_string(rg->end - rg->base) + " bytes at " + hex(rg->base)
                       : std::string("any allocation known to the interpreter")) +
                   " (pass src_bytes = 0 for a source out of bounds)");
    }
    const uint32_t dst = shared_span(w, p, l, D[l], DI[l], es, bytes, bytes, ShadowUse::Store);
    AsyncCopy c;
    c.addr = dst;
    c.lane = static_cast<uint8_t>(l);
    c.n = static_cast<uint8_t>(bytes);
    if (n > 0) std::memcpy(c.data, reinterpret_cast<const void*>(src), n);
    w.copies.push_back(c);
    for (uint32_t b = 0; b < bytes; ++b) ++B.async_busy[dst + b];
    ++B.async_inflight;
  });
}

void cp_async_commit_fn(Warp& w, const PInst&) {
  for (AsyncCopy& c : w.copies)
    if (!c.committed && (w.active >> c.lane & 1)) {
      c.committed = true;
      c.group = w.async_groups[c.lane];
    }
  for_active(w.active, [&](int l) { ++w.async_groups[l]; });
}

// The copy's bytes land; they count as stored by its lane in the current epoch.
void complete(Warp& w, const AsyncCopy& c) {
  BlockCtx& B = *w.B;
  std::memcpy(B.shared.data() + c.addr, c.data, c.n);
  const uint16_t me = static_cast<uint16_t>(w.index * kLanes + c.lane);
  for (uint32_t b = 0; b < c.n; ++b) {
    --B.async_busy[c.addr + b];
    ShadowByte& s = B.shadow[c.addr + b];
    s.init = B.gen;
    s.wep = B.epoch;
    s.writer = me;
  }
  --B.async_inflight;
}

void cp_async_wait_fn(Warp& w, const PInst& p) {
  const uint32_t pending = p.src->attr.count;
  size_t keep = 0;
  for (size_t n = 0; n < w.copies.size(); ++n) {
    const AsyncCopy& c = w.copies[n];
    const bool done = (w.active >> c.lane & 1) && c.committed && c.group + pending < w.async_groups[c.lane];
    if (done) complete(w, c);
    else w.copies[keep++] = c;
  }
  w.copies.resize(keep);
}

}  // namespace

ExecFn pick_tensor(const Kernel::Data&, const Inst& i) {
  switch (i.op) {
    case Op::MmaSync:
      switch (i.attr.mma) {
        case MmaKind::F16: return &mma_fn<MmaKind::F16>;
        case MmaKind::BF16: return &mma_fn<MmaKind::BF16>;
        case MmaKind::TF32: return &mma_fn<MmaKind::TF32>;
        case MmaKind::S8: return &mma_fn<MmaKind::S8>;
      }
      return nullptr;
    case Op::Ldmatrix: return &ldmatrix_fn;
    case Op::CpAsync: return &cp_async_fn;
    case Op::CpAsyncCommit: return &cp_async_commit_fn;
    case Op::CpAsyncWait: return &cp_async_wait_fn;
    default: return nullptr;
  }
}

}  // namespace kaio::ir::interp::impl
