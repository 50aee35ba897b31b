#include "kaio/jit/disk_cache.h"

#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

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

Lookup read(cache::Store& s, const std::string& key, const std::string& arch, cache::Record& out) {
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
  if (!found) return Lookup::Miss;
  if (!rec) {
    warn_once("bad:" + s.dir().string(), "kernel cache record is not valid (" + why + "); recompiling and replacing it");
    return Lookup::Bad;
  }
  if (rec->arch != arch || rec->toolchain != toolchain_id()) {
    warn_once("stale:" + s.dir().string(), "kernel cache record was made for another target or toolchain; recompiling");
    return Lookup::Bad;
  }
  out = std::move(*rec);
  return Lookup::Hit;
}

namespace {

// Counts writes in flight; fork handlers keep a child from waiting on its parent's threads.
struct Pending {
  std::mutex m;
  std::condition_variable cv;
  int count = 0;

  Pending() {
    log();  // constructed first, so it outlives the wait in ~Pending
    pthread_atfork([] { instance().m.lock(); }, [] { instance().m.unlock(); },
                   [] {
                     instance().m.unlock();
                     instance().count = 0;
                   });
  }
  static Pending& instance();
  ~Pending() {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [&] { return count == 0; });
  }
};

Pending& Pending::instance() {
  static Pending p;
  return p;
}

}  // namespace

void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace) {
  Pending& p = Pending::instance();
  {
    std::lock_guard<std::mutex> g(p.m);
    ++p.count;
  }
  std::thread([s = std::move(s), key = std::move(key), rec = std::move(rec), replace, &p] {
    try {
      std::string bytes = cache::encode_record(rec);
      if (replace) s->put("kernels", key, bytes);
      else s->put_if_absent("kernels", key, bytes);  // losing a race to another process is fine
    } catch (const std::exception& e) {
      warn_once("write:" + s->dir().string(), std::string("kernel cache write failed (the kernel is unaffected): ") + e.what());
    }
    std::lock_guard<std::mutex> g(p.m);
    if (--p.count == 0) p.cv.notify_all();
  }).detach();
}

void flush() {
  Pending& p = Pending::instance();
  std::unique_lock<std::mutex> g(p.m);
  p.cv.wait(g, [&] { return p.count == 0; });
}

}  // namespace kaio::jit::disk
