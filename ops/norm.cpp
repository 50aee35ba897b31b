#include "kaio/ops/norm.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/signature.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

namespace {

using ir::Value;

enum class Norm { Rms, Layer, AddRms };

const char* op_name(Norm k) {
  return k == Norm::Rms ? "rms_norm" : k == Norm::Layer ? "layer_norm" : "add_rms_norm";
}

// The kernels' parameters, declared by build and packed by run: add_rms_norm has the
// residual and the stored sum, layer_norm the bias.
struct NormSignature {
  kernel::Ptr x{"x"};
  kernel::Opt<kernel::Ptr> residual{{"residual"}};
  kernel::Ptr w{"w"};
  kernel::Opt<kernel::Ptr> b{{"b"}};
  kernel::Opt<kernel::Ptr> sum{{"sum"}};
  kernel::Ptr y{"y"};
  kernel::Ptr workspace{"workspace", ir::Scalar::F32};
  kernel::Param<uint32_t> rows{"rows"}, cols{"cols"};
  kernel::Param<uint64_t> x_stride{"x_stride"};
  kernel::Opt<kernel::Param<uint64_t>> residual_stride{{"residual_stride"}}, sum_stride{{"sum_stride"}};
  kernel::Param<uint64_t> y_stride{"y_stride"};
  kernel::Param<float> eps{"eps"};
  kernel::Param<uint32_t> span{"span"}, split{"split"};
  // `access`: the element type of the row pointers (packed pairs for 16-bit vectors).
  NormSignature(Norm kind, ir::Scalar access) {
    residual.on = sum.on = residual_stride.on = sum_stride.on = kind == Norm::AddRms;
    b.on = kind == Norm::Layer;
    for (kernel::Ptr* p : {&x, static_cast<kernel::Ptr*>(&residual), &w, static_cast<kernel::Ptr*>(&b)}) {
      p->elem = access;
      p->is_const = true;
    }
    sum.elem = y.elem = access;
  }
  auto fields() {
    return std::tie(x, residual, w, b, sum, y, workspace, rows, cols, x_stride, residual_stride, sum_stride, y_stride, eps,
                    span, split);
  }
};

ir::Kernel build(const RowKernelConfig& c, Norm kind) {
  detail::check_dtype(op_name(kind), "x", c.dtype);
  const bool layer = kind == Norm::Layer, add = kind == Norm::AddRms;
  ir::KernelBuilder b(op_name(kind) + c.suffix());
  NormSignature sig(kind, detail::access_type(c.dtype, c.vec));
  kernel::declare(b, sig);
  Value x = sig.x.ir, r = sig.residual.ir, w = sig.w.ir, bias = sig.b.ir, sum = sig.sum.ir, y = sig.y.ir, ws = sig.workspace.ir;
  Value rows = sig.rows.ir, cols = sig.cols.ir;
  Value xs = sig.x_stride.ir, rs = sig.residual_stride.ir, ss = sig.sum_stride.ir, ys = sig.y_stride.ir;
  Value eps = sig.eps.ir, span = sig.span.ir, split = sig.split.ir;
  RowKernel rk(b, c);
  Value zero64 = b.constant<uint64_t>(0);
  Value inv_n = 1.0f / ir::cast<float>(cols);

  // x + residual rounded to the dtype, stored to `sum` (add_rms_norm), in place in ch.
  auto add_residual = [&](RowChunk& ch, const RowChunk& rc, Value sb) {
    for (uint32_t k = 0; k < ch.n; ++k)
      for (uint32_t e = 0; e < c.vec; ++e) ch.var(k, e) = rk.round_trip(ch.at(k, e) + rc.at(k, e));
    rk.store(sum, sb, ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e); });
  };
  // 16-bit layer_norm takes (x - mean) rstd as x rstd - mean rstd, one fma per element instead
  // of a subtraction and a product: the rounding of mean rstd (relative 2^-24 of |mean| / std)
  // stays far below a 16-bit output's half ulp unless |mean| / std > 2^12; f32 keeps the exact
  // difference.
  const bool one_fma = layer && c.dtype != ir::Scalar::F32;
  auto output = [&](const RowChunk& ch, Value yb, Value mean, Value rstd) {
    RowChunk wc = rk.load_like(ch, w, zero64);
    std::optional<RowChunk> bc;
    if (layer) bc = rk.load_like(ch, bias, zero64);
    Value shift = one_fma ? -mean * rstd : Value();
    rk.store(y, yb, ch, [&](uint32_t k, uint32_t e) {
      if (one_fma) return ir::fma(ir::fma(ch.at(k, e), rstd, shift), wc.at(k, e), bc->at(k, e));
      if (layer) return ir::fma((ch.at(k, e) - mean) * rstd, wc.at(k, e), bc->at(k, e));
      return ch.at(k, e) * rstd * wc.at(k, e);
    });
  };
  // The row in registers (read once): the mean, then the sum of squared deviations (layer),
  // or the sum of squares.
  auto in_registers = [&](Value row, RowChunk& ch) {
    Value yb = rk.row_base(row, ys);
    if (layer) {
      Value mean = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e); })) * inv_n;
      Value var = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) {
                    Value d = ch.at(k, e) - mean;
                    return d * d;
                  })) * inv_n;
      output(ch, yb, mean, ir::rsqrt(var + eps));
    } else {
      Value q = rk.team_sum(rk.thread_sum(ch, [&](uint32_t k, uint32_t e) { return ch.at(k, e) * ch.at(k, e); }));
      output(ch, yb, Value(), ir::rsqrt(q * inv_n + eps));
    }
  };
  if (c.persist) {  // teams loop over rows, the next row's loads (x, residual) in flight
    std::vector<RowKernel::Source> src = {{x, xs}};
    if (add) src.push_back({r, rs});
    rk.persistent_rows(rows, cols, src, [&](Value row, Value, std::vector<RowChunk>& in) {
      if (add) add_residual(in[0], in[1], rk.row_base(row, ss));
      in_registers(row, in[0]);
    });
    return b.build();
  }

  rk.rows(rows, [&](Value row, Value t) {
    Value xb = rk.row_base(row, xs), yb = rk.row_base(row, ys);
    Value rb = add ? rk.row_base(row, rs) : Value(), sb = add ? rk.row_base(row, ss) : Value();
    // The values a chunk normalises: x, or x + residual rounded to the dtype (and stored).
    auto input = [&](Value first, Value limit, uint32_t n) {
      RowChunk ch = rk.load(x, xb, first, limit, n);
      if (add) add_residual(ch, rk.load_like(ch, r, rb), sb);
      if (c.stage) rk.stage_store(ch);
      return ch;
    };

    if (c.items) {
      RowChunk ch = input(b.constant<uint32_t>(0), cols, c.items);
      in_registers(row, ch);
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
      output(ch, yb, mean, rstd);
    });
  });
  return b.build();
}

// add_rms_norm reads two rows and writes two: its one-shot blocks keep the memory busy
// (97% of copy for bf16 at 8192^2 on an H200) where the persistent teams that help the
// one-input norms fell to 86%. Its plans and declared configs drop `persist`.
bool persists(Norm k) { return k != Norm::AddRms; }
std::vector<RowKernelConfig> one_shot(std::vector<RowKernelConfig> cs) {
  std::vector<RowKernelConfig> out;
  for (RowKernelConfig c : cs) {
    c.persist = false;
    bool seen = false;
    for (const RowKernelConfig& o : out) seen = seen || o.fields() == c.fields();
    if (!seen) out.push_back(c);
  }
  return out;
}

jit::Family<RowKernelConfig>& family(Norm k) {
  auto make = [](Norm kind) { return [kind](const RowKernelConfig& c) { return build(c, kind); }; };
  static jit::Family<RowKernelConfig> rms("rms_norm", make(Norm::Rms), common_row_configs(true));
  static jit::Family<RowKernelConfig> layer("layer_norm", make(Norm::Layer), common_row_configs(true));
  static jit::Family<RowKernelConfig> add("add_rms_norm", make(Norm::AddRms), one_shot(common_row_configs(true)));
  return k == Norm::Rms ? rms : k == Norm::Layer ? layer : add;
}

// The tensors of one norm call (residual and sum: add_rms_norm; b: layer_norm).
struct NormTensors {
  const RowTensor& x;
  const RowTensor* residual;
  const RowTensor& w;
  const RowTensor* b;
  const RowTensor* sum;
  const RowTensor& y;
};

// Plans and launches one norm (the tensors are checked).
void run(Norm kind, const NormTensors& t, float eps, const jit::Stream* stream) {
  const RowTensor& x = t.x;
  uint32_t vec = 16 / static_cast<uint32_t>(ir::scalar_bytes(x.dtype));
  for (const RowTensor* u : {&t.x, t.residual, &t.w, t.b, t.sum, &t.y})
    if (u) vec = std::min(vec, vector_width(x.dtype, x.cols, {u}));
  RowPlan plan = detail::choose_plan(x.rows, x.cols, vec, row_holds(op_name(kind)));
  if (!persists(kind)) plan.persist = false;
  detail::SplitSpan sp{x.cols, 1};
  detail::Workspace wsp;  // held (locked) until both kernels of a split row are enqueued
  if (plan.split > 1) {
    sp = detail::split_span(x.cols, plan.split, vec);
    wsp = detail::workspace(stream, size_t(x.rows) * sp.split * 2 * sizeof(float));
  }
  NormSignature sig(kind, detail::access_type(x.dtype, vec));
  sig.x.host = x.address;
  sig.residual.host = t.residual ? t.residual->address : 0;
  sig.w.host = t.w.address;
  sig.b.host = t.b ? t.b->address : 0;
  sig.sum.host = t.sum ? t.sum->address : 0;
  sig.y.host = t.y.address;
  sig.workspace.host = wsp.address;
  sig.rows.host = x.rows;
  sig.cols.host = x.cols;
  sig.x_stride.host = x.row_stride();
  sig.residual_stride.host = t.residual ? t.residual->row_stride() : 0;
  sig.sum_stride.host = t.sum ? t.sum->row_stride() : 0;
  sig.y_stride.host = t.y.row_stride();
  sig.eps.host = eps;
  sig.span.host = sp.span;
  sig.split.host = sp.split;
  const kernel::PackedArgs args = kernel::pack(sig);  // no allocation on the call path
  const jit::Family<RowKernelConfig>& fam = family(kind);
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
  run(Norm::Rms, {.x = x, .residual = nullptr, .w = w, .b = nullptr, .sum = nullptr, .y = y}, eps, stream);
}

void layer_norm(const RowTensor& x, const RowTensor& w, const RowTensor& b, const RowTensor& y, float eps,
                const jit::Stream* stream) {
  const char* op = "layer_norm";
  detail::check_rows(op, "x", x);
  detail::check_vector(op, "w", w, x.cols, x.dtype);
  detail::check_vector(op, "b", b, x.cols, x.dtype);
  detail::check_same(op, "y", y, "x", x);
  check_eps(op, eps);
  run(Norm::Layer, {.x = x, .residual = nullptr, .w = w, .b = &b, .sum = nullptr, .y = y}, eps, stream);
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
  run(Norm::AddRms, {.x = x, .residual = &residual, .w = w, .b = nullptr, .sum = &sum, .y = y}, eps, stream);
}

}  // namespace kaio::ops
