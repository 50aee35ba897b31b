#include "kaio/ops/norm.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"

namespace kaio::ops {

namespace {

using ir::Value;

enum class Norm { Rms, Layer, AddRms };

const char* op_name(Norm k) {
  return k == Norm::Rms ? "rms_norm" : k == Norm::Layer ? "layer_norm" : "add_rms_norm";
}

ir::Kernel build(const RowKernelConfig& c, Norm kind) {
  detail::check_dtype(op_name(kind), "x", c.dtype);
  const bool layer = kind == Norm::Layer, add = kind == Norm::AddRms;
  ir::KernelBuilder b(op_name(kind) + c.suffix());
  Value x = b.param("x", row_pointer(c, true));
  Value r = add ? b.param("residual", row_pointer(c, true)) : Value();
  Value w = b.param("w", row_pointer(c, true));
  Value bias = layer ? b.param("b", row_pointer(c, true)) : Value();
  Value sum = add ? b.param("sum", row_pointer(c, false)) : Value();
  Value y = b.param("y", row_pointer(c, false));
  Value ws = b.param<float*>("workspace");
  Value rows = b.param<uint32_t>("rows");
  Value cols = b.param<uint32_t>("cols");
  Value xs = b.param<uint64_t>("x_stride");
  Value rs = add ? b.param<uint64_t>("residual_stride") : Value();
  Value ss = add ? b.param<uint64_t>("sum_stride") : Value();
  Value ys = b.param<uint64_t>("y_stride");
  Value eps = b.param<float>("eps");
  Value span = b.param<uint32_t>("span");
  Value split = b.param<uint32_t>("split");
  RowKernel rk(b, c);
  Value zero64 = b.constant<uint64_t>(0);
  Value inv_n = 1.0f / ir::cast<float>(cols);

  rk.rows(rows, [&](Value row, Value t) {
    Value xb = rk.row_base(row, xs), yb = rk.row_base(row, ys);
    Value rb = add ? rk.row_base(row, rs) : Value(), sb = add ? rk.row_base(row, ss) : Value();
    // The values a chunk normalises: x, or x + residual rounded to the dtype (and stored).
    auto input = [&](Value first, Value limit, uint32_t n) {
      RowChunk ch = rk.load(x, xb, first, limit, n);
      if (add) {
        RowChunk rc = rk.load_like(ch, r, rb);
        for (uint32_t k = 0; k < n; ++k)
          for (uint32_t e = 0; e < c.vec; ++e) ch.var(k, e) = rk.round_trip(ch.at(k, e) + rc.at(k, e));
        rk.store(sum, sb, ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e); });
      }
      if (c.stage) rk.stage_store(ch);
      return ch;
    };
    auto output = [&](const RowChunk& ch, Value mean, Value rstd) {
      RowChunk wc = rk.load_like(ch, w, zero64);
      std::optional<RowChunk> bc;
      if (layer) bc = rk.load_like(ch, bias, zero64);
      rk.store(y, yb, ch, [&](uint32_t k, uint32_t e) {
        if (layer) return ir::fma((ch.at(k, e) - mean) * rstd, wc.at(k, e), bc->at(k, e));
        return ch.at(k, e) * rstd * wc.at(k, e);
      });
    };

    if (c.items) {  // the row in registers: one read
      RowChunk ch = input(b.constant<uint32_t>(0), cols, c.items);
      if (layer) {
        Value mean = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e); })) * inv_n;
        Value var = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) {
                      Value d = ch.at(k, e) - mean;
                      return d * d;
                    })) * inv_n;
        output(ch, mean, ir::rsqrt(var + eps));
      } else {
        Value q = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e) * ch.at(k, e); }));
        output(ch, Value(), ir::rsqrt(q * inv_n + eps));
      }
      return;
    }

    // Streamed: the columns [lo, hi) of this block (the whole row unless split). Sums of
    // (v - shift) and (v - shift)^2 give the variance in one pass without cancellation
    // when the shift is near the mean; the row's first element is.
    Value lo = b.constant<uint32_t>(0), hi = cols;
    if (c.phase) {
      lo = b.block_idx_x() * span;
      hi = ir::min(cols, lo + span);
    }
    Value shift = layer ? rk.load_first(x, xb) : Value();
    Value s1, s2;
    if (c.phase != 2) {
      ir::Var a1 = b.var<float>(0.0f), a2 = b.var<float>(0.0f);
      rk.stream(lo, hi, [&](Value first) {
        RowChunk ch = input(first, hi, rk.chunk_items());
        if (layer) {
          Value p1 = rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e) - shift; });
          Value p2 = rk.thread_sum(ch, [&](uint32_t k, uint32_t e) {
            Value d = ch.at(k, e) - shift;
            return d * d;
          });
          a1 += p1;
          a2 += p2;
        } else {
          a2 += rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e) * ch.at(k, e); });
        }
      });
      s1 = layer ? rk.team_sum(a1) : Value();
      s2 = rk.team_sum(a2);
      if (c.phase == 1) {  // this part's sums for the second kernel
        Value slot = (ir::cast<uint64_t>(row) * ir::cast<uint64_t>(split) + ir::cast<uint64_t>(b.block_idx_x())) * 2u;
        b.if_(t == 0u, [&] {
          if (layer) ws[slot] = s1;
          ws[slot + 1u] = s2;
        });
        return;
      }
    } else {  // the row's sums from its parts' (at most one per thread)
      ir::Var p1 = b.var<float>(0.0f), p2 = b.var<float>(0.0f);
      b.if_(t < split, [&] {
        Value s0 = (ir::cast<uint64_t>(row) * ir::cast<uint64_t>(split) + ir::cast<uint64_t>(t)) * 2u;
        if (layer) {
          Value v1 = ws[s0];
          p1 = v1;
        }
        Value v2 = ws[s0 + 1u];
        p2 = v2;
      });
      s1 = layer ? rk.team_sum(p1) : Value();
      s2 = rk.team_sum(p2);
    }
    Value mean, rstd;
    if (layer) {
      Value m1 = s1 * inv_n;
      mean = shift + m1;
      rstd = ir::rsqrt(ir::max(s2 * inv_n - m1 * m1, 0.0f) + eps);
    } else {
      rstd = ir::rsqrt(s2 * inv_n + eps);
    }
    rk.stream(lo, hi, [&](Value first) {
      // add_rms_norm normalises the sums it stored in the first pass (same thread, same columns).
      // Staged rows come back from shared memory.
      RowChunk ch = c.stage ? rk.stage_load(rk.columns(first, hi, rk.chunk_items()))
                    : add   ? rk.load(sum, sb, first, hi, rk.chunk_items())
                            : rk.load(x, xb, first, hi, rk.chunk_items());
      output(ch, mean, rstd);
    });
  });
  return b.build();
}

jit::Family<RowKernelConfig>& family(Norm k) {
  auto make = [](Norm kind) { return [kind](const RowKernelConfig& c) { return build(c, kind); }; };
  static jit::Family<RowKernelConfig> rms("rms_norm", make(Norm::Rms), common_row_configs(true));
  static jit::Family<RowKernelConfig> layer("layer_norm", make(Norm::Layer), common_row_configs(true));
  static jit::Family<RowKernelConfig> add("add_rms_norm", make(Norm::AddRms), common_row_configs(true));
  return k == Norm::Rms ? rms : k == Norm::Layer ? layer : add;
}

// Checks, plans and launches one norm. `tensors` are the row tensors in parameter order
// (x first, y last), `vectors` the weight (and bias).
void run(Norm kind, const std::vector<const RowTensor*>& tensors, const std::vector<const RowTensor*>& vectors, float eps,
         const jit::Stream* stream) {
  const RowTensor& x = *tensors.front();
  uint32_t vec = 16 / static_cast<uint32_t>(ir::scalar_bytes(x.dtype));
  for (const RowTensor* t : tensors) vec = std::min(vec, vector_width(x.dtype, x.cols, {t}));
  for (const RowTensor* t : vectors) vec = std::min(vec, vector_width(x.dtype, x.cols, {t}));
  const RowPlan plan = detail::choose_plan(x.rows, x.cols, vec);
  detail::SplitSpan sp{x.cols, 1};
  detail::Workspace wsp;  // held (locked) until both kernels of a split row are enqueued
  if (plan.split > 1) {
    sp = detail::split_span(x.cols, plan.split, vec);
    wsp = detail::workspace(stream, size_t(x.rows) * sp.split * 2 * sizeof(float));
  }
  const uint64_t ws = wsp.address;
  // Parameter order: row tensors but the last, vectors, [sum,] y, workspace, sizes, strides.
  jit::detail::Arg arg[16];  // no allocation on the call path
  size_t n = 0;
  auto push = [&](const jit::detail::Arg& a) { arg[n++] = a; };
  const size_t n_in = kind == Norm::AddRms ? 2 : 1;
  for (size_t i = 0; i < n_in; ++i) push(detail::row_pointer_arg(tensors[i]->address, x.dtype, vec));
  for (const RowTensor* v : vectors) push(detail::row_pointer_arg(v->address, x.dtype, vec));
  for (size_t i = n_in; i < tensors.size(); ++i) push(detail::row_pointer_arg(tensors[i]->address, x.dtype, vec));
  push(detail::row_pointer_arg(ws, ir::Scalar::F32, 1));
  push(jit::detail::make_arg(x.rows));
  push(jit::detail::make_arg(x.cols));
  for (const RowTensor* t : tensors) push(jit::detail::make_arg(t->row_stride()));
  push(jit::detail::make_arg(eps));
  push(jit::detail::make_arg(sp.span));
  push(jit::detail::make_arg(sp.split));
  const jit::Family<RowKernelConfig>& fam = family(kind);
  if (plan.split == 1) {
    RowKernelConfig c = row_kernel_config(x.dtype, plan);
    fam.get(c).launch_packed(row_launch(c, x.rows, x.cols, 1, stream), arg, n);
    return;
  }
  for (uint32_t phase : {1u, 2u}) {
    RowKernelConfig c = row_kernel_config(x.dtype, plan, phase);
    fam.get(c).launch_packed(row_launch(c, x.rows, x.cols, sp.split, stream), arg, n);
  }
}

void check_eps(const char* op, float eps) {
  if (!(eps >= 0.0f) || std::isinf(eps))
    throw UsageError("", op, std::string(op) + ": eps must be finite and non-negative, got " + std::to_string(eps));
}

}  // namespace

jit::Family<RowKernelConfig>& rms_norm_family() { return family(Norm::Rms); }
jit::Family<RowKernelConfig>& layer_norm_family() { return family(Norm::Layer); }
jit::Family<RowKernelConfig>& add_rms_norm_family() { return family(Norm::AddRms); }

void rms_norm(const RowTensor& x, const RowTensor& w, const RowTensor& y, float eps, const jit::Stream* stream) {
  const char* op = "rms_norm";
  detail::check_rows(op, "x", x);
  detail::check_vector(op, "w", w, x.cols, x.dtype);
  detail::check_same(op, "y", y, "x", x);
  check_eps(op, eps);
  run(Norm::Rms, {&x, &y}, {&w}, eps, stream);
}

void layer_norm(const RowTensor& x, const RowTensor& w, const RowTensor& b, const RowTensor& y, float eps,
                const jit::Stream* stream) {
  const char* op = "layer_norm";
  detail::check_rows(op, "x", x);
  detail::check_vector(op, "w", w, x.cols, x.dtype);
  detail::check_vector(op, "b", b, x.cols, x.dtype);
  detail::check_same(op, "y", y, "x", x);
  check_eps(op, eps);
  run(Norm::Layer, {&x, &y}, {&w, &b}, eps, stream);
}

void add_rms_norm(const RowTensor& x, const RowTensor& residual, const RowTensor& w, const RowTensor& sum,
                  const RowTensor& y, float eps, const jit::Stream* stream) {
  const char* op = "add_rms_norm";
  detail::check_rows(op, "x", x);
  detail::check_same(op, "residual", residual, "x", x);
  detail::check_vector(op, "w", w, x.cols, x.dtype);
  detail::check_same(op, "sum", sum, "x", x);
  detail::check_same(op, "y", y, "x", x);
  check_eps(op, eps);
  run(Norm::AddRms, {&x, &residual, &sum, &y}, {&w}, eps, stream);
}

}  // namespace kaio::ops
