// The tensor-core decode kernel: 1-16 new tokens against a KV cache on mma.sync m16n8k16,
// f16 / bf16 in, f32 accumulate, sm_80 and newer.
//
// Decoding reads every cached key and value once per step and does little arithmetic on
// them, so the kernel is built to keep the memory busy: one block per (batch entry, KV
// head, row block, key split); the query rows of the KV head (its Hq / Hkv query heads x the
// new tokens, 16 x mt of them, padding rows zero) are the rows of mt m16 tiles, so the KV
// head's cache is read once for all of them. Chunks of BN keys (K and V) stream through a
// cp.async ring (CpAsyncRing) of `stages` stages: 16-byte copies, each thread a run of
// `count` consecutive keys of one 16-byte column, so that a paged cache needs one
// block-table entry per thread and chunk (fetched a chunk ahead; the first one guessed
// before the cache length arrives, then checked). Warp w owns m16 tile w % mt and the
// keys (w / mt) * KW .. + KW of every chunk; per chunk it computes
//   S = Q K^T          ldmatrix Q (A) and K (B), an AccTile of 16 x KW
//   mods and mask      scale, softcap, ALiBi (per row: rows are different heads), the
//                      causal / window bounds of each row's token, the split's keys
//   online softmax     row_reduce max and sum, scale_rows of O
//   O += P V           P repacked as A fragments, V by ldmatrix.trans
// and at the end the warps that share a tile merge their (max, sum, O) through shared
// memory; the block writes o and the logsumexp, or, when the keys are split, its partial
// output and logsumexp for attention_combine. Shapes per head dim are kDecodeVariants.
#include <algorithm>
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

// Per head dim and m16 tiles per block: BN keys per chunk, ring stages, warps. A chunk of
// K and V is 32 KB at D 128 (16 KB at D 64), so 2-3 stages in flight hold 32-64 KB per block
// and two blocks fit an SM (D 128: 3 x 34 KB + Q).
const AttentionDecodeVariant kDecodeVariants[] = {
    {.name = "dec_d64_m1", .head_dim = 64, .mt = 1, .bn = 64, .stages = 4, .warps = 4},
    {.name = "dec_d64_m2", .head_dim = 64, .mt = 2, .bn = 64, .stages = 4, .warps = 4},
    {.name = "dec_d64_m4", .head_dim = 64, .mt = 4, .bn = 64, .stages = 4, .warps = 4},
    {.name = "dec_d96_m1", .head_dim = 96, .mt = 1, .bn = 64, .stages = 3, .warps = 4},
    {.name = "dec_d96_m2", .head_dim = 96, .mt = 2, .bn = 64, .stages = 3, .warps = 4},
    {.name = "dec_d96_m4", .head_dim = 96, .mt = 4, .bn = 64, .stages = 3, .warps = 4},
    {.name = "dec_d128_m1", .head_dim = 128, .mt = 1, .bn = 64, .stages = 3, .warps = 4},
    {.name = "dec_d128_m2", .head_dim = 128, .mt = 2, .bn = 64, .stages = 3, .warps = 4},
    {.name = "dec_d128_m4", .head_dim = 128, .mt = 4, .bn = 64, .stages = 3, .warps = 4},
    // Long caches: 128-key chunks and 8 warps (one 192 KB block an SM) read 1-2.5% faster
    // from 8192 keys up (B1-B64, contiguous and paged), and 4% slower at B64 L1024, where
    // two blocks an SM hide each other's start (bench/NOTES.md).
    {.name = "dec_d128_m1_long", .head_dim = 128, .mt = 1, .bn = 128, .stages = 3, .warps = 8, .min_keys = 4096},
    {.name = "dec_d256_m1", .head_dim = 256, .mt = 1, .bn = 32, .stages = 3, .warps = 2},
    {.name = "dec_d256_m2", .head_dim = 256, .mt = 2, .bn = 32, .stages = 3, .warps = 2},
    {.name = "dec_d256_m4", .head_dim = 256, .mt = 4, .bn = 32, .stages = 3, .warps = 4},
};

std::span<const AttentionDecodeVariant> attention_decode_variants() { return kDecodeVariants; }

// The smallest tile count that holds the rows (rows past 64 take several row blocks), and of
// its rows that fit smem_limit the one for the longest caches that seqlen_k reaches.
const AttentionDecodeVariant* attention_decode_pick(uint32_t head_dim, uint32_t rows, uint32_t seqlen_k, uint32_t smem_limit) {
  const uint32_t mt = rows <= 16 ? 1 : rows <= 32 ? 2 : 4;
  const AttentionDecodeVariant* best = nullptr;
  for (const AttentionDecodeVariant& v : kDecodeVariants)
    if (v.head_dim == head_dim && v.mt == mt && v.min_keys <= seqlen_k && (!best || v.min_keys > best->min_keys) &&
        attention_decode_config(ir::Scalar::F16, v).shared_bytes() <= smem_limit)  // bf16 tiles take the same bytes
      best = &v;
  return best;
}

AttentionDecodeConfig attention_decode_config(ir::Scalar dtype, const AttentionDecodeVariant& v) {
  return {dtype, v.head_dim, v.mt, v.bn, v.stages, v.warps};
}

namespace {

using ir::Scalar;
using ir::Value;
using kernel::AccTile;
using kernel::SharedTile;

using kernel::kLog2e;

// K and V rows of whole 128-byte lines (head dims 64, 128, 256) are line-swizzled
// (ir::SmemLayout::line_swizzled): the 16-byte chunk c of row r sits at chunk (c % 8) ^
// (r % 8) of its line. A row padded
// by 16 bytes instead (head dim 96) puts the eight copies of one global line across two
// shared-memory lines, and the L2 then sees each line in two requests (ncu at B64 L8192:
// 44 M requests, 2.3 sectors each, 65 % of the sectors L2 hits, where SDPA's kernel sends
// 17 M of 4 sectors: bench/NOTES.md). Swizzled, the copies of a global line land in one
// shared line, and the ldmatrix reads of 8 rows stay conflict-free.
bool swizzled_rows(uint32_t d) { return d % 64 == 0; }

// 16-byte columns of a row as the copies see them: D / 8 rounded up to a power of two
// (threads of the surplus columns idle), so that a thread's column and key run are shifts.
uint32_t slots(uint32_t d) {
  uint32_t p = 1;
  while (p < d / 8) p *= 2;
  return p;
}

struct Geometry {
  uint32_t D, rows, kg, kw, threads, slots, groups, count;
  explicit Geometry(const AttentionDecodeConfig& c)
      : D(c.head_dim), rows(16 * c.mt), kg(c.warps / c.mt), kw(c.bn / (c.warps / c.mt)), threads(32 * c.warps),
        slots(ops::slots(c.head_dim)), groups(threads / slots), count(groups ? c.bn / groups : 0) {}
  // The epilogue's f32 area: each warp's O (16 rows of D + 4) and its row max and sum.
  uint32_t o_stride() const { return D + 4; }
  uint32_t epilogue_floats() const { return (threads / 32) * 16 * (o_stride() + 2); }
};

class DecodeKernel {
 public:
  DecodeKernel(ir::KernelBuilder& b, const AttentionDecodeConfig& c, detail::AttentionRowsSignature& s)
      : b_(b), c_(c), s_(s), g_(c), q_tile_{ir::SmemLayout::padded(c.head_dim, 8), g_.rows, 0, 1},
        k_tile_{kv_layout(c.head_dim, c.dtype), c.bn, q_tile_.end(), c.stages},
        v_tile_{kv_layout(c.head_dim, c.dtype), c.bn, k_tile_.end(), c.stages}, swz_(swizzled_rows(c.head_dim)) {}

  void build() {
    tid_ = b_.thread_idx_x();
    lane_ = b_.lane_id();
    warp_ = b_.warp_id();
    mi_ = warp_ % c_.mt;
    kgi_ = warp_ / c_.mt;
    Value z = b_.block_idx_z();
    batch_ = z / s_.splits.ir;
    split_ = z - batch_ * s_.splits.ir;
    kvh_ = b_.block_idx_y();
    row0_ = b_.block_idx_x() * g_.rows;
    smem_ = b_.dynamic_shared(c_.dtype, 128);
    fsm_ = b_.dynamic_shared<float>(128);
    seq_ = detail::sequence(b_, s_, batch_);
    nrows_ = seq_.sq * s_.group.ir;  // the query rows of one KV head
    b_.if_(row0_ < nrows_, [&] { body(); });
  }

 private:
  static ir::SmemLayout kv_layout(uint32_t d, Scalar dtype) {
    return swizzled_rows(d) ? ir::SmemLayout::line_swizzled(d, dtype) : ir::SmemLayout::padded(d, 8);
  }
  // The element of (row r, 16-byte chunk c) in a K or V stage (within one copy of the tile).
  Value kv_at(Value r, Value c) { return k_tile_.at(r, c * 8u); }
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value i32(Value v) { return ir::cast<int32_t>(v); }
  Value u32(Value v) { return ir::cast<uint32_t>(v); }
  Value flag(uint32_t f) { return (s_.flags.ir & f) != 0u; }
  ir::MmaKind kind() const { return c_.dtype == Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16; }

  // Query row r of the KV head: token r / group, query head kvh * group + r % group.
  Value token(Value r) { return r / s_.group.ir; }
  Value head(Value r) { return kvh_ * s_.group.ir + (r - token(r) * s_.group.ir); }

  // The block's Q rows into the Q tile (rows past the real ones zero-filled).
  void load_q() {
    const uint32_t per_row = g_.D / 8, chunks = g_.rows * g_.slots;
    Value qb = u64(batch_) * s_.q_bs.ir;
    for (uint32_t e = 0; e < (chunks + g_.threads - 1) / g_.threads; ++e) {
      Value id = tid_ + e * g_.threads;
      Value rr = id / g_.slots, col = id % g_.slots;
      b_.if_(id < chunks && col < per_row, [&] {
        Value r = row0_ + rr;
        Value ok = r < nrows_;
        Value rc = ir::select(ok, r, row0_);
        Value off = qb + u64(seq_.qstart + token(rc)) * s_.q_ss.ir + u64(head(rc)) * s_.q_hs.ir + u64(col * 8u);
        b_.cp_async(smem_, q_tile_.at(rr, col * 8u), s_.q.ir, off, 16, ir::CacheHint::Global,
                    ir::select(ok, b_.constant<uint32_t>(16u), b_.constant<uint32_t>(0u)));
      });
    }
    b_.cp_async_commit_group();
  }

  // The first key of this thread's run in chunk t, clamped into the block's keys (so its
  // page exists), and the block-table entry of that key's page.
  Value run_key(Value t) { return ir::min((t0_ + t) * c_.bn + rg_ * g_.count, hi_ - 1u); }
  Value page_of(Value key) {
    return u32(s_.block_table.ir[u64(batch_) * u64(s_.max_pages.ir) + u64(key >> s_.page_shift.ir)]);
  }

  // Chunk t's K and V into the ring's load stage; nothing past the last chunk. Thread:
  // column col_, keys j0 .. j0 + count of the chunk; keys at or past hi are zero-filled.
  void load_kv(kernel::CpAsyncRing& ring, Value t) {
    b_.if_(t < steps_, [&] {
      Value k0 = (t0_ + t) * c_.bn;
      Value j0 = k0 + rg_ * g_.count;
      Value jc = run_key(t);
      ir::Var kb = b_.var<uint64_t>(u64(batch_) * s_.k_bs.ir + u64(seq_.kstart + jc) * s_.k_ss.ir);
      ir::Var vb = b_.var<uint64_t>(u64(batch_) * s_.v_bs.ir + u64(seq_.kstart + jc) * s_.v_ss.ir);
      b_.if_(flag(detail::kRowsPaged), [&] {
        Value page = page_[0].get();
        Value in_page = jc & ((1u << s_.page_shift.ir) - 1u);
        kb = u64(page) * s_.k_bs.ir + u64(in_page) * s_.k_ss.ir;
        vb = u64(page) * s_.v_bs.ir + u64(in_page) * s_.v_ss.ir;
        // The next chunk's page now, used one chunk later (no wait on the table here).
        b_.if_(t + 1u < steps_, [&] { page_[0] = page_of(run_key(t + 1u)); });
      });
      Value col = col_ * 8u;
      Value st = ring.load_stage();
      auto issue = [&](bool edge) {
        for (int side = 0; side < 2; ++side) {
          const SharedTile& tile = side ? v_tile_ : k_tile_;
          Value ss = side ? s_.v_ss.ir : s_.k_ss.ir;
          Value base = (side ? vb.get() : kb.get()) + u64(kvh_) * (side ? s_.v_hs.ir : s_.k_hs.ir) + u64(col);
          Value dst = tile.base + tile.stage(st);
          for (uint32_t e = 0; e < g_.count; ++e) {
            Value d = dst + kv_at(rg_ * g_.count + e, col_);
            if (!edge) {
              b_.cp_async(smem_, d, side ? s_.v.ir : s_.k.ir, base + u64(b_.constant<uint32_t>(e)) * ss, 16,
                          ir::CacheHint::Global);
              continue;
            }
            Value ok = j0 + e < hi_;
            Value src = base + ir::select(ok, u64(b_.constant<uint32_t>(e)) * ss, b_.constant<uint64_t>(0));
            b_.cp_async(smem_, d, side ? s_.v.ir : s_.k.ir, src, 16, ir::CacheHint::Global,
                        ir::select(ok, b_.constant<uint32_t>(16u), b_.constant<uint32_t>(0u)));
          }
        }
      };
      auto both = [&] {
        b_.if_(k0 + c_.bn <= hi_, [&] { issue(false); }).else_([&] { issue(true); });
      };
      if (g_.slots == g_.D / 8) both();
      else b_.if_(col_ < g_.D / 8, both);
    });
  }

  // S = Q K^T for this warp's tile and its KW keys of the stage.
  void scores(const AccTile& S, Value stage) {
    S.zero();
    const uint32_t row = k_tile_.lay.row_stride();
    Value q_lane = q_lane_;
    Value k_lane = k_tile_.stage(stage) + k_lane_;
    kernel::mma_abt(b_, kind(), smem_, S, g_.D, g_.kw, [&](uint32_t ks) { return q_lane + ks * 16; },
                    [&](uint32_t ni, uint32_t ks) {
                      return swz_ ? k_lane + (ni * 8 * row + (ks / 4) * 64) + kx_[ks % 4] : k_lane + (ni * 8 * row + ks * 16);
                    });
  }

  // scale, softcap, ALiBi, then -inf outside each row's keys; only the scale where every
  // row of the block sees all of this warp's keys and there is no softcap or ALiBi.
  void modify(const AccTile& S, Value k0) {
    Value cap = s_.softcap.ir;
    Value full = i32(k0) >= inner_lo_ && i32(k0 + g_.kw) <= inner_hi_;
    Value plain = full && cap <= 0.0f && !flag(detail::kRowsAlibi);
    auto each = [&](const std::function<void(ir::Var&, uint32_t, uint32_t)>& f) {
      for (uint32_t ni = 0; ni < g_.kw / 8; ++ni)
        for (uint32_t r = 0; r < 4; ++r) {
          ir::Var x = S.at(0, 0, ni, r);
          f(x, ni, r);
        }
    };
    each([&](ir::Var& x, uint32_t, uint32_t) { x = x.get() * s_.scale.ir; });
    b_.if_(!plain, [&] {
      b_.if_(cap > 0.0f, [&] { each([&](ir::Var& x, uint32_t, uint32_t) { x = cap * ir::tanh(x.get() / cap); }); });
      each([&](ir::Var& x, uint32_t ni, uint32_t r) {
        const detail::KeyRange& kr = ranges_[r / 2];
        Value j = i32(k0 + S.col(lane_, ni, r));
        Value y = x.get() - slope_[r / 2] * ir::cast<float>(ir::abs(kr.center - j));
        x = ir::select(j >= kr.lo && j < kr.hi, y, -INFINITY);
      });
    });
  }

  // Folds the tile into the rows' running max and sum; S becomes P; O is rescaled.
  void online_softmax(const AccTile& S, const AccTile& O) { kernel::online_softmax(S, O, m_, l_, g_.kw / 8); }

  // O += P V over this warp's KW keys: P's C fragments of key tiles 2 ks and 2 ks + 1 are
  // the A fragment of k-step ks.
  void accumulate_pv(const AccTile& S, const AccTile& O, Value stage) {
    const uint32_t row = v_tile_.lay.row_stride();
    Value v_lane = v_tile_.stage(stage) + v_lane_;
    kernel::mma_ab(b_, kind(), smem_, O, g_.kw, g_.D, [&](uint32_t ks) { return kernel::p_fragment(S, ks, c_.dtype); },
                   [&](uint32_t ks, uint32_t ni) {
                     return swz_ ? v_lane + (ks * 16 * row + (ni / 8) * 64) + vx_[(ni % 8) / 2] : v_lane + (ks * 16 * row + ni * 8);
                   });
  }

  // The warps of a tile merge their (max, sum, O) through shared memory (the ring's, now
  // idle); the block writes each real row: o and lse, or the split's partial pair.
  void epilogue(const AccTile& O) {
    const uint32_t os = g_.o_stride(), warps = c_.warps;
    const uint32_t stats = warps * 16 * os;  // m at stats + w * 16 + row, l 16 * warps on
    b_.barrier();                            // every warp is done with the ring
    Value mine = warp_ * (16u * os);
    for (uint32_t h = 0; h < 2; ++h) {
      Value row = lane_ / 4u + 8u * h;
      for (uint32_t ni = 0; ni < g_.D / 8; ++ni)
        ir::store_vec(fsm_, mine + row * os + (ni * 8u + (lane_ % 4u) * 2u),
                      {O.at(0, 0, ni, 2 * h).get(), O.at(0, 0, ni, 2 * h + 1).get()});
      b_.if_(lane_ % 4u == 0u, [&] {
        fsm_[stats + warp_ * 16u + row] = m_[h].get();
        fsm_[stats + warps * 16 + warp_ * 16u + row] = l_[h].get();
      });
    }
    b_.barrier();
    // Thread: element (rr, d) of the block's rows, rr = id / D.
    const uint32_t total = g_.rows * g_.D;
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    for (uint32_t e = 0; e < (total + g_.threads - 1) / g_.threads; ++e) {
      Value id = tid_ + e * g_.threads;
      Value rr = id / g_.D, d = id % g_.D;
      Value r = row0_ + rr;
      b_.if_(id < total && r < nrows_, [&] {
        Value mt = rr / 16u, row = rr % 16u;
        // The warps of tile mt: w = mt + j * MT.
        std::vector<Value> m(g_.kg), l(g_.kg), w(g_.kg);
        Value mmax = b_.constant<float>(-INFINITY);
        for (uint32_t j = 0; j < g_.kg; ++j) {
          Value wj = mt + j * c_.mt;
          m[j] = fsm_[stats + wj * 16u + row];
          l[j] = fsm_[stats + warps * 16 + wj * 16u + row];
          mmax = ir::max(mmax, m[j]);
        }
        Value ms = ir::select(mmax == -INFINITY, 0.0f, mmax);
        Value sum = b_.constant<float>(0.0f), acc = b_.constant<float>(0.0f);
        for (uint32_t j = 0; j < g_.kg; ++j) {
          Value wj = mt + j * c_.mt;
          w[j] = ir::exp2_ftz((m[j] - ms) * kLog2e);
          sum = ir::fma(l[j], w[j], sum);
          Value x = fsm_[wj * (16u * os) + row * os + d];
          acc = ir::fma(x, w[j], acc);
        }
        Value seen = sum > 0.0f;
        Value y = acc * ir::select(seen, 1.0f / sum, 0.0f);
        Value lse = ir::select(seen, ms + ir::log(sum), -INFINITY);
        Value tok = token(r), qh = head(r);
        b_.if_(s_.splits.ir > 1u, [&] {
          Value wrow = ((u64(batch_) * u64(s_.sq.ir) + u64(tok)) * u64(s_.hq.ir) + u64(qh)) * u64(s_.splits.ir) + u64(split_);
          s_.ws_o.ir[wrow * uint64_t(g_.D) + u64(d)] = y;
          b_.if_(d == 0u, [&] { s_.ws_lse.ir[wrow] = lse; });
        }).else_([&] {
          Value ob = u64(batch_) * s_.o_bs.ir + u64(seq_.qstart + tok) * s_.o_ss.ir + u64(qh) * s_.o_hs.ir;
          s_.o.ir[ob + u64(d)] = ir::cast(y, t16, ir::Rounding::Rn);
          b_.if_(flag(detail::kRowsLse) && d == 0u, [&] {
            s_.lse.ir[u64(batch_) * s_.lse_bs.ir + u64(qh) * s_.lse_hs.ir + u64(seq_.qstart + tok)] = lse;
          });
        });
      });
    }
  }

  void body() {
    Value zero = b_.constant<uint32_t>(0u);
    // This thread's copy position: 16-byte column col_ of the key run rg_.
    uint32_t shift = 0;
    while ((1u << shift) < g_.slots) ++shift;  // slots is a power of two
    rg_ = tid_ >> shift;
    col_ = tid_ & (g_.slots - 1);
    // What needs no cache length goes first, under the wait for seqlens: the Q copies, and a
    // guess at the page of this thread's first run (without a window the block starts at its
    // split's first key, a whole chunk), checked once the block's keys are known.
    page_.push_back(b_.var<uint32_t>(0u));
    Value guess = split_ * s_.split_len.ir + rg_ * g_.count;
    b_.if_(flag(detail::kRowsPaged), [&] {
      Value index = ir::min(guess >> s_.page_shift.ir, s_.max_pages.ir - 1u);
      page_[0] = u32(s_.block_table.ir[u64(batch_) * u64(s_.max_pages.ir) + u64(index)]);
    });
    load_q();
    // This thread's two rows (fragment rows lane / 4 and lane / 4 + 8 of its tile): their
    // keys and ALiBi slopes; rows past the real ones see no key.
    for (uint32_t h = 0; h < 2; ++h) {
      Value r = row0_ + mi_ * 16u + ((lane_ >> 2u) + 8u * h);
      Value ok = r < nrows_;
      Value rc = ir::select(ok, r, row0_);
      detail::KeyRange kr = detail::key_range(s_, seq_, token(rc), split_);
      kr.hi = ir::select(ok, kr.hi, kr.lo);
      ranges_[h] = kr;
      ir::Var slope = b_.var<float>(0.0f);
      b_.if_(flag(detail::kRowsAlibi), [&] {
        Value a = s_.alibi.ir[head(rc)];
        slope = a;
      });
      slope_[h] = slope.get();
    }
    // The block's keys: from its first token's lo to its last token's hi, in whole chunks.
    Value last = ir::min(row0_ + (g_.rows - 1), nrows_ - 1u);
    const detail::KeyRange first_r = detail::key_range(s_, seq_, token(row0_), split_);
    const detail::KeyRange last_r = detail::key_range(s_, seq_, token(last), split_);
    Value lo = u32(first_r.lo);
    hi_ = u32(ir::max(last_r.hi, first_r.lo));
    inner_lo_ = last_r.lo;  // every row of the block sees the keys [inner_lo, inner_hi)
    inner_hi_ = first_r.hi;
    t0_ = lo / c_.bn;
    steps_ = ir::select(hi_ > lo, (hi_ + (c_.bn - 1)) / c_.bn - t0_, zero);
    b_.if_(flag(detail::kRowsPaged) && steps_ > 0u, [&] {
      Value first = run_key(zero);
      b_.if_(first != guess, [&] { page_[0] = page_of(first); });  // a window, or a run past the keys
    });
    for (uint32_t h = 0; h < 2; ++h) {
      m_.push_back(b_.var<float>(-INFINITY));
      l_.push_back(b_.var<float>(0.0f));
    }
    // The ldmatrix addresses of this lane in stage 0 (loop invariant: computed once).
    Value l16 = lane_ & 15u, h16 = lane_ >> 4u;
    q_lane_ = b_.constant<uint32_t>(q_tile_.base) + q_tile_.at(mi_ * 16u + l16, h16 * 8u);
    if (swz_) {
      // The tiles' line_swizzled index taken apart (SmemLayout::xor_key) so that the unrolled
      // loops add constants: index(row, col) = row * D + (col ^ key(row)), the key touching
      // only the 64 columns of a 128-byte line. A lane's ldmatrix rows are its row + 8 i (+ 16
      // ks for V), all with its row's key; its columns are 64 l + 16 a + 8 x, l and a
      // constants of the unrolled loops and x the lane's half (K: its matrix's column half; V:
      // h16), so the lane keeps (16 a + 8 x) ^ key for the four a.
      Value kr = kgi_ * g_.kw + h16 * 8u + (lane_ & 7u), vr = kgi_ * g_.kw + l16;
      k_lane_ = k_tile_.base + kr * k_tile_.lay.row_stride();
      v_lane_ = v_tile_.base + vr * v_tile_.lay.row_stride();
      // (both rows are lane % 8 past a multiple of 8: the key of lane % 8, which ptxas can
      // rebuild from the lane where registers are short)
      Value kkey = k_tile_.lay.xor_key(lane_ & 7u), vkey = v_tile_.lay.xor_key(lane_ & 7u);
      Value ky = (((lane_ >> 3u) & 1u) * 8u) ^ kkey, vy = (h16 * 8u) ^ vkey;  // 16 a + 8 x = 16 a ^ 8 x
      for (uint32_t a = 0; a < 4; ++a) {
        kx_.push_back(ky ^ (16u * a));
        vx_.push_back(vy ^ (16u * a));
      }
    } else {
      k_lane_ = k_tile_.base + k_tile_.at(kgi_ * g_.kw + h16 * 8u + (lane_ & 7u), ((lane_ >> 3u) & 1u) * 8u);
      v_lane_ = v_tile_.base + v_tile_.at(kgi_ * g_.kw + l16, h16 * 8u);
    }
    const AccTile S(b_, 1, 1, g_.kw / 8), O(b_, 1, 1, g_.D / 8);
    kernel::CpAsyncRing ring(b_, c_.stages, zero);
    ring.pipeline(steps_, [&](Value t) { load_kv(ring, t); }, [&](Value t) {
      Value stage = ring.read_stage();
      scores(S, stage);
      modify(S, (t0_ + t) * c_.bn + kgi_ * g_.kw);
      online_softmax(S, O);
      accumulate_pv(S, O, stage);
    });
    epilogue(O);
  }

  ir::KernelBuilder& b_;
  const AttentionDecodeConfig& c_;
  detail::AttentionRowsSignature& s_;
  const Geometry g_;
  const SharedTile q_tile_, k_tile_, v_tile_;
  const bool swz_;                     // K and V rows swizzled (swizzled_rows)
  std::vector<Value> kx_, vx_;         // ... and then the lane's ldmatrix chunk offsets
  Value tid_, lane_, warp_, mi_, kgi_, batch_, split_, kvh_, row0_, smem_, fsm_, nrows_;
  Value t0_, steps_, hi_, inner_lo_, inner_hi_, rg_, col_, q_lane_, k_lane_, v_lane_;
  std::vector<ir::Var> page_;  // this thread's block-table entry for its next chunk (one Var)
  detail::Sequence seq_;
  detail::KeyRange ranges_[2];
  Value slope_[2];
  std::vector<ir::Var> m_, l_;
};

std::string check(const AttentionDecodeConfig& c) {
  if (c.dtype != Scalar::F16 && c.dtype != Scalar::BF16) return "it takes f16 or bf16";
  if (c.head_dim % 32 || c.head_dim > 256) return "head_dim must be a multiple of 32 up to 256";
  if (c.mt != 1 && c.mt != 2 && c.mt != 4) return "mt must be 1, 2 or 4";
  if (c.warps % c.mt || c.warps > 8) return "warps must be a multiple of mt, at most 8";
  if (c.stages < 2 || c.stages > 8) return "stages must be 2..8";
  const Geometry g(c);
  if (c.bn % (c.warps / c.mt) || g.kw % 16) return "each warp's keys per chunk must be a multiple of 16";
  if (g.groups == 0 || c.bn % g.groups || g.count > 16 || (g.count & (g.count - 1)))
    return "the copy runs (chunk keys per thread) must be a power of two up to 16";
  return "";
}

ir::Kernel build_decode(const AttentionDecodeConfig& c) {
  if (const std::string why = check(c); !why.empty())
    throw UsageError("", "attention_decode", "decode config " + c.str() + " is not buildable: " + why);
  ir::KernelBuilder b(std::string("attention_decode_") + ir::scalar_name(c.dtype) + "_d" + std::to_string(c.head_dim) + "_m" +
                      std::to_string(c.mt) + "n" + std::to_string(c.bn) + "s" + std::to_string(c.stages) + "w" +
                      std::to_string(c.warps));
  detail::AttentionRowsSignature sig(c.dtype);
  kernel::declare(b, sig);
  b.launch_bounds(32 * c.warps);
  DecodeKernel(b, c, sig).build();
  return b.build();
}

}  // namespace

uint32_t AttentionDecodeConfig::shared_bytes() const {
  const Geometry g(*this);
  const uint32_t kv_row = swizzled_rows(head_dim) ? head_dim : head_dim + 8;
  const uint32_t ring = (g.rows * (head_dim + 8) + 2 * stages * bn * kv_row) * static_cast<uint32_t>(ir::scalar_bytes(dtype));
  return std::max(ring, g.epilogue_floats() * 4);
}

std::string AttentionDecodeConfig::str() const {
  return std::string("attention_decode(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " +
         std::to_string(16 * mt) + " rows, " + std::to_string(bn) + " keys, " + std::to_string(stages) + " stages, " +
         std::to_string(warps) + " warps)";
}

jit::Family<AttentionDecodeConfig>& attention_decode_family() {
  static jit::Family<AttentionDecodeConfig> f("attention_decode", build_decode, [] {
    std::vector<AttentionDecodeConfig> v;
    for (Scalar s : {Scalar::F16, Scalar::BF16})
      for (const AttentionDecodeVariant& row : kDecodeVariants) v.push_back(attention_decode_config(s, row));
    return v;
  }());
  return f;
}

}  // namespace kaio::ops
