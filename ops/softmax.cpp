#include "kaio/ops/softmax.h"

#include <cmath>
#include <string>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

namespace {

using ir::Value;

// The exponent offset for a running max: 0 while the max is -inf, so that exp(-inf - 0)
// gives 0 instead of exp(-inf + inf) = NaN (rows that start with masked -inf values).
Value safe(Value m) { return ir::select(m == -INFINITY, 0.0f, m); }

// exp(d) of one element's difference d = x - max <= 0. f32 rows: the IR's exp (<= 4 ulp).
// 16-bit rows: ex2.approx of d log2 e, relative error <= 2^-23 |d| + 2^-22 (2^-19 at
// d = -16, past which the result is below 1e-7), far below half an ulp of f16 (2^-12) or
// bf16; about 4 instructions instead of 10, which keeps the 16-bit rows at memory speed.
Value exp_elem(ir::Scalar dtype, Value d) {
  return dtype == ir::Scalar::F32 ? ir::exp(d) : ir::exp2(d * 1.44269504088896341f);
}

// Folds a chunk into this thread's running (max, rescaled sum).
void online_update(const RowKernel& rk, const RowChunk& ch, ir::Var& mv, ir::Var& sv) {
  Value m_old = mv;
  Value m_new = ir::max(m_old, rk.thread_max(ch));
  Value ms = safe(m_new);
  const ir::Scalar dt = rk.config().dtype;
  Value add = rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return exp_elem(dt, ch.at(k, e) - ms); });
  Value s_old = sv;
  sv = s_old * ir::exp(m_old - ms) + add;
  mv = m_new;
}

// Combines per-thread (max, sum) pairs over the team: every thread gets the row's pair.
std::pair<Value, Value> team_combine(const RowKernel& rk, Value m, Value s) {
  Value M = rk.team_max(m);
  Value S = rk.team_sum(s * ir::exp(m - safe(M)));
  return {M, S};
}

// The kernels' parameters, declared by build and packed by run.
struct SoftmaxSignature {
  kernel::Ptr x{"x"}, y{"y"}, workspace{"workspace", ir::Scalar::F32};
  kernel::Param<uint32_t> rows{"rows"}, cols{"cols"};
  kernel::Param<uint64_t> x_stride{"x_stride"}, y_stride{"y_stride"};
  kernel::Param<uint32_t> span{"span"}, split{"split"};
  explicit SoftmaxSignature(ir::Scalar access) {  // the row pointers' element (pairs for 16-bit vectors)
    x.elem = y.elem = access;
    x.is_const = true;
  }
  auto fields() { return std::tie(x, y, workspace, rows, cols, x_stride, y_stride, span, split); }
};

ir::Kernel build(const RowKernelConfig& c, bool log) {
  detail::check_dtype(log ? "log_softmax" : "softmax", "x", c.dtype);
  ir::KernelBuilder b(std::string(log ? "log_softmax" : "softmax") + c.suffix());
  SoftmaxSignature sig(detail::access_type(c.dtype, c.vec));
  kernel::declare(b, sig);
  Value x = sig.x.ir, y = sig.y.ir, ws = sig.workspace.ir, rows = sig.rows.ir, cols = sig.cols.ir;
  Value xs = sig.x_stride.ir, ys = sig.y_stride.ir, span = sig.span.ir, split = sig.split.ir;
  RowKernel rk(b, c);
  auto out = [&](const RowChunk& ch, Value M, Value S) {
    if (log) {
      Value off = M + ir::log(S);
      return std::function<Value(uint32_t, uint32_t)>([&ch, off](uint32_t k, uint32_t e) { return ch.at(k, e) - off; });
    }
    Value inv = 1.0f / S;
    const ir::Scalar dt = c.dtype;
    return std::function<Value(uint32_t, uint32_t)>(
        [&ch, M, inv, dt](uint32_t k, uint32_t e) { return exp_elem(dt, ch.at(k, e) - M) * inv; });
  };
  // The row in registers (read once): its max, then the sum of the exponentials.
  auto in_registers = [&](Value row, RowChunk& ch) {
    Value yb = rk.row_base(row, ys);
    Value M = rk.team_max(rk.thread_max(ch));
    if (log) {
      Value S = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return exp_elem(c.dtype, ch.at(k, e) - M); }));
      rk.store(y, yb, ch, out(ch, M, S));
      return;
    }
    // The exponentials replace the inputs in registers: one exp per element.
    for (uint32_t k = 0; k < c.items; ++k)
      for (uint32_t e = 0; e < c.vec; ++e) ch.var(k, e) = exp_elem(c.dtype, ch.at(k, e) - M);
    Value S = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e); }));
    Value inv = 1.0f / S;
    rk.store(y, yb, ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e) * inv; });
  };
  if (c.persist) {  // teams loop over rows, the next row's loads in flight
    rk.persistent_rows(rows, cols, {{x, xs}},
                       [&](Value row, Value, std::vector<RowChunk>& in) { in_registers(row, in[0]); });
    return b.build();
  }
  rk.rows(rows, [&](Value row, Value t) {
    Value xb = rk.row_base(row, xs), yb = rk.row_base(row, ys);
    if (c.items) {
      RowChunk ch = rk.load(x, xb, b.constant<uint32_t>(0), cols, c.items);
      in_registers(row, ch);
      return;
    }
    // Streamed: the columns [lo, hi) of this block (the whole row unless split).
    Value lo = b.constant<uint32_t>(0), hi = cols;
    if (c.phase) {
      lo = b.block_idx_x() * span;
      hi = ir::min(cols, lo + span);
    }
    Value M, S;
    if (c.phase != 2) {
      ir::Var mv = b.var<float>(-INFINITY), sv = b.var<float>(0.0f);
      rk.stream(lo, hi, [&](Value first) {
        RowChunk ch = rk.load(x, xb, first, hi, rk.chunk_items());
        if (c.stage) rk.stage_store(ch);
        online_update(rk, ch, mv, sv);
      });
      std::tie(M, S) = team_combine(rk, mv, sv);
      if (c.phase == 1) {  // this part's statistics for the second kernel
        Value slot = (ir::cast<uint64_t>(row) * ir::cast<uint64_t>(split) + ir::cast<uint64_t>(b.block_idx_x())) * 2u;
        b.if_(t == 0u, [&] {
          ws[slot] = M;
          ws[slot + 1u] = S;
        });
        return;
      }
    } else {  // the row's statistics from its parts' (at most one per thread)
      ir::Var pm = b.var<float>(-INFINITY), ps = b.var<float>(0.0f);
      b.if_(t < split, [&] {
        Value s0 = (ir::cast<uint64_t>(row) * ir::cast<uint64_t>(split) + ir::cast<uint64_t>(t)) * 2u;
        Value m_i = ws[s0];
        Value s_i = ws[s0 + 1u];
        pm = m_i;
        ps = s_i;
      });
      std::tie(M, S) = team_combine(rk, pm, ps);
    }
    rk.stream(lo, hi, [&](Value first) {
      RowChunk ch = c.stage ? rk.stage_load(rk.columns(first, hi, rk.chunk_items()))
                            : rk.load(x, xb, first, hi, rk.chunk_items());
      rk.store(y, yb, ch, out(ch, M, S));
    });
  });
  return b.build();
}

void run(const jit::Family<RowKernelConfig>& fam, const char* op, const RowTensor& x, const RowTensor& y,
         const jit::Stream* stream) {
  detail::check_rows(op, "x", x);
  detail::check_same(op, "y", y, "x", x);
  const uint32_t vec = vector_width(x.dtype, x.cols, {&x, &y});
  const RowPlan plan = detail::choose_plan(x.rows, x.cols, vec, row_holds("softmax"));
  detail::SplitSpan sp{x.cols, 1};
  detail::Workspace wsp;  // held (locked) until both kernels of a split row are enqueued
  if (plan.split > 1) {
    sp = detail::split_span(x.cols, plan.split, vec);
    wsp = detail::workspace(stream, size_t(x.rows) * sp.split * 2 * sizeof(float));
  }
  const uint64_t ws = wsp.address;
  SoftmaxSignature sig(detail::access_type(x.dtype, vec));
  sig.x.host = x.address;
  sig.y.host = y.address;
  sig.workspace.host = ws;
  sig.rows.host = x.rows;
  sig.cols.host = x.cols;
  sig.x_stride.host = x.row_stride();
  sig.y_stride.host = y.row_stride();
  sig.span.host = sp.span;
  sig.split.host = sp.split;
  const kernel::PackedArgs args = kernel::pack(sig);  // no allocation on the call path
  if (plan.split == 1) {
    RowKernelConfig c = row_kernel_config(x.dtype, plan);
    fam.get(c).launch_packed(row_launch(c, x.rows, x.cols, 1, stream), args.data(), args.size());
    return;
  }
  for (uint32_t phase : {1u, 2u}) {
    RowKernelConfig c = row_kernel_config(x.dtype, plan, phase);
    fam.get(c).launch_packed(row_launch(c, x.rows, x.cols, sp.split, stream), args.data(), args.size());
  }
}

}  // namespace

jit::Family<RowKernelConfig>& softmax_family() {
  static jit::Family<RowKernelConfig> f("softmax", [](const RowKernelConfig& c) { return build(c, false); },
                                        common_row_configs(true));
  return f;
}

jit::Family<RowKernelConfig>& log_softmax_family() {
  static jit::Family<RowKernelConfig> f("log_softmax", [](const RowKernelConfig& c) { return build(c, true); },
                                        common_row_configs(true));
  return f;
}

void softmax(const RowTensor& x, const RowTensor& y, const jit::Stream* stream) {
  run(softmax_family(), "softmax", x, y, stream);
}

void log_softmax(const RowTensor& x, const RowTensor& y, const jit::Stream* stream) {
  run(log_softmax_family(), "log_softmax", x, y, stream);
}

}  // namespace kaio::ops
