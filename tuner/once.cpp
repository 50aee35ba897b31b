#include "kaio/tuner/once.h"

#include "kaio/jit/disk_cache_remote.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/jit/log.h"

namespace kaio::tuner {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr const char* kDb = "tuning";

double claim_seconds() { return detail::env_seconds("KAIO_TUNE_CLAIM_SECONDS", 300); }
double wait_seconds() { return detail::env_seconds("KAIO_TUNE_WAIT_SECONDS", claim_seconds() + 30); }

// KAIO_TUNE_WAIT: on (default) waits for a tuning in progress; off runs the default meanwhile.
bool wait_for_tunings() {
  const char* v = std::getenv("KAIO_TUNE_WAIT");
  if (!v || !*v) return true;
  const std::string s(v);
  if (s == "off" || s == "0") return false;
  if (s != "on" && s != "1") jit::warn_once("KAIO_TUNE_WAIT", "KAIO_TUNE_WAIT='" + s + "' is not on or off; waiting");
  return true;
}

bool cache_disabled() {
  const char* v = std::getenv("KAIO_DISABLE_CACHE");
  return v && *v && std::string(v) != "0";
}

std::shared_ptr<cache::Store> store() {
  if (cache_disabled()) return nullptr;
  try {
    return jit::disk::store_for(cache::default_dir().string());
  } catch (const std::exception& e) {
    jit::warn_once("tuner-claims", std::string("tuning claims cannot be kept (each process tunes for itself): ") + e.what());
    return nullptr;
  }
}

std::string hostname() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

std::string pid_namespace() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/ns/pid", ec);
  return ec ? std::string() : p.string();
}

// One key's tuning in this process: the leader fills `out`, the others wait on `cv`.
struct Flight {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Outcome out;
};

struct Flights {
  std::mutex m;
  std::unordered_map<std::string, std::shared_ptr<Flight>> by_key;  // in progress, or done and final
  std::unordered_map<std::string, Clock::time_point> next_check;   // KAIO_TUNE_WAIT=off: when to ask the database again
};
Flights& flights() {
  static Flights f;
  return f;
}

std::function<bool()>& injected_probe() {
  static std::function<bool()> p;
  return p;
}
std::mutex& probe_mutex() {
  static std::mutex m;
  return m;
}

bool usable(const Job& job, const Record& r) {
  return r.key == job.key && r.table_hash == job.table_hash && !r.winner.empty() && (!job.usable || job.usable(r));
}

// What one look at the database found.
struct Attempt {
  enum Kind { Found, Busy, Claimed } kind = Claimed;
  std::optional<Record> record;  // Found
  Claim claim;                   // Busy: the other owner's; Claimed: ours
  std::string took_over;         // Claimed over a stale claim: why it was stale
  bool keep_claim = false;       // Claimed in the database (not a process on its own)
};

std::optional<Record> decode_usable(const Job& job, std::optional<std::string_view> v) {
  if (!v) return std::nullopt;
  std::string why;
  auto r = decode(*v, &why);
  if (!r) {
    jit::log().warn("tuner: ignoring the record of {}: {}", job.key, why);
    return std::nullopt;
  }
  if (!usable(job, *r)) return std::nullopt;
  return r;
}

// Reads first (waiters poll without write transactions), then, finding no record and no
// live claim, takes the claim in the write transaction that checks both again.
Attempt attempt(const Job& job, cache::Store* s, bool retune) {
  Attempt a;
  if (!s) return a;  // no database: this process tunes for itself
  if (!retune) {  // a local miss asks the fleet's remote tier (tuner::load keeps what it gives)
    if (auto r = load(job.key, job.table_hash); r && usable(job, *r)) {
      a.kind = Attempt::Found;
      a.record = std::move(r);
      return a;
    }
  }
  const std::string ck = claim_key(job.key);
  const auto look = [&](cache::Txn& t) -> bool {  // true: decided without claiming
    if (!retune) {
      if (auto r = decode_usable(job, t.get(kDb, job.key))) {
        a.kind = Attempt::Found;
        a.record = std::move(r);
        return true;
      }
    }
    if (auto v = t.get(kDb, ck)) {
      if (auto c = decode_claim(*v)) {
        const std::string stale = claim_stale(*c, now_ms());
        if (stale.empty()) {
          a.kind = Attempt::Busy;
          a.claim = *c;
          return true;
        }
        a.took_over = "the claim of pid " + std::to_string(c->pid) + " on " + c->host + ": " + stale;
      } else {
        a.took_over = "a damaged claim";
      }
    }
    return false;
  };
  try {
    bool decided = false;
    s->view([&](cache::Txn& t) { decided = look(t); });
    if (decided) return a;
    const Claim mine = make_claim(job.key);
    s->update([&](cache::Txn& t) {
      a = Attempt{};
      if (look(t)) return;
      t.put(kDb, ck, encode_claim(mine));
      a.kind = Attempt::Claimed;
      a.claim = mine;
      a.keep_claim = true;
    });
  } catch (const std::exception& e) {
    jit::warn_once("tuner-claims", std::string("tuning claims cannot be kept (each process tunes for itself): ") + e.what());
    a = Attempt{};
  }
  return a;
}

// Stores the record (when there is a winner) and removes our claim, in one transaction.
void publish(cache::Store* s, const Attempt& a, const Record* r) {
  if (!s) return;
  try {
    s->update([&](cache::Txn& t) {
      if (r && !r->winner.empty()) t.put(kDb, r->key, encode(*r));
      if (!a.keep_claim) return;
      const std::string ck = claim_key(a.claim.key);
      if (auto v = t.get(kDb, ck))
        if (auto c = decode_claim(*v); c && c->token == a.claim.token) t.erase(kDb, ck);
    });
    if (r && !r->winner.empty())  // write-behind to the fleet (KAIO_REMOTE_CACHE)
      if (auto shared = jit::disk::store_for(cache::default_dir().string())) jit::remote::publish_tuning(shared, r->key, encode(*r));
  } catch (const std::exception& e) {
    jit::warn_once("tuner-cache-write", std::string("tuning records cannot be written: ") + e.what());
  }
}

Outcome run_tuning(const Job& job, cache::Store* s, const Attempt& a) {
  Outcome o;
  const auto t0 = Clock::now();
  try {
    std::vector<Candidate> cands = job.candidates();
    Record r = tune(job.key, job.op, job.table_hash, std::move(cands), job.options);
    r.tune_seconds = std::chrono::duration<double>(Clock::now() - t0).count();  // scratch inputs included
    publish(s, a, &r);
    o.source = Outcome::Tuned;
    o.record = std::move(r);
  } catch (...) {
    std::string what = "unknown exception";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    jit::log().warn("tuner: tuning {} failed, its callers run the default: {}", job.key, what);
    detail::count(detail::Counter::Fallbacks);
    publish(s, a, nullptr);  // release the claim: another process may do better
    o.source = Outcome::Default;
  }
  return o;
}

// The leading call's part: the database, a claim, a tuning or a wait for another process's.
Outcome lead_flight(const Job& job) {
  const std::shared_ptr<cache::Store> sp = store();
  cache::Store* s = sp.get();
  bool retune = job.force || mode() == Mode::Force;
  bool noisy_retune = false;
  if (!retune && s) {
    // A noisy record is tuned again when the GPU is idle (once per process: the outcome is kept).
    try {
      std::optional<Record> r;
      s->view([&](cache::Txn& t) { r = decode_usable(job, t.get(kDb, job.key)); });
      if (r && r->noisy && mode() == Mode::On && gpu_idle()) retune = noisy_retune = true;
    } catch (const std::exception&) {
    }
  }
  const auto t0 = Clock::now();
  const double max_wait = wait_seconds();
  auto poll = std::chrono::milliseconds(20);
  bool counted_wait = false;
  for (;;) {
    const Attempt a = attempt(job, s, retune);
    if (a.kind == Attempt::Found) {
      detail::count_stored_hit();
      Outcome o;
      o.source = Outcome::Stored;
      o.record = a.record;
      o.waited = counted_wait;
      return o;
    }
    if (a.kind == Attempt::Claimed) {
      if (!a.took_over.empty()) {
        detail::count(detail::Counter::TakenOver);
        jit::log().info("tuner: {}: taking over {}", job.key, a.took_over);
      }
      if (noisy_retune) detail::count(detail::Counter::NoisyRetunes);
      Outcome o = run_tuning(job, s, a);
      o.waited = counted_wait;
      return o;
    }
    // Another process is tuning the key.
    if (noisy_retune) {  // its record serves meanwhile; the other process re-tunes it
      retune = noisy_retune = false;
      continue;
    }
    // Forced: another's tuning in progress is as fresh as ours would be; take its record.
    retune = false;
    if (!wait_for_tunings() || std::chrono::duration<double>(Clock::now() - t0).count() > max_wait) {
      detail::count(detail::Counter::UntimedMeanwhile);
      Outcome o;
      o.final = false;
      o.waited = counted_wait;
      return o;
    }
    if (!counted_wait) {
      counted_wait = true;
      detail::count(detail::Counter::Waits);
      jit::log().info("tuner: {}: waiting for pid {} on {} (claimed {:.1f} s ago)", job.key, a.claim.pid, a.claim.host,
                      double(now_ms() - std::min(now_ms(), a.claim.start_ms)) / 1000.0);
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::milliseconds(500));
  }
}

}  // namespace

Outcome tune_once(const Job& job) {
  Flights& fl = flights();
  const bool wait = wait_for_tunings();
  std::shared_ptr<Flight> f;
  {
    std::unique_lock<std::mutex> g(fl.m);
    auto it = fl.by_key.find(job.key);
    if (it != fl.by_key.end()) {
      std::shared_ptr<Flight> other = it->second;
      std::unique_lock<std::mutex> fg(other->m);
      if (other->done && !job.force) return other->out;  // decided earlier in this process
      if (!other->done) {
        g.unlock();
        if (!wait) {
          detail::count(detail::Counter::UntimedMeanwhile);
          Outcome o;
          o.final = false;
          return o;
        }
        detail::count(detail::Counter::Waits);
        other->cv.wait(fg, [&] { return other->done; });
        Outcome o = other->out;
        o.waited = true;
        return o;
      }
    }
    if (!wait) {  // asked the database a moment ago: run the default without asking again
      auto nc = fl.next_check.find(job.key);
      if (nc != fl.next_check.end() && Clock::now() < nc->second) {
        detail::count(detail::Counter::UntimedMeanwhile);
        Outcome o;
        o.final = false;
        return o;
      }
    }
    f = std::make_shared<Flight>();
    fl.by_key[job.key] = f;
  }
  Outcome out;
  try {
    out = lead_flight(job);
  } catch (const std::exception& e) {  // lead_flight catches the tuning's failures; this is a last guard
    jit::log().warn("tuner: {}: {}", job.key, e.what());
    detail::count(detail::Counter::Fallbacks);
    out = Outcome{};
  }
  {
    std::lock_guard<std::mutex> g(fl.m);
    {
      std::lock_guard<std::mutex> fg(f->m);
      f->done = true;
      f->out = out;
    }
    auto it = fl.by_key.find(job.key);
    if (!out.final && it != fl.by_key.end() && it->second == f) {
      fl.by_key.erase(it);  // not decided yet: a later call asks again
      fl.next_check[job.key] = Clock::now() + std::chrono::milliseconds(200);
    }
  }
  f->cv.notify_all();
  return out;
}

void forget_outcomes() {
  Flights& fl = flights();
  std::lock_guard<std::mutex> g(fl.m);
  for (auto it = fl.by_key.begin(); it != fl.by_key.end();) {
    bool done = false;
    {
      std::lock_guard<std::mutex> fg(it->second->m);  // released before erase may free the flight
      done = it->second->done;
    }
    it = done ? fl.by_key.erase(it) : std::next(it);
  }
  fl.next_check.clear();
}

std::string claim_key(const std::string& key) { return std::string(kClaimPrefix) + key; }
bool is_claim_key(std::string_view k) { return k.substr(0, kClaimPrefix.size()) == kClaimPrefix; }

std::string encode_claim(const Claim& c) {
  return json{{"key", c.key},         {"pid", c.pid},
              {"host", c.host},       {"pid_ns", c.pid_ns},
              {"start_ms", c.start_ms}, {"deadline_ms", c.deadline_ms},
              {"token", c.token}}
      .dump();
}

std::optional<Claim> decode_claim(std::string_view bytes) {
  try {
    const json j = json::parse(bytes);
    Claim c;
    c.key = j.at("key");
    c.pid = j.at("pid");
    c.host = j.at("host");
    c.pid_ns = j.at("pid_ns");
    c.start_ms = j.at("start_ms");
    c.deadline_ms = j.at("deadline_ms");
    c.token = j.at("token");
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

Claim make_claim(const std::string& key) {
  static const std::string host = hostname(), ns = pid_namespace();
  static std::mutex m;
  static std::mt19937_64 rng(std::random_device{}());
  Claim c;
  c.key = key;
  c.pid = int64_t(getpid());
  c.host = host;
  c.pid_ns = ns;
  c.start_ms = now_ms();
  c.deadline_ms = c.start_ms + uint64_t(claim_seconds() * 1000.0);
  std::lock_guard<std::mutex> g(m);
  c.token = rng();
  return c;
}

std::string claim_stale(const Claim& c, uint64_t now) {
  if (now > c.deadline_ms) return "its deadline passed " + std::to_string((now - c.deadline_ms) / 1000) + " s ago";
  static const std::string host = hostname(), ns = pid_namespace();
  // The pid can be checked only on this host, in this pid namespace.
  if (c.host == host && c.pid_ns == ns && !ns.empty()) {
    if (c.pid == int64_t(getpid())) return "its owner had this pid before (this process holds no claim of the key)";
    if (c.pid <= 0 || (kill(pid_t(c.pid), 0) != 0 && errno == ESRCH))
      return "its owner (pid " + std::to_string(c.pid) + ") is gone";
  }
  return "";
}

void set_idle_probe(std::function<bool()> probe) {
  std::lock_guard<std::mutex> g(probe_mutex());
  injected_probe() = std::move(probe);
}

namespace detail {
bool nvml_idle();  // idle.cpp
}

bool gpu_idle() {
  std::function<bool()> p;
  {
    std::lock_guard<std::mutex> g(probe_mutex());
    p = injected_probe();
  }
  try {
    return p ? p() : detail::nvml_idle();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace kaio::tuner
