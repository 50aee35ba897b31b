// The remote tier on a device: a cubin fetched from Redis by a second "machine" loads and
// runs (same results to the bit as the machine that compiled it), and a job whose remote
// tier is unreachable launches right. Where redis-server is missing only the second part
// runs. In the interpreter (gpu-interpreted) both run on the CPU.
#include <catch2/catch.hpp>

#include "kaio/jit/compile.h"
#include "kaio/ops/elementwise.h"
#include "remote_support.h"

using namespace kaio;
using namespace kaio::test;
using Catch::Matchers::Contains;

namespace {

// kaio_test_child compiles saxpy for this device's SM and launches it on n elements.
ChildResult saxpy_child(const Env& env, long n) {
  const std::string arch = jit::compile(ops::saxpy_kernel()).arch();
  return run_child({child_exe(), "--arch", arch, "--launch", std::to_string(n)}, env, 120);
}

double max_err(const std::string& out) {
  const auto at = out.find("max_rel_err");
  return at == std::string::npos ? 1e30 : std::stod(out.substr(at + 12));
}

}  // namespace

TEST_CASE("a job whose remote tier is unreachable launches right", "[gpu][remote]") {
  TempDir a;
  KeyFile key;
  Env e = machine_env(a, "redis://127.0.0.1:" + std::to_string(free_port()), key.path());
  e.erase("KAIO_INTERPRET");  // as the test run has it (device, or gpu-interpreted)
  const ChildResult r = saxpy_child(e, 100003);
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(max_err(r.out) < 1e-5);
  CHECK(occurrences(r.err, "not answering") == 1);
}

TEST_CASE("a cubin fetched from Redis by a second machine loads and runs", "[gpu][remote]") {
  RedisServer redis;
  KAIO_REQUIRE_REDIS(redis);
  TempDir a, b;
  KeyFile key;
  Env ea = machine_env(a, redis.url(), key.path()), eb = machine_env(b, redis.url(), key.path());
  ea.erase("KAIO_INTERPRET");
  eb.erase("KAIO_INTERPRET");
  const ChildResult cold = saxpy_child(ea, 100003);
  const ChildResult warm = saxpy_child(eb, 100003);
  INFO(cold.describe() << "\n" << warm.describe());
  REQUIRE(cold.code == 0);
  REQUIRE(warm.code == 0);
  const std::string k = cold.out.substr(0, 32);
  CHECK(cold.out.substr(32, 3) == " 0\n");
  CHECK(warm.out.substr(0, 35) == k + " 1\n");  // served from Redis on machine B
  // Same seed, same kernel: the outputs match to the bit.
  CHECK(cold.out.substr(35) == warm.out.substr(35));
  CHECK(max_err(warm.out) < 1e-5);
}
