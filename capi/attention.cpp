// The C ABI over attention and attention_decode: q, k, v and o are DLPack tensors of
// (batch, seq, heads, head_dim) whose strides become the ops' batch, sequence and head
// strides (the head dimension contiguous), so (B, S, H, D) arrays, (B, H, S, D) arrays
// seen through a transposed view, and slices of a fused QKV buffer all pass as they are.
#include <algorithm>
#include <string>
#include <vector>

#include "kaio/capi/internal.h"
#include "kaio/capi/plan.h"
#include "kaio/ops/attention.h"

namespace kaio::capi {

namespace {

std::string arg_text(const char* arg) { return std::string("argument '") + arg + "': "; }

// A (B, S, H, D) operand (3-D (S, H, D) for varlen: no batch stride).
ops::AttentionTensor operand(const char* op, const char* arg, const View& v, int dims) {
  if (v.ndim() != dims)
    throw UsageError("", op, arg_text(arg) + "expected " + (dims == 4 ? "(batch, seq, heads, head_dim)" : "(tokens, heads, head_dim)") +
                                 ", got shape " + v.shape_str());
  require_float(op, arg, v);
  if (v.shape[dims - 1] > 1 && v.strides[dims - 1] != 1)
    throw UsageError("", op, arg_text(arg) + "its head dimension (the last) must be contiguous");
  auto stride = [&](int i) { return v.shape[i] > 1 ? static_cast<uint64_t>(v.strides[i]) : 0; };
  return {v.address, v.dtype, dims == 4 ? stride(0) : 0, stride(dims - 3), stride(dims - 2)};
}

uint32_t dim(const View& v, int i) { return static_cast<uint32_t>(v.shape[static_cast<size_t>(i)]); }

// A contiguous vector of `n` elements of `dtype`.
void require_vector(const char* op, const char* arg, const View& v, ir::Scalar dtype, int64_t n) {
  require_dtype(op, arg, v, dtype);
  if (v.ndim() != 1 || v.shape[0] != n || (n > 1 && v.strides[0] != 1))
    throw UsageError("", op, arg_text(arg) + "expected a contiguous vector of " + std::to_string(n) +
                                 " elements, got shape " + v.shape_str());
}

// A contiguous f32 array of `shape`.
void require_f32_shape(const char* op, const char* arg, const View& v, const std::vector<int64_t>& shape) {
  require_dtype(op, arg, v, ir::Scalar::F32);
  View want;
  want.shape = shape;
  if (v.shape != shape || !v.contiguous())
    throw UsageError("", op, arg_text(arg) + "expected a contiguous float32 array of shape " + want.shape_str() +
                                 ", got " + v.shape_str());
}

ops::AttentionKernel kernel_of(const char* op, int32_t k) {
  switch (k) {
    case 0: return ops::AttentionKernel::Auto;
    case 1: return ops::AttentionKernel::Rows;
    case 2: return ops::AttentionKernel::Mma;
    case 3: return ops::AttentionKernel::Wgmma;
    case 4: return ops::AttentionKernel::Tuned;
  }
  throw UsageError("", op, "argument 'kernel': " + std::to_string(k) +
                               " is not 0 (auto), 1 (rows), 2 (mma), 3 (wgmma) or 4 (tuned)");
}

}  // namespace

Plan plan_attention(const kaio_tensor* q_t, const kaio_tensor* k_t, const kaio_tensor* v_t, const kaio_tensor* o_t,
                    const kaio_attention_options* opt_in) {
  const char* op = "attention";
  kaio_attention_options def{};
  def.window_left = def.window_right = -1;
  const kaio_attention_options& opt = opt_in ? *opt_in : def;
  const bool varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (varlen && !(opt.cu_seqlens_q && opt.cu_seqlens_k))
    throw UsageError("", op, arg_text(opt.cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q") +
                                 "varlen needs both cu_seqlens_q and cu_seqlens_k");
  const int dims = varlen ? 3 : 4;
  View q = view(op, "q", q_t), k = view(op, "k", k_t), v = view(op, "v", v_t), o = view(op, "out", o_t);
  const ops::AttentionTensor tq = operand(op, "q", q, dims), tk = operand(op, "k", k, dims),
                             tv = operand(op, "v", v, dims), to = operand(op, "out", o, dims);
  require_same(op, "v", v, "k", k);
  require_same(op, "out", o, "q", q);
  require_dtype(op, "k", k, q.dtype);
  if (q.shape[dims - 1] != k.shape[dims - 1])
    throw UsageError("", op, arg_text("k") + "head_dim " + std::to_string(k.shape[dims - 1]) + " differs from q's " +
                                 std::to_string(q.shape[dims - 1]));
  if (!varlen && q.shape[0] != k.shape[0])
    throw UsageError("", op, arg_text("k") + "batch " + std::to_string(k.shape[0]) + " differs from q's " +
                                 std::to_string(q.shape[0]));
  ops::AttentionShape s;
  s.heads_q = dim(q, dims - 2);
  s.heads_kv = dim(k, dims - 2);
  s.head_dim = dim(q, dims - 1);
  ops::AttentionOptions o2;
  o2.scale = opt.scale;
  o2.causal = opt.causal != 0;
  o2.window_left = opt.window_left;
  o2.window_right = opt.window_right;
  o2.softcap = opt.softcap;
  o2.kernel = kernel_of(op, opt.kernel);
  Plan plan(op);
  plan.add("q", q);
  plan.add("k", k);
  plan.add("v", v);
  plan.add("out", o);
  if (varlen) {
    View cq = view(op, "cu_seqlens_q", opt.cu_seqlens_q), ck = view(op, "cu_seqlens_k", opt.cu_seqlens_k);
    if (cq.ndim() != 1 || cq.shape[0] < 2)
      throw UsageError("", op, arg_text("cu_seqlens_q") + "expected batch + 1 prefix sums, got shape " + cq.shape_str());
    require_vector(op, "cu_seqlens_q", cq, ir::Scalar::S32, cq.shape[0]);
    require_vector(op, "cu_seqlens_k", ck, ir::Scalar::S32, cq.shape[0]);
    if (opt.max_seqlen_q == 0 || opt.max_seqlen_k == 0)
      throw UsageError("", op, arg_text("max_seqlen_q") + "varlen needs the longest sequences (max_seqlen_q, max_seqlen_k)");
    s.batch = static_cast<uint32_t>(cq.shape[0] - 1);
    s.seqlen_q = opt.max_seqlen_q;
    s.seqlen_k = opt.max_seqlen_k;
    o2.total_q = dim(q, 0);
    plan.add("cu_seqlens_q", cq);
    plan.add("cu_seqlens_k", ck);
  } else {
    s.batch = dim(q, 0);
    s.seqlen_q = dim(q, 1);
    s.seqlen_k = dim(k, 1);
  }
  const bool alibi = opt.alibi_slopes != nullptr, lse = opt.lse != nullptr;
  if (alibi) {
    View a = view(op, "alibi_slopes", opt.alibi_slopes);
    require_vector(op, "alibi_slopes", a, ir::Scalar::F32, s.heads_q);
    plan.add("alibi_slopes", a);
  }
  if (lse) {
    View l = view(op, "lse", opt.lse);
    if (varlen) require_f32_shape(op, "lse", l, {int64_t(s.heads_q), int64_t(o2.total_q)});
    else require_f32_shape(op, "lse", l, {int64_t(s.batch), int64_t(s.heads_q), int64_t(s.seqlen_q)});
    plan.add("lse", l);
  }
  if (q.numel == 0 || k.numel == 0) return plan;  // nothing to launch (the op refuses empty shapes)
  plan.set_run([tq, tk, tv, to, s, o2, varlen, alibi, lse](const uint64_t* addr, const double*, const jit::Stream& st) {
    auto at = [&](ops::AttentionTensor t, uint64_t a) {
      t.address = a;
      return t;
    };
    ops::AttentionOptions o = o2;
    size_t i = 4;
    if (varlen) {
      o.cu_seqlens_q = addr[i++];
      o.cu_seqlens_k = addr[i++];
    }
    if (alibi) o.alibi_slopes = addr[i++];
    if (lse) o.lse = addr[i++];
    ops::attention(at(tq, addr[0]), at(tk, addr[1]), at(tv, addr[2]), at(to, addr[3]), s, o, &st);
  });
  return plan;
}

Plan plan_attention_decode(const kaio_tensor* q_t, const kaio_tensor* kc_t, const kaio_tensor* vc_t,
                           const kaio_tensor* len_t, const kaio_tensor* o_t, const kaio_decode_options* opt_in) {
  const char* op = "attention_decode";
  kaio_decode_options def{};
  def.causal = 1;
  def.window_left = -1;
  const kaio_decode_options& opt = opt_in ? *opt_in : def;
  View q = view(op, "q", q_t), kc = view(op, "k_cache", kc_t), vc = view(op, "v_cache", vc_t),
       len = view(op, "seqlens", len_t), o = view(op, "out", o_t);
  const ops::AttentionTensor tq = operand(op, "q", q, 4), tk = operand(op, "k_cache", kc, 4),
                             tv = operand(op, "v_cache", vc, 4), to = operand(op, "out", o, 4);
  require_same(op, "v_cache", vc, "k_cache", kc);
  require_same(op, "out", o, "q", q);
  require_dtype(op, "k_cache", kc, q.dtype);
  if (q.shape[3] != kc.shape[3])
    throw UsageError("", op, arg_text("k_cache") + "head_dim " + std::to_string(kc.shape[3]) + " differs from q's " +
                                 std::to_string(q.shape[3]));
  const bool paged = opt.block_table != nullptr;
  ops::AttentionShape s;
  s.batch = dim(q, 0);
  s.seqlen_q = dim(q, 1);
  s.heads_q = dim(q, 2);
  s.heads_kv = dim(kc, 2);
  s.head_dim = dim(q, 3);
  require_vector(op, "seqlens", len, ir::Scalar::S32, q.shape[0]);
  ops::KvCache cache;
  cache.k = tk;
  cache.v = tv;
  Plan plan(op);
  plan.add("q", q);
  plan.add("k_cache", kc);
  plan.add("v_cache", vc);
  plan.add("seqlens", len);
  plan.add("out", o);
  uint64_t cap_tokens = 0;
  if (paged) {
    View bt = view(op, "block_table", opt.block_table);
    require_dtype(op, "block_table", bt, ir::Scalar::S32);
    if (bt.ndim() != 2 || bt.shape[0] != q.shape[0] || !bt.contiguous())
      throw UsageError("", op, arg_text("block_table") + "expected a contiguous (batch, max_pages) array, got shape " +
                                   bt.shape_str());
    cache.max_pages = dim(bt, 1);
    cache.page_size = dim(kc, 1);
    cache.capacity = dim(kc, 0);  // pages in the pool
    cap_tokens = uint64_t(cache.max_pages) * cache.page_size;
    plan.add("block_table", bt);
  } else {
    if (kc.shape[0] != q.shape[0])
      throw UsageError("", op, arg_text("k_cache") + "batch " + std::to_string(kc.shape[0]) + " differs from q's " +
                                   std::to_string(q.shape[0]) + " (a paged cache needs block_table)");
    cache.capacity = dim(kc, 1);
    cap_tokens = cache.capacity;
  }
  s.seqlen_k = opt.max_seqlen_k ? opt.max_seqlen_k : static_cast<uint32_t>(std::min<uint64_t>(cap_tokens, 0xffffffffu));
  ops::DecodeOptions d;
  d.scale = opt.scale;
  d.causal = opt.causal != 0;
  d.window_left = opt.window_left;
  d.softcap = opt.softcap;
  d.splits = opt.splits;
  d.validate = opt.validate != 0;
  const bool alibi = opt.alibi_slopes != nullptr, lse = opt.lse != nullptr;
  if (alibi) {
    View a = view(op, "alibi_slopes", opt.alibi_slopes);
    require_vector(op, "alibi_slopes", a, ir::Scalar::F32, s.heads_q);
    plan.add("alibi_slopes", a);
  }
  if (lse) {
    View l = view(op, "lse", opt.lse);
    require_f32_shape(op, "lse", l, {int64_t(s.batch), int64_t(s.heads_q), int64_t(s.seqlen_q)});
    plan.add("lse", l);
  }
  if (q.numel == 0) return plan;
  plan.set_run([tq, to, cache, s, d, paged, alibi, lse](const uint64_t* addr, const double*, const jit::Stream& st) {
    ops::AttentionTensor q2 = tq, o2 = to;
    ops::KvCache c = cache;
    q2.address = addr[0];
    c.k.address = addr[1];
    c.v.address = addr[2];
    c.seqlens = addr[3];
    o2.address = addr[4];
    ops::DecodeOptions o = d;
    size_t i = 5;
    if (paged) c.block_table = addr[i++];
    if (alibi) o.alibi_slopes = addr[i++];
    if (lse) o.lse = addr[i++];
    ops::attention_decode(q2, c, o2, s, o, &st);
  });
  return plan;
}

}  // namespace kaio::capi

using namespace kaio;

extern "C" {

int kaio_attention(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* out,
                   const kaio_attention_options* o, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_attention(q, k, v, out, o);
    std::vector<uint64_t> addr{capi::address_of(q), capi::address_of(k), capi::address_of(v), capi::address_of(out)};
    if (o && o->cu_seqlens_q) {
      addr.push_back(capi::address_of(o->cu_seqlens_q));
      addr.push_back(capi::address_of(o->cu_seqlens_k));
    }
    if (o && o->alibi_slopes) addr.push_back(capi::address_of(o->alibi_slopes));
    if (o && o->lse) addr.push_back(capi::address_of(o->lse));
    plan.launch(addr.data(), addr.size(), nullptr, 0, stream);
  });
}

int kaio_plan_attention(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* out,
                        const kaio_attention_options* o, kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_attention(q, k, v, out, o); });
}

int kaio_attention_decode(const kaio_tensor* q, const kaio_tensor* k_cache, const kaio_tensor* v_cache,
                          const kaio_tensor* seqlens, const kaio_tensor* out, const kaio_decode_options* o,
                          void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_attention_decode(q, k_cache, v_cache, seqlens, out, o);
    std::vector<uint64_t> addr{capi::address_of(q), capi::address_of(k_cache), capi::address_of(v_cache),
                               capi::address_of(seqlens), capi::address_of(out)};
    if (o && o->block_table) addr.push_back(capi::address_of(o->block_table));
    if (o && o->alibi_slopes) addr.push_back(capi::address_of(o->alibi_slopes));
    if (o && o->lse) addr.push_back(capi::address_of(o->lse));
    plan.launch(addr.data(), addr.size(), nullptr, 0, stream);
  });
}

int kaio_plan_attention_decode(const kaio_tensor* q, const kaio_tensor* k_cache, const kaio_tensor* v_cache,
                               const kaio_tensor* seqlens, const kaio_tensor* out, const kaio_decode_options* o,
                               kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_attention_decode(q, k_cache, v_cache, seqlens, out, o); });
}

}  // extern "C"
