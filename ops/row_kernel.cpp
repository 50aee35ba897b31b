#include "kaio/ops/row_kernel.h"

#include <algorithm>
#include <cmath>

namespace kaio::ops {

using ir::Scalar;
using ir::Value;

std::string RowKernelConfig::suffix() const {
  std::string s = std::string("_") + ir::scalar_name(dtype) + "_v" + std::to_string(vec) + "_t" + std::to_string(team);
  s += items ? "_i" + std::to_string(items) : std::string("_s");
  if (phase) s += "_p" + std::to_string(phase);
  if (persist) s += "_pf";
  if (stage) s += "_sh";
  return s;
}

RowKernelConfig row_kernel_config(ir::Scalar dtype, const RowPlan& plan, uint32_t phase) {
  const bool persist = plan.persist && plan.items > 0 && plan.split == 1;
  return RowKernelConfig{dtype, plan.vec, plan.team, plan.items, plan.split > 1 ? phase : 0u, plan.stage, persist};
}

std::vector<RowKernelConfig> common_row_configs(bool with_split) {
  std::vector<RowKernelConfig> out;
  auto add = [&](const RowKernelConfig& c) {
    for (const RowKernelConfig& o : out)
      if (o.fields() == c.fields()) return;
    out.push_back(c);
  };
  for (Scalar s : {Scalar::F32, Scalar::F16, Scalar::BF16}) {
    const uint32_t wide = 16 / static_cast<uint32_t>(ir::scalar_bytes(s));
    // 16-byte accesses: the buckets of 128 .. 16384 columns (many rows), a streamed row
    // (vocabulary-sized softmax) and a split one (few long rows).
    for (uint32_t cols = 128; cols <= 16384; cols *= 2) add(row_kernel_config(s, plan_rows(4096, cols, wide)));
    add(row_kernel_config(s, plan_rows(4096, 8192, wide, 0, RowHolds::AtMostOneVector)));  // softmax, rms_norm
    add(row_kernel_config(s, plan_rows(4096, 32768, wide)));    // staged (vocabulary-sized softmax)
    add(row_kernel_config(s, plan_rows(4096, 1u << 18, wide)));  // streamed
    // Scalar accesses (misaligned or odd rows): a short, a model-sized, a staged and a
    // streamed row.
    for (uint32_t cols : {100u, 4095u, 32001u, 1u << 16}) add(row_kernel_config(s, plan_rows(4096, cols, 1)));
    if (with_split) {
      for (uint32_t vec : {wide, 1u}) {
        RowPlan p = plan_rows(1, 1u << 20, vec);
        add(row_kernel_config(s, p, 1));
        add(row_kernel_config(s, p, 2));
      }
    }
  }
  return out;
}

jit::LaunchConfig row_launch(const RowKernelConfig& c, uint32_t rows, uint32_t cols, uint32_t split,
                             const jit::Stream* stream) {
  if (c.phase) return jit::LaunchConfig{.grid = {split, rows}, .block = {c.team}, .stream = stream};
  const uint32_t per_block = c.block() / c.team;
  uint32_t blocks = (rows + per_block - 1) / per_block;
  if (c.persist) {  // the blocks that stay resident (launch bounds: 1024 threads per SM)
    const uint32_t resident = detail::sm_count() * std::max(1u, 1024u / c.block());
    blocks = std::min(blocks, resident);
  }
  return jit::LaunchConfig{.grid = {blocks}, .block = {c.block()},
                           .shared_bytes = c.stage ? cols * 4u : 0u, .stream = stream};
}

ir::Type row_pointer(const RowKernelConfig& c, bool read_only) {
  return ir::Type::pointer(detail::access_type(c.dtype, c.vec), read_only);
}

RowKernel::RowKernel(ir::KernelBuilder& b, const RowKernelConfig& c) : b_(b), c_(c), f32_(ir::Type::scalar(Scalar::F32)) {
  // At least 1024 resident threads per multiprocessor: ptxas keeps each thread in 64
  // registers, which the plan's 16 values per thread allow.
  b_.launch_bounds(c.block(), c.block() >= 1024 ? 1 : 1024 / c.block());
  if (c.stage) stage_ = b_.dynamic_shared<float>();
}

void RowKernel::rows(Value rows, const std::function<void(Value row, Value t)>& body) {
  if (c_.phase) {  // split rows: grid (parts, rows), one block per part
    t_ = b_.thread_idx_x();
    body(b_.block_idx_y(), t_);
  } else if (c_.team == 32) {  // a warp per row, several rows per block
    t_ = b_.lane_id();
    Value row = b_.block_idx_x() * (c_.block() / 32) + b_.warp_id();
    b_.if_(row < rows, [&] { body(row, t_); });  // warp-uniform: the warp's shuffles stay whole
  } else {  // a block per row: the grid has exactly `rows` blocks
    t_ = b_.thread_idx_x();
    body(b_.block_idx_x(), t_);
  }
}

void RowKernel::persistent_rows(Value rows, Value cols, const std::vector<Source>& src,
                                const std::function<void(Value row, Value t, std::vector<RowChunk>& in)>& body) {
  Value team, teams;
  if (c_.team == 32) {  // warps: several teams per block, the loop stays warp-uniform
    const uint32_t per_block = c_.block() / 32;
    t_ = b_.lane_id();
    team = b_.block_idx_x() * per_block + b_.warp_id();
    teams = b_.grid_dim_x() * per_block;
  } else {  // blocks: the loop is block-uniform, so the reductions' barriers are reached by all
    t_ = b_.thread_idx_x();
    team = b_.block_idx_x();
    teams = b_.grid_dim_x();
  }
  const RowChunk where = columns(b_.constant<uint32_t>(0), cols, c_.items);
  std::vector<ir::RegArray> cur, next;
  for (const Source& s : src) {
    cur.push_back(raw_array(s.p.type().elem, c_.items));
    next.push_back(raw_array(s.p.type().elem, c_.items));
  }
  auto issue = [&](std::vector<ir::RegArray>& dst, Value row) {
    for (size_t i = 0; i < src.size(); ++i) load_raw(dst[i], where, src[i].p, row_base(row, src[i].stride));
  };
  b_.if_(team < rows, [&] { issue(cur, team); });
  ir::Var row = b_.var<uint32_t>(team);
  parity_ = b_.var<uint32_t>(0u);
  // rows < 2^32 - teams (a row op of 2^32 rows would not fit in memory), so row + teams
  // does not wrap.
  b_.while_([&] { return row.get() < rows; }, [&] {
    Value r = row.get();
    Value n = r + teams;
    b_.if_(n < rows, [&] { issue(next, n); });  // in flight during body's reductions
    std::vector<RowChunk> in;
    for (size_t i = 0; i < src.size(); ++i) in.push_back(widen(cur[i], src[i].p.type().elem, where));
    body(r, t_, in);
    for (size_t i = 0; i < src.size(); ++i)
      for (size_t j = 0; j < cur[i].size(); ++j) cur[i][j] = next[i][j].get();
    row = n;
    parity_->operator=(parity_->get() ^ 1u);
  });
  parity_.reset();
}

Value RowKernel::block_reduce(bool sum, Value v) const {
  // Each warp reduces; lane 0 of each writes its partial to this row's half of the slots;
  // after one barrier every warp reduces the partials. The next row uses the other half,
  // and the row after it passes this reduction's barrier of the next row first, by which
  // time every warp has read its partials: no second barrier.
  auto op = [&](Value a, Value b) { return sum ? a + b : ir::max(a, b); };
  Value w = sum ? b_.warp_reduce_sum(v) : b_.warp_reduce_max(v);
  const uint32_t warps = c_.block() / 32;
  Value slots = b_.shared<float>(64);
  Value lane = b_.lane_id();
  Value half = parity_->get() * 32u;
  b_.if_(lane == 0u, [&] { slots[half + b_.warp_id()] = w; });
  b_.barrier();
  // Lane l reads partial l mod warps (warps is a power of two), so each group of `warps`
  // lanes holds all partials and the butterfly leaves the total in every lane.
  Value acc = slots[half + (lane & (warps - 1))];
  for (uint32_t m = warps / 2; m >= 1; m /= 2) acc = op(acc, ir::shfl_xor(acc, m));
  return acc;
}

Value RowKernel::row_base(Value row, Value stride) const { return ir::cast<uint64_t>(row) * stride; }

RowChunk RowKernel::load(Value p, Value base, Value first, Value limit, uint32_t n) const {
  return load_like(columns(first, limit, n), p, base);
}

void RowKernel::stage_store(const RowChunk& ch) const {
  for (uint32_t k = 0; k < ch.n; ++k) {
    b_.if_(ch.valid[k], [&] {
      for (uint32_t e = 0; e < c_.vec; e += 4) {
        if (c_.vec == 1) {
          stage_[ch.col[k]] = ch.at(k, 0);
          break;
        }
        std::vector<Value> v;
        for (uint32_t j = 0; j < 4; ++j) v.push_back(ch.at(k, e + j));
        ir::store_vec(stage_, e ? ch.col[k] + e : ch.col[k], v);
      }
    });
  }
}

RowChunk RowKernel::stage_load(const RowChunk& where) const {
  RowChunk ch{b_.array<float>(where.n * c_.vec, 0.0f), where.valid, where.col, where.n, c_.vec};
  for (uint32_t k = 0; k < where.n; ++k) {
    b_.if_(where.valid[k], [&] {
      for (uint32_t e = 0; e < c_.vec; e += 4) {
        if (c_.vec == 1) {
          Value v = stage_[where.col[k]];
          ch.var(k, 0) = v;
          break;
        }
        std::vector<Value> v = ir::load_vec(stage_, e ? where.col[k] + e : where.col[k], 4);
        for (uint32_t j = 0; j < 4; ++j) ch.var(k, e + j) = v[j];
      }
    });
  }
  return ch;
}

RowChunk RowKernel::columns(Value first, Value limit, uint32_t n) const {
  RowChunk ch{std::nullopt, {}, {}, n, c_.vec};
  Value lane_col = first + t_ * c_.vec;
  for (uint32_t k = 0; k < n; ++k) {
    Value col = k ? lane_col + k * c_.team * c_.vec : lane_col;
    ch.col.push_back(col);
    ch.valid.push_back(col < limit);
  }
  return ch;
}

Value RowKernel::load_first(Value p, Value base) const {
  if (p.type().elem == Scalar::F32) return p[base];
  if (c_.vec == 1) return ir::cast(p[base], f32_);
  Value pair = p[base >> 1u];  // vector rows start on an even element
  return ir::cast(ir::unpack_lo(pair), f32_);
}

Value RowKernel::round_trip(Value v) const {
  if (c_.dtype == Scalar::F32) return v;
  return ir::cast(ir::cast(v, ir::Type::scalar(c_.dtype), ir::Rounding::Rn), f32_);
}

RowChunk RowKernel::load_like(const RowChunk& where, Value p, Value base) const {
  // Every access of the chunk is issued before any loaded value is used (the unpacking
  // sits after the last load), so a thread has all its loads in flight at once.
  ir::RegArray raw = raw_array(p.type().elem, where.n);
  load_raw(raw, where, p, base);
  return widen(raw, p.type().elem, where);
}

ir::RegArray RowKernel::raw_array(Scalar elem, uint32_t n) const {
  const uint32_t per = c_.vec == 1 ? 1 : 4;  // registers per access: 4 x 32 bits, or one element
  const ir::Type raw_t = ir::Type::scalar(elem);
  return b_.array(raw_t, n * per, b_.constant(raw_t, ir::Literal{ir::Literal::Float, 0, 0, 0.0}, "load"));
}

void RowKernel::load_raw(const ir::RegArray& raw, const RowChunk& where, Value p, Value base) const {
  const Scalar elem = p.type().elem;
  for (uint32_t k = 0; k < where.n; ++k) {
    b_.if_(where.valid[k], [&] {
      Value idx = base + ir::cast<uint64_t>(where.col[k]);
      if (c_.vec == 1) {
        Value v = p[idx];
        raw[k] = v;
      } else {
        std::vector<Value> v = ir::load_vec(p, elem == Scalar::F32 ? idx : idx >> 1u, 4);
        for (uint32_t j = 0; j < 4; ++j) raw[k * 4 + j] = v[j];
      }
    });
  }
}

RowChunk RowKernel::widen(const ir::RegArray& raw, Scalar elem, const RowChunk& where) const {
  if (elem == Scalar::F32) return RowChunk{raw, where.valid, where.col, where.n, c_.vec};
  RowChunk ch{b_.array<float>(where.n * c_.vec, 0.0f), where.valid, where.col, where.n, c_.vec};
  for (uint32_t k = 0; k < where.n; ++k) {
    if (c_.vec == 1) {
      ch.var(k, 0) = ir::cast(raw[k].get(), f32_);
      continue;
    }
    for (uint32_t j = 0; j < 4; ++j) {  // f16x2/bf16x2 pairs: eight elements per access
      Value pair = raw[k * 4 + j];
      if (elem == Scalar::BF16x2) {
        // A bf16 is the high half of its f32 (exactly): one shift or one and per element,
        // where the conversion of the high half costs an extract and a shift.
        Value u = ir::bitcast(pair, Scalar::U32);
        ch.var(k, 2 * j) = ir::bitcast(u << 16u, Scalar::F32);
        ch.var(k, 2 * j + 1) = ir::bitcast(u & 0xffff0000u, Scalar::F32);
        continue;
      }
      ch.var(k, 2 * j) = ir::cast(ir::unpack_lo(pair), f32_);
      ch.var(k, 2 * j + 1) = ir::cast(ir::unpack_hi(pair), f32_);
    }
  }
  return ch;
}

void RowKernel::store(Value p, Value base, const RowChunk& where,
                      const std::function<Value(uint32_t k, uint32_t e)>& value) const {
  const ir::Type dt = ir::Type::scalar(c_.dtype);
  auto round = [&](Value v) { return c_.dtype == Scalar::F32 ? v : ir::cast(v, dt, ir::Rounding::Rn); };
  const Scalar elem = p.type().elem;
  for (uint32_t k = 0; k < where.n; ++k) {
    b_.if_(where.valid[k], [&] {
      Value idx = base + ir::cast<uint64_t>(where.col[k]);
      if (c_.vec == 1) {
        p[idx] = round(value(k, 0));
      } else if (elem == Scalar::F32) {
        std::vector<Value> v;
        for (uint32_t e = 0; e < 4; ++e) v.push_back(value(k, e));
        ir::store_vec(p, idx, v);
      } else {
        std::vector<Value> v;
        for (uint32_t j = 0; j < 4; ++j) {
          Value lo = round(value(k, 2 * j));
          Value hi = round(value(k, 2 * j + 1));
          v.push_back(ir::pack2(lo, hi));
        }
        ir::store_vec(p, idx >> 1u, v);
      }
    });
  }
}

Value RowKernel::thread_sum(const RowChunk& c, const std::function<Value(uint32_t, uint32_t)>& f) const {
  Value acc;
  for (uint32_t k = 0; k < c.n; ++k) {
    Value s = f(k, 0);
    for (uint32_t e = 1; e < c.vec; ++e) s = s + f(k, e);
    s = ir::select(c.valid[k], s, 0.0f);
    acc = k ? acc + s : s;
  }
  return acc;
}

Value RowKernel::thread_max(const RowChunk& c) const {
  Value acc;
  for (uint32_t k = 0; k < c.n; ++k) {
    Value m = c.at(k, 0);
    for (uint32_t e = 1; e < c.vec; ++e) m = ir::max(m, c.at(k, e));
    m = ir::select(c.valid[k], m, -INFINITY);
    acc = k ? ir::max(acc, m) : m;
  }
  return acc;
}

Value RowKernel::team_sum(Value v) const {
  if (c_.team == 32) return b_.warp_reduce_sum(v);
  return parity_ ? block_reduce(true, v) : b_.block_reduce_sum(v);
}
Value RowKernel::team_max(Value v) const {
  if (c_.team == 32) return b_.warp_reduce_max(v);
  return parity_ ? block_reduce(false, v) : b_.block_reduce_max(v);
}

void RowKernel::stream(Value lo, Value hi, const std::function<void(Value first)>& body) const {
  b_.for_(lo, hi, chunk_cols(), body);
}

}  // namespace kaio::ops
