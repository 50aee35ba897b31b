// LMDB-file fuzzer: a real cache file (six kernels) truncated at every page boundary,
// with bytes flipped (meta pages and anywhere), and extended. Each case runs
// `kaio-cache ls`, `kaio-cache verify` and an application (compile + launch in the
// interpreter) as child processes: none may die with a signal, the application must
// succeed, the tools must answer 0 or 1.
#include <catch2/catch.hpp>

#include <chrono>
#include <random>
#include <string>

#include "../cache/cache_files.h"
#include "fuzz_support.h"

using kaio::test::ChildResult;
using kaio::test::run_app;
using kaio::test::run_tool;
using kaio::test::TempDir;
namespace fs = std::filesystem;

namespace {

struct Tally {
  uint64_t cases = 0, tool_damaged = 0, moved_aside = 0;
};

// Runs the three processes on a damaged copy; `what` names the case in failures.
void check_case(const fs::path& dir, const std::string& what, Tally& tally) {
  INFO(what);
  ++tally.cases;
  for (const char* sub : {"ls", "verify"}) {
    const ChildResult r = run_tool(dir, {sub});
    INFO(sub << ": " << r.describe());
    REQUIRE(r.exited);  // not killed by a signal
    CHECK((r.code == 0 || r.code == 1));
    if (std::string(sub) == "verify" && r.code == 1) ++tally.tool_damaged;
  }
  const ChildResult app = run_app(dir, 2);
  INFO("app: " << app.describe());
  REQUIRE(app.exited);
  CHECK(app.code == 0);
  CHECK(app.out.find("app ok 2") != std::string::npos);
  if (!kaio::test::damaged_files(dir).empty()) ++tally.moved_aside;
  // Whatever happened, the cache the application left behind opens.
  const ChildResult after = run_tool(dir, {"verify"});
  INFO("verify after: " << after.describe());
  REQUIRE(after.exited);
  CHECK((after.code == 0 || after.code == 1));
}

}  // namespace

TEST_CASE("LMDB-file fuzzer: truncations, byte flips and extensions never kill a process", "[fuzz][lmdb]") {
  const uint64_t seed = kaio::test::fuzz_seed(4242);
  const uint64_t flips = kaio::test::fuzz_iterations(20000) / 320;  // 62 in CI
  TempDir base;
  const fs::path tmpl = base.path() / "template";
  kaio::test::make_app_cache(tmpl, 6);
  const std::string good = kaio::test::read_file(tmpl / "data.mdb");
  constexpr size_t kPage = 4096;
  REQUIRE(good.size() % kPage == 0);
  const size_t pages = good.size() / kPage;
  std::mt19937_64 rng(seed);
  Tally tally;
  const auto t0 = std::chrono::steady_clock::now();

  SECTION("truncated at every page boundary") {
    for (size_t p = 0; p < pages; ++p) {
      TempDir dir;
      kaio::test::write_file(dir.path() / "data.mdb", good.substr(0, p * kPage));
      check_case(dir.path(), "truncated to " + std::to_string(p) + " pages of " + std::to_string(pages), tally);
    }
  }
  SECTION("bytes flipped") {
    for (uint64_t i = 0; i < flips; ++i) {
      std::string bytes = good;
      // Half the cases hit the meta pages, which LMDB trusts most.
      const size_t span = i % 2 ? 2 * kPage : bytes.size();
      std::string where;
      for (uint64_t n = 0, count = 1 + rng() % 4; n < count; ++n) {
        const size_t at = rng() % span;
        bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
        where += " " + std::to_string(at);
      }
      TempDir dir;
      kaio::test::write_file(dir.path() / "data.mdb", bytes);
      check_case(dir.path(), "seed " + std::to_string(seed) + ", case " + std::to_string(i) + ": flipped bytes at" + where,
                 tally);
    }
  }
  SECTION("extended") {
    const std::string random_tail = [&] {
      std::string s(16384, '\0');
      for (auto& c : s) c = static_cast<char>(rng());
      return s;
    }();
    const std::pair<const char*, std::string> tails[] = {
        {"one byte", std::string(1, '\x5a')},
        {"a page of zeros", std::string(kPage, '\0')},
        {"16 KiB of random bytes", random_tail},
    };
    for (const auto& [name, tail] : tails) {
      TempDir dir;
      kaio::test::write_file(dir.path() / "data.mdb", good + tail);
      check_case(dir.path(), std::string("extended by ") + name, tally);
    }
    TempDir dir;
    kaio::test::write_file(dir.path() / "data.mdb", good);
    fs::resize_file(dir.path() / "data.mdb", good.size() + (uint64_t(1) << 20));  // a sparse MiB
    check_case(dir.path(), "extended by a sparse MiB", tally);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("LMDB-file fuzzer: seed " << seed << ", " << tally.cases << " files, verify reported " << tally.tool_damaged
                                 << " damaged, the application moved " << tally.moved_aside << " aside, " << s << " s");
}
