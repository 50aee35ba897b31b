// Tuning of ops::attention (AttentionKernel::Tuned): the key of a problem's bucket, the
// candidates (every row of the forward's tile table for the head dim that runs the problem
// on this device: the mma.sync rows, and the wgmma row on sm_90), their scratch inputs and
// their check. The tuner core (tuner/tuner.h, tuner/once.h) does the rest: one tuning per
// bucket across threads and processes, records in the cache's "tuning" database.
//
// Key: op, dtype, arch, device name and SM count, head dim, power-of-two buckets of Sq, Sk,
// batch x query heads (the blocks a row shape makes) and the GQA ratio, and the score
// options that change the work or which kernels apply: causal, window, softcap, ALiBi, and
// the alignment bits of the tensors (16-byte addresses, strides of whole 16-byte vectors).
//
// Timing runs on scratch q, k, v and o of the problem's shape (dense (B, S, H, D), random
// in [-1, 1]), never the caller's; attention reads each K/V tile many times, so one copy
// (no cold-L2 rotation). The check: every candidate's o on the same inputs, compared on a
// grid of rows, against the first candidate's (the mma row attention_pick would take):
// largest difference over the largest |o|, f16 5e-3, bf16 2e-2; a non-finite value fails.
#pragma once

#include <cstdint>
#include <string>

#include "kaio/ops/attention.h"
#include "kaio/ops/tune_rows.h"
#include "kaio/tuner/tuner.h"

namespace kaio::ops {
struct AttentionVariant;
}

namespace kaio::tuner {

// The printable tuning key of the problem's bucket on this device.
std::string attention_key(const ops::AttentionTensor& q, const ops::AttentionTensor& k, const ops::AttentionTensor& v,
                          const ops::AttentionTensor& o, const ops::AttentionShape& s, const ops::AttentionOptions& opt);
// xxh3 of the forward's tile table: a stored record of another table is ignored.
uint64_t attention_table_hash();

using AttentionChoice = RowChoice<ops::AttentionVariant>;

// The row for the problem's bucket: KAIO_TUNE=off (or a single candidate) the row Auto
// would take; else the stored record, or a tuning whose record is stored. A tuning that
// fails gives the default row, never an exception.
AttentionChoice choose_attention(const ops::AttentionTensor& q, const ops::AttentionTensor& k, const ops::AttentionTensor& v,
                                 const ops::AttentionTensor& o, const ops::AttentionShape& s, const ops::AttentionOptions& opt,
                                 const jit::Stream* stream = nullptr, const Options& options = {});

namespace detail {
// The bucket part of the attention tuners' keys: op, dtype, arch, device name and SM count,
// head dim, power-of-two buckets of Sq, Sk, batch x query heads and the GQA ratio, and the
// score options that change the work or which kernels apply.
std::string attention_bucket(const char* op, ir::Scalar dtype, const ops::AttentionShape& s, bool causal, int32_t window_left,
                             int32_t window_right, float softcap, bool alibi);
}  // namespace detail

// Forgets this process's choices (and the tuner's outcomes): the next call of a bucket asks
// the tuning table again. For tests and tools.
void attention_tune_reset();

}  // namespace kaio::tuner
