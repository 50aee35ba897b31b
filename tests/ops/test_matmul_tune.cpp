// Tuning matmul across processes, in the interpreter with a fake timer (tune_child.cpp):
// a first process tunes and stores its choice, a second reads it with zero timed runs;
// KAIO_TUNE=off and force; a candidate that fails is recorded and skipped; a record of
// another variant table is tuned again, other ops' records are left alone; kaio-cache tune
// ls shows the records.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <regex>
#include <thread>

#include "kaio/cache/store.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_tune.h"
#include "kaio/tuner/once.h"
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

// Tune once, with real matmul candidates in the interpreter and a fake timer.
namespace {

std::vector<std::string> claims_in(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& [k, v] : tuning_entries(dir))
    if (tn::is_claim_key(k)) out.push_back(v);
  return out;
}

kaio::test::ChildResult raw_child(const TempDir& dir, std::vector<std::string> args,
                                  std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), kaio::test::beside_exe(KAIO_TUNE_CHILD_REL));
  env["KAIO_CACHE_DIR"] = dir.str();
  env["KAIO_INTERPRET"] = "1";
  env["KAIO_TUNE"] = "on";
  return run_child(args, env, 300);
}

}  // namespace

TEST_CASE("matmul_auto from 16 threads on 4 buckets: 4 tunings, every call correct", "[tuner][matmul][concurrency]") {
  TempDir dir;
  // Each thread calls the four buckets in its own order; the child checks every call
  // against float64 (err) and counts tunings.
  auto r = child(dir, {"--threads", "16", "--m", "5,17,40,70", "--slow", "5", "--fastest", "simt_32x32x8_2x2"});
  CHECK(r["tunings"] == "4");
  CHECK(r["fallbacks"] == "0");
  CHECK(r["meanwhile"] == "0");
  CHECK(std::stoi(r["waits"]) <= 15 * 4);
  CHECK(claims_in(dir).empty());
  CHECK(tuning_entries(dir).size() == 4);
  for (const char* m : {"5", "17", "40", "70"}) CHECK(r[std::string("variant_m") + m] == "simt_32x32x8_2x2");
}

TEST_CASE("4 processes on one cache: each bucket tuned once, the others read its record", "[tuner][matmul][concurrency]") {
  TempDir dir;
  const std::vector<std::string> fastest = {"simt_32x32x8_2x2", "simt_64x64x8_4x4", "simt_128x128x8_8x8",
                                            "simt_32x32x8_2x2"};
  std::vector<std::map<std::string, std::string>> out(4);
  std::vector<std::thread> procs;
  for (int i = 0; i < 4; ++i)
    procs.emplace_back([&, i] {
      // Slow timings: the four processes start while the first tunings run.
      const auto r = raw_child(dir, {"--m", i % 2 ? "5,40" : "40,5", "--slow", "100", "--fastest", fastest[size_t(i)]});
      if (r.exited && r.code == 0) out[size_t(i)] = parse(r.out);
    });
  for (auto& p : procs) p.join();
  int tunings = 0;
  for (const auto& o : out) {
    REQUIRE(o.count("tunings"));
    CHECK(std::stod(o.at("err")) < 1e-5);
    tunings += std::stoi(o.at("tunings"));
    // Each bucket: tuned here, or read from the record (after a wait or not).
    CHECK(std::stoi(o.at("tunings")) + std::stoi(o.at("stored_hits")) == 2);
    // One choice per bucket: the tuning process's (each process's timer prefers another).
    CHECK(o.at("variant_m5") == out[0].at("variant_m5"));
    CHECK(o.at("variant_m40") == out[0].at("variant_m40"));
  }
  CHECK(tunings == 2);
  CHECK(claims_in(dir).empty());
  CHECK(tuning_entries(dir).size() == 2);
}

TEST_CASE("a process killed in the middle of a tuning: another takes its claim over and finishes",
          "[tuner][matmul][concurrency]") {
  TempDir dir;
  // The child kills itself with SIGKILL when it times simt_32x32x8_2x2: its claim stays.
  const auto killed = raw_child(dir, {"--hang", "simt_32x32x8_2x2"}, {{"KAIO_TUNE_CLAIM_SECONDS", "600"}});
  INFO(killed.describe());
  REQUIRE(killed.signal == SIGKILL);
  const auto left = claims_in(dir);
  REQUIRE(left.size() == 1);
  auto claim = tn::decode_claim(left[0]);
  REQUIRE(claim);
  CHECK(tuning_entries(dir).size() == 1);  // the claim, no record

  // kaio-cache tune ls shows the tuning in progress, and that its owner is gone.
  const auto ls = kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' --cache-dir '" + dir.str() + "' tune ls");
  CHECK_THAT(ls.out, Contains("tunings in progress") && Contains("pid " + std::to_string(claim->pid)) &&
                         Contains("is gone") && Contains("0 tuning entries"));
  const auto j = nlohmann::json::parse(
      kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' --cache-dir '" + dir.str() + "' tune ls --json").out);
  REQUIRE(j.size() == 1);
  CHECK(j[0].at("claim").at("pid") == claim->pid);

  SECTION("on this host its dead pid frees the claim at once") {
    auto r = child(dir, {"--fastest", "simt_64x64x8_4x4"});
    CHECK(r["tunings"] == "1");
    CHECK(r["taken_over"] == "1");
    CHECK(r["variant"] == "simt_64x64x8_4x4");
  }
  SECTION("seen from another pid namespace, only its deadline frees it") {
    claim->pid_ns = "pid:[1]";  // as a process of another container would have written it
    // Far enough ahead that the child (an ASan build on a loaded machine starts slowly) finds
    // the claim alive and waits for it.
    claim->deadline_ms = tn::now_ms() + 8000;
    kaio::cache::Store::open(dir.path())->put("tuning", tn::claim_key(claim->key), tn::encode_claim(*claim));
    auto r = child(dir, {"--fastest", "simt_64x64x8_4x4"});
    CHECK(r["waits"] == "1");
    CHECK(r["taken_over"] == "1");
    CHECK(r["tunings"] == "1");
    auto rec = tn::decode(*kaio::cache::Store::open(dir.path())->get("tuning", claim->key));
    REQUIRE(rec);
    CHECK(rec->created_unix * 1000 + 999 >= claim->deadline_ms);  // tuned after the deadline
  }
  CHECK(claims_in(dir).empty());
  CHECK(tuning_entries(dir).size() == 1);  // the record
}
