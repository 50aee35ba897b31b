// Tune once, in one process, without a GPU: fake candidates and a fake timer. Many threads
// on few keys tune each key once; a tuning that throws gives its waiters the fallback;
// KAIO_TUNE_WAIT=off serves the default meanwhile; two keys never time at once on one
// device; spread and drift mark a record noisy, and an idle GPU re-tunes it; claims of a
// dead or overdue owner are taken over, live ones waited for.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "kaio/cache/store.h"
#include "kaio/tuner/once.h"
#include "kaio/tuner/tuner.h"
#include "../support.h"

using Catch::Matchers::Contains;
using kaio::test::ScopedEnv;
using kaio::test::UnboundedTuneBudget;
using kaio::test::TempDir;
namespace tn = kaio::tuner;
using namespace std::chrono_literals;

namespace {

struct TimerGuard {
  explicit TimerGuard(tn::Timer t) { tn::set_timer(std::move(t)); }
  ~TimerGuard() { tn::set_timer(nullptr); }
};
struct ProbeGuard {
  explicit ProbeGuard(std::function<bool()> p) { tn::set_idle_probe(std::move(p)); }
  ~ProbeGuard() { tn::set_idle_probe(nullptr); }
};

// A fake timer: "fast_*" candidates take 1 ms a run, the others 2 ms; each timing sleeps a
// little, so that concurrent callers arrive while a tuning runs. It counts the timings in
// progress at once.
struct Timing {
  std::atomic<int> now{0}, most{0};
  std::vector<double> operator()(const std::string& name, uint32_t runs) {
    const int n = ++now;
    for (int m = most; n > m && !most.compare_exchange_weak(m, n);) {
    }
    std::this_thread::sleep_for(2ms);
    --now;
    return std::vector<double>(runs, name.rfind("fast_", 0) == 0 ? 1.0 : 2.0);
  }
};

tn::Job job_for(const std::string& key, std::atomic<int>* built = nullptr) {
  tn::Job j;
  j.key = key;
  j.op = "test";
  j.table_hash = 99;
  j.candidates = [key, built] {
    if (built) ++*built;
    auto ok = [](std::string n) { return tn::Candidate{n, [] {}, [] {}, nullptr}; };
    return std::vector<tn::Candidate>{ok("slow_" + key), ok("fast_" + key)};
  };
  return j;
}

}  // namespace

TEST_CASE("tune once: 16 threads on 4 keys tune each key once and agree", "[tuner][concurrency]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  UnboundedTuneBudget budget;  // fake timers
  ScopedEnv wait("KAIO_TUNE_WAIT", std::nullopt);
  auto timing = std::make_shared<Timing>();
  TimerGuard g([timing](const std::string& n, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
    return (*timing)(n, r);
  });
  tn::forget_outcomes();
  tn::reset_stats();
  std::atomic<int> built{0};
  std::mutex m;
  std::map<std::string, std::vector<std::string>> winners;
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        const std::string key = "k" + std::to_string((t + i) % 4);
        const tn::Outcome o = tn::tune_once(job_for(key, &built));
        std::lock_guard<std::mutex> l(m);
        winners[key].push_back(o.record ? o.record->winner : "(none)");
      }
    });
  for (auto& th : threads) th.join();
  CHECK(built == 4);
  CHECK(tn::stats().tunings == 4);
  CHECK(timing->most == 1);  // one device: the four tunings took turns
  for (const auto& [key, ws] : winners) {
    CHECK(ws.size() == 16);
    for (const auto& w : ws) CHECK(w == "fast_" + key);
  }
  for (const auto& [key, n] : tn::tunings_by_key()) CHECK(n == 1);
  CHECK(tn::tunings_by_key().size() == 4);
  // Later calls: the kept outcome, no database read, no tuning.
  CHECK(tn::tune_once(job_for("k0")).record->winner == "fast_k0");
  CHECK(tn::stats().tunings == 4);
  // A fresh process's view (outcomes forgotten): the stored records answer.
  tn::forget_outcomes();
  const uint64_t hits = tn::stats().stored_hits;
  CHECK(tn::tune_once(job_for("k1")).source == tn::Outcome::Stored);
  CHECK(tn::stats().stored_hits == hits + 1);
  tn::forget_outcomes();
}

TEST_CASE("tune once: a tuning that throws gives every waiter the fallback", "[tuner][concurrency]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  UnboundedTuneBudget budget;  // fake timers
  ScopedEnv wait("KAIO_TUNE_WAIT", std::nullopt);
  tn::forget_outcomes();
  tn::reset_stats();
  std::atomic<int> entered{0};
  tn::Job j = job_for("broken");
  j.candidates = [&entered]() -> std::vector<tn::Candidate> {
    ++entered;
    // Fail once the seven other callers wait for this tuning (bounded, should one be late).
    for (int i = 0; i < 10000 && tn::stats().waits < 7; ++i) std::this_thread::sleep_for(1ms);
    throw std::runtime_error("scratch allocation failed");
  };
  std::vector<tn::Outcome> outs(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { outs[t] = tn::tune_once(j); });
  for (auto& th : threads) th.join();
  CHECK(entered == 1);
  for (const auto& o : outs) {
    CHECK(o.source == tn::Outcome::Default);
    CHECK(o.final);
    CHECK_FALSE(o.record);
  }
  CHECK(tn::stats().fallbacks == 1);
  CHECK(tn::stats().waits == 7);
  CHECK(tn::stats().tunings == 0);
  // The claim was released: nothing of the key is left in the database.
  uint64_t entries = 0;
  kaio::cache::Store::open(dir.path())->for_each("tuning", [&](std::string_view, std::string_view) { ++entries; });
  CHECK(entries == 0);
  tn::forget_outcomes();
}

TEST_CASE("tune once: KAIO_TUNE_WAIT=off serves the default while the tuning runs", "[tuner][concurrency]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  UnboundedTuneBudget budget;  // fake timers
  ScopedEnv wait("KAIO_TUNE_WAIT", "off");
  tn::forget_outcomes();
  tn::reset_stats();
  std::atomic<bool> release{false}, started{false};
  TimerGuard g([&](const std::string& n, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
    started = true;
    while (!release) std::this_thread::sleep_for(1ms);
    return std::vector<double>(r, n.rfind("fast_", 0) == 0 ? 1.0 : 2.0);
  });
  tn::Outcome leader;
  std::thread t([&] { leader = tn::tune_once(job_for("meanwhile")); });
  while (!started) std::this_thread::sleep_for(1ms);
  const tn::Outcome other = tn::tune_once(job_for("meanwhile"));
  CHECK(other.source == tn::Outcome::Default);
  CHECK_FALSE(other.final);  // ask again later
  CHECK(tn::stats().untimed_meanwhile == 1);
  release = true;
  t.join();
  CHECK(leader.source == tn::Outcome::Tuned);
  const tn::Outcome after = tn::tune_once(job_for("meanwhile"));
  REQUIRE(after.record);
  CHECK(after.record->winner == "fast_meanwhile");
  CHECK(tn::stats().tunings == 1);
  tn::forget_outcomes();
}

TEST_CASE("timings: a spread or a drift above the bound marks the record noisy", "[tuner]") {
  tn::reset_stats();
  SECTION("a steady second timing replaces a spread one") {
    int calls = 0;
    TimerGuard g([&](const std::string&, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
      std::vector<double> v(r, 1.0);
      if (++calls == 2)  // the first timed set (after the warm-up): half the runs 3x slower
        for (size_t i = 0; i < v.size(); i += 2) v[i] = 3.0;
      return v;
    });
    std::vector<tn::Candidate> c{{"only", [] {}, [] {}, nullptr}};
    const tn::Record r = tn::tune("k", "test", 1, std::move(c));
    CHECK_FALSE(r.noisy);
    CHECK(r.candidates[0].spread == 0);
    CHECK(r.candidates[0].median_ms == 1.0);
    CHECK(tn::stats().retimed == 1);
  }
  SECTION("a spread that stays marks it noisy") {
    TimerGuard g([](const std::string&, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
      std::vector<double> v(r, 1.0);
      for (size_t i = 0; i < v.size(); i += 2) v[i] = 3.0;
      return v;
    });
    std::vector<tn::Candidate> c{{"only", [] {}, [] {}, nullptr}};
    const tn::Record r = tn::tune("k", "test", 1, std::move(c));
    CHECK(r.noisy);
    CHECK(r.candidates[0].spread > 0.25);
    CHECK(tn::stats().retimed == 2);
    CHECK(tn::stats().noisy_records == 1);
    // The mark survives the database.
    const auto back = tn::decode(tn::encode(r));
    REQUIRE(back);
    CHECK(back->noisy);
    CHECK(back->candidates[0].spread == Approx(r.candidates[0].spread));
  }
  SECTION("load that arrives mid-tuning: the first candidate drifts") {
    std::map<std::string, int> seen;
    TimerGuard g([&](const std::string& n, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
      // "a" is timed (warm-up, runs), then "b", then "a" again: now twice as slow.
      const int k = seen[n]++;
      return std::vector<double>(r, n == "a" ? (k >= 2 ? 2.0 : 1.0) : 1.5);
    });
    std::vector<tn::Candidate> c{{"a", [] {}, [] {}, nullptr}, {"b", [] {}, [] {}, nullptr}};
    const tn::Record r = tn::tune("k", "test", 1, std::move(c));
    CHECK(r.winner == "a");
    CHECK(r.drift == Approx(1.0));
    CHECK(r.noisy);
  }
}

TEST_CASE("a noisy record is tuned again when the GPU is idle, kept when it is busy", "[tuner][concurrency]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  UnboundedTuneBudget budget;  // fake timers
  tn::forget_outcomes();
  tn::reset_stats();
  TimerGuard g([](const std::string& n, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
    return std::vector<double>(r, n.rfind("fast_", 0) == 0 ? 1.0 : 2.0);
  });
  tn::Record noisy;
  noisy.key = "nz";
  noisy.op = "test";
  noisy.table_hash = 99;
  noisy.winner = "slow_nz";  // chosen under contention
  noisy.noisy = true;
  noisy.candidates = {{"slow_nz", "ok", 1.0, 10, 0.5}, {"fast_nz", "ok", 1.2, 10, 0.6}};
  tn::store(noisy);
  bool idle = false;
  ProbeGuard p([&idle] { return idle; });
  const tn::Outcome busy = tn::tune_once(job_for("nz"));
  CHECK(busy.source == tn::Outcome::Stored);
  CHECK(busy.record->winner == "slow_nz");
  CHECK(tn::stats().tunings == 0);
  tn::forget_outcomes();
  idle = true;
  const tn::Outcome again = tn::tune_once(job_for("nz"));
  CHECK(again.source == tn::Outcome::Tuned);
  CHECK(again.record->winner == "fast_nz");
  CHECK_FALSE(again.record->noisy);
  CHECK(tn::stats().noisy_retunes == 1);
  auto stored = tn::load("nz", 99);
  REQUIRE(stored);
  CHECK(stored->winner == "fast_nz");
  CHECK_FALSE(stored->noisy);
  tn::forget_outcomes();
}

TEST_CASE("claims: encoded, judged stale by deadline or by a dead owner", "[tuner]") {
  tn::Claim c = tn::make_claim("matmul|x");
  CHECK(c.pid == getpid());
  CHECK(c.deadline_ms > c.start_ms);
  const auto back = tn::decode_claim(tn::encode_claim(c));
  REQUIRE(back);
  CHECK(back->token == c.token);
  CHECK(back->host == c.host);
  CHECK_FALSE(tn::decode_claim("not json"));
  CHECK(tn::claim_key("matmul|x") == "~claim|matmul|x");
  CHECK(tn::is_claim_key(tn::claim_key("a")));
  CHECK_FALSE(tn::is_claim_key("matmul|x"));

  // A live owner within its deadline: not stale. (Our parent is alive.)
  c.pid = getppid();
  CHECK(tn::claim_stale(c, tn::now_ms()).empty());
  CHECK_THAT(tn::claim_stale(c, c.deadline_ms + 1), Contains("deadline passed"));
  // Another host's pid cannot be checked: only its deadline counts.
  tn::Claim far = c;
  far.host = "elsewhere";
  far.pid = 999999999;
  CHECK(tn::claim_stale(far, tn::now_ms()).empty());
  // A dead pid on this host.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  tn::Claim dead = c;
  dead.pid = child;
  CHECK_THAT(tn::claim_stale(dead, tn::now_ms()), Contains("is gone"));
}

TEST_CASE("tune once: a live claim is waited for, an overdue one taken over", "[tuner][concurrency]") {
  TempDir dir;
  ScopedEnv cache("KAIO_CACHE_DIR", dir.str());
  ScopedEnv tune("KAIO_TUNE", "on");
  UnboundedTuneBudget budget;  // fake timers
  ScopedEnv wait("KAIO_TUNE_WAIT", std::nullopt);
  tn::forget_outcomes();
  tn::reset_stats();
  TimerGuard g([](const std::string& n, const std::function<void()>&, uint32_t r, const kaio::jit::Stream*) {
    return std::vector<double>(r, n.rfind("fast_", 0) == 0 ? 1.0 : 2.0);
  });
  auto store = kaio::cache::Store::open(dir.path());
  // Another machine's process (its pid cannot be checked here) claimed the key just now.
  tn::Claim other = tn::make_claim("claimed");
  other.host = "elsewhere";
  auto claim = [&](uint64_t ms) {
    other.deadline_ms = tn::now_ms() + ms;
    store->put("tuning", tn::claim_key("claimed"), tn::encode_claim(other));
  };

  SECTION("its record appears: taken, no tuning") {
    claim(20000);
    std::thread owner([&] {
      // The record lands once the caller is waiting for it (not after a fixed sleep, which a
      // loaded machine can outlast before the caller's first look).
      for (int i = 0; i < 6000 && tn::stats().waits == 0; ++i) std::this_thread::sleep_for(10ms);
      tn::Record r;
      r.key = "claimed";
      r.op = "test";
      r.table_hash = 99;
      r.winner = "slow_claimed";
      r.candidates = {{"slow_claimed", "ok", 1.0, 10}};
      store->update([&](kaio::cache::Txn& t) {
        t.put("tuning", r.key, tn::encode(r));
        t.erase("tuning", tn::claim_key("claimed"));
      });
    });
    const tn::Outcome o = tn::tune_once(job_for("claimed"));
    owner.join();
    CHECK(o.source == tn::Outcome::Stored);
    CHECK(o.waited);
    CHECK(o.record->winner == "slow_claimed");
    CHECK(tn::stats().tunings == 0);
    CHECK(tn::stats().waits == 1);
  }
  SECTION("its owner never finishes: taken over after the deadline") {
    claim(3000);
    const tn::Outcome o = tn::tune_once(job_for("claimed"));
    CHECK(o.source == tn::Outcome::Tuned);
    CHECK(o.waited);
    CHECK(tn::stats().claims_taken_over == 1);
    CHECK(tn::stats().tunings == 1);
    CHECK(tn::now_ms() > other.deadline_ms);
    CHECK_FALSE(store->get("tuning", tn::claim_key("claimed")));  // ours, removed with the record stored
    CHECK(store->get("tuning", "claimed"));
  }
  tn::forget_outcomes();
}
