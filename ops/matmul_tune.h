// Tuning of ops::matmul: the key of a problem's bucket, the candidates (every variant whose
// can_implement accepts the problem on this device), their scratch inputs and their check.
//
// Key: op, input and output types, tf32, layouts, arch, device name and SM count,
// power-of-two buckets of M, N, K and the batch count, and the alignment bits
// can_implement depends on (16-byte pointers, lda and ldb multiples of 8 elements, batch
// strides multiples of 8; 16 for e4m3 / e5m2 inputs, whose 16-byte rows hold 16). Every problem of one bucket is served by the same variant.
//
// Timing runs on scratch buffers, never the caller's: random inputs in [-1, 1], and enough
// copies of A, B and C (rotated run after run) that one pass over them is larger than twice
// the L2 cache, so the timings are those of a cold L2. In interpret mode one copy.
//
// The check: every candidate computes C = A * B on the same inputs (compared on a grid of
// up to 1024 x 1024 elements with the first and last rows and columns, in the first and last
// batch, so that it costs little host time at any size); the first candidate in
// table order (a SIMT variant for f32) is the reference. Tolerance, relative to the
// largest |C| of the reference: f32 1e-4, tf32 2e-2, f16/bf16/e4m3/e5m2 inputs with f32
// output 1e-3, f16 output 5e-3, bf16 output 2e-2; a non-finite value fails.
#pragma once

#include <cstdint>
#include <string>

#include "kaio/ops/matmul.h"
#include "kaio/tuner/tuner.h"

namespace kaio::tuner {

// The printable tuning key of p's bucket on this device.
std::string matmul_key(const ops::MatmulProblem& p);
// xxh3 of the variant table (names, engines, tiles, stages): a stored record with another
// hash was tuned for another table and is ignored.
uint64_t matmul_table_hash();

struct MatmulChoice {
  const ops::MatmulVariant* variant = nullptr;
  enum Source { Untuned, Stored, Tuned } source = Untuned;
  Record record;  // Stored / Tuned: the record
  // False: the first variant that can serve stands in, untimed, while another thread or
  // process tunes the bucket (KAIO_TUNE_WAIT=off, or the wait ran out): ask again later.
  bool final = true;
  bool waited = false;  // waited for another thread's or process's tuning of the bucket
};

// The variant for p's bucket: KAIO_TUNE=off the first that can serve p; else the stored
// record, or (none, or KAIO_TUNE=force, or `force`) a tuning whose record is stored. One
// tuning per bucket across threads and processes (tuner/once.h); a tuning that fails
// gives the first variant that can serve, never an exception.
// UsageError (op "matmul_auto") naming every variant's reason when none can serve p.
MatmulChoice choose_matmul(const ops::MatmulProblem& p, const jit::Stream* stream = nullptr, bool force = false,
                           const Options& o = {});

}  // namespace kaio::tuner
