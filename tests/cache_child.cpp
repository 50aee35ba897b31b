// Started by the cache robustness tests as a separate process (KAIO_CACHE_DIR picks the
// cache). Offline (sm_90), no GPU needed.
//
//   kaio_cache_child compile ID SHARED DISTINCT
//       compiles SHARED kernels every child shares and DISTINCT kernels of its own,
//       interleaved; prints "<key hex> <xxh3-64 of the cubin, hex> <from_cache 0|1>" per kernel.
//   kaio_cache_child app KERNELS [flush|noflush]
//       what an application does: compiles KERNELS kernels "app_<i>" (this machine's
//       target; with KAIO_INTERPRET=1, sm_90 and launches on the CPU), launches each on 100
//       elements and checks the result, then compiles them again from disk (memory cache
//       cleared) and launches again; optionally flushes the cache writes; then exits.
//       Prints "app ok <kernels> <served from disk>"; exit 3 on a wrong result.
//   kaio_cache_child writer KERNELS
//       until killed: recompiles (and rewrites) kernels "victim_<i>" while a second thread
//       writes filler records under a 2 MiB cap (so evictions run all the time); prints
//       "ready" once both are going.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/kaio.h"
#include "cache/cache_kernels.h"

using namespace kaio;

namespace {

int compile_mode(int id, int shared, int distinct) {
  const int n = shared + distinct;
  for (int j = 0; j < n; ++j) {
    // Interleaved, starting at a different place in each child, so that children meet on
    // the shared keys at different times.
    const int pick = (j + id * 7) % n;
    ir::Kernel k = pick < shared ? test::numbered_kernel("mp_shared", pick)
                                 : test::numbered_kernel("mp_c" + std::to_string(id), pick - shared);
    jit::CompiledKernel ck = jit::compile(k, {.arch = "sm_90"});
    const std::string& cubin = ck.cubin();
    std::printf("%s %016llx %d\n", ck.key().hex().c_str(),
                static_cast<unsigned long long>(XXH3_64bits(cubin.data(), cubin.size())), ck.from_cache() ? 1 : 0);
  }
  std::fflush(stdout);
  jit::flush_cache_writes();
  return 0;
}

int app_mode(int kernels, bool flush) {
  int served = 0;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) jit::clear_memory_cache();
    for (int i = 0; i < kernels; ++i) {
      jit::CompiledKernel ck = jit::compile(test::numbered_kernel("app", i));
      served += ck.from_cache() ? 1 : 0;
      constexpr uint32_t n = 100;
      std::vector<float> x(n);
      for (uint32_t j = 0; j < n; ++j) x[j] = static_cast<float>(j);
      DeviceBuffer<float> dx(x);
      ck.launch({.grid = {1}, .block = {128}}, dx, n);
      const std::vector<float> y = dx.to_host();
      for (uint32_t j = 0; j < n; ++j)
        if (y[j] != x[j] * (1.0f + 0.5f * static_cast<float>(i)) + 3.0f) {
          std::fprintf(stderr, "kaio_cache_child: app_%d gave %g at %u\n", i, static_cast<double>(y[j]), j);
          return 3;
        }
    }
  }
  if (flush) jit::flush_cache_writes();
  std::printf("app ok %d %d\n", kernels, served);
  std::fflush(stdout);
  return 0;
}

[[noreturn]] void writer_mode(int kernels) {
  setenv("KAIO_FORCE_RECOMPILE", "1", 1);
  std::thread filler([] {
    auto store = cache::Store::open(cache::default_dir());
    cache::Record r;
    r.name = "filler";
    r.arch = "sm_90";
    r.toolchain = "filler";
    for (uint64_t i = 0;; ++i) {
      r.cubin.assign(16384 + (i % 7) * 8192, static_cast<char>('a' + i % 26));
      const std::string bytes = cache::encode_record(r);
      const std::string key = "filler-" + std::to_string(i);
      store->update([&](cache::Txn& t) { cache::put_record(t, key, bytes, true, 2u << 20); });
    }
  });
  std::printf("ready\n");
  std::fflush(stdout);
  for (int i = 0;; i = (i + 1) % kernels) {
    jit::clear_memory_cache();
    jit::compile(test::numbered_kernel("victim", i), {.arch = "sm_90"});
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && !std::strcmp(argv[1], "compile"))
      return compile_mode(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
    if ((argc == 3 || argc == 4) && !std::strcmp(argv[1], "app"))
      return app_mode(std::atoi(argv[2]), argc == 3 || std::strcmp(argv[3], "noflush") != 0);
    if (argc == 3 && !std::strcmp(argv[1], "writer")) writer_mode(std::atoi(argv[2]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kaio_cache_child: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: kaio_cache_child compile ID SHARED DISTINCT | app KERNELS [flush|noflush] | writer KERNELS\n");
  return 2;
}
