// The Hopper attention backward kernels (the FlashAttention-2 schedule on wgmma), f16 / bf16
// in, f32 accumulate, sm_90a.
//
// A block is one warpgroup (128 threads) that owns 64 rows and walks tiles of 64 rows of the
// other side; thread 0 also issues the TMA loads (its own tiles once, then a ring of `stages`
// stages, each refilled as soon as the warpgroup has released it). Several blocks share an
// SM (dkv: two at 255 registers a thread; dq: three at 168 where one stage fits, D 128), so
// one block's elementwise work runs under another's MMAs:
//   Dkv  owns 64 keys of one KV head (K, V), walks the query tiles of each query head of the
//        group in order (Q, dO and the rows' lse and D through the ring):
//          S^T = K Q^T, dP^T = V dO^T      wgmma m64n64k16, both operands K-major in shared memory
//          P^T = exp2(S^T scale log2e - lse log2e), dS^T = P^T (dP^T - D)   (masked, and ALiBi's
//                                          bias added, only on the tiles that cross a window's
//                                          edge (causal: the diagonal) or an end, or with ALiBi)
//          dV += P^T dO, dK += dS^T Q      wgmma m64nDk16, A = P^T / dS^T from registers (the C
//                                          fragments rounded to 16 bits in place), B = the same
//                                          dO / Q tiles read MN-major
//        with the loop rotated: the next tile's S^T and dP^T queue behind this tile's dV and
//        dK, and its P^T is computed (under its dP^T) before the back edge, where no MMA
//        group may be in flight (ptxas would serialize every wgmma of the kernel).
//   Dq   owns 64 query rows of one head (Q, dO), walks the key tiles (K and V through the ring):
//          S = Q K^T, dP = dO V^T, dS as above, dQ += dS K.
// The softcap configs compute P and dS in one pass after both S and dP have landed (capped():
// the tanh's derivative is not kept across the products, it would take a tile of registers).
// Every gradient element is summed by one thread in a fixed order: bit-identical run to run.
// One TMA layout serves both readings of a tile: 64 rows of D elements land as D / 64 boxes of
// 64 rows x 128 bytes, 128-byte swizzled, which is the K-major tile of 64 rows (k along D)
// and the MN-major tile whose k runs along the 64 rows (n along D). Rows past a sequence read
// as zeros; the lse and D rows come from the pre-pass's padded copies (rows of a multiple of
// 4 floats, so TMA can read them; rows past the end read as zeros and are masked).
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/jit/device.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Value;
using kernel::AccTile;
using kernel::TmaTile;
using Part = AttentionBackwardPart;

constexpr uint32_t kRows = 64;      // rows a block owns, and rows of a ring tile
constexpr uint32_t kThreads = 128;  // one warpgroup
constexpr uint32_t kElem = 2, kBlock = 64, kWgmmaK = 16;
constexpr uint32_t kBoxBytes = kRows * kernel::kSwizzleBytes;  // 64 rows x 64 head elements

// Byte offsets in a block's shared memory: its own two tiles (K and V, or Q and dO), the
// stages (two ring tiles each), the stats of each stage (Dkv: lse2 and D of its 64 query
// rows), the mbarriers (full and empty per stage, then the own tiles').
struct Layout {
  uint32_t tile, stage, ring, stats, bars, total;
};
Layout layout_of(const AttentionBackwardWgmmaConfig& c) {
  Layout l{};
  l.tile = kRows * c.head_dim * kElem;
  l.stage = 2 * l.tile;
  l.ring = 2 * l.tile;
  l.stats = l.ring + c.stages * l.stage;
  l.bars = l.stats + (c.part == Part::Dkv ? c.stages * 2 * kRows * 4 : 0);
  l.total = l.bars + (2 * c.stages + 1) * 8;
  return l;
}

// g0, g1: dq (Dq), or dk and dv (Dkv). lse2 and delta: the pre-pass's padded rows, row i of
// (b, h) at (b * hq + h) * sq_pad + i (varlen too, i within the sequence; Dq reads them per
// row, Dkv through the two maps).
struct BwdWgmmaSignature {
  kernel::TensorMap q_map{"q_map"}, k_map{"k_map"}, v_map{"v_map"}, do_map{"do_map"};
  kernel::TensorMap lse_map{"lse_map"}, delta_map{"delta_map"};
  kernel::Ptr g0{"g0"}, g1{"g1"};
  kernel::Ptr lse2{"lse2", Scalar::F32, true}, delta{"delta", Scalar::F32, true}, alibi{"alibi", Scalar::F32, true};
  kernel::Ptr cu_q{"cu_q", Scalar::S32, true}, cu_k{"cu_k", Scalar::S32, true};  // the varlen configs
  kernel::Param<uint64_t> g0_bs{"g0_bs"}, g0_ss{"g0_ss"}, g0_hs{"g0_hs"}, g1_bs{"g1_bs"}, g1_ss{"g1_ss"}, g1_hs{"g1_hs"};
  kernel::Param<uint32_t> sq{"sq"}, sk{"sk"}, sq_pad{"sq_pad"}, hq{"hq"}, group{"group"}, flags{"flags"};  // kBwdAlibi
  kernel::Param<int32_t> window_left{"window_left"}, window_right{"window_right"};  // -1: unbounded (causal: right 0)
  // 0: the map is (d, s, h, b); 1: (d, h, s, b)
  kernel::Param<uint32_t> q_order{"q_order"}, k_order{"k_order"}, v_order{"v_order"}, do_order{"do_order"};
  kernel::Param<float> scale_log2{"scale_log2"}, scale{"scale"}, softcap{"softcap"};  // softcap: the softcap configs

  explicit BwdWgmmaSignature(Scalar dtype) { g0.elem = g1.elem = dtype; }
  auto fields() {
    return std::tie(q_map, k_map, v_map, do_map, lse_map, delta_map, g0, g1, lse2, delta, alibi, g0_bs, g0_ss, g0_hs, g1_bs, g1_ss,
                    g1_hs, sq, sk, sq_pad, hq, group, flags, window_left, window_right, q_order, k_order, v_order, do_order,
                    scale_log2, scale, softcap, cu_q, cu_k);
  }
};

class BwdWgmma {
 public:
  BwdWgmma(ir::KernelBuilder& b, const AttentionBackwardWgmmaConfig& c, BwdWgmmaSignature& s)
      : b_(b), c_(c), s_(s), L_(layout_of(c)), D_(c.head_dim) {}

  void build() {
    smem_ = b_.dynamic_shared(c_.dtype, 1024);
    smem_f32_ = b_.dynamic_shared(Scalar::F32, 1024);
    bars_ = b_.dynamic_shared<uint64_t>(1024);
    tid_ = b_.thread_idx_x();
    warp_ = b_.warp_id();
    lane_ = b_.lane_id();
    batch_ = b_.block_idx_z();
    // This block's sequence (varlen: from the prefix sums; the maps span the packed tokens).
    qs_ = ks_ = u32c(0), tb_ = batch_;
    sq_ = s_.sq.ir, sk_ = s_.sk.ir;
    if (c_.varlen) {
      const detail::Sequence seq = detail::packed_sequence(s_.cu_q.ir, s_.cu_k.ir, batch_);
      qs_ = seq.qstart, sq_ = seq.sq, ks_ = seq.kstart, sk_ = seq.sk;
      tb_ = u32c(0);
    }
    const kernel::MbarrierRing ring(b_, bars_, L_.bars / 8, c_.stages, kThreads / 32);  // each warp releases
    own_bar_ = L_.bars / 8 + 2 * c_.stages;
    b_.if_(tid_ == 0u, [&] {
      b_.mbarrier_init(bars_, own_bar_, 1u);
      ring.init();
    });
    b_.barrier();
    auto part = [&] {
      if (c_.part == Part::Dkv) dkv(ring);
      else dq(ring);
    };
    // Varlen: blocks past a shorter sequence's end have nothing to do.
    if (c_.varlen) {
      Value first = c_.part == Part::Dkv ? b_.block_idx_x() * kRows : (b_.grid_dim_x() - 1u - b_.block_idx_x()) * kRows;
      b_.if_(first < (c_.part == Part::Dkv ? sk_ : sq_), part);
    }
    else part();
  }

 private:
  Value i32(Value v) { return ir::cast<int32_t>(v); }
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value u32c(uint32_t v) { return b_.constant<uint32_t>(v); }
  Value u64c(uint64_t v) { return b_.constant<uint64_t>(v); }

  // A map's coordinates in its order: (d, s, h, b) or (d, h, s, b).
  std::vector<Value> coords(Value order, Value d, Value seq, Value head) {
    return {d, ir::select(order != 0u, head, seq), ir::select(order != 0u, seq, head), tb_};
  }
  // 64 rows from row0 of a head into the tile at byte `at`, completing mbarrier `bar`.
  void load_tile(const kernel::TensorMap& map, const kernel::Param<uint32_t>& order, Value at, Value row0, Value head, Value bar) {
    for (uint32_t kb = 0; kb < D_ / kBlock; ++kb)
      b_.tma_load(smem_, at / kElem + kb * (kBoxBytes / kElem), map.ir, coords(order.ir, u32c(kb * kBlock), row0, head), bars_, bar);
  }
  // Thread 0: the block's own two tiles (64 rows from row0 of a head of each map), once.
  void load_own(const kernel::TensorMap& m0, const kernel::Param<uint32_t>& o0, const kernel::TensorMap& m1,
                const kernel::Param<uint32_t>& o1, Value row0, Value head) {
    b_.if_(tid_ == 0u, [&] {
      b_.mbarrier_arrive_expect_tx(bars_, own_bar_, u32c(2 * L_.tile));
      load_tile(m0, o0, u32c(0), row0, head, u32c(own_bar_));
      load_tile(m1, o1, u32c(L_.tile), row0, head, u32c(own_bar_));
    });
  }
  // Descriptors of the tile at byte `at`: K-major (64 rows, k along D) and MN-major (k along
  // the 64 rows, n along D).
  Value kmajor(uint32_t at) {
    const TmaTile t{.rows = kRows, .esize = kElem, .k_major = true, .base = at / kElem};
    return t.descriptor(b_, smem_, u32c(t.base));
  }
  Value mnmajor(uint32_t at) {
    const TmaTile t{.rows = D_, .esize = kElem, .k_major = false, .base = at / kElem};
    return t.descriptor(b_, smem_, u32c(t.base));
  }

  // acc (64 x 64) += A (64 rows at da) . B (64 rows at db)^T, both K-major over D.
  void issue_abt(const AccTile& acc, Value da, Value db) {
    for (uint32_t ki = 0; ki < D_ / kWgmmaK; ++ki) {
      const uint32_t kb = ki / (kBlock / kWgmmaK), within = ki % (kBlock / kWgmmaK) * kWgmmaK * kElem;
      const uint64_t off = (kb * kBoxBytes + within) / 16;
      b_.wgmma(acc.array(0), da + u64c(off), db + u64c(off), c_.dtype);
    }
  }
  // acc (64 x D) += X (64 x 64, A fragments from registers) . B (64 rows along k, MN-major at db).
  void issue_xb(const AccTile& acc, const std::vector<std::vector<Value>>& x, Value db) {
    const TmaTile t{.rows = D_, .esize = kElem, .k_major = false};
    for (uint32_t kk = 0; kk < kRows / kWgmmaK; ++kk)
      b_.wgmma(acc.array(0), x[kk], db + u64c(kk * t.k_step_bytes(kWgmmaK) / 16), c_.dtype, true);
  }
  // The A fragments of a 64 x 64 f32 tile rounded to the dtype: k slice kk is n8 blocks 2 kk
  // and 2 kk + 1, rows g and g + 8 of each (the C layout of a k16 pair is the A layout).
  std::vector<std::vector<Value>> frags_of(const AccTile& x) {
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    std::vector<std::vector<Value>> f(kRows / kWgmmaK);
    for (uint32_t ni = 0; ni < kRows / 8; ++ni)
      for (uint32_t h = 0; h < 2; ++h)
        f[ni / 2].push_back(ir::pack2(ir::cast(x.at(0, 0, ni, 2 * h).get(), t16, ir::Rounding::Rn),
                                      ir::cast(x.at(0, 0, ni, 2 * h + 1).get(), t16, ir::Rounding::Rn)));
    return f;
  }

  Value alibi_on() { return (s_.flags.ir & uint32_t(detail::kBwdAlibi)) != 0u; }
  Value offset() { return i32(sk_) - i32(sq_); }  // key position of query i: i + offset (bottom right)
  // The window (detail::BwdWindow: visible, queries_of, keys_of; causal: window_right 0).
  detail::BwdWindow window() { return {i32(sq_), i32(sk_), s_.window_left.ir, s_.window_right.ir}; }
  Value visible(Value i, Value j) { return window().visible(i, j); }
  // Every element of the tile (queries m0.., keys n0.., 64 each) is visible and unbiased.
  Value whole(Value m0, Value n0) {
    Value wl = s_.window_left.ir, wr = s_.window_right.ir, off = offset();
    return m0 + kRows <= sq_ && n0 + kRows <= sk_ && (wr < 0 || i32(n0 + (kRows - 1)) <= i32(m0) + off + wr) &&
           (wl < 0 || i32(n0) >= i32(m0 + (kRows - 1)) + off - wl) && !alibi_on();
  }
  std::pair<Value, Value> queries_of(Value j) { return window().queries_of(j); }
  std::pair<Value, Value> keys_of(Value i) { return window().keys_of(i); }
  // ALiBi's slope of query head h times log2(e) (0 without ALiBi).
  Value slope_of(Value h) {
    ir::Var slope = b_.var<float>(0.0f);
    b_.if_(alibi_on(), [&] {
      Value a = s_.alibi.ir[h];
      slope = a * 1.4426950408889634f;
    });
    return slope.get();
  }

  // S becomes P = exp2(S scale log2e - lse2), 0 where masked: query / key (i32) and lse2 of
  // register (ni, r); masks only where not `full` (the masked weights are 0 also past the
  // ends, where lse2 is 0 or -inf).
  // With ALiBi (never `full`) the score drops by slope |i + offset - j| (slope2: times log2 e).
  using Index = std::function<Value(uint32_t, uint32_t)>;
  void probabilities(const AccTile& S, Value full, const Index& query, const Index& key, const Index& lse2,
                     const std::function<Value()>& slope_of_row) {
    auto pass = [&](bool masked) {
      Value slope2 = masked ? slope_of_row() : Value();  // read on the masked path only (registers)
      for (uint32_t ni = 0; ni < S.nt(); ++ni)
        for (uint32_t r = 0; r < 4; ++r) {
          ir::Var x = S.at(0, 0, ni, r);
          Value l = ir::fma(x.get(), s_.scale_log2.ir, -lse2(ni, r));
          if (!masked) {
            x = ir::exp2_ftz(l);
            continue;
          }
          Value i = query(ni, r), j = key(ni, r);
          l = l - slope2 * ir::cast<float>(ir::abs(i + offset() - j));
          x = ir::select(visible(i, j), ir::exp2_ftz(l), 0.0f);
        }
    };
    b_.if_(full, [&] { pass(false); }).else_([&] { pass(true); });
  }
  // The softcap configs: S becomes P and dP becomes dS in one pass, once both products have
  // landed. With y = scale s / cap and r = detail::softcap_r: tanh y = 1 - 2r, its derivative
  // 4 r (1 - r).
  void capped(const AccTile& S, const AccTile& dP, const Index& query, const Index& key, const Index& lse2, const Index& delta,
              Value slope2) {
    Value cap = s_.softcap.ir;
    Value k2 = s_.scale.ir * (2.0f * 1.4426950408889634f) / cap, cap2 = cap * 1.4426950408889634f;
    for (uint32_t ni = 0; ni < S.nt(); ++ni)
      for (uint32_t r = 0; r < 4; ++r) {
        ir::Var x = S.at(0, 0, ni, r), dp = dP.at(0, 0, ni, r);
        Value rr = detail::softcap_r(x.get(), k2);
        Value i = query(ni, r), j = key(ni, r);
        // cap tanh y log2 e - lse2 - slope2 |i + offset - j|
        Value l = ir::fma(cap2, 1.0f - 2.0f * rr, -lse2(ni, r)) - slope2 * ir::cast<float>(ir::abs(i + offset() - j));
        Value p = ir::select(visible(i, j), ir::exp2_ftz(l), 0.0f);
        x = p;
        dp = p * (dp.get() - delta(ni, r)) * (4.0f * rr * (1.0f - rr));
      }
  }
  // dP becomes dS = P (dP - D) (0 where P is: every input is finite there).
  void dscores(const AccTile& P, const AccTile& dP, const Index& delta) {
    for (uint32_t ni = 0; ni < P.nt(); ++ni)
      for (uint32_t r = 0; r < 4; ++r) {
        ir::Var dp = dP.at(0, 0, ni, r);
        dp = P.at(0, 0, ni, r).get() * (dp.get() - delta(ni, r));
      }
  }
  // S and dP of a step as two groups (the caller waits for S, then computes the weights
  // while dP's MMAs run).
  void scores(const AccTile& S, const AccTile& dP, Value sa, Value sb, Value pa, Value pb) {
    S.zero();
    dP.zero();
    b_.wgmma_fence();
    issue_abt(S, sa, sb);
    b_.wgmma_commit_group();
    issue_abt(dP, pa, pb);
    b_.wgmma_commit_group();
  }

  // The accumulator's 64 rows (first.. of a sequence of len, starting at row `start` of the
  // tensor) times factor into a gradient.
  void store(const AccTile& A, const kernel::Ptr& out, const kernel::Param<uint64_t>& bs, const kernel::Param<uint64_t>& ss,
             const kernel::Param<uint64_t>& hs, Value first, Value len, Value start, Value head, Value factor) {
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    for (uint32_t h = 0; h < 2; ++h) {
      Value r = first + warp_ * 16u + lane_ / 4u + 8u * h;
      b_.if_(r < len, [&] {
        Value base = u64(batch_) * bs.ir + u64(start + r) * ss.ir + u64(head) * hs.ir;
        for (uint32_t ni = 0; ni < D_ / 8; ++ni) {
          std::vector<Value> pair;
          for (uint32_t k = 2 * h; k < 2 * h + 2; ++k) pair.push_back(ir::cast(A.at(0, 0, ni, k).get() * factor, t16, ir::Rounding::Rn));
          ir::store_vec(out.ir, base + u64(A.col(lane_, ni, 2 * h)), pair);
        }
      });
    }
  }

  // The shared loop of both parts: thread 0 fills the first `stages` steps, then each step
  // waits for its stage, runs, releases it, and thread 0 refills it with step t + stages.
  void run_ring(const kernel::MbarrierRing& ring, Value steps, const std::function<void(Value)>& load,
                const std::function<void(Value, const kernel::MbarrierRing::Slot&, Value)>& step) {
    b_.if_(tid_ == 0u, [&] {
      for (uint32_t p = 0; p < c_.stages; ++p) b_.if_(u32c(p) < steps, [&] { load(u32c(p)); });
    });
    b_.mbarrier_wait(bars_, own_bar_, 0u);
    b_.for_(0u, steps, [&](Value t) {
      const kernel::MbarrierRing::Slot sl = ring.slot(t);
      ring.wait(sl);
      step(t, sl, u64(sl.stage * (L_.stage / 16)));  // the stage's offset in descriptor units
      ring.release(sl.stage, lane_);
      b_.if_(tid_ == 0u && t + c_.stages < steps, [&] { load(t + c_.stages); });
    });
  }

  void dkv(const kernel::MbarrierRing& ring) {
    Value kvh = b_.block_idx_y(), n0 = b_.block_idx_x() * kRows;
    // The query tiles that see any of the block's keys (the bounds are monotonic in the key).
    Value last = ir::min(n0 + (kRows - 1), sk_ - 1u);
    Value lo = ir::cast<uint32_t>(queries_of(i32(n0)).first), hi = ir::cast<uint32_t>(queries_of(i32(last)).second);
    Value t0 = lo / kRows;
    Value tiles = ir::select(hi > lo, (hi + (kRows - 1)) / kRows - t0, u32c(0));
    Value steps = tiles * s_.group.ir;  // the group's query heads in order, each over its tiles
    // Step t is query tile t % tiles of head t / tiles of the group: the loader (steps in
    // order) and the consumer count them instead of dividing by the run-time tile count.
    ir::Var ld_tile = b_.var<uint32_t>(0u), ld_head = b_.var<uint32_t>(0u), rd_tile = b_.var<uint32_t>(0u),
            rd_head = b_.var<uint32_t>(0u);
    auto next = [&](ir::Var& tile) {
      Value wrap = Value(tile) + 1u == tiles;
      tile = ir::select(wrap, u32c(0), Value(tile) + 1u);
      return wrap;
    };

    load_own(s_.k_map, s_.k_order, s_.v_map, s_.v_order, ks_ + n0, kvh);
    auto load = [&](Value t) {
      const kernel::MbarrierRing::Slot sl = ring.slot(t);
      ring.acquire(sl);
      ring.expect(sl, L_.stage + 2 * kRows * 4);
      Value h = kvh * s_.group.ir + ld_head, m0 = (t0 + ld_tile) * kRows, at = L_.ring + sl.stage * L_.stage;
      load_tile(s_.q_map, s_.q_order, at, qs_ + m0, h, ring.full(sl));
      load_tile(s_.do_map, s_.do_order, at + L_.tile, qs_ + m0, h, ring.full(sl));
      Value st = L_.stats / 4 + sl.stage * (2 * kRows);
      b_.tma_load(smem_f32_, st, s_.lse_map.ir, {m0, h, batch_}, bars_, ring.full(sl));  // (varlen too: kBwdStatsLocal)
      b_.tma_load(smem_f32_, st + kRows, s_.delta_map.ir, {m0, h, batch_}, bars_, ring.full(sl));
      ld_head = ir::select(next(ld_tile), Value(ld_head) + 1u, Value(ld_head));
    };

    const AccTile dK(b_, 1, 1, D_ / 8), dV(b_, 1, 1, D_ / 8), S(b_, 1, 1, kRows / 8), dP(b_, 1, 1, kRows / 8);
    Value k_desc = kmajor(0), v_desc = kmajor(L_.tile);
    Value q_k = kmajor(L_.ring), do_k = kmajor(L_.ring + L_.tile), q_mn = mnmajor(L_.ring), do_mn = mnmajor(L_.ring + L_.tile);
    Value j0 = i32(n0 + warp_ * 16u);  // the warp's first key
    // Rotated so that no MMA group is in flight across the loop's back edge (ptxas then
    // serializes every wgmma): step t's S and dP are issued right behind step t - 1's dV and
    // dK, and step t's weights are computed (while its dP runs) at the end of step t - 1.
    using Slot = kernel::MbarrierRing::Slot;
    auto offset = [&](Value stage) { return u64(stage * (L_.stage / 16)); };  // in descriptor units
    auto stats = [&](Value stage, uint32_t which) {  // lse2 (0) or D (1) of the thread's 16 columns
      Value st = L_.stats / 4 + stage * (2 * kRows) + which * kRows;
      std::vector<Value> v;
      for (uint32_t ni = 0; ni < kRows / 8; ++ni)
        for (Value x : ir::load_vec(smem_f32_, st + S.col(lane_, ni, 0), 2)) v.push_back(x);  // neighbours
      return v;
    };
    // Step t's weights: waits for its S (and every group before it), runs `then`, computes P.
    auto weights = [&](Value t, const std::function<void()>& then) {
      const std::vector<Value> lse2 = stats(ring.slot(t).stage, 0);
      Value m0 = (t0 + rd_tile) * kRows;
      b_.wgmma_wait_group(1);
      then();
      if (c_.softcap) return;  // P with dS, in capped()
      probabilities(S, whole(m0, n0), [&](uint32_t ni, uint32_t r) { return i32(m0 + S.col(lane_, ni, r)); },
                    [&](uint32_t, uint32_t r) { return j0 + i32(S.row(lane_, 0, r)); },
                    [&](uint32_t ni, uint32_t r) { return lse2[2 * ni + r % 2]; },
                    // (clamped: the repeated last step has advanced rd_head past the group, and its
                    // weights go unused, but the slope read must stay inside alibi)
                    [&] { return slope_of(kvh * s_.group.ir + ir::min(Value(rd_head), s_.group.ir - 1u)); });
    };
    b_.if_(tid_ == 0u, [&] {
      for (uint32_t p = 0; p < c_.stages; ++p) b_.if_(u32c(p) < steps, [&] { load(u32c(p)); });
    });
    b_.mbarrier_wait(bars_, own_bar_, 0u);
    b_.if_(steps > 0u, [&] {
      const Slot s0 = ring.slot(u32c(0));
      ring.wait(s0);
      scores(S, dP, k_desc, q_k + offset(s0.stage), v_desc, do_k + offset(s0.stage));
      weights(u32c(0), [] {});
      b_.wgmma_wait_group(0);
    });
    b_.for_(0u, steps, [&](Value t) {
      const Slot sl = ring.slot(t);
      Value soff = offset(sl.stage);
      const std::vector<Value> delta = stats(sl.stage, 1);
      if (c_.softcap) {  // step t's S is still the scores (its stage, and rd_tile / rd_head, are step t's)
        const std::vector<Value> lse2 = stats(sl.stage, 0);
        Value m0 = (t0 + rd_tile) * kRows;
        capped(S, dP, [&](uint32_t ni, uint32_t r) { return i32(m0 + S.col(lane_, ni, r)); },
               [&](uint32_t, uint32_t r) { return j0 + i32(S.row(lane_, 0, r)); },
               [&](uint32_t ni, uint32_t r) { return lse2[2 * ni + r % 2]; },
               [&](uint32_t ni, uint32_t r) { return delta[2 * ni + r % 2]; }, slope_of(kvh * s_.group.ir + rd_head));
      } else {
        dscores(S, dP, [&](uint32_t ni, uint32_t r) { return delta[2 * ni + r % 2]; });
      }
      const std::vector<std::vector<Value>> p = frags_of(S), ds = frags_of(dP);
      // The next step (the last step again on the last: its stage is still full, the result
      // unused), waited for before the fence: nothing between the groups but the MMAs.
      const Slot sn = ring.slot(ir::min(t + 1u, steps - 1u));
      ring.wait(sn);
      S.zero();
      dP.zero();
      b_.wgmma_fence();
      issue_xb(dV, p, do_mn + soff);
      issue_xb(dK, ds, q_mn + soff);
      b_.wgmma_commit_group();
      issue_abt(S, k_desc, q_k + offset(sn.stage));
      b_.wgmma_commit_group();
      issue_abt(dP, v_desc, do_k + offset(sn.stage));
      b_.wgmma_commit_group();
      rd_head = ir::select(next(rd_tile), Value(rd_head) + 1u, Value(rd_head));
      weights(sn.step, [&] {  // step t's dV and dK are done: its stage goes back to the loader
        ring.release(sl.stage, lane_);
        b_.if_(tid_ == 0u && t + c_.stages < steps, [&] { load(t + c_.stages); });
      });
      b_.wgmma_wait_group(0);
    });
    store(dK, s_.g0, s_.g0_bs, s_.g0_ss, s_.g0_hs, n0, sk_, ks_, kvh, s_.scale.ir);
    store(dV, s_.g1, s_.g1_bs, s_.g1_ss, s_.g1_hs, n0, sk_, ks_, kvh, b_.constant<float>(1.0f));
  }

  void dq(const kernel::MbarrierRing& ring) {
    Value h = b_.block_idx_y(), kvh = h / s_.group.ir;
    Value m0 = (b_.grid_dim_x() - 1u - b_.block_idx_x()) * kRows;  // the longest (causal) blocks first
    // This thread's two rows and their statistics (rows past the sequence: the last row's;
    // they are masked and not stored).
    Value lse2[2], delta[2], rows[2];
    for (uint32_t half = 0; half < 2; ++half) {
      rows[half] = m0 + warp_ * 16u + lane_ / 4u + 8u * half;
      Value at = (u64(batch_) * u64(s_.hq.ir) + u64(h)) * u64(s_.sq_pad.ir) + u64(ir::min(rows[half], sq_ - 1u));
      lse2[half] = s_.lse2.ir[at];
      delta[half] = s_.delta.ir[at];
    }
    // The key tiles the block's rows see (the bounds are monotonic in the row).
    Value last = ir::min(m0 + (kRows - 1), sq_ - 1u);
    Value lo = ir::cast<uint32_t>(keys_of(i32(m0)).first), hi = ir::cast<uint32_t>(keys_of(i32(last)).second);
    Value t0 = lo / kRows;
    Value steps = ir::select(hi > lo, (hi + (kRows - 1)) / kRows - t0, u32c(0));

    load_own(s_.q_map, s_.q_order, s_.do_map, s_.do_order, qs_ + m0, h);
    auto load = [&](Value t) {
      const kernel::MbarrierRing::Slot sl = ring.slot(t);
      ring.acquire(sl);
      ring.expect(sl, L_.stage);
      Value at = L_.ring + sl.stage * L_.stage;
      load_tile(s_.k_map, s_.k_order, at, ks_ + (t0 + t) * kRows, kvh, ring.full(sl));
      load_tile(s_.v_map, s_.v_order, at + L_.tile, ks_ + (t0 + t) * kRows, kvh, ring.full(sl));
    };

    const AccTile dQ(b_, 1, 1, D_ / 8), S(b_, 1, 1, kRows / 8), dP(b_, 1, 1, kRows / 8);
    Value q_desc = kmajor(0), do_desc = kmajor(L_.tile);
    Value k_k = kmajor(L_.ring), v_k = kmajor(L_.ring + L_.tile), k_mn = mnmajor(L_.ring);
    run_ring(ring, steps, load, [&](Value t, const kernel::MbarrierRing::Slot&, Value soff) {
      Value n0 = (t0 + t) * kRows;
      scores(S, dP, q_desc, k_k + soff, do_desc, v_k + soff);
      auto query = [&](uint32_t, uint32_t r) { return i32(rows[r / 2]); };
      auto key = [&](uint32_t ni, uint32_t r) { return i32(n0 + S.col(lane_, ni, r)); };
      if (c_.softcap) {
        b_.wgmma_wait_group(0);
        capped(S, dP, query, key, [&](uint32_t, uint32_t r) { return lse2[r / 2]; }, [&](uint32_t, uint32_t r) { return delta[r / 2]; },
               slope_of(h));
      } else {
        b_.wgmma_wait_group(1);
        probabilities(S, whole(m0, n0), query, key, [&](uint32_t, uint32_t r) { return lse2[r / 2]; }, [&] { return slope_of(h); });
        b_.wgmma_wait_group(0);
        dscores(S, dP, [&](uint32_t, uint32_t r) { return delta[r / 2]; });
      }
      const std::vector<std::vector<Value>> ds = frags_of(dP);
      b_.wgmma_fence();
      issue_xb(dQ, ds, k_mn + soff);
      b_.wgmma_commit_group();
      b_.wgmma_wait_group(0);
    });
    store(dQ, s_.g0, s_.g0_bs, s_.g0_ss, s_.g0_hs, m0, sq_, qs_, h, s_.scale.ir);
  }

  ir::KernelBuilder& b_;
  const AttentionBackwardWgmmaConfig& c_;
  BwdWgmmaSignature& s_;
  const Layout L_;
  const uint32_t D_;
  uint32_t own_bar_ = 0;
  Value smem_, smem_f32_, bars_, tid_, warp_, lane_, batch_;
  Value qs_, ks_, sq_, sk_, tb_;  // the sequence's first q / k row, its lengths, the maps' batch coordinate
};

// Blocks an SM holds: three where their shared memory fits (the dq kernels: 168 registers),
// else two (the dk / dv kernels need 255 registers).
uint32_t blocks_of(const AttentionBackwardWgmmaConfig& c) {
  const uint32_t smem = jit::device_info_for("sm_90a").smem_per_sm;
  return c.part == Part::Dq && 3 * (c.shared_bytes() + 1024) <= smem ? 3 : 2;
}

void check_config(const AttentionBackwardWgmmaConfig& c) {
  if (c.dtype != Scalar::F16 && c.dtype != Scalar::BF16)
    throw UsageError("", "attention_backward", std::string("the wgmma kernels take f16 or bf16, not ") + ir::scalar_name(c.dtype));
  if ((c.head_dim != 64 && c.head_dim != 128) || c.part == Part::Dot || c.stages < (c.part == Part::Dq ? 1 : 2) || c.stages > 4 ||
      2 * c.shared_bytes() > jit::device_info_for("sm_90a").smem_per_sm)
    throw UsageError("", "attention_backward", "attention_bwd_wgmma config " + c.str() +
                                                   " is not buildable (head_dim 64 or 128, dq or dkv, 2-4 stages, two blocks "
                                                   "within an sm_90 SM's shared memory)");
}

ir::Kernel build_wgmma(const AttentionBackwardWgmmaConfig& c) {
  check_config(c);
  ir::KernelBuilder b(std::string("attention_bwd_wgmma_") + (c.part == Part::Dq ? "dq_" : "dkv_") + ir::scalar_name(c.dtype) + "_d" +
                      std::to_string(c.head_dim) + "_s" + std::to_string(c.stages) + (c.softcap ? "_cap" : "") + (c.varlen ? "_varlen" : ""));
  BwdWgmmaSignature sig(c.dtype);
  kernel::declare(b, sig);
  b.launch_bounds(kThreads, blocks_of(c));
  b.fast_math();  // no IEEE slow-path calls: a call makes ptxas serialize every wgmma
  BwdWgmma(b, c, sig).build();
  return b.build();
}

// The softcap form of a config. The dq kernel's one-stage form (three blocks an SM, 168
// registers) spills 20 bytes with the softcap's work; it takes two stages (two blocks, 220
// registers, no spill).
AttentionBackwardWgmmaConfig with_softcap(AttentionBackwardWgmmaConfig c) {
  c.softcap = true;
  if (c.part == Part::Dq) c.stages = std::max(c.stages, 2u);
  return c;
}

// The pre-pass's padded stats (lse2 or D) as a map: (row, head, batch), box 64 rows (varlen
// too: the pre-pass writes each sequence's rows at their positions within it).
jit::TensorMapTiled stats_map(uint64_t address, uint32_t rows, uint32_t heads, uint32_t batch, uint32_t sq_pad) {
  jit::TensorMapTiled m;
  m.dtype = Scalar::F32;
  m.global_address = address;
  m.global_dims = {rows, heads, batch};
  m.global_strides = {uint64_t(sq_pad) * 4, uint64_t(heads) * sq_pad * 4};
  m.box_dims = {kRows, 1, 1};
  return m;
}

}  // namespace

uint32_t AttentionBackwardWgmmaConfig::shared_bytes() const { return layout_of(*this).total; }

std::string AttentionBackwardWgmmaConfig::str() const {
  return std::string("attention_bwd_wgmma(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " +
         (part == Part::Dq ? "dq" : "dkv") + ", " + std::to_string(stages) + " stages" + (softcap ? ", softcap" : "") +
         (varlen ? ", varlen)" : ")");
}

jit::Family<AttentionBackwardWgmmaConfig>& attention_backward_wgmma_family() {
  static jit::Family<AttentionBackwardWgmmaConfig> f("attention_bwd_wgmma", build_wgmma, [] {
    std::vector<AttentionBackwardWgmmaConfig> v;
    for (Scalar s : {Scalar::F16, Scalar::BF16})
      for (const AttentionBackwardVariant& row : attention_backward_variants())
        if (row.engine == AttentionEngine::Wgmma)
          for (Part p : {Part::Dq, Part::Dkv})
            for (int form = 0; form < 3; ++form) {  // plain, softcap, varlen
              AttentionBackwardWgmmaConfig c = attention_backward_wgmma_config(s, row, p);
              if (form == 1) c = with_softcap(c);
              c.varlen = form == 2;
              if (std::none_of(v.begin(), v.end(), [&](const auto& o) { return o.fields() == c.fields(); })) v.push_back(c);  // rows share a part's kernel
            }
    return v;
  }());
  return f;
}

namespace detail {

uint32_t attention_backward_sq_pad(uint32_t seqlen_q) { return (seqlen_q + 3) / 4 * 4; }

std::string attention_backward_wgmma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                             const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                             const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row) {
  if (q.dtype != Scalar::F16 && q.dtype != Scalar::BF16) return "it takes f16 or bf16";
  const jit::DeviceInfo& dev = jit::device_info();
  if (dev.sm != 90) return "it needs an sm_90 device (compiled for sm_90a), the device is " + dev.arch;
  if (jit::interpret_mode()) return "the interpreter does not model wgmma and TMA (an sm_90 GPU runs it)";
  if (s.head_dim != 64 && s.head_dim != 128) return "it takes head_dim 64 or 128";
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (varlen && (!opt.total_q || !opt.total_k))
    return "varlen needs total_q and total_k (the rows of q and k: the extents of its TMA maps)";
  if (varlen && opt.softcap > 0.0f) return "it does not take varlen batches with a softcap";
  if (s.seqlen_q > 0x7fffffffu || s.seqlen_k > 0x7fffffffu) return "sequences of 2^31 tokens or more";
  if (row.engine != AttentionEngine::Wgmma || row.head_dim != s.head_dim) return std::string(row.name) + " is not a wgmma row of this head dim";
  for (Part p : {Part::Dq, Part::Dkv})
    if (2 * attention_backward_wgmma_config(q.dtype, row, p).shared_bytes() > dev.smem_per_sm)
      return "two blocks of its tiles do not fit an SM's shared memory";
  std::string why;
  const std::pair<const char*, const AttentionTensor*> ins[] = {{"q", &q}, {"k", &k}, {"v", &v}, {"dout", &dout}};
  for (auto [name, t] : ins) {
    const bool is_q = t == &q || t == &dout;
    if (!attention_tma_plan(*t, is_q ? (varlen ? opt.total_q : s.seqlen_q) : (varlen ? opt.total_k : s.seqlen_k),
                            is_q ? s.heads_q : s.heads_kv, varlen ? 1 : s.batch, s.head_dim, kRows, &why))
      return std::string(name) + ": " + why;
  }
  for (const AttentionTensor* t : {&g.dq, &g.dk, &g.dv})
    if (t->address % (2 * kElem) || t->seq_stride % 2 || t->head_stride % 2 || (s.batch > 1 && t->batch_stride % 2))
      return "dq, dk and dv are stored in pairs: 4-byte aligned, even strides";
  return "";
}

void attention_backward_wgmma_launch(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                     const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                     const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row, float scale,
                                     uint64_t lse2, uint64_t delta, const jit::Stream* stream) {
  // Varlen: the maps span the packed rows (total_q, total_k), batch extent 1.
  const bool varlen = opt.cu_seqlens_q != 0;
  const uint32_t lq = varlen ? opt.total_q : s.seqlen_q, lk = varlen ? opt.total_k : s.seqlen_k, nb = varlen ? 1 : s.batch;
  const uint32_t sq_pad = attention_backward_sq_pad(s.seqlen_q);
  auto plan = [&](const AttentionTensor& t, bool is_q) {
    return jit::encode_tensor_map_tiled(
        attention_tma_plan(t, is_q ? lq : lk, is_q ? s.heads_q : s.heads_kv, nb, s.head_dim, kRows, nullptr)->map);
  };
  auto order = [&](const AttentionTensor& t, bool is_q) {
    return attention_tma_plan(t, is_q ? lq : lk, is_q ? s.heads_q : s.heads_kv, nb, s.head_dim, kRows, nullptr)->order;
  };
  BwdWgmmaSignature sig(q.dtype);
  sig.q_map.host = plan(q, true), sig.k_map.host = plan(k, false), sig.v_map.host = plan(v, false), sig.do_map.host = plan(dout, true);
  sig.q_order.host = order(q, true), sig.k_order.host = order(k, false), sig.v_order.host = order(v, false);
  sig.do_order.host = order(dout, true);
  sig.lse_map.host = jit::encode_tensor_map_tiled(stats_map(lse2, s.seqlen_q, s.heads_q, s.batch, sq_pad));
  sig.delta_map.host = jit::encode_tensor_map_tiled(stats_map(delta, s.seqlen_q, s.heads_q, s.batch, sq_pad));
  sig.cu_q.host = opt.cu_seqlens_q, sig.cu_k.host = opt.cu_seqlens_k;
  sig.lse2.host = lse2, sig.delta.host = delta;
  sig.sq.host = s.seqlen_q, sig.sk.host = s.seqlen_k, sig.sq_pad.host = sq_pad, sig.hq.host = s.heads_q;
  sig.group.host = s.heads_q / s.heads_kv;
  sig.window_left.host = opt.window_left;
  sig.window_right.host = opt.causal ? 0 : opt.window_right;
  sig.alibi.host = opt.alibi_slopes;
  sig.flags.host = opt.alibi_slopes ? detail::kBwdAlibi : 0u;
  sig.scale.host = scale;
  sig.scale_log2.host = scale * 1.4426950408889634f;
  sig.softcap.host = opt.softcap;
  auto launch = [&](Part part, const AttentionTensor& g0, const AttentionTensor& g1, uint32_t len, uint32_t heads) {
    sig.g0.host = g0.address, sig.g0_bs.host = varlen ? 0 : g0.batch_stride, sig.g0_ss.host = g0.seq_stride, sig.g0_hs.host = g0.head_stride;
    sig.g1.host = g1.address, sig.g1_bs.host = varlen ? 0 : g1.batch_stride, sig.g1_ss.host = g1.seq_stride, sig.g1_hs.host = g1.head_stride;
    AttentionBackwardWgmmaConfig c = attention_backward_wgmma_config(q.dtype, row, part);
    if (opt.softcap > 0.0f) c = with_softcap(c);
    c.varlen = varlen;
    const kernel::PackedArgs args = kernel::pack(sig);
    attention_backward_wgmma_family().get(c).launch_packed(
        {.grid = {(len + kRows - 1) / kRows, heads, s.batch}, .block = {kThreads}, .shared_bytes = c.shared_bytes(), .stream = stream},
        args.data(), args.size());
  };
  launch(Part::Dq, g.dq, g.dq, s.seqlen_q, s.heads_q);
  launch(Part::Dkv, g.dk, g.dv, s.seqlen_k, s.heads_kv);
}

}  // namespace detail

}  // namespace kaio::ops
