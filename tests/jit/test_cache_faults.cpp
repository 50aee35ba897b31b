// The cache never takes the application down: write failures (injected, and a real full
// disk on a small tmpfs), a writer stuck at exit, truncated, garbage and empty files, a
// file truncated while it is mapped. Every application run is a child process
// (kaio_cache_child app: compiles and launches in the interpreter), so that a signal is
// a test failure, not a crash of the test binary.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/kaio.h"
#include "../cache/cache_files.h"
#include "../cache/cache_kernels.h"

using namespace kaio;
using Catch::Matchers::Contains;
using test::ChildResult;
using test::count_of;
using test::run_app;
using test::run_tool;
using test::TempDir;

namespace {

// The process ended by itself, with `code`; the message shows everything it printed.
#define REQUIRE_EXIT(r, want)          \
  do {                                 \
    INFO((r).describe());              \
    REQUIRE((r).exited);               \
    REQUIRE((r).code == (want));       \
  } while (0)

#define REQUIRE_NO_SIGNAL(r)           \
  do {                                 \
    INFO((r).describe());              \
    REQUIRE((r).exited);               \
  } while (0)

size_t ls_count(const std::filesystem::path& dir) {
  const ChildResult r = run_tool(dir, {"ls", "--json"});
  REQUIRE_EXIT(r, 0);
  return nlohmann::json::parse(r.out).size();
}

// "app ok <kernels> <served>": how many compiles were served from disk.
int served_of(const ChildResult& r) {
  const size_t at = r.out.find("app ok ");
  REQUIRE(at != std::string::npos);
  int kernels = 0, served = -1;
  std::sscanf(r.out.c_str() + at, "app ok %d %d", &kernels, &served);
  return served;
}

}  // namespace

TEST_CASE("injected write failures are logged once, counted, never fatal; nothing half-written is served",
          "[jit][cache][faults]") {
  for (const std::string code : {"ENOSPC", "EDQUOT", "EIO", "MAP_FULL"}) {
    DYNAMIC_SECTION(code) {
      TempDir dir;
      const ChildResult r = run_app(dir.path(), 6, {{"KAIO_CACHE_FAIL_WRITES", "all:" + code}});
      REQUIRE_EXIT(r, 0);
      CHECK_THAT(r.out, Contains("app ok 6 0"));  // every result right, nothing from disk
      CHECK(count_of(r.err, "kernel cache write failed") == 1);
      CHECK_THAT(r.err, Contains(code == "MAP_FULL" ? "MDB_MAP_FULL" : code));
      CHECK_THAT(r.err, Contains("pausing them"));
      // Nothing was committed, so nothing half-written can be served.
      const ChildResult v = run_tool(dir.path(), {"verify"});
      REQUIRE_EXIT(v, 0);
      CHECK_THAT(v.out, Contains("0 records checked"));
      // The next process, with a working disk, writes and then serves them.
      REQUIRE_EXIT(run_app(dir.path(), 6), 0);
      CHECK(ls_count(dir.path()) == 6);
      const ChildResult again = run_app(dir.path(), 6);
      REQUIRE_EXIT(again, 0);
      CHECK(served_of(again) == 12);
    }
  }
}

TEST_CASE("write failures are saved by the next successful write and shown by kaio-cache stats",
          "[jit][cache][faults]") {
  TempDir dir;
  // The first three commits fail; the use counts written at exit carry the count.
  const ChildResult r = run_app(dir.path(), 6, {{"KAIO_CACHE_FAIL_WRITES", "3:ENOSPC"}});
  REQUIRE_EXIT(r, 0);
  const ChildResult s = run_tool(dir.path(), {"stats", "--json"});
  REQUIRE_EXIT(s, 0);
  const auto j = nlohmann::json::parse(s.out);
  CHECK(j["write_failures"].get<uint64_t>() >= 1);
  CHECK(j["write_failures"].get<uint64_t>() <= 3);
  CHECK_THAT(j["last_write_failure"]["error"].get<std::string>(), Contains("ENOSPC"));
  const ChildResult text = run_tool(dir.path(), {"stats"});
  REQUIRE_EXIT(text, 0);
  CHECK_THAT(text.out, Contains("write failures") && Contains("ENOSPC"));
}

TEST_CASE("a record write is attempted a bounded number of times", "[jit][cache][faults]") {
  TempDir dir;
  const auto before = jit::disk::write_stats();
  // EIO may pass, so it is retried; three failures exhaust the first record's attempts
  // and fail the second's first attempt only.
  static_assert(jit::disk::kWriteAttempts == 2);
  cache::inject_write_failures(3, EIO);
  ir::Kernel a = test::numbered_kernel("bounded_attempts", 0), b = test::numbered_kernel("bounded_attempts", 1);
  CHECK_FALSE(jit::compile(a, {.arch = "sm_90", .cache_dir = dir.str()}).cubin().empty());
  jit::flush_cache_writes();
  CHECK_FALSE(jit::compile(b, {.arch = "sm_90", .cache_dir = dir.str()}).cubin().empty());
  jit::flush_cache_writes();
  cache::inject_write_failures(0, 0);
  const auto after = jit::disk::write_stats();
  CHECK(after.failed - before.failed == 1);
  CHECK(after.written - before.written == 1);
  auto store = cache::Store::open(dir.path());
  CHECK_FALSE(store->get("kernels", jit::cache_key(a, "sm_90").bytes()).has_value());
  CHECK(store->get("kernels", jit::cache_key(b, "sm_90").bytes()).has_value());
}

TEST_CASE("a writer stuck at exit does not hold the process", "[jit][cache][faults]") {
  TempDir dir;
  SECTION("exit without flush: bounded by the exit wait (2 s)") {
    const ChildResult r = run_app(dir.path(), 6, {{"KAIO_CACHE_FAIL_WRITES", "1:HANG"}}, false, 60);
    REQUIRE_EXIT(r, 0);  // a held process would be killed at 60 s
    // Loose: the child's own work (compiles, launches) is slow under a sanitizer on a loaded
    // machine; what matters is that it ends well before the kill, not how fast.
    CHECK(r.seconds < 30);
    CHECK_THAT(r.err, Contains("left unfinished"));
  }
  SECTION("flush_cache_writes() gives up when writers stop progressing (10 s), then exit (2 s)") {
    const ChildResult r = run_app(dir.path(), 6, {{"KAIO_CACHE_FAIL_WRITES", "1:HANG"}}, true, 120);
    REQUIRE_EXIT(r, 0);
    CHECK(r.seconds < 80);  // 12 s of waits and the child's work, well before the kill at 120 s
    CHECK_THAT(r.err, Contains("made no progress"));
  }
  const ChildResult v = run_tool(dir.path(), {"verify"});
  REQUIRE_EXIT(v, 0);
  CHECK_THAT(v.out, Contains(" 0 damaged"));
}

TEST_CASE("a full disk (a 300 KB tmpfs): warnings, compiles and launches go on, the cache stays intact",
          "[jit][cache][faults]") {
  TempDir dir;
  const std::string mnt = (dir.path() / "small").string();
  std::filesystem::create_directories(mnt);
  if (std::system(("mount -t tmpfs -o size=300k tmpfs '" + mnt + "' 2>/dev/null").c_str()) != 0) {
    WARN("cannot mount a tmpfs here; the full-disk case is covered by the injected failures only");
    return;
  }
  const std::filesystem::path cache = std::filesystem::path(mnt) / "c";
  // 60 kernels do not fit in 300 KB: the disk fills during the first run.
  for (int run = 0; run < 2; ++run) {
    const ChildResult r = run_app(cache, 60);
    INFO("run " << run);
    REQUIRE_EXIT(r, 0);
    CHECK_THAT(r.out, Contains("app ok 60"));
    CHECK_THAT(r.err, Contains("No space left on device"));
    CHECK(count_of(r.err, "kernel cache write failed") == 1);
  }
  const ChildResult v = run_tool(cache, {"verify"});
  CHECK(v.exited);
  CHECK(v.code == 0);
  CHECK_THAT(v.out, Contains(" 0 damaged"));
  CHECK(std::system(("umount -l '" + mnt + "'").c_str()) == 0);
}

TEST_CASE("a truncated data.mdb: tools report it, the application moves it aside and goes on",
          "[jit][cache][faults]") {
  TempDir base;
  const auto tmpl = base.path() / "template";
  test::make_app_cache(tmpl, 6);
  const uint64_t size = std::filesystem::file_size(tmpl / "data.mdb");
  const uint64_t page = 4096;
  REQUIRE(size >= 8 * page);
  for (const uint64_t cut : {uint64_t(100), page, 2 * page, 3 * page, size / 2, size - page}) {
    DYNAMIC_SECTION("cut to " << cut << " of " << size << " bytes") {
      TempDir dir;
      test::copy_cache(tmpl, dir.path());
      std::filesystem::resize_file(dir.path() / "data.mdb", cut);

      const ChildResult ls = run_tool(dir.path(), {"ls"});
      REQUIRE_EXIT(ls, 1);
      CHECK_THAT(ls.err, Contains("is damaged") && Contains("verify --repair"));
      const ChildResult v = run_tool(dir.path(), {"verify"});
      REQUIRE_EXIT(v, 1);
      CHECK_THAT(v.out, Contains("damaged file " + (dir.path() / "data.mdb").string()));
      CHECK(test::damaged_files(dir.path()).empty());  // the tools leave it where it is

      const ChildResult app = run_app(dir.path(), 6);
      REQUIRE_EXIT(app, 0);
      CHECK_THAT(app.out, Contains("app ok 6"));
      const auto moved = test::damaged_files(dir.path());
      REQUIRE(moved.size() == 1);
      // One warning naming both paths.
      CHECK(count_of(app.err, "is damaged") == 1);
      CHECK_THAT(app.err, Contains((dir.path() / "data.mdb").string()) && Contains(moved[0].string()));
      CHECK(std::filesystem::file_size(moved[0]) == cut);
      REQUIRE_EXIT(run_tool(dir.path(), {"verify"}), 0);
      CHECK(ls_count(dir.path()) == 6);  // the fresh cache took the new records
    }
  }
}

TEST_CASE("garbage and empty cache files", "[jit][cache][faults]") {
  TempDir base;
  const auto tmpl = base.path() / "template";
  test::make_app_cache(tmpl, 6);
  TempDir dir;
  std::mt19937 rng(7);
  auto garbage = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  SECTION("random bytes for data.mdb") {
    test::write_file(dir.path() / "data.mdb", garbage(64 * 1024));
    const ChildResult v = run_tool(dir.path(), {"verify", "--json"});
    REQUIRE_EXIT(v, 1);
    CHECK(nlohmann::json::parse(v.out)["file_damaged"] == true);
    const ChildResult app = run_app(dir.path(), 6);
    REQUIRE_EXIT(app, 0);
    CHECK(count_of(app.err, "is damaged") == 1);
    CHECK(test::damaged_files(dir.path()).size() == 1);
  }
  SECTION("random bytes for lock.mdb: the data is kept and served") {
    test::copy_cache(tmpl, dir.path());
    test::write_file(dir.path() / "lock.mdb", garbage(16 * 1024));
    const ChildResult app = run_app(dir.path(), 6);
    REQUIRE_EXIT(app, 0);
    CHECK(served_of(app) == 12);
    CHECK(test::damaged_files(dir.path()).empty());
  }
  SECTION("an empty data.mdb is a new cache") {
    test::write_file(dir.path() / "data.mdb", "");
    const ChildResult app = run_app(dir.path(), 6);
    REQUIRE_EXIT(app, 0);
    CHECK(app.err.find("damaged") == std::string::npos);
    CHECK(ls_count(dir.path()) == 6);
  }
  REQUIRE_EXIT(run_tool(dir.path(), {"verify"}), 0);
}

TEST_CASE("verify --repair salvages the readable records of a truncated file", "[jit][cache][faults][tools]") {
  TempDir dir;
  test::make_app_cache(dir.path(), 6);
  const uint64_t size = std::filesystem::file_size(dir.path() / "data.mdb");
  std::filesystem::resize_file(dir.path() / "data.mdb", size - 4096);
  const ChildResult r = run_tool(dir.path(), {"verify", "--repair", "--json"});
  REQUIRE_EXIT(r, 0);
  const auto j = nlohmann::json::parse(r.out);
  const uint64_t salvaged = j["salvaged"].get<uint64_t>();
  CHECK(salvaged >= 1);
  CHECK(salvaged <= 6);
  CHECK(std::filesystem::file_size(j["moved_to"].get<std::string>()) == size - 4096);
  const ChildResult v = run_tool(dir.path(), {"verify"});
  REQUIRE_EXIT(v, 0);
  CHECK_THAT(v.out, Contains(std::to_string(salvaged) + " records checked: " + std::to_string(salvaged) + " ok"));
  // The salvaged records are served (the first round's compiles are disk hits).
  const ChildResult app = run_app(dir.path(), 6);
  REQUIRE_EXIT(app, 0);
  CHECK(served_of(app) >= static_cast<int>(salvaged));
}

TEST_CASE("a file truncated while it is mapped: a read is a damaged cache, not SIGBUS", "[jit][cache][faults]") {
  TempDir dir;
  test::make_app_cache(dir.path(), 6);
  // In a child process: without the fault guard this dies with SIGBUS.
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      auto store = cache::Store::open(dir.path());
      if (store->count("kernels") != 6) _exit(2);
      ::truncate((dir.path() / "data.mdb").c_str(), 8192);
      code = 3;  // no error: the read did not notice
      store->for_each("kernels", [](std::string_view, std::string_view) {});
    } catch (const cache::DamagedCache& e) {
      // Moved aside, and the next open starts afresh.
      code = e.moved_to().empty() ? 4 : cache::Store::open(dir.path())->count("kernels") == 0 ? 0 : 5;
    } catch (...) {
      code = 6;
    }
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("status " << status << (WIFSIGNALED(status) ? " (signal)" : ""));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(test::damaged_files(dir.path()).size() == 1);
}
