// W4A16: Y = X . dequant(W) + bias, W 4-bit (GPTQ / AWQ style, ops/qmatmul.h), X and Y f16
// or bf16.
//
// Dequantisation, in registers, without a per-element conversion: a u32 word holds 8
// elements, element 2j in nibble j and 2j + 1 in nibble j + 4, so
//   ((q >> 4j) & 0x000f000f) | 0x64006400
// (one lop3 after the shift; and + or in the IR, fused by ptxas) is an f16 pair whose values
// are 1024 + v (1024 has a unit ulp: the nibble lands in the mantissa). One f16x2 sub of
// (1024 + zero) -- itself the bit pattern 0x6400 | zero -- gives v - zero exactly, and one
// f16x2 mul by the group's scale rounds once. bf16 uses 0x4300 (128 + v; a unit ulp for
// 7-bit mantissas). A word is 4 sub + 4 mul on pairs; the host decoder
// (dequantize_int4) computes the same single rounding.
//
// Two paths:
//   m > 16  (mma): 64 x 128 block tiles, BK = 64, 8 warps of 32 x 32 on mma.sync m16n8k16.
//           Each k-step the next step's A chunks (16-byte loads) and weight words (one u32
//           of 8 k per column, coalesced along n) are loaded into registers while the
//           tensor cores work on this one; then the words are dequantised into Bs[n][k]
//           (16-byte stores, one word's 8 k in one row) and ldmatrix feeds mma as in the
//           f16 engines (Bs is K-major: non-transposed ldmatrix gives B fragments).
//   m <= 16 (stream): bound by the weight bytes, so the few instructions per weight matter
//           (a CUDA-core form with f32 FMAs per weight issued ~5 per weight: compute-bound at
//           ~30-45% of copy). Tensor cores instead, with the m rows as the rows of an m16
//           tile: a block covers 32 columns, 16 warps split k into runs of consecutive
//           steps of 32 (a group's scales and zeros are unpacked once, at its first step;
//           unpacking them with every word cost ~20% of the loop's instructions). A thread
//           (t = lane % 4, g = lane / 4) reads one 16-byte vector per step: the words of
//           columns 4g .. 4g + 3 at word row 4 step + t, dequantised into A fragments as
//           they are (the product is W^T x^T: 16 columns of W as the mma's rows, the m
//           rows as its n). mma j of a word takes its pairs 2j and 2j + 1 as logical k
//           (2t, 2t + 1) and (2t + 8, 2t + 9), and the B fragment the activations of the
//           same k (one 16-byte load per row), so only the k order inside an mma is
//           permuted. A thread's copies go through its own cp.async ring in
//           shared memory (2-3 steps in flight without holding registers, no barrier: each
//           thread reads only what it copied); shared memory then adds the warps' sums.
//           Where registers allow, the MMAs take v - zero unscaled into a group's own f32
//           sums and the scales are applied to those once a group (exact products; no
//           pair multiply per weight). A persistent form (Int4Config::persistent, by
//           default at m 9-16 where the strips outnumber the SMs) runs one block an SM
//           over strips in turn, each thread's ring running on from a strip into the next.
// QKV: blockIdx.z picks the part (its weights, scales, zeros, bias, output and n).
#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/ir/layouts.h"
#include "kaio/jit/device.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/qmatmul_common.h"
#include "kaio/ops/qmatmul_int4_kernels.h"

namespace kaio::ops {

namespace {

using detail::Int4Config;
using ir::Scalar;
using ir::Value;

constexpr uint32_t kStreamRows[] = {1, 4, 8, 16};  // the streaming path's BM
constexpr uint32_t kBM = 64, kBN = 128, kBK = 64, kWM = 32, kWN = 32, kThreads = 256;
constexpr uint32_t kRow = kBK / 2 + 4;  // u32 (pairs) per shared row: 64 halves + 16 bytes of padding
constexpr uint32_t kStreamCols = 32;    // columns per streaming block
constexpr uint32_t kStreamThreads = 512;  // 16 warps: with the ring's 3 or 4 stages, 16-24 KB of weights in flight per block

// Parameters: x, m, k, log2(group), then per part q, y, n, scales, zeros, bias.
struct Int4Signature {
  kernel::Ptr x{"x", Scalar::U32, true};
  kernel::Param<uint32_t> m{"m"}, k{"k"}, gshift{"gshift"};
  detail::QPart p0, p1, p2;
  explicit Int4Signature(const Int4Config& c)
      : p0(0, true, Scalar::U32, c.dtype, c.dtype, true, c.dtype, c.bias, c.zeros),
        p1(1, c.parts >= 2, Scalar::U32, c.dtype, c.dtype, true, c.dtype, c.bias, c.zeros),
        p2(2, c.parts >= 3, Scalar::U32, c.dtype, c.dtype, true, c.dtype, c.bias, c.zeros) {}
  auto fields() { return std::tuple_cat(std::tie(x, m, k, gshift), p0.fields(), p1.fields(), p2.fields()); }
};

// The magic-number dequantisation of one word: 4 pairs (elements 2j, 2j + 1), each
// (v - zero) * scale rounded once. zm: the pair (magic + zero) as u32 bits; s2: {s, s}.
std::vector<Value> dequant_word(Value q, Value zm, Value s2, Scalar pair) {
  Value z2 = ir::bitcast(zm, pair);
  std::vector<Value> out;
  for (uint32_t j = 0; j < 4; ++j) out.push_back(detail::int4_pair(j ? q >> (4u * j) : q, z2, s2, pair));
  return out;
}

struct Part {  // this block's part, with the group's scale and zero of (word row, column)
  detail::QPartValues v;
  Value gshift;
  Scalar dtype;
  bool zeros;
  // The element index of column col's scale (and zero) at word row kr.
  Value group_index(Value kr, Value col) const {
    Value g = (kr * 8u) >> gshift;
    return ir::cast<uint64_t>(g) * ir::cast<uint64_t>(v.n) + ir::cast<uint64_t>(col);
  }
  // s2 (the pair {s, s}) and zm (u32 bits) from the loaded scale and zero (u8; invalid: 8).
  std::pair<Value, Value> group_from(ir::KernelBuilder& b, Value s, Value z) const {
    Value zu = z.valid() ? ir::cast<uint32_t>(z) : b.constant<uint32_t>(8u);
    return {ir::pack2(s, s), detail::int4_zero_magic(zu, dtype)};
  }
};

ir::Kernel build_mma(const Int4Config& c, ir::KernelBuilder& b, Int4Signature& sig, const Part& part) {
  const Scalar pair = c.dtype == Scalar::F16 ? Scalar::F16x2 : Scalar::BF16x2;
  const ir::MmaKind kind = c.dtype == Scalar::F16 ? ir::MmaKind::F16 : ir::MmaKind::BF16;
  const uint32_t mt = kWM / 16, nt = kWN / 8, warps_n = kBN / kWN;
  const detail::QPartValues& pv = part.v;
  Value X = sig.x.ir, m = sig.m.ir, k = sig.k.ir;
  Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  Value m0 = b.block_idx_y() * kBM, n0 = b.block_idx_x() * kBN;
  b.if_(n0 >= pv.n, [&] { b.return_(); });
  Value zero = b.constant<uint32_t>(0u);
  auto As = b.shared(Scalar::U32, kBM * kRow, 128);
  auto Bs = b.shared(Scalar::U32, kBN * kRow, 128);
  Value kp = k / 2u, kr_n = k / 8u;  // pairs per row of X, word rows of W
  constexpr uint32_t a_per = kBM * (kBK / 8) / kThreads, b_per = kBN * (kBK / 8) / kThreads;  // 2, 4
  auto a_regs = b.array<uint32_t>(4 * a_per, 0u);
  auto q_regs = b.array<uint32_t>(b_per, 0u);
  auto okb = b.array<uint32_t>(b_per, 0u);  // 1 where the word exists
  // the words' scales and zeros, loaded with them (not after the barrier, on the MMAs' path)
  auto zero_of = [&](Scalar t) { return b.constant(ir::Type::scalar(t), ir::Literal{ir::Literal::Int, 0, 0, 0}, "matmul_int4"); };
  auto s_regs = b.array(ir::Type::scalar(c.dtype), b_per, zero_of(c.dtype));
  auto z_regs = b.array(ir::Type::scalar(Scalar::U8), b_per, zero_of(Scalar::U8));
  // The next step's global data into registers: A chunk e of the thread is (row id / 8,
  // 8 halves at (id % 8) * 8), B word e is (word row id / BN, column id % BN).
  auto fetch = [&](Value s) {
    for (uint32_t e = 0; e < a_per; ++e) {
      Value id = tid + e * kThreads, r = m0 + id / 8u, kc = s * kBK + (id % 8u) * 8u;
      for (uint32_t i = 0; i < 4; ++i) a_regs[4 * e + i] = zero;
      b.if_(r < m && kc < k, [&] {
        std::vector<Value> v = ir::load_vec(X, ir::cast<uint64_t>(r) * ir::cast<uint64_t>(kp) + ir::cast<uint64_t>(kc / 2u), 4);
        for (uint32_t i = 0; i < 4; ++i) a_regs[4 * e + i] = v[i];
      });
    }
    for (uint32_t e = 0; e < b_per; ++e) {
      Value id = tid + e * kThreads, kr = s * (kBK / 8) + id / kBN, col = n0 + id % kBN;
      Value ok = kr < kr_n && col < pv.n;
      okb[e] = ir::select(ok, b.constant<uint32_t>(1u), zero);
      q_regs[e] = zero;
      b.if_(ok, [&] {
        q_regs[e] = Value(pv.w[ir::cast<uint64_t>(kr) * ir::cast<uint64_t>(pv.n) + ir::cast<uint64_t>(col)]);
        Value gi = part.group_index(kr, col);
        s_regs[e] = Value(pv.s[gi]);
        if (c.zeros) z_regs[e] = Value(pv.zeros[gi]);
      });
    }
  };
  // Registers into shared memory; the words dequantised on the way.
  auto stage = [&] {
    for (uint32_t e = 0; e < a_per; ++e) {
      Value id = tid + e * kThreads;
      std::vector<Value> v;
      for (uint32_t i = 0; i < 4; ++i) v.push_back(Value(a_regs[4 * e + i]));
      ir::store_vec(As, (id / 8u) * kRow + (id % 8u) * 4u, v);
    }
    for (uint32_t e = 0; e < b_per; ++e) {
      Value id = tid + e * kThreads, wr = id / kBN, cl = id % kBN;
      ir::Var out[4] = {b.var<uint32_t>(0u), b.var<uint32_t>(0u), b.var<uint32_t>(0u), b.var<uint32_t>(0u)};
      b.if_(Value(okb[e]) != 0u, [&] {
        auto [s2, zm] = part.group_from(b, Value(s_regs[e]), c.zeros ? Value(z_regs[e]) : Value());
        std::vector<Value> w = dequant_word(Value(q_regs[e]), zm, s2, pair);
        for (uint32_t j = 0; j < 4; ++j) out[j] = ir::bitcast(w[j], Scalar::U32);
      });
      ir::store_vec(Bs, cl * kRow + wr * 4u, {Value(out[0]), Value(out[1]), Value(out[2]), Value(out[3])});
    }
  };
  Value wm0 = (warp / warps_n) * kWM, wn0 = (warp % warps_n) * kWN;
  Value a_lane = (wm0 + lane % 16u) * kRow + (lane / 16u) * 4u;
  Value b_lane = (wn0 + (lane / 16u) * 8u + lane % 8u) * kRow + ((lane / 8u) % 2u) * 4u;
  auto acc = b.array<float>(mt * nt * 4, 0.0f);
  Value steps = (k + (kBK - 1)) / kBK;
  fetch(zero);
  b.for_(0u, steps, [&](Value s) {
    b.barrier();  // every warp is done with the previous step's tiles
    stage();
    b.barrier();
    b.if_(s + 1u < steps, [&] { fetch(s + 1u); });  // in flight under the MMAs
    for (uint32_t ks = 0; ks < kBK / 16; ++ks) {
      std::vector<std::vector<Value>> fa, fb;
      auto f16 = [&](std::vector<Value> v) {
        for (Value& x : v) x = ir::bitcast(x, pair);
        return v;
      };
      for (uint32_t mi = 0; mi < mt; ++mi) fa.push_back(f16(b.ldmatrix(As, a_lane + (mi * 16 * kRow + ks * 8), 4)));
      for (uint32_t ni = 0; ni < nt; ni += 2) {
        std::vector<Value> q = f16(b.ldmatrix(Bs, b_lane + (ni * 8 * kRow + ks * 8), 4));
        fb.push_back({q[0], q[1]});
        fb.push_back({q[2], q[3]});
      }
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
  });
  const ir::MmaShape& shape = ir::mma_shape(kind);
  const ir::Type out_t = ir::Type::scalar(c.dtype);
  for (uint32_t mi = 0; mi < mt; ++mi)
    for (uint32_t ni = 0; ni < nt; ++ni)
      for (uint32_t h = 0; h < 2; ++h) {
        Value row = m0 + wm0 + (ir::frag_row(shape.c, lane, 2 * h) + mi * 16);
        Value col = n0 + wn0 + (ir::frag_col(shape.c, lane, 2 * h) + ni * 8);
        b.if_(row < m && col < pv.n, [&] {  // n is a multiple of 8: col + 1 < n too
          std::vector<Value> v;
          for (uint32_t e = 0; e < 2; ++e) {
            Value f = Value(acc[4 * (mi * nt + ni) + 2 * h + e]);
            if (c.bias) f = f + ir::cast<float>(Value(pv.bias[col + e]));
            v.push_back(ir::cast(f, out_t));
          }
          ir::store_vec(pv.c, ir::cast<uint64_t>(row) * ir::cast<uint64_t>(pv.n) + ir::cast<uint64_t>(col), v);
        });
      }
  return b.build();
}

// The streaming path's per-thread stage: its words, activation rows, scales and zeros of one
// step (u32 words), and the ring's depth (the dynamic shared memory it takes).
struct StreamStage {
  uint32_t rows, zeros;  // activation row halves (1: m <= 8, 2: up to 16); 1 with zeros
  bool deep;             // Int4Config::deep
  uint32_t bm = 0, persistent = 0;  // Int4Config's: the persistent form's strips' sums follow the ring
  uint32_t words() const { return 4 + 4 * rows + 2 + zeros; }
  // 90 KB a block either way: two blocks per SM where 228 KB are (sm_90), which measured
  // 2-16% faster than one block of 5-6 stages on grids of more blocks than SMs
  // (bench/NOTES.md), and so were 1024-thread blocks (one per SM, 3 stages). Where the grid
  // is one block an SM anyway, 8 stages (m <= 8) and 5 (m = 16) measured 2-7% faster than 4
  // and 3; 10 and 7 no faster than those.
  uint32_t stages() const { return rows > 1 ? (deep ? 5 : 3) : (deep ? 8 : 4); }
  uint32_t ring_words() const { return stages() * kStreamThreads * words(); }
  // The persistent form's sums of a strip, [parity][warp][row < bm][column], two strips' worth
  // (a strip's are added while the next strip's steps run).
  uint32_t sums_words() const { return persistent ? 2 * (kStreamThreads / 32) * bm * kStreamCols : 0; }
  uint32_t bytes() const { return (ring_words() + sums_words()) * 4; }
};
StreamStage stream_stage(const Int4Config& c) {
  return {c.bm > 8 ? 2u : 1u, c.zeros ? 1u : 0u, c.deep, c.bm, c.persistent ? 1u : 0u};
}
// The streaming kernels with registers to spare for the scales on the f32 sums and f16's
// -(64 + zero) pairs: all but m = 16 under the 64-register cap (two_per_sm is only ever m = 16).
bool roomy(const Int4Config& c) { return c.bm != 0 && !c.two_per_sm; }

ir::Kernel build_stream(const Int4Config& c, ir::KernelBuilder& b, Int4Signature& sig, const Part& part) {
  const Scalar pair = c.dtype == Scalar::F16 ? Scalar::F16x2 : Scalar::BF16x2;
  const ir::MmaKind kind = c.dtype == Scalar::F16 ? ir::MmaKind::F16 : ir::MmaKind::BF16;
  const uint32_t BM = c.bm, T = kStreamThreads, warps = T / 32;
  const StreamStage ss = stream_stage(c);
  const uint32_t S = ss.stages(), W = ss.words();
  const detail::QPartValues& pv = part.v;
  Value X = sig.x.ir, m = sig.m.ir, k = sig.k.ir;
  Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  Value n0 = b.block_idx_x() * kStreamCols;
  const bool persist = c.persistent;
  // Launched to overlap the kernel before it (programmatic dependent launch): the blocks
  // become resident while that kernel's last blocks run, and wait for it before touching
  // memory; the next kernel may do the same with this one.
  b.launch_dependents();
  b.if_(n0 >= pv.n, [&] { b.return_(); });
  b.grid_dependency_wait();
  // Fragment coordinates: t picks the word row of a step, g the 4 columns (and the A rows g
  // and g + 8).
  Value t = lane % 4u, g = lane / 4u;
  // n and col0 are multiples of 4: all 4 columns exist, or none (then the strip's first 4 are read)
  auto col_of = [&](Value strip0) {
    Value col0 = strip0 + g * 4u;
    return ir::select(col0 < pv.n, col0, strip0);
  };
  Value col_c = col_of(n0);
  Value kp = k / 2u, steps = k / 32u;               // k is a multiple of the group (>= 32)
  Value zero = b.constant<uint32_t>(0u);
  Value ring = b.dynamic_shared(Scalar::U32, 16), ring16 = b.dynamic_shared(c.dtype, 16), ring8 = b.dynamic_shared(Scalar::U8, 16);
  // A stage is [part][thread slot] (u32 words): the part at part_words * T, and in it this
  // thread's slot (its words, a multiple of the part's width per thread).
  auto at = [&](Value stage, uint32_t part_words, Value slot) { return stage * (T * W) + (part_words * T) + slot; };
  const uint32_t q_at = 0, x_at = 4, s_at = 4 + 4 * ss.rows, z_at = s_at + 2;
  // The words' slots in lane order (t, g), not (g, t): the eight lanes that copy one 128-byte
  // line of W (word row t, the block's 32 columns) then write one 128-byte line of shared
  // memory, and the L2 sees that line in one request. In lane order the line's pieces went out
  // with four different groups of lanes, a request of one sector each (the decode kernel's
  // padded rows measured the same effect: bench/NOTES.md). The other parts in thread order.
  const Value q_slot = (warp * 32u + t * 8u + g) * 4u, x_slot = tid * 4u, s_slot = tid * 2u, z_slot = tid;
  // This warp's steps: a run of consecutive ones, [first, first + count), so that it meets
  // each of its groups in one piece and scales its sums once a group.
  Value first, count;
  if (persist) {  // every warp a run (the call has k >= 16 steps): each one meets every strip's barrier
    first = (warp * steps) / warps;
    count = ((warp + 1u) * steps) / warps - first;
  } else {
    Value per = (steps + (warps - 1)) / warps;
    first = ir::min(warp * per, steps);
    count = ir::min(per, steps - first);
  }
  // The persistent form: this block's strips (blockIdx.x, + gridDim.x, ...; the launch gives
  // every block one at least), the strip stride in columns, and the steps of all of them.
  Value total = count, stride;
  if (persist) {
    Value grid = b.grid_dim_x();
    Value strips = (pv.n + (kStreamCols - 1)) / kStreamCols;
    total = (strips - b.block_idx_x() + grid - 1u) / grid * count;
    stride = grid * kStreamCols;
  }
  Value gmask = (b.constant<uint32_t>(1u) << (part.gshift - 5u)) - 1u;  // steps per group, less one
  // The sources of this thread's next copy, advanced by one step (4 word rows) after each.
  // 32-bit element offsets (one IMAD.WIDE an address, not a 64-bit multiply-add): the launch
  // takes this path only where every offset fits (run: offsets_fit).
  Value kr0 = first * 4u + t;  // the first step's word row
  ir::Var w_off = b.var<uint32_t>(kr0 * pv.n + col_c);
  // The persistent form's copy side: the step of the run the next copy takes, and its strip
  // (first column and this thread's columns).
  std::optional<ir::Var> c_step, c_n0, c_col;
  if (persist) c_step.emplace(b.var<uint32_t>(0u)), c_n0.emplace(b.var<uint32_t>(n0)), c_col.emplace(b.var<uint32_t>(col_c));
  // A row g + 8h: its 8 activations of the word row; zeros past m (they add nothing). One
  // running offset, row g's (row 0's past m), and row g + 8's a fixed step on (none past m:
  // those copies read 0 bytes from row g's address): a register less across the loop.
  ir::Var x_off = b.var<uint32_t>(ir::select(g < m, g, zero) * kp + kr0 * 4u);
  std::vector<Value> x_bytes, x_step;
  for (uint32_t h = 0; h < ss.rows; ++h) {
    Value ok = g + 8u * h < m;
    x_bytes.push_back(ir::select(ok, b.constant<uint32_t>(16u), zero));
    if (h) x_step.push_back(ir::select(ok, kp * (8u * h), zero));
  }
  Value w_step = pv.n * 4u;
  // Step `issued` of this warp's run into `stage`: nothing past the last (an empty group).
  // The scales and zeros only where the step starts a group (or the warp's run).
  auto copy = [&](Value stage, Value issued) {
    b.if_(issued < total, [&] {
      b.cp_async(ring, at(stage, q_at, q_slot), pv.w, w_off.get(), 16, ir::CacheHint::Global);
      for (uint32_t h = 0; h < ss.rows; ++h)
        b.cp_async(ring, at(stage, x_at + 4 * h, x_slot), X, h ? x_off.get() + x_step[h - 1] : x_off.get(), 16, ir::CacheHint::Global,
                   x_bytes[h]);
      Value run_step = persist ? c_step->get() : issued;
      Value step = first + run_step;
      b.if_((step & gmask) == 0u || run_step == 0u, [&] {
        Value g_off = part.group_index(step * 4u, persist ? c_col->get() : col_c);
        // (cp.async takes dst and src of one type: the ring's f16 / bf16 and u8 views)
        b.cp_async(ring16, at(stage, s_at, s_slot) * 2u, pv.s, g_off, 8);
        if (c.zeros) b.cp_async(ring8, at(stage, z_at, z_slot) * 4u, pv.zeros, g_off, 4);
      });
    });
    b.cp_async_commit_group();
    w_off = w_off.get() + w_step;
    x_off = x_off.get() + 16u;
    if (persist) {  // past the run's last step: the same run of the next strip
      *c_step = c_step->get() + 1u;
      b.if_(c_step->get() == count, [&] {
        *c_step = b.constant<uint32_t>(0u);
        *c_n0 = c_n0->get() + stride;
        *c_col = col_of(c_n0->get());
        w_off = kr0 * pv.n + c_col->get();
        x_off = x_off.get() - count * 16u;
      });
    }
  };
  // W^T . x^T: the weights are the A operand (rows: 16 columns of W, k), the activations B
  // (k x the m rows as the mma's n = 8, twice for m > 8), so that A needs no zero registers.
  // Tile i: A rows g and g + 8 are this thread's columns 2i and 2i + 1 (n0 + 4g + 2i + {0, 1});
  // acc[(i * rows + h) * 4 + e]: column 4g + 2i + e / 2, activation row 8h + 2t + e % 2.
  // A group's scales and zeros are unpacked once, at its first step (a warp's steps are
  // consecutive), not with every word.
  auto acc = b.array<float>(8 * ss.rows, 0.0f);
  // Where the registers allow it (all but m = 16 under the 64-register cap), the scale goes on
  // the f32 sums once a group, not on every weight pair: the MMAs take v - zero (small
  // integers, exact in 16 bits) into the group's own sums accg, and at the group's end
  // acc += scale * accg (one FFMA an accumulator). That takes the 16 pair multiplies of a step
  // out of the loop for 8 FFMAs a group, and the products are exact before the f32 sums (no
  // rounding of each weight to 16 bits: a unit row of X still gives the decoder's value, since
  // (v - zero) * scale is exact in f32 and rounds once to the output).
  const bool fold = roomy(c);
  auto accg = b.array<float>(fold ? 8 * ss.rows : 1, 0.0f);
  auto sf = b.array<float>(fold ? 4 : 1, 0.0f);  // the group's scales of the thread's 4 columns
  auto flush = [&] {  // acc += scale * accg, accg = 0: acc[(i * rows + h) * 4 + e] is column 2i + e / 2
    for (uint32_t i = 0; i < 2; ++i)
      for (uint32_t h = 0; h < ss.rows; ++h)
        for (uint32_t e = 0; e < 4; ++e) {
          const uint32_t at_ = 4 * (i * ss.rows + h) + e;
          acc[at_] = ir::fma(Value(sf[2 * i + e / 2]), Value(accg[at_]), Value(acc[at_]));
          accg[at_] = b.constant<float>(0.0f);
        }
  };
  auto s2 = b.array<uint32_t>(fold ? 1 : 4, 0u);  // else the group's {s, s} of the thread's 4 columns (bits)
  auto z2 = b.array<uint32_t>(4, 0u);  // and their (magic + zero) pairs
  // f16: the odd pairs of a word go through int4_pair_high_f16 with -(64 + zero) pairs, so a
  // word takes one shift instead of three (q >> 8 serves pairs 2 and 3).
  const bool high = c.dtype == Scalar::F16 && roomy(c);  // m = 16 at 64 registers: no room for zh
  auto zh = b.array<uint32_t>(high ? 4 : 1, 0u);
  Value sixteenth = ir::bitcast(b.constant<uint32_t>(0x2c002c00u), pair);
  // The magic pair in a register ptxas cannot fold (gshift is 5..7): the and and the or of
  // a pair are then one LOP3.
  Value magic = (part.gshift >> 8u) | (c.dtype == Scalar::F16 ? 0x64006400u : 0x43004300u);
  // The persistent form's consumer side: the step of the run this thread computes, and its
  // strip's first column and sums' parity.
  std::optional<ir::Var> b_step, b_n0, parity;
  if (persist) b_step.emplace(b.var<uint32_t>(0u)), b_n0.emplace(b.var<uint32_t>(n0)), parity.emplace(b.var<uint32_t>(0u));
  Value sums;
  if (persist) sums = b.dynamic_shared(Scalar::F32, 16);
  // The sums of the block's warps for its strip at column n0s, added (in warp order), plus
  // the bias, to the outputs; rows: the rows of sums a warp holds (16, or bm in the
  // persistent form's compact layout); base: where its [warp][row][column] begins (invalid: at 0).
  auto reduce_out = [&](Value n0s, uint32_t rows, Value base) {
    for (uint32_t e = 0; e < (BM * kStreamCols + T - 1) / T; ++e) {
      Value id = tid + e * T, r = id / kStreamCols, cl = id % kStreamCols, col = n0s + cl;
      b.if_(r < ir::min(m, BM) && col < pv.n, [&] {
        ir::Var sum = b.var<float>(0.0f);
        for (uint32_t w = 0; w < warps; ++w) {
          Value at = (w * rows + r) * kStreamCols + cl;
          sum = Value(sum) + Value(sums[base.valid() ? base + at : at]);
        }
        Value f = sum;
        if (c.bias) f = f + ir::cast<float>(Value(pv.bias[col]));
        pv.c[ir::cast<uint64_t>(r) * ir::cast<uint64_t>(pv.n) + ir::cast<uint64_t>(col)] = ir::cast(f, ir::Type::scalar(c.dtype));
      });
    }
  };
  // The persistent form at the end of a strip's run: the warp's sums into the strip's parity
  // of the sums (rows < bm only), the block's barrier, then the strip's outputs; the sums
  // start again from zero. The parity alternates so that a strip's sums are not overwritten
  // before every thread has added them: the next strip's barrier comes after that.
  const uint32_t sums_at = ss.ring_words();
  auto strip_end = [&] {
    if (fold) {
      flush();
      // The next strip's first step flushes its empty sums at these scales: zeros, so that
      // a non-finite scale of this strip's last group cannot reach another column (inf * 0).
      for (uint32_t i = 0; i < 4; ++i) sf[i] = b.constant<float>(0.0f);
    }
    Value base = sums_at + parity->get() * (warps * BM * kStreamCols);
    for (uint32_t i = 0; i < 2; ++i)
      for (uint32_t h = 0; h < ss.rows; ++h)
        for (uint32_t e = 0; e < 4; ++e) {
          Value row = t * 2u + (8 * h + e % 2), col = g * 4u + (2 * i + e / 2);
          const uint32_t a = 4 * (i * ss.rows + h) + e;
          b.if_(row < BM, [&] { sums[base + (warp * BM + row) * kStreamCols + col] = Value(acc[a]); });
          acc[a] = b.constant<float>(0.0f);
        }
    // Each warp arrives from its own trip of the ring (a run's last step falls on any of its
    // unrolled stages, so the warps reach different copies of this barrier): a named barrier
    // counting the block's threads, in its unaligned form (bar.sync, aligned, promises that
    // every thread runs the same instruction).
    b.barrier_unaligned(1, T);
    reduce_out(b_n0->get(), BM, base);
    *parity = parity->get() ^ 1u;
    *b_n0 = b_n0->get() + stride;
  };
  // Each thread's own ring of S stages (kernel::ThreadRing): no barrier per step, S - 1
  // steps in flight without holding registers.
  kernel::ThreadRing ring_of_thread(b, S);
  ring_of_thread.pipeline(total, copy, [&](Value st, Value it_flat, const std::function<void()>& refill) {
    Value it = persist ? b_step->get() : it_flat;  // the step of the run
    std::vector<Value> q = ir::load_vec(ring, at(st, q_at, q_slot), 4);
    std::vector<std::vector<Value>> xs;
    for (uint32_t h = 0; h < ss.rows; ++h) {
      std::vector<Value> xp;
      for (Value v : ir::load_vec(ring, at(st, x_at + 4 * h, x_slot), 4)) xp.push_back(ir::bitcast(v, pair));
      xs.push_back(xp);
    }
    b.if_(((first + it) & gmask) == 0u || it == 0u, [&] {
      if (fold) flush();  // the group before, at its scales (zeros at the run's first step)
      std::vector<Value> sw = ir::load_vec(ring, at(st, s_at, s_slot), 2);
      Value zw = c.zeros ? Value(ring[at(st, z_at, z_slot)]) : Value();
      for (uint32_t i = 0; i < 4; ++i) {
        if (fold) {
          Value sp = ir::bitcast(sw[i / 2], pair);
          sf[i] = ir::cast<float>(i % 2 ? ir::unpack_hi(sp) : ir::unpack_lo(sp));
        } else {
          Value half = i % 2 ? sw[i / 2] >> 16u : sw[i / 2] & 0xffffu;  // column i's scale, as f16 / bf16 bits
          s2[i] = half | (half << 16u);
        }
        Value zu = c.zeros ? (zw >> (8u * i)) & 0xffu : b.constant<uint32_t>(8u);
        z2[i] = detail::int4_zero_magic(zu, c.dtype);
        if (high) zh[i] = detail::int4_zero_high_f16(zu);
      }
    });
    refill();  // this thread has read its stage
    std::vector<std::vector<Value>> w(4);
    for (uint32_t i = 0; i < 4; ++i) {
      Value sc = fold ? Value() : ir::bitcast(Value(s2[i]), pair), zz = ir::bitcast(Value(z2[i]), pair);
      if (high) {
        Value q8 = q[i] >> 8u;
        Value zhi = ir::bitcast(Value(zh[i]), pair);
        w[i] = {detail::int4_pair(q[i], zz, sc, pair, magic), detail::int4_pair_high_f16(q[i], zhi, sc, sixteenth, magic),
                detail::int4_pair(q8, zz, sc, pair, magic), detail::int4_pair_high_f16(q8, zhi, sc, sixteenth, magic)};
      } else {
        for (uint32_t j = 0; j < 4; ++j) w[i].push_back(detail::int4_pair(j ? q[i] >> (4u * j) : q[i], zz, sc, pair, magic));
      }
    }
    // mma jj takes the words' pairs 2jj and 2jj + 1 as logical k (2t, 2t + 1) and (2t + 8,
    // 2t + 9), and B the activations of the same k: only the k order inside an mma is permuted.
    for (uint32_t i = 0; i < 2; ++i)
      for (uint32_t jj = 0; jj < 2; ++jj)
        for (uint32_t h = 0; h < ss.rows; ++h)
          b.mma_sync(kind, (fold ? accg : acc).slice(4 * (i * ss.rows + h), 4), {w[2 * i][2 * jj], w[2 * i + 1][2 * jj], w[2 * i][2 * jj + 1], w[2 * i + 1][2 * jj + 1]},
                     {xs[h][2 * jj], xs[h][2 * jj + 1]});
    if (persist) {
      *b_step = b_step->get() + 1u;
      b.if_(b_step->get() == count, [&] {
        strip_end();
        *b_step = b.constant<uint32_t>(0u);
      });
    }
  });
  if (persist) return b.build();  // every strip's outputs are written
  if (fold) flush();  // the run's last group
  b.barrier();  // every thread is done with the ring: its first words hold the warps' sums
  // The warps' k ranges added in shared memory: sums[warp][activation row][column of the block].
  sums = b.dynamic_shared(Scalar::F32, 16);
  for (uint32_t i = 0; i < 2; ++i)
    for (uint32_t h = 0; h < ss.rows; ++h)
      for (uint32_t e = 0; e < 4; ++e) {
        Value row = t * 2u + (8 * h + e % 2), col = g * 4u + (2 * i + e / 2);
        sums[(warp * 16u + row) * kStreamCols + col] = Value(acc[4 * (i * ss.rows + h) + e]);
      }
  b.barrier();
  reduce_out(n0, 16, Value());
  return b.build();
}

ir::Kernel build(const Int4Config& c) {
  if (c.bx) return detail::build_int4_wgmma(c);
  ir::KernelBuilder b(c.str());
  // Streaming: two blocks an SM where registers allow it without spills. At m <= 8 that
  // costs no spill (61-64 registers; the deep ring keeps the cap too: uncapped, 72-82, it
  // measured 1-3% slower); at m = 16 the cap (80 -> 64, before the uncapped form took the
  // scales on its sums at 96-108) measured 8-10% faster on grids of 344-448 blocks and 3-5%
  // slower on 128 (one block an SM either way), so it is a config (two_per_sm) the launch
  // picks by the grid.
  // The persistent form is one block an SM by its shared memory, and under the cap its f16
  // kernels spilled (8 bytes): uncapped.
  b.launch_bounds(c.bm ? kStreamThreads : kThreads, c.bm && (c.bm <= 8 || c.two_per_sm) && !c.persistent ? 2u : 0u);
  Int4Signature sig(c);
  kernel::declare(b, sig);
  const Part part{detail::select_part(b, c.parts, sig.p0, sig.p1, sig.p2), sig.gshift.ir, c.dtype, c.zeros};
  return c.bm ? build_stream(c, b, sig, part) : build_mma(c, b, sig, part);
}

std::vector<Int4Config> declared() {
  std::vector<Int4Config> out;
  for (Scalar d : {Scalar::F16, Scalar::BF16})
    for (uint32_t bm : {0u, 1u, 4u, 8u, 16u})
      for (bool z : {false, true}) {
        out.push_back({bm, d, z, false, 1});
        if (bm == 16) out.push_back({bm, d, z, false, 1, 0, true});
        if (bm) out.push_back({bm, d, z, false, 1, 0, false, true});
        if (bm) out.push_back({bm, d, z, false, 1, 0, false, true, true});
      }
  out.push_back({0, Scalar::F16, true, true, 3});
  out.push_back({1, Scalar::F16, true, true, 3});
  out.push_back({1, Scalar::F16, true, true, 3, 0, false, true});
  for (Scalar d : {Scalar::F16, Scalar::BF16})  // the Hopper path (sm_90a)
    for (uint32_t bx : {128u, 256u})
      for (bool z : {false, true}) out.push_back({0, d, z, false, 1, bx});
  out.push_back({0, Scalar::F16, true, true, 1, 128});
  return out;
}

jit::Family<Int4Config>& family() {
  static jit::Family<Int4Config> f("matmul_int4", [](const Int4Config& c) { return build(c); }, declared());
  return f;
}

void check_weights(const char* op, const Int4Weights& w, uint32_t k) {
  if (w.group != 32 && w.group != 64 && w.group != 128)
    throw UsageError("", op, "group: 32, 64 or 128, got " + std::to_string(w.group));
  if (w.k != k) throw UsageError("", op, "w.k: every part has the same k");
  if (k == 0 || k % w.group) throw UsageError("", op, "w.k: a positive multiple of the group (" + std::to_string(w.group) + "), got " + std::to_string(k));
  if (w.n == 0 || w.n % 8) throw UsageError("", op, "w.n: a positive multiple of 8, got " + std::to_string(w.n));
  detail::check_aligned(op, "w.q", w.q);
  detail::check_aligned(op, "w.scales", w.scales);
  detail::check_aligned(op, "w.zeros", w.zeros);
  if (!w.scales) throw UsageError("", op, "w.scales: required");
}

void run(const char* op, uint64_t x, const Int4Part* parts, uint32_t nparts, uint32_t m, Scalar dtype, const jit::Stream* stream) {
  if (dtype != Scalar::F16 && dtype != Scalar::BF16)
    throw UsageError("", op, std::string("dtype: f16 or bf16, not ") + ir::scalar_name(dtype));
  detail::check_aligned(op, "x", x);
  const uint32_t k = parts[0].w.k, group = parts[0].w.group;
  Int4Config c{0, dtype, parts[0].w.zeros != 0, parts[0].bias != 0, nparts};
  uint32_t nmax = 0;
  for (uint32_t i = 0; i < nparts; ++i) {
    check_weights(op, parts[i].w, k);
    if (parts[i].w.group != group) throw UsageError("", op, "w.group: every part has the same group");
    if ((parts[i].w.zeros != 0) != c.zeros || (parts[i].bias != 0) != c.bias)
      throw UsageError("", op, "parts: every part has zeros and bias, or none has");
    detail::check_aligned(op, "y", parts[i].y);
    nmax = std::max(nmax, parts[i].w.n);
  }
  if (m == 0) return;
  bool n16 = true;  // zero points' tensor maps on the Hopper path need rows of 16 bytes
  for (uint32_t i = 0; i < nparts; ++i) n16 = n16 && parts[i].w.n % 16 == 0;
  if (detail::int4_wgmma_takes(m, !c.zeros || n16)) {
    // One launch per part: at m > 16 a launch is microseconds beside the product, and the
    // wgmma kernel is 5x the rate of the mma one that would take all three at once.
    for (uint32_t i = 0; i < nparts; ++i) {
      Int4Config ci = c;
      ci.parts = 1;
      ci.bx = detail::int4_wgmma_rows(m, parts[i].w.n, jit::device_info().sm_count);
      detail::launch_int4_wgmma(family().get(ci), ci, x, parts[i].w, parts[i].y, m, parts[i].bias, stream);
    }
    return;
  }
  c.bm = detail::int4_stream_rows(m, k, nmax);
  c.two_per_sm = detail::int4_stream_two_per_sm(c.bm, nmax, nparts);
  c.deep = detail::int4_stream_deep(c.bm, nmax, nparts);
  const uint32_t persistent_blocks = detail::int4_stream_persistent(c.bm, k, nmax, nparts);
  if (persistent_blocks) c.deep = c.persistent = true, c.two_per_sm = false;  // one block an SM
  Int4Signature sig(c);
  sig.x.host = x;
  sig.m.host = m;
  sig.k.host = k;
  sig.gshift.host = group == 32 ? 5 : group == 64 ? 6 : 7;
  detail::QPart* ps[3] = {&sig.p0, &sig.p1, &sig.p2};
  for (uint32_t i = 0; i < nparts; ++i) {
    ps[i]->w.host = parts[i].w.q;
    ps[i]->c.host = parts[i].y;
    ps[i]->n.host = parts[i].w.n;
    ps[i]->s.host = parts[i].w.scales;
    ps[i]->zeros.host = parts[i].w.zeros;
    ps[i]->bias.host = parts[i].bias;
  }
  const kernel::PackedArgs args = kernel::pack(sig);
  jit::LaunchConfig lc{.block = {c.bm ? kStreamThreads : kThreads}, .shared_bytes = c.bm ? stream_stage(c).bytes() : 0u,
                       .stream = stream};
  lc.grid = c.bm ? jit::Dim3{persistent_blocks ? persistent_blocks : (nmax + kStreamCols - 1) / kStreamCols, 1, nparts}
                 : jit::Dim3{(nmax + kBN - 1) / kBN, (m + kBM - 1) / kBM, nparts};
  // The streaming blocks overlap the kernel before them where the grid is more than one
  // block per SM (4096 x 11008: 7% less time per call at m = 1 on the H200), and with the
  // deep ring, whose shared memory lets one block an SM only. With one 90 KB block per SM or
  // fewer, blocks made resident early landed two to an SM and the call took longer (4096 x
  // 4096 m = 1: 11.1 us against 9.1, bench/NOTES.md).
  lc.overlap_previous = c.bm != 0 && (c.deep || uint64_t(lc.grid.x) * lc.grid.z > jit::device_info().sm_count);
  family().get(c).launch_packed(lc, args.data(), args.size());
}

}  // namespace

namespace detail {

uint32_t int4_stream_rows(uint32_t m, uint32_t k, uint32_t n_max) {
  // The streaming kernel's offsets are 32-bit: the words of every part (k / 8 rows of n, and
  // the step past the last) and the activations' (16 rows of k / 2 words, and a step more).
  // Beyond that (weights of 16 GB) the mma path takes the call.
  const bool offsets_fit = uint64_t(k / 8 + 4) * n_max < (uint64_t(1) << 32) && uint64_t(k) * 8 + 64 < (uint64_t(1) << 32);
  for (uint32_t bm : kStreamRows)
    if (offsets_fit && m <= bm) return bm;
  return 0;
}

bool int4_stream_two_per_sm(uint32_t bm, uint32_t n_max, uint32_t parts) {
  return bm == 16 && (n_max + kStreamCols - 1) / kStreamCols * parts > jit::device_info().sm_count;
}

namespace {
thread_local int force_deep = -1;  // set_int4_stream_deep
}

void set_int4_stream_deep(int deep) { force_deep = deep; }

bool int4_stream_deep(uint32_t bm, uint32_t n_max, uint32_t parts) {
  if (bm == 0 || force_deep == 0) return false;
  const jit::DeviceInfo& d = jit::device_info();
  Int4Config c{bm};
  c.zeros = true;  // the larger stage
  c.deep = true;
  if (stream_stage(c).bytes() > d.smem_per_block_optin) return false;
  return force_deep == 1 || uint64_t(n_max + kStreamCols - 1) / kStreamCols * parts <= d.sm_count;
}

namespace {
thread_local int force_persistent = -1;  // set_int4_stream_persistent
}

void set_int4_stream_persistent(int blocks) { force_persistent = blocks; }

uint32_t int4_stream_persistent(uint32_t bm, uint32_t k, uint32_t n_max, uint32_t parts) {
  if (bm == 0 || force_persistent == 0 || parts != 1 || k / 32 < kStreamThreads / 32) return 0;
  // By default only at m 9-16 where the strips outnumber the SMs: measured 3-5% ahead of the
  // grid of strips there (4096 x 11008 and 4096 x 14336, H200, bench/NOTES.md), behind it at
  // m <= 8 and where the strips fit one wave.
  if (force_persistent < 0 && !int4_stream_two_per_sm(bm, n_max, parts)) return 0;
  const jit::DeviceInfo& d = jit::device_info();
  Int4Config c{bm};
  c.zeros = true;  // the larger stage
  c.deep = c.persistent = true;
  if (stream_stage(c).bytes() > d.smem_per_block_optin) return 0;
  const uint32_t strips = (n_max + kStreamCols - 1) / kStreamCols;
  return std::min({strips, d.sm_count, force_persistent < 0 ? d.sm_count : uint32_t(force_persistent)});
}

bool int4_exact_products(uint32_t m, uint32_t k, uint32_t n_max, uint32_t parts) {
  Int4Config c{int4_stream_rows(m, k, n_max)};
  c.two_per_sm = int4_stream_two_per_sm(c.bm, n_max, parts) && !int4_stream_persistent(c.bm, k, n_max, parts);
  return roomy(c);  // the kernel's own rule (build_stream: fold)
}

}  // namespace detail

void matmul_int4(uint64_t x, const Int4Weights& w, uint64_t y, uint32_t m, Scalar dtype, uint64_t bias, const jit::Stream* stream) {
  const Int4Part part{w, y, bias};
  run("matmul_int4", x, &part, 1, m, dtype, stream);
}

void matmul_int4_qkv(uint64_t x, const Int4Part (&parts)[3], uint32_t m, Scalar dtype, const jit::Stream* stream) {
  run("matmul_int4_qkv", x, parts, 3, m, dtype, stream);
}

jit::FamilyBase& matmul_int4_family() { return family(); }

}  // namespace kaio::ops
