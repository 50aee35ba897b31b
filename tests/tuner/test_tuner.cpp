// The tuner's core without a GPU: records, buckets, KAIO_TUNE, the timing loop with fake
// candidates and a fake timer (a candidate that fails to compile, run or check is recorded
// and skipped), the budget, and persistence in a temporary cache.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <stdexcept>

#include "kaio/tuner/tuner.h"
#include "../support.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using kaio::test::ScopedEnv;
using kaio::test::TempDir;
namespace tn = kaio::tuner;

namespace {

tn::Record sample_record() {
  tn::Record r;
  r.key = "matmul|f16>f32|row/row|sm_90|NVIDIA H100|132sm|m1024|n1024|k1024|b1|align15";
  r.op = "matmul";
  r.winner = "b";
  r.table_hash = 0x1234abcd5678ef00ull;
  r.created_unix = 1700000000;
  r.tune_seconds = 0.75;
  r.candidates = {{"a", "ok", 2.5, 10}, {"b", "ok", 2.0, 12}, {"c", "check: differs", 0, 0}};
  return r;
}

// Fake timer: a candidate's run takes what `times` says (never runs it).
struct FakeTimer {
  std::map<std::string, double> times;
  std::map<std::string, uint32_t> calls;
  std::vector<double> operator()(const std::string& name, const std::function<void()>&, uint32_t runs,
                                 const kaio::jit::Stream*) {
    calls[name] += runs;
    if (!times.count(name)) throw std::runtime_error("no time for " + name);
    return std::vector<double>(runs, times.at(name));
  }
};

struct TimerGuard {
  explicit TimerGuard(tn::Timer t) { tn::set_timer(std::move(t)); }
  ~TimerGuard() { tn::set_timer(nullptr); }
};

tn::Candidate ok(const std::string& name, int* runs = nullptr) {
  return {name, [] {}, [runs] { if (runs) ++*runs; }, [] { return std::string(); }};
}

}  // namespace

TEST_CASE("tuning records round-trip and refuse damaged bytes", "[tuner]") {
  const tn::Record r = sample_record();
  const std::string bytes = tn::encode(r);
  std::string why;
  auto back = tn::decode(bytes, &why);
  REQUIRE(back);
  CHECK(back->key == r.key);
  CHECK(back->winner == "b");
  CHECK(back->table_hash == r.table_hash);
  CHECK(back->tune_seconds == 0.75);
  REQUIRE(back->candidates.size() == 3);
  CHECK(back->candidates[2].status == "check: differs");
  CHECK(back->candidates[1].runs == 12);
  REQUIRE(back->runner_up_margin());
  CHECK(*back->runner_up_margin() == Approx(0.25));

  std::string flipped = bytes;
  flipped[20] ^= 1;
  CHECK_FALSE(tn::decode(flipped, &why));
  CHECK_THAT(why, Contains("checksum"));
  CHECK_FALSE(tn::decode(bytes.substr(0, bytes.size() - 1), &why));
  CHECK_FALSE(tn::decode("tile=128", &why));
  CHECK_THAT(why, Contains("magic"));
  std::string other_schema = bytes;
  other_schema[8] = 99;
  CHECK_FALSE(tn::decode(other_schema, &why));
  CHECK_THAT(why, Contains("schema"));
}

TEST_CASE("power-of-two buckets", "[tuner]") {
  CHECK(tn::bucket(0) == 0);
  CHECK(tn::bucket(1) == 1);
  CHECK(tn::bucket(17) == 32);
  CHECK(tn::bucket(1024) == 1024);
  CHECK(tn::bucket(1025) == 2048);
}

TEST_CASE("KAIO_TUNE selects off, on or force", "[tuner]") {
  {
    ScopedEnv e("KAIO_TUNE", std::nullopt);
    CHECK(tn::mode() == tn::Mode::On);
  }
  {
    ScopedEnv e("KAIO_TUNE", "off");
    CHECK(tn::mode() == tn::Mode::Off);
  }
  {
    ScopedEnv e("KAIO_TUNE", "force");
    CHECK(tn::mode() == tn::Mode::Force);
  }
  {
    ScopedEnv e("KAIO_TUNE", "sometimes");
    CHECK(tn::mode() == tn::Mode::On);
  }
}

TEST_CASE("tune picks the fastest and records every candidate, skipping failures", "[tuner]") {
  FakeTimer ft;
  ft.times = {{"slow", 3.0}, {"fast", 1.0}, {"mid", 2.0}, {"bad_check", 0.1}, {"no_compile", 0.1}, {"bad_launch", 0.1}};
  auto shared = std::make_shared<FakeTimer>(ft);
  TimerGuard g([shared](auto&&... a) { return (*shared)(a...); });
  tn::reset_stats();
  int slow_runs = 0;
  std::vector<tn::Candidate> c;
  c.push_back(ok("slow", &slow_runs));
  c.push_back({"no_compile", [] { throw std::runtime_error("nvJitLink says no"); }, [] {}, nullptr});
  c.push_back(ok("fast"));
  c.push_back({"bad_check", [] {}, [] {}, [] { return std::string("C[0][0] is not finite"); }});
  c.push_back({"bad_launch", [] {}, [] { throw std::runtime_error("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"); }, nullptr});
  c.push_back(ok("mid"));
  const tn::Record r = tn::tune("k", "test", 7, std::move(c), {.budget_seconds = 60});
  CHECK(r.winner == "fast");
  CHECK(r.table_hash == 7);
  REQUIRE(r.candidates.size() == 6);
  CHECK(r.candidates[0].status == "ok");
  CHECK(r.candidates[0].median_ms == 3.0);
  CHECK(r.candidates[0].runs >= 10);
  CHECK(slow_runs == 1);  // the check run; the fake timer runs nothing
  CHECK_THAT(r.candidates[1].status, StartsWith("compile: ") && Contains("nvJitLink says no"));
  CHECK_THAT(r.candidates[3].status, StartsWith("check: ") && Contains("not finite"));
  CHECK_THAT(r.candidates[4].status, StartsWith("launch: ") && Contains("OUT_OF_RESOURCES"));
  CHECK(r.candidates[5].median_ms == 2.0);
  REQUIRE(r.runner_up_margin());
  CHECK(*r.runner_up_margin() == Approx(1.0));
  // Failed candidates are never timed.
  CHECK(shared->calls.count("bad_check") == 0);
  CHECK(shared->calls.count("no_compile") == 0);
  CHECK(shared->calls.count("bad_launch") == 0);
  const tn::Stats s = tn::stats();
  CHECK(s.tunings == 1);
  CHECK(s.failed_candidates == 3);
  // ... and the first timed candidate once more (min_runs) for the drift.
  CHECK(s.timed_runs == r.candidates[0].runs + r.candidates[2].runs + r.candidates[5].runs + 10);
  CHECK(r.drift == 0);
  CHECK_FALSE(r.noisy);
}

TEST_CASE("a candidate whose timing fails is skipped; none working gives no winner", "[tuner]") {
  FakeTimer ft;  // knows no candidate: every timing throws
  TimerGuard g([ft](auto&&... a) mutable { return ft(a...); });
  std::vector<tn::Candidate> c{ok("x"), ok("y")};
  const tn::Record r = tn::tune("k", "test", 1, std::move(c));
  CHECK(r.winner.empty());
  CHECK_THAT(r.candidates[0].status, Contains("no time for x"));
  CHECK_FALSE(r.runner_up_margin());
}

TEST_CASE("the budget skips candidates it has no time for, but times one", "[tuner]") {
  FakeTimer ft;
  ft.times = {{"x", 1.0}, {"y", 1.0}};
  TimerGuard g([ft](auto&&... a) mutable { return ft(a...); });
  std::vector<tn::Candidate> c{ok("x"), ok("y")};
  tn::reset_stats();
  const tn::Record r = tn::tune("k", "test", 1, std::move(c), {.budget_seconds = 0});
  CHECK(r.winner == "x");  // one candidate is always timed
  CHECK(r.candidates[0].status == "ok");
  CHECK(r.candidates[0].runs == 10);  // no time left: the minimum number of runs
  CHECK_THAT(r.candidates[1].status, StartsWith("budget"));
  // A candidate left untimed is not a failed one.
  CHECK(tn::stats().failed_candidates == 0);
  CHECK(tn::stats().over_budget == 1);
}

TEST_CASE("KAIO_TUNE_BUDGET_SECONDS sets the default budget; a bad value is the default's 2 s", "[tuner]") {
  FakeTimer ft;
  ft.times = {{"x", 1.0}, {"y", 2.0}};
  TimerGuard g([ft](auto&&... a) mutable { return ft(a...); });
  auto untimed = [](const char* budget) {
    ScopedEnv e("KAIO_TUNE_BUDGET_SECONDS", budget);
    tn::reset_stats();
    const tn::Record r = tn::tune("k", "test", 1, {ok("x"), ok("y")});  // Options{}: the variable's budget
    CHECK(r.winner == "x");
    return tn::stats().over_budget;
  };
  CHECK(untimed("1e-9") == 1);  // no time after the first
  CHECK(untimed("600") == 0);
  CHECK(untimed("soon") == 0);  // not a number: 2 s, plenty for two fake timings
  CHECK(untimed("0") == 0);     // not positive: likewise
}

TEST_CASE("records persist in the cache; another table hash is a miss", "[tuner]") {
  TempDir dir;
  ScopedEnv e("KAIO_CACHE_DIR", dir.str());
  const tn::Record r = sample_record();
  CHECK_FALSE(tn::load(r.key, r.table_hash));
  tn::store(r);
  auto back = tn::load(r.key, r.table_hash);
  REQUIRE(back);
  CHECK(back->winner == "b");
  CHECK_FALSE(tn::load(r.key, r.table_hash ^ 1));
  CHECK_FALSE(tn::load(r.key + "x", r.table_hash));
  ScopedEnv off("KAIO_DISABLE_CACHE", "1");
  CHECK_FALSE(tn::load(r.key, r.table_hash));
}
