#include "kaio/jit/disk_cache.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kaio/cache/meta.h"
#include "kaio/ir/error.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/log.h"

namespace kaio::jit::disk {

namespace {
// The store of each cache_dir string this process asked for, so that a compile does not
// resolve paths (syscalls) every time. A forked child starts over: LMDB environments do
// not cross fork.
struct Opened {
  std::mutex m;
  pid_t pid = 0;
  std::unordered_map<std::string, std::shared_ptr<cache::Store>> by_dir;
};
Opened& opened() {
  static Opened o;
  return o;
}
std::shared_ptr<cache::Store> open_uncached(const std::string& dir);
}  // namespace

std::shared_ptr<cache::Store> store_for(const std::string& dir) {
  Opened& o = opened();
  std::lock_guard<std::mutex> g(o.m);
  if (o.pid != getpid()) {
    o.by_dir.clear();
    o.pid = getpid();
  }
  auto it = o.by_dir.find(dir);
  if (it != o.by_dir.end()) return it->second;
  std::shared_ptr<cache::Store> s = open_uncached(dir);
  if (s) o.by_dir.emplace(dir, s);  // failures are retried by the next compile (one warning)
  return s;
}

namespace {
std::shared_ptr<cache::Store> open_uncached(const std::string& dir) {
  std::filesystem::path p;
  try {
    p = dir.empty() ? cache::default_dir() : std::filesystem::path(dir);
    return cache::Store::open(p);
  } catch (const std::exception& e) {
    warn_once("open:" + p.string(), std::string("kernel cache disabled: ") + e.what());
    return nullptr;
  }
}
}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// Use counts not yet in LMDB, per store.
struct Buffered {
  std::shared_ptr<cache::Store> store;
  std::unordered_map<std::string, cache::KeyUsage> keys;  // last use, hits since the last write
  uint64_t hits = 0, misses = 0;
};
using UsageMap = std::unordered_map<cache::Store*, Buffered>;

// Background writes in flight, and the use buffer. Fork handlers keep a child from waiting
// on its parent's threads or writing its parent's counts.
struct Writer {
  std::mutex m;
  std::condition_variable cv;
  int count = 0;

  std::mutex um;
  std::unique_ptr<UsageMap> usage = std::make_unique<UsageMap>();
  Clock::time_point last_flush = Clock::now();
  bool flush_queued = false;
  std::atomic<uint64_t> usage_writes{0};

  Writer() {
    log();  // constructed first, so it outlives the work in ~Writer
    pthread_atfork(
        [] {
          instance().m.lock();
          instance().um.lock();
        },
        [] {
          instance().um.unlock();
          instance().m.unlock();
        },
        [] {
          Writer& w = instance();
          w.um.unlock();
          w.m.unlock();
          w.count = 0;
          // The parent's stores must not be touched (or closed) here: leak the old buffer.
          (void)w.usage.release();
          w.usage = std::make_unique<UsageMap>();
          w.flush_queued = false;
          w.last_flush = Clock::now();
        });
  }
  static Writer& instance();
  ~Writer() {
    {
      std::unique_lock<std::mutex> g(m);
      cv.wait(g, [&] { return count == 0; });
    }
    flush_usage(false);
  }

  // Takes the buffered counts of one store (null: all stores).
  UsageMap take(cache::Store* only) {
    std::lock_guard<std::mutex> g(um);
    UsageMap out;
    if (!only) {
      out.swap(*usage);
    } else if (auto it = usage->find(only); it != usage->end()) {
      out.emplace(only, std::move(it->second));
      usage->erase(it);
    }
    return out;
  }

  static void apply(cache::Txn& t, const Buffered& b) {
    for (const auto& [key, u] : b.keys) cache::add_usage(t, key, u.last_use_us, u.hits);
    cache::add_counters(t, b.hits, b.misses);
  }

  void flush_usage(bool may_warn) {
    UsageMap all = take(nullptr);
    for (auto& [ptr, b] : all) {
      try {
        b.store->update([&](cache::Txn& t) { apply(t, b); });
        ++usage_writes;
      } catch (const std::exception& e) {
        const std::string msg = std::string("kernel cache use counts not saved: ") + e.what();
        if (may_warn) warn_once("usage:" + b.store->dir().string(), msg);
        else log().warn("{}", msg);
      }
    }
    std::lock_guard<std::mutex> g(um);
    last_flush = Clock::now();
    flush_queued = false;
  }

  void begin() {
    std::lock_guard<std::mutex> g(m);
    ++count;
  }
  void end() {
    std::lock_guard<std::mutex> g(m);
    if (--count == 0) cv.notify_all();
  }
};

Writer& Writer::instance() {
  static Writer w;
  return w;
}

// Buffers one lookup; at most every kUsageFlushSeconds a background thread writes them.
void note(const std::shared_ptr<cache::Store>& s, const std::string* hit_key) {
  Writer& w = Writer::instance();
  bool due = false;
  {
    std::lock_guard<std::mutex> g(w.um);
    Buffered& b = (*w.usage)[s.get()];
    if (!b.store) b.store = s;
    if (hit_key) {
      cache::KeyUsage& u = b.keys[*hit_key];
      u.last_use_us = cache::now_unix_us();
      ++u.hits;
      ++b.hits;
    } else {
      ++b.misses;
    }
    if (!w.flush_queued && Clock::now() - w.last_flush >= std::chrono::seconds(kUsageFlushSeconds)) {
      w.flush_queued = true;
      due = true;
    }
  }
  if (due) {
    w.begin();
    try {
      std::thread([&w] {
        w.flush_usage(true);
        w.end();
      }).detach();
    } catch (...) {  // no thread: the counts wait for the next flush
      w.end();
      std::lock_guard<std::mutex> g(w.um);
      w.flush_queued = false;
    }
  }
}

}  // namespace

Lookup read(const std::shared_ptr<cache::Store>& sp, const std::string& key, const std::string& arch,
            cache::Record& out) {
  cache::Store& s = *sp;
  bool found = false;
  std::optional<cache::Record> rec;
  std::string why;
  try {
    // Decoded straight from the mapped page: the payload is copied once, into the record.
    found = s.visit("kernels", key, [&](std::string_view bytes) { rec = cache::decode_record(bytes, &why); });
  } catch (const std::exception& e) {
    warn_once("read:" + s.dir().string(), std::string("kernel cache read failed, compiling instead: ") + e.what());
    return Lookup::Miss;
  }
  if (!found) {
    note(sp, nullptr);
    return Lookup::Miss;
  }
  if (!rec) {
    note(sp, nullptr);
    warn_once("bad:" + s.dir().string(), "kernel cache record is not valid (" + why + "); recompiling and replacing it");
    return Lookup::Bad;
  }
  if (rec->arch != arch || rec->toolchain != toolchain_id()) {
    note(sp, nullptr);
    warn_once("stale:" + s.dir().string(), "kernel cache record was made for another target or toolchain (" +
                                               rec->arch + ", " + rec->toolchain + "); recompiling");
    return Lookup::Bad;
  }
  out = std::move(*rec);
  note(sp, &key);
  return Lookup::Hit;
}

void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace) {
  Writer& w = Writer::instance();
  w.begin();
  try {
  std::thread([s = std::move(s), key = std::move(key), rec = std::move(rec), replace, &w] {
    try {
      std::string bytes = cache::encode_record(rec);
      std::string env_error;
      const uint64_t max_bytes = cache::max_bytes_from_env(&env_error);
      if (!env_error.empty()) warn_once("max-bytes", env_error);
      // The buffered use counts of this store ride along in the same transaction.
      UsageMap pending = w.take(s.get());
      cache::Removed evicted;
      s->update([&](cache::Txn& t) {
        for (const auto& [ptr, b] : pending) Writer::apply(t, b);
        // Losing a race to another process is fine (put_if_absent semantics).
        cache::put_record(t, key, bytes, replace, max_bytes, &evicted);
      });
      if (!pending.empty()) ++w.usage_writes;
      if (evicted.records && debug_enabled())
        log().debug("kernel cache over {} bytes: evicted {} least recently used records", max_bytes, evicted.records);
    } catch (const std::exception& e) {
      warn_once("write:" + s->dir().string(), std::string("kernel cache write failed (the kernel is unaffected): ") + e.what());
    }
    w.end();
  }).detach();
  } catch (const std::exception& e) {  // no thread: the record is simply not written
    w.end();
    warn_once("thread", std::string("kernel cache write skipped: ") + e.what());
  }
}

void flush() {
  Writer& w = Writer::instance();
  {
    std::unique_lock<std::mutex> g(w.m);
    w.cv.wait(g, [&] { return w.count == 0; });
  }
  w.flush_usage(true);
}

uint64_t usage_write_count() { return Writer::instance().usage_writes.load(); }

}  // namespace kaio::jit::disk
