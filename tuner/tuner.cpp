#include "kaio/tuner/tuner.h"
#include "kaio/tuner/once.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <array>
#include <future>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/jit/disk_cache_remote.h"
#include "kaio/jit/driver.h"
#include "kaio/jit/event.h"
#include "kaio/jit/log.h"

namespace kaio::tuner {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'K', 'A', 'I', 'O', 'T', 'U', 'N', '\0'};
constexpr const char* kDb = "tuning";

struct Counters {
  std::atomic<uint64_t> tunings{0}, timed_runs{0}, stored_hits{0}, memory_hits{0}, failed{0}, over_budget{0}, untuned{0};
  std::atomic<uint64_t> waits{0}, taken_over{0}, meanwhile{0}, fallbacks{0}, retimed{0}, noisy{0}, noisy_retunes{0};
  std::mutex by_key_m;
  std::map<std::string, uint64_t> by_key;
};
Counters& counters() {
  static Counters c;
  return c;
}

// One tuning at a time per device in this process: two buckets timed at once would each
// time the other's kernels too.
std::mutex& device_mutex(int device) {
  static std::array<std::mutex, 16> m;
  return m[size_t(std::clamp(device, 0, 15))];
}

std::mutex& timer_mutex() {
  static std::mutex m;
  return m;
}
Timer& injected_timer() {
  static Timer t;
  return t;
}

// CUDA events around each run: one pair per run, so one slow run (a clock change, another
// process) moves the median, not every sample.
std::vector<double> event_timer(const std::string&, const std::function<void()>& run, uint32_t runs,
                                const jit::Stream* stream) {
  std::vector<jit::Event> ev(2 * runs);
  for (uint32_t i = 0; i < runs; ++i) {
    ev[2 * i].record(stream);
    run();
    ev[2 * i + 1].record(stream);
  }
  std::vector<double> ms(runs);
  for (uint32_t i = 0; i < runs; ++i) ms[i] = jit::elapsed_ms(ev[2 * i], ev[2 * i + 1]);
  return ms;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t load_le(std::string_view b, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(b[i])) << (8 * i);
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The interquartile range of v (0 with fewer than four samples).
double iqr(std::vector<double> v) {
  if (v.size() < 4) return 0;
  std::sort(v.begin(), v.end());
  const auto q = [&](double f) {
    const double x = f * double(v.size() - 1);
    const size_t i = size_t(x);
    return i + 1 < v.size() ? v[i] + (x - double(i)) * (v[i + 1] - v[i]) : v[i];
  };
  return q(0.75) - q(0.25);
}

// The spread that counts against Options::max_spread: the IQR over the median, or 0 when
// the IQR is within the events' resolution.
double spread_of(const std::vector<double>& ms, const Options& o) {
  const double m = median(ms), r = iqr(ms);
  if (m <= 0 || r <= o.min_spread_ms) return 0;
  return r / m;
}

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The first line of an error: records and listings stay one line per candidate.
std::string first_line(std::string s) {
  if (auto p = s.find('\n'); p != std::string::npos) s.resize(p);
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

// KAIO_DISABLE_CACHE=1 turns the on-disk cache off, the tuning table with it (choices then
// last as long as the process).
bool cache_disabled() {
  const char* v = std::getenv("KAIO_DISABLE_CACHE");
  return v && *v && std::string(v) != "0";
}

}  // namespace

Mode mode() {
  const char* v = std::getenv("KAIO_TUNE");
  if (!v || !*v) return Mode::On;
  const std::string s(v);
  if (s == "off" || s == "0") return Mode::Off;
  if (s == "on" || s == "1") return Mode::On;
  if (s == "force") return Mode::Force;
  jit::warn_once("KAIO_TUNE", "KAIO_TUNE='" + s + "' is not off, on or force; tuning is on");
  return Mode::On;
}

const char* mode_name(Mode m) { return m == Mode::Off ? "off" : m == Mode::Force ? "force" : "on"; }

uint32_t bucket(uint64_t n) {
  if (n == 0) return 0;
  uint64_t b = 1;
  while (b < n) b <<= 1;
  return static_cast<uint32_t>(std::min<uint64_t>(b, 1ull << 31));
}

const Device& device() {
  static const Device d = [] {
    Device r;
    r.arch = jit::driver::default_arch();
    if (jit::interpret_mode() || !jit::driver::available()) {  // keys made without a device (tools, tests)
      r.name = jit::interpret_mode() ? "interpreter" : "no device";
      return r;
    }
    const auto& api = jit::driver::api();
    jit::driver::ensure_context();
    CUdevice dev = 0;
    jit::driver::check(api.device_get(&dev, 0), "cuDeviceGet");
    char name[256] = {};
    jit::driver::check(api.device_get_name(name, sizeof name, dev), "cuDeviceGetName");
    r.name = name;
    int v = 0;
    r.sms = jit::driver::device_sm_count();
    jit::driver::check(api.device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute");
    r.l2_bytes = uint64_t(v);
    return r;
  }();
  return d;
}

std::optional<double> Record::runner_up_margin() const {
  std::vector<double> t;
  for (const auto& c : candidates)
    if (c.status == "ok" && c.median_ms > 0) t.push_back(c.median_ms);
  if (t.size() < 2) return std::nullopt;
  std::sort(t.begin(), t.end());
  return t[1] / t[0] - 1.0;
}

std::string encode(const Record& r) {
  json cands = json::array();
  for (const auto& c : r.candidates)
    cands.push_back(
        {{"name", c.name}, {"status", c.status}, {"median_ms", c.median_ms}, {"runs", c.runs}, {"spread", c.spread}});
  const std::string payload = json{{"key", r.key},
                                   {"op", r.op},
                                   {"winner", r.winner},
                                   {"table_hash", r.table_hash},
                                   {"created_unix", r.created_unix},
                                   {"tune_seconds", r.tune_seconds},
                                   {"candidates", cands},
                                   {"noisy", r.noisy},
                                   {"drift", r.drift}}
                                  .dump();
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kTuningSchema);
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out += payload;
  const uint64_t h = XXH3_64bits(payload.data(), payload.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((h >> (8 * i)) & 0xff));
  return out;
}

std::optional<Record> decode(std::string_view b, std::string* why) {
  auto fail = [&](const std::string& m) -> std::optional<Record> {
    if (why) *why = m;
    return std::nullopt;
  };
  if (b.size() < sizeof kMagic + 16 || b.substr(0, sizeof kMagic) != std::string_view(kMagic, sizeof kMagic))
    return fail("not a tuning record (magic)");
  const uint32_t schema = uint32_t(load_le(b.substr(8), 4)), n = uint32_t(load_le(b.substr(12), 4));
  if (schema != kTuningSchema) return fail("tuning record schema " + std::to_string(schema) + ", expected " + std::to_string(kTuningSchema));
  if (b.size() != 16 + uint64_t(n) + 8) return fail("tuning record has the wrong length");
  const std::string_view payload = b.substr(16, n);
  if (XXH3_64bits(payload.data(), payload.size()) != load_le(b.substr(16 + n), 8)) return fail("tuning record checksum mismatch");
  try {
    const json j = json::parse(payload);
    Record r;
    r.key = j.at("key");
    r.op = j.at("op");
    r.winner = j.at("winner");
    r.table_hash = j.at("table_hash");
    r.created_unix = j.at("created_unix");
    r.tune_seconds = j.at("tune_seconds");
    for (const auto& c : j.at("candidates"))
      r.candidates.push_back({c.at("name"), c.at("status"), c.at("median_ms"), c.at("runs"), c.value("spread", 0.0)});
    // Absent in records written before contention was measured: read as steady.
    r.noisy = j.value("noisy", false);
    r.drift = j.value("drift", 0.0);
    return r;
  } catch (const std::exception& e) {
    return fail(std::string("tuning record payload: ") + e.what());
  }
}

void set_timer(Timer t) {
  std::lock_guard<std::mutex> g(timer_mutex());
  injected_timer() = std::move(t);
}

namespace detail {
double env_seconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end || !(s > 0)) {
    jit::warn_once(name, std::string(name) + "='" + v + "' is not a positive number of seconds; using " +
                             std::to_string(fallback));
    return fallback;
  }
  return s;
}
}  // namespace detail

Record tune(const std::string& key, const std::string& op, uint64_t table_hash, std::vector<Candidate> cands,
            const Options& options) {
  Options o = options;
  if (o.budget_seconds < 0) o.budget_seconds = detail::env_seconds("KAIO_TUNE_BUDGET_SECONDS", 2.0);
  const auto t0 = Clock::now();
  Timer timer;
  {
    std::lock_guard<std::mutex> g(timer_mutex());
    timer = injected_timer() ? injected_timer() : Timer(event_timer);
  }
  Record r;
  r.key = key;
  r.op = op;
  r.table_hash = table_hash;
  r.created_unix = uint64_t(std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  r.candidates.resize(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) r.candidates[i].name = cands[i].name;
  auto skip = [&](size_t i, const std::string& why) {
    r.candidates[i].status = first_line(why);
    counters().failed.fetch_add(1, std::memory_order_relaxed);
    jit::log().debug("tuner: {} skips {}: {}", key, cands[i].name, why);
  };

  // Compile in parallel: compiles dominate a cold tuning, and each is independent.
  std::vector<std::future<void>> compiles;
  for (auto& c : cands) compiles.push_back(std::async(std::launch::async, [&c] { if (c.prepare) c.prepare(); }));
  std::vector<bool> ready(cands.size(), false);
  for (size_t i = 0; i < cands.size(); ++i) {
    try {
      compiles[i].get();
      ready[i] = true;
    } catch (...) {
      skip(i, "compile: " + what_of(std::current_exception()));
    }
  }

  // Checking and timing hold the device: this process's other tunings wait (their compiles
  // above still overlap), so that no tuning times another's kernels.
  std::unique_lock<std::mutex> device_turn(device_mutex(o.device));
  // The budget covers checking and timing. Compiles are not counted: they happen once per
  // machine (the kernel cache keeps them, kaio-precompile does them ahead of time).
  const auto t_budget = Clock::now();
  // Run and check once each, in table order (the op's check keeps the first result it
  // sees as the reference, so the most trusted candidate comes first).
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!ready[i]) continue;
    try {
      cands[i].run();
      if (cands[i].check) {
        const std::string bad = cands[i].check();
        if (!bad.empty()) {
          ready[i] = false;
          skip(i, "check: " + bad);
        }
      }
    } catch (...) {
      ready[i] = false;
      skip(i, "launch: " + what_of(std::current_exception()));
    }
  }

  // Time: warm-up, then enough runs for a stable median (at least min_runs) within the
  // budget left per remaining candidate. A spread above the bound is timed again (other
  // work on the GPU comes and goes), keeping the steadiest set.
  double best = 0;
  size_t first_timed = cands.size();
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!ready[i]) continue;
    const double left = o.budget_seconds - std::chrono::duration<double>(Clock::now() - t_budget).count();
    if (left <= 0 && !r.winner.empty()) {  // at least one candidate is timed, so there is a winner
      // Not a failure: the candidate works, the bucket had no time left to time it.
      std::ostringstream why;
      why << "budget: the bucket's " << o.budget_seconds << " s ran out";
      r.candidates[i].status = why.str();
      counters().over_budget.fetch_add(1, std::memory_order_relaxed);
      jit::log().debug("tuner: {} leaves {} untimed: {}", key, cands[i].name, why.str());
      continue;
    }
    try {
      std::vector<double> warm = timer(cands[i].name, cands[i].run, std::max(o.warmup, 1u), o.stream);
      size_t remaining = 0;
      for (size_t j = i; j < cands.size(); ++j) remaining += ready[j];
      const double per = std::max(left, 0.0) * 1000.0 / double(std::max<size_t>(remaining, 1));
      const double one = std::max(*std::min_element(warm.begin(), warm.end()), 1e-6);
      const uint32_t runs = std::clamp(uint32_t(per / one), o.min_runs, o.max_runs);
      std::vector<double> ms = timer(cands[i].name, cands[i].run, runs, o.stream);
      counters().timed_runs.fetch_add(ms.size(), std::memory_order_relaxed);
      double spread = spread_of(ms, o);
      for (uint32_t again = 0; again < o.retimes && spread > o.max_spread; ++again) {
        counters().retimed.fetch_add(1, std::memory_order_relaxed);
        std::vector<double> ms2 = timer(cands[i].name, cands[i].run, runs, o.stream);
        counters().timed_runs.fetch_add(ms2.size(), std::memory_order_relaxed);
        const double s2 = spread_of(ms2, o);
        jit::log().debug("tuner: {} times {} again: spread {:.3f} then {:.3f}", key, cands[i].name, spread, s2);
        if (s2 < spread) {
          ms = std::move(ms2);
          spread = s2;
        }
      }
      auto& c = r.candidates[i];
      c.median_ms = median(ms);
      c.runs = uint32_t(ms.size());
      c.spread = spread;
      if (spread > o.max_spread) r.noisy = true;
      if (first_timed == cands.size()) first_timed = i;
      if (r.winner.empty() || c.median_ms < best) {
        best = c.median_ms;
        r.winner = c.name;
      }
    } catch (...) {
      skip(i, "launch: " + what_of(std::current_exception()));
    }
  }
  // Drift: the first candidate timed once more after the others. Load that came or went
  // during the tuning moves it even when each candidate's own runs were steady.
  size_t timed = 0;
  for (const auto& c : r.candidates) timed += c.status == "ok" && c.runs > 0;
  if (timed >= 2) {
    try {
      const std::vector<double> ms = timer(cands[first_timed].name, cands[first_timed].run, o.min_runs, o.stream);
      counters().timed_runs.fetch_add(ms.size(), std::memory_order_relaxed);
      const double before = r.candidates[first_timed].median_ms, after = median(ms);
      if (before > 0 && std::fabs(after - before) > o.min_spread_ms) r.drift = after / before - 1.0;
      if (std::fabs(r.drift) > o.max_spread) r.noisy = true;
    } catch (...) {
      // It was timed once already: a failure now says nothing about the choice.
    }
  }
  device_turn.unlock();
  r.tune_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  counters().tunings.fetch_add(1, std::memory_order_relaxed);
  if (r.noisy) counters().noisy.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> g(counters().by_key_m);
    ++counters().by_key[key];
  }
  jit::log().info("tuner: {} -> {} ({:.2f} s{})", key, r.winner.empty() ? "none" : r.winner, r.tune_seconds,
                  r.noisy ? ", noisy" : "");
  return r;
}

// The directory is resolved on each call (the environment names it), not once per process.
std::optional<Record> load(const std::string& key, uint64_t table_hash) {
  if (cache_disabled()) return std::nullopt;
  try {
    auto s = jit::disk::store_for(cache::default_dir().string());
    if (!s) return std::nullopt;
    std::optional<Record> r;
    std::string why;
    const bool found = s->visit(kDb, key, [&](std::string_view v) { r = decode(v, &why); });
    if (!r && !why.empty()) jit::log().warn("tuner: ignoring the record of {}: {}", key, why);
    // A local miss asks the fleet's remote tier (KAIO_REMOTE_CACHE); a record it gives is kept here.
    if (!found) {
      auto bytes = jit::remote::fetch_tuning(s, key, [&](const std::string& b, std::string* w) {
        r = decode(b, w);
        if (r && (r->table_hash != table_hash || r->key != key)) *w = "tuned for another variant table or key";
        return r && r->table_hash == table_hash && r->key == key;
      });
      if (bytes) s->put(kDb, key, *bytes);
      else r.reset();
    }
    if (r && (r->table_hash != table_hash || r->key != key)) return std::nullopt;  // tuned for another table
    return r;
  } catch (const std::exception& e) {
    jit::warn_once("tuner-cache", std::string("tuning records cannot be read: ") + e.what());
    return std::nullopt;
  }
}

void store(const Record& r) {
  if (cache_disabled()) return;
  try {
    if (auto s = jit::disk::store_for(cache::default_dir().string())) {
      const std::string bytes = encode(r);
      s->put(kDb, r.key, bytes);
      jit::remote::publish_tuning(s, r.key, bytes);  // write-behind to the fleet (KAIO_REMOTE_CACHE)
    }
  } catch (const std::exception& e) {
    jit::warn_once("tuner-cache-write", std::string("tuning records cannot be written: ") + e.what());
  }
}

Stats stats() {
  const Counters& c = counters();
  Stats s;
  s.tunings = c.tunings.load();
  s.timed_runs = c.timed_runs.load();
  s.stored_hits = c.stored_hits.load();
  s.memory_hits = c.memory_hits.load();
  s.failed_candidates = c.failed.load();
  s.over_budget = c.over_budget.load();
  s.untuned = c.untuned.load();
  s.waits = c.waits.load();
  s.claims_taken_over = c.taken_over.load();
  s.untimed_meanwhile = c.meanwhile.load();
  s.fallbacks = c.fallbacks.load();
  s.retimed = c.retimed.load();
  s.noisy_records = c.noisy.load();
  s.noisy_retunes = c.noisy_retunes.load();
  return s;
}

void reset_stats() {
  Counters& c = counters();
  for (auto* a : {&c.tunings, &c.timed_runs, &c.stored_hits, &c.memory_hits, &c.failed, &c.over_budget, &c.untuned, &c.waits,
                  &c.taken_over, &c.meanwhile, &c.fallbacks, &c.retimed, &c.noisy, &c.noisy_retunes})
    a->store(0);
  std::lock_guard<std::mutex> g(c.by_key_m);
  c.by_key.clear();
}

std::vector<std::pair<std::string, uint64_t>> tunings_by_key() {
  std::lock_guard<std::mutex> g(counters().by_key_m);
  return {counters().by_key.begin(), counters().by_key.end()};
}

namespace detail {
void count_memory_hit() { counters().memory_hits.fetch_add(1, std::memory_order_relaxed); }
void count_stored_hit() { counters().stored_hits.fetch_add(1, std::memory_order_relaxed); }
void count_untuned() { counters().untuned.fetch_add(1, std::memory_order_relaxed); }
void count(Counter c) {
  Counters& k = counters();
  auto& a = c == Counter::Waits              ? k.waits
            : c == Counter::TakenOver        ? k.taken_over
            : c == Counter::UntimedMeanwhile ? k.meanwhile
            : c == Counter::Fallbacks        ? k.fallbacks
                                             : k.noisy_retunes;
  a.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

}  // namespace kaio::tuner
