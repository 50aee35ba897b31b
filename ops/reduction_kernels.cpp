// The reduction kernels: along rows (a warp or a block per row) and over a whole array
// (deterministic: fixed split, the last block combines the block results in order).
#include <cmath>
#include <limits>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ops/access.h"
#include "kaio/ops/reduction.h"

namespace kaio::ops {

namespace {

using detail::ArrayAccess;
using detail::log2_of;
using ir::Value;
using ir::Var;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint32_t kUnroll = 4;  // vectors in flight per thread in the main loops

float identity(Reduce op) { return op == Reduce::Max || op == Reduce::ArgMax ? -kInf : op == Reduce::Min ? kInf : 0.0f; }

// One thread's running result; for argmax also the index of the best value so far.
struct Acc {
  Reduce op;
  Var val;
  Var idx;

  Acc(ir::KernelBuilder& b, Reduce o)
      : op(o), val(b.var<float>(identity(o))), idx(b.var<uint32_t>(0xffffffffu)) {}

  // Elements must arrive in increasing index order (ties keep the first).
  void add(Value v, Value index) {
    switch (op) {
      case Reduce::Sum:
      case Reduce::Mean: val += v; break;
      case Reduce::Max: val = ir::max(val.get(), v); break;
      case Reduce::Min: val = ir::min(val.get(), v); break;
      case Reduce::ArgMax: {
        Value cur = val.get();
        // NaN is the largest value; the first element always replaces the identity (a row of
        // -inf has its maximum at 0).
        Value better = v > cur || (ir::isnan(v) && !ir::isnan(cur)) || idx.get() == 0xffffffffu;
        val = ir::select(better, v, cur);
        idx = ir::select(better, index, idx.get());
        break;
      }
    }
  }
};

// (a, ia) vs (b, ib) for argmax: true when b wins (larger, NaN largest, lower index on ties).
Value b_wins(Value a, Value ia, Value bv, Value ib) {
  Value an = ir::isnan(a), bn = ir::isnan(bv);
  Value same = bv == a || (an && bn);
  return (bv > a) || (bn && !an) || (same && ib < ia);
}

// Argmax over a warp: every lane ends with the warp's (value, index).
void warp_argmax(Value& v, Value& i) {
  for (uint32_t d = 16; d >= 1; d /= 2) {
    Value ov = ir::shfl_xor(v, d), oi = ir::shfl_xor(i, d);
    Value take = b_wins(v, i, ov, oi);
    v = ir::select(take, ov, v);
    i = ir::select(take, oi, i);
  }
}

// The team's result (every thread of the team gets it). team 32: the warp; else the block.
void team_reduce(ir::KernelBuilder& b, Reduce op, uint32_t team, Value& v, Value& i) {
  if (op == Reduce::ArgMax) {
    warp_argmax(v, i);
    if (team == 32) return;
    Value sv = b.shared<float>(32), si = b.shared<uint32_t>(32);
    Value lane = b.lane_id(), wid = b.warp_id();
    b.if_(lane == 0u, [&] {
      sv[wid] = v;
      si[wid] = i;
    });
    b.barrier();
    Var pv = b.var<float>(-kInf), pi = b.var<uint32_t>(0xffffffffu);
    b.if_(lane < team / 32, [&] {
      pv = sv[lane];
      pi = si[lane];
    });
    v = pv.get();
    i = pi.get();
    warp_argmax(v, i);
    return;
  }
  const bool warp = team == 32;
  switch (op) {
    case Reduce::Max: v = warp ? b.warp_reduce_max(v) : b.block_reduce_max(v); break;
    case Reduce::Min: v = warp ? b.warp_reduce_min(v) : b.block_reduce_min(v); break;
    default: v = warp ? b.warp_reduce_sum(v) : b.block_reduce_sum(v); break;
  }
}

// Adds the W elements loaded from element `e` (their column/position is `index0` + w).
void add_chunk(Acc& acc, const std::vector<Value>& vals, Value index0) {
  for (size_t w = 0; w < vals.size(); ++w) acc.add(vals[w], w == 0 ? index0 : index0 + static_cast<uint32_t>(w));
}

// Walks vectors v = first, first + stride, ... < nv of an array (elements base + v * W),
// kUnroll vectors at a time while they last, then one at a time. `index` maps a vector
// number to the u32 index of its first element (argmax only).
void stream_vectors(ir::KernelBuilder& b, const ArrayAccess& x, Acc& acc, Value base, Value first, Value stride,
                    Value nv) {
  const uint32_t lw = log2_of(x.vec());
  Var v = b.var(ir::Type::scalar(ir::Scalar::U64), first);
  auto index_of = [&](Value vi) { return ir::cast<uint32_t>(vi << uint64_t(lw)); };
  b.while_([&] { return v.get() + stride * uint64_t(kUnroll - 1) < nv; }, [&] {
    Value v0 = v.get();
    std::vector<std::vector<Value>> vals;
    for (uint32_t k = 0; k < kUnroll; ++k) {
      Value vk = k == 0 ? v0 : v0 + stride * uint64_t(k);
      vals.push_back(x.load_at(base + (vk << uint64_t(lw))));
    }
    auto add_all = [&] {
      for (uint32_t k = 0; k < kUnroll; ++k) {
        Value vk = k == 0 ? v0 : v0 + stride * uint64_t(k);
        add_chunk(acc, vals[k], index_of(vk));
      }
    };
    if (acc.op == Reduce::ArgMax) {
      // The exact argmax step costs ~8 instructions per element, which makes 16-bit rows
      // compute-bound. Two per element decide what this chunk does: its max (max.f32 ignores
      // NaN) and fma(v, 0, s), NaN when a value is NaN or +-inf. A chunk with a NaN or an inf
      // takes the exact step. Any other chunk wins only if its max is above the running value
      // (ties keep the earlier index), or is the thread's first: then its max is the value
      // and the index is that of its first element equal to the max (a scan from the last
      // element down, two instructions per element), so no chunk of finite values takes the
      // exact step, not even the first.
      Value m, z;
      for (const std::vector<Value>& vk : vals)
        for (Value x : vk) {
          m = m.valid() ? ir::max(m, x) : x;
          z = z.valid() ? ir::fma(x, 0.0f, z) : x * 0.0f;
        }
      b.if_(ir::isnan(z), add_all).else_([&] {
        b.if_(m > acc.val.get() || acc.idx.get() == 0xffffffffu, [&] {
          Value i;
          for (uint32_t k = kUnroll; k-- > 0;) {
            Value i0 = index_of(k == 0 ? v0 : v0 + stride * uint64_t(k));
            for (size_t w = vals[k].size(); w-- > 0;) {
              Value iw = w == 0 ? i0 : i0 + static_cast<uint32_t>(w);
              i = i.valid() ? ir::select(vals[k][w] == m, iw, i) : iw;  // the last element: where no earlier one equals m
            }
          }
          acc.val = m;
          acc.idx = i;
        });
      });
    } else {
      add_all();
    }
    v = v0 + stride * uint64_t(kUnroll);
  });
  b.while_([&] { return v.get() < nv; }, [&] {
    Value v0 = v.get();
    add_chunk(acc, x.load_at(base + (v0 << uint64_t(lw))), index_of(v0));
    v = v0 + stride;
  });
}

std::string kernel_name(const char* what, ir::Scalar dtype, Reduce op, uint32_t team, uint32_t vec) {
  std::string s = std::string(what) + "_" + reduce_name(op) + "_" + ir::scalar_name(dtype);
  if (team) s += "_t" + std::to_string(team);
  return s + "_v" + std::to_string(vec);
}

}  // namespace

const char* reduce_name(Reduce op) {
  switch (op) {
    case Reduce::Sum: return "sum";
    case Reduce::Max: return "max";
    case Reduce::Min: return "min";
    case Reduce::Mean: return "mean";
    case Reduce::ArgMax: return "argmax";
  }
  return "?";
}

ir::Kernel build_reduce_rows(const RowReduceConfig& c) {
  detail::check_float_dtype("reduce_rows", "dtype", c.dtype);
  if (c.team != 32 && c.team != 128 && c.team != 256 && c.team != 1024)
    throw UsageError("", "reduce_rows", "team " + std::to_string(c.team) + " is not one of 32, 128, 256, 1024");
  ir::KernelBuilder b(kernel_name("reduce_rows", c.dtype, c.op, c.team, c.vec));
  ArrayAccess x = ArrayAccess::declare(b, "x", c.dtype, c.vec, true);
  x.declare_elements(b);
  Value out = c.op == Reduce::ArgMax ? b.param<int64_t*>("out") : b.param<float*>("out");
  Value rows = b.param<uint32_t>("rows");
  Value cols = b.param<uint32_t>("cols");
  Value ld = b.param<uint64_t>("ld");
  const bool warp = c.team == 32;
  Value t = warp ? b.lane_id() : b.thread_idx_x();
  Value row = warp ? b.block_idx_x() * 8u + b.warp_id() : b.block_idx_x();
  b.if_(row < rows, [&] {  // uniform for a block per row, per warp for a warp per row
    Value base = ir::cast<uint64_t>(row) * ld;
    Value nv = ir::cast<uint64_t>(cols) >> uint64_t(log2_of(c.vec));
    Acc acc(b, c.op);
    stream_vectors(b, x, acc, base, ir::cast<uint64_t>(t), b.constant<uint64_t>(c.team), nv);
    if (c.vec > 1) {  // the last cols % vec elements
      Value col = ir::cast<uint32_t>(nv << uint64_t(log2_of(c.vec))) + t;
      b.if_(col < cols, [&] { acc.add(x.load_element(base + ir::cast<uint64_t>(col)), col); });
    }
    Value v = acc.val.get(), i = acc.idx.get();
    team_reduce(b, c.op, c.team, v, i);
    b.if_(t == 0u, [&] {
      if (c.op == Reduce::ArgMax) out[row] = ir::cast<int64_t>(i);
      else if (c.op == Reduce::Mean) out[row] = v / ir::cast<float>(cols);
      else out[row] = v;
    });
  });
  b.launch_bounds(warp ? 256 : c.team);
  return b.build();
}

ir::Kernel build_reduce_all(const ReduceAllConfig& c) {
  detail::check_float_dtype("reduce", "dtype", c.dtype);
  if (c.op != Reduce::Sum && c.op != Reduce::Max && c.op != Reduce::Min)
    throw UsageError("", "reduce", std::string("op ") + reduce_name(c.op) + ": a whole-array reduction is sum, max or min");
  constexpr uint32_t B = 256;
  ir::KernelBuilder b(kernel_name("reduce_all", c.dtype, c.op, 0, c.vec));
  ArrayAccess x = ArrayAccess::declare(b, "x", c.dtype, c.vec, true);
  x.declare_elements(b);
  Value out = b.param<float*>("out");
  Value partials = b.param<float*>("partials");
  Value counter = b.param<uint32_t*>("counter");
  Value n = b.param<uint64_t>("n");
  Value tid = b.thread_idx_x();
  Value bid = b.block_idx_x();
  Value grid = b.grid_dim_x();
  Value nv = n >> uint64_t(log2_of(c.vec));
  Value stride = ir::cast<uint64_t>(grid) * uint64_t(B);
  Acc acc(b, c.op);
  stream_vectors(b, x, acc, b.constant<uint64_t>(0), ir::cast<uint64_t>(bid) * uint64_t(B) + ir::cast<uint64_t>(tid),
                 stride, nv);
  if (c.vec > 1) {  // the last n % vec elements: block 0
    Value e = (nv << uint64_t(log2_of(c.vec))) + ir::cast<uint64_t>(tid);
    b.if_(bid == 0u && e < n, [&] { acc.add(x.load_element(e), ir::cast<uint32_t>(e)); });
  }
  Value v = acc.val.get(), unused = acc.idx.get();
  team_reduce(b, c.op, B, v, unused);
  b.if_(grid == 1u, [&] {
    b.if_(tid == 0u, [&] { out[0] = v; });
  }).else_([&] {
    // Block results to `partials`; the last block to finish (an integer counter) combines
    // them in index order and resets the counter for the next call.
    Value last = b.shared<uint32_t>(1);
    b.if_(tid == 0u, [&] {
      partials[bid] = v;
      b.fence(ir::FenceScope::Gpu);
      Value done = ir::atomic_add(counter, 0u, 1u);
      b.if_(done == grid - 1u, [&] { last[0u] = 1u; }).else_([&] { last[0u] = 0u; });
    });
    b.barrier();
    Value is_last = last[0u];
    b.if_(is_last == 1u, [&] {
      b.fence(ir::FenceScope::Gpu);
      Acc all(b, c.op);
      b.for_(tid, grid, B, [&](Value i) {
        Value p = ir::load(partials, i, ir::CacheHint::Global);  // L2: written by other blocks
        all.add(p, i);
      });
      Value r = all.val.get(), unused2 = all.idx.get();
      team_reduce(b, c.op, B, r, unused2);
      b.if_(tid == 0u, [&] {
        out[0] = r;
        counter[0] = 0u;
      });
    });
  });
  b.launch_bounds(B);
  return b.build();
}

}  // namespace kaio::ops
