// jit::compile(): the front door. IR -> key -> (memory cache | disk cache | codegen +
// nvJitLink) -> CompiledKernel.
#pragma once

#include <string>

#include "kaio/ir/kernel.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::jit {

struct CompileOptions {
  std::string arch;        // "sm_90", "sm_90a", ...; empty: the current device's SM
  bool use_cache = true;   // the on-disk cache (KAIO_DISABLE_CACHE=1 also turns it off)
  bool force = false;      // ignore cached entries: recompile and overwrite
  std::string cache_dir;   // empty: $KAIO_CACHE_DIR, $XDG_CACHE_HOME/kaio, ~/.cache/kaio
  // The fleet-shared tier behind the on-disk cache: redis://[user:password@]host:port[/db];
  // empty: $KAIO_REMOTE_CACHE; "off": none. Other settings (signing key, namespace,
  // timeouts) come from KAIO_REMOTE_CACHE_* (docs/remote-cache.md).
  std::string remote_cache;
};

CompiledKernel compile(const ir::Kernel& k, const CompileOptions& options = {});

// The key compile() would use, without compiling.
Key cache_key(const ir::Kernel& k, const std::string& arch);

// Cache writes happen in the background so that a cold compile costs codegen + link;
// this waits for the pending ones (also done at process exit).
void flush_cache_writes();

// Counters since process start (or the last reset).
struct CompileStats {
  uint64_t builds = 0;       // codegen + nvJitLink runs
  uint64_t memory_hits = 0;  // answered by the in-process cache
  uint64_t disk_hits = 0;    // answered by the on-disk cache
  uint64_t evictions = 0;    // entries dropped from the in-memory cache by its size cap
};
CompileStats compile_stats();
void reset_compile_stats();

// Drops the in-memory cache (the disk cache is untouched). For tests and benchmarks.
void clear_memory_cache();

// The in-memory cache holds at most this many compiled kernels (default 4096, or
// $KAIO_MEMORY_CACHE_ENTRIES at start; 0: unbounded). Past the cap the least recently used
// eighth is dropped; a dropped kernel stays valid for whoever holds it, and a later compile
// of it is answered by the disk cache. Setting a smaller cap evicts at once.
void set_memory_cache_capacity(size_t entries);
size_t memory_cache_capacity();
size_t memory_cache_size();

// The toolchain identity that enters every key and record ("codegen=1;ptx=9.0;...").
const std::string& toolchain_id();

}  // namespace kaio::jit
