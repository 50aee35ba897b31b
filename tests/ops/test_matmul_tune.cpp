// Tuning matmul across processes, in the interpreter with a fake timer (tune_child.cpp):
// a first process tunes and stores its choice, a second reads it with zero timed runs;
// KAIO_TUNE=off and force; a candidate that fails is recorded and skipped; a record of
// another variant table is tuned again, other ops' records are left alone; kaio-cache tune
// ls shows the records.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <regex>

#include "kaio/cache/store.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_tune.h"
#include "../child_process.h"
#include "../support.h"

using Catch::Matchers::Contains;
using kaio::test::run_child;
using kaio::test::TempDir;
namespace tn = kaio::tuner;

namespace {

std::map<std::string, std::string> parse(const std::string& out) {
  std::map<std::string, std::string> m;
  static const std::regex kv(R"((\w+)=(\S+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), kv); it != std::sregex_iterator(); ++it)
    m[(*it)[1]] = (*it)[2];
  return m;
}

std::map<std::string, std::string> child(const TempDir& dir, std::vector<std::string> args,
                                         std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), kaio::test::beside_exe(KAIO_TUNE_CHILD_REL));
  env["KAIO_CACHE_DIR"] = dir.str();
  env["KAIO_INTERPRET"] = "1";
  if (!env.count("KAIO_TUNE")) env["KAIO_TUNE"] = "on";
  const auto r = run_child(args, env, 300);
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.code == 0);
  auto m = parse(r.out);
  REQUIRE(m.count("variant"));
  CHECK(std::stod(m["err"]) < 1e-5);  // f32 SIMT against float64, relative to sum |a b|
  return m;
}

std::vector<std::pair<std::string, std::string>> tuning_entries(const TempDir& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  kaio::cache::Store::open(dir.path())->for_each("tuning", [&](std::string_view k, std::string_view v) {
    out.emplace_back(std::string(k), std::string(v));
  });
  return out;
}

}  // namespace

TEST_CASE("a tuned matmul choice persists: the next process does zero timed runs", "[tuner][matmul]") {
  TempDir dir;
  auto first = child(dir, {"--fastest", "simt_64x64x8_4x4"});
  CHECK(first["variant"] == "simt_64x64x8_4x4");
  CHECK(first["tunings"] == "1");
  CHECK(std::stoi(first["timed_runs"]) >= 30);  // three SIMT candidates, >= 10 runs each
  auto second = child(dir, {"--fastest", "simt_32x32x8_2x2"});  // the timer would now prefer another
  CHECK(second["variant"] == "simt_64x64x8_4x4");
  CHECK(second["tunings"] == "0");
  CHECK(second["timed_runs"] == "0");
  CHECK(second["stored_hits"] == "1");

  const auto entries = tuning_entries(dir);
  REQUIRE(entries.size() == 1);
  auto rec = tn::decode(entries[0].second);
  REQUIRE(rec);
  CHECK(rec->op == "matmul");
  CHECK(rec->table_hash == tn::matmul_table_hash());
  CHECK_THAT(rec->key, Contains("matmul|f32>f32|row/row|") && Contains("interpreter") && Contains("|m8|n8|k16|"));
  REQUIRE(rec->candidates.size() == 3);
  for (const auto& c : rec->candidates) CHECK(c.status == "ok");

  SECTION("another bucket tunes again") {
    auto other = child(dir, {"--fastest", "simt_32x32x8_2x2", "--m", "40"});
    CHECK(other["variant"] == "simt_32x32x8_2x2");
    CHECK(other["tunings"] == "1");
    CHECK(tuning_entries(dir).size() == 2);
  }
  SECTION("KAIO_TUNE=off takes the first variant that can serve, untimed") {
    auto off = child(dir, {"--fastest", "simt_32x32x8_2x2"}, {{"KAIO_TUNE", "off"}});
    // The child's problem: 5 x 7 x 9 f32, packed, row-major (simulated sm_90).
    std::string first;
    for (const auto& v : kaio::ops::matmul_variants())
      if (v.can_implement(kaio::ops::matmul_resolved({.m = 5, .n = 7, .k = 9}), 90)) {
        first = v.name;
        break;
      }
    CHECK(off["variant"] == first);
    CHECK(off["timed_runs"] == "0");
    CHECK(off["stored_hits"] == "0");
  }
  SECTION("KAIO_TUNE=force tunes again and replaces the record") {
    auto forced = child(dir, {"--fastest", "simt_32x32x8_2x2"}, {{"KAIO_TUNE", "force"}});
    CHECK(forced["variant"] == "simt_32x32x8_2x2");
    CHECK(forced["tunings"] == "1");
    auto after = child(dir, {"--fastest", "simt_64x64x8_4x4"});
    CHECK(after["variant"] == "simt_32x32x8_2x2");
    CHECK(after["timed_runs"] == "0");
  }
  SECTION("a record of another variant table is tuned again; other ops' records stay") {
    auto store = kaio::cache::Store::open(dir.path());
    tn::Record stale = *rec;
    stale.table_hash ^= 1;
    store->put("tuning", stale.key, tn::encode(stale));
    tn::Record foreign = *rec;
    foreign.op = "attention";
    foreign.key = "attention|f16|sm_90";
    foreign.table_hash = 42;
    store->put("tuning", foreign.key, tn::encode(foreign));
    auto retuned = child(dir, {"--fastest", "simt_128x128x8_8x8"});
    CHECK(retuned["tunings"] == "1");
    CHECK(retuned["variant"] == "simt_128x128x8_8x8");
    auto again = tn::decode(*store->get("tuning", rec->key));
    REQUIRE(again);
    CHECK(again->table_hash == tn::matmul_table_hash());
    auto kept = tn::decode(*store->get("tuning", foreign.key));
    REQUIRE(kept);
    CHECK(kept->table_hash == 42);
  }
}

TEST_CASE("a matmul candidate that fails is recorded and skipped", "[tuner][matmul]") {
  TempDir dir;
  auto r = child(dir, {"--fastest", "simt_64x64x8_4x4", "--fail", "simt_64x64x8_4x4"});
  CHECK(r["variant"] != "simt_64x64x8_4x4");
  CHECK(r["failed"] == "1");
  auto entries = tuning_entries(dir);
  REQUIRE(entries.size() == 1);
  auto rec = tn::decode(entries[0].second);
  REQUIRE(rec);
  CHECK(rec->winner == r["variant"]);
  bool found = false;
  for (const auto& c : rec->candidates)
    if (c.name == "simt_64x64x8_4x4") {
      found = true;
      CHECK_THAT(c.status, Contains("injected timing failure"));
    }
  CHECK(found);
}

TEST_CASE("kaio-cache tune ls shows the winner and the runner-up margin", "[tuner][tools]") {
  TempDir dir;
  child(dir, {"--fastest", "simt_32x32x8_2x2"});
  const auto r = kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' --cache-dir '" + dir.str() + "' tune ls");
  REQUIRE(r.status == 0);
  // Fake times: the fastest 1 ms, then 2 ms for the first other candidate timed
  // (simt_128x128x8_8x8, the first in the table that can serve 5 x 7 x 9): +100%.
  CHECK_THAT(r.out, Contains("WINNER") && Contains("RUNNER-UP") && Contains("simt_32x32x8_2x2") &&
                        Contains("simt_128x128x8_8x8") && Contains("+100.0%") && Contains("1 tuning entries"));
  const auto j = nlohmann::json::parse(
      kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' --cache-dir '" + dir.str() + "' tune ls --json").out);
  REQUIRE(j.size() == 1);
  CHECK(j[0].at("winner") == "simt_32x32x8_2x2");
  CHECK(j[0].at("runner_up_margin").get<double>() == Approx(1.0));
  CHECK(j[0].at("candidates").size() == 3);
  const auto h = kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' tune ls --help");
  CHECK(h.status == 0);
  CHECK_THAT(h.out, Contains("runner-up"));
}

// [gpu]: the key names the device (the interpreter, or a GPU).
TEST_CASE("matmul tuning keys bucket the shape and carry alignment", "[gpu][tuner][matmul]") {
  kaio::ops::MatmulProblem p{.m = 1000, .n = 1000, .k = 1000, .in = kaio::ir::Scalar::F16};
  const std::string k = tn::matmul_key(p);
  CHECK_THAT(k, Contains("matmul|f16>f32|row/row|") && Contains("|m1024|n1024|k1024|b1|align15"));
  p.m = 1023;
  CHECK(tn::matmul_key(p) == k);
  p.k = 1001;  // lda no longer a multiple of 8: another bucket (cp.async variants cannot serve it)
  CHECK(tn::matmul_key(p) != k);
  p.k = 1000;
  p.b = kaio::ops::MatLayout::ColMajor;
  CHECK(tn::matmul_key(p) != k);
}
