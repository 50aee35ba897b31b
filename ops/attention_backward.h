// The attention backward pass: dq, dk and dv from q, k, v, o, do and the forward's
// logsumexp, without the Sq x Sk score matrix.
//
//   P = exp(mods(scale * q k^T) - lse)      recomputed per tile from q, k and the lse
//   dv = P^T do      dp = do v^T      D = rowsum(do * o)      ds = P * (dp - D)
//   dq = scale * (ds * mods') k       dk = scale * (ds * mods')^T q
//
// where mods' is the derivative of the score modifiers: 1 - tanh^2(scale q k / cap) with a
// softcap (ALiBi and the masks shift or cut scores and do not scale them). The tensors, the
// shape and the options mean what they mean for ops::attention (same layouts, strides,
// causal bottom-right, windows, softcap, ALiBi, GQA / MQA, varlen); lse is the forward's f32
// output at the same index. dk and dv of a KV head are summed over the query heads that
// read it. dq, dk, dv are in q's dtype (f32, f16, bf16); the work is in f32.
//
//   ops::attention_backward(q, k, v, o, dout, lse, {dq, dk, dv}, shape, {.causal = true});
//
// Kernels: on sm_90 the wgmma ones (D 64 and 128, no softcap or varlen), else mma.sync (sm_80+,
// D 64 to 128, every option), else the scalar rows kernels (f32, D 256, odd strides). The
// tensor-core kernels' tiles are rows of a table (ops/attention_backward_variants.cpp) that
// the tuner chooses between (AttentionKernel::Tuned).
// Deterministic either way: every kernel sums each gradient element in one thread in a
// fixed order (dq by a kernel that owns the query rows, dk and dv by one that owns the
// keys), so the gradients are bit-identical run to run. A one-pass form that added dq with
// f32 atomics from the keys' kernel measured 1.4-1.5x slower on an H200 on mma.sync and 3.7x
// on wgmma, and was removed;
// `deterministic` stays as the caller's statement of the guarantee.
//
// Each UsageError names the op and the argument and is raised before anything is launched.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "kaio/ops/attention.h"

namespace kaio::ops {

struct AttentionGradients {
  AttentionTensor dq, dk, dv;
};

struct AttentionBackwardOptions {
  float scale = 0.0f;              // 0: 1 / sqrt(head_dim)
  bool causal = false;
  int32_t window_left = -1, window_right = -1;  // -1: unbounded
  float softcap = 0.0f;            // 0: off
  uint64_t alibi_slopes = 0;       // f32 [Hq], or 0
  uint64_t cu_seqlens_q = 0, cu_seqlens_k = 0;  // int32 [B + 1]: varlen (both or neither)
  uint32_t total_q = 0;            // varlen: rows of q (the lse's per-head extent)
  uint32_t total_k = 0;            // varlen: rows of k and v (with total_q, lets the wgmma kernels take the batch)
  bool deterministic = false;      // bit-identical gradients run to run (they are either way)
  // Auto: wgmma where it applies, then mma, then rows. Tuned: the row of the backward's tile
  // table the tuner chose for the problem's bucket (ops/attention_backward_tune.h), timed once
  // per bucket on first use and persisted like matmul_auto's choices; problems no tensor-core
  // row serves, and varlen batches, run as Auto.
  AttentionKernel kernel = AttentionKernel::Auto;
  // A row of the backward's tile table by name ("bwd_fa3_d128", "bwd_mma_d64_s3": the tuner's
  // records name them): its engine and tiles, a UsageError where it does not apply. Null:
  // chosen by `kernel`.
  const char* variant = nullptr;
};

// lse: the forward's logsumexp (f32). Raises UsageError for bad arguments.
void attention_backward(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                        const AttentionTensor& o, const AttentionTensor& dout, uint64_t lse, const AttentionGradients& grads,
                        const AttentionShape& shape, const AttentionBackwardOptions& opt = {},
                        const jit::Stream* stream = nullptr);

// The scalar kernels (any dtype, stride and arch; the reference for the tensor-core ones).
// Three parts, launched in order on one stream:
//   Dot: D = rowsum(do * o) per query row (f32 workspace), one warp per row;
//   Dq:  one warp per query row walks its keys: dq, no atomics;
//   Dkv: one warp per key walks the query rows of each query head of its group in order:
//        dk and dv, no atomics.
enum class AttentionBackwardPart : uint8_t { Dot, Dq, Dkv };
struct AttentionBackwardRowsConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  AttentionBackwardPart part = AttentionBackwardPart::Dq;
  uint32_t warps = 4;
  auto fields() const { return std::tie(dtype, head_dim, part, warps); }
  std::string str() const;
};
jit::Family<AttentionBackwardRowsConfig>& attention_backward_rows_family();

// The tensor-core kernels (FlashAttention-2 schedule on mma.sync m16n8k16), 16 rows per warp:
//   Dkv: a block owns BN keys of one KV head (dk, dv in registers) and walks the query tiles
//        of BM rows of each query head of the group in order (Q and dO through a cp.async
//        ring of `stages`): S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
//   Dq:  a block owns BM query rows and walks the KV tiles of BN keys (K and V through the
//        ring): S = Q K^T, dP = dO V^T, dQ += dS K.
// Dq and Dkv use no atomics: each output element is summed by one thread in a fixed order.
struct AttentionBackwardMmaConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  AttentionBackwardPart part = AttentionBackwardPart::Dkv;
  uint32_t bm = 64, bn = 64, stages = 2;
  auto fields() const { return std::tie(dtype, head_dim, part, bm, bn, stages); }
  std::string str() const;
  uint32_t warps() const { return (part == AttentionBackwardPart::Dq ? bm : bn) / 16; }
  uint32_t shared_bytes() const;  // the dynamic shared memory of a block
};
jit::Family<AttentionBackwardMmaConfig>& attention_backward_mma_family();

// The Hopper kernels (sm_90a; the same schedule on wgmma, ops/attention_backward_wgmma.cpp):
// a block is one warpgroup that owns 64 rows (Dkv: keys, Dq: query rows) and walks tiles of
// 64 of the other side through a TMA-fed ring of `stages` stages; two blocks share an SM.
// They take f16 / bf16, head dims 64 and 128, causal, windows, ALiBi, (the `softcap`
// configs) a softcap and (the `varlen` configs, without softcap) varlen batches given
// total_q and total_k.
struct AttentionBackwardWgmmaConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  AttentionBackwardPart part = AttentionBackwardPart::Dkv;
  uint32_t stages = 2;
  bool softcap = false;  // P and dS in one pass after both products (the tanh's derivative is not kept)
  bool varlen = false;   // packed sequences: each block reads its sequence's bounds from the prefix sums
  auto fields() const { return std::tie(dtype, head_dim, part, stages, softcap, varlen); }
  std::string str() const;
  uint32_t shared_bytes() const;  // the dynamic shared memory of a block
};
jit::Family<AttentionBackwardWgmmaConfig>& attention_backward_wgmma_family();

}  // namespace kaio::ops
