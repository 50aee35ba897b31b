#include "kaio/jit/disk_cache.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kaio/cache/meta.h"
#include "kaio/ir/error.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/disk_cache_remote.h"
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
  static Opened* o = new Opened;  // never destroyed: writers may outlive static destruction
  return *o;
}

std::shared_ptr<cache::Store> open_uncached(const std::string& dir) {
  std::filesystem::path p;
  try {
    p = dir.empty() ? cache::default_dir() : std::filesystem::path(dir);
    std::shared_ptr<cache::Store> s = cache::Store::open(p);
    // A damaged file was moved aside: one warning naming both paths.
    if (!s->open_notice().empty()) warn_once("moved:" + s->open_notice(), s->open_notice());
    return s;
  } catch (const std::exception& e) {
    warn_once("open:" + p.string(), std::string("kernel cache disabled: ") + e.what());
    return nullptr;
  }
}

bool is_damage(const std::exception& e) { return dynamic_cast<const cache::DamagedCache*>(&e) != nullptr; }

// A full disk, a quota or a full map does not pass by retrying at once.
bool worth_retrying(const std::exception& e) {
  if (is_damage(e)) return false;
  const auto* t = dynamic_cast<const ToolError*>(&e);
  if (!t) return false;
  const std::string& c = t->code();
  return c != "ENOSPC" && c != "EDQUOT" && c != "MDB_MAP_FULL" && c != "EROFS" && c != "EACCES";
}
}  // namespace

std::shared_ptr<cache::Store> store_for(const std::string& dir) {
  Opened& o = opened();
  std::lock_guard<std::mutex> g(o.m);
  if (o.pid != getpid()) {
    o.by_dir.clear();
    o.pid = getpid();
  }
  auto it = o.by_dir.find(dir);
  if (it != o.by_dir.end()) {
    if (!it->second->damaged()) return it->second;
    o.by_dir.erase(it);  // reopened below: a fresh file, if the damaged one was moved aside
  }
  std::shared_ptr<cache::Store> s = open_uncached(dir);
  if (s) o.by_dir.emplace(dir, s);  // failures are retried by the next compile (one warning)
  return s;
}

namespace {

using Clock = std::chrono::steady_clock;

// Use counts and write failures not yet in LMDB, per store.
struct Buffered {
  std::shared_ptr<cache::Store> store;
  std::unordered_map<std::string, cache::KeyUsage> keys;  // last use, hits since the last write
  uint64_t hits = 0, misses = 0;
  uint64_t failures = 0, failure_unix = 0;
  std::string failure_message;
  cache::RemoteCounters remote;

  void merge(Buffered&& o) {
    if (!store) store = std::move(o.store);
    for (auto& [k, u] : o.keys) {
      cache::KeyUsage& mine = keys[k];
      mine.last_use_us = std::max(mine.last_use_us, u.last_use_us);
      mine.hits += u.hits;
    }
    hits += o.hits;
    misses += o.misses;
    failures += o.failures;
    remote += o.remote;
    if (o.failure_unix >= failure_unix) {
      failure_unix = o.failure_unix;
      failure_message = std::move(o.failure_message);
    }
  }
};
using UsageMap = std::unordered_map<cache::Store*, Buffered>;

// Write health of one cache directory.
struct Health {
  uint64_t consecutive = 0;
  Clock::time_point resume_at{};
};

// Background writes in flight, the use buffer and the write health. Never destroyed
// (writers left running at exit still use it); ExitFlush below does the exit work. Fork
// handlers keep a child from waiting on its parent's threads or writing its parent's counts.
struct Writer {
  std::mutex m;
  std::condition_variable cv;
  int count = 0;
  uint64_t finished = 0;  // writers ended, for flush()'s progress check

  std::mutex um;
  std::unique_ptr<UsageMap> usage = std::make_unique<UsageMap>();
  std::unordered_map<std::string, Health> health;  // by store directory
  Clock::time_point last_flush = Clock::now();
  bool flush_queued = false;
  std::atomic<uint64_t> usage_writes{0}, written{0}, failed{0}, skipped{0};

  Writer() {
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
          w.health.clear();
          w.flush_queued = false;
          w.last_flush = Clock::now();
        });
  }
  static Writer& instance();

  // Waits until no writer runs or `deadline`; false on the deadline.
  bool wait_idle(Clock::time_point deadline) {
    std::unique_lock<std::mutex> g(m);
    return cv.wait_until(g, deadline, [&] { return count == 0; });
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
  // Puts counts back after a failed write, for the next one.
  void give_back(UsageMap&& taken) {
    std::lock_guard<std::mutex> g(um);
    for (auto& [ptr, b] : taken) (*usage)[ptr].merge(std::move(b));
  }

  static void apply(cache::Txn& t, const Buffered& b) {
    for (const auto& [key, u] : b.keys) cache::add_usage(t, key, u.last_use_us, u.hits);
    cache::add_counters(t, b.hits, b.misses);
    cache::add_write_failures(t, b.failures, b.failure_unix, b.failure_message);
    cache::add_remote_counters(t, b.remote);
  }

  void flush_usage(bool may_warn) {
    UsageMap all = take(nullptr);
    UsageMap failed_writes;
    for (auto& [ptr, b] : all) {
      try {
        b.store->update([&](cache::Txn& t) { apply(t, b); });
        ++usage_writes;
      } catch (const std::exception& e) {
        const std::string msg = std::string("kernel cache use counts not saved: ") + e.what();
        if (may_warn) warn_once("usage:" + b.store->dir().string(), msg);
        else log().warn("{}", msg);
        // Kept for the next write, with this failure counted among them.
        ++b.failures;
        b.failure_unix = static_cast<uint64_t>(std::time(nullptr));
        b.failure_message = e.what();
        failed_writes.emplace(ptr, std::move(b));
      }
    }
    give_back(std::move(failed_writes));
    std::lock_guard<std::mutex> g(um);
    last_flush = Clock::now();
    flush_queued = false;
  }

  // False while the cache's writes are paused after failures.
  bool may_write(const std::string& dir) {
    std::lock_guard<std::mutex> g(um);
    auto it = health.find(dir);
    return it == health.end() || Clock::now() >= it->second.resume_at;
  }

  void on_success(const std::string& dir) {
    ++written;
    std::lock_guard<std::mutex> g(um);
    health.erase(dir);
  }

  // Counts a failed record write (saved with the store's next successful write), pauses
  // the cache's writes, and logs: the first failure and the first pause as warnings.
  void on_failure(const std::shared_ptr<cache::Store>& s, const std::string& what) {
    ++failed;
    const std::string dir = s->dir().string();
    uint64_t consecutive = 0;
    int pause_s = 0;
    {
      std::lock_guard<std::mutex> g(um);
      Buffered& b = (*usage)[s.get()];
      if (!b.store) b.store = s;
      ++b.failures;
      b.failure_unix = static_cast<uint64_t>(std::time(nullptr));
      b.failure_message = what;
      Health& h = health[dir];
      consecutive = ++h.consecutive;
      if (consecutive >= 2) {
        pause_s = std::min<uint64_t>(kMaxBackoffSeconds, uint64_t(1) << std::min<uint64_t>(consecutive - 2, 16));
        h.resume_at = Clock::now() + std::chrono::seconds(pause_s);
      }
    }
    warn_once("write:" + dir, "kernel cache write failed (the kernel is unaffected): " + what);
    if (pause_s)
      warn_once("paused:" + dir, "kernel cache writes to " + dir + " keep failing; pausing them (" +
                                     std::to_string(pause_s) + " s, doubling while they fail)");
    if (debug_enabled())
      log().debug("kernel cache write failure {} in a row in {}: {}", consecutive, dir, what);
  }

  void begin() {
    std::lock_guard<std::mutex> g(m);
    ++count;
  }
  void end() {
    std::lock_guard<std::mutex> g(m);
    ++finished;
    --count;
    cv.notify_all();  // flush() watches progress, not only the end
  }

  // Waits until no writer runs, as long as writers keep finishing; false when none has
  // finished for `stall`.
  bool wait_idle_while_progressing(std::chrono::seconds stall) {
    std::unique_lock<std::mutex> g(m);
    for (;;) {
      const uint64_t before = finished;
      if (cv.wait_for(g, stall, [&] { return count == 0 || finished != before; })) {
        if (count == 0) return true;
      } else {
        return false;
      }
    }
  }

  // Runs fn on a detached thread counted as a writer; false when no thread could start.
  template <class Fn>
  bool spawn(Fn&& fn) {
    begin();
    try {
      std::thread([this, fn = std::forward<Fn>(fn)]() mutable {
        fn();
        end();
      }).detach();
      return true;
    } catch (...) {
      end();
      return false;
    }
  }

  // At exit: waits for writers, then saves the use counts, all within kExitWaitMs. A
  // writer still running then is left to the end of the process.
  void finish_at_exit() {
    // Remote publishes first (bounded): their counters ride with the use counts below.
    remote::flush(remote::kExitWaitMs);
    const auto deadline = Clock::now() + std::chrono::milliseconds(kExitWaitMs);
    bool idle = wait_idle(deadline);
    // The counts are saved on a thread of their own: on a failing disk the save may
    // block as well, and exit must not.
    if (idle && spawn([this] { flush_usage(false); })) idle = wait_idle(deadline);
    if (!idle)
      log().warn("kernel cache writes still running after {} ms at exit; left unfinished (nothing half-written "
                 "is ever served)",
                 kExitWaitMs);
  }
};

Writer& Writer::instance() {
  static Writer* w = new Writer;  // never destroyed, see above
  return *w;
}

// Constructed on first use of the disk cache, after the logger, so destroyed before it.
struct ExitFlush {
  ExitFlush() { (void)Writer::instance(); }
  ~ExitFlush() { Writer::instance().finish_at_exit(); }
};
void arm_exit_flush() {
  log();
  static ExitFlush e;
}

// Buffers one lookup; at most every kUsageFlushSeconds a background thread writes them.
void note(const std::shared_ptr<cache::Store>& s, const std::string* hit_key) {
  arm_exit_flush();
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
  if (due && !w.spawn([&w] { w.flush_usage(true); })) {  // no thread: the counts wait for the next flush
    std::lock_guard<std::mutex> g(w.um);
    w.flush_queued = false;
  }
}

// One record write with its attempts; returns normally or throws the last failure.
void write_record(Writer& w, std::shared_ptr<cache::Store>& s, const std::string& key, const std::string& bytes,
                  bool replace) {
  std::string env_error;
  const uint64_t max_bytes = cache::max_bytes_from_env(&env_error);
  if (!env_error.empty()) warn_once("max-bytes", env_error);
  for (int attempt = 1;; ++attempt) {
    // The buffered use counts (and failures) of this store ride along in the same transaction.
    UsageMap pending = w.take(s.get());
    try {
      cache::Removed evicted;
      s->update([&](cache::Txn& t) {
        for (const auto& [ptr, b] : pending) Writer::apply(t, b);
        // Losing a race to another process is fine (put_if_absent semantics).
        cache::put_record(t, key, bytes, replace, max_bytes, &evicted);
      });
      if (!pending.empty()) ++w.usage_writes;
      if (evicted.records && debug_enabled())
        log().debug("kernel cache over {} bytes: evicted {} least recently used records", max_bytes, evicted.records);
      return;
    } catch (const std::exception& e) {
      w.give_back(std::move(pending));
      if (attempt >= kWriteAttempts || !worth_retrying(e)) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
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
    // A damaged file names itself and where it went; the next compile opens a fresh one.
    if (is_damage(e)) warn_once("damaged:" + std::string(e.what()), e.what());
    else warn_once("read:" + s.dir().string(), std::string("kernel cache read failed, compiling instead: ") + e.what());
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

void note_remote(const std::shared_ptr<cache::Store>& s, const cache::RemoteCounters& c) {
  arm_exit_flush();
  Writer& w = Writer::instance();
  std::lock_guard<std::mutex> g(w.um);
  Buffered& b = (*w.usage)[s.get()];
  if (!b.store) b.store = s;
  b.remote += c;
}

void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace) {
  arm_exit_flush();
  Writer& w = Writer::instance();
  if (!w.may_write(s->dir().string())) {
    ++w.skipped;
    if (debug_enabled()) log().debug("kernel cache write of {} skipped: writes to {} are paused", rec.name, s->dir().string());
    return;
  }
  const bool started = w.spawn([s = std::move(s), key = std::move(key), rec = std::move(rec), replace, &w]() mutable {
    try {
      // The file was found damaged (and moved aside) since this write was queued.
      if (s->damaged()) s = cache::Store::open(s->dir());
      write_record(w, s, key, cache::encode_record(rec), replace);
      w.on_success(s->dir().string());
    } catch (const std::exception& e) {
      w.on_failure(s, e.what());
    }
  });
  if (!started) warn_once("thread", "kernel cache write skipped: no thread could be started");
}

namespace {
// Records fetched from the remote tier, waiting for the LMDB: one thread drains them, all
// queued records of a store in one transaction (a remote hit costs no thread start and no
// commit of its own; a node warming up from Redis commits in batches).
struct Fetched {
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::tuple<std::shared_ptr<cache::Store>, std::string, std::string>> queue;
  bool draining = false;
  bool flush_now = false;  // flush() and exit do not wait out the collecting moment
  pid_t pid = 0;
};
Fetched& fetched() {
  static Fetched* f = new Fetched;  // never destroyed, like the writers
  return *f;
}

void drain_fetched(Writer& w) {
  Fetched& f = fetched();
  for (;;) {
    std::vector<std::tuple<std::shared_ptr<cache::Store>, std::string, std::string>> batch;
    {
      // A node warming up fetches records back to back: the thread collects them for a
      // moment and writes them together, instead of waking (and taking a core from the
      // compile path) for each one, or ending and being started again.
      std::unique_lock<std::mutex> g(f.m);
      f.cv.wait_for(g, std::chrono::milliseconds(kFetchedLingerMs), [&] { return f.flush_now; });
      f.flush_now = false;
      batch.swap(f.queue);
      if (batch.empty()) {
        f.draining = false;
        return;
      }
    }
    std::string env_error;
    const uint64_t max_bytes = cache::max_bytes_from_env(&env_error);
    std::unordered_map<cache::Store*, std::vector<size_t>> by_store;
    for (size_t i = 0; i < batch.size(); ++i) by_store[std::get<0>(batch[i]).get()].push_back(i);
    for (auto& [ptr, idx] : by_store) {
      std::shared_ptr<cache::Store> s = std::get<0>(batch[idx[0]]);
      const std::string dir = s->dir().string();
      if (!w.may_write(dir)) {
        w.skipped += idx.size();
        continue;
      }
      try {
        if (s->damaged()) s = cache::Store::open(s->dir());
        s->update([&](cache::Txn& t) {
          for (size_t i : idx) cache::put_record(t, std::get<1>(batch[i]), std::get<2>(batch[i]), true, max_bytes);
        });
        for (size_t n = 0; n < idx.size(); ++n) w.on_success(dir);
      } catch (const std::exception& e) {
        w.on_failure(s, e.what());
      }
    }
  }
}
}  // namespace

void write_fetched_async(std::shared_ptr<cache::Store> s, std::string key, std::string bytes) {
  arm_exit_flush();
  Writer& w = Writer::instance();
  Fetched& f = fetched();
  std::lock_guard<std::mutex> g(f.m);
  if (f.pid != getpid()) {  // a forked child: the parent's drainer is not here
    f.pid = getpid();
    f.queue.clear();
    f.draining = false;
  }
  f.queue.emplace_back(std::move(s), std::move(key), std::move(bytes));
  if (f.draining) return;  // the writer takes it with the next batch
  f.draining = true;
  if (!w.spawn([&w] { drain_fetched(w); })) {
    f.draining = false;
    f.queue.clear();
    warn_once("thread", "kernel cache write skipped: no thread could be started");
  }
}

void flush() {
  arm_exit_flush();
  remote::flush();
  {
    Fetched& f = fetched();
    std::lock_guard<std::mutex> g(f.m);
    f.flush_now = true;
    f.cv.notify_all();
  }
  Writer& w = Writer::instance();
  if (!w.wait_idle_while_progressing(std::chrono::seconds(kFlushStallSeconds))) {
    warn_once("flush", "kernel cache writes made no progress for " + std::to_string(kFlushStallSeconds) +
                           " s; not waiting for them");
    return;  // the use counts would wait for the stuck writer's lock
  }
  w.flush_usage(true);
}

uint64_t usage_write_count() { return Writer::instance().usage_writes.load(); }

WriteStats write_stats() {
  Writer& w = Writer::instance();
  return WriteStats{w.written.load(), w.failed.load(), w.skipped.load()};
}

}  // namespace kaio::jit::disk
