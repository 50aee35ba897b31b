// The matmul engine interface: every table row is well formed for its engine, a broken row
// is refused with the rule it breaks, and every engine answers each part of the interface.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_engine.h"

using namespace kaio;
using ops::MatmulEngine;

TEST_CASE("matmul engines: every row is valid for its engine, and names each field it uses", "[ops][matmul][engine]") {
  std::set<std::string> engines;
  for (const ops::MatmulVariant& v : ops::matmul_variants()) {
    const ops::detail::MatmulEngineDef& e = ops::detail::engine(v.engine);
    INFO(v.str());
    std::string why;
    CHECK(e.valid(v, &why));
    CHECK(why.empty());
    CHECK(v.threads() == e.threads(v));
    CHECK(v.threads() % 32 == 0);
    CHECK(v.threads() <= 1024);
    CHECK(v.str().find(e.name) != std::string::npos);
    engines.insert(e.name);
  }
  CHECK(engines == std::set<std::string>{"Simt", "SimtDb", "Mma", "MmaAsync", "Wgmma", "Gemv"});
}

TEST_CASE("matmul engines: a row that breaks its engine's rules is refused, naming the rule", "[ops][matmul][engine]") {
  auto refused = [](const ops::MatmulVariant& v, const char* rule) {
    std::string why;
    CHECK_FALSE(ops::detail::engine(v.engine).valid(v, &why));
    CHECK_THAT(why, Catch::Contains(rule));
  };
  refused({.name = "w", .engine = MatmulEngine::Wgmma, .bm = 128, .bn = 128, .bk = 64, .consumer_m = 64, .stages = 9}, "2 to 8 stages");
  refused({.name = "w", .engine = MatmulEngine::Wgmma, .bm = 96, .bn = 128, .bk = 64, .consumer_m = 64, .stages = 4}, "multiples of 64");
  refused({.name = "w", .engine = MatmulEngine::Wgmma, .bm = 128, .bn = 128, .bk = 64, .consumer_m = 64, .stages = 4, .pingpong = true},
          "ping-pong");
  refused({.name = "a", .engine = MatmulEngine::MmaAsync, .bm = 64, .bn = 64, .bk = 32, .warp_m = 32, .warp_n = 32, .stages = 9}, "2 to 8 stages");
  refused({.name = "g", .engine = MatmulEngine::Gemv, .bm = 1, .bk = 8, .warps = 8, .lanes = 3}, "lanes dividing 32");
  refused({.name = "s", .engine = MatmulEngine::Simt, .bm = 8, .bn = 8, .bk = 8, .thread_m = 4, .thread_n = 4}, "whole warps");
}

TEST_CASE("matmul engines: launch configs and declared configs come from the engine", "[ops][matmul][engine]") {
  const ops::MatmulProblem p{.m = 300, .n = 200, .k = 64, .in = ir::Scalar::F16, .batch = 2};
  for (const ops::MatmulVariant& v : ops::matmul_variants()) {
    INFO(v.name);
    const jit::LaunchConfig lc = ops::matmul_launch_config(v, p, nullptr);
    CHECK(lc.block.x == v.threads());
    if (v.engine == MatmulEngine::Wgmma) {  // persistent: no more blocks than SMs (or work items)
      CHECK(lc.grid.x >= 1);
      CHECK(lc.cluster.x == v.cluster);
    } else if (v.engine != MatmulEngine::Gemv) {
      CHECK(lc.grid.x == (p.n + v.bn - 1) / v.bn);
      CHECK(lc.grid.y == (p.m + v.bm - 1) / v.bm);
      CHECK(lc.grid.z == p.batch);
    }
  }
  // every declared config names its own row and builds
  std::vector<ops::MatmulConfig> declared;
  for (uint32_t i = 0; i < ops::matmul_variants().size(); ++i) {
    const ops::MatmulVariant& v = ops::matmul_variants()[i];
    const size_t before = declared.size();
    ops::detail::engine(v.engine).declare(i, v, declared);
    CHECK(declared.size() > before);
    for (size_t j = before; j < declared.size(); ++j) CHECK(declared[j].variant == i);
  }
  CHECK(declared.size() == ops::matmul_family().config_count());
}
