// Scaled dot-product attention: the forward pass and decoding against a KV cache.
//
//   o = softmax(mods(scale * q k^T)) v          per batch entry and query head
//
// q is (B, Sq, Hq, D), k and v are (B, Sk, Hkv, D), o is like q; each tensor has its own
// batch, sequence and head strides (in elements; the D elements of a head are contiguous),
// so (B, S, H, D) and (B, H, S, D) layouts and the slices of a fused QKV buffer all work.
// Query head h reads KV head h / (Hq / Hkv) (MHA, GQA and MQA). Computed in f32, rounded
// once to the dtype; f32, f16 and bf16 (q, k, v and o of one dtype).
//
// The score modifiers, in order: softcap (s = cap * tanh(s / cap)), ALiBi
// (s -= slope[h] * |i + Sk - Sq - j|), then the mask. Causal and windowed masks are aligned
// to the bottom right when Sq != Sk: query i sits at key position i + Sk - Sq and sees the
// keys j with  i + Sk - Sq - left <= j <= i + Sk - Sq + right  (causal: right = 0; -1: no
// bound on that side). A query row that sees no key gets o = 0 and lse = -inf.
//
//   ops::AttentionShape s{.batch = 4, .seqlen_q = 4096, .seqlen_k = 4096, .heads_q = 16, .heads_kv = 16, .head_dim = 128};
//   ops::attention(ops::bshd(q, F16, s.seqlen_q, s.heads_q, 128), ops::bshd(k, ...), ops::bshd(v, ...),
//                  ops::bshd(o, ...), s, {.causal = true, .lse = lse_addr});
//
// Varlen: cu_seqlens_q / cu_seqlens_k (int32, B + 1 prefix sums) pack B sequences along the
// sequence axis (batch strides unused); seqlen_q / seqlen_k are then the longest sequence.
// lse is f32, natural log, at (b * Hq + h) * Sq + i (varlen: h * total_q + row).
//
// Decoding: 1-16 new query tokens per sequence against a cache whose length per sequence is
// a device array (int32 seqlens[B]); the cache is contiguous (B, capacity, Hkv, D) or paged
// (pages of page_size tokens, (pages, page_size, Hkv, D), with an int32 block table
// [B, max_pages]). The new tokens are the last Sq positions of their sequence (causal
// aligned bottom right). When the batch does not fill the GPU the keys are split into parts
// whose partial results a second kernel combines exactly through their logsumexps.
//
// Each UsageError names the op and the argument and is raised before anything is launched.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "kaio/ir/types.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

// One attention operand: an address, its dtype and its strides in elements.
struct AttentionTensor {
  uint64_t address = 0;
  ir::Scalar dtype = ir::Scalar::F16;
  uint64_t batch_stride = 0, seq_stride = 0, head_stride = 0;
};

// Dense layouts of S tokens of H heads of D elements.
AttentionTensor bshd(uint64_t address, ir::Scalar dtype, uint32_t seqlen, uint32_t heads, uint32_t head_dim);
AttentionTensor bhsd(uint64_t address, ir::Scalar dtype, uint32_t seqlen, uint32_t heads, uint32_t head_dim);

struct AttentionShape {
  uint32_t batch = 1;
  uint32_t seqlen_q = 0, seqlen_k = 0;  // varlen: the longest sequence; decode: Sq <= 16, seqlen_k the longest cache
  uint32_t heads_q = 1, heads_kv = 1;
  uint32_t head_dim = 0;                // 64, 96, 128 or 256
};

// Which kernel runs: Auto picks the tensor-core kernel where it applies (f16 / bf16, sm_80+,
// 16-byte aligned q, k, v and strides of whole 16-byte vectors), else the rows kernel.
// Wgmma: the Hopper kernel (sm_90a; Auto takes it there where it applies: ops/attention_wgmma.cpp).
// Tuned: the tile shape the tuner chose for the problem's bucket (ops/attention_tune.h):
// timed once per bucket on first use, persisted like matmul_auto's choices; problems no
// tensor-core row serves, and varlen batches, run as Auto.
enum class AttentionKernel : uint8_t { Auto, Rows, Mma, Wgmma, Tuned };

struct AttentionOptions {
  float scale = 0.0f;              // 0: 1 / sqrt(head_dim)
  bool causal = false;
  int32_t window_left = -1, window_right = -1;  // -1: unbounded
  float softcap = 0.0f;            // 0: off
  uint64_t alibi_slopes = 0;       // f32 [Hq], or 0
  uint64_t lse = 0;                // f32 output, or 0
  uint64_t cu_seqlens_q = 0, cu_seqlens_k = 0;  // int32 [B + 1]: varlen (both or neither)
  uint32_t total_q = 0;            // varlen: rows of q (the lse's per-head extent)
  // varlen: rows of k and v. The Hopper kernel reads through TMA maps whose extents are
  // total_q and total_k: it takes varlen batches only when both are given (else the mma kernel).
  uint32_t total_k = 0;
  AttentionKernel kernel = AttentionKernel::Auto;
  // A row of the forward's tile table by name ("fa2_d128_m64", "fa3_d128": kaio-cache ls and
  // the tuner's records name them): that tile shape and its engine, a UsageError where it
  // does not apply. Null: chosen by `kernel`.
  const char* variant = nullptr;
};

void attention(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v, const AttentionTensor& o,
               const AttentionShape& shape, const AttentionOptions& opt = {}, const jit::Stream* stream = nullptr);

// A KV cache. Contiguous: k and v are (B, capacity, Hkv, D) through their strides. Paged:
// k and v are (pages, page_size, Hkv, D), batch_stride the stride of a page.
struct KvCache {
  AttentionTensor k, v;
  uint64_t seqlens = 0;        // int32 [B]: the cache length of each sequence (the new tokens included)
  uint64_t block_table = 0;    // int32 [B, max_pages]; 0: contiguous
  uint32_t max_pages = 0;      // entries per block-table row
  uint32_t page_size = 0;      // a power of two, 16..256
  uint32_t capacity = 0;       // contiguous: tokens per sequence; paged: pages in the pool
};

struct DecodeOptions {
  float scale = 0.0f;
  bool causal = true;          // the new tokens see themselves and what precedes them
  int32_t window_left = -1;
  float softcap = 0.0f;
  uint64_t alibi_slopes = 0;
  uint64_t lse = 0;            // f32 at (b * Hq + h) * Sq + i
  uint32_t splits = 0;         // 0: chosen from the shape and the device; 1: no split
  // Mma: the tensor-core decode kernel (a UsageError where it does not apply); Tuned: as
  // Auto (decode has no tuned table); Wgmma: a UsageError.
  AttentionKernel kernel = AttentionKernel::Auto;
  bool validate = false;       // copy seqlens and the block table to the host and range-check them (synchronous)
};

void attention_decode(const AttentionTensor& q, const KvCache& cache, const AttentionTensor& o, const AttentionShape& shape,
                      const DecodeOptions& opt = {}, const jit::Stream* stream = nullptr);

// The kernels. One warp per query row, its lanes over 32 keys at a time (scores, online
// softmax) and over the head dimension (the output): any dtype, any stride, any arch.
struct AttentionRowsConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  uint32_t warps = 4;
  auto fields() const { return std::tie(dtype, head_dim, warps); }
  std::string str() const;
};
jit::Family<AttentionRowsConfig>& attention_rows_family();

// The tensor-core kernel (FlashAttention-2 schedule on mma.sync): BM query rows per block
// (16 per warp), KV tiles of BN keys through a cp.async ring of `stages`.
struct AttentionMmaConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128, bm = 64, bn = 64, stages = 2;
  auto fields() const { return std::tie(dtype, head_dim, bm, bn, stages); }
  std::string str() const;
  uint32_t shared_bytes() const;  // the dynamic shared memory of a block
};
jit::Family<AttentionMmaConfig>& attention_mma_family();

// The tensor-core decode kernel (ops/attention_decode.cpp): the query rows of one KV head
// (16 x mt of them) against chunks of BN keys through a cp.async ring of `stages`, on
// `warps` warps that split each chunk's keys.
struct AttentionDecodeConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128, mt = 1, bn = 64, stages = 3, warps = 4;
  auto fields() const { return std::tie(dtype, head_dim, mt, bn, stages, warps); }
  std::string str() const;
  uint32_t shared_bytes() const;  // the dynamic shared memory of a block
};
jit::Family<AttentionDecodeConfig>& attention_decode_family();

// The Hopper kernel (FlashAttention-3 schedule, sm_90a): one producer warpgroup loads Q once
// and K / V tiles of BN keys by TMA into a ring of `stages`; two consumer warpgroups of 64
// query rows each run S = Q K^T and O += P V on wgmma (P from registers).
struct AttentionWgmmaConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  uint32_t bm = 128;  // query rows a block: 128, 192 (D 64: three consumers), or 64 (D 256: the consumers split D)
  uint32_t bn = 128, stages = 2;
  bool windowed = false;  // a window's left edge (or a right one wider than causal): masks and tile ranges for it
  bool mods = false;      // softcap and ALiBi on the scores (built windowed: the masks of every tile)
  bool varlen = false;    // packed sequences (cu_seqlens): each block reads its sequence's bounds (built windowed)
  // One block an SM taking (query tile, head, batch) items in turn, the longest (causal) first;
  // not with varlen. Taken where it measured faster (attention_wgmma_persistent).
  bool persistent = false;
  auto fields() const { return std::tie(dtype, head_dim, bm, bn, stages, windowed, mods, varlen, persistent); }
  std::string str() const;
  uint32_t shared_bytes() const;  // the dynamic shared memory of a block
};
jit::Family<AttentionWgmmaConfig>& attention_wgmma_family();

// The combination of split-KV partials: one block per (b, i, h) row, its threads over the splits.
struct AttentionCombineConfig {
  ir::Scalar dtype = ir::Scalar::F16;
  uint32_t head_dim = 128;
  auto fields() const { return std::tie(dtype, head_dim); }
  std::string str() const;
};
jit::Family<AttentionCombineConfig>& attention_combine_family();

}  // namespace kaio::ops
