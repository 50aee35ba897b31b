// remote_cache: what the remote tier costs and what it saves, against a redis-server it
// starts on 127.0.0.1 (CPU only; no GPU needed).
//
// Per kernel (median over K distinct kernels, sm_90, one process):
//   compile      codegen + nvJitLink (a cold compile, nothing cached)
//   LMDB hit     jit::compile answered by the local disk cache (memory cache dropped)
//   remote hit   jit::compile with an empty local cache, answered by Redis: GETRANGE,
//                envelope + HMAC check, record decode, the write into LMDB
//   round trip   one PING on the same connection settings
// Target: remote hit <= 2 x (LMDB hit + round trip).
//
// Fleet: N processes (kaio_remote_child, a cache directory each, started together) compile
// the same K kernels against one Redis; total compiles and the time until every node is
// warm, beside the same fleet with no remote tier. Target: each kernel compiled once.
// Usage: remote_cache [--kernels K] [--nodes N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "kaio/cache/redis_client.h"
#include "kaio/cache/remote_record.h"
#include "kaio/jit/disk_cache_remote.h"
#include "kaio/kaio.h"
#include "../tests/cache/cache_kernels.h"
#include "../tests/child_process.h"
#include "../tests/redis_server.h"

#ifndef KAIO_REMOTE_CHILD_REL
#error "KAIO_REMOTE_CHILD_REL must name the kaio_remote_child executable"
#endif

using namespace kaio;
using Clock = std::chrono::steady_clock;

namespace {

// A temporary directory, removed at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kaio-bench-XXXXXX";
    path = mkdtemp(tmpl) ? tmpl : "/tmp/kaio-bench-fallback";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  const std::string& str() const { return path; }
};

std::string beside_exe(const std::string& rel) {
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / rel).lexically_normal().string();
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times jit::compile of kernels prefix_0..k-1 with `o`, the memory cache dropped first.
std::vector<double> time_compiles(const std::string& prefix, int k, const jit::CompileOptions& o) {
  std::vector<ir::Kernel> kernels;
  for (int i = 0; i < k; ++i) kernels.push_back(test::numbered_kernel(prefix, i));
  jit::clear_memory_cache();
  std::vector<double> ms;
  for (const auto& kern : kernels) {
    const auto t0 = Clock::now();
    jit::compile(kern, o);
    ms.push_back(ms_since(t0));
  }
  return ms;
}

struct Fleet {
  double builds = 0, remote_hits = 0, wall_s = 0, slowest_node_s = 0;
  int failed = 0;
};

Fleet run_fleet(const std::string& prefix, int nodes, int k, const std::string& url, const std::string& key_file) {
  std::vector<TempDir> dirs(static_cast<size_t>(nodes));
  std::vector<std::future<test::ChildResult>> runs;
  const auto t0 = Clock::now();
  for (int n = 0; n < nodes; ++n) {
    std::map<std::string, std::string> env{{"KAIO_CACHE_DIR", dirs[size_t(n)].str()}, {"KAIO_INTERPRET", "0"}};
    if (!url.empty()) {
      env["KAIO_REMOTE_CACHE"] = url;
      env["KAIO_REMOTE_CACHE_KEY_FILE"] = key_file;
      // Many processes on few cores: a loaded box, not an outage.
      env["KAIO_REMOTE_CACHE_TIMEOUT_MS"] = "2000";
      env["KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS"] = "2000";
    } else {
      env["KAIO_REMOTE_CACHE"] = "off";
    }
    runs.push_back(std::async(std::launch::async, [=] {
      return test::run_child({beside_exe(KAIO_REMOTE_CHILD_REL), "compile", prefix, std::to_string(k)}, env, 600);
    }));
  }
  Fleet f;
  for (auto& r : runs) {
    const test::ChildResult c = r.get();
    if (c.code != 0) ++f.failed;
    auto grab = [&](const char* name) {
      const auto at = c.out.find(std::string(" ") + name + "=");
      return at == std::string::npos ? 0.0 : std::atof(c.out.c_str() + at + std::strlen(name) + 2);
    };
    f.builds += grab("builds");
    f.remote_hits += grab("remote_hits");
    f.slowest_node_s = std::max(f.slowest_node_s, c.seconds);
  }
  f.wall_s = ms_since(t0) / 1e3;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int k = 64, nodes = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kernels")) k = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--nodes")) nodes = std::max(1, std::atoi(argv[i + 1]));
  }
  test::RedisServer redis;
  if (!redis.available() || !redis.running()) {
    std::fprintf(stderr, "remote_cache: %s\n", test::RedisServer::missing_message());
    return 77;
  }
  TempDir keydir, a, b;
  const std::string key_file = keydir.str() + "/remote.key";
  {
    FILE* f = std::fopen(key_file.c_str(), "w");
    std::fputs("bench-fleet-secret-0123456789abcdef\n", f);
    std::fclose(f);
  }
  setenv("KAIO_REMOTE_CACHE_KEY_FILE", key_file.c_str(), 1);
  unsetenv("KAIO_REMOTE_CACHE");
  setenv("KAIO_INTERPRET", "0", 1);

  // Machine A: cold compiles (publishing to Redis), then LMDB hits.
  const jit::CompileOptions on_a{.arch = "sm_90", .cache_dir = a.str(), .remote_cache = redis.url()};
  const std::vector<double> cold = time_compiles("bench", k, on_a);
  jit::flush_cache_writes();
  const std::vector<double> disk = time_compiles("bench", k, on_a);
  // Machine B: an empty LMDB, every kernel from Redis.
  const jit::CompileOptions on_b{.arch = "sm_90", .cache_dir = b.str(), .remote_cache = redis.url()};
  const std::vector<double> remote = time_compiles("bench", k, on_b);
  const cache::RemoteCounters rc = jit::remote::stats();

  auto tier = jit::remote::tier_for(redis.url());
  std::vector<double> rtt;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = Clock::now();
    tier->connection().command({"PING"});
    rtt.push_back(ms_since(t0));
  }
  // The parts of a remote hit: the fetch and envelope check, then the record decode.
  std::vector<double> get_ms, hmac_ms, decode_ms;
  for (int i = 0; i < k; ++i) {
    const std::string key = jit::cache_key(test::numbered_kernel("bench", i), "sm_90").bytes();
    std::string payload, why;
    auto t0 = Clock::now();
    tier->get(cache::kRemoteKernel, key, payload, &why);
    get_ms.push_back(ms_since(t0));
    t0 = Clock::now();
    const std::string mac = cache::hmac_sha256("bench-fleet-secret-0123456789abcdef", payload);
    hmac_ms.push_back(ms_since(t0));
    t0 = Clock::now();
    auto rec = cache::decode_record(payload);
    decode_ms.push_back(ms_since(t0));
  }
  const double c_ms = median(cold), d_ms = median(disk), r_ms = median(remote), p_ms = median(rtt);
  std::printf("per kernel (median of %d, sm_90; remote hits %llu of %d)\n", k, (unsigned long long)rc.hits, k);
  std::printf("  %-34s %10.3f ms\n", "compile (codegen + nvJitLink)", c_ms);
  std::printf("  %-34s %10.3f ms\n", "LMDB hit", d_ms);
  std::printf("  %-34s %10.3f ms\n", "remote hit (Redis -> LMDB -> load)", r_ms);
  std::printf("  %-34s %10.3f ms\n", "round trip (PING)", p_ms);
  std::printf("  %-34s %10.2f x  (target <= 2)\n", "remote hit / (LMDB hit + RTT)", r_ms / (d_ms + p_ms));
  std::printf("  parts: %-27s %10.3f ms\n", "GETRANGE + envelope check", median(get_ms));
  std::printf("  parts: %-27s %10.3f ms\n", "HMAC-SHA256 of the record", median(hmac_ms));
  std::printf("  parts: %-27s %10.3f ms\n", "record decode (checksum)", median(decode_ms));

  std::printf("\nfleet: %d nodes x %d kernels, one Redis, started together\n", nodes, k);
  std::printf("  %-22s %10s %12s %14s %16s %8s\n", "", "compiles", "per kernel", "remote hits", "time to warm s", "failed");
  const Fleet none = run_fleet("fleetA", nodes, k, "", "");
  std::printf("  %-22s %10.0f %12.2f %14.0f %16.2f %8d\n", "no remote tier", none.builds, none.builds / k,
              none.remote_hits, none.wall_s, none.failed);
  const Fleet shared = run_fleet("fleetB", nodes, k, redis.url(), key_file);
  std::printf("  %-22s %10.0f %12.2f %14.0f %16.2f %8d\n", "remote tier (Redis)", shared.builds, shared.builds / k,
              shared.remote_hits, shared.wall_s, shared.failed);
  return 0;
}
