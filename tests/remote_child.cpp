// Started by the remote cache tests (and bench/remote_cache) as a "machine": one process
// with its own KAIO_CACHE_DIR, sharing KAIO_REMOTE_CACHE with others. Offline (sm_90).
//
//   kaio_remote_child compile PREFIX N     compiles kernels PREFIX_0..N-1 for sm_90; prints
//       "<key hex> <xxh3-64 of the cubin, hex> <from_cache 0|1>" per kernel
//   kaio_remote_child app PREFIX N         compiles each and launches it on 100 elements
//       (KAIO_INTERPRET=1 runs it on the CPU), checks the result (exit 3 when wrong)
// Both flush the cache writes (remote publishes included) and end with one line
//   "stats builds=B disk_hits=D remote_hits=H remote_misses=M remote_bad=X timeouts=T
//    errors=E skipped=S published=P dropped=Q seconds=W"
// With KAIO_TEST_SYNC_DIR and KAIO_TEST_SYNC_AFTER=K, after K kernels it creates
// DIR/ready and waits (at most 60 s) for DIR/go: the test breaks the network meanwhile.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/jit/disk_cache_remote.h"
#include "kaio/kaio.h"
#include "cache/cache_kernels.h"

using namespace kaio;

namespace {

void sync_point(int done) {
  const char* dir = std::getenv("KAIO_TEST_SYNC_DIR");
  const char* after = std::getenv("KAIO_TEST_SYNC_AFTER");
  if (!dir || !after || std::atoi(after) != done) return;
  const std::string d(dir);
  // The writes of the kernels so far are done (disk and remote) before the test acts on
  // Redis: a publish still in flight would land in a restarted server.
  jit::flush_cache_writes();
  std::fclose(std::fopen((d + "/ready").c_str(), "w"));
  for (int i = 0; i < 6000 && access((d + "/go").c_str(), F_OK) != 0; ++i) usleep(10000);
}

int run(const std::string& mode, const std::string& prefix, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    sync_point(i);
    const ir::Kernel k = test::numbered_kernel(prefix, i);
    if (mode == "compile") {
      jit::CompiledKernel ck = jit::compile(k, {.arch = "sm_90"});
      const std::string& cubin = ck.cubin();
      std::printf("%s %016llx %d\n", ck.key().hex().c_str(),
                  static_cast<unsigned long long>(XXH3_64bits(cubin.data(), cubin.size())), ck.from_cache() ? 1 : 0);
      continue;
    }
    jit::CompiledKernel ck = jit::compile(k);
    constexpr uint32_t len = 100;
    std::vector<float> x(len);
    for (uint32_t j = 0; j < len; ++j) x[j] = static_cast<float>(j) - 7.5f;
    DeviceBuffer<float> dx(x);
    ck.launch({.grid = {1}, .block = {128}}, dx, len);
    const std::vector<float> y = dx.to_host();
    for (uint32_t j = 0; j < len; ++j) {
      const double want = double(x[j]) * (1.0 + 0.5 * i) + 3.0;
      if (std::abs(double(y[j]) - want) > 1e-5 * (1.0 + std::abs(want))) {
        std::fprintf(stderr, "kaio_remote_child: %s_%d gave %g at %u, want %g\n", prefix.c_str(), i, double(y[j]), j, want);
        return 3;
      }
    }
  }
  jit::flush_cache_writes();
  const jit::CompileStats s = jit::compile_stats();
  const cache::RemoteCounters r = jit::remote::stats();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("stats builds=%llu disk_hits=%llu remote_hits=%llu remote_misses=%llu remote_bad=%llu timeouts=%llu "
              "errors=%llu skipped=%llu published=%llu dropped=%llu seconds=%.3f\n",
              (unsigned long long)s.builds, (unsigned long long)s.disk_hits, (unsigned long long)r.hits,
              (unsigned long long)r.misses, (unsigned long long)r.bad, (unsigned long long)r.timeouts,
              (unsigned long long)r.errors, (unsigned long long)r.skipped, (unsigned long long)r.published,
              (unsigned long long)r.dropped, secs);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && (!std::strcmp(argv[1], "compile") || !std::strcmp(argv[1], "app"))) {
    try {
      return run(argv[1], argv[2], std::atoi(argv[3]));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kaio_remote_child: %s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "usage: kaio_remote_child compile|app PREFIX N\n");
  return 2;
}
