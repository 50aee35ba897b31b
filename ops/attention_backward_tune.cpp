#include "kaio/ops/attention_backward_tune.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/ir/half.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_tune.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/tune_check.h"
#include "kaio/tuner/once.h"

namespace kaio::tuner {

namespace {

using ops::AttentionBackwardOptions;
using ops::AttentionBackwardVariant;
using ops::AttentionGradients;
using ops::AttentionShape;
using ops::AttentionTensor;
using Part = ops::AttentionBackwardPart;

// The rows that run the problem, the one Auto would take first (it is the check's reference).
std::vector<const AttentionBackwardVariant*> candidates_for(const AttentionTensor& q, const AttentionTensor& k,
                                                            const AttentionTensor& v, const AttentionTensor& dout,
                                                            const AttentionGradients& g, const AttentionShape& s,
                                                            const AttentionBackwardOptions& opt) {
  std::vector<const AttentionBackwardVariant*> rows;
  for (const AttentionBackwardVariant& row : ops::attention_backward_variants())
    if (row.head_dim == s.head_dim && ops::detail::attention_backward_variant_refusal(q, k, v, dout, g, s, opt, row).empty())
      rows.push_back(&row);
  // Auto's row first (the wgmma row where it applies, else the mma row), then the other rows
  // of its engine, then the other engine's: the tuning budget goes to the likeliest rows first
  // (on sm_90 the mma.sync rows take 2-3x as long).
  for (ops::AttentionEngine e : {ops::AttentionEngine::Mma, ops::AttentionEngine::Wgmma}) {
    const AttentionBackwardVariant* pick = ops::attention_backward_pick(s.head_dim, e);
    auto it = std::find(rows.begin(), rows.end(), pick);
    if (it == rows.end()) continue;
    std::rotate(rows.begin(), it, it + 1);
    std::stable_partition(rows.begin() + 1, rows.end(), [e](const AttentionBackwardVariant* r) { return r->engine == e; });
  }
  return rows;
}

// Bit 1: q, k, v, dout 16-byte aligned; 2: their strides whole 16-byte vectors; 4: dq, dk,
// dv 4-byte aligned with even strides (what the kernels' refusals look at besides the shape).
uint32_t align_bits(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& dout,
                    const AttentionGradients& g) {
  uint32_t bits = 7;
  for (const AttentionTensor* t : {&q, &k, &v, &dout}) {
    if (t->address % 16) bits &= ~1u;
    if (t->seq_stride % 8 || t->head_stride % 8 || t->batch_stride % 8) bits &= ~2u;
  }
  for (const AttentionTensor* t : {&g.dq, &g.dk, &g.dv})
    if (t->address % 4 || t->seq_stride % 2 || t->head_stride % 2 || t->batch_stride % 2) bits &= ~4u;
  return bits;
}

// Scratch q, k, v, o, dO of the problem's shape, dense (B, S, H, D), the lse of a forward on
// them, the gradients, and the reference's sampled gradients.
struct Scratch {
  AttentionShape s;
  AttentionBackwardOptions opt;
  ir::Scalar dtype;
  jit::DeviceBuffer<uint16_t> q, k, v, o, dout, dq, dk, dv;
  jit::DeviceBuffer<float> lse;
  std::vector<uint64_t> q_rows, k_rows;  // the rows of dq and of dk / dv the check compares
  detail::ReferenceCheck ref_dq, ref_dk, ref_dv;
  AttentionTensor tensor(const jit::DeviceBuffer<uint16_t>& b, bool is_q) const {
    return ops::bshd(b.device_address(), dtype, is_q ? s.seqlen_q : s.seqlen_k, is_q ? s.heads_q : s.heads_kv, s.head_dim);
  }
  void run(const AttentionBackwardVariant& row, const jit::Stream* stream) {
    AttentionBackwardOptions forced = opt;
    forced.variant = row.name;
    ops::attention_backward(tensor(q, true), tensor(k, false), tensor(v, false), tensor(o, true), tensor(dout, true),
                            lse.device_address(), {tensor(dq, true), tensor(dk, false), tensor(dv, false)}, s, forced, stream);
  }
};

std::shared_ptr<Scratch> make_scratch(ir::Scalar dtype, const AttentionShape& s, const AttentionBackwardOptions& opt,
                                      const jit::Stream* stream) {
  const uint64_t nq = uint64_t(s.batch) * s.seqlen_q * s.heads_q * s.head_dim;
  const uint64_t nk = uint64_t(s.batch) * s.seqlen_k * s.heads_kv * s.head_dim;
  using B = jit::DeviceBuffer<uint16_t>;
  auto sc = std::shared_ptr<Scratch>(new Scratch{s, opt, dtype, B(nq), B(nk), B(nk), B(nq), B(nq), B(nq), B(nk), B(nk),
                                                 jit::DeviceBuffer<float>(uint64_t(s.batch) * s.heads_q * s.seqlen_q), {}, {}, {}, {}, {}});
  sc->opt.kernel = ops::AttentionKernel::Auto;
  std::mt19937 rng(std::random_device{}());
  sc->q.upload(detail::random_16(nq, dtype, rng));
  sc->k.upload(detail::random_16(nk, dtype, rng));
  sc->v.upload(detail::random_16(nk, dtype, rng));
  sc->dout.upload(detail::random_16(nq, dtype, rng));
  // o and lse from the forward with the same score options: the backward's P is then a
  // softmax, as in training.
  ops::AttentionOptions f;
  f.scale = opt.scale, f.causal = opt.causal, f.window_left = opt.window_left, f.window_right = opt.window_right;
  f.softcap = opt.softcap, f.alibi_slopes = opt.alibi_slopes, f.lse = sc->lse.device_address();
  ops::attention(sc->tensor(sc->q, true), sc->tensor(sc->k, false), sc->tensor(sc->v, false), sc->tensor(sc->o, true), s, f, stream);
  sc->q_rows = detail::sample_rows(uint64_t(s.batch) * s.seqlen_q * s.heads_q);
  sc->k_rows = detail::sample_rows(uint64_t(s.batch) * s.seqlen_k * s.heads_kv);
  return sc;
}

std::string sampled(const jit::DeviceBuffer<uint16_t>& b, const std::vector<uint64_t>& rows, uint32_t d, ir::Scalar dtype,
                    const char* what, std::vector<double>& got) {
  const std::vector<uint16_t> h = b.to_host();
  got.reserve(rows.size() * d);
  for (uint64_t r : rows)
    for (uint32_t e = 0; e < d; ++e) {
      const double x = detail::value_16(h[r * d + e], dtype);
      if (!std::isfinite(x)) return std::string(what) + " row " + std::to_string(r) + " is not finite";
      got.push_back(x);
    }
  return "";
}

std::string check(Scratch& sc, const AttentionBackwardVariant& row, const jit::Stream* stream) {
  for (auto* b : {&sc.dq, &sc.dk, &sc.dv}) b->fill_bytes(0xFF);  // NaN in f16 and bf16: a row left out cannot pass
  sc.run(row, stream);
  if (stream) stream->synchronize();
  else jit::synchronize();
  const double tol = sc.dtype == ir::Scalar::F16 ? 5e-3 : 2e-2;
  struct Grad {
    const jit::DeviceBuffer<uint16_t>* buf;
    const std::vector<uint64_t>* rows;
    detail::ReferenceCheck* ref;
    const char* name;
  };
  for (const Grad& gr : {Grad{&sc.dq, &sc.q_rows, &sc.ref_dq, "dq"}, Grad{&sc.dk, &sc.k_rows, &sc.ref_dk, "dk"},
                         Grad{&sc.dv, &sc.k_rows, &sc.ref_dv, "dv"}}) {
    std::vector<double> got;
    if (std::string why = sampled(*gr.buf, *gr.rows, sc.s.head_dim, sc.dtype, gr.name, got); !why.empty()) return why;
    if (std::string why = (*gr.ref)(std::move(got), row.name, tol, gr.name); !why.empty()) return why;
  }
  return "";
}

detail::RowMemo<AttentionBackwardVariant>& memo() {
  static detail::RowMemo<AttentionBackwardVariant> m;
  return m;
}

void compile(ir::Scalar dtype, const AttentionBackwardVariant& row) {
  for (Part p : {Part::Dq, Part::Dkv}) {
    if (row.engine == ops::AttentionEngine::Wgmma)
      ops::attention_backward_wgmma_family().get(ops::attention_backward_wgmma_config(dtype, row, p));
    else
      ops::attention_backward_mma_family().get(ops::attention_backward_mma_config(dtype, row, p));
  }
}

}  // namespace

std::string attention_backward_key(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                   const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                   const AttentionBackwardOptions& opt) {
  std::string key = detail::attention_bucket("attention_backward", q.dtype, s, opt.causal, opt.window_left, opt.window_right,
                                             opt.softcap, opt.alibi_slopes != 0);
  return key + "|align" + std::to_string(align_bits(q, k, v, dout, g));
}

uint64_t attention_backward_table_hash() {
  static const uint64_t h = [] {
    std::string s;
    auto tiles = [](const ops::AttentionBackwardTiles& t) {
      return std::to_string(t.bm) + "," + std::to_string(t.bn) + "," + std::to_string(t.stages);
    };
    for (const AttentionBackwardVariant& v : ops::attention_backward_variants())
      s += std::string(v.name) + ":" + std::to_string(v.head_dim) + "," + std::to_string(int(v.engine)) + "," + tiles(v.dq) + "," +
           tiles(v.dkv) + ";";
    return XXH3_64bits(s.data(), s.size());
  }();
  return h;
}

AttentionBackwardChoice choose_attention_backward(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                                  const AttentionTensor& o, const AttentionTensor& dout,
                                                  const AttentionGradients& g, const AttentionShape& s,
                                                  const AttentionBackwardOptions& opt, const jit::Stream* stream,
                                                  const Options& options) {
  (void)o;  // the scratch o comes from a forward on the scratch inputs
  std::vector<const AttentionBackwardVariant*> able = candidates_for(q, k, v, dout, g, s, opt);
  Job job = detail::row_job("attention_backward", attention_backward_table_hash(), options, stream);
  const ir::Scalar dtype = q.dtype;
  job.candidates = [&able, &s, &opt, dtype, stream] {
    std::shared_ptr<Scratch> sc = make_scratch(dtype, s, opt, stream);
    std::vector<Candidate> cands;
    for (const AttentionBackwardVariant* row : able)
      cands.push_back({row->name, [row, dtype] { compile(dtype, *row); },  // in parallel with the other candidates
                       [sc, row, stream] { sc->run(*row, stream); },
                       [sc, row, stream] { return check(*sc, *row, stream); }});
    return cands;
  };
  return detail::choose_row<AttentionBackwardVariant>(
      able, [&] { return attention_backward_key(q, k, v, dout, g, s, opt); }, std::move(job), memo());
}

void attention_backward_tune_reset() {
  forget_outcomes();
  memo().clear();
}

}  // namespace kaio::tuner
