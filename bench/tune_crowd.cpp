// tune --crowd N [--procs P]: many first calls at once from a cold cache. N threads (in
// each of P processes on one cache directory), each on its own stream, call matmul_auto
// bf16 -> f32 and bf16 -> bf16, softmax and rms_norm on four shapes, all starting together.
// Prints the tunings per bucket (summed over the processes: 1 each when tuning happens
// once), waits, claims taken over, noisy records and the wall time.
#include "tune_crowd.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kaio/cache/store.h"
#include "kaio/kaio.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/norm.h"
#include "kaio/ops/softmax.h"
#include "kaio/tuner/once.h"
#include "kaio/tuner/tuner.h"

using namespace kaio;

namespace {

struct CrowdShape {
  uint32_t m, n, k;
};

// Four shapes, four buckets each for bf16 -> f32 and bf16 -> bf16 (interpreter: small ones).
std::vector<CrowdShape> crowd_shapes() {
  if (jit::interpret_mode()) return {{8, 16, 16}, {24, 32, 16}, {40, 16, 32}, {72, 32, 32}};
  return {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {128, 4096, 4096}};
}

// One thread's work: every op on every shape, `rounds` times, on its own stream.
void crowd_thread(std::latch& start, int rounds) {
  jit::Stream stream;
  struct Bufs {
    DeviceBuffer<bfloat16> a, b, rows, out_rows, w;
    DeviceBuffer<float> c32;
    DeviceBuffer<bfloat16> c16;
  };
  std::vector<std::unique_ptr<Bufs>> bufs;
  for (const CrowdShape& s : crowd_shapes()) {
    auto b = std::make_unique<Bufs>(Bufs{DeviceBuffer<bfloat16>(size_t(s.m) * s.k), DeviceBuffer<bfloat16>(size_t(s.k) * s.n),
                                         DeviceBuffer<bfloat16>(size_t(s.m) * s.n), DeviceBuffer<bfloat16>(size_t(s.m) * s.n),
                                         DeviceBuffer<bfloat16>(s.n), DeviceBuffer<float>(size_t(s.m) * s.n),
                                         DeviceBuffer<bfloat16>(size_t(s.m) * s.n)});
    for (auto* x : {&b->a, &b->b, &b->rows, &b->w}) x->fill_bytes(0x3c);  // bf16 0x3c3c: about 0.0115
    bufs.push_back(std::move(b));
  }
  start.arrive_and_wait();
  const auto shapes = crowd_shapes();
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < shapes.size(); ++i) {
      const CrowdShape& s = shapes[i];
      Bufs& b = *bufs[i];
      ops::matmul_auto(b.a, b.b, b.c32, {.m = s.m, .n = s.n, .k = s.k, .in = ir::Scalar::BF16}, &stream);
      ops::matmul_auto(b.a, b.b, b.c16,
                       {.m = s.m, .n = s.n, .k = s.k, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16}, &stream);
      ops::softmax(ops::as_rows(b.rows, s.m, s.n), ops::as_rows(b.out_rows, s.m, s.n), &stream);
      ops::rms_norm(ops::as_rows(b.rows, s.m, s.n), ops::as_vector(b.w), ops::as_rows(b.out_rows, s.m, s.n), 1e-6f,
                    &stream);
    }
  stream.synchronize();
}

// Runs the crowd in this process; prints "bucket <tunings> <key>" lines and one "stats" line.
int crowd_process(int threads, int rounds) {
  std::latch start(threads);
  std::vector<std::thread> pool;
  std::vector<std::string> errors(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        crowd_thread(start, rounds);
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (!e.empty()) {
      std::fprintf(stderr, "tune --crowd: %s\n", e.c_str());
      return 1;
    }
  jit::flush_cache_writes();
  for (const auto& [key, n] : tuner::tunings_by_key()) std::printf("bucket %llu %s\n", (unsigned long long)n, key.c_str());
  const tuner::Stats s = tuner::stats();
  std::printf("stats tunings=%llu waits=%llu taken_over=%llu stored_hits=%llu meanwhile=%llu noisy=%llu retimed=%llu\n",
              (unsigned long long)s.tunings, (unsigned long long)s.waits, (unsigned long long)s.claims_taken_over,
              (unsigned long long)s.stored_hits, (unsigned long long)s.untimed_meanwhile,
              (unsigned long long)s.noisy_records, (unsigned long long)s.retimed);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int crowd_main(int threads, int procs, bool child, const char* self) {
  if (child) return crowd_process(threads, 3);
  if (!std::getenv("KAIO_CACHE_DIR")) {  // a cold cache of its own
    char tmpl[] = "/tmp/kaio-crowd-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::perror("tune --crowd: mkdtemp");
      return 1;
    }
    setenv("KAIO_CACHE_DIR", tmpl, 1);
  }
  const std::string dir = std::getenv("KAIO_CACHE_DIR");
  std::printf("crowd: %d process(es) x %d threads, each on its own stream: matmul_auto bf16->f32 and bf16->bf16, "
              "softmax, rms_norm on 4 shapes; cache %s\n",
              procs, threads, dir.c_str());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<FILE*> pipes;
  for (int p = 0; p < procs; ++p) {
    const std::string cmd = "'" + std::string(self) + "' --crowd " + std::to_string(threads) + " --crowd-child";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) {
      std::perror("tune --crowd: popen");
      return 1;
    }
    pipes.push_back(f);
  }
  std::map<std::string, uint64_t> per_bucket;
  std::map<std::string, uint64_t> totals;
  int failed = 0;
  for (FILE* f : pipes) {
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      std::istringstream in(line);
      std::string word;
      in >> word;
      if (word == "bucket") {
        uint64_t n = 0;
        std::string key;
        in >> n >> std::ws;
        std::getline(in, key);
        per_bucket[key] += n;
      } else if (word == "stats") {
        for (std::string kv; in >> kv;)
          if (auto eq = kv.find('='); eq != std::string::npos) totals[kv.substr(0, eq)] += std::stoull(kv.substr(eq + 1));
      }
    }
    failed += pclose(f) != 0;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%-8s %-6s %-30s %s\n", "tunings", "noisy", "winner", "bucket");
  uint64_t most = 0;
  auto store = cache::Store::open(dir);
  for (const auto& [key, n] : per_bucket) {
    std::optional<tuner::Record> rec;
    if (auto bytes = store->get("tuning", key)) rec = tuner::decode(*bytes);
    std::printf("%-8llu %-6s %-30s %s\n", (unsigned long long)n, rec && rec->noisy ? "yes" : "", rec ? rec->winner.c_str() : "-",
                key.c_str());
    most = std::max(most, n);
  }
  std::printf("\n%zu buckets, %llu tunings (%s), waits %llu, claims taken over %llu, noisy records %llu, retimed %llu; "
              "%.1f s; %d process(es) failed\n",
              per_bucket.size(), (unsigned long long)totals["tunings"],
              most <= 1 ? "each bucket once" : "SOME BUCKETS MORE THAN ONCE", (unsigned long long)totals["waits"],
              (unsigned long long)totals["taken_over"], (unsigned long long)totals["noisy"],
              (unsigned long long)totals["retimed"], secs, failed);
  // The probe that lets a noisy record be tuned again: after a second of quiet the GPU
  // should read idle (no: NVML is missing or another job runs).
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::printf("GPU idle now (NVML, what re-tunes noisy records): %s\n", tuner::gpu_idle() ? "yes" : "no");
  return failed || most > 1 ? 1 : 0;
}
