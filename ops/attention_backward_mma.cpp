// The tensor-core attention backward kernels (FlashAttention-2 schedule) on mma.sync
// m16n8k16, f16 / bf16 in, f32 accumulate, sm_80 and newer.
//
// They are built from warp-level products over shared tiles:
//   abt:  C (16 x n) += A (the warp's 16 rows, D) . B (n rows, D)^T   ldmatrix A and B ("col")
//   cb:   C (16 x D) += X (16 x n, a C fragment repacked as 16-bit A) . B (n rows, D)
//                                                                       ldmatrix.trans B
// Dkv: the block's BN keys (16 per warp) in shared memory once; per query tile (Q, dO and
// the lse and D of its rows through a cp.async ring), the group's query heads in order:
//   S^T = K Q^T, dP^T = V dO^T            (abt)
//   P^T = exp(mods(S^T) - lse), dS^T = P^T (dP^T - D) mods'   (per element, masked)
//   dV += P^T dO, dK += dS^T Q             (cb)
// Dq: the block's BM query rows (16 per warp), Q and dO in
// shared memory once; per KV tile: S = Q K^T, dP = dO V^T, P and dS per element,
// dQ += dS K.
// mods' of a softcap is 1 - tanh^2, computed with P in one pass. The work per element is
// the scalar kernels' (ops/attention_backward_rows.cpp); P and dS are rounded to the dtype
// for the second products, as the forward rounds P.
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/kernel/online_softmax.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/kernel/warp_mma.h"

namespace kaio::ops {

using Part = AttentionBackwardPart;

// The shapes are rows of the backward's tile table (ops/attention_backward_variants.cpp).
// Shared memory: (2 x own + 2 x stages x ring) rows of D + 8 elements (+ 2 x stages x BM f32
// for dkv; D 128 at two stages: 104 KB for dq, 70 KB for dkv). The dkv kernel at D 128 walks
// query tiles of 32 rows: with 64, its dK, dV, S^T and dP^T accumulators (192 registers)
// leave too few for the rest and ptxas spills (sm_90: 120 bytes); with 32 it fits in 252
// registers. Head dim 256 is left to the rows kernels: a warp's dK and dV of 16 x 256 alone
// would take 256 registers a thread.

namespace {

using ir::Scalar;
using ir::Value;
using kernel::AccTile;
using kernel::SharedTile;

using kernel::kLog2e;

class BwdKernel {
 public:
  // Dkv: "own" is the block's BN key rows (K and V), "ring" the BM query rows (Q and dO).
  // Dq: "own" is the BM query rows (Q and dO), "ring" the BN key rows (K and V).
  BwdKernel(ir::KernelBuilder& b, const AttentionBackwardMmaConfig& c, detail::AttentionBwdSignature& s)
      : b_(b), c_(c), s_(s), D_(c.head_dim), warps_(c.warps()), dkv_(c.part != Part::Dq),
        own_rows_(dkv_ ? c.bn : c.bm), ring_rows_(dkv_ ? c.bm : c.bn),
        own0_{ir::SmemLayout::padded(c.head_dim, 8), own_rows_, 0, 1},
        own1_{ir::SmemLayout::padded(c.head_dim, 8), own_rows_, own0_.end(), 1},
        ring0_{ir::SmemLayout::padded(c.head_dim, 8), ring_rows_, own1_.end(), c.stages},
        ring1_{ir::SmemLayout::padded(c.head_dim, 8), ring_rows_, ring0_.end(), c.stages} {}

  // Dkv: per stage, the lse and D of the tile's BM query rows (f32, after the tiles).
  uint32_t stats_base() const { return ring1_.end() * 2 / 4; }  // in f32 elements

  void build() {
    tid_ = b_.thread_idx_x();
    lane_ = b_.lane_id();
    warp_ = b_.warp_id();
    batch_ = b_.block_idx_z();
    smem_ = b_.dynamic_shared(c_.dtype, 128);
    smem_f32_ = b_.dynamic_shared(Scalar::F32, 128);
    seq_ = detail::bwd_sequence(b_, s_, batch_);
    first_ = b_.block_idx_x() * own_rows_;
    b_.if_(first_ < (dkv_ ? seq_.sk : seq_.sq), [&] {
      if (dkv_) dkv_body();
      else dq_body();
    });
  }

 private:
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value i32(Value v) { return ir::cast<int32_t>(v); }
  Value flag(uint32_t f) { return (s_.flags.ir & f) != 0u; }
  ir::MmaKind kind() const { return c_.dtype == Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16; }

  // `t.rows` rows x D from global rows first_row.. (row r at row_offset(r) of src) into
  // the shared tile at dst, in 16-byte cp.async chunks; rows at or past `rows` are
  // zero-filled from the clamped address `base`.
  void copy_rows(const SharedTile& t, Value dst, Value src, Value base, Value first_row, Value rows,
                 const std::function<Value(Value)>& row_offset) {
    kernel::copy_rows(b_, smem_, t, dst, src, base, first_row, rows, D_, tid_, 32 * warps_, row_offset);
  }

  // Rows first.. of the q-side (q and do of head h) or the k-side (k and v of the KV head)
  // into tiles t0 (q or k) and t1 (do or v) at the given offsets.
  void load_q_side(const SharedTile& t0, Value at0, const SharedTile& t1, Value at1, Value first, Value h) {
    Value qb = u64(batch_) * s_.q_bs.ir + u64(h) * s_.q_hs.ir, db = u64(batch_) * s_.do_bs.ir + u64(h) * s_.do_hs.ir;
    copy_rows(t0, at0, s_.q.ir, qb, first, seq_.sq, [&](Value r) { return qb + u64(seq_.qstart + r) * s_.q_ss.ir; });
    copy_rows(t1, at1, s_.dout.ir, db, first, seq_.sq, [&](Value r) { return db + u64(seq_.qstart + r) * s_.do_ss.ir; });
  }
  void load_k_side(const SharedTile& t0, Value at0, const SharedTile& t1, Value at1, Value first) {
    Value kb = u64(batch_) * s_.k_bs.ir + u64(kvh_) * s_.k_hs.ir, vb = u64(batch_) * s_.v_bs.ir + u64(kvh_) * s_.v_hs.ir;
    copy_rows(t0, at0, s_.k.ir, kb, first, seq_.sk, [&](Value r) { return kb + u64(seq_.kstart + r) * s_.k_ss.ir; });
    copy_rows(t1, at1, s_.v.ir, vb, first, seq_.sk, [&](Value r) { return vb + u64(seq_.kstart + r) * s_.v_ss.ir; });
  }

  // C (16 x n) += A (16 rows at element a0, D) . B (n rows at element b0, D)^T.
  void abt(const AccTile& C, const SharedTile& ta, Value a0, const SharedTile& tb, Value b0, uint32_t n) {
    const uint32_t row = tb.lay.row_stride();
    Value a_lane = a0 + ta.at(lane_ % 16u, (lane_ / 16u) * 8u);
    Value b_lane = b0 + tb.at((lane_ / 16u) * 8u + lane_ % 8u, ((lane_ / 8u) % 2u) * 8u);
    kernel::mma_abt(b_, kind(), smem_, C, D_, n, [&](uint32_t ks) { return a_lane + ks * 16; },
                    [&](uint32_t ni, uint32_t ks) { return b_lane + (ni * 8 * row + ks * 16); });
  }

  // C (16 x D) += X (16 x n, f32 C fragments rounded to the dtype) . B (n rows at b0, D).
  void cb(const AccTile& C, const AccTile& X, const SharedTile& tb, Value b0, uint32_t n) {
    const uint32_t row = tb.lay.row_stride();
    Value b_lane = b0 + tb.at(lane_ % 16u, (lane_ / 16u) * 8u);
    kernel::mma_ab(b_, kind(), smem_, C, n, D_, [&](uint32_t ks) { return kernel::p_fragment(X, ks, c_.dtype); },
                   [&](uint32_t ks, uint32_t ni) { return b_lane + (ks * 16 * row + ni * 8); });
  }

  // This batch entry's window (detail::BwdWindow: visible, queries_of, keys_of).
  detail::BwdWindow window() { return {i32(seq_.sq), i32(seq_.sk), s_.window_left.ir, s_.window_right.ir}; }
  Value visible(Value i, Value j) { return window().visible(i, j); }

  // S becomes P = exp(mods(scale S) - lse) (0 where masked) and dP becomes
  // dS = P (dP - D) mods'. query(ni, r) / key(ni, r): the element's indices; lse(ni, r) and
  // delta(ni, r) its row statistics (called for r = 0..3 in order for each ni). `full`: every
  // element of the tile is visible (then with no softcap or ALiBi only the scale applies).
  using Index = std::function<Value(uint32_t, uint32_t)>;
  void probabilities(const AccTile& S, const AccTile& dP, Value slope, Value full, const Index& query, const Index& key,
                     const Index& lse, const Index& delta) {
    Value cap = s_.softcap.ir;
    // Two passes, not three: a softcap of 0 selects the plain score and a derivative of 1
    // (the tanh of the masked pass costs little; the tiles that take it are the edges).
    auto pass = [&](bool plain) {
      Value capped = cap > 0.0f;
      for (uint32_t ni = 0; ni < S.nt(); ++ni)
        for (uint32_t r = 0; r < 4; ++r) {
          ir::Var x = S.at(0, 0, ni, r), dp = dP.at(0, 0, ni, r);
          Value l = lse(ni, r), d = delta(ni, r);
          if (plain) {
            Value p = ir::exp2_ftz(ir::fma(x.get(), s_.scale.ir * kLog2e, -(l * kLog2e)));
            x = p;
            dp = p * (dp.get() - d);
            continue;
          }
          Value sv = x.get() * s_.scale.ir;
          Value t = ir::tanh(sv / cap);
          Value deriv = ir::select(capped, 1.0f - t * t, 1.0f);
          sv = ir::select(capped, cap * t, sv);
          Value i = query(ni, r), j = key(ni, r);
          Value center = i + i32(seq_.sk) - i32(seq_.sq);
          sv = sv - slope * ir::cast<float>(ir::abs(center - j));
          Value p = ir::select(visible(i, j), ir::exp2_ftz((sv - l) * kLog2e), 0.0f);
          x = p;
          dp = p * (dp.get() - d) * deriv;
        }
    };
    b_.if_(full && cap <= 0.0f && !flag(detail::kBwdAlibi), [&] { pass(true); }).else_([&] { pass(false); });
  }

  Value slope_of(Value h) {
    ir::Var slope = b_.var<float>(0.0f);
    b_.if_(flag(detail::kBwdAlibi), [&] {
      Value a = s_.alibi.ir[h];
      slope = a;
    });
    return slope.get();
  }
  Value stat_index(Value h, Value i) { return u64(batch_) * s_.lse_bs.ir + u64(h) * s_.lse_hs.ir + u64(seq_.qstart + i); }

  std::pair<Value, Value> queries_of(Value j) { return window().queries_of(j); }
  std::pair<Value, Value> keys_of(Value i) { return window().keys_of(i); }

  // Rows of a 16-row accumulator into a tensor: row = first + warp * 16 + its fragment row.
  void store(const AccTile& A, const kernel::Ptr& out, const kernel::Param<uint64_t>& bs, const kernel::Param<uint64_t>& ss,
             const kernel::Param<uint64_t>& hs, Value h, Value start, Value rows, Value factor) {
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    for (uint32_t half = 0; half < 2; ++half) {
      Value r = first_ + warp_ * 16u + lane_ / 4u + 8u * half;
      b_.if_(r < rows, [&] {
        Value base = u64(batch_) * bs.ir + u64(start + r) * ss.ir + u64(h) * hs.ir;
        for (uint32_t ni = 0; ni < D_ / 8; ++ni) {
          Value c = A.col(lane_, ni, 2 * half);
          Value lo = ir::cast(A.at(0, 0, ni, 2 * half).get() * factor, t16, ir::Rounding::Rn);
          Value hi = ir::cast(A.at(0, 0, ni, 2 * half + 1).get() * factor, t16, ir::Rounding::Rn);
          out.ir[base + u64(c)] = lo;
          out.ir[base + u64(c + 1u)] = hi;
        }
      });
    }
  }

  void dkv_body() {
    Value zero = b_.constant<uint32_t>(0u);
    kvh_ = b_.block_idx_y();
    const uint32_t bm = c_.bm, bn = c_.bn;
    load_k_side(own0_, b_.constant<uint32_t>(own0_.base), own1_, b_.constant<uint32_t>(own1_.base), first_);
    b_.cp_async_commit_group();
    // The query tiles that see any of the block's keys (the bounds are monotonic in j).
    Value last = ir::min(first_ + (bn - 1), seq_.sk - 1u);
    Value lo = ir::cast<uint32_t>(queries_of(i32(first_)).first), hi = ir::cast<uint32_t>(queries_of(i32(last)).second);
    Value t0 = lo / bm;
    Value tiles = ir::select(hi > lo, (hi + (bm - 1)) / bm - t0, zero);
    Value steps = tiles * s_.group.ir;  // the group's query heads in order, each over its tiles
    auto head_of = [&](Value t) { return kvh_ * s_.group.ir + t / tiles; };
    auto m0_of = [&](Value t) { return (t0 + t % tiles) * bm; };
    const AccTile dK(b_, 1, 1, D_ / 8), dV(b_, 1, 1, D_ / 8), S(b_, 1, 1, bm / 8), dP(b_, 1, 1, bm / 8);
    Value j = i32(first_ + warp_ * 16u);  // the warp's first key
    Value k_rows = own0_.base + own0_.at(warp_ * 16u, 0u), v_rows = own1_.base + own1_.at(warp_ * 16u, 0u);
    kernel::CpAsyncRing ring(b_, c_.stages, zero);
    ring.pipeline(steps, [&](Value t) {
      b_.if_(t < steps, [&] {
        Value st = ring.load_stage();
        Value m0 = m0_of(t), h = head_of(t);
        load_q_side(ring0_, ring0_.base + ring0_.stage(st), ring1_, ring1_.base + ring1_.stage(st), m0, h);
        // lse and D of the tile's rows, 4 bytes a copy (their rows need not be 16-byte aligned).
        const uint32_t threads = 32 * warps_;
        for (uint32_t e = 0; e < (2 * bm + threads - 1) / threads; ++e) {
          Value id = tid_ + e * threads;
          b_.if_(id < 2 * bm, [&] {
            Value which = id / bm, c = id - which * bm, i = m0 + c;
            Value src = stat_index(h, ir::min(i, seq_.sq - 1u));
            Value bytes = ir::select(i < seq_.sq, b_.constant<uint32_t>(4u), b_.constant<uint32_t>(0u));
            Value dst = stats_base() + st * (2 * bm) + id;
            b_.if_(which == 0u, [&] { b_.cp_async(smem_f32_, dst, s_.lse.ir, src, 4, ir::CacheHint::Default, bytes); })
                .else_([&] { b_.cp_async(smem_f32_, dst, s_.delta.ir, src, 4, ir::CacheHint::Default, bytes); });
          });
        }
      });
    }, [&](Value t) {
      Value st = ring.read_stage(), h = head_of(t), m0 = m0_of(t);
      Value q0 = ring0_.base + ring0_.stage(st), d0 = ring1_.base + ring1_.stage(st);
      S.zero();
      dP.zero();
      abt(S, own0_, k_rows, ring0_, q0, bm);
      abt(dP, own1_, v_rows, ring1_, d0, bm);
      // Columns are queries: their lse and D from the stage, read where used (registers
      // are short here), each loaded at r = 0, 1 and reused at r = 2, 3.
      Value stats = stats_base() + st * (2 * bm);
      std::vector<Value> lse(bm / 4), delta(bm / 4);
      auto stat = [&](std::vector<Value>& cache, uint32_t at, uint32_t ni, uint32_t r) {
        if (r < 2) cache[2 * ni + r] = smem_f32_[stats + (at + S.col(lane_, ni, r))];
        return cache[2 * ni + r % 2];
      };
      // Every element visible: the tile inside both sequences and every query's window
      // covering the block's keys (the bounds are monotonic in the query).
      Value full = m0 + bm <= seq_.sq && first_ + bn <= seq_.sk && keys_of(i32(m0 + (bm - 1))).first <= i32(first_) &&
                   keys_of(i32(m0)).second >= i32(first_ + bn);
      probabilities(S, dP, slope_of(h), full, [&](uint32_t ni, uint32_t r) { return i32(m0 + S.col(lane_, ni, r)); },
                    [&](uint32_t, uint32_t r) { return j + i32(S.row(lane_, 0, r)); },
                    [&](uint32_t ni, uint32_t r) { return stat(lse, 0, ni, r); },
                    [&](uint32_t ni, uint32_t r) { return stat(delta, bm, ni, r); });
      cb(dV, S, ring1_, d0, bm);
      cb(dK, dP, ring0_, q0, bm);
    });
    store(dK, s_.dk, s_.dk_bs, s_.dk_ss, s_.dk_hs, kvh_, seq_.kstart, seq_.sk, s_.scale.ir);
    store(dV, s_.dv, s_.dv_bs, s_.dv_ss, s_.dv_hs, kvh_, seq_.kstart, seq_.sk, b_.constant<float>(1.0f));
  }

  void dq_body() {
    Value zero = b_.constant<uint32_t>(0u);
    Value h = b_.block_idx_y();
    kvh_ = h / s_.group.ir;
    const uint32_t bn = c_.bn;
    load_q_side(own0_, b_.constant<uint32_t>(own0_.base), own1_, b_.constant<uint32_t>(own1_.base), first_, h);
    b_.cp_async_commit_group();
    // This thread's two rows and their statistics (rows past the sequence: the last row's;
    // their results are not stored).
    Value lse[2], delta[2], rows[2];
    for (uint32_t half = 0; half < 2; ++half) {
      rows[half] = first_ + warp_ * 16u + lane_ / 4u + 8u * half;
      Value i = ir::min(rows[half], seq_.sq - 1u);
      lse[half] = s_.lse.ir[stat_index(h, i)];
      delta[half] = s_.delta.ir[stat_index(h, i)];
    }
    Value last = ir::min(first_ + (c_.bm - 1), seq_.sq - 1u);
    Value lo = ir::cast<uint32_t>(keys_of(i32(first_)).first), hi = ir::cast<uint32_t>(keys_of(i32(last)).second);
    Value t0 = lo / bn;
    Value steps = ir::select(hi > lo, (hi + (bn - 1)) / bn - t0, zero);
    Value slope = slope_of(h);
    const AccTile dQ(b_, 1, 1, D_ / 8), S(b_, 1, 1, bn / 8), dP(b_, 1, 1, bn / 8);
    Value q_rows = own0_.base + own0_.at(warp_ * 16u, 0u), d_rows = own1_.base + own1_.at(warp_ * 16u, 0u);
    kernel::CpAsyncRing ring(b_, c_.stages, zero);
    ring.pipeline(steps, [&](Value t) {
      b_.if_(t < steps, [&] {
        Value st = ring.load_stage();
        load_k_side(ring0_, ring0_.base + ring0_.stage(st), ring1_, ring1_.base + ring1_.stage(st), (t0 + t) * bn);
      });
    }, [&](Value t) {
      Value st = ring.read_stage(), n0 = (t0 + t) * bn;
      Value k0 = ring0_.base + ring0_.stage(st), v0 = ring1_.base + ring1_.stage(st);
      S.zero();
      dP.zero();
      abt(S, own0_, q_rows, ring0_, k0, bn);
      abt(dP, own1_, d_rows, ring1_, v0, bn);
      Value full = first_ + c_.bm <= seq_.sq && n0 + bn <= seq_.sk && keys_of(i32(first_ + (c_.bm - 1))).first <= i32(n0) &&
                   keys_of(i32(first_)).second >= i32(n0 + bn);
      probabilities(S, dP, slope, full, [&](uint32_t, uint32_t r) { return i32(rows[r / 2]); },
                    [&](uint32_t ni, uint32_t r) { return i32(n0 + S.col(lane_, ni, r)); },
                    [&](uint32_t, uint32_t r) { return lse[r / 2]; }, [&](uint32_t, uint32_t r) { return delta[r / 2]; });
      cb(dQ, dP, ring0_, k0, bn);
    });
    store(dQ, s_.dq, s_.dq_bs, s_.dq_ss, s_.dq_hs, h, seq_.qstart, seq_.sq, s_.scale.ir);
  }

  ir::KernelBuilder& b_;
  const AttentionBackwardMmaConfig& c_;
  detail::AttentionBwdSignature& s_;
  const uint32_t D_, warps_;
  const bool dkv_;
  const uint32_t own_rows_, ring_rows_;
  const SharedTile own0_, own1_, ring0_, ring1_;
  Value tid_, lane_, warp_, batch_, smem_, smem_f32_, first_, kvh_;
  detail::BwdSequence seq_;
};

ir::Kernel build_mma(const AttentionBackwardMmaConfig& c) {
  if (c.dtype != Scalar::F16 && c.dtype != Scalar::BF16)
    throw UsageError("", "attention_backward", std::string("the mma.sync kernels take f16 or bf16, not ") + ir::scalar_name(c.dtype));
  if (c.part == Part::Dot || c.head_dim % 16 || c.bm % 16 || c.bn % 16 || c.stages < 2 || c.stages > 4)
    throw UsageError("", "attention_backward", "attention_bwd_mma config " + c.str() + " is not buildable");
  const char* part = c.part == Part::Dq ? "dq_" : "dkv_";
  ir::KernelBuilder b(std::string("attention_bwd_mma_") + part + ir::scalar_name(c.dtype) + "_d" +
                      std::to_string(c.head_dim) + "_m" + std::to_string(c.bm) + "n" + std::to_string(c.bn) + "s" +
                      std::to_string(c.stages));
  detail::AttentionBwdSignature sig(c.dtype);
  kernel::declare(b, sig);
  b.launch_bounds(32 * c.warps());
  BwdKernel(b, c, sig).build();
  return b.build();
}

}  // namespace

uint32_t AttentionBackwardMmaConfig::shared_bytes() const {
  const bool dkv = part != Part::Dq;
  const uint32_t row = head_dim + 8, own = dkv ? bn : bm, ring = dkv ? bm : bn, esize = uint32_t(ir::scalar_bytes(dtype));
  const uint32_t stats = dkv ? stages * 2 * bm * 4 : 0;                       // lse and D per stage (f32)
  return (2 * own + 2 * stages * ring) * row * esize + stats;
}

std::string AttentionBackwardMmaConfig::str() const {
  return std::string("attention_bwd_mma(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " +
         (part == Part::Dq ? "dq" : "dkv") + ", " + std::to_string(bm) + "x" + std::to_string(bn) + ", " + std::to_string(stages) +
         " stages)";
}

jit::Family<AttentionBackwardMmaConfig>& attention_backward_mma_family() {
  static jit::Family<AttentionBackwardMmaConfig> f("attention_bwd_mma", build_mma, [] {
    std::vector<AttentionBackwardMmaConfig> v;
    for (Scalar s : {Scalar::F16, Scalar::BF16})
      for (const AttentionBackwardVariant& row : attention_backward_variants())
        if (row.engine == AttentionEngine::Mma)
          for (Part p : {Part::Dq, Part::Dkv}) v.push_back(attention_backward_mma_config(s, row, p));
    return v;
  }());
  return f;
}

}  // namespace kaio::ops
