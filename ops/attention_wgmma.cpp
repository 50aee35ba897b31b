// The Hopper attention kernel (FlashAttention-3 schedule) on wgmma, f16 / bf16 in, f32
// accumulate, sm_90a.
//
// A block takes 128 query rows of one head (192 at D 64: a third consumer) and runs three
// warpgroups (four) (kernel::WarpSpecialized):
//   warpgroup 0        the producer: one thread loads the Q tile once, then the K and V tiles
//                      of BN keys by TMA into two rings of `stages` stages (MbarrierRing: the
//                      K and V of a step have their own full barriers, so Q K^T starts while V
//                      is still landing)
//   warpgroups 1, 2(, 3)  the consumers, 64 query rows each. Per KV tile:
//                        S = Q K^T      wgmma m64nBNk16, Q (A) and K (B) K-major from shared memory
//                        mods           (the mods configs) scale, softcap, ALiBi, as the mma kernel
//                        mask           only on tiles that cross a row's first or last key (a
//                                       window's edges, the causal
//                                       diagonal, the end of the keys)
//                        softmax        the row max and sum across the quad (AccTile), exp2
//                                       with the scale folded in, O rescaled
//                        O += P V       wgmma m64nDk16 with A = P from registers (the f32
//                                       accumulators converted to 16 bits in place: the
//                                       C-fragment layout of one k16 pair of n8 blocks is the
//                                       A-fragment layout) and B = V MN-major (transposing form)
//                      in turn, or (where registers allow: D 64, and D 128 with the producer's
//                      registers moved to the consumers by setmaxnreg) with tile t's Q K^T and
//                      tile t - 1's P V issued together and tile t's mask and softmax
//                      under the P V (FA3's intra-warpgroup overlap); then divide by the
//                      row sums, store o and the logsumexp.
//
// Shared tiles are written by TMA with 128-byte swizzling, the layout the wgmma descriptors
// read (kernel::TmaTile): Q and K as D / 64 blocks of 128-byte rows (one per 64 elements of
// the head dimension), V as boxes of 64 head elements x 64 keys. Each tensor's map is 4-D:
// (d, s, h, b) or (d, h, s, b), whichever order its strides grow in (a TMA map's strides
// each span the dimensions below; bshd tensors take the second); the kernel names the
// coordinates in the map's order (the `*_order` parameters). Rows and keys past the ends
// read as zeros and are masked. Causal blocks start with the last query rows (the longest).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/kernel/online_softmax.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/kernel/warp_specialized.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Value;
using kernel::AccTile;
using kernel::kSwizzleBytes;
using kernel::TmaTile;

using kernel::kLog2e;
constexpr float kLn2 = 0.6931471805599453f;
constexpr uint32_t kConsumerRows = 64, kElem = 2;
constexpr uint32_t kWgmmaK = 16;  // k of one 16-bit wgmma
constexpr uint32_t kBlock = kSwizzleBytes / kElem;  // head elements (or keys) in a 128-byte row: 64

// Head dims above 128 at 64 query rows a block split the head dimension between the
// consumers: both take the same 64 rows and compute the whole S (Q K^T over all of D), each
// keeps O for its half of D. O for 64 rows x 256 is 128 registers per thread beside S and P,
// past the 168 a thread has; the split costs a second Q K^T (3 units of MMA work for 2) and
// keeps every register. At 128 rows a block each consumer keeps all of D for its 64 rows, in
// the 240 registers the producer hands over (reallocates).
bool splits_d(const AttentionWgmmaConfig& c) { return c.head_dim > 128 && c.bm == kConsumerRows; }
// Consumer warpgroups: one per 64 query rows (two or three), or two that split D.
uint32_t consumers_of(const AttentionWgmmaConfig& c) { return splits_d(c) ? 2 : c.bm / kConsumerRows; }
// Query rows per block: 128 or 192 (a consumer's 64 each), or 64 when the consumers split D.
uint32_t bm_of(const AttentionWgmmaConfig& c) { return splits_d(c) ? kConsumerRows : c.bm; }
// The head elements of O a consumer keeps.
uint32_t o_width(const AttentionWgmmaConfig& c) { return splits_d(c) ? c.head_dim / 2 : c.head_dim; }

// Byte offsets in the block's shared memory: Q, the K stages, the V stages, the mbarriers.
struct Layout {
  uint32_t q_bytes, k_stage, v_stage, k_off, v_off, bar_off, total;
};
Layout layout_of(const AttentionWgmmaConfig& c) {
  Layout l{};
  l.q_bytes = bm_of(c) * c.head_dim * kElem;
  l.k_stage = c.bn * c.head_dim * kElem;
  l.v_stage = c.bn * c.head_dim * kElem;
  l.k_off = l.q_bytes;
  l.v_off = l.k_off + c.stages * l.k_stage;
  l.bar_off = l.v_off + c.stages * l.v_stage;
  // full and empty per stage of each ring, then Q's (and, persistent, Q's release and the
  // slot through which the producer hands the consumers their next item)
  l.total = l.bar_off + (4 * c.stages + 1 + (c.persistent ? 2 : 0)) * 8;
  return l;
}

// The tiles: Q (128 rows) and a K stage (BN keys) as D / 64 K-major blocks of 128-byte rows;
// a V stage as BN / 64 MN-major tiles of D rows (64 keys each).
TmaTile tile_q(const AttentionWgmmaConfig& c) { return {.rows = bm_of(c), .esize = kElem, .k_major = true, .base = 0}; }
TmaTile tile_k(const AttentionWgmmaConfig& c) {
  return {.rows = c.bn, .esize = kElem, .k_major = true, .base = layout_of(c).k_off / kElem};
}
TmaTile tile_v(const AttentionWgmmaConfig& c) {
  return {.rows = c.head_dim, .esize = kElem, .k_major = false, .base = layout_of(c).v_off / kElem};
}

enum : uint32_t { kWgmmaLse = 1, kWgmmaAlibi = 2 };

// Varlen (the varlen configs): sq and sk are the longest sequences (the grid's extent); each
// block reads its sequence's start and length from cu_q / cu_k, the maps span all the packed
// tokens (batch extent 1), and o's batch stride is 0.

struct AttentionWgmmaSignature {
  kernel::TensorMap q_map{"q_map"}, k_map{"k_map"}, v_map{"v_map"};
  kernel::Ptr o{"o"}, lse{"lse", Scalar::F32}, alibi{"alibi", Scalar::F32, true};
  kernel::Ptr cu_q{"cu_q", Scalar::S32, true}, cu_k{"cu_k", Scalar::S32, true};
  kernel::Param<uint64_t> o_bs{"o_bs"}, o_ss{"o_ss"}, o_hs{"o_hs"}, lse_bs{"lse_bs"}, lse_hs{"lse_hs"};
  kernel::Param<uint32_t> sq{"sq"}, sk{"sk"}, group{"group"}, flags{"flags"};
  kernel::Param<int32_t> window_left{"window_left"}, window_right{"window_right"};  // -1: unbounded (causal: right 0)
  // 0: the map is (d, s, h, b); 1: (d, h, s, b)
  kernel::Param<uint32_t> q_order{"q_order"}, k_order{"k_order"}, v_order{"v_order"};
  kernel::Param<float> scale_log2{"scale_log2"};  // scale * log2(e)
  kernel::Param<float> scale{"scale"}, softcap{"softcap"};  // read by the mods configs
  // The persistent form: query tiles per head, heads (Hq) and items (tiles_m x Hq x B), and
  // the counter the blocks take their items from (0 between calls: the last taker resets it).
  kernel::Opt<kernel::Param<uint32_t>> tiles_m{{"tiles_m"}}, heads{{"heads"}}, items{{"items"}};
  kernel::Opt<kernel::Param<uint32_t>> group_heads{{"group_heads"}};  // (head, batch) pairs of an item group
  kernel::Opt<kernel::Ptr> counter{{"counter", Scalar::U32}};

  AttentionWgmmaSignature(Scalar dtype, bool persistent) {
    o.elem = dtype;
    tiles_m.on = heads.on = items.on = group_heads.on = counter.on = persistent;
  }
  auto fields() {
    return std::tie(q_map, k_map, v_map, o, lse, o_bs, o_ss, o_hs, lse_bs, lse_hs, sq, sk, group, flags, window_left,
                    window_right, q_order,
                    k_order, v_order, scale_log2, alibi, scale, softcap, cu_q, cu_k, tiles_m, heads, items, group_heads, counter);
  }
};

// Registers per thread: a 384-thread block has 168 (65,536 / 384), a 512-thread one 128. The
// overlapped schedule (Fa3Kernel::consume) keeps S(t), P(t - 1) and O live together, BN / 2 +
// BN / 4 + D / 2 of them, and fits beside the rest (about 40) where that comes to 128 or fewer
// at two consumers (D 64). Beyond, it fits once the producer warpgroup hands its registers to
// the consumers (setmaxnreg: 24 for the producer and 240 for each of two consumers, 64,512 in
// all; 32 and 160 for three, 65,536): up to 200 (D 128 at BN 128: 160) at two consumers, 128
// (D 64 at BN 128) at three. Those kernels are compiled as a whole program when they load
// (jit/backend_device.cpp; nvJitLink's separate compile ignores setmaxnreg, and its cubin,
// which spills, is only the fallback).
uint32_t overlap_regs(const AttentionWgmmaConfig& c) { return c.bn / 2 + c.bn / 4 + o_width(c) / 2; }
uint32_t producer_regs(const AttentionWgmmaConfig& c) { return consumers_of(c) == 2 ? 24 : 32; }
uint32_t consumer_regs(const AttentionWgmmaConfig& c) { return consumers_of(c) == 2 ? 240 : 160; }
// What a consumer keeps beside S, P and O (descriptors, row bounds, the softmax's state):
// about 40 registers; three consumers' 160 leave 32, which D 64 at BN 128 needs no more of.
constexpr uint32_t kOtherRegs = 40, kOtherRegsTight = 32;
uint32_t plain_regs(const AttentionWgmmaConfig& c) {
  return 65536 / kernel::WarpSpecialized::threads(consumers_of(c)) / 8 * 8;
}
bool overlap_fits(const AttentionWgmmaConfig& c) {
  return overlap_regs(c) + (consumers_of(c) == 2 ? kOtherRegs : kOtherRegsTight) <= consumer_regs(c);
}
bool reallocates(const AttentionWgmmaConfig& c) { return overlap_fits(c) && overlap_regs(c) + kOtherRegs > plain_regs(c); }

class Fa3Kernel {
 public:
  Fa3Kernel(ir::KernelBuilder& b, const AttentionWgmmaConfig& c, AttentionWgmmaSignature& s)
      : b_(b), c_(c), s_(s), L_(layout_of(c)), tq_(tile_q(c)), tk_(tile_k(c)), tv_(tile_v(c)) {}

  void build() {
    const uint32_t S = c_.stages;
    smem_ = b_.dynamic_shared(c_.dtype, 1024);
    bars_ = b_.dynamic_shared<uint64_t>(1024);
    const kernel::MbarrierRing ring_k(b_, bars_, L_.bar_off / 8, S, 4 * consumers_of(c_));  // each consumer warp releases
    const kernel::MbarrierRing ring_v(b_, bars_, L_.bar_off / 8 + 2 * S, S, 4 * consumers_of(c_));
    q_bar_ = L_.bar_off / 8 + 4 * S;
    Value tid = b_.thread_idx_x();
    warp_ = b_.warp_id();
    lane_ = b_.lane_id();
    const uint32_t bm = bm_of(c_);
    if (c_.persistent) return run_persistent(ring_k, ring_v, tid, bm);
    qh_ = b_.block_idx_y();
    batch_ = b_.block_idx_z();
    kvh_ = qh_ / s_.group.ir;
    m0_ = (b_.grid_dim_x() - 1u - b_.block_idx_x()) * bm;  // the longest (causal) blocks first
    // This block's sequence: its first q and k token among the packed ones and its lengths.
    qs_ = ks_ = u32c(0);
    sq_ = s_.sq.ir, sk_ = s_.sk.ir;
    tb_ = batch_;
    if (c_.varlen) {
      const detail::Sequence seq = detail::packed_sequence(s_.cu_q.ir, s_.cu_k.ir, batch_);
      qs_ = seq.qstart, sq_ = seq.sq, ks_ = seq.kstart, sk_ = seq.sk;
      tb_ = u32c(0);
      b_.if_(m0_ < sq_, [&] { run(ring_k, ring_v, tid, bm); });  // blocks past a shorter sequence's end: nothing
    } else {
      run(ring_k, ring_v, tid, bm);
    }
  }

 private:
  // The key tiles of the query rows from m0_ (bm of them): from the first row's first key to
  // the last row's last key (the bounds grow with the row); sets t0_, the first.
  Value key_tiles(uint32_t bm) {
    Value last = ir::min(m0_ + (bm - 1), sq_ - 1u);
    Value lo = ir::cast<uint32_t>(lo_of(m0_)), hi = ir::cast<uint32_t>(hi_of(last));
    t0_ = c_.windowed ? lo / c_.bn : u32c(0);
    return ir::select(hi > lo, (hi + (c_.bn - 1)) / c_.bn - t0_, u32c(0));
  }

  // One thread initialises Q's barrier (and, persistent, Q's release: every consumer warp)
  // and the rings'; then the block meets.
  void init_barriers(const kernel::MbarrierRing& ring_k, const kernel::MbarrierRing& ring_v, Value tid) {
    if (c_.persistent) q_empty_ = q_bar_ + 1, item_slot_ = q_bar_ + 2;
    b_.if_(tid == 0u, [&] {
      b_.mbarrier_init(bars_, q_bar_, 1u);
      if (c_.persistent) b_.mbarrier_init(bars_, q_empty_, 4 * consumers_of(c_));
      ring_k.init();
      ring_v.init();
    });
    b_.barrier();
  }
  // The producer and consumer warpgroups, with the producer's registers moved to the
  // consumers where the config needs them.
  kernel::WarpSpecialized warp_specialized() const {
    kernel::WarpSpecialized ws(b_, consumers_of(c_));
    if (reallocates(c_)) ws.producer_regs = producer_regs(c_), ws.consumer_regs = consumer_regs(c_);
    return ws;
  }

  void run(const kernel::MbarrierRing& ring_k, const kernel::MbarrierRing& ring_v, Value tid, uint32_t bm) {
    Value tiles = key_tiles(bm);
    init_barriers(ring_k, ring_v, tid);
    warp_specialized().run(warp_,
           [&] {
             b_.if_(tid == 0u, [&] {
               load_q();
               b_.for_(0u, tiles, [&](Value t) {
                 load_k(ring_k, t);
                 load_v(ring_v, t);
               });
             });
           },
           [&](Value wg) { consume(ring_k, ring_v, tiles, wg); });
  }

  // The persistent form: items are (query tile, head, batch) in groups of group_heads (head,
  // batch) pairs, the heads of one KV head together; in a group, the longest query tiles of
  // all its heads first (the last: a causal walk's longest), then the next. Without a causal
  // or windowed walk a group is one head (its query tiles next to each other); with one,
  // several (detail::attention_item_group), so that the launch ends on short items: the grid's
  // order, one head's tiles from the longest, leaves the last heads' longest items to the end
  // (B4 H8 S2048 D 256 causal, 3.9 items a block: a tail of up to a quarter of a block's
  // work). A group reads the K and V of a few heads, which stay in L2 (with every head in
  // flight at once, at 128 rows a tile, ~128 FLOP a byte, the tensor cores' rate would need
  // all of the DRAM's bandwidth). Block b starts with item b and then takes the next untaken
  // one from a counter, each to the block that frees first (a static round robin measured up
  // to 10% slower on causal rows of 128 key tiles). The producer takes the next item once it
  // has issued this one's loads, two tiles before the consumers end it (the atomic's latency
  // hidden), and hands it over in a shared slot published by Q's barrier; past the last item
  // it publishes `items` with a bare arrive, and the consumers leave. The producer's rings
  // run on from one item into the next (ring steps count from the block's first item,
  // step0_), so the next item's K and V tiles load while the consumers finish this one; Q
  // waits for its release (q_empty_: every consumer warp, once its last MMA that reads Q is
  // done), then loads under this item's epilogue. The counter is 0 at launch: of the `items`
  // takes of a launch (one per item past the first wave, one failed take per block), the one
  // that draws items - 1 is the last, and resets it.
  void run_persistent(const kernel::MbarrierRing& ring_k, const kernel::MbarrierRing& ring_v, Value tid, uint32_t bm) {
    qs_ = ks_ = u32c(0);
    sq_ = s_.sq.ir, sk_ = s_.sk.ir;
    init_barriers(ring_k, ring_v, tid);
    Value grid = b_.grid_dim_x(), items = s_.items.ir, tiles_m = s_.tiles_m.ir;
    // Item w: its query tile, head and batch; returns its key tiles.
    Value gsize = s_.group_heads.ir, pairs = items / tiles_m;  // (head, batch) pairs: Hq x B
    auto item = [&](Value w) {
      Value g = w / (gsize * tiles_m), i = w - g * (gsize * tiles_m);
      Value here = ir::min(gsize, pairs - g * gsize);  // the last group may be smaller
      Value rank = i / here, hb = g * gsize + (i - rank * here);
      qh_ = hb % s_.heads.ir;
      batch_ = hb / s_.heads.ir;
      tb_ = batch_;
      kvh_ = qh_ / s_.group.ir;
      m0_ = (tiles_m - 1u - rank) * bm;
      return key_tiles(bm);
    };
    warp_specialized().run(warp_,
           [&] {
             b_.if_(tid == 0u, [&] {
               ir::Var step0 = b_.var<uint32_t>(0u), r = b_.var<uint32_t>(0u), w = b_.var<uint32_t>(b_.block_idx_x());
               // Waits until the consumers have read Q and the slot of the last item (none at r 0).
               auto last_q_read = [&] { b_.if_(r.get() > 0u, [&] { b_.mbarrier_wait(bars_, q_empty_, (r.get() - 1u) & 1u); }); };
               b_.while_([&] { return w.get() < items; }, [&] {
                 Value tiles = item(w.get());
                 step0_ = step0.get();
                 last_q_read();
                 bars_[u32c(item_slot_)] = u64(w.get());
                 load_q();  // its arrive publishes the slot
                 b_.for_(0u, tiles, [&](Value t) {
                   load_k(ring_k, t);
                   load_v(ring_v, t);
                 });
                 step0 = step0.get() + tiles;
                 r = r.get() + 1u;
                 Value take = ir::atomic_add(s_.counter.ir, 0u, 1u);
                 b_.if_(take == items - 1u, [&] { s_.counter.ir[0u] = 0u; });  // the launch's last take
                 w = grid + take;
               });
               last_q_read();
               bars_[u32c(item_slot_)] = u64(items);
               b_.mbarrier_arrive(bars_, q_bar_);  // no bytes: the phase completes with the slot
             });
           },
           [&](Value wg) {
             ir::Var step0 = b_.var<uint32_t>(0u), r = b_.var<uint32_t>(0u), live = b_.var<uint32_t>(1u);
             b_.while_([&] { return live.get() != 0u; }, [&] {
               b_.mbarrier_wait(bars_, q_bar_, r.get() & 1u);  // Q and the slot
               Value w = ir::cast<uint32_t>(Value(bars_[u32c(item_slot_)]));
               b_.if_(w < items, [&] {
                 Value tiles = item(w);
                 step0_ = step0.get();
                 consume(ring_k, ring_v, tiles, wg);
                 step0 = step0.get() + tiles;
                 r = r.get() + 1u;
               }).else_([&] { live = 0u; });
             });
           });
  }
  // The ring step of key tile t of this item (the persistent form counts on across items).
  Value step(Value t) { return c_.persistent ? step0_ + t : t; }

  Value i32(Value v) { return ir::cast<int32_t>(v); }
  Value u64(Value v) { return ir::cast<uint64_t>(v); }
  Value u32c(uint32_t v) { return b_.constant<uint32_t>(v); }

  // The keys [lo, hi) query row i sees (i32, 0..Sk): all, or those of the window around its
  // position i + Sk - Sq (aligned to the bottom right; causal: window_right 0).
  Value hi_of(Value i) {
    Value sk = i32(sk_), wr = s_.window_right.ir;
    Value edge = ir::min(sk, i32(i) + sk - i32(sq_) + wr + 1);
    return ir::max(ir::select(wr >= 0, edge, sk), b_.constant<int32_t>(0));
  }
  // (0 unless the config is windowed: the plain kernel keeps no left edge.)
  Value lo_of(Value i) {
    if (!c_.windowed) return b_.constant<int32_t>(0);
    Value sk = i32(sk_), wl = s_.window_left.ir;
    Value edge = ir::min(sk, i32(i) + sk - i32(sq_) - wl);
    return ir::max(ir::select(wl >= 0, edge, b_.constant<int32_t>(0)), b_.constant<int32_t>(0));
  }

  // A map's coordinates in its order: (d, s, h, b) or (d, h, s, b).
  std::vector<Value> coords(Value order, Value d, Value seq, Value head) {
    return {d, ir::select(order != 0u, head, seq), ir::select(order != 0u, seq, head), tb_};
  }

  // The producer's loads: Q once, the K and V tiles of step t into their ring stages once
  // both consumers have released the stage's previous tile.
  void load_q() {
    const uint32_t kd = c_.head_dim / kBlock;
    b_.mbarrier_arrive_expect_tx(bars_, q_bar_, u32c(L_.q_bytes));
    for (uint32_t kb = 0; kb < kd; ++kb)
      b_.tma_load(smem_, tq_.base + kb * tq_.stage_elements(), s_.q_map.ir, coords(s_.q_order.ir, u32c(kb * kBlock), qs_ + m0_, qh_),
                  bars_, q_bar_);
  }
  void load_k(const kernel::MbarrierRing& ring_k, Value t) {
    const uint32_t kd = c_.head_dim / kBlock;
    const kernel::MbarrierRing::Slot sk = ring_k.slot(step(t));
    ring_k.acquire(sk);  // both consumers freed it (a fresh ring passes)
    ring_k.expect(sk, L_.k_stage);
    for (uint32_t kb = 0; kb < kd; ++kb)
      b_.tma_load(smem_, (sk.stage * kd + kb) * tk_.stage_elements() + tk_.base, s_.k_map.ir,
                  coords(s_.k_order.ir, u32c(kb * kBlock), ks_ + (t0_ + t) * c_.bn, kvh_), bars_, ring_k.full(sk));
  }
  void load_v(const kernel::MbarrierRing& ring_v, Value t) {
    const uint32_t kd = c_.head_dim / kBlock, kv = c_.bn / kBlock;
    const kernel::MbarrierRing::Slot sv = ring_v.slot(step(t));
    ring_v.acquire(sv);
    ring_v.expect(sv, L_.v_stage);
    for (uint32_t vb = 0; vb < kv; ++vb)
      for (uint32_t box = 0; box < kd; ++box)
        b_.tma_load(smem_, (sv.stage * kv + vb) * tv_.stage_elements() + (tv_.base + box * (tv_.box_bytes() / kElem)),
                    s_.v_map.ir, coords(s_.v_order.ir, u32c(box * kBlock), ks_ + (t0_ + t) * c_.bn + vb * kBlock, kvh_), bars_,
                    ring_v.full(sv));
  }

  // A consumer's KV loop, in one of two schedules:
  //   in turn    per tile: S = Q K^T, wait; mask, softmax; O += P V, wait.
  //   overlap    step t issues S(t) = Q K(t)^T and then O += P(t - 1) V(t - 1), and runs tile
  //              t's mask and softmax while the second group is still on the tensor cores
  //              (FA3's intra-warpgroup overlap). S(t), P(t - 1) and O are then live together:
  //              BN / 2 + BN / 4 + D / 2 registers per thread: at D 64 within the 168 a
  //              thread of a 384-thread block has (+5-8% on the H200), at D 128 (160) with
  //              the producer's registers moved to the consumers (overlap_fits, reallocates).
  void consume(const kernel::MbarrierRing& ring_k, const kernel::MbarrierRing& ring_v, Value tiles, Value wg) {
    const bool overlap = overlap_fits(c_);
    const uint32_t D = o_width(c_), BN = c_.bn;  // D: the head elements of O this consumer keeps
    const bool split = splits_d(c_);
    const ir::Type t16 = ir::Type::scalar(c_.dtype);
    Value row_w = split ? u32c(0) : wg * kConsumerRows;  // this consumer's first row in the block
    Value d0 = split ? wg * D : u32c(0);                  // ... and its first head element of O
    // Descriptors of k 0: Q at this consumer's rows, K and V at stage 0; each k slice, block
    // and stage adds its byte offset / 16.
    desc_q_ = tq_.descriptor(b_, smem_, tq_.row_start(row_w));
    desc_k_ = tk_.descriptor(b_, smem_, tk_.base);
    desc_v_ = tv_.descriptor(b_, smem_, tv_.base + tv_.row_start(d0));
    const AccTile S(b_, 1, 1, BN / 8), O(b_, 1, 1, D / 8);  // per warp: its 16 rows x BN keys, x D
    // P of the tile whose P V is in flight: the A fragments of BN / 16 k slices, 4 registers each.
    const Scalar s16x2 = c_.dtype == Scalar::F16 ? Scalar::F16x2 : Scalar::BF16x2;
    const ir::RegArray P = b_.array(ir::Type::scalar(s16x2), BN / 4, ir::bitcast(u32c(0), s16x2));
    // This thread's two rows (fragment rows lane / 4 and + 8 of its warp) and their key ends.
    Value rows[2], hi[2], lo[2];
    std::vector<ir::Var> m, l;
    for (uint32_t h = 0; h < 2; ++h) {
      rows[h] = m0_ + row_w + (warp_ % 4u) * 16u + (lane_ / 4u + 8u * h);
      hi[h] = hi_of(rows[h]);
      lo[h] = lo_of(rows[h]);
      m.push_back(b_.var<float>(-INFINITY));  // running max, in the scaled log2 domain
      l.push_back(b_.var<float>(0.0f));
    }
    // The mods configs: each row's position among the keys (ALiBi's centre) and its head's slope.
    Value center[2], slope = b_.constant<float>(0.0f);
    if (c_.mods) {
      for (uint32_t h = 0; h < 2; ++h) center[h] = i32(rows[h]) + i32(sk_) - i32(sq_);
      ir::Var sl = b_.var<float>(0.0f);
      b_.if_((s_.flags.ir & uint32_t(kWgmmaAlibi)) != 0u, [&] { sl = s_.alibi.ir[qh_]; });
      slope = sl.get();
    }
    Value hi_min = hi_of(m0_ + row_w);  // every row of this consumer sees the keys below it
    Value lo_max = lo_of(m0_ + row_w + (kConsumerRows - 1));  // ... and those from this one on

    // Tile t's scores: mask, online softmax; returns its weights (f32, unnormalised) and sets corr
    // to the factor O and l take for the new running max. Reads S only.
    auto softmax = [&](Value t, std::vector<Value>& corr) {
      Value k0 = (t0_ + t) * BN;
      // The mods configs: the scores scaled, soft-capped (cap tanh(s / cap)) and given ALiBi's
      // bias (-slope |centre - j|) in the order of the mma kernel; the softmax below then
      // takes them with the bare log2(e).
      if (c_.mods) {
        Value cap = s_.softcap.ir;
        auto each = [&](const std::function<void(ir::Var&, uint32_t, uint32_t)>& f) {
          for (uint32_t ni = 0; ni < BN / 8; ++ni)
            for (uint32_t r = 0; r < 4; ++r) {
              ir::Var x = S.at(0, 0, ni, r);
              f(x, ni, r);
            }
        };
        each([&](ir::Var& x, uint32_t, uint32_t) { x = x.get() * s_.scale.ir; });
        // cap tanh(x / cap) = cap - 2 cap r, r = 1 / (2^(x 2 log2(e) / cap) + 1) as in
        // detail::softcap_r (its error and limits there), written as one division: the
        // reciprocal and a product ran 1-2% slower on the H200. (The scale folded into the
        // exponent, with an else branch for uncapped scores, spills 8 bytes at D 64 varlen.)
        b_.if_(cap > 0.0f, [&] {
          Value k2 = (2.0f * kLog2e) / cap, c2 = 2.0f * cap;
          each([&](ir::Var& x, uint32_t, uint32_t) { x = cap - c2 / (ir::exp2_ftz(x.get() * k2) + 1.0f); });
        });
        b_.if_((s_.flags.ir & uint32_t(kWgmmaAlibi)) != 0u, [&] {
          each([&](ir::Var& x, uint32_t ni, uint32_t r) {
            Value j = i32(k0 + S.col(lane_, ni, r));
            x = x.get() - slope * ir::cast<float>(ir::abs(center[r / 2] - j));
          });
        });
      }
      // The mask, only where a row of this consumer starts or ends inside the tile.
      b_.if_(c_.windowed ? (i32(k0 + BN) > hi_min || i32(k0) < lo_max) : i32(k0 + BN) > hi_min, [&] {
        for (uint32_t ni = 0; ni < BN / 8; ++ni)
          for (uint32_t r = 0; r < 4; ++r) {
            ir::Var x = S.at(0, 0, ni, r);
            Value j = i32(k0 + S.col(lane_, ni, r));
            x = ir::select(c_.windowed ? (j < hi[r / 2] && j >= lo[r / 2]) : j < hi[r / 2], x.get(), -INFINITY);
          }
      });
      // Online softmax: P = exp2(S * scale - m) with m the running max of S * scale. The
      // flush-to-zero exp2 is one MUFU.EX2; the plain form adds ptxas's subnormal fix-up (a
      // compare and two predicated multiplies) to each of a thread's 64 elements, and a
      // weight below 2^-126 of the row's largest is zero in P's 16 bits and in the f32 sum.
      Value scale = c_.mods ? b_.constant<float>(kLog2e) : s_.scale_log2.ir;
      std::vector<Value> mx = S.row_reduce(0, AccTile::Reduce::Max), ms(2);
      corr.assign(2, Value());
      for (uint32_t h = 0; h < 2; ++h) {
        Value m_new = ir::max(m[h].get(), mx[h] * scale);
        ms[h] = ir::select(m_new == -INFINITY, 0.0f, m_new);  // no key yet: exp2(-inf) = 0, not NaN
        corr[h] = ir::exp2_ftz(m[h].get() - ms[h]);
        m[h] = m_new;
      }
      // The weights (f32) and the row sums. P's registers of n8 blocks 2 kk and 2 kk + 1 are
      // the A fragment of k slice kk: (g, k 0-7), (g + 8, k 0-7), (g, k 8-15), (g + 8, k 8-15).
      Value rs[2] = {b_.constant<float>(0.0f), b_.constant<float>(0.0f)};
      std::vector<Value> e;
      for (uint32_t ni = 0; ni < BN / 8; ++ni) {
        for (uint32_t r = 0; r < 4; ++r) e.push_back(ir::exp2_ftz(S.at(0, 0, ni, r).get() * scale - ms[r / 2]));
        rs[0] = rs[0] + e[4 * ni] + e[4 * ni + 1];
        rs[1] = rs[1] + e[4 * ni + 2] + e[4 * ni + 3];
      }
      for (uint32_t h = 0; h < 2; ++h) {
        for (uint32_t d = 1; d <= 2; d *= 2) rs[h] = rs[h] + ir::shfl_xor(rs[h], d);  // across the quad
        l[h] = l[h].get() * corr[h] + rs[h];
      }
      return e;
    };
    // The weights to P (16 bits, in pairs). Not done inside softmax: with a P V group in
    // flight, ptxas would give the new pairs the registers of the P that group still reads
    // (a copy it coalesces) and then serialize every wgmma of the kernel.
    auto to_p = [&](const std::vector<Value>& e) {
      for (uint32_t i = 0; i < BN / 4; ++i)
        P[i] = ir::pack2(ir::cast(e[2 * i], t16, ir::Rounding::Rn), ir::cast(e[2 * i + 1], t16, ir::Rounding::Rn));
    };

    if (!c_.persistent) b_.mbarrier_wait(bars_, q_bar_, 0u);  // (the persistent form waited for it with its item)
    b_.if_(tiles > 0u, [&] {
      // Tile 0: its scores alone, then its P.
      const kernel::MbarrierRing::Slot s0 = ring_k.slot(step(u32c(0)));
      issue_scores(ring_k, S, s0);
      b_.wgmma_wait_group(0);
      ring_k.release(s0.stage, lane_);
      std::vector<Value> corr;
      to_p(softmax(u32c(0), corr));

      b_.for_(1u, tiles, [&](Value t) {
        const kernel::MbarrierRing::Slot sk = ring_k.slot(step(t)), sv = ring_v.slot(step(t - 1u));
        const PvInputs pv = prepare_pv(ring_v, P, sv);
        std::vector<Value> corr_t, e;
        if (overlap) {
          issue_scores(ring_k, S, sk);  // its fence also orders P's and O's last writes
          issue_pv(O, pv);
          b_.wgmma_wait_group(1);  // S(t) is in; P(t - 1) V(t - 1) may still run
          ring_k.release(sk.stage, lane_);
          e = softmax(t, corr_t);
          b_.wgmma_wait_group(0);
          ring_v.release(sv.stage, lane_);
        } else {  // in turn: P(t - 1) V(t - 1), then S(t) and its softmax
          b_.wgmma_fence();
          issue_pv(O, pv);
          b_.wgmma_wait_group(0);
          ring_v.release(sv.stage, lane_);
          issue_scores(ring_k, S, sk);
          b_.wgmma_wait_group(0);
          ring_k.release(sk.stage, lane_);
          e = softmax(t, corr_t);
        }
        O.scale_rows(0, corr_t);
        to_p(e);
      });
      const kernel::MbarrierRing::Slot sl = ring_v.slot(step(tiles - 1u));
      const PvInputs pv = prepare_pv(ring_v, P, sl);
      b_.wgmma_fence();
      issue_pv(O, pv);
      b_.wgmma_wait_group(0);
      ring_v.release(sl.stage, lane_);
    });
    // The persistent form: this warp's MMAs that read Q are done; the producer may load the
    // next item's Q (under this epilogue).
    if (c_.persistent) b_.if_(lane_ == 0u, [&] { b_.mbarrier_arrive(bars_, q_empty_); });

    // o = O / l and lse = m ln 2 + log l per row (0 and -inf for a row that saw no key).
    for (uint32_t h = 0; h < 2; ++h) {
      Value i = rows[h];
      b_.if_(i < sq_, [&] {
        Value lv = l[h].get();
        Value inv = ir::select(lv > 0.0f, 1.0f / lv, 0.0f);
        Value ob = u64(batch_) * s_.o_bs.ir + u64(qs_ + i) * s_.o_ss.ir + u64(qh_) * s_.o_hs.ir;
        for (uint32_t ni = 0; ni < D / 8; ++ni) {
          std::vector<Value> pair;
          for (uint32_t r = 2 * h; r < 2 * h + 2; ++r) pair.push_back(ir::cast(O.at(0, 0, ni, r).get() * inv, t16, ir::Rounding::Rn));
          ir::store_vec(s_.o.ir, ob + u64(d0 + O.col(lane_, ni, 2 * h)), pair);
        }
        b_.if_((s_.flags.ir & uint32_t(kWgmmaLse)) != 0u && lane_ % 4u == 0u && d0 == 0u, [&] {
          Value lse = ir::select(lv > 0.0f, m[h].get() * kLn2 + ir::log(lv), -INFINITY);
          s_.lse.ir[u64(batch_) * s_.lse_bs.ir + u64(qh_) * s_.lse_hs.ir + u64(qs_ + i)] = lse;
        });
      });
    }
  }

  // S = Q K^T of the tile in slot sk: waits for its K, issues and commits one group.
  void issue_scores(const kernel::MbarrierRing& ring_k, const AccTile& S, const kernel::MbarrierRing::Slot& sk) {
    const uint32_t D = c_.head_dim, kd = D / kBlock;
    ring_k.wait(sk);
    S.zero();
    Value dk = tk_.stage_descriptor(desc_k_, sk.stage * kd);
    b_.wgmma_fence();  // orders S's zeroing and the last writes of O and P before the MMAs
    for (uint32_t ki = 0; ki < D / kWgmmaK; ++ki) {
      const uint32_t kb = ki / (kBlock / kWgmmaK), within = ki % (kBlock / kWgmmaK) * tq_.k_step_bytes(kWgmmaK);
      b_.wgmma(S.array(0), desc_q_ + b_.constant<uint64_t>((kb * tq_.stage_bytes() + within) / 16),
               dk + b_.constant<uint64_t>((kb * tk_.stage_bytes() + within) / 16), c_.dtype);
    }
    b_.wgmma_commit_group();
  }

  // O += P V of the tile in slot sv, A = P from registers, in two halves. prepare_pv reads
  // (copies) P's registers and waits for V; it comes before the fence that precedes the
  // step's first wgmma, as an instruction that defines a wgmma's input while a group is in
  // flight makes ptxas serialize every wgmma of the kernel. issue_pv issues and commits
  // the group; P and O must not be touched until it is waited for.
  struct PvInputs {
    std::vector<std::vector<Value>> frags;
    Value dv;
  };
  PvInputs prepare_pv(const kernel::MbarrierRing& ring_v, const ir::RegArray& P, const kernel::MbarrierRing::Slot& sv) {
    const uint32_t BN = c_.bn, kv = BN / kBlock;
    PvInputs in{std::vector<std::vector<Value>>(BN / kWgmmaK), Value()};
    for (uint32_t kk = 0; kk < BN / kWgmmaK; ++kk)
      for (uint32_t r = 0; r < 4; ++r) in.frags[kk].push_back(P[4 * kk + r].get());
    ring_v.wait(sv);
    in.dv = tv_.stage_descriptor(desc_v_, sv.stage * kv);
    return in;
  }
  void issue_pv(const AccTile& O, const PvInputs& in) {
    for (uint32_t kk = 0; kk < c_.bn / kWgmmaK; ++kk) {
      const uint32_t vb = kk / (kBlock / kWgmmaK), within = kk % (kBlock / kWgmmaK) * tv_.k_step_bytes(kWgmmaK);
      b_.wgmma(O.array(0), in.frags[kk], in.dv + b_.constant<uint64_t>((vb * tv_.stage_bytes() + within) / 16), c_.dtype,
               true);
    }
    b_.wgmma_commit_group();
  }

  ir::KernelBuilder& b_;
  const AttentionWgmmaConfig& c_;
  AttentionWgmmaSignature& s_;
  const Layout L_;
  const TmaTile tq_, tk_, tv_;
  Value smem_, bars_, warp_, lane_, qh_, batch_, kvh_, m0_, desc_q_, desc_k_, desc_v_, t0_;
  Value qs_, ks_, sq_, sk_, tb_;  // the sequence's first q / k token, its lengths, the maps' batch coordinate
  Value step0_;                   // the persistent form: this item's first ring step
  uint32_t q_bar_ = 0, q_empty_ = 0, item_slot_ = 0;
};

void check_config(const AttentionWgmmaConfig& c) {
  if (c.dtype != Scalar::F16 && c.dtype != Scalar::BF16)
    throw UsageError("", "attention", std::string("the wgmma kernel takes f16 or bf16, not ") + ir::scalar_name(c.dtype));
  if ((c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256) || c.bn % kBlock || c.bn > 256 || c.stages < 2 || c.stages > 4 ||
      (c.bm != 128 && !(c.bm == 192 && c.head_dim == 64) && !(c.bm == 64 && c.head_dim == 256)) ||
      (!splits_d(c) && !overlap_fits(c)) ||
      c.shared_bytes() > jit::device_info_for("sm_90a").smem_per_block_optin || (c.persistent && c.varlen))
    throw UsageError("", "attention", "attention_wgmma config " + c.str() +
                                          " is not buildable (head_dim 64, 128 or 256, BM 128 (192 at D 64, 64 at D 256), BN a multiple "
                                          "of 64 up to 256 whose S, P and O fit a consumer's registers (200 of two, 128 of three), 2-4 stages, within an sm_90 "
                                          "block's shared memory; the persistent form without varlen)");
}

ir::Kernel build_wgmma(const AttentionWgmmaConfig& c) {
  check_config(c);
  ir::KernelBuilder b(std::string("attention_wgmma_") + ir::scalar_name(c.dtype) + "_d" + std::to_string(c.head_dim) +
                      (consumers_of(c) > 2 ? "_m" + std::to_string(bm_of(c)) : "") + "_n" +
                      std::to_string(c.bn) + "s" + std::to_string(c.stages) + (c.windowed ? "_win" : "") + (c.mods ? "_mods" : "") +
                      (c.varlen ? "_varlen" : "") + (c.persistent ? "_persist" : ""));
  AttentionWgmmaSignature sig(c.dtype, c.persistent);
  kernel::declare(b, sig);
  b.launch_bounds(kernel::WarpSpecialized::threads(consumers_of(c)), 1);
  // .approx division and log in the epilogue: the IEEE forms call a slow-path subroutine,
  // and any call makes ptxas serialize every wgmma of the kernel (waits after each).
  b.fast_math();
  Fa3Kernel(b, c, sig).build();
  return b.build();
}

}  // namespace

uint32_t AttentionWgmmaConfig::shared_bytes() const { return layout_of(*this).total; }

std::string AttentionWgmmaConfig::str() const {
  return std::string("attention_wgmma(") + ir::scalar_name(dtype) + ", d" + std::to_string(head_dim) + ", " +
         std::to_string(bm_of(*this)) + "x" +
         std::to_string(bn) + ", " + std::to_string(stages) + " stages" + (mods ? ", softcap and ALiBi" : windowed ? ", windowed" : "") +
         (varlen ? ", varlen" : "") + (persistent ? ", persistent)" : ")");
}

namespace {
// The softcap / ALiBi form of a config: windowed, and 64 keys a tile unless the config moves
// registers to its consumers (D 128). The score modifiers need a few registers beside S, P
// and O: at 128 keys and the 168 registers a thread of a 384-thread block has, D 64 spills
// 24-48 bytes; at 64 keys it does not, nor does D 128 at 128 with 240 (no spill). Three
// consumers' 160 leave no room for them beside a 128-key tile: 64 keys.
AttentionWgmmaConfig with_mods(AttentionWgmmaConfig c) {
  c.windowed = c.mods = true;
  if (!reallocates(c) || consumers_of(c) > 2) c.bn = std::min(c.bn, 64u);
  return c;
}
// The varlen form: windowed; at D 128, 128 keys where the config moves registers to its
// consumers, else 64 (the sequence's bounds beside S, P and O spill 24 bytes at 168).
AttentionWgmmaConfig with_varlen(AttentionWgmmaConfig c) {
  c.windowed = c.varlen = true;
  if (c.head_dim == 128 && !reallocates(c)) c.bn = std::min(c.bn, 64u);
  return c;
}
}  // namespace

AttentionWgmmaConfig attention_wgmma_config(ir::Scalar dtype, const AttentionVariant& v) {
  return {dtype, v.head_dim, v.bm, v.bn, v.stages};
}

jit::Family<AttentionWgmmaConfig>& attention_wgmma_family() {
  static jit::Family<AttentionWgmmaConfig> f("attention_wgmma", build_wgmma, [] {
    std::vector<AttentionWgmmaConfig> v;
    // plain, windowed, softcap and ALiBi (windowed too); then varlen, windowed or with mods;
    // then the persistent forms of the first three
    for (int form = 0; form < 8; ++form)
      for (Scalar s : {Scalar::F16, Scalar::BF16})
        for (const AttentionVariant& row : attention_variants())
          if (row.engine == AttentionEngine::Wgmma) {
            AttentionWgmmaConfig c = attention_wgmma_config(s, row);
            const int f = form < 5 ? form : form - 5;
            c.windowed = f > 0;
            if (f >= 3) c = with_varlen(c);
            if (f == 2 || f == 4) c = with_mods(c);
            c.persistent = form >= 5;
            v.push_back(c);
          }
    return v;
  }());
  return f;
}

const AttentionVariant* attention_wgmma_row(const AttentionShape& s) {
  return attention_pick(s.head_dim, s.seqlen_q, uint64_t(s.heads_q) * s.batch, detail::sm_count(), AttentionEngine::Wgmma);
}

std::string attention_wgmma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                    const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                    const AttentionVariant* row) {
  if (q.dtype != Scalar::F16 && q.dtype != Scalar::BF16) return "it takes f16 or bf16";
  const jit::DeviceInfo& dev = jit::device_info();
  if (dev.sm != 90) return "it needs an sm_90 device (compiled for sm_90a), the device is " + dev.arch;
  if (jit::interpret_mode()) return "the interpreter does not model wgmma and TMA (an sm_90 GPU runs it)";
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (varlen && (!opt.total_q || !opt.total_k))
    return "varlen needs total_q and total_k (the rows of q and k: the extents of its TMA maps)";
  if (!row) row = attention_wgmma_row(s);
  if (!row) return "no tile shape for head_dim " + std::to_string(s.head_dim) + " (64, 128, 256)";
  if (attention_wgmma_config(q.dtype, *row).shared_bytes() > dev.smem_per_block_optin) return "its tiles do not fit shared memory";
  if (s.seqlen_q > 0x7fffffffu || s.seqlen_k > 0x7fffffffu) return "sequences of 2^31 tokens or more";
  std::string why;
  const uint32_t lq = varlen ? opt.total_q : s.seqlen_q, lk = varlen ? opt.total_k : s.seqlen_k, nb = varlen ? 1 : s.batch;
  if (!detail::attention_tma_plan(q, lq, s.heads_q, nb, s.head_dim, bm_of(attention_wgmma_config(q.dtype, *row)), &why))
    return "q: " + why;
  if (!detail::attention_tma_plan(k, lk, s.heads_kv, nb, s.head_dim, row->bn, &why)) return "k: " + why;
  if (!detail::attention_tma_plan(v, lk, s.heads_kv, nb, s.head_dim, kBlock, &why)) return "v: " + why;
  if (o.address % (2 * kElem) || o.seq_stride % 2 || o.head_stride % 2 || (s.batch > 1 && o.batch_stride % 2))
    return "o is stored in pairs: 4-byte aligned, even strides";
  return "";
}

void attention_wgmma_launch(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                            const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt, float scale,
                            const jit::Stream* stream, const AttentionVariant* forced) {
  const AttentionVariant& row = forced ? *forced : *attention_wgmma_row(s);
  AttentionWgmmaConfig cfg = attention_wgmma_config(q.dtype, row);
  cfg.windowed = opt.window_left >= 0 || (opt.window_right >= 0 && !opt.causal);
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (varlen) cfg = with_varlen(cfg);
  if (opt.softcap > 0.0f || opt.alibi_slopes) cfg = with_mods(cfg);
  const uint32_t bm = bm_of(cfg);
  const uint32_t tiles_m = (s.seqlen_q + bm - 1) / bm;
  const uint64_t items = uint64_t(tiles_m) * s.heads_q * s.batch;
  cfg.persistent = attention_wgmma_persistent(cfg, opt.causal, items, jit::device_info().sm_count);
  const uint32_t lq = varlen ? opt.total_q : s.seqlen_q, lk = varlen ? opt.total_k : s.seqlen_k, nb = varlen ? 1 : s.batch;
  const detail::AttentionTmaPlan pq = *detail::attention_tma_plan(q, lq, s.heads_q, nb, s.head_dim, bm, nullptr);
  const detail::AttentionTmaPlan pk = *detail::attention_tma_plan(k, lk, s.heads_kv, nb, s.head_dim, cfg.bn, nullptr);
  const detail::AttentionTmaPlan pv = *detail::attention_tma_plan(v, lk, s.heads_kv, nb, s.head_dim, kBlock, nullptr);
  AttentionWgmmaSignature sig(q.dtype, cfg.persistent);
  sig.q_map.host = jit::encode_tensor_map_tiled(pq.map);
  sig.k_map.host = jit::encode_tensor_map_tiled(pk.map);
  sig.v_map.host = jit::encode_tensor_map_tiled(pv.map);
  sig.q_order.host = pq.order;
  sig.k_order.host = pk.order;
  sig.v_order.host = pv.order;
  sig.o.host = o.address;
  sig.lse.host = opt.lse;
  sig.o_bs.host = varlen ? 0 : o.batch_stride, sig.o_ss.host = o.seq_stride, sig.o_hs.host = o.head_stride;
  sig.lse_bs.host = varlen ? 0 : uint64_t(s.heads_q) * s.seqlen_q;
  sig.lse_hs.host = varlen ? opt.total_q : s.seqlen_q;
  sig.cu_q.host = opt.cu_seqlens_q;
  sig.cu_k.host = opt.cu_seqlens_k;
  sig.sq.host = s.seqlen_q;
  sig.sk.host = s.seqlen_k;
  sig.group.host = s.heads_q / s.heads_kv;
  sig.window_left.host = opt.window_left;
  sig.window_right.host = opt.causal ? 0 : opt.window_right;
  sig.flags.host = (opt.lse ? kWgmmaLse : 0u) | (opt.alibi_slopes ? kWgmmaAlibi : 0u);
  sig.scale_log2.host = scale * kLog2e;
  sig.scale.host = scale;
  sig.softcap.host = opt.softcap;
  sig.alibi.host = opt.alibi_slopes;
  jit::Dim3 grid{tiles_m, s.heads_q, s.batch};
  if (cfg.persistent) {  // one block an SM (its shared memory), at most one an item
    if (items > 0xffffffffu) throw UsageError("", "attention", "q: more than 2^32 query tiles for the persistent form");
    sig.tiles_m.host = tiles_m, sig.heads.host = s.heads_q, sig.items.host = uint32_t(items);
    sig.counter.host = detail::attention_item_counter(stream);
    grid = {uint32_t(std::min<uint64_t>(items, jit::device_info().sm_count)), 1, 1};
    const bool uneven = opt.causal || opt.window_left >= 0 || opt.window_right >= 0;
    const uint64_t kv_bytes = 4ull * s.seqlen_k * s.head_dim / (s.heads_q / s.heads_kv);  // K and V, a pair's share
    sig.group_heads.host = detail::attention_item_group(tiles_m, uint64_t(s.heads_q) * s.batch, grid.x, kv_bytes,
                                                         jit::device_info().l2_bytes, uneven);
  }
  const kernel::PackedArgs args = kernel::pack(sig);
  attention_wgmma_family().get(cfg).launch_packed({.grid = grid,
                                                   .block = {kernel::WarpSpecialized::threads(consumers_of(cfg))},
                                                   .shared_bytes = cfg.shared_bytes(), .stream = stream},
                                                  args.data(), args.size());
}

}  // namespace kaio::ops
