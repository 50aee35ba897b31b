// W8A8: C = scale_a * scale_b * (A . B^T) + bias on tensor cores, mma.sync m16n8k32 s8 ->
// s32 (sm_80+); on sm_90a also a wgmma tile (build_wgmma below), chosen by Int8Problem::tile.
//
// A (m x k) and B (n x k) are both K-major, so both are staged the same way: BM (BN) rows
// of BK = 64 bytes, padded to 80 bytes (the 8 rows of an ldmatrix start in different
// banks), brought in by cp.async in 16-byte chunks through a CpAsyncRing of S stages
// (zero-filled past m, n and k). ldmatrix (non-transposed, 16-bit halves) hands each lane
// 4 consecutive bytes of one row, which is exactly the s8 fragment of m16n8k32 (A: row g,
// bytes 4t..4t+3; B: column g, the same bytes of k): x4 loads give A's 4 registers of one
// m16 tile and B's 2 registers of two n8 tiles. The s32 accumulators leave through the
// epilogue: raw (s32 out), or scaled in f32 (scale_a of the row, scale_b of the column,
// per tensor or per vector), plus bias, rounded once to f16 / bf16 / f32. Pairs of
// neighbouring columns are one vector store.
//
// QKV (parts = 3): blockIdx.z picks the part's B, C, n, scale_b and bias; blocks past
// that part's n leave at once.
#include <algorithm>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/ir/layouts.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/kernel/warp_specialized.h"
#include "kaio/ops/kernel/wgmma.h"
#include "kaio/ops/matmul_common.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/qmatmul_common.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
using ir::Value;

// The block tiles: BM x BN, warp tiles WM x WN, stages. BK is 64 bytes (two mma k-steps).
struct Int8Tile {
  const char* name;
  uint32_t bm, bn, wm, wn, stages;
  bool wgmma = false;  // Hopper: TMA + wgmma (wm x wn: a consumer warpgroup's 64 x BN)
  uint32_t threads() const { return wgmma ? 128 * (bm / wm + 1) : (bm / wm) * (bn / wn) * 32; }
};
constexpr Int8Tile kTiles[] = {
    {"128x128_w64x32_s3", 128, 128, 64, 32, 3},
    {"64x64_w32x32_s3", 64, 64, 32, 32, 3},
    {"32x64_w32x16_s4", 32, 64, 32, 16, 4},
    // sm_90a, chosen by pick_tile on a Hopper device: a producer warpgroup's TMA loads into a ring of
    // 4 stages of 128 bytes of k, two consumer warpgroups of 64 x 128 on wgmma m64n128k32 s8.
    {"wgmma_128x128_s4", 128, 128, 64, 128, 4, true},
};
constexpr uint32_t kMmaTiles = 3;  // the mma.sync tiles; the wgmma tile follows them
constexpr uint32_t kBK = 64;                    // bytes of k per stage
constexpr uint32_t kRow = kBK / 4 + 4;          // u32 per shared row: 64 bytes + 16 of padding
constexpr uint32_t kChunks = kBK / 16;          // 16-byte chunks per row

struct Int8Config {
  uint32_t tile = 0;
  Scalar out = Scalar::F16;
  uint8_t sa = 0, sb = 0;  // 0: none, 1: per tensor, 2: per row (A) / column (B)
  bool bias = false;
  uint32_t parts = 1;
  auto fields() const { return std::tie(tile, out, sa, sb, bias, parts); }
  std::string str() const {
    return std::string("matmul_int8_") + kTiles[tile].name + "_" + ir::scalar_name(out) + "_sa" + std::to_string(sa) + "_sb" +
           std::to_string(sb) + (bias ? "_bias" : "") + (parts > 1 ? "_qkv" : "");
  }
};

uint32_t shared_bytes(const Int8Tile& t) {
  // wgmma: 128-byte swizzled rows of k, then the ring's 2 mbarriers per stage
  return t.wgmma ? (t.bm + t.bn) * kernel::kSwizzleBytes * t.stages + 16 * t.stages : (t.bm + t.bn) * kRow * 4 * t.stages;
}

// Parameters: A, m, k, scale_a, then per part B, C, n, scale_b, bias.
struct Int8Signature {
  kernel::Ptr a{"a", Scalar::U32, true};
  kernel::Param<uint32_t> m{"m"}, k{"k"};
  kernel::Opt<kernel::Ptr> sa{{"scale_a", Scalar::F32, true}};
  detail::QPart p0, p1, p2;
  explicit Int8Signature(const Int8Config& c)
      : p0(0, true, Scalar::U32, c.out, Scalar::F32, c.sb != 0, Scalar::F32, c.bias, false),
        p1(1, c.parts >= 2, Scalar::U32, c.out, Scalar::F32, c.sb != 0, Scalar::F32, c.bias, false),
        p2(2, c.parts >= 3, Scalar::U32, c.out, Scalar::F32, c.sb != 0, Scalar::F32, c.bias, false) {
    sa.on = c.sa != 0;
  }
  auto fields() {
    return std::tuple_cat(std::tie(a, m, k, sa), p0.fields(), p1.fields(), p2.fields());
  }
};

// The epilogue of both kernels: s32 accumulators of C(row, col), C(row, col + 1) (col even)
// stored raw, or as scale_a * scale_b * acc + bias rounded once to C's type; one vector
// store where n is even.
struct Epilogue {
  ir::KernelBuilder& b;
  const Int8Config& c;
  detail::QPartValues pv;  // c, n, s (scale_b), bias
  Value sa, sa_t, sb_t, pairs;
  Epilogue(ir::KernelBuilder& b_, const Int8Config& c_, const detail::QPartValues& pv_, Value sa_)
      : b(b_), c(c_), pv(pv_), sa(sa_) {
    pairs = (pv.n % 2u) == 0u;
    if (c.sa == 1) sa_t = sa[0u];
    if (c.sb == 1) sb_t = pv.s[0u];
  }
  void store_pair(Value row, Value col, Value m, Value a0, Value a1) const {
    b.if_(row < m && col < pv.n, [&] {
      Value idx = ir::cast<uint64_t>(row) * ir::cast<uint64_t>(pv.n) + ir::cast<uint64_t>(col);
      std::vector<Value> v;
      for (uint32_t e = 0; e < 2; ++e) {
        Value x = e ? a1 : a0;
        if (c.out != Scalar::S32) {
          Value f = ir::cast<float>(x);
          Value s = c.sa == 2 ? Value(sa[row]) : sa_t;
          if (c.sb == 2) s = s.valid() ? s * Value(pv.s[col + e]) : Value(pv.s[col + e]);
          else if (sb_t.valid()) s = s.valid() ? s * sb_t : sb_t;
          if (s.valid()) f = f * s;
          if (c.bias) {
            ir::Var bv = b.var<float>(0.0f);
            b.if_(col + e < pv.n, [&] { bv = Value(pv.bias[col + e]); });
            f = f + Value(bv);
          }
          x = c.out == Scalar::F32 ? f : ir::cast(f, ir::Type::scalar(c.out));
        }
        v.push_back(x);
      }
      b.if_(pairs, [&] { ir::store_vec(pv.c, idx, v); }).else_([&] {
        pv.c[idx] = v[0];
        b.if_(col + 1u < pv.n, [&] { pv.c[idx + uint64_t(1)] = v[1]; });
      });
    });
  }
};

ir::Kernel build_wgmma(const Int8Config& c);

ir::Kernel build(const Int8Config& c) {
  if (kTiles[c.tile].wgmma) return build_wgmma(c);
  const Int8Tile& t = kTiles[c.tile];
  const uint32_t threads = t.threads(), warps_n = t.bn / t.wn, S = t.stages;
  const uint32_t mt = t.wm / 16, nt = t.wn / 8;
  ir::KernelBuilder b(c.str());
  b.launch_bounds(threads);
  Int8Signature sig(c);
  kernel::declare(b, sig);
  const detail::QPartValues pv = detail::select_part(b, c.parts, sig.p0, sig.p1, sig.p2);
  Value A = sig.a.ir, m = sig.m.ir, k = sig.k.ir;
  Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  Value m0 = b.block_idx_y() * t.bm, n0 = b.block_idx_x() * t.bn;
  b.if_(n0 >= pv.n, [&] { b.return_(); });  // a QKV part narrower than the grid
  Value zero = b.constant<uint32_t>(0u);
  Value kw = k / 4u;  // u32 per row
  auto smem = b.dynamic_shared(Scalar::U32, 128);
  const uint32_t a_st = t.bm * kRow, b_st = t.bn * kRow, b_off = a_st * S;
  kernel::CpAsyncRing ring(b, S, zero);
  Value steps = (k + (kBK - 1)) / kBK;
  // One operand's chunks of k-step s: row r = id / 4 of the tile, chunk id % 4; a chunk past
  // the matrix (rows or k) reads nothing and is zero-filled, from a clamped address.
  auto load = [&](Value P, Value outer0, Value outer_n, uint32_t rows, uint32_t base, Value s) {
    const uint32_t total = rows * kChunks;
    for (uint32_t e = 0; e < (total + threads - 1) / threads; ++e) {
      auto one = [&] {
        Value id = tid + e * threads, r = id / kChunks, ch = id % kChunks;
        Value row = outer0 + r, kb = s * kBK + ch * 16u;
        Value ok = row < outer_n && kb < k;
        Value src = ir::cast<uint64_t>(ir::select(ok, row * kw + kb / 4u, zero));
        b.cp_async(smem, ring.load_stage() * (base == 0 ? a_st : b_st) + (base + r * kRow + ch * 4u), P, src, 16,
                   ir::CacheHint::Global, ir::select(ok, b.constant<uint32_t>(16u), zero));
      };
      if ((e + 1) * threads <= total) one();
      else b.if_(tid + e * threads < total, one);
    }
  };
  auto load_step = [&](Value s) {
    load(A, m0, m, t.bm, 0, s);
    load(pv.w, n0, pv.n, t.bn, b_off, s);
  };
  Value wm0 = (warp / warps_n) * t.wm, wn0 = (warp % warps_n) * t.wn;
  // ldmatrix lane addresses: A matrices (rows +0/+8, k +0/+16), B (k +0/+16, n +0/+8).
  Value a_lane = (wm0 + lane % 16u) * kRow + (lane / 16u) * 4u;
  Value b_lane = (wn0 + (lane / 16u) * 8u + lane % 8u) * kRow + ((lane / 8u) % 2u) * 4u + b_off;
  auto acc = b.array<int32_t>(mt * nt * 4, 0);
  ring.pipeline(steps, load_step, [&](Value) {
    Value sa = ring.read_stage() * a_st + a_lane, sb = ring.read_stage() * b_st + b_lane;
    for (uint32_t ks = 0; ks < kBK / 32; ++ks) {
      std::vector<std::vector<Value>> fa, fb;
      for (uint32_t mi = 0; mi < mt; ++mi) fa.push_back(b.ldmatrix(smem, sa + (mi * 16 * kRow + ks * 8), 4));
      for (uint32_t ni = 0; ni < nt; ni += 2) {
        if (ni + 1 < nt) {
          std::vector<Value> q = b.ldmatrix(smem, sb + (ni * 8 * kRow + ks * 8), 4);
          fb.push_back({q[0], q[1]});
          fb.push_back({q[2], q[3]});
        } else {
          fb.push_back(b.ldmatrix(smem, sb + (ni * 8 * kRow + ks * 8), 2));
        }
      }
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(ir::MmaKind::S8, acc.slice(4 * (mi * nt + ni), 4), fa[mi], fb[ni]);
    }
  });
  // Epilogue: registers 2h, 2h + 1 of a tile are columns 2t, 2t + 1 of row g + 8h.
  const ir::MmaShape& shape = ir::mma_shape(ir::MmaKind::S8);
  const Epilogue epi(b, c, pv, sig.sa.ir);
  for (uint32_t mi = 0; mi < mt; ++mi)
    for (uint32_t ni = 0; ni < nt; ++ni)
      for (uint32_t h = 0; h < 2; ++h) {
        Value row = m0 + wm0 + (ir::frag_row(shape.c, lane, 2 * h) + mi * 16);
        Value col = n0 + wn0 + (ir::frag_col(shape.c, lane, 2 * h) + ni * 8);
        epi.store_pair(row, col, m, Value(acc[4 * (mi * nt + ni) + 2 * h]), Value(acc[4 * (mi * nt + ni) + 2 * h + 1]));
      }
  return b.build();
}

// Parameters of the wgmma kernel: A and B through tensor maps (bytes, 128-byte swizzle),
// then C, the sizes, the scales and the bias.
struct Int8WgmmaSignature {
  kernel::TensorMap a_map{"a_map"}, b_map{"b_map"};
  kernel::Ptr c{"c"};
  kernel::Param<uint32_t> m{"m"}, n{"n"}, k{"k"};
  kernel::Opt<kernel::Ptr> sa{{"scale_a", Scalar::F32, true}}, sb{{"scale_b", Scalar::F32, true}},
      bias{{"bias", Scalar::F32, true}};
  explicit Int8WgmmaSignature(const Int8Config& cfg) {
    c.elem = cfg.out;
    sa.on = cfg.sa != 0;
    sb.on = cfg.sb != 0;
    bias.on = cfg.bias;
  }
  auto fields() { return std::tie(a_map, b_map, c, m, n, k, sa, sb, bias); }
};

// Hopper (sm_90a): warpgroup 0's one thread issues TMA loads of A's and B's 128-byte rows of
// k (128-byte swizzle, zero-filled past m, n, k) into a MbarrierRing of S stages; consumer
// warpgroup wg runs wgmma m64n128k32 s8 -> s32 (four per stage) on rows 64 wg .. 64 wg + 63
// straight from shared memory, keeps one wgmma group in flight, releases the previous stage,
// and stores through the common epilogue. One tile per block.
ir::Kernel build_wgmma(const Int8Config& c) {
  const Int8Tile& t = kTiles[c.tile];
  const uint32_t S = t.stages, consumers = t.bm / t.wm;
  ir::KernelBuilder b(c.str());
  b.launch_bounds(t.threads(), 1);
  Int8WgmmaSignature sig(c);
  kernel::declare(b, sig);
  const kernel::TmaTile ta{.rows = t.bm, .esize = 1, .k_major = true, .base = 0};
  const kernel::TmaTile tb{.rows = t.bn, .esize = 1, .k_major = true, .base = ta.stage_elements() * S};
  const uint32_t stage_bytes = ta.stage_bytes() + tb.stage_bytes();
  auto smem = b.dynamic_shared(Scalar::U8, 1024);
  auto bars = b.dynamic_shared<uint64_t>(1024);
  const kernel::MbarrierRing ring(b, bars, stage_bytes * S / 8, S, consumers * 4u);
  Value tid = b.thread_idx_x(), warp = b.warp_id(), lane = b.lane_id(), zero = b.constant<uint32_t>(0u);
  Value m = sig.m.ir, k = sig.k.ir;
  Value m0 = b.block_idx_y() * t.bm, n0 = b.block_idx_x() * t.bn;
  Value steps = (k + (ta.bk() - 1)) / ta.bk();
  b.if_(tid == 0u, [&] { ring.init(); });
  b.barrier();
  const kernel::WarpSpecialized ws(b, consumers);
  ws.run(warp, [&] {  // ---- producer
    b.if_(tid == 0u, [&] {
      b.for_(0u, steps, [&](Value st) {
        const kernel::MbarrierRing::Slot slot = ring.slot(st);
        ring.acquire(slot);
        ring.expect(slot, stage_bytes);
        Value kk = st * ta.bk();
        auto full = [&] { return ring.full(slot); };
        ta.load(b, smem, slot.stage * ta.stage_elements(), sig.a_map.ir, kk, m0, zero, bars, full, 1, zero, Value());
        tb.load(b, smem, slot.stage * tb.stage_elements() + tb.base, sig.b_map.ir, kk, n0, zero, bars, full, 1, zero, Value());
      });
    });
  }, [&](Value wg) {  // ---- consumer wg: rows 64 wg ..
    Value desc_a = ta.descriptor(b, smem, ta.row_start(wg * 64u));
    Value desc_b = tb.descriptor(b, smem, tb.base);
    const kernel::AccTile acc(b, 1, 1, t.bn / 8, Scalar::S32);
    b.for_(0u, steps, [&](Value st) {
      const kernel::MbarrierRing::Slot slot = ring.slot(st);
      ring.wait(slot);
      kernel::wgmma_stage(b, acc, ta, tb, ta.stage_descriptor(desc_a, slot.stage), tb.stage_descriptor(desc_b, slot.stage),
                          Scalar::S8);
      b.wgmma_wait_group(1);  // the previous step's group is done: its stage is free
      b.if_(st > 0u, [&] { ring.release(ring.stage_of(st + (S - 1)), lane); });
    });
    b.wgmma_wait_group(0);
    const detail::QPartValues pv{Value(), sig.c.ir, sig.n.ir, sig.sb.ir, Value(), sig.bias.ir};
    const Epilogue epi(b, c, pv, sig.sa.ir);
    Value row0 = m0 + wg * 64u + (warp % 4u) * 16u;
    for (uint32_t j = 0; j < t.bn / 8; ++j)
      for (uint32_t r = 0; r < 4; r += 2) {
        Value row = row0 + ir::frag_row(kernel::AccTile::layout(), lane, int(r));
        Value col = n0 + (ir::frag_col(kernel::AccTile::layout(), lane, int(r)) + j * 8);
        epi.store_pair(row, col, m, Value(acc.at(0, 0, j, r)), Value(acc.at(0, 0, j, r + 1)));
      }
  });
  return b.build();
}

// A K-major s8 operand (rows x k) as a 3-D tensor map of bytes with 128-byte boxes of k.
jit::TensorMap operand_map(uint64_t addr, uint32_t rows, uint32_t k, uint32_t box_rows) {
  jit::TensorMapTiled t;
  t.dtype = Scalar::U8;  // bytes to TMA
  t.global_address = addr;
  t.global_dims = {k, rows, 1};
  t.global_strides = {uint64_t(k), uint64_t(k) * rows};
  t.box_dims = {kernel::kSwizzleBytes, box_rows, 1};
  t.swizzle = jit::TensorMapSwizzle::B128;
  t.l2_promotion = jit::TensorMapL2Promotion::B256;
  return jit::encode_tensor_map_tiled(t);
}

std::vector<Int8Config> declared() {
  std::vector<Int8Config> out;
  for (uint32_t t = 0; t < std::size(kTiles); ++t) {
    out.push_back({t, Scalar::S32, 0, 0, false, 1});
    for (Scalar o : {Scalar::F16, Scalar::BF16, Scalar::F32}) {
      out.push_back({t, o, 2, 2, false, 1});
      out.push_back({t, o, 2, 2, true, 1});
      out.push_back({t, o, 1, 1, false, 1});
    }
    if (!kTiles[t].wgmma) out.push_back({t, Scalar::F16, 2, 2, false, 3});
  }
  return out;
}

jit::Family<Int8Config>& family() {
  static jit::Family<Int8Config> f("matmul_int8", [](const Int8Config& c) { return build(c); }, declared());
  return f;
}

// The tile for a problem: on a Hopper device the wgmma tile for one part of more than 64 rows
// (measured on an H100: 1.4-2.2x the best mma.sync tile from 128 rows up, slower at 16); else
// the largest mma.sync tile whose grid fills the SMs, else the smallest.
uint32_t pick_tile(uint32_t m, uint32_t n, uint32_t parts) {
  const jit::DeviceInfo& dev = jit::device_info();
  if (parts == 1 && m > 64 && !jit::interpret_mode() && dev.present && dev.hopper()) return kMmaTiles;
  const uint32_t sms = dev.sm_count;
  for (uint32_t t = 0; t + 1 < kMmaTiles; ++t) {
    const uint64_t blocks = uint64_t((m + kTiles[t].bm - 1) / kTiles[t].bm) * ((n + kTiles[t].bn - 1) / kTiles[t].bn) * parts;
    if (blocks >= sms && m > kTiles[t].bm / 2) return t;
  }
  return m <= 32 ? kMmaTiles - 1 : 1;
}

void run(const char* op, uint64_t a, const Int8Part* parts, uint32_t nparts, uint32_t m, uint32_t k, Scalar out,
         uint64_t scale_a, bool a_per_row, bool b_per_col, const jit::Stream* stream, int tile = -1) {
  if (out != Scalar::S32 && out != Scalar::F16 && out != Scalar::BF16 && out != Scalar::F32)
    throw UsageError("", op, std::string("out: s32, f16, bf16 or f32, not ") + ir::scalar_name(out));
  if (k % 16 || k == 0) throw UsageError("", op, "k: a positive multiple of 16 (16-byte rows of A and B), got " + std::to_string(k));
  detail::check_aligned(op, "a", a);
  uint32_t nmax = 0;
  Int8Config c{0, out, uint8_t(scale_a ? (a_per_row ? 2 : 1) : 0), 0, false, nparts};
  for (uint32_t i = 0; i < nparts; ++i) {
    const Int8Part& p = parts[i];
    detail::check_aligned(op, "b", p.b);
    detail::check_aligned(op, "c", p.c);
    if (p.n == 0) throw UsageError("", op, "n: must be positive");
    nmax = std::max(nmax, p.n);
    const uint8_t sb = p.scale_b ? (b_per_col ? 2 : 1) : 0;
    if (i && (sb != c.sb || (p.bias != 0) != c.bias))
      throw UsageError("", op, "parts: every part has scale_b and bias, or none has");
    c.sb = sb;
    c.bias = p.bias != 0;
  }
  if (out == Scalar::S32 && (c.sa || c.sb || c.bias))
    throw UsageError("", op, "out: s32 is the raw product; scales and bias need f16, bf16 or f32 out");
  if (m == 0) return;
  if (tile >= int(std::size(kTiles))) throw UsageError("", op, "tile: " + std::to_string(tile) + " is not a tile index");
  c.tile = tile >= 0 ? uint32_t(tile) : pick_tile(m, nmax, nparts);
  const Int8Tile& t = kTiles[c.tile];
  jit::LaunchConfig lc{.grid = {(nmax + t.bn - 1) / t.bn, (m + t.bm - 1) / t.bm, nparts},
                       .block = {t.threads()},
                       .shared_bytes = shared_bytes(t),
                       .stream = stream};
  if (t.wgmma) {
    if (nparts != 1) throw UsageError("", op, std::string("tile: ") + t.name + " serves one part");
    if (jit::interpret_mode() || !jit::device_info().present || !jit::device_info().hopper())
      throw UsageError("", op, std::string("tile: ") + t.name + " needs an sm_90 device (wgmma, TMA)");
    Int8WgmmaSignature ws(c);
    ws.a_map.host = operand_map(a, m, k, t.bm);
    ws.b_map.host = operand_map(parts[0].b, parts[0].n, k, t.bn);
    ws.c.host = parts[0].c;
    ws.m.host = m;
    ws.n.host = parts[0].n;
    ws.k.host = k;
    ws.sa.host = scale_a;
    ws.sb.host = parts[0].scale_b;
    ws.bias.host = parts[0].bias;
    const kernel::PackedArgs args = kernel::pack(ws);
    family().get(c).launch_packed(lc, args.data(), args.size());
    return;
  }
  Int8Signature sig(c);
  sig.a.host = a;
  sig.m.host = m;
  sig.k.host = k;
  sig.sa.host = scale_a;
  detail::QPart* ps[3] = {&sig.p0, &sig.p1, &sig.p2};
  for (uint32_t i = 0; i < nparts; ++i) {
    ps[i]->w.host = parts[i].b;
    ps[i]->c.host = parts[i].c;
    ps[i]->n.host = parts[i].n;
    ps[i]->s.host = parts[i].scale_b;
    ps[i]->bias.host = parts[i].bias;
  }
  const kernel::PackedArgs args = kernel::pack(sig);
  family().get(c).launch_packed(lc, args.data(), args.size());
}

}  // namespace

void matmul_int8(uint64_t a, uint64_t b, uint64_t c, const Int8Problem& p, const Int8Scales& s, const jit::Stream* stream) {
  const Int8Part part{b, c, p.n, s.b, s.bias};
  run("matmul_int8", a, &part, 1, p.m, p.k, p.out, s.a, s.a_per_row, s.b_per_col, stream, p.tile);
}

void matmul_int8_qkv(uint64_t a, const Int8Part (&parts)[3], uint32_t m, uint32_t k, Scalar out, uint64_t scale_a,
                     bool a_per_row, bool b_per_col, const jit::Stream* stream) {
  run("matmul_int8_qkv", a, parts, 3, m, k, out, scale_a, a_per_row, b_per_col, stream);
}

jit::FamilyBase& matmul_int8_family() { return family(); }

std::vector<std::string> matmul_int8_tiles() {
  std::vector<std::string> out;
  for (const Int8Tile& t : kTiles) out.push_back(t.name);
  return out;
}

}  // namespace kaio::ops
