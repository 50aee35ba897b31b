// The remote tier shared by "machines" (a cache directory each, separate processes) through
// a real redis-server on 127.0.0.1: compile once per fleet, tune once per fleet, many
// processes at once, read-only and unsigned settings. Offline (sm_90), no GPU needed.
#include <catch2/catch.hpp>

#include <future>
#include <set>

#include "kaio/cache/remote_record.h"
#include "kaio/kaio.h"
#include "remote_support.h"

#ifndef KAIO_TUNE_CHILD_REL
#error "KAIO_TUNE_CHILD_REL must name the kaio_tune_child executable"
#endif

using namespace kaio;
using namespace kaio::test;
using Catch::Matchers::Contains;

namespace {

std::string tool(const std::string& args) { return "'" + cache_tool_exe() + "' " + args; }

}  // namespace

TEST_CASE("two machines share one Redis: the second compiles nothing", "[jit][remote]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a, b;
  KeyFile key;
  constexpr int n = 12;

  const ChildResult first = remote_child("compile", "fleet", n, machine_env(a, redis.url(), key.path()));
  REQUIRE(first.exited);
  REQUIRE(first.code == 0);
  auto s1 = child_stats(first.out);
  CHECK(s1["builds"] == n);
  CHECK(s1["published"] == n);
  CHECK(s1["remote_misses"] == n);

  const ChildResult second = remote_child("compile", "fleet", n, machine_env(b, redis.url(), key.path()));
  REQUIRE(second.code == 0);
  auto s2 = child_stats(second.out);
  CHECK(s2["builds"] == 0);
  CHECK(s2["remote_hits"] == n);
  CHECK(s2["remote_bad"] == 0);
  // The same keys and the same cubins, byte for byte.
  const auto l1 = kernel_lines(first.out), l2 = kernel_lines(second.out);
  REQUIRE(l1.size() == size_t(n));
  REQUIRE(l2.size() == size_t(n));
  for (int i = 0; i < n; ++i) {
    CHECK(l1[i].key == l2[i].key);
    CHECK(l1[i].cubin == l2[i].cubin);
    CHECK(l2[i].from_cache == 1);
  }

  // The records were stored in machine B's LMDB: the next process there asks no one.
  const ChildResult third = remote_child("compile", "fleet", n, machine_env(b, redis.url(), key.path()));
  auto s3 = child_stats(third.out);
  CHECK(s3["builds"] == 0);
  CHECK(s3["disk_hits"] == n);
  CHECK(s3["remote_hits"] == 0);

  // The counters reach `kaio-cache stats`; the cache verifies clean.
  const auto stats = run_command(tool("--cache-dir '" + b.str() + "' stats --json"));
  REQUIRE(stats.status == 0);
  CHECK_THAT(stats.out, Contains("\"hits\": " + std::to_string(n)));
  CHECK(run_command(tool("--cache-dir '" + b.str() + "' verify")).status == 0);
}

TEST_CASE("two machines share tuning: the second reads the record and times nothing", "[jit][remote][tuner]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a, b;
  KeyFile key;
  auto env_of = [&](const TempDir& d) {
    Env e = machine_env(d, redis.url(), key.path());
    e["KAIO_INTERPRET"] = "1";
    e["KAIO_TUNE"] = "on";
    return e;
  };
  const std::string exe = beside_exe(KAIO_TUNE_CHILD_REL);
  const ChildResult first = run_child({exe}, env_of(a), 300);
  REQUIRE(first.code == 0);
  CHECK_THAT(first.out, Contains("tunings=1"));
  const ChildResult second = run_child({exe}, env_of(b), 300);
  INFO(second.describe());
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Contains("tunings=0 timed_runs=0 stored_hits=1"));
  // Both chose the same variant.
  auto variant = [](const std::string& out) { return out.substr(0, out.find(' ')); };
  CHECK(variant(first.out) == variant(second.out));
}

TEST_CASE("8 processes x 2 machines at once: each kernel compiled at most once per machine, none corrupt",
          "[jit][remote][robustness]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir machines[2];
  KeyFile key;
  constexpr int n = 16, per_machine = 8;
  // Generous timeouts: this test is about coordination on a loaded CI box, not outages.
  std::vector<std::future<ChildResult>> runs;
  for (int m = 0; m < 2; ++m)
    for (int p = 0; p < per_machine; ++p) {
      Env e = machine_env(machines[m], redis.url(), key.path());
      e["KAIO_REMOTE_CACHE_TIMEOUT_MS"] = "5000";
      e["KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS"] = "5000";
      e["KAIO_REMOTE_CACHE_CLAIM_MS"] = "60000";
      runs.push_back(std::async(std::launch::async, [e] { return remote_child("compile", "crowd", n, e, 240); }));
    }
  std::map<std::string, std::string> cubin_of;  // every process must agree
  double total_builds = 0;
  for (int m = 0; m < 2; ++m) {
    std::map<std::string, int> compiled;  // key -> processes of this machine that compiled it
    for (int p = 0; p < per_machine; ++p) {
      const ChildResult r = runs[size_t(m * per_machine + p)].get();
      INFO(r.describe());
      REQUIRE(r.exited);
      REQUIRE(r.code == 0);
      const auto lines = kernel_lines(r.out);
      REQUIRE(lines.size() == size_t(n));
      for (const auto& l : lines) {
        auto [it, fresh] = cubin_of.emplace(l.key, l.cubin);
        CHECK(it->second == l.cubin);
        if (!l.from_cache) ++compiled[l.key];
      }
      total_builds += child_stats(r.out)["builds"];
    }
    for (const auto& [k, times] : compiled) {
      INFO("machine " << m << " key " << k);
      CHECK(times <= 1);
    }
    CHECK(run_command(tool("--cache-dir '" + machines[m].str() + "' verify")).status == 0);
  }
  // Claims make it once per fleet when nothing times out.
  CHECK(total_builds >= n);
  CHECK(total_builds <= 2 * n);
  CHECK(cubin_of.size() == size_t(n));
}

TEST_CASE("without a key the tier is read-only; KAIO_REMOTE_CACHE_TRUST=unsigned publishes unsigned records",
          "[jit][remote]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a, b, c;
  KeyFile key;
  Env ro = machine_env(a, redis.url(), "");
  ro.erase("KAIO_REMOTE_CACHE_KEY_FILE");
  const ChildResult r1 = remote_child("compile", "ro", 4, ro);
  REQUIRE(r1.code == 0);
  CHECK(child_stats(r1.out)["published"] == 0);
  CHECK(redis.cli({"DBSIZE"}) == "0");

  Env unsafe = machine_env(b, redis.url(), "");
  unsafe.erase("KAIO_REMOTE_CACHE_KEY_FILE");
  unsafe["KAIO_REMOTE_CACHE_TRUST"] = "unsigned";
  const ChildResult r2 = remote_child("compile", "ro", 4, unsafe);
  REQUIRE(r2.code == 0);
  CHECK(child_stats(r2.out)["published"] == 4);

  // A fleet with a key never loads them.
  const ChildResult r3 = remote_child("compile", "ro", 4, machine_env(c, redis.url(), key.path()));
  REQUIRE(r3.code == 0);
  auto s3 = child_stats(r3.out);
  CHECK(s3["remote_bad"] == 4);
  CHECK(s3["remote_hits"] == 0);
  CHECK(s3["builds"] == 4);
  CHECK(occurrences(r3.err, "refused a kernel record") == 1);  // logged once, then counted
}

TEST_CASE("a wrong remote setting is one warning and no tier; the job goes on", "[jit][remote]") {
  TempDir a;
  Env e{{"KAIO_CACHE_DIR", a.str()}, {"KAIO_REMOTE_CACHE", "http://nowhere"}, {"KAIO_INTERPRET", "0"}};
  ChildResult r = remote_child("compile", "badurl", 3, e);
  REQUIRE(r.code == 0);
  CHECK(child_stats(r.out)["builds"] == 3);
  CHECK(occurrences(r.err, "remote cache disabled") == 1);
  e["KAIO_REMOTE_CACHE"] = "redis://127.0.0.1:1";
  e["KAIO_REMOTE_CACHE_KEY_FILE"] = "/nonexistent/key";
  r = remote_child("compile", "badurl2", 3, e);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Contains("KAIO_REMOTE_CACHE_KEY_FILE"));
  CHECK(child_stats(r.out)["errors"] == 0);  // no tier: nothing was asked
}

TEST_CASE("namespace, TTL and the size limit on the publishing side", "[jit][remote]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a, b, c;
  KeyFile key;
  Env e = machine_env(a, redis.url(), key.path());
  e["KAIO_REMOTE_CACHE_NAMESPACE"] = "teamA";
  e["KAIO_REMOTE_CACHE_TTL"] = "3600";
  const ChildResult r = remote_child("compile", "ns", 3, e);
  REQUIRE(r.code == 0);
  CHECK(child_stats(r.out)["published"] == 3);
  const auto lines = kernel_lines(r.out);
  REQUIRE(lines.size() == 3u);
  const std::string rkey = "teamA:k:" + lines[0].key;
  CHECK(redis.strlen_of(rkey) > 0);
  const long long ttl = std::atoll(redis.cli({"TTL", rkey}).c_str());
  CHECK(ttl > 0);
  CHECK(ttl <= 3600);

  // Another namespace shares nothing.
  const ChildResult other = remote_child("compile", "ns", 3, machine_env(b, redis.url(), key.path()));
  CHECK(child_stats(other.out)["builds"] == 3);
  CHECK(child_stats(other.out)["remote_hits"] == 0);

  // Records over the limit are not published (counted as dropped).
  Env small = machine_env(c, redis.url(), key.path());
  small["KAIO_REMOTE_CACHE_NAMESPACE"] = "small";
  small["KAIO_REMOTE_CACHE_MAX_BYTES"] = "1k";
  const ChildResult s = remote_child("compile", "big", 3, small);
  REQUIRE(s.code == 0);
  CHECK(child_stats(s.out)["published"] == 0);
  CHECK(child_stats(s.out)["dropped"] == 3);
  CHECK(redis.cli({"KEYS", "small:k:*"}).empty());
}
