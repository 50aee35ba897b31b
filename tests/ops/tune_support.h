// Shared by the tile-table tuners' tests (attention forward and backward): a fake timer that
// gives each candidate the time a test chooses, its guard, and a record read back from the
// cache's tuning database.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kaio/cache/store.h"
#include "kaio/tuner/tuner.h"

namespace kaio::test::tune {

// A candidate's run takes what `times` says (10 ms where it says nothing); the timer never
// runs it (the check does). `calls` counts the timed runs per candidate.
struct FakeTimer {
  std::map<std::string, double> times;
  std::map<std::string, uint32_t>* calls;
  std::vector<double> operator()(const std::string& name, const std::function<void()>&, uint32_t runs, const jit::Stream*) {
    (*calls)[name] += runs;
    return std::vector<double>(runs, times.count(name) ? times.at(name) : 10.0);
  }
};

struct TimerGuard {
  explicit TimerGuard(tuner::Timer t) { tuner::set_timer(std::move(t)); }
  ~TimerGuard() { tuner::set_timer(nullptr); }
};

// The record stored under `key` in the cache at `dir` (nullopt: none).
inline std::optional<tuner::Record> stored_record(const std::string& dir, const std::string& key) {
  std::optional<tuner::Record> found;
  cache::Store::open(dir)->for_each("tuning", [&](std::string_view k, std::string_view v) {
    if (k != key) return;
    found = tuner::decode(v);
    REQUIRE(found);
  });
  return found;
}

}  // namespace kaio::test::tune
