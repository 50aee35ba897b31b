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
#include "kaio/ops/attention_backward.h"

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

namespace {

// The forward's operands and options, checked: what attention and its backward share.
struct Parsed {
  View q, k, v, o, cq, ck, alibi;  // cq, ck: varlen; alibi: when given
  ops::AttentionTensor tq, tk, tv, to;
  ops::AttentionShape s;
  ops::AttentionOptions opts;
  bool varlen = false, has_alibi = false;
  int dims = 4;
};

Parsed parse(const char* op, const kaio_tensor* q_t, const kaio_tensor* k_t, const kaio_tensor* v_t, const kaio_tensor* o_t,
             const char* o_name, const kaio_attention_options& opt) {
  Parsed p;
  p.varlen = opt.cu_seqlens_q || opt.cu_seqlens_k;
  if (p.varlen && !(opt.cu_seqlens_q && opt.cu_seqlens_k))
    throw UsageError("", op, arg_text(opt.cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q") +
                                 "varlen needs both cu_seqlens_q and cu_seqlens_k");
  const int dims = p.dims = p.varlen ? 3 : 4;
  p.q = view(op, "q", q_t), p.k = view(op, "k", k_t), p.v = view(op, "v", v_t), p.o = view(op, o_name, o_t);
  p.tq = operand(op, "q", p.q, dims), p.tk = operand(op, "k", p.k, dims), p.tv = operand(op, "v", p.v, dims);
  p.to = operand(op, o_name, p.o, dims);
  require_same(op, "v", p.v, "k", p.k);
  require_same(op, o_name, p.o, "q", p.q);
  require_dtype(op, "k", p.k, p.q.dtype);
  if (p.q.shape[dims - 1] != p.k.shape[dims - 1])
    throw UsageError("", op, arg_text("k") + "head_dim " + std::to_string(p.k.shape[dims - 1]) + " differs from q's " +
                                 std::to_string(p.q.shape[dims - 1]));
  if (!p.varlen && p.q.shape[0] != p.k.shape[0])
    throw UsageError("", op, arg_text("k") + "batch " + std::to_string(p.k.shape[0]) + " differs from q's " +
                                 std::to_string(p.q.shape[0]));
  ops::AttentionShape& s = p.s;
  s.heads_q = dim(p.q, dims - 2);
  s.heads_kv = dim(p.k, dims - 2);
  s.head_dim = dim(p.q, dims - 1);
  ops::AttentionOptions& o2 = p.opts;
  o2.scale = opt.scale;
  o2.causal = opt.causal != 0;
  o2.window_left = opt.window_left;
  o2.window_right = opt.window_right;
  o2.softcap = opt.softcap;
  o2.kernel = kernel_of(op, opt.kernel);
  if (p.varlen) {
    p.cq = view(op, "cu_seqlens_q", opt.cu_seqlens_q), p.ck = view(op, "cu_seqlens_k", opt.cu_seqlens_k);
    if (p.cq.ndim() != 1 || p.cq.shape[0] < 2)
      throw UsageError("", op, arg_text("cu_seqlens_q") + "expected batch + 1 prefix sums, got shape " + p.cq.shape_str());
    require_vector(op, "cu_seqlens_q", p.cq, ir::Scalar::S32, p.cq.shape[0]);
    require_vector(op, "cu_seqlens_k", p.ck, ir::Scalar::S32, p.cq.shape[0]);
    if (opt.max_seqlen_q == 0 || opt.max_seqlen_k == 0)
      throw UsageError("", op, arg_text("max_seqlen_q") + "varlen needs the longest sequences (max_seqlen_q, max_seqlen_k)");
    s.batch = static_cast<uint32_t>(p.cq.shape[0] - 1);
    s.seqlen_q = opt.max_seqlen_q;
    s.seqlen_k = opt.max_seqlen_k;
    o2.total_q = dim(p.q, 0);
    o2.total_k = dim(p.k, 0);
  } else {
    s.batch = dim(p.q, 0);
    s.seqlen_q = dim(p.q, 1);
    s.seqlen_k = dim(p.k, 1);
  }
  p.has_alibi = opt.alibi_slopes != nullptr;
  if (p.has_alibi) {
    p.alibi = view(op, "alibi_slopes", opt.alibi_slopes);
    require_vector(op, "alibi_slopes", p.alibi, ir::Scalar::F32, s.heads_q);
  }
  return p;
}

// The lse's shape: (batch, heads_q, seq_q), varlen (heads_q, tokens).
std::vector<int64_t> lse_shape(const Parsed& p) {
  if (p.varlen) return {int64_t(p.s.heads_q), int64_t(p.opts.total_q)};
  return {int64_t(p.s.batch), int64_t(p.s.heads_q), int64_t(p.s.seqlen_q)};
}

// The prefix sums and the slopes, after the tensors (in the order the plan takes them).
void add_extras(Plan& plan, const Parsed& p) {
  if (p.varlen) {
    plan.add("cu_seqlens_q", p.cq);
    plan.add("cu_seqlens_k", p.ck);
  }
  if (p.has_alibi) plan.add("alibi_slopes", p.alibi);
}
// ... and their addresses into the options, from addr[i] on.
void take_extras(ops::AttentionOptions& o, const Parsed& p, const uint64_t* addr, size_t& i) {
  if (p.varlen) {
    o.cu_seqlens_q = addr[i++];
    o.cu_seqlens_k = addr[i++];
  }
  if (p.has_alibi) o.alibi_slopes = addr[i++];
}

ops::AttentionTensor at(ops::AttentionTensor t, uint64_t a) {
  t.address = a;
  return t;
}

}  // namespace

Plan plan_attention(const kaio_tensor* q_t, const kaio_tensor* k_t, const kaio_tensor* v_t, const kaio_tensor* o_t,
                    const kaio_attention_options* opt_in) {
  const char* op = "attention";
  kaio_attention_options def{};
  def.window_left = def.window_right = -1;
  const kaio_attention_options& opt = opt_in ? *opt_in : def;
  const Parsed p = parse(op, q_t, k_t, v_t, o_t, "out", opt);
  Plan plan(op);
  plan.add("q", p.q);
  plan.add("k", p.k);
  plan.add("v", p.v);
  plan.add("out", p.o);
  add_extras(plan, p);
  const bool lse = opt.lse != nullptr;
  if (lse) {
    View l = view(op, "lse", opt.lse);
    require_f32_shape(op, "lse", l, lse_shape(p));
    plan.add("lse", l);
  }
  if (p.q.numel == 0 || p.k.numel == 0) return plan;  // nothing to launch (the op refuses empty shapes)
  plan.set_run([p, lse](const uint64_t* addr, const double*, const jit::Stream& st) {
    ops::AttentionOptions o = p.opts;
    size_t i = 4;
    take_extras(o, p, addr, i);
    if (lse) o.lse = addr[i++];
    ops::attention(at(p.tq, addr[0]), at(p.tk, addr[1]), at(p.tv, addr[2]), at(p.to, addr[3]), p.s, o, &st);
  });
  return plan;
}

Plan plan_attention_backward(const kaio_tensor* q_t, const kaio_tensor* k_t, const kaio_tensor* v_t, const kaio_tensor* o_t,
                             const kaio_tensor* do_t, const kaio_tensor* lse_t, const kaio_tensor* dq_t,
                             const kaio_tensor* dk_t, const kaio_tensor* dv_t, const kaio_attention_options* opt_in) {
  const char* op = "attention_backward";
  kaio_attention_options def{};
  def.window_left = def.window_right = -1;
  const kaio_attention_options& opt = opt_in ? *opt_in : def;
  const Parsed p = parse(op, q_t, k_t, v_t, o_t, "out", opt);
  const View dout = view(op, "dout", do_t), lse = view(op, "lse", lse_t);
  const View dq = view(op, "dq", dq_t), dk = view(op, "dk", dk_t), dv = view(op, "dv", dv_t);
  const ops::AttentionTensor t_do = operand(op, "dout", dout, p.dims), t_dq = operand(op, "dq", dq, p.dims);
  const ops::AttentionTensor t_dk = operand(op, "dk", dk, p.dims), t_dv = operand(op, "dv", dv, p.dims);
  require_same(op, "dout", dout, "q", p.q);
  require_same(op, "dq", dq, "q", p.q);
  require_same(op, "dk", dk, "k", p.k);
  require_same(op, "dv", dv, "k", p.k);
  require_f32_shape(op, "lse", lse, lse_shape(p));
  Plan plan(op);
  plan.add("q", p.q);
  plan.add("k", p.k);
  plan.add("v", p.v);
  plan.add("out", p.o);
  plan.add("dout", dout);
  plan.add("lse", lse);
  plan.add("dq", dq);
  plan.add("dk", dk);
  plan.add("dv", dv);
  add_extras(plan, p);
  if (p.q.numel == 0 || p.k.numel == 0) return plan;  // nothing to launch (the op refuses empty shapes)
  ops::AttentionBackwardOptions bo;
  bo.scale = p.opts.scale;
  bo.causal = p.opts.causal;
  bo.window_left = p.opts.window_left;
  bo.window_right = p.opts.window_right;
  bo.softcap = p.opts.softcap;
  bo.total_q = p.opts.total_q;
  bo.total_k = p.opts.total_k;
  bo.deterministic = true;
  bo.kernel = p.opts.kernel;
  plan.set_run([p, bo, t_do, t_dq, t_dk, t_dv](const uint64_t* addr, const double*, const jit::Stream& st) {
    ops::AttentionOptions extras;
    size_t i = 9;
    take_extras(extras, p, addr, i);
    ops::AttentionBackwardOptions o = bo;
    o.cu_seqlens_q = extras.cu_seqlens_q;
    o.cu_seqlens_k = extras.cu_seqlens_k;
    o.alibi_slopes = extras.alibi_slopes;
    ops::attention_backward(at(p.tq, addr[0]), at(p.tk, addr[1]), at(p.tv, addr[2]), at(p.to, addr[3]), at(t_do, addr[4]),
                            addr[5], {at(t_dq, addr[6]), at(t_dk, addr[7]), at(t_dv, addr[8])}, p.s, o, &st);
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

int kaio_attention_backward(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* out,
                            const kaio_tensor* dout, const kaio_tensor* lse, const kaio_tensor* dq, const kaio_tensor* dk,
                            const kaio_tensor* dv, const kaio_attention_options* o, void* stream) {
  return capi::guard([&] {
    capi::Plan plan = capi::plan_attention_backward(q, k, v, out, dout, lse, dq, dk, dv, o);
    std::vector<uint64_t> addr;
    for (const kaio_tensor* t : {q, k, v, out, dout, lse, dq, dk, dv}) addr.push_back(capi::address_of(t));
    if (o && o->cu_seqlens_q) {
      addr.push_back(capi::address_of(o->cu_seqlens_q));
      addr.push_back(capi::address_of(o->cu_seqlens_k));
    }
    if (o && o->alibi_slopes) addr.push_back(capi::address_of(o->alibi_slopes));
    plan.launch(addr.data(), addr.size(), nullptr, 0, stream);
  });
}

int kaio_plan_attention_backward(const kaio_tensor* q, const kaio_tensor* k, const kaio_tensor* v, const kaio_tensor* out,
                                 const kaio_tensor* dout, const kaio_tensor* lse, const kaio_tensor* dq, const kaio_tensor* dk,
                                 const kaio_tensor* dv, const kaio_attention_options* o, kaio_plan** plan) {
  return capi::make_plan(plan, [&] { return capi::plan_attention_backward(q, k, v, out, dout, lse, dq, dk, dv, o); });
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
