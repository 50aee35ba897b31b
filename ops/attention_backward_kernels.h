// The attention backward kernels' parameters (internal): declared by the builders, packed
// by the launches in attention_backward.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>

#include "kaio/ops/attention_backward.h"
#include "kaio/ops/kernel/signature.h"

namespace kaio::ops {

// One row of the backward's tile table (ops/attention_backward_variants.cpp): a plan for a
// head dim on one engine, the tiles of both tensor-core parts (dq, and dk with dv). The
// first row of a head dim and engine is the one Auto takes; the others are the tuner's
// candidates (AttentionKernel::Tuned) and can be forced by name.
enum class AttentionEngine : uint8_t;  // ops/attention_kernels.h: Mma, Wgmma
struct AttentionBackwardTiles {
  uint32_t bm, bn, stages;  // wgmma: bm = bn = 64
};
struct AttentionBackwardVariant {
  const char* name;
  uint32_t head_dim;
  AttentionEngine engine;
  AttentionBackwardTiles dq, dkv;
  const AttentionBackwardTiles& tiles(AttentionBackwardPart part) const { return part == AttentionBackwardPart::Dq ? dq : dkv; }
};
std::span<const AttentionBackwardVariant> attention_backward_variants();
// The row Auto takes for a head dim on an engine (null: none, the rows kernels serve it).
const AttentionBackwardVariant* attention_backward_pick(uint32_t head_dim, AttentionEngine engine);
// The row of that name (null: none).
const AttentionBackwardVariant* attention_backward_find(const char* name);
AttentionBackwardMmaConfig attention_backward_mma_config(ir::Scalar dtype, const AttentionBackwardVariant& v,
                                                         AttentionBackwardPart part);
AttentionBackwardWgmmaConfig attention_backward_wgmma_config(ir::Scalar dtype, const AttentionBackwardVariant& v,
                                                             AttentionBackwardPart part);

}  // namespace kaio::ops

namespace kaio::ops::detail {

// kBwdStatsLocal (the wgmma kernels on a varlen batch): the pre-pass writes a row's D and
// lse2 at its position within its sequence (b, h, i), not among the packed rows: a TMA box's
// innermost start must be 16-byte aligned, which a packed row start is not.
enum : uint32_t { kBwdVarlen = 1, kBwdAlibi = 2, kBwdLse2 = 4, kBwdStatsLocal = 8 };

// The D pre-pass: delta[st index of (b, i, h)] = sum_e do[e] * o[e], where the st index is
// b * st_bs + h * st_hs + (qstart + i); with kBwdLse2 also lse2[st index] = lse[lse index]
// * log2(e) (the wgmma kernels read both from rows padded to a multiple of 4, for TMA).
struct AttentionDotSignature {
  kernel::Ptr o{"o"}, dout{"dout"}, delta{"delta", ir::Scalar::F32};
  kernel::Ptr lse{"lse", ir::Scalar::F32, true}, lse2{"lse2", ir::Scalar::F32};
  kernel::Ptr cu_q{"cu_q", ir::Scalar::S32, true};
  kernel::Param<uint64_t> o_bs{"o_bs"}, o_ss{"o_ss"}, o_hs{"o_hs"};
  kernel::Param<uint64_t> do_bs{"do_bs"}, do_ss{"do_ss"}, do_hs{"do_hs"};
  kernel::Param<uint64_t> lse_bs{"lse_bs"}, lse_hs{"lse_hs"}, st_bs{"st_bs"}, st_hs{"st_hs"};
  kernel::Param<uint32_t> sq{"sq"}, flags{"flags"};

  explicit AttentionDotSignature(ir::Scalar dtype) {
    o.elem = dout.elem = dtype;
    o.is_const = dout.is_const = true;
  }
  auto fields() {
    return std::tie(o, dout, delta, lse, lse2, cu_q, o_bs, o_ss, o_hs, do_bs, do_ss, do_hs, lse_bs, lse_hs, st_bs, st_hs, sq, flags);
  }
};

// The gradient kernels (dq, and dk / dv): everything but o. Strides in elements; lse and
// delta at b * lse_bs + h * lse_hs + (qstart + i).
struct AttentionBwdSignature {
  kernel::Ptr q{"q"}, k{"k"}, v{"v"}, dout{"dout"}, dq{"dq"}, dk{"dk"}, dv{"dv"};
  kernel::Ptr lse{"lse", ir::Scalar::F32, true}, delta{"delta", ir::Scalar::F32, true}, alibi{"alibi", ir::Scalar::F32, true};
  kernel::Ptr cu_q{"cu_q", ir::Scalar::S32, true}, cu_k{"cu_k", ir::Scalar::S32, true};
  kernel::Param<uint64_t> q_bs{"q_bs"}, q_ss{"q_ss"}, q_hs{"q_hs"};
  kernel::Param<uint64_t> k_bs{"k_bs"}, k_ss{"k_ss"}, k_hs{"k_hs"};
  kernel::Param<uint64_t> v_bs{"v_bs"}, v_ss{"v_ss"}, v_hs{"v_hs"};
  kernel::Param<uint64_t> do_bs{"do_bs"}, do_ss{"do_ss"}, do_hs{"do_hs"};
  kernel::Param<uint64_t> dq_bs{"dq_bs"}, dq_ss{"dq_ss"}, dq_hs{"dq_hs"};
  kernel::Param<uint64_t> dk_bs{"dk_bs"}, dk_ss{"dk_ss"}, dk_hs{"dk_hs"};
  kernel::Param<uint64_t> dv_bs{"dv_bs"}, dv_ss{"dv_ss"}, dv_hs{"dv_hs"};
  kernel::Param<uint64_t> lse_bs{"lse_bs"}, lse_hs{"lse_hs"};
  kernel::Param<uint32_t> sq{"sq"}, sk{"sk"}, group{"group"};
  kernel::Param<float> scale{"scale"}, softcap{"softcap"};
  kernel::Param<int32_t> window_left{"window_left"}, window_right{"window_right"};
  kernel::Param<uint32_t> flags{"flags"};  // kBwd* bits

  explicit AttentionBwdSignature(ir::Scalar dtype) {
    q.elem = k.elem = v.elem = dout.elem = dq.elem = dk.elem = dv.elem = dtype;
    q.is_const = k.is_const = v.is_const = dout.is_const = true;
  }
  auto fields() {
    return std::tie(q, k, v, dout, dq, dk, dv, lse, delta, alibi, cu_q, cu_k, q_bs, q_ss, q_hs, k_bs, k_ss, k_hs, v_bs, v_ss, v_hs,
                    do_bs, do_ss, do_hs, dq_bs, dq_ss, dq_hs, dk_bs, dk_ss, dk_hs, dv_bs, dv_ss, dv_hs, lse_bs, lse_hs, sq, sk,
                    group, scale, softcap, window_left, window_right, flags);
  }
};

// The bottom-right aligned window both tensor-core schedules mask with: i32 values of the
// sequence lengths and the window's sides (-1: unbounded; causal is right 0). Query i's key
// position is i + sk - sq.
struct BwdWindow {
  ir::Value sq, sk, wl, wr;

  // Is key j visible to query i (both inside their sequences)?
  ir::Value visible(ir::Value i, ir::Value j) const {
    ir::Value center = i + (sk - sq);
    return i < sq && j < sk && (wl < 0 || j >= center - wl) && (wr < 0 || j <= center + wr);
  }
  // The queries [lo, hi) that see key j, and the keys [lo, hi) query i sees.
  std::pair<ir::Value, ir::Value> queries_of(ir::Value j) const {
    ir::Value off = sk - sq;
    ir::Value lo = ir::select(wr >= 0, ir::max(j - off - wr, 0), 0);
    ir::Value hi = ir::select(wl >= 0, ir::min(j - off + wl + 1, sq), sq);
    return {lo, ir::max(hi, lo)};
  }
  std::pair<ir::Value, ir::Value> keys_of(ir::Value i) const {
    ir::Value center = i + (sk - sq);
    ir::Value lo = ir::select(wl >= 0, ir::max(center - wl, 0), 0);
    ir::Value hi = ir::select(wr >= 0, ir::min(center + wr + 1, sk), sk);
    return {lo, ir::max(hi, lo)};
  }
};

// The first row and key of batch entry `batch` and the lengths (varlen: from the prefix
// sums); u32 values.
struct BwdSequence {
  ir::Value qstart, sq, kstart, sk;
};
BwdSequence bwd_sequence(ir::KernelBuilder& b, AttentionBwdSignature& s, ir::Value batch);

// The wgmma kernels (ops/attention_backward_wgmma.cpp). Their lse and D come from the
// pre-pass (kBwdLse2): rows padded to attention_backward_sq_pad(seqlen_q) floats, row i of
// (b, h) at (b * heads_q + h) * sq_pad + i. The refusal says why they do not run a problem
// with `row` of the tile table (empty: they do); the launch runs dq, then dk / dv.
uint32_t attention_backward_sq_pad(uint32_t seqlen_q);
std::string attention_backward_wgmma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                             const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                             const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row);
void attention_backward_wgmma_launch(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                     const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                     const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row, float scale,
                                     uint64_t lse2, uint64_t delta, const jit::Stream* stream);

// Why `row` of the tile table does not run the problem on this device (empty: it does): the
// engine's refusal, or the row's own (head dim, shared memory). The tuner's candidates are
// the rows this accepts.
std::string attention_backward_variant_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                               const AttentionTensor& dout, const AttentionGradients& g, const AttentionShape& s,
                                               const AttentionBackwardOptions& opt, const AttentionBackwardVariant& row);

}  // namespace kaio::ops::detail
