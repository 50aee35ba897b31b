// ops::attention and ops::attention_decode: argument checks, the launch plan, the launches.
#include "kaio/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/attention_tune.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

namespace {

using ir::Scalar;

[[noreturn]] void fail(const char* op, const std::string& arg, const std::string& m) {
  throw UsageError("", op, std::string(op) + ": argument '" + arg + "': " + m);
}

std::string str(uint64_t v) { return std::to_string(v); }

void check_shape(const char* op, const AttentionShape& s) {
  if (s.batch == 0) fail(op, "batch", "batch = 0");
  if (s.seqlen_q == 0) fail(op, "seqlen_q", "seqlen_q = 0");
  if (s.heads_q == 0 || s.heads_kv == 0) fail(op, "heads", "heads_q and heads_kv must be positive");
  if (s.heads_q % s.heads_kv)
    fail(op, "heads_q", "heads_q " + str(s.heads_q) + " is not a multiple of heads_kv " + str(s.heads_kv));
  const uint32_t d = s.head_dim;
  if (d != 64 && d != 96 && d != 128 && d != 256) fail(op, "head_dim", "head_dim " + str(d) + " is not supported (64, 96, 128, 256)");
}

// Non-null, aligned to the element, and one dtype for q, k, v and o.
void check_tensor(const char* op, const char* arg, const AttentionTensor& t, Scalar dtype) {
  if (t.address == 0) fail(op, arg, std::string(arg) + " is a null pointer");
  if (t.dtype != Scalar::F32 && t.dtype != Scalar::F16 && t.dtype != Scalar::BF16)
    fail(op, arg, std::string("dtype ") + ir::scalar_name(t.dtype) + " is not supported (f32, f16, bf16)");
  if (t.dtype != dtype)
    fail(op, arg, std::string(arg) + " is " + ir::scalar_name(t.dtype) + ", q is " + ir::scalar_name(dtype));
  if (t.address % ir::scalar_bytes(t.dtype)) fail(op, arg, std::string(arg) + " is not aligned to its element");
}

void check_scalars(const char* op, float scale, int32_t left, int32_t right, float softcap) {
  if (!std::isfinite(scale) || scale < 0.0f) fail(op, "scale", "scale must be finite and not negative (0: 1/sqrt(head_dim))");
  if (left < -1) fail(op, "window_left", "window_left " + std::to_string(left) + " is negative (-1: unbounded)");
  if (right < -1) fail(op, "window_right", "window_right " + std::to_string(right) + " is negative (-1: unbounded)");
  if (!std::isfinite(softcap) || softcap < 0.0f) fail(op, "softcap", "softcap must be finite and not negative (0: off)");
}

void check_aligned_ptr(const char* op, const char* arg, uint64_t address, size_t bytes) {
  if (address % bytes) fail(op, arg, std::string(arg) + " is not aligned to its element");
}

// The signature's tensor fields from the tensors.
void set_tensors(detail::AttentionRowsSignature& s, const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                 const AttentionTensor& o) {
  s.q.host = q.address;
  s.k.host = k.address;
  s.v.host = v.address;
  s.o.host = o.address;
  s.q_bs.host = q.batch_stride, s.q_ss.host = q.seq_stride, s.q_hs.host = q.head_stride;
  s.k_bs.host = k.batch_stride, s.k_ss.host = k.seq_stride, s.k_hs.host = k.head_stride;
  s.v_bs.host = v.batch_stride, s.v_ss.host = v.seq_stride, s.v_hs.host = v.head_stride;
  s.o_bs.host = o.batch_stride, s.o_ss.host = o.seq_stride, s.o_hs.host = o.head_stride;
}

// The tensor-core kernel's row for the shape, and why it does not apply (empty: it does).
const AttentionVariant* variant_for(const AttentionShape& s) {
  return attention_pick(s.head_dim, s.seqlen_q, uint64_t(s.heads_q) * s.batch, detail::sm_count());  // tests may override the count
}

const AttentionVariant* find_variant(const char* name) {
  for (const AttentionVariant& v : attention_variants())
    if (std::string_view(v.name) == name) return &v;
  return nullptr;
}

// Why the mma.sync kernel does not run the problem with `row` (null: the row picked by shape).
std::string mma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionShape& s,
                        bool varlen, const AttentionVariant* row = nullptr) {
  if (q.dtype != Scalar::F16 && q.dtype != Scalar::BF16) return "it takes f16 or bf16";
  const jit::DeviceInfo& dev = jit::device_info();
  if (dev.sm < 80) return "it needs sm_80 or newer, the device is " + dev.arch;
  if (!row) row = variant_for(s);
  if (!row) return "no tile shape for head_dim " + str(s.head_dim);
  if (attention_mma_config(q.dtype, *row).shared_bytes() > dev.smem_per_block_optin) return "its tiles do not fit shared memory";
  for (const AttentionTensor* t : {&q, &k, &v}) {
    if (t->address % 16) return "q, k and v must be 16-byte aligned";
    if (t->seq_stride % 8 || t->head_stride % 8 || (!varlen && t->batch_stride % 8))
      return "the strides of q, k and v must be multiples of 8 elements";
  }
  return "";
}

float scale_of(float scale, uint32_t d) { return scale > 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(double(d))); }

}  // namespace

namespace detail {

std::string attention_variant_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                      const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                      const AttentionVariant& row) {
  if (row.head_dim != s.head_dim) return "it is for head_dim " + str(row.head_dim);
  if (row.engine == AttentionEngine::Wgmma) return attention_wgmma_refusal(q, k, v, o, s, opt, &row);
  return mma_refusal(q, k, v, s, opt.cu_seqlens_q || opt.cu_seqlens_k, &row);
}

}  // namespace detail

AttentionTensor bshd(uint64_t address, ir::Scalar dtype, uint32_t seqlen, uint32_t heads, uint32_t head_dim) {
  return {address, dtype, uint64_t(seqlen) * heads * head_dim, uint64_t(heads) * head_dim, head_dim};
}

AttentionTensor bhsd(uint64_t address, ir::Scalar dtype, uint32_t seqlen, uint32_t heads, uint32_t head_dim) {
  return {address, dtype, uint64_t(seqlen) * heads * head_dim, head_dim, uint64_t(seqlen) * head_dim};
}

void attention(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& o,
               const AttentionShape& shape, const AttentionOptions& opt, const jit::Stream* stream) {
  const char* op = "attention";
  check_shape(op, shape);
  if (shape.seqlen_k == 0) fail(op, "seqlen_k", "seqlen_k = 0");
  check_tensor(op, "q", q, q.dtype);
  check_tensor(op, "k", k, q.dtype);
  check_tensor(op, "v", v, q.dtype);
  check_tensor(op, "o", o, q.dtype);
  check_scalars(op, opt.scale, opt.window_left, opt.window_right, opt.softcap);
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (varlen && !(opt.cu_seqlens_q && opt.cu_seqlens_k))
    fail(op, opt.cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q", "varlen needs both cu_seqlens_q and cu_seqlens_k");
  if (varlen && opt.lse && opt.total_q == 0) fail(op, "total_q", "varlen with lse needs total_q (the rows of q)");
  check_aligned_ptr(op, "cu_seqlens_q", opt.cu_seqlens_q, 4);
  check_aligned_ptr(op, "cu_seqlens_k", opt.cu_seqlens_k, 4);
  check_aligned_ptr(op, "alibi_slopes", opt.alibi_slopes, 4);
  check_aligned_ptr(op, "lse", opt.lse, 4);
  if (shape.heads_q > 65535) fail(op, "heads_q", "more than 65535 heads");
  if (shape.batch > 65535) fail(op, "batch", "more than 65535 sequences");

  const float scale = scale_of(opt.scale, shape.head_dim);
  const AttentionVariant* forced = nullptr;
  if (opt.variant) {
    forced = find_variant(opt.variant);
    if (!forced) fail(op, "variant", std::string("no row named '") + opt.variant + "' in the attention tile table");
    if (forced->head_dim != shape.head_dim)
      fail(op, "variant", std::string(opt.variant) + " is for head_dim " + str(forced->head_dim) + ", not " + str(shape.head_dim));
    const std::string why = detail::attention_variant_refusal(q, k, v, o, shape, opt, *forced);
    if (!why.empty()) fail(op, "variant", std::string(opt.variant) + " does not apply: " + why);
    if (forced->engine == AttentionEngine::Wgmma) return attention_wgmma_launch(q, k, v, o, shape, opt, scale, stream, forced);
  } else if (opt.kernel == AttentionKernel::Tuned && !varlen) {
    if (const AttentionVariant* row = tuner::choose_attention(q, k, v, o, shape, opt, stream).variant) {
      AttentionOptions tuned = opt;
      tuned.variant = row->name;
      return attention(q, k, v, o, shape, tuned, stream);
    }
  }
  if (!forced && (opt.kernel == AttentionKernel::Auto || opt.kernel == AttentionKernel::Wgmma || opt.kernel == AttentionKernel::Tuned)) {
    const std::string why = attention_wgmma_refusal(q, k, v, o, shape, opt);
    if (opt.kernel == AttentionKernel::Wgmma && !why.empty()) fail(op, "kernel", "the wgmma kernel does not apply: " + why);
    if (why.empty()) return attention_wgmma_launch(q, k, v, o, shape, opt, scale, stream);
  }
  bool mma = forced != nullptr;
  if (!forced && opt.kernel != AttentionKernel::Rows) {
    const std::string why = mma_refusal(q, k, v, shape, varlen);
    if (opt.kernel == AttentionKernel::Mma && !why.empty()) fail(op, "kernel", "the mma.sync kernel does not apply: " + why);
    mma = why.empty();
  }
  const AttentionRowsConfig c{q.dtype, shape.head_dim, 4};
  detail::AttentionRowsSignature s(q.dtype);
  set_tensors(s, q, k, v, o);
  if (varlen) s.q_bs.host = s.k_bs.host = s.v_bs.host = s.o_bs.host = 0;
  s.lse.host = opt.lse;
  s.alibi.host = opt.alibi_slopes;
  s.cu_q.host = opt.cu_seqlens_q;
  s.cu_k.host = opt.cu_seqlens_k;
  s.lse_bs.host = varlen ? 0 : uint64_t(shape.heads_q) * shape.seqlen_q;
  s.lse_hs.host = varlen ? opt.total_q : shape.seqlen_q;
  s.sq.host = shape.seqlen_q;
  s.sk.host = shape.seqlen_k;
  s.hq.host = shape.heads_q;
  s.group.host = shape.heads_q / shape.heads_kv;
  s.pack.host = 1;
  s.rows_per_block.host = c.warps;
  s.splits.host = 1;
  s.split_len.host = 0x7fffffffu;
  s.scale.host = scale;
  s.softcap.host = opt.softcap;
  s.window_left.host = opt.window_left;
  s.window_right.host = opt.causal ? 0 : opt.window_right;
  s.flags.host = (varlen ? detail::kRowsVarlen : 0u) | (opt.lse ? detail::kRowsLse : 0u) | (opt.alibi_slopes ? detail::kRowsAlibi : 0u);
  const kernel::PackedArgs args = kernel::pack(s);
  if (mma) {
    const AttentionMmaConfig mc = attention_mma_config(q.dtype, forced ? *forced : *variant_for(shape));
    attention_mma_family().get(mc).launch_packed({.grid = {(shape.seqlen_q + mc.bm - 1) / mc.bm, shape.heads_q, shape.batch},
                                                  .block = {2 * mc.bm}, .shared_bytes = mc.shared_bytes(), .stream = stream},
                                                 args.data(), args.size());
    return;
  }
  const uint32_t tiles = (shape.seqlen_q + c.warps - 1) / c.warps;
  attention_rows_family().get(c).launch_packed(
      {.grid = {tiles, shape.heads_q, shape.batch}, .block = {32 * c.warps}, .stream = stream}, args.data(), args.size());
}

namespace {

struct DecodePlan {
  uint32_t splits, split_len;  // split_len 0: the rows kernel's (seqlen_k / splits)
};

// Keys per split for decoding: enough blocks (batch x KV heads x splits) to fill the GPU
// twice over, no split shorter than 256 keys.
uint32_t decode_splits(const AttentionShape& s, uint32_t asked) {
  if (asked) return std::min(asked, std::max(1u, s.seqlen_k));
  const uint64_t blocks = uint64_t(s.batch) * s.heads_kv;
  const uint64_t want = 2ull * detail::sm_count();
  if (blocks >= want) return 1;
  const uint64_t by_gpu = (want + blocks - 1) / blocks;
  const uint64_t by_len = std::max<uint64_t>(1, s.seqlen_k / 256);
  return static_cast<uint32_t>(std::min<uint64_t>({by_gpu, by_len, 64}));
}

// Why the tensor-core decode kernel does not apply (empty: it does, and `row` is its variant).
std::string decode_mma_refusal(const AttentionTensor& q, const KvCache& cache, const AttentionShape& s, uint32_t rows,
                               const AttentionDecodeVariant*& row) {
  if (q.dtype != Scalar::F16 && q.dtype != Scalar::BF16) return "it takes f16 or bf16";
  const jit::DeviceInfo& dev = jit::device_info();
  if (dev.sm < 80) return "it needs sm_80 or newer, the device is " + dev.arch;
  // A long-cache row past this device's shared memory (sm_80) gives way to a shorter one.
  row = attention_decode_pick(s.head_dim, rows, s.seqlen_k, dev.smem_per_block_optin);
  if (!row && !attention_decode_pick(s.head_dim, rows, s.seqlen_k)) return "no tile shape for head_dim " + str(s.head_dim);
  if (!row) return "its tiles do not fit shared memory";
  for (const AttentionTensor* t : {&q, &cache.k, &cache.v}) {
    if (t->address % 16) return "q, k and v must be 16-byte aligned";
    if (t->seq_stride % 8 || t->head_stride % 8 || t->batch_stride % 8)
      return "the strides of q, k and v must be multiples of 8 elements";
  }
  return "";
}

thread_local std::optional<AttentionDecodeConfig> decode_override;  // detail::set_decode_override

// The key splits of the tensor-core kernel: whole chunks per split, as many splits as
// minimise the estimated time in chunk steps: waves of blocks (batch x KV heads x row
// blocks x splits over the blocks the GPU holds at once) x (chunks per split + the fixed
// cost of a block, about 1.5 chunks), plus one chunk for the combine when split.
DecodePlan decode_plan_mma(const AttentionShape& s, uint32_t rows, const AttentionDecodeConfig& c, uint32_t asked) {
  const uint32_t chunks = (s.seqlen_k + c.bn - 1) / c.bn;
  const uint32_t most = std::max(1u, std::min({chunks, 128u, 65535u / s.batch}));
  uint32_t splits = asked ? std::min(asked, most) : 1;
  if (!asked) {
    const jit::DeviceInfo& dev = jit::device_info();
    const uint32_t per_sm = std::max(1u, std::min(dev.smem_per_sm / (c.shared_bytes() + 1024), 64u / c.warps));
    const double slots = double(detail::sm_count()) * per_sm;
    const double blocks = double(s.batch) * s.heads_kv * ((rows + 16 * c.mt - 1) / (16 * c.mt));
    double best = 0;
    for (uint32_t n = 1; n <= most; ++n) {
      const double cost = std::ceil(blocks * n / slots) * (std::ceil(double(chunks) / n) + 1.5) + (n > 1 ? 1.0 : 0.0);
      if (n == 1 || cost < best * 0.98) best = cost, splits = n;
    }
  }
  const uint32_t per = (chunks + splits - 1) / splits;  // chunks per split
  return {(chunks + per - 1) / per, per * c.bn};
}

// The debug check of the device arrays: every length within the cache, every page in the pool.
void validate_cache(const char* op, const KvCache& c, const AttentionShape& s) {
  std::vector<int32_t> len(s.batch);
  jit::detail::copy_to_host(len.data(), c.seqlens, len.size() * 4);
  const uint64_t cap = c.block_table ? uint64_t(c.max_pages) * c.page_size : c.capacity;
  for (uint32_t b = 0; b < s.batch; ++b) {
    if (len[b] < 0 || uint64_t(len[b]) > cap || uint64_t(len[b]) > s.seqlen_k)
      fail(op, "seqlens", "seqlens[" + str(b) + "] = " + std::to_string(len[b]) + " is outside [0, " +
                              str(std::min<uint64_t>(cap, s.seqlen_k)) + "]");
    if (c.block_table) {
      std::vector<int32_t> row(c.max_pages);
      jit::detail::copy_to_host(row.data(), c.block_table + uint64_t(b) * c.max_pages * 4, row.size() * 4);
      const uint32_t used = (uint32_t(len[b]) + c.page_size - 1) / c.page_size;
      for (uint32_t p = 0; p < used; ++p)
        if (row[p] < 0 || uint32_t(row[p]) >= c.capacity)
          fail(op, "block_table", "block_table[" + str(b) + ", " + str(p) + "] = " + std::to_string(row[p]) +
                                      " is outside the pool of " + str(c.capacity) + " pages");
    }
  }
}

}  // namespace

void detail::set_decode_override(const AttentionDecodeConfig* c) {
  decode_override.reset();
  if (c) decode_override = *c;
}

void attention_decode(const AttentionTensor& q, const KvCache& cache, const AttentionTensor& o, const AttentionShape& shape,
                      const DecodeOptions& opt, const jit::Stream* stream) {
  const char* op = "attention_decode";
  check_shape(op, shape);
  if (shape.seqlen_q > 16) fail(op, "seqlen_q", "seqlen_q " + str(shape.seqlen_q) + " is more than 16 tokens");
  if (shape.seqlen_k == 0) fail(op, "seqlen_k", "seqlen_k (the longest cache) = 0");
  check_tensor(op, "q", q, q.dtype);
  check_tensor(op, "cache.k", cache.k, q.dtype);
  check_tensor(op, "cache.v", cache.v, q.dtype);
  check_tensor(op, "o", o, q.dtype);
  check_scalars(op, opt.scale, opt.window_left, -1, opt.softcap);
  if (cache.seqlens == 0) fail(op, "cache.seqlens", "cache.seqlens is a null pointer");
  check_aligned_ptr(op, "cache.seqlens", cache.seqlens, 4);
  check_aligned_ptr(op, "cache.block_table", cache.block_table, 4);
  check_aligned_ptr(op, "alibi_slopes", opt.alibi_slopes, 4);
  check_aligned_ptr(op, "lse", opt.lse, 4);
  uint32_t shift = 0;
  if (cache.block_table) {
    const uint32_t ps = cache.page_size;
    if (ps < 16 || ps > 256 || (ps & (ps - 1)))
      fail(op, "cache.page_size", "page_size " + str(ps) + " is not a power of two in 16..256");
    while ((1u << shift) < ps) ++shift;
    if (cache.capacity == 0) fail(op, "cache.capacity", "a paged cache needs its pool size in pages");
    if (uint64_t(cache.max_pages) * ps < shape.seqlen_k)
      fail(op, "seqlen_k", "seqlen_k " + str(shape.seqlen_k) + " is larger than the cache: " + str(cache.max_pages) +
                               " pages of " + str(ps));
  } else if (cache.capacity < shape.seqlen_k) {
    fail(op, "seqlen_k", "seqlen_k " + str(shape.seqlen_k) + " is larger than the cache capacity " + str(cache.capacity));
  }
  if (shape.heads_kv > 65535) fail(op, "heads_kv", "more than 65535 KV heads");
  if (opt.validate) validate_cache(op, cache, shape);

  const uint32_t group = shape.heads_q / shape.heads_kv;
  const uint32_t rows = shape.seqlen_q * group;  // the query rows of one KV head
  // The tensor-core kernel where it applies (DecodeOptions::kernel may force either).
  const AttentionDecodeVariant* dv = nullptr;
  if (opt.kernel == AttentionKernel::Wgmma) fail(op, "kernel", "attention_decode has no wgmma kernel (auto, rows or mma)");
  if (opt.kernel != AttentionKernel::Rows) {
    const std::string why = decode_mma_refusal(q, cache, shape, rows, dv);
    if (opt.kernel == AttentionKernel::Mma && !why.empty())
      fail(op, "kernel", "the tensor-core decode kernel does not apply: " + why);
    if (!why.empty()) dv = nullptr;
  }
  AttentionDecodeConfig dc{};
  if (dv) {
    dc = attention_decode_config(q.dtype, *dv);
    if (decode_override) dc.bn = decode_override->bn, dc.stages = decode_override->stages, dc.warps = decode_override->warps;
  }
  const DecodePlan plan = dv ? decode_plan_mma(shape, rows, dc, opt.splits) : DecodePlan{decode_splits(shape, opt.splits), 0};
  const uint32_t splits = plan.splits;
  const uint64_t batch_splits = uint64_t(shape.batch) * splits;
  if (batch_splits > 65535) fail(op, "batch", "batch x splits is more than 65535");
  const AttentionRowsConfig c{q.dtype, shape.head_dim, 4};
  detail::AttentionRowsSignature s(q.dtype);
  set_tensors(s, q, cache.k, cache.v, o);
  s.lse.host = opt.lse;
  s.alibi.host = opt.alibi_slopes;
  s.seqused_k.host = cache.seqlens;
  s.block_table.host = cache.block_table;
  s.lse_bs.host = uint64_t(shape.heads_q) * shape.seqlen_q;
  s.lse_hs.host = shape.seqlen_q;
  s.sq.host = shape.seqlen_q;
  s.sk.host = shape.seqlen_k;
  s.hq.host = shape.heads_q;
  s.group.host = group;
  s.pack.host = group;
  s.rows_per_block.host = rows;
  s.max_pages.host = cache.max_pages;
  s.page_shift.host = shift;
  s.splits.host = splits;
  s.split_len.host = plan.split_len ? plan.split_len : (shape.seqlen_k + splits - 1) / splits;
  s.scale.host = scale_of(opt.scale, shape.head_dim);
  s.softcap.host = opt.softcap;
  s.window_left.host = opt.window_left;
  s.window_right.host = opt.causal ? 0 : -1;
  s.flags.host = detail::kRowsSeqused | (cache.block_table ? detail::kRowsPaged : 0u) | (opt.lse ? detail::kRowsLse : 0u) |
                 (opt.alibi_slopes ? detail::kRowsAlibi : 0u);
  auto launch_main = [&](const kernel::PackedArgs& args) {
    if (dv) {
      attention_decode_family().get(dc).launch_packed(
          {.grid = {(rows + 16 * dc.mt - 1) / (16 * dc.mt), shape.heads_kv, static_cast<uint32_t>(batch_splits)},
           .block = {32 * dc.warps}, .shared_bytes = dc.shared_bytes(), .stream = stream},
          args.data(), args.size());
      return;
    }
    attention_rows_family().get(c).launch_packed(
        {.grid = {1, shape.heads_kv, static_cast<uint32_t>(batch_splits)}, .block = {32 * c.warps}, .stream = stream}, args.data(),
        args.size());
  };
  if (splits == 1) {
    launch_main(kernel::pack(s));
    return;
  }
  // Partials into the stream's workspace, held while both kernels are enqueued.
  const uint64_t total_rows = uint64_t(shape.batch) * shape.seqlen_q * shape.heads_q;
  const uint64_t parts = total_rows * splits;
  detail::Workspace ws = detail::workspace(stream, parts * (shape.head_dim + 1) * sizeof(float));
  s.ws_o.host = ws.address;
  s.ws_lse.host = ws.address + parts * shape.head_dim * sizeof(float);
  launch_main(kernel::pack(s));
  detail::AttentionCombineSignature cs(q.dtype);
  cs.ws_o.host = s.ws_o.host;
  cs.ws_lse.host = s.ws_lse.host;
  cs.o.host = o.address;
  cs.lse.host = opt.lse;
  cs.o_bs.host = o.batch_stride, cs.o_ss.host = o.seq_stride, cs.o_hs.host = o.head_stride;
  cs.lse_bs.host = s.lse_bs.host;
  cs.lse_hs.host = opt.lse ? s.lse_hs.host : 0;  // 0: no lse
  cs.rows.host = static_cast<uint32_t>(total_rows);
  cs.sq.host = shape.seqlen_q;
  cs.hq.host = shape.heads_q;
  cs.splits.host = splits;
  const kernel::PackedArgs cargs = kernel::pack(cs);
  attention_combine_family().get({q.dtype, shape.head_dim}).launch_packed(
      {.grid = {static_cast<uint32_t>(total_rows)}, .block = {128}, .stream = stream}, cargs.data(), cargs.size());
}

}  // namespace kaio::ops
