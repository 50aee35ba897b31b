// Tuning of ops::attention_backward (AttentionKernel::Tuned): the key of a problem's bucket,
// the candidates (every row of the backward's tile table for the head dim that runs the
// problem on this device: the mma.sync rows, and the wgmma rows on sm_90), their scratch
// inputs and their check. The tuner core (tuner/tuner.h, tuner/once.h) does the rest: one
// tuning per bucket across threads and processes, records in the cache's "tuning" database.
//
// Key: op, dtype, arch, device name and SM count, head dim, power-of-two buckets of Sq, Sk,
// batch x query heads and the GQA ratio, the score options that change the work or which
// kernels apply (causal, window, softcap, ALiBi), and the alignment bits of the tensors.
//
// Timing runs the whole backward (the D pre-pass and both kernels) on scratch q, k, v, o, dO
// of the problem's shape (dense (B, S, H, D), random in [-1, 1]) and the lse of a forward on
// them, never the caller's tensors. The check: each candidate's dq, dk and dv on the same
// inputs, poisoned first, compared on a grid of rows against the first candidate's (the row
// Auto would take): for each gradient the largest difference over its largest magnitude, f16
// 5e-3, bf16 2e-2; a non-finite value fails.
#pragma once

#include <cstdint>
#include <string>

#include "kaio/ops/attention_backward.h"
#include "kaio/ops/tune_rows.h"
#include "kaio/tuner/tuner.h"

namespace kaio::ops {
struct AttentionBackwardVariant;
}

namespace kaio::tuner {

// The printable tuning key of the problem's bucket on this device.
std::string attention_backward_key(const ops::AttentionTensor& q, const ops::AttentionTensor& k, const ops::AttentionTensor& v,
                                   const ops::AttentionTensor& dout, const ops::AttentionGradients& g,
                                   const ops::AttentionShape& s, const ops::AttentionBackwardOptions& opt);
// xxh3 of the backward's tile table: a stored record of another table is ignored.
uint64_t attention_backward_table_hash();

using AttentionBackwardChoice = RowChoice<ops::AttentionBackwardVariant>;

// The row for the problem's bucket: KAIO_TUNE=off (or a single candidate) the row Auto would
// take; else the stored record, or a tuning whose record is stored. A tuning that fails gives
// the default row, never an exception.
AttentionBackwardChoice choose_attention_backward(const ops::AttentionTensor& q, const ops::AttentionTensor& k,
                                                  const ops::AttentionTensor& v, const ops::AttentionTensor& o,
                                                  const ops::AttentionTensor& dout, const ops::AttentionGradients& g,
                                                  const ops::AttentionShape& s, const ops::AttentionBackwardOptions& opt,
                                                  const jit::Stream* stream = nullptr, const Options& options = {});

// Forgets this process's choices (and the tuner's outcomes). For tests and tools.
void attention_backward_tune_reset();

}  // namespace kaio::tuner
