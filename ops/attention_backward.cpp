// ops::attention_backward: argument checks, the launch plan, the launches.
#include "kaio/ops/attention_backward.h"

#include <cmath>
#include <string>
#include <vector>

#include "kaio/jit/device.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/attention_backward_tune.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

namespace {

using ir::Scalar;
constexpr const char* kOp = "attention_backward";

[[noreturn]] void fail(const std::string& arg, const std::string& m) {
  throw UsageError("", kOp, std::string(kOp) + ": argument '" + arg + "': " + m);
}

std::string str(uint64_t v) { return std::to_string(v); }

void check_shape(const AttentionShape& s) {
  if (s.batch == 0) fail("batch", "batch = 0");
  if (s.seqlen_q == 0) fail("seqlen_q", "seqlen_q = 0");
  if (s.seqlen_k == 0) fail("seqlen_k", "seqlen_k = 0");
  if (s.heads_q == 0 || s.heads_kv == 0) fail("heads", "heads_q and heads_kv must be positive");
  if (s.heads_q % s.heads_kv) fail("heads_q", "heads_q " + str(s.heads_q) + " is not a multiple of heads_kv " + str(s.heads_kv));
  const uint32_t d = s.head_dim;
  if (d != 64 && d != 96 && d != 128 && d != 256) fail("head_dim", "head_dim " + str(d) + " is not supported (64, 96, 128, 256)");
  if (s.heads_q > 65535) fail("heads_q", "more than 65535 heads");
  if (s.batch > 65535) fail("batch", "more than 65535 sequences");
}

// Non-null, aligned to the element, and one dtype for every tensor.
void check_tensor(const char* arg, const AttentionTensor& t, Scalar dtype) {
  if (t.address == 0) fail(arg, std::string(arg) + " is a null pointer");
  if (t.dtype != Scalar::F32 && t.dtype != Scalar::F16 && t.dtype != Scalar::BF16)
    fail(arg, std::string("dtype ") + ir::scalar_name(t.dtype) + " is not supported (f32, f16, bf16)");
  if (t.dtype != dtype) fail(arg, std::string(arg) + " is " + ir::scalar_name(t.dtype) + ", q is " + ir::scalar_name(dtype));
  if (t.address % ir::scalar_bytes(t.dtype)) fail(arg, std::string(arg) + " is not aligned to its element");
}

void check_aligned(const char* arg, uint64_t address) {
  if (address % 4) fail(arg, std::string(arg) + " is not aligned to its element");
}

void check_options(const AttentionBackwardOptions& o) {
  if (!std::isfinite(o.scale) || o.scale < 0.0f) fail("scale", "scale must be finite and not negative (0: 1/sqrt(head_dim))");
  if (o.window_left < -1) fail("window_left", "window_left " + std::to_string(o.window_left) + " is negative (-1: unbounded)");
  if (o.window_right < -1) fail("window_right", "window_right " + std::to_string(o.window_right) + " is negative (-1: unbounded)");
  if (!std::isfinite(o.softcap) || o.softcap < 0.0f) fail("softcap", "softcap must be finite and not negative (0: off)");
  const bool varlen = o.cu_seqlens_q || o.cu_seqlens_k;
  if (varlen && !(o.cu_seqlens_q && o.cu_seqlens_k))
    fail(o.cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q", "varlen needs both cu_seqlens_q and cu_seqlens_k");
  if (varlen && o.total_q == 0) fail("total_q", "varlen needs total_q (the rows of q, the lse's per-head extent)");
  check_aligned("cu_seqlens_q", o.cu_seqlens_q);
  check_aligned("cu_seqlens_k", o.cu_seqlens_k);
  check_aligned("alibi_slopes", o.alibi_slopes);
}

// The tensor-core parts after the D pre-pass: dq and dk / dv by kernels of their own.
constexpr AttentionBackwardPart kMmaParts[] = {AttentionBackwardPart::Dq, AttentionBackwardPart::Dkv};

// Why the mma.sync kernels with `row` do not apply (empty: they do).
std::string mma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& dout,
                        const AttentionShape& s, bool varlen, const AttentionBackwardVariant* row) {
  if (q.dtype != Scalar::F16 && q.dtype != Scalar::BF16) return "it takes f16 or bf16";
  const jit::DeviceInfo& dev = jit::device_info();
  if (dev.sm < 80) return "it needs sm_80 or newer, the device is " + dev.arch;
  if (!row) return "no tile shape for head_dim " + str(s.head_dim);
  if (row->engine != AttentionEngine::Mma || row->head_dim != s.head_dim)
    return std::string(row->name) + " is not an mma row of this head dim";
  for (AttentionBackwardPart part : kMmaParts)
    if (attention_backward_mma_config(q.dtype, *row, part).shared_bytes() > dev.smem_per_block_optin)
      return "its tiles do not fit shared memory";
  for (const AttentionTensor* t : {&q, &k, &v, &dout}) {
    if (t->address % 16) return "q, k, v and dout must be 16-byte aligned";
    if (t->seq_stride % 8 || t->head_stride % 8 || (!varlen && t->batch_stride % 8))
      return "the strides of q, k, v and dout must be multiples of 8 elements";
  }
  return "";
}

// Varlen packs the sequences along the sequence axis: batch strides unused.
void set_strides(kernel::Param<uint64_t>& bs, kernel::Param<uint64_t>& ss, kernel::Param<uint64_t>& hs, const AttentionTensor& t,
                 bool varlen) {
  bs.host = varlen ? 0 : t.batch_stride;
  ss.host = t.seq_stride;
  hs.host = t.head_stride;
}

}  // namespace

void attention_backward(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& o,
                        const AttentionTensor& dout, uint64_t lse, const AttentionGradients& g, const AttentionShape& shape,
                        const AttentionBackwardOptions& opt, const jit::Stream* stream) {
  check_shape(shape);
  check_tensor("q", q, q.dtype);
  check_tensor("k", k, q.dtype);
  check_tensor("v", v, q.dtype);
  check_tensor("o", o, q.dtype);
  check_tensor("dout", dout, q.dtype);
  check_tensor("dq", g.dq, q.dtype);
  check_tensor("dk", g.dk, q.dtype);
  check_tensor("dv", g.dv, q.dtype);
  if (lse == 0) fail("lse", "lse is a null pointer (the forward's logsumexp is required)");
  check_aligned("lse", lse);
  check_options(opt);
  const bool varlen = opt.cu_seqlens_q != 0;
  // The row of the tile table that runs it: forced by name, the tuner's, or Auto's.
  const AttentionBackwardVariant* row = nullptr;
  if (opt.variant) {
    row = attention_backward_find(opt.variant);
    if (!row) fail("variant", std::string("no row named '") + opt.variant + "' in the attention backward tile table");
    if (row->head_dim != shape.head_dim)
      fail("variant", std::string(opt.variant) + " is for head_dim " + str(row->head_dim) + ", not " + str(shape.head_dim));
    const std::string why = detail::attention_backward_variant_refusal(q, k, v, dout, g, shape, opt, *row);
    if (!why.empty()) fail("variant", std::string(opt.variant) + " does not apply: " + why);
  } else if (opt.kernel == AttentionKernel::Tuned && !varlen) {
    row = tuner::choose_attention_backward(q, k, v, o, dout, g, shape, opt, stream).variant;
  }
  bool wgmma = row && row->engine == AttentionEngine::Wgmma, mma = row && row->engine == AttentionEngine::Mma;
  if (!row && opt.kernel != AttentionKernel::Rows && opt.kernel != AttentionKernel::Mma) {
    row = attention_backward_pick(shape.head_dim, AttentionEngine::Wgmma);
    const std::string why =
        row ? detail::attention_backward_wgmma_refusal(q, k, v, dout, g, shape, opt, *row) : "it takes head_dim 64 or 128";
    if (opt.kernel == AttentionKernel::Wgmma && !why.empty()) fail("kernel", "the wgmma kernels do not apply: " + why);
    wgmma = why.empty();
    if (!wgmma) row = nullptr;
  }
  if (!wgmma && !mma && opt.kernel != AttentionKernel::Rows) {
    row = attention_backward_pick(shape.head_dim, AttentionEngine::Mma);
    const std::string why = mma_refusal(q, k, v, dout, shape, varlen, row);
    if (opt.kernel == AttentionKernel::Mma && !why.empty()) fail("kernel", "the mma.sync kernels do not apply: " + why);
    mma = why.empty();
  }

  const uint64_t lse_bs = varlen ? 0 : uint64_t(shape.heads_q) * shape.seqlen_q;
  const uint64_t lse_hs = varlen ? opt.total_q : shape.seqlen_q;
  const uint64_t rows = varlen ? uint64_t(shape.heads_q) * opt.total_q : uint64_t(shape.batch) * shape.heads_q * shape.seqlen_q;
  const uint32_t flags = (varlen ? detail::kBwdVarlen : 0u) | (opt.alibi_slopes ? detail::kBwdAlibi : 0u);
  const uint32_t warps = 4;
  // D in the stream's workspace, held while the kernels are enqueued; for the wgmma kernels
  // D and lse * log2(e) in rows padded for TMA.
  // (varlen: each sequence's rows at their positions within it, (b, h, i): kBwdStatsLocal)
  const uint64_t sq_pad = detail::attention_backward_sq_pad(shape.seqlen_q);
  const uint64_t stat_rows = wgmma ? uint64_t(shape.batch) * shape.heads_q * sq_pad : rows;
  detail::Workspace ws = detail::workspace(stream, (wgmma ? 2 : 1) * stat_rows * sizeof(float));
  const uint64_t lse2 = wgmma ? ws.address + stat_rows * sizeof(float) : 0;

  detail::AttentionDotSignature ds(q.dtype);
  ds.o.host = o.address;
  ds.dout.host = dout.address;
  ds.delta.host = ws.address;
  ds.cu_q.host = opt.cu_seqlens_q;
  set_strides(ds.o_bs, ds.o_ss, ds.o_hs, o, varlen);
  set_strides(ds.do_bs, ds.do_ss, ds.do_hs, dout, varlen);
  ds.lse.host = lse;
  ds.lse2.host = lse2;
  ds.lse_bs.host = lse_bs;
  ds.lse_hs.host = lse_hs;
  ds.st_bs.host = wgmma ? shape.heads_q * sq_pad : lse_bs;
  ds.st_hs.host = wgmma ? sq_pad : lse_hs;
  ds.sq.host = shape.seqlen_q;
  ds.flags.host = flags | (wgmma ? detail::kBwdLse2 : 0u) | (wgmma && varlen ? detail::kBwdStatsLocal : 0u);

  detail::AttentionBwdSignature s(q.dtype);
  s.q.host = q.address, s.k.host = k.address, s.v.host = v.address, s.dout.host = dout.address;
  s.dq.host = g.dq.address, s.dk.host = g.dk.address, s.dv.host = g.dv.address;
  s.lse.host = lse;
  s.delta.host = ws.address;
  s.alibi.host = opt.alibi_slopes;
  s.cu_q.host = opt.cu_seqlens_q;
  s.cu_k.host = opt.cu_seqlens_k;
  set_strides(s.q_bs, s.q_ss, s.q_hs, q, varlen);
  set_strides(s.k_bs, s.k_ss, s.k_hs, k, varlen);
  set_strides(s.v_bs, s.v_ss, s.v_hs, v, varlen);
  set_strides(s.do_bs, s.do_ss, s.do_hs, dout, varlen);
  set_strides(s.dq_bs, s.dq_ss, s.dq_hs, g.dq, varlen);
  set_strides(s.dk_bs, s.dk_ss, s.dk_hs, g.dk, varlen);
  set_strides(s.dv_bs, s.dv_ss, s.dv_hs, g.dv, varlen);
  s.lse_bs.host = lse_bs;
  s.lse_hs.host = lse_hs;
  s.sq.host = shape.seqlen_q;
  s.sk.host = shape.seqlen_k;
  s.group.host = shape.heads_q / shape.heads_kv;
  s.scale.host = opt.scale > 0.0f ? opt.scale : static_cast<float>(1.0 / std::sqrt(double(shape.head_dim)));
  s.softcap.host = opt.softcap;
  s.window_left.host = opt.window_left;
  s.window_right.host = opt.causal ? 0 : opt.window_right;
  s.flags.host = flags;

  using Part = AttentionBackwardPart;
  auto& family = attention_backward_rows_family();
  const uint32_t q_tiles = (shape.seqlen_q + warps - 1) / warps, k_tiles = (shape.seqlen_k + warps - 1) / warps;
  const kernel::PackedArgs dargs = kernel::pack(ds);
  family.get({q.dtype, shape.head_dim, Part::Dot, warps})
      .launch_packed({.grid = {q_tiles, shape.heads_q, shape.batch}, .block = {32 * warps}, .stream = stream}, dargs.data(),
                     dargs.size());
  if (wgmma)
    return detail::attention_backward_wgmma_launch(q, k, v, dout, g, shape, opt, *row, s.scale.host, lse2, ws.address, stream);
  const kernel::PackedArgs args = kernel::pack(s);
  if (mma) {
    for (Part part : kMmaParts) {
      const AttentionBackwardMmaConfig mc = attention_backward_mma_config(q.dtype, *row, part);
      const uint32_t own = part == Part::Dq ? mc.bm : mc.bn, len = part == Part::Dq ? shape.seqlen_q : shape.seqlen_k;
      attention_backward_mma_family().get(mc).launch_packed(
          {.grid = {(len + own - 1) / own, part == Part::Dq ? shape.heads_q : shape.heads_kv, shape.batch},
           .block = {32 * mc.warps()}, .shared_bytes = mc.shared_bytes(), .stream = stream},
          args.data(), args.size());
    }
    return;
  }
  family.get({q.dtype, shape.head_dim, Part::Dq, warps})
      .launch_packed({.grid = {q_tiles, shape.heads_q, shape.batch}, .block = {32 * warps}, .stream = stream}, args.data(),
                     args.size());
  family.get({q.dtype, shape.head_dim, Part::Dkv, warps})
      .launch_packed({.grid = {k_tiles, shape.heads_kv, shape.batch}, .block = {32 * warps}, .stream = stream}, args.data(),
                     args.size());
}

namespace detail {

std::string attention_backward_variant_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                               const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                               const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row) {
  if (row.head_dim != s.head_dim) return "it is for head_dim " + str(row.head_dim);
  if (row.engine == AttentionEngine::Wgmma) return attention_backward_wgmma_refusal(q, k, v, dout, g, s, opt, row);
  return mma_refusal(q, k, v, dout, s, opt.cu_seqlens_q != 0, &row);
}

}  // namespace detail

}  // namespace kaio::ops
