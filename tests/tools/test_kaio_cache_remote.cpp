// `kaio-cache remote status|push|pull` and `kaio-precompile --push` run as subprocesses
// against a real redis-server: round trips between machines (cache directories).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "../jit/remote_support.h"

using namespace kaio::test;
using Catch::Matchers::Contains;

namespace {

ChildResult cache_tool(const TempDir& cache, std::vector<std::string> args, const Env& env) {
  args.insert(args.begin(), {cache_tool_exe(), "--cache-dir", cache.str()});
  return run_child(args, env, 120);
}

Env tool_env(const std::string& url, const KeyFile& key) {
  return {{"KAIO_REMOTE_CACHE", url}, {"KAIO_REMOTE_CACHE_KEY_FILE", key.path()}, {"KAIO_INTERPRET", "0"}};
}

int number_before(const std::string& out, const std::string& words) {
  std::smatch m;
  const std::regex re("(\\d+) " + words);
  return std::regex_search(out, m, re) ? std::stoi(m[1]) : -1;
}

}  // namespace

TEST_CASE("kaio-cache remote and kaio-precompile --push have --help", "[tools][remote]") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"remote", "--help"}, {"remote", "status", "--help"}, {"remote", "push", "--help"},
        {"remote", "pull", "--help"}}) {
    std::vector<std::string> argv{cache_tool_exe()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ChildResult r = run_child(argv, {}, 30);
    INFO(r.describe());
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("Usage"));
  }
  const ChildResult p = run_child({beside_exe(KAIO_PRECOMPILE_REL), "--help"}, {}, 30);
  CHECK(p.code == 0);
  CHECK_THAT(p.out, Contains("--push"));
}

TEST_CASE("remote push then pull carries a cache to another machine; status counts the namespace", "[tools][remote]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  KeyFile key;
  TempDir a, b;
  // Machine A compiles with no remote tier at all.
  const ChildResult built = remote_child("compile", "pushed", 6, {{"KAIO_CACHE_DIR", a.str()}, {"KAIO_INTERPRET", "0"}});
  REQUIRE(built.code == 0);
  const Env env = tool_env(redis.url(), key);

  ChildResult filtered = cache_tool(a, {"remote", "push", "--arch", "sm_80"}, env);
  INFO(filtered.describe());
  REQUIRE(filtered.code == 0);
  CHECK(number_before(filtered.out, "skipped") == 6);
  CHECK(redis.cli({"DBSIZE"}) == "0");

  ChildResult push = cache_tool(a, {"remote", "push"}, env);
  INFO(push.describe());
  REQUIRE(push.code == 0);
  CHECK_THAT(push.out, Contains("published 6 records"));
  push = cache_tool(a, {"remote", "push"}, env);
  CHECK(number_before(push.out, "already there") == 6);

  ChildResult status = cache_tool(a, {"remote", "status", "--json"}, env);
  INFO(status.describe());
  REQUIRE(status.code == 0);
  const auto j = nlohmann::json::parse(status.out);
  CHECK(j["reachable"] == true);
  CHECK(j["kernel_records"] == 6);
  CHECK(j["signed"] == true);

  ChildResult pull = cache_tool(b, {"remote", "pull"}, env);
  INFO(pull.describe());
  REQUIRE(pull.code == 0);
  CHECK_THAT(pull.out, Contains("pulled 6 records"));
  // Machine B now compiles nothing, without asking Redis.
  const ChildResult used = remote_child("compile", "pushed", 6, {{"KAIO_CACHE_DIR", b.str()}, {"KAIO_INTERPRET", "0"}});
  auto s = child_stats(used.out);
  CHECK(s["builds"] == 0);
  CHECK(s["disk_hits"] == 6);
  CHECK(cache_tool(b, {"verify"}, env).code == 0);

  // Pulling with another key refuses every record.
  KeyFile other("another-fleet-secret-0123456789");
  TempDir c;
  pull = cache_tool(c, {"remote", "pull"}, tool_env(redis.url(), other));
  CHECK(number_before(pull.out, "refused") == 6);
  CHECK_THAT(pull.out, Contains("pulled 0 records"));
}

TEST_CASE("remote status on a dead port exits 1 and says so; push without a key is refused", "[tools][remote]") {
  KeyFile key;
  TempDir a;
  const std::string dead = "redis://127.0.0.1:" + std::to_string(free_port());
  const ChildResult r = cache_tool(a, {"remote", "status"}, tool_env(dead, key));
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Contains("reachable  no"));

  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  REQUIRE(remote_child("compile", "nokey", 2, {{"KAIO_CACHE_DIR", a.str()}, {"KAIO_INTERPRET", "0"}}).code == 0);
  const ChildResult p = cache_tool(a, {"remote", "push", "--url", redis.url()}, {{"KAIO_INTERPRET", "0"}});
  CHECK(p.code == 1);
  CHECK_THAT(p.err, Contains("read-only"));
}

TEST_CASE("kaio-precompile --push: a build box publishes a manifest, a node compiles nothing", "[tools][remote][precompile]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  KeyFile key;
  TempDir box, node, m;
  const std::string manifest = m.str() + "/manifest.json";
  std::ofstream(manifest) << R"({"families": ["saxpy"], "matmul": []})";
  const Env env = {{"KAIO_REMOTE_CACHE_KEY_FILE", key.path()}, {"KAIO_INTERPRET", "0"}};
  const std::string exe = beside_exe(KAIO_PRECOMPILE_REL);
  const ChildResult pushed = run_child(
      {exe, "-m", manifest, "--arch", "sm_80,sm_90", "--cache-dir", box.str(), "--push", "--remote", redis.url()}, env, 300);
  INFO(pushed.describe());
  REQUIRE(pushed.code == 0);
  static const std::regex summary(R"((\d+) kernels for [^:]+: compiled (\d+))");
  std::smatch sm;
  REQUIRE(std::regex_search(pushed.out, sm, summary));
  const int kernels = std::stoi(sm[1]);
  CHECK(kernels > 0);
  CHECK_THAT(pushed.out, Contains("push: published"));
  CHECK(std::atoi(redis.cli({"DBSIZE"}).c_str()) == kernels);

  // A node with the remote tier: every kernel of the manifest comes from Redis.
  Env node_env = env;
  node_env["KAIO_REMOTE_CACHE"] = redis.url();
  // Generous timeouts: a Redis reply delayed past the default (50 ms) on a loaded machine
  // would be a local compile, which this test counts.
  node_env["KAIO_REMOTE_CACHE_TIMEOUT_MS"] = "5000";
  node_env["KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS"] = "5000";
  const ChildResult warm = run_child({exe, "-m", manifest, "--arch", "sm_80,sm_90", "--cache-dir", node.str()}, node_env, 300);
  INFO(warm.describe());
  REQUIRE(warm.code == 0);
  REQUIRE(std::regex_search(warm.out, sm, summary));
  CHECK(std::stoi(sm[2]) == 0);

  // --push without a remote tier fails before compiling.
  const ChildResult none = run_child({exe, "-m", manifest, "--cache-dir", node.str(), "--push"}, {{"KAIO_INTERPRET", "0"}}, 60);
  CHECK(none.code == 2);
  CHECK_THAT(none.err, Contains("remote"));
}
