// Tune once: however many threads and processes ask for a bucket at the same time, it is
// tuned once and every caller gets that one choice.
//
//   in a process     the first call of a key leads; concurrent calls of the key wait for its
//                    outcome (KAIO_TUNE_WAIT=off: they are told to run the op's default,
//                    untimed, and ask again later). Different keys tune side by side: their
//                    compiles overlap, their timings take turns on the device (tuner.h).
//   across processes the leader takes a claim in the tuning database, in the write
//                    transaction that finds no record: key "~claim|<key>" -> owner pid, host,
//                    pid namespace, start, deadline. Others poll for the record (or, with
//                    KAIO_TUNE_WAIT=off, run the default meanwhile); a claim whose owner is
//                    gone (same host and pid namespace, pid dead) or whose deadline passed
//                    is taken over. Storing the record removes the claim in one transaction.
//   failures         a tuning that throws (or finds no working candidate) gives every waiter
//                    the fallback (Outcome::Default), never the exception; its claim is
//                    released so that another process may try.
//   noisy records    a stored record marked noisy is tuned again, once per process, when
//                    KAIO_TUNE=on finds the GPU idle (gpu_idle()); until then it serves.
//
// KAIO_TUNE_CLAIM_SECONDS (default 300) is a claim's lifetime; KAIO_TUNE_WAIT_SECONDS
// (default: the claim's lifetime + 30) bounds one wait, after which the caller runs the
// default and asks again on its next call. KAIO_DISABLE_CACHE=1: no claims (a process
// tunes for itself).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "kaio/tuner/tuner.h"

namespace kaio::tuner {

struct Job {
  std::string key;  // the printable tuning key
  std::string op;
  uint64_t table_hash = 0;
  // Builds the candidates (and their scratch inputs): called only by the thread that tunes.
  std::function<std::vector<Candidate>()> candidates;
  // Whether a stored record can serve this caller (its winner is still a candidate); null:
  // any record of the table hash.
  std::function<bool(const Record&)> usable;
  Options options;
  // Tune even when a record exists (joining a tuning of the key already under way).
  // KAIO_TUNE=force does the same once per key per process.
  bool force = false;
};

struct Outcome {
  enum Source {
    Stored,  // a record in the database (written by an earlier or a concurrent process)
    Tuned,   // tuned here, by this call or by a concurrent call this one waited for
    Default  // no choice: run the op's default, untimed (see `final`)
  } source = Default;
  std::optional<Record> record;  // Stored, Tuned (a Tuned record's winner may be empty: none worked)
  // False while another thread or process is still tuning (KAIO_TUNE_WAIT=off, or the
  // wait ran out): ask again on a later call. True: the outcome stands for this process.
  bool final = true;
  bool waited = false;  // this call waited for another's tuning
};

// The choice for job.key (never throws; KAIO_TUNE=off is the op's business).
Outcome tune_once(const Job& job);

// Forgets the outcomes kept in this process (tunings in progress are left alone): the next
// call of each key reads the database again.
void forget_outcomes();

// Claims, as stored.
struct Claim {
  std::string key;
  int64_t pid = 0;
  std::string host;
  std::string pid_ns;  // /proc/self/ns/pid's link: the pid means something in this namespace only
  uint64_t start_ms = 0, deadline_ms = 0;  // Unix milliseconds
  uint64_t token = 0;  // tells this claim from a later one of the same owner
};
inline constexpr std::string_view kClaimPrefix = "~claim|";
std::string claim_key(const std::string& key);
bool is_claim_key(std::string_view db_key);
std::string encode_claim(const Claim& c);
std::optional<Claim> decode_claim(std::string_view bytes);
// The claim this process would take now (pid, host, namespace, deadline from
// KAIO_TUNE_CLAIM_SECONDS).
Claim make_claim(const std::string& key);
// Why a claim may be taken over at `now_ms` ("deadline passed", "owner pid N is gone"), or
// empty while its owner may still be at work.
std::string claim_stale(const Claim& c, uint64_t now_ms);
uint64_t now_ms();

// Whether the GPU looks idle (utilization through NVML, loaded with dlopen; false when it
// cannot tell). Tests inject a probe; null restores the default.
bool gpu_idle();
void set_idle_probe(std::function<bool()> probe);

namespace detail {
// The positive number of seconds in environment variable `name`; unset: `fallback`; not a
// positive number: a warning (once) and `fallback` (tuner.cpp: the budget; once.cpp: claims).
double env_seconds(const char* name, double fallback);
}  // namespace detail

}  // namespace kaio::tuner
