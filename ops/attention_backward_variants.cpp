// The attention backward's tile table: a row per plan (head dim, engine, the tiles of the dq
// kernel and of the dk / dv kernel). The first row of a head dim and engine is Auto's; the
// tuner times every row that applies (ops/attention_backward_tune.cpp) and records the
// fastest per bucket. Every row's kernels are in the families' default manifests.
#include <cstring>

#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_kernels.h"

namespace kaio::ops {

namespace {

using Engine = AttentionEngine;

// mma.sync: 16 rows per warp of the side a block owns (dq: bm query rows, dk / dv: bn keys).
// D 128's dk / dv kernel walks query tiles of 32 rows: its dK and dV accumulators take 128
// registers a thread, and 64-row S and dP tiles on top of them spill.
// wgmma: 64 rows a block each side; the rows differ in the stages of each ring (D 64: two
// stages measured 1-4% ahead of three and four on an H200; D 128: the dq kernel at one stage
// holds three blocks an SM, at two stages two; dk / dv at three stages no longer fits two
// blocks).
constexpr AttentionBackwardVariant kRows[] = {
    {.name = "bwd_mma_d64", .head_dim = 64, .engine = Engine::Mma, .dq = {64, 64, 2}, .dkv = {64, 64, 2}},
    {.name = "bwd_mma_d64_s3", .head_dim = 64, .engine = Engine::Mma, .dq = {64, 64, 3}, .dkv = {64, 64, 3}},
    {.name = "bwd_mma_d96", .head_dim = 96, .engine = Engine::Mma, .dq = {64, 64, 2}, .dkv = {64, 64, 2}},
    {.name = "bwd_mma_d96_s3", .head_dim = 96, .engine = Engine::Mma, .dq = {64, 64, 3}, .dkv = {64, 64, 3}},
    {.name = "bwd_mma_d128", .head_dim = 128, .engine = Engine::Mma, .dq = {64, 64, 2}, .dkv = {32, 64, 2}},
    {.name = "bwd_mma_d128_s3", .head_dim = 128, .engine = Engine::Mma, .dq = {64, 64, 3}, .dkv = {32, 64, 3}},
    {.name = "bwd_fa3_d64", .head_dim = 64, .engine = Engine::Wgmma, .dq = {64, 64, 2}, .dkv = {64, 64, 2}},
    {.name = "bwd_fa3_d64_s3", .head_dim = 64, .engine = Engine::Wgmma, .dq = {64, 64, 3}, .dkv = {64, 64, 3}},
    {.name = "bwd_fa3_d64_s4", .head_dim = 64, .engine = Engine::Wgmma, .dq = {64, 64, 4}, .dkv = {64, 64, 4}},
    {.name = "bwd_fa3_d128", .head_dim = 128, .engine = Engine::Wgmma, .dq = {64, 64, 1}, .dkv = {64, 64, 2}},
    {.name = "bwd_fa3_d128_dq2", .head_dim = 128, .engine = Engine::Wgmma, .dq = {64, 64, 2}, .dkv = {64, 64, 2}},
};

}  // namespace

std::span<const AttentionBackwardVariant> attention_backward_variants() { return kRows; }

const AttentionBackwardVariant* attention_backward_pick(uint32_t head_dim, AttentionEngine engine) {
  for (const AttentionBackwardVariant& v : kRows)
    if (v.head_dim == head_dim && v.engine == engine) return &v;
  return nullptr;
}

const AttentionBackwardVariant* attention_backward_find(const char* name) {
  for (const AttentionBackwardVariant& v : kRows)
    if (std::strcmp(v.name, name) == 0) return &v;
  return nullptr;
}

AttentionBackwardMmaConfig attention_backward_mma_config(ir::Scalar dtype, const AttentionBackwardVariant& v,
                                                         AttentionBackwardPart part) {
  const AttentionBackwardTiles& t = v.tiles(part);
  return {dtype, v.head_dim, part, t.bm, t.bn, t.stages};
}

AttentionBackwardWgmmaConfig attention_backward_wgmma_config(ir::Scalar dtype, const AttentionBackwardVariant& v,
                                                             AttentionBackwardPart part) {
  return {dtype, v.head_dim, part, v.tiles(part).stages};
}

}  // namespace kaio::ops
