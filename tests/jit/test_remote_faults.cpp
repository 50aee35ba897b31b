// "Never a failed job": the remote tier's faults caused for real against a redis-server
// (killed, paused with SIGSTOP, restarted, full, a port with nothing listening, a server
// that answers garbage) and hostile records planted with redis-cli. Every job must exit 0
// within its time limit, launch its kernels right (the interpreter) and count what happened.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "kaio/cache/record.h"
#include "kaio/cache/remote_record.h"
#include "kaio/kaio.h"
#include "../cache/cache_kernels.h"
#include "remote_support.h"

using namespace kaio;
using namespace kaio::test;
using Catch::Matchers::Contains;

namespace {

constexpr double kLimitS = 120;  // a job that hangs is killed and fails the test

Env app_env(const TempDir& cache, const std::string& url, const KeyFile& key) {
  Env e = machine_env(cache, url, key.path());
  e["KAIO_INTERPRET"] = "1";
  return e;
}

// A job's promise: it ended by itself, exit 0, every kernel compiled or served.
void check_job(const ChildResult& r) {
  INFO(r.describe());
  CHECK_FALSE(r.timed_out);
  REQUIRE(r.exited);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("stats builds=") != std::string::npos);
}

// A child stopped at its sync point (KAIO_TEST_SYNC_AFTER), released by go().
class SyncedChild {
 public:
  SyncedChild(const std::string& mode, const std::string& prefix, int n, Env env, int after) {
    env["KAIO_TEST_SYNC_DIR"] = dir_.str();
    env["KAIO_TEST_SYNC_AFTER"] = std::to_string(after);
    run_ = std::async(std::launch::async, [=] { return remote_child(mode, prefix, n, env, kLimitS); });
  }
  bool wait_ready() {
    for (int i = 0; i < 6000; ++i) {
      if (std::filesystem::exists(dir_.path() / "ready")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  ChildResult go() {
    std::ofstream(dir_.path() / "go") << "go";
    return run_.get();
  }

 private:
  TempDir dir_;
  std::future<ChildResult> run_;
};

// A TCP server that answers every connection with random bytes (not Redis at all).
class GarbageServer {
 public:
  GarbageServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
    port_ = ntohs(a.sin_port);
    listen(fd_, 64);
    thread_ = std::thread([this] {
      std::mt19937 rng(99);
      while (!stop_) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        char junk[512];
        for (auto& ch : junk) ch = static_cast<char>(rng());
        junk[0] = '$';  // looks like a bulk reply, then is not
        (void)!write(c, junk, sizeof junk);
        close(c);
      }
    });
  }
  ~GarbageServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    const int c = socket(AF_INET, SOCK_STREAM, 0);  // wakes accept()
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    close(c);
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

TEST_CASE("remote fault: a port with nothing listening", "[jit][remote][faults]") {
  TempDir a;
  KeyFile key;
  const std::string url = "redis://127.0.0.1:" + std::to_string(free_port());
  const ChildResult r = remote_child("app", "nolisten", 6, app_env(a, url, key), kLimitS);
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["builds"] == 6);
  CHECK(s["errors"] >= 1);
  CHECK(s["skipped"] >= 1);  // the breaker stopped asking
  CHECK(s["remote_hits"] == 0);
  CHECK(occurrences(r.err, "not answering") == 1);  // one warning for the outage
}

TEST_CASE("remote fault: Redis paused (SIGSTOP): timeouts, the breaker opens, jobs go on", "[jit][remote][faults]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a;
  KeyFile key;
  redis.pause();
  Env e = app_env(a, redis.url(), key);
  e["KAIO_REMOTE_CACHE_TIMEOUT_MS"] = "30";
  e["KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS"] = "30";
  const ChildResult r = remote_child("app", "paused", 8, e, kLimitS);
  redis.resume();
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["builds"] == 8);
  CHECK(s["timeouts"] >= 1);
  CHECK(s["skipped"] >= 1);
  CHECK(occurrences(r.err, "not answering") == 1);
}

TEST_CASE("remote fault: Redis killed mid-run", "[jit][remote][faults]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a;
  KeyFile key;
  SyncedChild child("app", "killed", 10, app_env(a, redis.url(), key), 4);
  REQUIRE(child.wait_ready());
  redis.kill9();
  const ChildResult r = child.go();
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["builds"] == 10);
  CHECK(s["errors"] + s["timeouts"] >= 1);
  CHECK(occurrences(r.err, "not answering") == 1);
}

TEST_CASE("remote fault: Redis restarted mid-run (empty): the tier reconnects and publishes again",
          "[jit][remote][faults]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a;
  KeyFile key;
  Env e = app_env(a, redis.url(), key);
  e["KAIO_REMOTE_CACHE_RETRY_MS"] = "20";
  SyncedChild child("app", "restarted", 12, e, 4);
  REQUIRE(child.wait_ready());
  redis.restart();
  REQUIRE(redis.running());
  REQUIRE(redis.cli({"DBSIZE"}) == "0");
  const ChildResult r = child.go();
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["builds"] == 12);
  CHECK(occurrences(r.err, "not answering") <= 1);
  // Records compiled after the restart reached the new server.
  CHECK(std::atoi(redis.cli({"DBSIZE"}).c_str()) >= 1);
}

TEST_CASE("remote fault: Redis full (noeviction refuses writes; allkeys-lru evicts)", "[jit][remote][faults]") {
  KeyFile key;
  SECTION("noeviction") {
    RedisServer redis({"--maxmemory-policy", "noeviction"});
    KAIO_REQUIRE_REDIS(redis);
    // Full: whatever it holds is over a 1-byte limit, so every write is refused (OOM).
    REQUIRE(redis.cli({"CONFIG", "SET", "maxmemory", "1"}) == "OK");
    TempDir a;
    const ChildResult r = remote_child("app", "full", 6, app_env(a, redis.url(), key), kLimitS);
    check_job(r);
    auto s = child_stats(r.out);
    CHECK(s["builds"] == 6);
    // Refused writes are counted as dropped (Redis very rarely lets one through while it
    // frees memory: the count is not pinned).
    CHECK(s["dropped"] >= 1);
    CHECK(s["published"] + s["dropped"] == 6);
    CHECK(s["errors"] >= 1);
    CHECK(occurrences(r.err, "refused a") == 1);  // one warning, whatever it refused first
  }
  SECTION("allkeys-lru") {
    RedisServer redis({"--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"});
    KAIO_REQUIRE_REDIS(redis);
    for (int i = 0; i < 40; ++i) redis.plant("ballast:" + std::to_string(i), std::string(64 << 10, 'b'));
    TempDir a;
    const ChildResult r = remote_child("app", "lru", 6, app_env(a, redis.url(), key), kLimitS);
    check_job(r);
    auto s = child_stats(r.out);
    CHECK(s["builds"] == 6);
    CHECK(s["published"] == 6);  // room is made by evicting the ballast
  }
}

TEST_CASE("remote fault: a server that answers garbage", "[jit][remote][faults]") {
  GarbageServer garbage;
  TempDir a;
  KeyFile key;
  const ChildResult r = remote_child("app", "garbage", 5, app_env(a, garbage.url(), key), kLimitS);
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["builds"] == 5);
  CHECK(s["remote_hits"] == 0);
  CHECK(s["errors"] + s["timeouts"] >= 1);
}

TEST_CASE("hostile records planted with redis-cli are never loaded; the kernels still run right",
          "[jit][remote][faults]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  KeyFile key;
  const std::string ns = cache::default_remote_namespace();
  auto key_of = [](int i) { return jit::cache_key(numbered_kernel("hostile", i), "sm_90").bytes(); };
  auto good_record = [&](int i, const std::string& arch) {
    // The kernel compiled for real (for `arch`), as an honest node would publish it.
    jit::CompiledKernel ck = jit::compile(numbered_kernel("hostile", i), {.arch = arch, .use_cache = false});
    cache::Record r;
    r.name = "hostile_" + std::to_string(i);
    r.arch = arch;
    r.toolchain = jit::toolchain_id();
    r.cubin = ck.cubin();
    r.ptx = ck.ptx();
    return cache::encode_record(r);
  };
  auto plant = [&](int i, const std::string& bytes) {
    REQUIRE(redis.plant(cache::remote_key(ns, cache::kRemoteKernel, key_of(i)), bytes));
  };
  std::mt19937 rng(5);
  std::string junk(4096, '\0');
  for (auto& c : junk) c = static_cast<char>(rng());
  const std::string sealed = cache::seal(cache::kRemoteKernel, key_of(1), good_record(1, "sm_90"), kFleetSecret);
  cache::Record big;
  big.name = "hostile_2";
  big.arch = "sm_90";
  big.toolchain = jit::toolchain_id();
  big.cubin = std::string(200 << 10, 'x');
  std::string flipped = good_record(5, "sm_90");
  flipped[flipped.size() / 2] ^= 1;  // checksum no longer matches; then signed as if honest

  plant(0, cache::seal(cache::kRemoteKernel, key_of(0), good_record(0, "sm_90"), "another-secret-0123456789"));
  plant(1, sealed.substr(0, sealed.size() - 40));                                                 // truncated
  plant(2, cache::seal(cache::kRemoteKernel, key_of(2), cache::encode_record(big), kFleetSecret));  // oversize
  plant(3, cache::seal(cache::kRemoteKernel, key_of(3), good_record(3, "sm_80"), kFleetSecret));   // another arch
  plant(4, junk);                                                                                  // random bytes
  plant(5, cache::seal(cache::kRemoteKernel, key_of(5), flipped, kFleetSecret));                   // bad checksum
  plant(6, cache::seal(cache::kRemoteKernel, key_of(6), good_record(6, "sm_90"), ""));             // unsigned
  // Another kernel's honest record copied under this key.
  plant(7, cache::seal(cache::kRemoteKernel, key_of(8), good_record(8, "sm_90"), kFleetSecret));
  constexpr int planted = 8;

  TempDir a;
  Env e = app_env(a, redis.url(), key);
  e["KAIO_REMOTE_CACHE_MAX_BYTES"] = "128k";
  const ChildResult r = remote_child("app", "hostile", planted, e, kLimitS);
  check_job(r);
  auto s = child_stats(r.out);
  CHECK(s["remote_hits"] == 0);
  CHECK(s["remote_bad"] == planted);
  CHECK(s["builds"] == planted);
  CHECK(occurrences(r.err, "refused a kernel record") == 1);

  // The compiles replaced the hostile records with good ones: a second machine loads them.
  TempDir b;
  const ChildResult r2 = remote_child("app", "hostile", planted, app_env(b, redis.url(), key), kLimitS);
  check_job(r2);
  auto s2 = child_stats(r2.out);
  CHECK(s2["remote_hits"] == planted);
  CHECK(s2["builds"] == 0);
}
