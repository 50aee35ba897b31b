// The tensor-core attention kernel (FlashAttention-2 schedule) on mma.sync m16n8k16,
// f16 / bf16 in, f32 accumulate, sm_80 and newer.
//
// A block takes BM = 16 x warps query rows of one head; each warp owns 16 of them. The Q
// tile is copied to shared memory once; the K and V tiles of BN keys come through a
// cp.async ring (CpAsyncRing) of `stages` stages. Per KV tile, each warp:
//   S = Q K^T          ldmatrix Q (A, row-major) and K (B, "col": rows of keys), S in an AccTile
//   mods and mask      softcap, ALiBi, the window / causal bounds of each row
//   online softmax     row_reduce max and sum, scale_rows of O by exp(m_old - m_new)
//   O += P V           P's C fragments repacked in registers as 16-bit A fragments,
//                      V by ldmatrix.trans (B, row-major)
// and the epilogue divides by the row sums and writes o and the logsumexp.
// Shapes per head dim are the rows of kAttentionVariants.
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/kernel/online_softmax.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/warp_mma.h"
#include "kaio/ops/kernel/stage_ring.h"

namespace kaio::ops {

// The tile shapes per head dim (attention_pick chooses by shape): BM / 16 warps of 16 rows each.
// Shared memory: (BM + 2 x stages x BN) rows of D + 8 elements (D 128: 104 KB; D 256: 101 KB).
const AttentionVariant kAttentionVariants[] = {
    {.name = "fa2_d64", .head_dim = 64, .bm = 128, .bn = 64, .stages = 2},
    {.name = "fa2_d64_m64", .head_dim = 64, .bm = 64, .bn = 64, .stages = 2},
    {.name = "fa2_d96", .head_dim = 96, .bm = 128, .bn = 64, .stages = 2},
    {.name = "fa2_d96_m64", .head_dim = 96, .bm = 64, .bn = 64, .stages = 2},
    {.name = "fa2_d128", .head_dim = 128, .bm = 128, .bn = 64, .stages = 2},
    {.name = "fa2_d128_m64", .head_dim = 128, .bm = 64, .bn = 64, .stages = 2},
    {.name = "fa2_d256", .head_dim = 256, .bm = 64, .bn = 32, .stages = 2},
    // The wgmma kernel (ops/attention_wgmma.cpp): BM 128 = two consumer warpgroups of 64 rows;
    // at D 256 BM 64, both consumers on the same rows, each keeping O for half of D, or BM 128
    // with all of D in each consumer's registers (given by the producer: setmaxnreg).
    // D 64: three consumers of 64 rows (192 a block, 160 registers each after the move) are
    // 12-16% faster (causal 3-10%) than two at 192 keys a tile (S, P and O: 176 registers,
    // moved from the producer), itself 1-6% faster than at 128 keys, on the H200; D 128 at 192
    // rows (64 keys a tile) was 7-11% slower than 128 x 128. The first row of a head dim's
    // largest BM is the default.
    {.name = "fa3_d64_m192", .head_dim = 64, .bm = 192, .bn = 128, .stages = 2, .engine = AttentionEngine::Wgmma},
    {.name = "fa3_d64_n192", .head_dim = 64, .bm = 128, .bn = 192, .stages = 3, .engine = AttentionEngine::Wgmma},
    {.name = "fa3_d64", .head_dim = 64, .bm = 128, .bn = 128, .stages = 3, .engine = AttentionEngine::Wgmma},
    {.name = "fa3_d128", .head_dim = 128, .bm = 128, .bn = 128, .stages = 2, .engine = AttentionEngine::Wgmma},
    {.name = "fa3_d256", .head_dim = 256, .bm = 64, .bn = 64, .stages = 3, .engine = AttentionEngine::Wgmma},
    {.name = "fa3_d256_m128", .head_dim = 256, .bm = 128, .bn = 64, .stages = 2, .engine = AttentionEngine::Wgmma},
};

std::span<const AttentionVariant> attention_variants() { return kAttentionVariants; }

// The largest row block that still gives every SM a block (query tiles x heads x batch);
// when none does, the smallest (more, shorter blocks).
const AttentionVariant* attention_pick(uint32_t head_dim, uint32_t seqlen_q, uint64_t heads_x_batch, uint32_t sm_count,
                                       AttentionEngine engine) {
  const AttentionVariant* best = nullptr;
  const AttentionVariant* smallest = nullptr;
  for (const AttentionVariant& v : kAttentionVariants) {
    if (v.head_dim != head_dim || v.engine != engine) continue;
    if (!smallest || v.bm < smallest->bm) smallest = &v;
    const uint64_t blocks = uint64_t((seqlen_q + v.bm - 1) / v.bm) * heads_x_batch;
    if (blocks >= sm_count && (!best || v.bm > best->bm)) best = &v;
  }
  return best ? best : smallest;
}

namespace {

using ir::Scalar;
using ir::Value;
using kernel::AccTile;
using kernel::SharedTile;

using kernel::kLog2e;

class Fa2Kernel {
 public:
  Fa2Kernel(ir::KernelBuilder& b, const AttentionMmaConfig& c, detail::AttentionRowsSignature& s)
      : b_(b), c_(c), s_(s), D_(c.head_dim), warps_(c.bm / 16),
        q_tile_{ir::SmemLayout::padded(c.head_dim, 8), c.bm, 0, 1},
        k_tile_{ir::SmemLayout::padded(c.head_dim, 8), c.bn, q_tile_.end(), c.stages},
        v_tile_{ir::SmemLayout::padded(c.head_dim, 8), c.bn, k_tile_.end(), c.stages} {}

  uint32_t shared_elements() const { return v_tile_.end(); }

  void build() {
    tid_ = b_.thread_idx_x();
    lane_ = b_.lane_id();
    warp_ = b_.warp_id();
    batch_ = b_.block_idx_z();
    qh_ = b_.block_idx_y();
    kvh_ = qh_ / s_.group.ir;
    m0_ = b_.block_idx_x() * c_.bm;
    smem_ = b_.dynamic_shared(c_.dtype, 128);
    seq_ = detail::sequence(b_, s_, batch_);
    b_.if_(m0_ < seq_.sq, [&] { body(); });
  }

 private:
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value i32(Value v) { return ir::cast<int32_t>(v); }
  Value flag(uint32_t f) { return (s_.flags.ir & f) != 0u; }

  // rows x D elements from global rows first_row.. (each row at base + row * ss) into a
  // shared tile at offset dst, in 16-byte cp.async chunks; rows at or past `rows` are
  // zero-filled from a clamped address.
  void copy_rows(const SharedTile& t, Value dst, Value src, Value base, Value first_row, Value rows,
                 const std::function<Value(Value)>& row_offset) {
    kernel::copy_rows(b_, smem_, t, dst, src, base, first_row, rows, D_, tid_, 32 * warps_, row_offset);
  }

  void load_q() {
    Value base = u64(batch_) * s_.q_bs.ir + u64(qh_) * s_.q_hs.ir;
    copy_rows(q_tile_, b_.constant<uint32_t>(q_tile_.base), s_.q.ir, base, m0_, seq_.sq,
              [&](Value row) { return base + u64(seq_.qstart + row) * s_.q_ss.ir; });
    b_.cp_async_commit_group();
  }

  // KV tile t (keys from (t0 + t) * BN) into the ring's load stage; nothing past the last.
  void load_kv(kernel::CpAsyncRing& ring, Value t) {
    b_.if_(t < steps_, [&] {
      Value k0 = (t0_ + t) * c_.bn;
      Value kb = u64(batch_) * s_.k_bs.ir + u64(kvh_) * s_.k_hs.ir;
      Value vb = u64(batch_) * s_.v_bs.ir + u64(kvh_) * s_.v_hs.ir;
      Value st = ring.load_stage();
      auto edge = [&] {
        copy_rows(k_tile_, k_tile_.base + k_tile_.stage(st), s_.k.ir, kb, k0, seq_.sk,
                  [&](Value row) { return kb + u64(seq_.kstart + row) * s_.k_ss.ir; });
        copy_rows(v_tile_, v_tile_.base + v_tile_.stage(st), s_.v.ir, vb, k0, seq_.sk,
                  [&](Value row) { return vb + u64(seq_.kstart + row) * s_.v_ss.ir; });
      };
      const uint32_t per_row = D_ / 8, threads = 32 * warps_;
      if (threads % per_row) {  // chunks do not repeat rows evenly: every tile takes the checked path
        edge();
        return;
      }
      // A tile inside the keys: thread chunk e is row r0 + e * rstep, column c0, so its source
      // is one add on from chunk e - 1's and its shared index a constant on from chunk 0's.
      b_.if_(k0 + c_.bn <= seq_.sk, [&] {
        const uint32_t rstep = threads / per_row, count = k_tile_.rows * per_row / threads;
        Value r0 = tid_ / per_row, c0 = (tid_ - r0 * per_row) * 8u;
        Value row0 = seq_.kstart + k0 + r0;
        for (int side = 0; side < 2; ++side) {
          const SharedTile& tile = side ? v_tile_ : k_tile_;
          Value ss = side ? s_.v_ss.ir : s_.k_ss.ir;
          Value src = (side ? vb : kb) + u64(row0) * ss + u64(c0), step = u64(b_.constant<uint32_t>(rstep)) * ss;
          Value dst = tile.base + tile.stage(st) + tile.at(r0, c0);
          for (uint32_t e = 0; e < count; ++e) {
            if (e) src = src + step;
            b_.cp_async(smem_, e ? dst + e * rstep * tile.lay.row_stride() : dst, side ? s_.v.ir : s_.k.ir, src, 16,
                        ir::CacheHint::Global);
          }
        }
      }).else_(edge);
    });
  }

  // S = Q K^T for this warp's 16 rows and the stage's BN keys.
  void scores(const AccTile& S, Value stage) {
    S.zero();
    const uint32_t row = q_tile_.lay.row_stride();
    Value q_lane = b_.constant<uint32_t>(q_tile_.base) + q_tile_.at(warp_ * 16u + lane_ % 16u, (lane_ / 16u) * 8u);
    Value k_lane = k_tile_.base + k_tile_.stage(stage) + k_tile_.at((lane_ / 16u) * 8u + lane_ % 8u, ((lane_ / 8u) % 2u) * 8u);
    kernel::mma_abt(b_, kind(), smem_, S, D_, c_.bn, [&](uint32_t ks) { return q_lane + ks * 16; },
                    [&](uint32_t ni, uint32_t ks) { return k_lane + (ni * 8 * row + ks * 16); });
  }

  // scale, softcap, ALiBi, then -inf outside each row's key range; only the scale on a
  // tile every row of the block sees whole when there is no softcap or ALiBi.
  void modify(const AccTile& S, Value k0) {
    Value cap = s_.softcap.ir;
    Value full = i32(k0) >= inner_lo_ && i32(k0 + c_.bn) <= inner_hi_;
    Value plain = full && cap <= 0.0f && !flag(detail::kRowsAlibi);
    b_.if_(plain, [&] {
      for (uint32_t ni = 0; ni < c_.bn / 8; ++ni)
        for (uint32_t r = 0; r < 4; ++r) {
          ir::Var x = S.at(0, 0, ni, r);
          x = x.get() * s_.scale.ir;
        }
    }).else_([&] {
      auto each = [&](const std::function<void(ir::Var&, uint32_t, uint32_t)>& f) {
        for (uint32_t ni = 0; ni < c_.bn / 8; ++ni)
          for (uint32_t r = 0; r < 4; ++r) {
            ir::Var x = S.at(0, 0, ni, r);
            f(x, ni, r);
          }
      };
      each([&](ir::Var& x, uint32_t, uint32_t) { x = x.get() * s_.scale.ir; });
      b_.if_(cap > 0.0f, [&] { each([&](ir::Var& x, uint32_t, uint32_t) { x = cap * ir::tanh(x.get() / cap); }); });
      each([&](ir::Var& x, uint32_t ni, uint32_t r) {
          const detail::KeyRange& kr = ranges_[r / 2];
          Value j = i32(k0 + S.col(lane_, ni, r));
          Value y = x.get() - slope_ * ir::cast<float>(ir::abs(kr.center - j));
          x = ir::select(j >= kr.lo && j < kr.hi, y, -INFINITY);
      });
    });
  }

  // Folds the tile into the rows' running max and sum; S becomes P; O is rescaled.
  void online_softmax(const AccTile& S, const AccTile& O) { kernel::online_softmax(S, O, m_, l_, c_.bn / 8); }

  // O += P V: P's C fragments of key tiles 2 ks and 2 ks + 1 are the A fragment of k-step ks.
  void accumulate_pv(const AccTile& S, const AccTile& O, Value stage) {
    const uint32_t row = v_tile_.lay.row_stride();
    Value v_lane = v_tile_.base + v_tile_.stage(stage) + v_tile_.at(lane_ % 16u, (lane_ / 16u) * 8u);
    kernel::mma_ab(b_, kind(), smem_, O, c_.bn, D_, [&](uint32_t ks) { return kernel::p_fragment(S, ks, c_.dtype); },
                   [&](uint32_t ks, uint32_t ni) { return v_lane + (ks * 16 * row + ni * 8); });
  }

  // o = O / l and lse = m + log l per row (0 and -inf for a row that saw no key).
  void epilogue(const AccTile& O) {
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    for (uint32_t h = 0; h < 2; ++h) {
      Value i = rows_[h];
      b_.if_(i < seq_.sq, [&] {
        Value l = l_[h].get();
        Value inv = ir::select(l > 0.0f, 1.0f / l, 0.0f);
        Value ob = u64(batch_) * s_.o_bs.ir + u64(seq_.qstart + i) * s_.o_ss.ir + u64(qh_) * s_.o_hs.ir;
        for (uint32_t ni = 0; ni < D_ / 8; ++ni)
          for (uint32_t r = 2 * h; r < 2 * h + 2; ++r)
            s_.o.ir[ob + u64(O.col(lane_, ni, r))] = ir::cast(O.at(0, 0, ni, r).get() * inv, t16, ir::Rounding::Rn);
        b_.if_(flag(detail::kRowsLse) && lane_ % 4u == 0u, [&] {
          Value lse = ir::select(l > 0.0f, m_[h].get() + ir::log(l), -INFINITY);
          s_.lse.ir[u64(batch_) * s_.lse_bs.ir + u64(qh_) * s_.lse_hs.ir + u64(seq_.qstart + i)] = lse;
        });
      });
    }
  }

  void body() {
    Value zero = b_.constant<uint32_t>(0u);
    // This thread's two rows (fragment rows lane / 4 and lane / 4 + 8 of its warp).
    for (uint32_t h = 0; h < 2; ++h) {
      rows_[h] = m0_ + warp_ * 16u + (lane_ / 4u + 8u * h);
      ranges_[h] = detail::key_range(s_, seq_, rows_[h], zero);
    }
    ir::Var slope = b_.var<float>(0.0f);
    b_.if_(flag(detail::kRowsAlibi), [&] {
      Value a = s_.alibi.ir[qh_];
      slope = a;
    });
    slope_ = slope.get();
    // The block's keys: from the first row's lo to the last row's hi, in whole tiles.
    Value last = ir::min(m0_ + (c_.bm - 1), seq_.sq - 1u);
    const detail::KeyRange first_r = detail::key_range(s_, seq_, m0_, zero), last_r = detail::key_range(s_, seq_, last, zero);
    Value lo = ir::cast<uint32_t>(first_r.lo), hi = ir::cast<uint32_t>(ir::max(last_r.hi, first_r.lo));
    inner_lo_ = last_r.lo;   // every row of the block sees the keys [inner_lo, inner_hi)
    inner_hi_ = first_r.hi;
    t0_ = lo / c_.bn;
    steps_ = ir::select(hi > lo, (hi + (c_.bn - 1)) / c_.bn - t0_, zero);
    load_q();
    for (uint32_t h = 0; h < 2; ++h) {
      m_.push_back(b_.var<float>(-INFINITY));
      l_.push_back(b_.var<float>(0.0f));
    }
    const AccTile S(b_, 1, 1, c_.bn / 8), O(b_, 1, 1, D_ / 8);
    kernel::CpAsyncRing ring(b_, c_.stages, zero);
    ring.pipeline(steps_, [&](Value t) { load_kv(ring, t); }, [&](Value t) {
      Value stage = ring.read_stage();
      scores(S, stage);
      modify(S, (t0_ + t) * c_.bn);
      online_softmax(S, O);
      accumulate_pv(S, O, stage);
    });
    epilogue(O);
  }

  ir::MmaKind kind() const { return c_.dtype == Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16; }

  ir::KernelBuilder& b_;
  const AttentionMmaConfig& c_;
  detail::AttentionRowsSignature& s_;
  const uint32_t D_, warps_;
  const SharedTile q_tile_, k_tile_, v_tile_;
  Value tid_, lane_, warp_, batch_, qh_, kvh_, m0_, smem_, t0_, steps_, slope_, inner_lo_, inner_hi_;
  detail::Sequence seq_;
  Value rows_[2];
  detail::KeyRange ranges_[2];
  std::vector<ir::Var> m_, l_;
};

ir::Kernel build_mma(const AttentionMmaConfig& c) {
  if (c.dtype != Scalar::F16 && c.dtype != Scalar::BF16)
    throw UsageError("", "attention", std::string("the mma.sync kernel takes f16 or bf16, not ") + ir::scalar_name(c.dtype));
  if (c.head_dim % 16 || c.bm % 16 || c.bn % 16 || c.stages < 2 || c.stages > 4)
    throw UsageError("", "attention", "attention_mma config " + c.str() + " is not buildable");
  ir::KernelBuilder b(std::string("attention_mma_") + ir::scalar_name(c.dtype) + "_d" + std::to_string(c.head_dim) + "_m" +
                      std::to_string(c.bm) + "n" + std::to_string(c.bn) + "s" + std::to_string(c.stages));
  detail::AttentionRowsSignature sig(c.dtype);
  kernel::declare(b, sig);
  b.launch_bounds(2 * c.bm);
  Fa2Kernel(b, c, sig).build();
  return b.build();
}

}  // namespace

uint32_t AttentionMmaConfig::shared_bytes() const {
  const uint32_t row = head_dim + 8;
  return (bm + 2 * stages * bn) * row * static_cast<uint32_t>(ir::scalar_bytes(dtype));
}

std::string AttentionMmaConfig::str() const {
  return std::string("attention_mma(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " + std::to_string(bm) +
         "x" + std::to_string(bn) + ", " + std::to_string(stages) + " stages)";
}

AttentionMmaConfig attention_mma_config(ir::Scalar dtype, const AttentionVariant& v) {
  return {dtype, v.head_dim, v.bm, v.bn, v.stages};
}

jit::Family<AttentionMmaConfig>& attention_mma_family() {
  static jit::Family<AttentionMmaConfig> f("attention_mma", build_mma, [] {
    std::vector<AttentionMmaConfig> v;
    for (Scalar s : {Scalar::F16, Scalar::BF16})
      for (const AttentionVariant& row : kAttentionVariants)
        if (row.engine == AttentionEngine::Mma) v.push_back(attention_mma_config(s, row));
    return v;
  }());
  return f;
}

}  // namespace kaio::ops
