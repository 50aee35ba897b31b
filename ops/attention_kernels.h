// The attention kernels' parameters (internal): declared by the builders, packed by the
// launches in attention.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "kaio/ir/builder.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/kernel/signature.h"

namespace kaio::ops {

// The tensor-core engines: mma.sync (FlashAttention-2 schedule, sm_80+) and wgmma
// (FlashAttention-3 schedule: TMA, a producer warpgroup, wgmma consumers; sm_90a).
enum class AttentionEngine : uint8_t { Mma, Wgmma };

// One row of the tensor-core kernels' shape table (ops/attention_mma.cpp).
struct AttentionVariant {
  const char* name;
  uint32_t head_dim, bm, bn, stages;
  AttentionEngine engine = AttentionEngine::Mma;
};
std::span<const AttentionVariant> attention_variants();
// The row of `engine` for a problem: head dim, query rows per sequence, heads x batch, the SM count.
const AttentionVariant* attention_pick(uint32_t head_dim, uint32_t seqlen_q, uint64_t heads_x_batch, uint32_t sm_count,
                                       AttentionEngine engine = AttentionEngine::Mma);
AttentionMmaConfig attention_mma_config(ir::Scalar dtype, const AttentionVariant& v);
AttentionWgmmaConfig attention_wgmma_config(ir::Scalar dtype, const AttentionVariant& v);

// The wgmma kernel's row for a problem (Auto's): the largest block whose grid gives every SM
// one, the table's first of that size.
const AttentionVariant* attention_wgmma_row(const AttentionShape& s);
// Whether a wgmma forward call of config c with `items` (query tiles x heads x batches) runs
// the persistent form: causal at head dims up to 128 where the items are more than the SMs
// (where it measured faster than the grid), never with varlen;
// detail::set_attention_wgmma_persistent overrides it.
bool attention_wgmma_persistent(const AttentionWgmmaConfig& c, bool causal, uint64_t items, uint32_t sm_count);
// The wgmma kernel (ops/attention_wgmma.cpp): why it does not run this problem (empty: it
// does), and its launch (after the refusal came back empty), with `row` of the tile table
// (null: the head dim's first wgmma row).
std::string attention_wgmma_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                    const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                    const AttentionVariant* row = nullptr);
void attention_wgmma_launch(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                            const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt, float scale,
                            const jit::Stream* stream, const AttentionVariant* row = nullptr);

namespace detail {
// For bench/attention's sweep: the tensor-core decode kernel runs with this config's bn,
// stages and warps instead of its table row's (null: the table's). This thread's calls only.
void set_decode_override(const AttentionDecodeConfig* c);
// The wgmma forward kernel's persistent form (AttentionWgmmaConfig::persistent), per thread:
// -1 (the default) the policy of attention_wgmma_persistent; 0 never (the grid of query
// tiles); 1 every call the wgmma kernel takes without varlen (bench/attention --persistent,
// the tests that force either form).
void set_attention_wgmma_persistent(int mode);
// The persistent form's items come in groups of this many (head, batch) pairs, the longest
// query tiles of the group's heads first: one pair where every walk is as long (not causal,
// no window); else about four blocks' worth of items, groups of equal size, with the group's K
// and V (kv_bytes a pair) in half the L2.
uint32_t attention_item_group(uint32_t tiles_m, uint64_t pairs, uint32_t blocks, uint64_t kv_bytes, uint64_t l2_bytes,
                              bool uneven);
// Groups of equal size (the default: as many as four blocks' worth makes, the last at most one
// pair smaller), or, off, filled to four blocks' worth (the last the rest): this thread's calls
// only, for bench/attention --filled-groups and the tests.
void set_attention_equal_groups(bool on);
// The two settings above for one scope of this thread (benches and tests that force a form),
// back to the defaults after it.
struct AttentionWgmmaForm {
  explicit AttentionWgmmaForm(int mode, bool equal = true) {
    set_attention_wgmma_persistent(mode);
    set_attention_equal_groups(equal);
  }
  ~AttentionWgmmaForm() {
    set_attention_wgmma_persistent(-1);
    set_attention_equal_groups(true);
  }
  AttentionWgmmaForm(const AttentionWgmmaForm&) = delete;
  AttentionWgmmaForm& operator=(const AttentionWgmmaForm&) = delete;
};
// The persistent form's item counter of a stream (the kernels of a stream run in turn; those
// of two streams may run at once): zeroed once, reset by each launch's last take.
uint64_t attention_item_counter(const jit::Stream* stream);
// A TMA map of one attention tensor (q, k, v, o, do; 16-bit): 4-D in the order its strides
// grow, order 0 (d, s, h, b) or 1 (d, h, s, b), box (64 head elements, `rows` of the
// sequence), 128-byte swizzled; nullopt (and why, in *why) when TMA cannot describe it.
struct AttentionTmaPlan {
  jit::TensorMapTiled map;
  uint32_t order = 0;
};
std::optional<AttentionTmaPlan> attention_tma_plan(const AttentionTensor& t, uint32_t seqlen, uint32_t heads, uint32_t batch,
                                                   uint32_t head_dim, uint32_t rows, std::string* why);
// Why `row` of the forward's tile table does not run the problem (empty: it does).
std::string attention_variant_refusal(const AttentionTensor& q, const AttentionTensor& k, const AttentionTensor& v,
                                      const AttentionTensor& o, const AttentionShape& s, const AttentionOptions& opt,
                                      const AttentionVariant& row);
}  // namespace detail

// One row of the decode kernel's shape table (ops/attention_decode.cpp).
struct AttentionDecodeVariant {
  const char* name;
  uint32_t head_dim, mt, bn, stages, warps;
  uint32_t min_keys = 0;  // taken only for caches of at least this many keys (seqlen_k)
};
std::span<const AttentionDecodeVariant> attention_decode_variants();
// The row for a head dim, the query rows of one KV head (Hq / Hkv x new tokens) and the
// longest cache (seqlen_k): of the rows whose shared memory fits smem_limit (the device's
// opt-in bytes a block), the one with the largest min_keys; null when none.
const AttentionDecodeVariant* attention_decode_pick(uint32_t head_dim, uint32_t rows, uint32_t seqlen_k,
                                                    uint32_t smem_limit = UINT32_MAX);
AttentionDecodeConfig attention_decode_config(ir::Scalar dtype, const AttentionDecodeVariant& v);

}  // namespace kaio::ops

namespace kaio::ops::detail {

// The rows kernel. A block has `warps` warps and covers rows_per_block query rows of one
// head slot (blockIdx.y: `pack` query heads, pack = Hq / Hkv when decoding packs a KV
// head's query heads together, else 1) of one batch entry and key split
// (blockIdx.z = b * splits + split). Row r of a slot is token r / pack, head
// slot * pack + r % pack. Null pointers switch features off: lse, alibi, cu_q / cu_k
// (varlen), seqused_k (run-time cache lengths), block_table (paging). splits > 1 writes
// the normalised partial output and logsumexp of each split to ws_o / ws_lse at row
// ((b * sq + i) * hq + h) * splits + split.
enum : uint32_t { kRowsVarlen = 1, kRowsSeqused = 2, kRowsPaged = 4, kRowsLse = 8, kRowsAlibi = 16 };

struct AttentionRowsSignature {
  kernel::Ptr q{"q"}, k{"k"}, v{"v"}, o{"o"};
  kernel::Ptr lse{"lse", ir::Scalar::F32}, alibi{"alibi", ir::Scalar::F32, true};
  kernel::Ptr cu_q{"cu_q", ir::Scalar::S32, true}, cu_k{"cu_k", ir::Scalar::S32, true};
  kernel::Ptr seqused_k{"seqused_k", ir::Scalar::S32, true}, block_table{"block_table", ir::Scalar::S32, true};
  kernel::Ptr ws_o{"ws_o", ir::Scalar::F32}, ws_lse{"ws_lse", ir::Scalar::F32};
  kernel::Param<uint64_t> q_bs{"q_bs"}, q_ss{"q_ss"}, q_hs{"q_hs"};
  kernel::Param<uint64_t> k_bs{"k_bs"}, k_ss{"k_ss"}, k_hs{"k_hs"};
  kernel::Param<uint64_t> v_bs{"v_bs"}, v_ss{"v_ss"}, v_hs{"v_hs"};
  kernel::Param<uint64_t> o_bs{"o_bs"}, o_ss{"o_ss"}, o_hs{"o_hs"};
  kernel::Param<uint64_t> lse_bs{"lse_bs"}, lse_hs{"lse_hs"};
  kernel::Param<uint32_t> sq{"sq"}, sk{"sk"}, hq{"hq"}, group{"group"}, pack{"pack"}, rows_per_block{"rows_per_block"};
  kernel::Param<uint32_t> max_pages{"max_pages"}, page_shift{"page_shift"}, splits{"splits"}, split_len{"split_len"};
  kernel::Param<float> scale{"scale"}, softcap{"softcap"};
  kernel::Param<int32_t> window_left{"window_left"}, window_right{"window_right"};
  kernel::Param<uint32_t> flags{"flags"};  // kRows* bits: which optional pointers are set

  explicit AttentionRowsSignature(ir::Scalar dtype) {
    q.elem = k.elem = v.elem = o.elem = dtype;
    q.is_const = k.is_const = v.is_const = true;
  }
  auto fields() {
    return std::tie(q, k, v, o, lse, alibi, cu_q, cu_k, seqused_k, block_table, ws_o, ws_lse, q_bs, q_ss, q_hs, k_bs, k_ss,
                    k_hs, v_bs, v_ss, v_hs, o_bs, o_ss, o_hs, lse_bs, lse_hs, sq, sk, hq, group, pack, rows_per_block,
                    max_pages, page_shift, splits, split_len, scale, softcap, window_left, window_right, flags);
  }
};

// The combine kernel: one warp per row ((b * sq + i) * hq + h) of `rows`, reading the
// `splits` partials of that row from ws_o / ws_lse.
struct AttentionCombineSignature {
  kernel::Ptr ws_o{"ws_o", ir::Scalar::F32, true}, ws_lse{"ws_lse", ir::Scalar::F32, true};
  kernel::Ptr o{"o"}, lse{"lse", ir::Scalar::F32};
  kernel::Param<uint64_t> o_bs{"o_bs"}, o_ss{"o_ss"}, o_hs{"o_hs"}, lse_bs{"lse_bs"}, lse_hs{"lse_hs"};
  kernel::Param<uint32_t> rows{"rows"}, sq{"sq"}, hq{"hq"}, splits{"splits"};

  explicit AttentionCombineSignature(ir::Scalar dtype) { o.elem = dtype; }
  auto fields() { return std::tie(ws_o, ws_lse, o, lse, o_bs, o_ss, o_hs, lse_bs, lse_hs, rows, sq, hq, splits); }
};

// The rows of q and keys of batch entry `batch`: from the prefix sums (varlen), the
// run-time key lengths (seqused_k), or the fixed sq / sk. u32 values.
struct Sequence {
  ir::Value qstart, sq, kstart, sk;
};
Sequence sequence(ir::KernelBuilder& b, AttentionRowsSignature& s, ir::Value batch);

// The Hopper kernels' varlen bounds (forward and backward): batch entry `batch`'s first q and
// k token among the packed ones (cu_q, cu_k: s32 prefix sums) and its lengths; u32 values.
inline Sequence packed_sequence(ir::Value cu_q, ir::Value cu_k, ir::Value batch) {
  ir::Value q0 = cu_q[batch], q1 = cu_q[batch + 1u], k0 = cu_k[batch], k1 = cu_k[batch + 1u];
  return {ir::cast<uint32_t>(q0), ir::cast<uint32_t>(q1 - q0), ir::cast<uint32_t>(k0), ir::cast<uint32_t>(k1 - k0)};
}

// Soft-capping's tanh by one ex2 and one .approx division (the attention kernels are
// fast-math), for cap tanh(y) with y = x k2 / (2 log2 e) (k2 = 2 log2(e) times y's scale):
// r = 1 / (2^(x k2) + 1), tanh y = 1 - 2 r and its derivative 1 - tanh^2 y = 4 r (1 - r),
// free of the cancellation of 1 - t^2 near |t| = 1; the limits hold (2^(x k2) = inf gives
// r = 0: tanh 1, derivative 0). Errors are absolute, a few ulp of cap, where tanh.approx's
// relative 2^-10.9 would show in 16-bit outputs and gradients.
inline ir::Value softcap_r(ir::Value x, ir::Value k2) { return 1.0f / (ir::exp2_ftz(x * k2) + 1.0f); }

// The keys [lo, hi) query token i sees (the bottom-right aligned window, cut to split
// `split` of split_len keys) and its key position center = i + Sk - Sq; i32 values.
struct KeyRange {
  ir::Value lo, hi, center;
};
KeyRange key_range(AttentionRowsSignature& s, const Sequence& seq, ir::Value i, ir::Value split);

}  // namespace kaio::ops::detail
