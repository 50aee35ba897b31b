#include "kaio/ops/attention_tune.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/ir/half.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/rows.h"
#include "kaio/ops/tune_check.h"
#include "kaio/tuner/once.h"

namespace kaio::tuner {

namespace {

using ops::AttentionOptions;
using ops::AttentionShape;
using ops::AttentionTensor;
using ops::AttentionVariant;

// The rows that run the problem: every tensor-core row of the head dim the caller's tensors
// allow, the one Auto would take first (it is the check's reference).
std::vector<const AttentionVariant*> candidates_for(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                                    const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                                    const AttentionVariant** default_row) {
  std::vector<const AttentionVariant*> rows;
  *default_row = nullptr;
  for (const AttentionVariant& row : ops::attention_variants()) {
    if (row.head_dim != s.head_dim) continue;
    AttentionOptions forced = opt;
    forced.kernel = ops::AttentionKernel::Auto;
    forced.variant = row.name;
    forced.lse = 0;
    const std::string why = ops::detail::attention_variant_refusal(q, k, v, o, s, forced, row);
    if (why.empty()) rows.push_back(&row);
  }
  // What Auto takes: the wgmma row where it applies, else the mma row picked by shape.
  const AttentionVariant* wg = ops::attention_wgmma_row(s);
  for (const AttentionVariant* r : rows)
    if (r == wg) *default_row = r;
  if (!*default_row) {
    const AttentionVariant* pick = ops::attention_pick(s.head_dim, s.seqlen_q, uint64_t(s.heads_q) * s.batch, ops::detail::sm_count());
    for (const AttentionVariant* r : rows)
      if (r == pick) *default_row = r;
  }
  if (!*default_row && !rows.empty()) *default_row = rows.front();
  if (*default_row) {
    rows.erase(std::find(rows.begin(), rows.end(), *default_row));
    rows.insert(rows.begin(), *default_row);
  }
  return rows;
}

// Bit 1: q, k, v 16-byte aligned; 2: their strides whole 16-byte vectors; 4: o 4-byte
// aligned with even strides (what the kernels' refusals look at besides the shape).
uint32_t align_bits(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& o) {
  uint32_t bits = 7;
  for (const AttentionTensor* t : {&q, &k, &v}) {
    if (t->address % 16) bits &= ~1u;
    if (t->seq_stride % 8 || t->head_stride % 8 || t->batch_stride % 8) bits &= ~2u;
  }
  if (o.address % 4 || o.seq_stride % 2 || o.head_stride % 2 || o.batch_stride % 2) bits &= ~4u;
  return bits;
}

// Scratch q, k, v, o of the problem's shape, dense (B, S, H, D); the reference's o.
struct Scratch {
  AttentionShape s;
  AttentionOptions opt;
  ir::Scalar dtype;
  jit::DeviceBuffer<uint16_t> q, k, v, o;
  std::vector<uint64_t> rows;  // the o rows the check compares (a grid of at most 1024)
  detail::ReferenceCheck reference;
  AttentionTensor tensor(const jit::DeviceBuffer<uint16_t>& b, uint32_t seqlen, uint32_t heads) const {
    return ops::bshd(b.device_address(), dtype, seqlen, heads, s.head_dim);
  }
  void run(const AttentionVariant& row, const jit::Stream* stream) {
    AttentionOptions forced = opt;
    forced.variant = row.name;
    ops::attention(tensor(q, s.seqlen_q, s.heads_q), tensor(k, s.seqlen_k, s.heads_kv), tensor(v, s.seqlen_k, s.heads_kv),
                   tensor(o, s.seqlen_q, s.heads_q), s, forced, stream);
  }
};

std::shared_ptr<Scratch> make_scratch(ir::Scalar dtype, const AttentionShape& s, const AttentionOptions& opt) {
  const uint64_t nq = uint64_t(s.batch) * s.seqlen_q * s.heads_q * s.head_dim;
  const uint64_t nk = uint64_t(s.batch) * s.seqlen_k * s.heads_kv * s.head_dim;
  auto sc = std::shared_ptr<Scratch>(new Scratch{s, opt, dtype, jit::DeviceBuffer<uint16_t>(nq), jit::DeviceBuffer<uint16_t>(nk),
                                                 jit::DeviceBuffer<uint16_t>(nk), jit::DeviceBuffer<uint16_t>(nq), {}, {}});
  sc->opt.kernel = ops::AttentionKernel::Auto;
  sc->opt.lse = 0;  // the caller's lse is never written by a timed run
  std::mt19937 rng(std::random_device{}());
  sc->q.upload(detail::random_16(nq, dtype, rng));
  sc->k.upload(detail::random_16(nk, dtype, rng));
  sc->v.upload(detail::random_16(nk, dtype, rng));
  sc->rows = detail::sample_rows(uint64_t(s.batch) * s.seqlen_q * s.heads_q);
  return sc;
}

std::string check(Scratch& sc, const AttentionVariant& row, const jit::Stream* stream) {
  sc.o.fill_bytes(0xFF);  // NaN in f16 and bf16: a row left out cannot pass
  sc.run(row, stream);
  if (stream) stream->synchronize();
  else jit::synchronize();
  const std::vector<uint16_t> o = sc.o.to_host();
  std::vector<double> got;
  got.reserve(sc.rows.size() * sc.s.head_dim);
  for (uint64_t r : sc.rows)
    for (uint32_t d = 0; d < sc.s.head_dim; ++d) {
      const double x = detail::value_16(o[r * sc.s.head_dim + d], sc.dtype);
      if (!std::isfinite(x)) return "o row " + std::to_string(r) + " is not finite";
      got.push_back(x);
    }
  return sc.reference(std::move(got), row.name, sc.dtype == ir::Scalar::F16 ? 5e-3 : 2e-2, "o");
}

detail::RowMemo<AttentionVariant>& memo() {
  static detail::RowMemo<AttentionVariant> m;
  return m;
}

}  // namespace

std::string attention_key(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& o,
                          const AttentionShape& s, const AttentionOptions& opt) {
  std::string key = detail::attention_bucket("attention", q.dtype, s, opt.causal, opt.window_left, opt.window_right, opt.softcap,
                                             opt.alibi_slopes != 0);
  return key + "|align" + std::to_string(align_bits(q, k, v, o));
}

namespace detail {
std::string attention_bucket(const char* op, ir::Scalar dtype, const ops::AttentionShape& s, bool causal, int32_t window_left,
                             int32_t window_right, float softcap, bool alibi) {
  const Device& d = device();
  std::string key = std::string(op) + "|" + ir::scalar_name(dtype) + "|" + d.arch + "|" + d.name + "|" + std::to_string(d.sms) +
                    "sm|d" + std::to_string(s.head_dim) + "|sq" + std::to_string(bucket(s.seqlen_q)) + "|sk" +
                    std::to_string(bucket(s.seqlen_k)) + "|bh" + std::to_string(bucket(uint64_t(s.batch) * s.heads_q)) + "|g" +
                    std::to_string(bucket(s.heads_q / std::max(1u, s.heads_kv)));
  if (causal) key += "|causal";
  if (window_left >= 0 || window_right >= 0) key += "|window";
  if (softcap > 0.0f) key += "|softcap";
  if (alibi) key += "|alibi";
  return key;
}
}  // namespace detail

uint64_t attention_table_hash() {
  static const uint64_t h = [] {
    std::string s;
    for (const AttentionVariant& v : ops::attention_variants())
      s += std::string(v.name) + ":" + std::to_string(v.head_dim) + "," + std::to_string(v.bm) + "," + std::to_string(v.bn) + "," +
           std::to_string(v.stages) + "," + std::to_string(int(v.engine)) + ";";
    return XXH3_64bits(s.data(), s.size());
  }();
  return h;
}

AttentionChoice choose_attention(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                 const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                 const jit::Stream* stream, const Options& options) {
  const AttentionVariant* def = nullptr;
  std::vector<const AttentionVariant*> able = candidates_for(q, k, v, o, s, opt, &def);
  Job job = detail::row_job("attention", attention_table_hash(), options, stream);
  const ir::Scalar dtype = q.dtype;
  job.candidates = [&able, &s, &opt, dtype, stream] {
    std::shared_ptr<Scratch> sc = make_scratch(dtype, s, opt);
    std::vector<Candidate> cands;
    for (const AttentionVariant* row : able) {
      cands.push_back({row->name,
                       [row, dtype] {  // compiles (in parallel with the other candidates)
                         if (row->engine == ops::AttentionEngine::Wgmma)
                           ops::attention_wgmma_family().get(ops::attention_wgmma_config(dtype, *row));
                         else
                           ops::attention_mma_family().get(ops::attention_mma_config(dtype, *row));
                       },
                       [sc, row, stream] { sc->run(*row, stream); },
                       [sc, row, stream] { return check(*sc, *row, stream); }});
    }
    return cands;
  };
  return detail::choose_row<AttentionVariant>(able, [&] { return attention_key(q, k, v, o, s, opt); }, std::move(job), memo());
}

void attention_tune_reset() {
  forget_outcomes();
  memo().clear();
}

}  // namespace kaio::tuner
