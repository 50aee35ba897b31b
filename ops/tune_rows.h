// Choosing a row of an op's tile table per bucket, shared by the attention tuners
// (ops/attention_tune.cpp, ops/attention_backward_tune.cpp): the choice, the process's memo of
// final choices, the flow around tune_once (KAIO_TUNE=off, memo, stored record or tuning),
// and the scratch inputs' random 16-bit values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kaio/ir/half.h"
#include "kaio/ir/types.h"
#include "kaio/tuner/once.h"

namespace kaio::tuner {

template <class Row>
struct RowChoice {
  const Row* variant = nullptr;  // null: no tensor-core row serves the problem (Auto runs it)
  enum Source { Untuned, Stored, Tuned } source = Untuned;
  Record record;
  bool final = true;  // false: the default row stands in while another thread or process tunes
};

namespace detail {

// Final choices of this process by key (a stand-in while another tunes is not kept).
template <class Row>
struct RowMemo {
  std::mutex m;
  std::unordered_map<std::string, const Row*> map;
  void clear() {
    std::lock_guard<std::mutex> g(m);
    map.clear();
  }
};

// The job of an op's row tuning: its name, its table's hash, the caller's options (timed on
// `stream` unless they name one).
inline Job row_job(const char* op, uint64_t table_hash, const Options& options, const jit::Stream* stream) {
  Job job;
  job.op = op;
  job.table_hash = table_hash;
  job.options = options;
  if (!job.options.stream) job.options.stream = stream;
  return job;
}

// `able`: the rows that run the problem, the default (Auto's) first. `job` carries the op,
// the table hash, the options and the candidates; the key is made only when there is a
// choice to make. Never throws for a failed tuning (the default row stands).
template <class Row>
RowChoice<Row> choose_row(const std::vector<const Row*>& able, const std::function<std::string()>& key_of, Job job,
                          RowMemo<Row>& memo) {
  RowChoice<Row> ch;
  if (!able.empty()) ch.variant = able.front();
  if (able.size() <= 1) return ch;  // nothing to choose between (or no tensor-core row: Auto)
  if (mode() == Mode::Off) {
    count_untuned();
    return ch;
  }
  job.key = key_of();
  {
    std::lock_guard<std::mutex> g(memo.m);
    auto it = memo.map.find(job.key);
    if (it != memo.map.end()) {
      count_memory_hit();
      ch.variant = it->second;
      return ch;
    }
  }
  job.usable = [&able](const Record& r) {
    return std::any_of(able.begin(), able.end(), [&](const Row* a) { return r.winner == a->name; });
  };
  const Outcome out = tune_once(job);
  ch.final = out.final;
  if (out.record) {
    ch.record = *out.record;
    ch.source = out.source == Outcome::Stored ? RowChoice<Row>::Stored : RowChoice<Row>::Tuned;
    for (const Row* a : able)
      if (ch.record.winner == a->name) ch.variant = a;
  }
  if (ch.final) {
    std::lock_guard<std::mutex> g(memo.m);
    memo.map.emplace(job.key, ch.variant);
  }
  return ch;
}

// n random 16-bit values (f16 or bf16) uniform in [-1, 1], and one of them as a double.
inline std::vector<uint16_t> random_16(size_t n, ir::Scalar t, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) x = t == ir::Scalar::F16 ? half(d(rng)).bits : bfloat16(d(rng)).bits;
  return out;
}
inline double value_16(uint16_t bits, ir::Scalar t) {
  return t == ir::Scalar::F16 ? double(float(half::from_bits(bits))) : double(float(bfloat16::from_bits(bits)));
}

// At most 1024 evenly spread indices of `total` rows: the rows a check compares.
inline std::vector<uint64_t> sample_rows(uint64_t total) {
  const uint64_t count = std::min<uint64_t>(total, 1024);
  std::vector<uint64_t> rows;
  for (uint64_t i = 0; i < count; ++i) rows.push_back(count == 1 ? 0 : i * (total - 1) / (count - 1));
  return rows;
}

}  // namespace detail

}  // namespace kaio::tuner
