#include "kaio/jit/compile.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <future>
#include <shared_mutex>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/jit/disk_cache_remote.h"
#include "kaio/jit/kernel_state.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/log.h"

namespace kaio::jit {

namespace {

struct Toolchain {
  int ptx_major, ptx_minor;
  std::string id;
};

const Toolchain& toolchain() {
  static const Toolchain tc = [] {
    auto [jm, jn] = nvjitlink_version();
    auto [pm, pn] = codegen::ptx_isa_for_toolkit(jm, jn);
    Toolchain t{pm, pn, {}};
    t.id = "codegen=" + std::to_string(codegen::kCodegenVersion) + ";ptx=" + std::to_string(pm) + "." +
           std::to_string(pn) + ";nvjitlink=" + std::to_string(jm) + "." + std::to_string(jn) +
           ";record=" + std::to_string(cache::kRecordSchema);
    return t;
  }();
  return tc;
}

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

// KAIO_PTX_ANNOTATE changes the PTX text, so it is part of the key.
bool annotate_ptx() {
  static const bool on = env_true("KAIO_PTX_ANNOTATE");
  return on;
}

struct HashOf {
  size_t operator()(const ir::Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)); }
};

std::atomic<uint64_t> g_builds{0}, g_memory_hits{0}, g_disk_hits{0}, g_evictions{0};

using Future = std::shared_future<std::shared_ptr<detail::KernelState>>;

// The in-process cache of compiled kernels, bounded to `capacity` entries (default 4096,
// KAIO_MEMORY_CACHE_ENTRIES or set_memory_cache_capacity()). Approximate LRU: a hit stores
// a tick (relaxed, under the shared lock, so hits never serialize); an insert that takes
// the cache past the cap evicts the oldest eighth in one pass (nth_element), so eviction
// costs O(1) amortized per insert. A kernel still compiling is never evicted. Eviction only
// drops the cache's reference: CompiledKernels (and families) keep theirs.
struct Entry {
  Future future;
  uint64_t id = 0;                 // unique per insertion: a failed compile erases only its own entry
  std::atomic<uint64_t> used{0};   // tick of the last hit
  Entry(Future f, uint64_t i) : future(std::move(f)), id(i), used(i) {}
};

size_t env_capacity() {
  const char* v = std::getenv("KAIO_MEMORY_CACHE_ENTRIES");
  if (!v || !*v) return 4096;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v || *end) {
    warn_once("memcap", std::string("KAIO_MEMORY_CACHE_ENTRIES='") + v + "' is not a number; using 4096");
    return 4096;
  }
  return static_cast<size_t>(n);
}

struct MemoryCache {
  std::shared_mutex m;
  std::unordered_map<ir::Hash128, std::unique_ptr<Entry>, HashOf> map;
  std::atomic<size_t> capacity{env_capacity()};  // 0: unbounded
  std::atomic<uint64_t> tick{1};

  // Under the exclusive lock, after an insert.
  void evict_locked() {
    const size_t cap = capacity.load(std::memory_order_relaxed);
    if (cap == 0 || map.size() <= cap) return;
    const size_t target = cap - cap / 8;  // down to 7/8 of the cap
    std::vector<std::pair<uint64_t, ir::Hash128>> ages;
    ages.reserve(map.size());
    for (const auto& [k, e] : map)
      if (e->future.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        ages.emplace_back(e->used.load(std::memory_order_relaxed), k);
    size_t drop = std::min(ages.size(), map.size() - target);
    if (drop == 0) return;
    std::nth_element(ages.begin(), ages.begin() + static_cast<std::ptrdiff_t>(drop - 1), ages.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < drop; ++i) map.erase(ages[i].second);
    g_evictions += drop;
  }
};

MemoryCache& memory() {
  static MemoryCache c;
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void dump_ptx(const std::string& dir, const std::string& name, const Key& key, const std::string& ptx) {
  try {
    std::filesystem::create_directories(dir);
    std::filesystem::path p = std::filesystem::path(dir) / (name + "-" + key.hex().substr(0, 12) + ".ptx");
    std::ofstream(p, std::ios::binary) << ptx;
  } catch (const std::exception& e) {
    warn_once("dump", std::string("KAIO_DUMP_PTX: could not write PTX: ") + e.what());
  }
}

// The slow path: disk cache, else codegen + nvJitLink.
std::shared_ptr<detail::KernelState> build(const ir::Kernel& k, const std::string& arch, const Key& key,
                                           const CompileOptions& o, bool& from_disk) {
  auto st = std::make_shared<detail::KernelState>();
  st->key = key;
  st->name = k.name();
  st->arch = arch;
  st->params = k.params();
  st->kernel = k;
  st->launch_bound_threads = k.data().max_threads;
  from_disk = false;

  bool use_disk = o.use_cache && !env_true("KAIO_DISABLE_CACHE");
  std::shared_ptr<cache::Store> store = use_disk ? disk::store_for(o.cache_dir) : nullptr;
  // KAIO_FORCE_RECOMPILE=1: like .force for the disk cache (records are rebuilt and
  // replaced), but repeat compiles in this process are still answered from memory.
  const bool force_disk = o.force || (store && env_true("KAIO_FORCE_RECOMPILE"));
  bool replace = force_disk;
  if (store && !force_disk) {
    auto t0 = std::chrono::steady_clock::now();
    cache::Record rec;
    disk::Lookup r = disk::read(store, key.bytes(), arch, rec);
    if (r == disk::Lookup::Hit) {
      st->cubin = std::move(rec.cubin);
      st->ptx = std::move(rec.ptx);
      st->info_log = std::move(rec.info_log);
      from_disk = true;
      ++g_disk_hits;
      if (debug_enabled()) log().debug("{} {}: disk hit ({:.3f} ms)", k.name(), key.hex().substr(0, 12), ms_since(t0));
      return st;
    }
    replace = r == disk::Lookup::Bad;
  }
  // The remote tier sits behind LMDB: asked on a local miss, never on a forced compile.
  std::shared_ptr<remote::Tier> tier = store ? remote::tier_for(o.remote_cache) : nullptr;
  bool replace_remote = force_disk;
  if (tier && !force_disk) {
    auto t0 = std::chrono::steady_clock::now();
    cache::Record rec;
    if (remote::fetch_kernel(*tier, store, key.bytes(), arch, rec, replace_remote) == disk::Lookup::Hit) {
      st->cubin = std::move(rec.cubin);
      st->ptx = std::move(rec.ptx);
      st->info_log = std::move(rec.info_log);
      from_disk = true;
      if (debug_enabled()) log().debug("{} {}: remote hit ({:.3f} ms)", k.name(), key.hex().substr(0, 12), ms_since(t0));
      return st;
    }
  }

  const Toolchain& tc = toolchain();
  ++g_builds;
  auto t0 = std::chrono::steady_clock::now();
  codegen::Target target{arch, tc.ptx_major, tc.ptx_minor, annotate_ptx()};
  st->ptx = codegen::emit_ptx(k, target);
  double t_codegen = ms_since(t0);
  if (const char* dir = std::getenv("KAIO_DUMP_PTX"); dir && *dir) dump_ptx(dir, k.name(), key, st->ptx);
  auto t1 = std::chrono::steady_clock::now();
  LinkResult lr = link_ptx(st->ptx, arch, k.name());
  st->cubin = std::move(lr.cubin);
  st->info_log = std::move(lr.info_log);
  if (debug_enabled())
    log().debug("{} {}: compiled for {} (codegen {:.3f} ms, nvJitLink {:.3f} ms)", k.name(), key.hex().substr(0, 12),
                arch, t_codegen, ms_since(t1));

  if (store) {
    cache::Record rec;
    rec.name = st->name;
    rec.arch = arch;
    rec.toolchain = tc.id;
    rec.created_unix = static_cast<uint64_t>(std::time(nullptr));
    rec.cubin = st->cubin;
    rec.ptx = st->ptx;
    rec.info_log = st->info_log;
    if (tier) remote::publish_kernel(*tier, store, key.bytes(), cache::encode_record(rec), replace_remote);
    disk::write_async(store, key.bytes(), std::move(rec), replace);
  }
  return st;
}

}  // namespace

const std::string& toolchain_id() { return toolchain().id; }

Key cache_key(const ir::Kernel& k, const std::string& arch) {
  if (!k.valid()) throw UsageError("", "compile", "an empty (default-constructed) Kernel");
  // IR hash ‖ shape ‖ arch ‖ toolchain (PTX ISA, codegen, nvJitLink, record schema) ‖ link options
  std::string in;
  in.reserve(160);
  in.append(reinterpret_cast<const char*>(&k.hash()), sizeof(ir::Hash128));
  for (const auto& s : k.specs()) in.append(reinterpret_cast<const char*>(&s.bits), 8);
  in += '|';
  in += arch;
  in += '|';
  in += toolchain().id;
  in += '|';
  in += link_flags();  // the rest of the link options is the arch, already in
  if (annotate_ptx()) in += "|annotate";
  return Key{ir::hash_bytes(in.data(), in.size())};
}

namespace {
// A kernel with arch-specific instructions (wgmma, setmaxnreg) exists only as sm_90a: on
// an sm_90 device it compiles for sm_90a by itself; asking for another target explicitly
// is a UsageError that names the instructions' requirement.
std::string arch_for(const ir::Kernel& k, const CompileOptions& o) {
  const std::string& arch = o.arch.empty() ? detail::backend().default_arch() : o.arch;
  if (!k.arch_specific()) return arch;
  const codegen::ArchInfo a = codegen::parse_arch(arch);
  if (a.sm == 90 && a.suffix == 'a') return arch;
  if (a.sm == 90 && a.suffix == '\0' && o.arch.empty()) return arch + "a";
  throw UsageError(k.name(), "compile",
                   "the kernel uses sm_90a-only instructions (wgmma, setmaxnreg): it compiles for sm_90a only, not " + arch +
                       (o.arch.empty() ? " (the current device)" : ""));
}
}  // namespace

CompiledKernel compile(const ir::Kernel& k, const CompileOptions& o) {
  const std::string arch = arch_for(k, o);
  Key key = cache_key(k, arch);
  MemoryCache& mc = memory();

  if (!o.force) {
    std::shared_lock<std::shared_mutex> g(mc.m);
    auto it = mc.map.find(key.h);
    if (it != mc.map.end()) {
      Entry& e = *it->second;
      e.used.store(mc.tick.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
      Future f = e.future;
      g.unlock();
      ++g_memory_hits;
      return CompiledKernel(f.get(), true);  // waits if another thread is compiling it
    }
  }

  // Miss: the first thread to insert the key compiles; the others wait on its future.
  std::promise<std::shared_ptr<detail::KernelState>> promise;
  uint64_t id = 0;
  {
    std::unique_lock<std::shared_mutex> g(mc.m);
    auto it = mc.map.find(key.h);
    if (it != mc.map.end() && !o.force) {
      Future f = it->second->future;
      g.unlock();
      ++g_memory_hits;
      return CompiledKernel(f.get(), true);
    }
    id = mc.tick.fetch_add(1, std::memory_order_relaxed);
    mc.map[key.h] = std::make_unique<Entry>(promise.get_future().share(), id);
    mc.evict_locked();
  }
  try {
    codegen::parse_arch(arch);  // a bad arch is a UsageError before any tool runs
    bool from_disk = false;
    auto st = build(k, arch, key, o, from_disk);
    promise.set_value(st);
    return CompiledKernel(std::move(st), from_disk);
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::unique_lock<std::shared_mutex> g(mc.m);
    auto it = mc.map.find(key.h);
    if (it != mc.map.end() && it->second->id == id) mc.map.erase(it);  // a later compile tries again
    throw;
  }
}

void flush_cache_writes() { disk::flush(); }

CompileStats compile_stats() {
  return CompileStats{g_builds.load(), g_memory_hits.load(), g_disk_hits.load(), g_evictions.load()};
}

void reset_compile_stats() {
  g_builds = 0;
  g_memory_hits = 0;
  g_disk_hits = 0;
  g_evictions = 0;
}

void clear_memory_cache() {
  MemoryCache& mc = memory();
  std::unique_lock<std::shared_mutex> g(mc.m);
  mc.map.clear();
}

void set_memory_cache_capacity(size_t entries) {
  MemoryCache& mc = memory();
  std::unique_lock<std::shared_mutex> g(mc.m);
  mc.capacity.store(entries, std::memory_order_relaxed);
  mc.evict_locked();
}

size_t memory_cache_capacity() { return memory().capacity.load(std::memory_order_relaxed); }

size_t memory_cache_size() {
  MemoryCache& mc = memory();
  std::shared_lock<std::shared_mutex> g(mc.m);
  return mc.map.size();
}

}  // namespace kaio::jit
