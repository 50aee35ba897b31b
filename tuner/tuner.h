// The autotuner's core: shape buckets, the device identity, tuning records persisted in the
// cache's "tuning" database, the timing loop and its counters. It knows nothing of any op:
// an op (ops/matmul_tune.h) turns a problem into a key and a list of candidates.
//
//   first call in a bucket   the candidates (prepare = compile, run, check) are prepared in
//                            parallel, checked once, timed (warm-up, median of >= 10 runs),
//                            the fastest is chosen; the record keeps every candidate's time
//                            or why it was skipped, and is stored under the key
//   later calls, processes   the stored record answers: zero timed runs
//
// KAIO_TUNE=off (the first candidate that can serve, no timing), on (default), force
// (tune again even when a record exists). A record whose table hash differs from the op's
// current variant table is ignored and replaced, so changing one op's table re-tunes only
// that op.
//
// Honest timings: a process times one bucket at a time per GPU (compiles still run in
// parallel); a candidate whose runs spread more than Options::max_spread (interquartile
// range over the median) is timed again, and the first candidate is timed once more at the
// end: when the spread stays or the two times of the first candidate drift apart, the GPU
// was busy with work the tuner does not control, and the record is marked `noisy` (tuned
// again, once per process, when KAIO_TUNE=on finds the GPU idle; see tuner/once.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kaio/jit/buffer.h"

namespace kaio::tuner {

enum class Mode { Off, On, Force };
// KAIO_TUNE, read at each call (off | on | force; anything else: on, with one warning).
Mode mode();
const char* mode_name(Mode m);

// The power-of-two bucket of a size: the smallest power of two >= n (0 for 0).
uint32_t bucket(uint64_t n);

// The device tuned for: "NVIDIA H100 80GB HBM3" and its SM count, with the arch. In
// interpret mode: "interpreter", 0 SMs, the nominal arch.
struct Device {
  std::string name;
  int sms = 0;
  std::string arch;
  uint64_t l2_bytes = 0;
};
const Device& device();

// One candidate's outcome in a record.
struct CandidateResult {
  std::string name;
  std::string status = "ok";  // "ok", or why it was skipped ("compile: ...", "check: ...", "budget")
  double median_ms = 0;       // when ok
  uint32_t runs = 0;          // timed runs
  double spread = 0;          // interquartile range of the runs over their median (when ok)
};

struct Record {
  std::string key;           // the printable tuning key
  std::string op;            // e.g. "matmul"
  std::string winner;        // a candidate's name
  uint64_t table_hash = 0;   // of the op's variant table when tuned
  uint64_t created_unix = 0;
  double tune_seconds = 0;   // wall time of the whole tuning
  std::vector<CandidateResult> candidates;
  // The timings were disturbed (a spread or a drift above the bound): the winner stands
  // until the bucket is tuned again on an idle GPU.
  bool noisy = false;
  // The first timed candidate's median when timed again after the others, over its first
  // median, minus one (0 with fewer than two timed candidates).
  double drift = 0;
  // The runner-up's time over the winner's, minus one (0.12: the runner-up is 12% slower);
  // nullopt with fewer than two timed candidates.
  std::optional<double> runner_up_margin() const;
};

// Records on disk: magic "KAIOTUN\0" | u32 schema | u32 payload bytes | JSON payload |
// u64 xxh3-64 of the payload. Anything else decodes to nullopt with `why`.
inline constexpr uint32_t kTuningSchema = 1;
std::string encode(const Record& r);
std::optional<Record> decode(std::string_view bytes, std::string* why = nullptr);

// A candidate to tune: `prepare` compiles (runs in parallel with the other candidates'),
// `run` launches once on the tuning stream, `check` (called once, after a first run, in
// candidate order) runs on known inputs and compares with the reference: an empty string
// when it agrees, else why not. The op's check keeps the first result it sees as the
// reference, so candidates come in order of trust.
struct Candidate {
  std::string name;
  std::function<void()> prepare;
  std::function<void()> run;
  std::function<std::string()> check;  // null: nothing to check (the reference itself)
};

// Times `runs` runs of `run` and returns each run's milliseconds. The default uses
// jit::Event pairs on `stream` (host clock in interpret mode). Tests inject a fake one.
using Timer = std::function<std::vector<double>(const std::string& candidate, const std::function<void()>& run,
                                               uint32_t runs, const jit::Stream* stream)>;
void set_timer(Timer t);  // null: the default

struct Options {
  // Per bucket, for checking and timing (compiles are not counted: the kernel cache keeps
  // them): candidates not yet timed when it runs out are skipped, but one is always timed.
  // Below 0: $KAIO_TUNE_BUDGET_SECONDS, else 2.
  double budget_seconds = -1;
  uint32_t warmup = 2;
  uint32_t min_runs = 10;
  uint32_t max_runs = 50;
  const jit::Stream* stream = nullptr;  // where the runs go (null: the default stream)
  // Contention: runs whose interquartile range exceeds max_spread of their median (and
  // min_spread_ms) are timed again up to `retimes` times (the steadiest set is kept); a
  // spread left above it, or a drift of the first candidate above it, marks the record
  // noisy.
  double max_spread = 0.25;
  double min_spread_ms = 0.002;  // below this the spread is the events' resolution, not contention
  uint32_t retimes = 2;
  int device = 0;  // the GPU the runs go to: tunings of one device take turns
};

// Tunes: prepares every candidate (in parallel), runs and checks each once, times those
// that passed, and returns the record (winner empty when none
// worked). Never throws for a candidate's failure.
Record tune(const std::string& key, const std::string& op, uint64_t table_hash, std::vector<Candidate> candidates,
            const Options& o = {});

// The persisted table, in the cache's LMDB environment ($KAIO_CACHE_DIR, ...): nullopt on a
// miss, a damaged record or a record of another table hash. A cache error never throws.
// KAIO_DISABLE_CACHE=1: nothing is read or written (choices last as long as the process).
std::optional<Record> load(const std::string& key, uint64_t table_hash);
void store(const Record& r);

// Counters since process start (or reset_stats()).
struct Stats {
  uint64_t tunings = 0;       // buckets tuned (timed) in this process
  uint64_t timed_runs = 0;    // runs timed (warm-ups not counted)
  uint64_t stored_hits = 0;   // buckets answered by a persisted record
  uint64_t memory_hits = 0;   // calls answered by an op's in-process bucket map
  uint64_t failed_candidates = 0;  // compile, check or launch failed: never timed
  uint64_t over_budget = 0;        // working candidates left untimed: the bucket's budget ran out
  uint64_t untuned = 0;       // buckets decided without timing (KAIO_TUNE=off)
  // Tune once (tuner/once.h):
  uint64_t waits = 0;              // calls that waited for another thread's or process's tuning
  uint64_t claims_taken_over = 0;  // claims of a dead or overdue owner taken over
  uint64_t untimed_meanwhile = 0;  // calls served by the default while a tuning ran (KAIO_TUNE_WAIT=off)
  uint64_t fallbacks = 0;          // tunings that failed: their callers got the default
  uint64_t retimed = 0;            // candidates timed again for a spread above the bound
  uint64_t noisy_records = 0;      // tunings whose record is marked noisy
  uint64_t noisy_retunes = 0;      // noisy records tuned again on an idle GPU
};
Stats stats();
void reset_stats();
// How many times this process tuned each key (since start or reset_stats()).
std::vector<std::pair<std::string, uint64_t>> tunings_by_key();
namespace detail {
void count_memory_hit();
void count_stored_hit();
void count_untuned();
enum class Counter { Waits, TakenOver, UntimedMeanwhile, Fallbacks, NoisyRetunes };
void count(Counter c);
}  // namespace detail

}  // namespace kaio::tuner
