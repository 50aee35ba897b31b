#include "kaio/jit/disk_cache_remote.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kaio/cache/remote_record.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/log.h"

namespace kaio::jit::remote {

namespace {

using Clock = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool env_uint(const char* name, uint64_t lo, uint64_t hi, uint64_t& out, std::string* error) {
  const std::string v = env(name);
  if (v.empty()) return true;
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi) {
    *error = std::string(name) + "='" + v + "' is not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
  }
  out = n;
  return true;
}

// ---------------------------------------------------------------------------------------
// Counters

struct Atomics {
  std::atomic<uint64_t> hits{0}, misses{0}, bad{0}, timeouts{0}, errors{0}, skipped{0}, published{0}, dropped{0};
};
Atomics& atomics() {
  static Atomics* a = new Atomics;  // never destroyed: the publisher may outlive statics
  return *a;
}

}  // namespace

void count(const std::shared_ptr<cache::Store>& store, const cache::RemoteCounters& c) {
  Atomics& a = atomics();
  a.hits += c.hits;
  a.misses += c.misses;
  a.bad += c.bad;
  a.timeouts += c.timeouts;
  a.errors += c.errors;
  a.skipped += c.skipped;
  a.published += c.published;
  a.dropped += c.dropped;
  if (store) disk::note_remote(store, c);
}

cache::RemoteCounters stats() {
  Atomics& a = atomics();
  cache::RemoteCounters c;
  c.hits = a.hits;
  c.misses = a.misses;
  c.bad = a.bad;
  c.timeouts = a.timeouts;
  c.errors = a.errors;
  c.skipped = a.skipped;
  c.published = a.published;
  c.dropped = a.dropped;
  return c;
}

void reset_stats() {
  Atomics& a = atomics();
  a.hits = a.misses = a.bad = a.timeouts = a.errors = a.skipped = a.published = a.dropped = 0;
}

namespace {
cache::RemoteCounters one(uint64_t cache::RemoteCounters::*field) {
  cache::RemoteCounters c;
  c.*field = 1;
  return c;
}
}  // namespace

// ---------------------------------------------------------------------------------------
// Settings

std::optional<Settings> resolve(const std::string& url_in, std::string* error) {
  std::string err;
  const std::string url = url_in.empty() ? env("KAIO_REMOTE_CACHE") : url_in;
  if (url.empty() || url == "off" || url == "0") return std::nullopt;
  Settings s;
  s.url = url;
  auto fail = [&](std::string why) -> std::optional<Settings> {
    if (error) *error = "remote cache disabled: " + why;
    return std::nullopt;
  };
  auto ep = cache::parse_redis_url(url, &err);
  if (!ep) return fail(err);
  s.endpoint = *ep;
  s.ns = env("KAIO_REMOTE_CACHE_NAMESPACE");
  if (s.ns.empty()) s.ns = cache::default_remote_namespace();
  uint64_t connect_ms = 50, command_ms = 50, retry_ms = 5000, failures = 3;
  s.max_bytes = cache::kDefaultRemoteMaxBytes;
  if (!env_uint("KAIO_REMOTE_CACHE_TTL", 0, uint64_t(1) << 40, s.ttl_s, &err) ||
      !env_uint("KAIO_REMOTE_CACHE_TIMEOUT_MS", 1, 600000, command_ms, &err) ||
      !env_uint("KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS", 1, 600000, connect_ms, &err) ||
      !env_uint("KAIO_REMOTE_CACHE_RETRY_MS", 0, 86400000, retry_ms, &err) ||
      !env_uint("KAIO_REMOTE_CACHE_FAILURES", 1, 1000000, failures, &err) ||
      !env_uint("KAIO_REMOTE_CACHE_CLAIM_MS", 0, 3600000, s.claim_ms, &err))
    return fail(err);
  if (const std::string mb = env("KAIO_REMOTE_CACHE_MAX_BYTES"); !mb.empty()) {
    auto n = cache::parse_bytes(mb);
    if (!n || *n == 0) return fail("KAIO_REMOTE_CACHE_MAX_BYTES='" + mb + "' is not a byte count");
    s.max_bytes = *n;
  }
  s.timeouts = {static_cast<int>(connect_ms), static_cast<int>(command_ms)};
  s.breaker = {static_cast<int>(failures), static_cast<int>(retry_ms)};
  const std::string trust = env("KAIO_REMOTE_CACHE_TRUST");
  if (!trust.empty() && trust != "unsigned" && trust != "signed")
    return fail("KAIO_REMOTE_CACHE_TRUST='" + trust + "' is not 'signed' or 'unsigned'");
  s.trust_unsigned = trust == "unsigned";
  if (const std::string kf = env("KAIO_REMOTE_CACHE_KEY_FILE"); !kf.empty()) {
    // A key file that cannot be read turns the tier off: falling back to unsigned records
    // would load what the key was meant to keep out.
    std::ifstream f(kf, std::ios::binary);
    std::stringstream ss;
    if (f) ss << f.rdbuf();
    if (!f) return fail("KAIO_REMOTE_CACHE_KEY_FILE '" + kf + "' cannot be read");
    s.secret = ss.str();
    while (!s.secret.empty() && (s.secret.back() == '\n' || s.secret.back() == '\r' || s.secret.back() == ' '))
      s.secret.pop_back();
    if (s.secret.size() < 16) return fail("KAIO_REMOTE_CACHE_KEY_FILE '" + kf + "' holds fewer than 16 bytes");
    s.trust_unsigned = false;  // with a key only signed records are loaded
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// The write-behind publisher: one thread per tier, a bounded queue.

struct Job {
  char kind;
  std::string key, payload;
  bool replace;
  std::shared_ptr<cache::Store> store;
};

struct Tier::Impl {
  std::mutex m;
  std::condition_variable cv, idle_cv;
  std::deque<Job> queue;
  uint64_t queued_bytes = 0;
  bool busy = false, started = false;
  std::unique_ptr<cache::RedisConnection> conn;
};

Tier::Tier(Settings s) : s_(std::move(s)), impl_(std::make_unique<Impl>()) {
  breaker_ = std::make_shared<cache::Breaker>(s_.breaker);
  reader_ = std::make_unique<cache::RedisConnection>(s_.endpoint, s_.timeouts, breaker_);
  impl_->conn = std::make_unique<cache::RedisConnection>(s_.endpoint, s_.timeouts, breaker_);
}
Tier::~Tier() = default;

void Tier::note_reply(const cache::RedisReply& r, const std::shared_ptr<cache::Store>& store, const char* what) {
  using cache::RedisStatus;
  if (r.outage_ended) log().info("remote cache {} reachable again", s_.endpoint.describe());
  if (r.status == RedisStatus::Timeout) count(store, one(&cache::RemoteCounters::timeouts));
  else if (r.status == RedisStatus::Failed) count(store, one(&cache::RemoteCounters::errors));
  else if (r.status == RedisStatus::Unavailable) count(store, one(&cache::RemoteCounters::skipped));
  else if (r.status == RedisStatus::Refused) {
    count(store, one(&cache::RemoteCounters::errors));
    warn_once("remote-refused:" + s_.endpoint.describe(), "remote cache " + s_.endpoint.describe() + " refused a " + what +
                                                         " (" + r.value + "); going on without it");
  }
  if (r.outage_began)
    log().warn("remote cache {} not answering ({}); compiling locally, asking again in {} ms", s_.endpoint.describe(),
               r.value, s_.breaker.open_ms);
  else if (!r.ok() && r.status != RedisStatus::Nil && debug_enabled())
    log().debug("remote cache {}: {} {}", what, cache::status_name(r.status), r.value);
}

Got Tier::get(char kind, const std::string& key, std::string& payload, std::string* why,
              const std::shared_ptr<cache::Store>& store) {
  const std::string rkey = cache::remote_key(s_.ns, kind, key);
  // GETRANGE bounds what an oversized (or hostile) value can make this process read: one
  // byte past the limit tells that it is over.
  const std::string last = std::to_string(s_.max_bytes);
  cache::RedisReply r = reader_->command({"GETRANGE", rkey, "0", last});
  note_reply(r, store, "read");
  if (r.status == cache::RedisStatus::Nil || (r.ok() && r.value.empty())) return Got::Miss;
  if (!r.ok()) {
    if (why) *why = r.value;
    return r.status == cache::RedisStatus::Refused ? Got::Bad : Got::Unavailable;
  }
  cache::OpenPolicy p{s_.secret, s_.max_bytes};
  auto body = cache::open_sealed(r.value, kind, key, p, why);
  if (!body) return Got::Bad;
  payload.assign(*body);
  return Got::Hit;
}

namespace {
std::string claimant_id() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}
}  // namespace

Got Tier::get_or_claim(char kind, const std::string& key, std::string& payload, std::string* why,
                       const std::shared_ptr<cache::Store>& store) {
  Got g = get(kind, key, payload, why, store);
  if (g != Got::Miss || s_.claim_ms == 0 || !s_.can_publish()) return g;
  const std::string claim = cache::remote_key(s_.ns, 'c', kind == cache::kRemoteKernel ? cache::to_hex(key) : key);
  const std::string lease = std::to_string(s_.claim_ms), me = claimant_id();
  const auto deadline = Clock::now() + std::chrono::milliseconds(s_.claim_ms);
  int sleep_ms = 2;
  for (;;) {
    cache::RedisReply r = reader_->command({"SET", claim, me, "NX", "PX", lease});
    note_reply(r, store, "claim");
    if (r.ok()) {
      // Ours. The previous claimant publishes its record before it drops its claim, so a
      // record that appeared meanwhile is there now: one more look before compiling.
      g = get(kind, key, payload, why, store);
      return g == Got::Hit || g == Got::Bad ? g : Got::Miss;
    }
    if (r.status != cache::RedisStatus::Nil) return Got::Miss;  // no claims today: compile
    // Another node is compiling it: its record appears when it publishes.
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min(sleep_ms * 2, 50);
    g = get(kind, key, payload, why, store);
    if (g != Got::Miss) return g;
    if (Clock::now() >= deadline) {
      if (debug_enabled()) log().debug("remote cache: waited {} ms for another node's record; compiling", s_.claim_ms);
      return Got::Miss;
    }
  }
}

PutOutcome Tier::put(char kind, const std::string& key, const std::string& payload, bool replace,
                     const std::shared_ptr<cache::Store>& store) {
  PutOutcome out;
  if (!s_.can_publish()) {
    out.error = "read-only: no KAIO_REMOTE_CACHE_KEY_FILE (KAIO_REMOTE_CACHE_TRUST=unsigned publishes unsigned records)";
    return out;
  }
  std::string sealed = cache::seal(kind, key, payload, s_.secret);
  if (sealed.empty()) {
    out.error = "signing failed (OpenSSL): not published";
    return out;
  }
  if (sealed.size() > s_.max_bytes) {
    out.error = "oversize: " + std::to_string(sealed.size()) + " bytes, limit " + std::to_string(s_.max_bytes);
    return out;
  }
  const std::string rkey = cache::remote_key(s_.ns, kind, key);
  std::vector<std::string_view> argv{"SET", rkey, sealed};
  const std::string ttl = std::to_string(s_.ttl_s);
  if (s_.ttl_s) {
    argv.push_back("EX");
    argv.push_back(ttl);
  }
  if (!replace) argv.push_back("NX");
  cache::RedisReply r = impl_->conn->command(argv);
  if (r.status == cache::RedisStatus::Nil) out.exists = true;
  else if (r.ok()) out.written = true;
  else out.error = std::string(cache::status_name(r.status)) + ": " + r.value;
  note_reply(r, store, "write");
  return out;
}

void Tier::publish_async(char kind, std::string key, std::string payload, bool replace,
                         std::shared_ptr<cache::Store> store) {
  if (!s_.can_publish()) return;  // read-only tier: nothing to count
  Impl& im = *impl_;
  {
    std::lock_guard<std::mutex> g(im.m);
    if (im.queue.size() >= s_.queue_records || im.queued_bytes + payload.size() > s_.queue_bytes) {
      count(store, one(&cache::RemoteCounters::dropped));
      if (debug_enabled()) log().debug("remote cache publish queue full: a record dropped");
      return;
    }
    im.queued_bytes += payload.size();
    im.queue.push_back(Job{kind, std::move(key), std::move(payload), replace, std::move(store)});
    if (!im.started) {
      im.started = true;
      try {
        std::thread([this] {
          Impl& im = *impl_;
          for (;;) {
            Job j;
            {
              std::unique_lock<std::mutex> g(im.m);
              im.cv.wait(g, [&] { return !im.queue.empty(); });
              j = std::move(im.queue.front());
              im.queue.pop_front();
              im.queued_bytes -= j.payload.size();
              im.busy = true;
            }
            PutOutcome o = put(j.kind, j.key, j.payload, j.replace, j.store);
            if (o.written) count(j.store, one(&cache::RemoteCounters::published));
            else if (!o.exists) count(j.store, one(&cache::RemoteCounters::dropped));
            // The record is there, or will not be (oversize, refused): a claim this node
            // may hold has done its work, and the nodes waiting on it stop waiting.
            if (j.kind == cache::kRemoteKernel && s_.claim_ms)
              impl_->conn->command({"DEL", cache::remote_key(s_.ns, 'c', cache::to_hex(j.key))});
            std::lock_guard<std::mutex> g(im.m);
            im.busy = false;
            im.idle_cv.notify_all();
          }
        }).detach();
      } catch (...) {
        im.started = false;
        count(im.queue.back().store, one(&cache::RemoteCounters::dropped));
        im.queued_bytes -= im.queue.back().payload.size();
        im.queue.pop_back();
        return;
      }
    }
  }
  im.cv.notify_one();
}

bool Tier::drain(int ms) {
  Impl& im = *impl_;
  std::unique_lock<std::mutex> g(im.m);
  return im.idle_cv.wait_for(g, std::chrono::milliseconds(ms), [&] { return im.queue.empty() && !im.busy; });
}

size_t Tier::queued() const {
  std::lock_guard<std::mutex> g(impl_->m);
  return impl_->queue.size() + (impl_->busy ? 1 : 0);
}

// ---------------------------------------------------------------------------------------
// Tiers of this process, by URL (a forked child starts over: sockets and threads do not
// cross fork).

namespace {
struct Tiers {
  std::mutex m;
  pid_t pid = 0;
  std::unordered_map<std::string, std::shared_ptr<Tier>> by_url;
  Tiers() {
    pthread_atfork([] { instance().m.lock(); }, [] { instance().m.unlock(); },
                   [] {
                     Tiers& t = instance();
                     t.m.unlock();
                     // The parent's tiers hold its sockets and publisher: leaked, not closed.
                     for (auto& [u, tier] : t.by_url) new std::shared_ptr<Tier>(std::move(tier));
                     t.by_url.clear();
                   });
  }
  static Tiers& instance() {
    static Tiers* t = new Tiers;  // never destroyed, like the disk writers
    return *t;
  }
};
}  // namespace

std::shared_ptr<Tier> tier_for(const std::string& url_in) {
  const std::string url = url_in.empty() ? env("KAIO_REMOTE_CACHE") : url_in;
  if (url.empty() || url == "off" || url == "0") return nullptr;
  Tiers& t = Tiers::instance();
  // The namespace, key and trust settings are part of the identity: tests and tools change
  // them within one process.
  const std::string id = url + "|" + env("KAIO_REMOTE_CACHE_NAMESPACE") + "|" + env("KAIO_REMOTE_CACHE_KEY_FILE") + "|" +
                         env("KAIO_REMOTE_CACHE_TRUST") + "|" + env("KAIO_REMOTE_CACHE_MAX_BYTES");
  std::lock_guard<std::mutex> g(t.m);
  if (t.pid != getpid()) {
    t.by_url.clear();
    t.pid = getpid();
  }
  if (auto it = t.by_url.find(id); it != t.by_url.end()) return it->second;
  std::string error;
  std::optional<Settings> s = resolve(url, &error);
  if (!s) {
    if (!error.empty()) warn_once("remote-settings:" + id, error);
    t.by_url.emplace(id, nullptr);
    return nullptr;
  }
  if (!s->can_publish())
    log().info("remote cache {}: read-only (no KAIO_REMOTE_CACHE_KEY_FILE); records read are checked, not "
               "authenticated",
               s->endpoint.describe());
  cache::init_crypto();  // before the first record is signed, on this (the caller's) thread
  auto tier = std::make_shared<Tier>(std::move(*s));
  t.by_url.emplace(id, tier);
  return tier;
}

void flush(int ms) {
  std::vector<std::shared_ptr<Tier>> all;
  {
    Tiers& t = Tiers::instance();
    std::lock_guard<std::mutex> g(t.m);
    if (t.pid != getpid()) return;
    for (auto& [u, tier] : t.by_url)
      if (tier) all.push_back(tier);
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  for (auto& tier : all) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (!tier->drain(static_cast<int>(std::max<int64_t>(left, 0))))
      warn_once("remote-flush", "remote cache publishes still queued after " + std::to_string(ms) +
                                    " ms; leaving them (the local cache has every record)");
  }
}

// ---------------------------------------------------------------------------------------
// The compile path and the tuner's hooks

namespace {
void bad_record(const std::shared_ptr<cache::Store>& store, const std::string& what, const std::string& why) {
  count(store, one(&cache::RemoteCounters::bad));
  warn_once("remote-bad", "remote cache: refused a " + what + " record (" + why +
                              "); not loaded, compiling locally (more are counted in `kaio-cache stats`)");
  if (debug_enabled()) log().debug("remote cache: refused a {} record: {}", what, why);
}
}  // namespace

disk::Lookup fetch_kernel(Tier& t, const std::shared_ptr<cache::Store>& store, const std::string& key,
                          const std::string& arch, cache::Record& out, bool& remote_bad) {
  remote_bad = false;
  std::string payload, why;
  const Got g = t.get_or_claim(cache::kRemoteKernel, key, payload, &why, store);
  if (g == Got::Miss) count(store, one(&cache::RemoteCounters::misses));
  if (g == Got::Unavailable || g == Got::Miss) return disk::Lookup::Miss;
  std::optional<cache::Record> rec;
  if (g == Got::Hit) {
    rec = cache::decode_record(payload, &why);
    if (rec && rec->arch != arch) {
      why = "made for " + rec->arch + ", wanted " + arch;
      rec.reset();
    } else if (rec && rec->toolchain != toolchain_id()) {
      why = "made by another toolchain (" + rec->toolchain + ")";
      rec.reset();
    }
  }
  if (!rec) {
    bad_record(store, "kernel", why);
    remote_bad = true;
    return disk::Lookup::Miss;
  }
  count(store, one(&cache::RemoteCounters::hits));
  // Into the local LMDB (queued, like a compiled record: a synchronous commit would cost an
  // fsync, more than the round trip), so the next process finds it there.
  disk::write_fetched_async(store, key, std::move(payload));
  out = std::move(*rec);
  return disk::Lookup::Hit;
}

void publish_kernel(Tier& t, const std::shared_ptr<cache::Store>& store, const std::string& key,
                    const std::string& record_bytes, bool replace) {
  t.publish_async(cache::kRemoteKernel, key, record_bytes, replace, store);
}

std::optional<std::string> fetch_tuning(const std::shared_ptr<cache::Store>& store, const std::string& key,
                                        const std::function<bool(const std::string&, std::string*)>& valid) {
  std::shared_ptr<Tier> t = tier_for("");
  if (!t) return std::nullopt;
  std::string payload, why;
  Got g = t->get(cache::kRemoteTuning, key, payload, &why, store);
  if (g == Got::Hit && !valid(payload, &why)) g = Got::Bad;
  if (g == Got::Miss) count(store, one(&cache::RemoteCounters::misses));
  if (g == Got::Bad) bad_record(store, "tuning", why);
  if (g != Got::Hit) return std::nullopt;
  count(store, one(&cache::RemoteCounters::hits));
  return payload;
}

void publish_tuning(const std::shared_ptr<cache::Store>& store, const std::string& key, const std::string& bytes) {
  if (std::shared_ptr<Tier> t = tier_for("")) t->publish_async(cache::kRemoteTuning, key, bytes, true, store);
}

}  // namespace kaio::jit::remote
