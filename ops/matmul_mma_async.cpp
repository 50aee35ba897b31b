// The pipelined tensor-core matmul engine: as matmul_mma.cpp (f16 / bf16 in, mma.sync
// m16n8k16, f32 accumulate, warp tiles of TM x TN; f32 in as tf32, mma.sync m16n8k8 with
// fragments read element by element), with the operand tiles brought in by
// cp.async in 16-byte chunks through a ring of STAGES shared-memory stages, so the copies
// of the next STAGES - 1 k-steps overlap the tensor-core work of the current one.
//
// Each operand is staged with its contiguous dimension along the shared rows (padded by 16
// bytes), so every 16-byte chunk is one cp.async for either layout (f16 / bf16):
//   A row-major: As[m][k], ldmatrix.x4           A col-major: As[k][m], ldmatrix.x4.trans
//   B row-major: Bs[k][n], ldmatrix.x2.trans     B col-major: Bs[n][k], ldmatrix.x2
// Edges: a chunk past the matrix reads only its valid bytes (src_bytes, the rest zero),
// with its source address clamped into the matrix. Blocks inside the matrix copy whole
// chunks from offsets computed before the loop plus a per-step increment (no checks).
// Needs the contiguous leading dimensions and batch strides to be whole 16-byte vectors
// (multiples of 8 elements, 4 for tf32) and 16-byte aligned pointers (can_implement).
//
// The pipeline (per thread; cp.async groups are per thread, the barrier publishes them):
//   for s in 0 .. STAGES-2: load k-step s into stage s; commit
//   for t in 0 .. steps-1:
//     wait_group(STAGES-2); barrier        k-step t has landed, everyone is done with t-1
//     load k-step t+STAGES-1 into stage (t+STAGES-1) % STAGES (the one t-1 used); commit
//     ldmatrix + mma on stage t % STAGES
#include <algorithm>
#include <string>

#include "kaio/ir/layouts.h"
#include "kaio/jit/device.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/stage_ring.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

struct Operand {
  bool contiguous_k;     // A row-major / B col-major: the shared rows run along k
  uint32_t outer;        // the tile's extent in m (A) or n (B)
  ir::SmemLayout lay;    // rows of the contiguous dimension, padded
  uint32_t elements;     // one stage
};

// Rows padded by 16 bytes: the 8 rows of an ldmatrix (or a fragment's 8 row groups) start
// in different banks.
Operand operand(bool contiguous_k, uint32_t outer, uint32_t bk, uint32_t esize) {
  const uint32_t pad = 16 / esize;
  ir::SmemLayout l = contiguous_k ? ir::SmemLayout::padded(bk, pad) : ir::SmemLayout::padded(outer, pad);
  return {contiguous_k, outer, l, l.elements(contiguous_k ? outer : bk)};
}

uint32_t esize_of(ir::Scalar in) { return static_cast<uint32_t>(ir::scalar_bytes(in)); }
Operand operand_a(const MatmulVariant& v, MatLayout a, ir::Scalar in) {
  return operand(a == MatLayout::RowMajor, v.bm, v.bk, esize_of(in));
}
Operand operand_b(const MatmulVariant& v, MatLayout b, ir::Scalar in) {
  return operand(b == MatLayout::ColMajor, v.bn, v.bk, esize_of(in));
}

}  // namespace

// warp_k > 1: the f32 accumulators of the warps past the first of each tile, summed at the end
uint32_t reduce_floats(const MatmulVariant& v) { return (v.warp_k - 1) * (v.bm / v.warp_m) * (v.bn / v.warp_n) * v.warp_m * v.warp_n; }

uint32_t matmul_async_shared_bytes(const MatmulVariant& v, ir::Scalar in, MatLayout a, MatLayout b) {
  return (operand_a(v, a, in).elements + operand_b(v, b, in).elements) * v.stages * esize_of(in);
}

namespace {
ir::Kernel build_matmul_mma_async(const MatmulVariant& v, const MatmulConfig& c) {
  const bool tf32 = c.in == ir::Scalar::F32;
  const ir::MmaKind kind = tf32 ? ir::MmaKind::TF32 : c.in == ir::Scalar::BF16 ? ir::MmaKind::BF16 : ir::MmaKind::F16;
  const uint32_t esize = esize_of(c.in), per = 16 / esize;  // bytes and elements of one element / chunk
  const uint32_t kstep = tf32 ? 8 : 16;                     // k of one mma
  const ir::MmaShape& s = ir::mma_shape(kind);
  const uint32_t threads = v.threads(), warps_n = v.bn / v.warp_n, S = v.stages;
  const uint32_t tile_warps = (v.bm / v.warp_m) * warps_n, kslice = v.bk / v.warp_k;  // warp_k: k of a stage per warp
  const uint32_t mt = v.warp_m / 16, nt = v.warp_n / 8;
  if (S < 2 || S > 8) throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": 2 to 8 stages");
  ir::KernelBuilder b(std::string("matmul_") + v.name + "_" + ir::scalar_name(c.in) + "_" + ir::scalar_name(c.out) +
                      (c.a == MatLayout::RowMajor ? "_r" : "_c") + (c.b == MatLayout::RowMajor ? "r" : "c") + detail::epilogue_suffix(c));
  b.launch_bounds(threads);
  if (const uint32_t cap = detail::register_cap(v, c)) b.max_registers(cap);
  detail::MatmulArgs a = detail::matmul_params(b, c);
  detail::epilogue_params(b, c, a);
  const Operand oa = operand_a(v, c.a, c.in), ob = operand_b(v, c.b, c.in);
  // One dynamic shared array (the stages of large tiles pass the 48 KB of static shared
  // memory): the A stages, then the B stages. LaunchConfig::shared_bytes sizes it
  // (matmul_async_shared_bytes).
  auto smem = b.dynamic_shared(c.in, 128);
  const uint32_t a_off = 0, b_off = oa.elements * S;
  ir::Value tid = b.thread_idx_x(), lane = b.lane_id(), warp = b.warp_id();
  // warp w: tile (w % tile_warps), k slice w / tile_warps of each stage
  ir::Value wt = v.warp_k > 1 ? warp % tile_warps : warp, wk = warp / tile_warps;
  ir::Value wm0 = (wt / warps_n) * v.warp_m, wn0 = (wt % warps_n) * v.warp_n;
  auto [m0, n0] = detail::tile_origin(b, v.bm, v.bn);
  ir::Value steps = (a.k - a.k_begin + (v.bk - 1)) / v.bk;
  ir::Value zero = b.constant<uint32_t>(0u);

  // One operand's cp.async chunks: chunk e of a thread is tile chunk tid + e * threads,
  // row r = chunk / (chunks per row), 16-byte column c8. What does not depend on the
  // k-step is computed once: chunk 0's source offset at the first step and shared index;
  // chunk e lies `e * rstep` rows after chunk 0 (rstep = threads / chunks per row; every
  // table row has threads a multiple of the chunks per row), so its source offset is one
  // add on from chunk e - 1's and its shared index a constant on from chunk 0's.
  struct Chunks {
    const Operand& o;
    ir::Value P, outer0, outer_n, ld, base;
    uint32_t off, count = 0, row_len = 0, rstep = 0;
    bool linear = false;
    ir::Value off0, step, inc, sidx0;
  };
  auto chunks_of = [&](const Operand& o, ir::Value P, ir::Value outer0, ir::Value outer_n, ir::Value ld, ir::Value base,
                       uint32_t off) {
    Chunks ch{o, P, outer0, outer_n, ld, base, off};
    ch.row_len = o.contiguous_k ? v.bk : o.outer;  // contiguous elements per shared row
    const uint32_t rows = o.contiguous_k ? o.outer : v.bk, per_row = ch.row_len / per;
    if (rows * per_row % threads)
      throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": a tile's 16-byte chunks do not divide among its threads");
    ch.count = rows * per_row / threads;
    ch.linear = threads % per_row == 0;
    if (!ch.linear) return ch;  // every step takes the checked path
    ch.rstep = threads / per_row;
    ir::Value r = tid / per_row, c8 = (tid % per_row) * per;
    ch.sidx0 = o.lay.index(r, c8) + off;
    // rows of the outer dimension (contiguous k) or of k, ld elements apart
    ch.off0 = base + ir::cast<uint64_t>(o.contiguous_k ? (outer0 + r) * ld + (a.k_begin + c8) : (a.k_begin + r) * ld + (outer0 + c8));
    ch.step = ir::cast<uint64_t>(ld) * uint64_t(ch.rstep);
    ch.inc = o.contiguous_k ? b.constant<uint64_t>(uint64_t(v.bk)) : ir::cast<uint64_t>(ld) * uint64_t(v.bk);
    return ch;
  };
  Chunks ca = chunks_of(oa, a.A, m0, a.m, a.lda, a.base_a, a_off), cb = chunks_of(ob, a.B, n0, a.n, a.ldb, a.base_b, b_off);
  ir::Var koff_a = b.var<uint64_t>(uint64_t(0)), koff_b = b.var<uint64_t>(uint64_t(0));  // the next loaded step's offsets
  kernel::CpAsyncRing ring(b, S, zero);  // the stages' load and read positions

  // Chunk e of k-step t, checked at the matrix's edges (any t; past the last step every
  // chunk is empty): only the valid bytes are read, the rest zero-filled, and the source
  // address is clamped into the matrix.
  auto load_edge = [&](const Chunks& ch, uint32_t e, ir::Value t, ir::Value st) {
    const Operand& o = ch.o;
    ir::Value id = tid + e * threads;
    ir::Value r = id / (ch.row_len / per), c8 = (id % (ch.row_len / per)) * per;
    ir::Value k0 = a.k_begin + t * v.bk;
    ir::Value g_row = o.contiguous_k ? ch.outer0 + r : k0 + r;     // outer index, or k
    ir::Value g_col = o.contiguous_k ? k0 + c8 : ch.outer0 + c8;   // k, or outer index
    ir::Value row_n = o.contiguous_k ? ch.outer_n : a.k, col_n = o.contiguous_k ? a.k : ch.outer_n;
    ir::Value ok = g_row < row_n && g_col < col_n;
    ir::Value valid = ir::select(ok, ir::min((col_n - ir::select(ok, g_col, zero)) * esize, 16u), zero);
    ir::Value src_row = ir::select(ok, g_row, zero), src_col = ir::select(ok, g_col, zero);  // stay inside the matrix
    ir::Value src = ch.base + ir::cast<uint64_t>(src_row * ch.ld + src_col);
    b.cp_async(smem, st + (o.lay.index(r, c8) + ch.off), ch.P, src, 16, ir::CacheHint::Global, valid);
  };
  // One operand's chunks of k-step t into stage offset st: unchecked (whole 16-byte
  // chunks from the running offsets) when the step lies inside k and the block's tile
  // inside the matrix along the operand's outer dimension, else checked chunk by chunk.
  auto load_operand = [&](const Chunks& ch, ir::Var& koff, ir::Value t, ir::Value st) {
    if (!ch.linear) {
      for (uint32_t e = 0; e < ch.count; ++e) load_edge(ch, e, t, st);
      return;
    }
    ir::Value inside = a.k_begin + t * v.bk + v.bk <= a.k && ch.outer0 + ch.o.outer <= ch.outer_n;
    b.if_(inside, [&] {
       ir::Value src = ch.off0 + ir::Value(koff), dst = st + ch.sidx0;
       const uint32_t sstep = ch.o.lay.index(ch.rstep, 0u);  // the padded layouts are linear
       for (uint32_t e = 0; e < ch.count; ++e) {
         if (e) src = src + ch.step;  // one add per chunk, no products
         b.cp_async(smem, e ? dst + e * sstep : dst, ch.P, src, 16, ir::CacheHint::Global);
       }
     }).else_([&] {
      for (uint32_t e = 0; e < ch.count; ++e) load_edge(ch, e, t, st);
    });
    koff += ch.inc;
  };
  // Issues k-step t into the ring's next stage (steps are loaded in order; the ring commits).
  auto load_step = [&](ir::Value t) {
    load_operand(ca, koff_a, t, ring.load_stage() * oa.elements);
    load_operand(cb, koff_b, t, ring.load_stage() * ob.elements);
  };

  // Each lane's fragment addresses within a stage, for mma tile (0, 0) and ks 0; the
  // others are constant offsets from them (padded layouts are linear).
  const uint32_t sa_row = oa.lay.row_stride(), sb_row = ob.lay.row_stride();
  ir::Value a_lane, b_lane;
  // tf32: register r at a_frag[a_frag.size() > 1 ? r : 0] + a_frag_c[r] (the same for B)
  std::vector<ir::Value> a_frag, b_frag;
  std::vector<uint32_t> a_frag_c, b_frag_c;
  if (!tf32) {
    a_lane = oa.contiguous_k  // As[m][k]: lanes 0-15 rows m, lanes 16-31 the same rows at k + 8
                 ? oa.lay.index(wm0 + lane % 16u, (lane / 16u) * 8u)
                 // As[k][m]: matrix j = lane / 8 holds k + 8 (j / 2), m + 8 (j % 2), transposed
                 : oa.lay.index((lane / 16u) * 8u + lane % 8u, wm0 + ((lane / 8u) % 2u) * 8u);
    // B, two n8 tiles per ldmatrix.x4 (matrices 0-1: tile ni, 2-3: tile ni + 1)
    b_lane = ob.contiguous_k  // Bs[n][k]: matrix j holds n + 8 (j / 2), k + 8 (j % 2)
                 ? ob.lay.index(wn0 + ((lane / 16u) * 8u + lane % 8u), ((lane / 8u) % 2u) * 8u)
                 // Bs[k][n]: matrix j holds k + 8 (j % 2), n + 8 (j / 2), transposed
                 : ob.lay.index(lane % 16u, wn0 + (lane / 16u) * 8u);
  } else {  // A register r holds (frag_row, frag_col) = (m, k); B register r (k, n)
    // Register r sits a lane-independent (row, col) step from register 0 in the tf32
    // layouts: one address per operand, the others constants from it (fewer live registers).
    auto steps_of = [](const ir::FragLayout& f) {
      std::vector<std::pair<int, int>> d;
      for (int r = 0; r < f.regs; ++r) {
        d.emplace_back(f.row_of(0, r) - f.row_of(0, 0), f.col_of(0, r) - f.col_of(0, 0));
        for (int l = 1; l < 32; ++l)
          if (f.row_of(l, r) - f.row_of(l, 0) != d.back().first || f.col_of(l, r) - f.col_of(l, 0) != d.back().second)
            return std::vector<std::pair<int, int>>{};
      }
      return d;
    };
    const auto da = steps_of(s.a), db = steps_of(s.b);
    for (int r = 0; r < s.a.regs; ++r) {
      if (!da.empty() && r > 0) {
        const auto [dm, dk] = da[r];
        a_frag_c.push_back(oa.contiguous_k ? oa.lay.index(uint32_t(dm), uint32_t(dk)) : oa.lay.index(uint32_t(dk), uint32_t(dm)));
        continue;
      }
      ir::Value m = wm0 + ir::frag_row(s.a, lane, r), k = ir::frag_col(s.a, lane, r);
      a_frag.push_back(oa.contiguous_k ? oa.lay.index(m, k) : oa.lay.index(k, m));
      a_frag_c.push_back(0);
    }
    for (int r = 0; r < s.b.regs; ++r) {
      if (!db.empty() && r > 0) {
        const auto [dk, dn] = db[r];
        b_frag_c.push_back(ob.contiguous_k ? ob.lay.index(uint32_t(dn), uint32_t(dk)) : ob.lay.index(uint32_t(dk), uint32_t(dn)));
        continue;
      }
      ir::Value k = ir::frag_row(s.b, lane, r), n = wn0 + ir::frag_col(s.b, lane, r);
      b_frag.push_back(ob.contiguous_k ? ob.lay.index(n, k) : ob.lay.index(k, n));
      b_frag_c.push_back(0);
    }
  }
  if (v.warp_k > 1) {  // the warp's k slice: its fragments start kslice * wk along k
    ir::Value k0 = wk * kslice;
    ir::Value da = oa.contiguous_k ? k0 : k0 * sa_row, db = ob.contiguous_k ? k0 : k0 * sb_row;
    if (!tf32) {
      a_lane = a_lane + da;
      b_lane = b_lane + db;
    } else {
      for (ir::Value& f : a_frag) f = f + da;
      for (ir::Value& f : b_frag) f = f + db;
    }
  }
  auto a_at = [&](uint32_t mi, uint32_t ks) { return oa.contiguous_k ? mi * 16 * sa_row + ks * kstep : ks * kstep * sa_row + mi * 16; };
  auto b_at = [&](uint32_t ni, uint32_t ks) { return ob.contiguous_k ? ni * 8 * sb_row + ks * kstep : ks * kstep * sb_row + ni * 8; };

  const kernel::AccTile acc(b, 1, mt, nt);
  ring.pipeline(steps, load_step, [&](ir::Value) {
    ir::Value sa = ring.read_stage() * oa.elements, sb = ring.read_stage() * ob.elements + b_off;
    ir::Value sa_lane, sb_lane;  // the lane's addresses in this stage, once per step
    std::vector<ir::Value> sa_f, sb_f;
    if (tf32) {
      for (ir::Value f : a_frag) sa_f.push_back(sa + f);
      for (ir::Value f : b_frag) sb_f.push_back(sb + f);
    } else {
      sa_lane = sa + a_lane;
      sb_lane = sb + b_lane;
    }
    for (uint32_t ks = 0; ks < kslice / kstep; ++ks) {
      std::vector<std::vector<ir::Value>> fa(mt), fb;
      if (tf32) {  // element by element (ldmatrix moves 16-bit halves)
        for (uint32_t mi = 0; mi < mt; ++mi)
          for (int r = 0; r < s.a.regs; ++r)
            fa[mi].push_back(smem[sa_f[a_frag.size() > 1 ? r : 0] + (a_frag_c[r] + a_at(mi, ks))]);
        for (uint32_t ni = 0; ni < nt; ++ni) {
          fb.emplace_back();
          for (int r = 0; r < s.b.regs; ++r)
            fb.back().push_back(smem[sb_f[b_frag.size() > 1 ? r : 0] + (b_frag_c[r] + b_at(ni, ks))]);
        }
      } else {
        for (uint32_t mi = 0; mi < mt; ++mi) fa[mi] = b.ldmatrix(smem, sa_lane + a_at(mi, ks), 4, !oa.contiguous_k);
        for (uint32_t ni = 0; ni < nt; ni += 2) {
          if (ni + 1 < nt) {
            std::vector<ir::Value> q = b.ldmatrix(smem, sb_lane + b_at(ni, ks), 4, !ob.contiguous_k);
            fb.push_back({q[0], q[1]});
            fb.push_back({q[2], q[3]});
          } else {  // an odd last tile: matrices 0-1 of the same lane addresses
            fb.push_back(b.ldmatrix(smem, sb_lane + b_at(ni, ks), 2, !ob.contiguous_k));
          }
        }
      }
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni) b.mma_sync(kind, acc.tile(0, mi, ni), fa[mi], fb[ni]);
    }
  });
  // The epilogue: accumulator registers 2h and 2h + 1 of an mma tile are columns 2t and
  // 2t + 1 of one row, stored as one vector where C allows (detail::c_vectors_ok).
  bool paired = true;
  for (int l = 0; l < 32; ++l)
    for (int h = 0; h < 2; ++h)
      paired = paired && s.c.row_of(l, 2 * h + 1) == s.c.row_of(l, 2 * h) && s.c.col_of(l, 2 * h + 1) == s.c.col_of(l, 2 * h) + 1 &&
               s.c.col_of(l, 2 * h) % 2 == 0;
  ir::Value pairs = detail::c_vectors_ok(a, 2);
  auto store = [&] {
    for (uint32_t mi = 0; mi < mt; ++mi)
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (uint32_t r = 0; r < 4; r += paired ? 2 : 1) {
          ir::Value row = m0 + wm0 + acc.row(lane, mi, r);
          ir::Value col = n0 + wn0 + acc.col(lane, ni, r);
          if (paired)
            b.if_(row < a.m, [&] { detail::store_c_vec(b, a, c, pairs, row, col, {acc.at(0, mi, ni, r), acc.at(0, mi, ni, r + 1)}); });
          else
            b.if_(row < a.m && col < a.n, [&] { detail::store_c(b, a, c, row, col, acc.at(0, mi, ni, r)); });
        }
  };
  if (v.warp_k == 1) {
    store();
    return b.build();
  }
  // warp_k > 1: the warps of slices 1.. leave their accumulators in shared memory, register
  // by register (red[(slice - 1) * tile_warps + tile][register][lane]: no bank conflicts);
  // slice 0's warp adds them in slice order and stores.
  const uint32_t regs = mt * nt * 4;
  ir::Value red = b.shared<float>(reduce_floats(v));
  b.if_(wk > 0u, [&] {
    ir::Value at = ((wk - 1u) * tile_warps + wt) * (regs * 32) + lane;
    for (uint32_t mi = 0; mi < mt; ++mi)
      for (uint32_t ni = 0; ni < nt; ++ni)
        for (uint32_t r = 0; r < 4; ++r) red[at + ((mi * nt + ni) * 4 + r) * 32] = acc.at(0, mi, ni, r);
  });
  b.barrier();
  b.if_(wk == 0u, [&] {
    for (uint32_t s = 1; s < v.warp_k; ++s) {
      ir::Value at = ((s - 1) * tile_warps + wt) * (regs * 32) + lane;
      for (uint32_t mi = 0; mi < mt; ++mi)
        for (uint32_t ni = 0; ni < nt; ++ni)
          for (uint32_t r = 0; r < 4; ++r) {
            ir::Var x = acc.at(0, mi, ni, r);
            x = ir::Value(x) + red[at + ((mi * nt + ni) * 4 + r) * 32];
          }
    }
    store();
  });
  return b.build();
}


}  // namespace

namespace {

bool valid(const MatmulVariant& v, std::string* why) {
  if (detail::warp_tile_threads(v) > 1024) return detail::refuse(v, why, "(BM / warp_m) x (BN / warp_n) warps must be at most 32");
  if (v.stages < 2 || v.stages > 8) return detail::refuse(v, why, "2 to 8 stages");
  return true;
}

bool can_implement(const MatmulVariant& v, const MatmulProblem& p, int sm, std::string* why) {
  if (sm < 80) return detail::refuse(v, why, "mma.sync needs sm_80 or newer, the device is sm_" + std::to_string(sm));
  if (!detail::mma_types_ok(v, p, why) || !detail::vector_rows_ok(v, p, why)) return false;
  // the stages must fit in a block's shared memory
  const uint32_t need = matmul_async_shared_bytes(v, p.in, p.a, p.b) + reduce_floats(v) * 4;
  // the device's limit, and sm_80's: one kernel serves every sm >= 80 and is built (and
  // checked) for sm_80
  const uint32_t dev = jit::device_info_for("sm_" + std::to_string(sm)).smem_per_block_optin;
  const uint32_t have = std::min(dev, jit::device_info_for("sm_80").smem_per_block_optin);
  const int limiting = have == dev ? sm : 80;
  if (need > have)
    return detail::refuse(v, why, "its stages need " + std::to_string(need) + " bytes of shared memory, sm_" + std::to_string(limiting) +
                                      " gives a block at most " + std::to_string(have));
  return true;
}

jit::LaunchConfig launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  return detail::tiled_launch_config(v, p, stream, matmul_async_shared_bytes(v, p.in, p.a, p.b));
}

}  // namespace

namespace detail {
extern const MatmulEngineDef kMatmulEngineMmaAsync = {.name = "MmaAsync", .build_sm = 80, .threads = warp_tile_threads, .valid = valid,
                                                 .can_implement = can_implement, .build = build_matmul_mma_async,
                                                 .launch_config = launch_config, .launch = launch_with_config, .declare = declare_mma};
}  // namespace detail

}  // namespace kaio::ops
