// The disk cache under stress and damage: many processes at once, a writer killed with
// SIGKILL, damaged and foreign records, the size cap, unusable directories, batched use
// counts. Offline (sm_90), no GPU needed.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/kaio.h"
#include "../cache/cache_kernels.h"
#include "../support.h"

#ifndef KAIO_CACHE_CHILD_REL
#error "KAIO_CACHE_CHILD_REL must name the kaio_cache_child executable"
#endif

using namespace kaio;
using Catch::Matchers::Contains;
using test::numbered_kernel;
using test::ScopedEnv;
using test::TempDir;

namespace {

std::string cache_child() { return test::beside_exe(KAIO_CACHE_CHILD_REL); }
std::string tool(const std::string& args) { return "'" + test::cache_tool_exe() + "' " + args; }

uint64_t xxh(const std::string& s) { return XXH3_64bits(s.data(), s.size()); }

// Captures what this process writes to stderr (the kaio logger) while it lives.
class CaptureStderr {
 public:
  explicit CaptureStderr(const std::filesystem::path& file) : file_(file) {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  std::string finish() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, 2);
      close(saved_);
      saved_ = -1;
    }
    std::ifstream f(file_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  ~CaptureStderr() { finish(); }

 private:
  std::filesystem::path file_;
  int saved_ = -1;
};

size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

jit::CompiledKernel compile_in(const TempDir& dir, const ir::Kernel& k) {
  return jit::compile(k, {.arch = "sm_90", .cache_dir = dir.str()});
}

// A disk lookup, not an in-memory one.
jit::CompiledKernel compile_from_disk(const TempDir& dir, const ir::Kernel& k) {
  jit::clear_memory_cache();
  return compile_in(dir, k);
}

uint64_t cache_bytes(cache::Store& s) {
  uint64_t n = 0;
  s.view([&](cache::Txn& t) { n = cache::cache_bytes(t); });
  return n;
}

}  // namespace

TEST_CASE("8 processes x 200 kernels into one cache: one record per key, all intact", "[jit][cache][robustness]") {
  TempDir dir;
  constexpr int kChildren = 8, kShared = 100, kDistinct = 100;
  ScopedEnv env("KAIO_CACHE_DIR", dir.str());

  std::vector<FILE*> pipes;
  for (int c = 0; c < kChildren; ++c) {
    const std::string cmd = "'" + cache_child() + "' compile " + std::to_string(c) + " " + std::to_string(kShared) +
                            " " + std::to_string(kDistinct);
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p);
    pipes.push_back(p);
  }
  // key hex -> cubin hashes the children saw, and whether each was served from the cache.
  std::map<std::string, std::set<std::string>> compiled, served;
  int failed = 0;
  size_t lines = 0;
  for (FILE* p : pipes) {
    char key[64], hash[32];
    int from_cache = 0;
    while (std::fscanf(p, "%63s %31s %d", key, hash, &from_cache) == 3) {
      ++lines;
      (from_cache ? served : compiled)[key].insert(hash);
    }
    const int st = pclose(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  REQUIRE(failed == 0);
  REQUIRE(lines == size_t(kChildren) * (kShared + kDistinct));

  std::set<std::string> keys;
  for (const auto& [k, h] : compiled) keys.insert(k);
  for (const auto& [k, h] : served) keys.insert(k);
  const size_t expected = kShared + size_t(kChildren) * kDistinct;
  CHECK(keys.size() == expected);

  auto store = cache::Store::open(dir.path());
  CHECK(store->count("kernels") == expected);
  size_t checked = 0, mismatched = 0;
  store->for_each("kernels", [&](std::string_view key, std::string_view bytes) {
    auto rec = cache::decode_record(bytes);
    REQUIRE(rec.has_value());
    char hash[32];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(xxh(rec->cubin)));
    const std::string hex = cache::to_hex(key);
    // What was served is exactly what is stored, and what is stored is what some child
    // compiled; nvJitLink is deterministic, so every child got the same bytes.
    for (const auto& h : served[hex]) mismatched += h != hash;
    for (const auto& h : compiled[hex]) mismatched += h != hash;
    CHECK(compiled[hex].count(hash) + served[hex].count(hash) > 0);
    ++checked;
  });
  CHECK(checked == expected);
  CHECK(mismatched == 0);

  const auto v = test::run_command(tool("--cache-dir '" + dir.str() + "' verify"));
  CHECK(v.status == 0);
  CHECK_THAT(v.out, Contains(std::to_string(expected) + " records checked: " + std::to_string(expected) + " ok, 0 damaged"));
}

TEST_CASE("a writer killed with SIGKILL in a loop: the cache opens, verifies, serves nothing corrupt",
          "[jit][cache][robustness]") {
  TempDir dir;
  constexpr int kVictims = 6, kRounds = 12;
  // The reference cubins, compiled without the cache.
  std::vector<std::string> reference;
  for (int i = 0; i < kVictims; ++i)
    reference.push_back(jit::compile(numbered_kernel("victim", i), {.arch = "sm_90", .use_cache = false, .force = true}).cubin());

  ScopedEnv env("KAIO_CACHE_DIR", dir.str());
  std::atomic<bool> stop{false};
  std::atomic<int> served{0}, wrong{0}, undecodable{0}, reads{0};
  std::thread reader([&] {
    // Past the kill loop, it reads on until a record has served it (bounded): on a slow
    // machine the loop can end before its own first writes landed.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (int i = 0; !stop || (served == 0 && std::chrono::steady_clock::now() < give_up); i = (i + 1) % kVictims) {
      jit::CompiledKernel ck = compile_from_disk(dir, numbered_kernel("victim", i));
      if (ck.from_cache()) {
        ++served;
        if (ck.cubin() != reference[i]) ++wrong;
      }
      // Every committed record, whoever wrote it, checks out.
      auto store = cache::Store::open(dir.path());
      store->for_each("kernels", [&](std::string_view, std::string_view bytes) {
        if (!cache::decode_record_info(bytes, true)) ++undecodable;
      });
      ++reads;
    }
  });

  std::mt19937 rng(42);
  int killed = 0;
  for (int round = 0; round < kRounds; ++round) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      execl(cache_child().c_str(), "kaio_cache_child", "writer", std::to_string(kVictims).c_str(), nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(80 + rng() % 220));
    kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    killed += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }
  stop = true;
  reader.join();
  jit::flush_cache_writes();

  CHECK(killed == kRounds);
  CHECK(reads > 0);
  CHECK(served > 0);
  CHECK(wrong == 0);
  CHECK(undecodable == 0);

  // A fresh process opens it and finds every record intact.
  const auto v = test::run_command(tool("--cache-dir '" + dir.str() + "' verify"));
  CHECK(v.status == 0);
  CHECK_THAT(v.out, Contains(" 0 damaged"));
  // And it still takes writes.
  jit::CompiledKernel after = compile_in(dir, numbered_kernel("after_kills", 0));
  jit::flush_cache_writes();
  CHECK(compile_from_disk(dir, numbered_kernel("after_kills", 0)).from_cache());
  CHECK(after.cubin().size() > 0);
}

TEST_CASE("a record with flipped payload bytes: detected, recompiled, one warning, repaired",
          "[jit][cache][robustness]") {
  TempDir dir;
  std::vector<ir::Kernel> ks;
  std::vector<std::string> good;
  for (int i = 0; i < 3; ++i) {
    ks.push_back(numbered_kernel("flipped", i));
    good.push_back(compile_in(dir, ks.back()).cubin());
  }
  jit::flush_cache_writes();

  auto store = cache::Store::open(dir.path());
  for (const auto& k : ks) {
    const std::string key = jit::cache_key(k, "sm_90").bytes();
    std::string bytes = *store->get("kernels", key);
    // Bytes in the middle of the payload (the cubin): the header still parses.
    for (size_t at = bytes.size() / 2; at < bytes.size() / 2 + 3; ++at) bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
    store->put("kernels", key, bytes);
    REQUIRE_FALSE(cache::decode_record(bytes).has_value());
  }

  std::string log;
  {
    CaptureStderr cap(dir.path() / "stderr.txt");
    for (size_t i = 0; i < ks.size(); ++i) {
      jit::CompiledKernel ck = compile_from_disk(dir, ks[i]);
      CHECK_FALSE(ck.from_cache());
      CHECK(ck.cubin() == good[i]);
    }
    jit::flush_cache_writes();
    log = cap.finish();
  }
  // Three damaged records in one cache: one warning.
  CHECK(count_of(log, "kernel cache record is not valid") == 1);
  CHECK_THAT(log, Contains("checksum"));

  // Replaced by good records, served from then on.
  for (size_t i = 0; i < ks.size(); ++i) {
    auto rec = cache::decode_record(*store->get("kernels", jit::cache_key(ks[i], "sm_90").bytes()));
    REQUIRE(rec.has_value());
    CHECK(rec->cubin == good[i]);
    jit::CompiledKernel ck = compile_from_disk(dir, ks[i]);
    CHECK(ck.from_cache());
    CHECK(ck.cubin() == good[i]);
  }
}

TEST_CASE("records of another schema, toolchain or arch are never served", "[jit][cache][robustness]") {
  TempDir dir;
  auto store = cache::Store::open(dir.path());
  ir::Kernel k_schema = numbered_kernel("foreign_schema", 0), k_tool = numbered_kernel("foreign_tool", 0),
             k_arch = numbered_kernel("foreign_arch", 0);
  const std::string reference = jit::compile(k_tool, {.arch = "sm_90", .use_cache = false}).cubin();

  cache::Record r;
  r.name = "foreign";
  r.arch = "sm_90";
  r.toolchain = jit::toolchain_id();
  r.cubin = "NOT A CUBIN";
  r.ptx = "// fake";
  // Another schema: the bytes of a current record with the schema field bumped.
  std::string other_schema = cache::encode_record(r);
  other_schema[8] = static_cast<char>(cache::kRecordSchema + 1);
  store->put("kernels", jit::cache_key(k_schema, "sm_90").bytes(), other_schema);
  // Another toolchain.
  cache::Record t = r;
  t.toolchain = "codegen=0;ptx=7.0;nvjitlink=11.0;record=1";
  store->put("kernels", jit::cache_key(k_tool, "sm_90").bytes(), cache::encode_record(t));
  // Another arch under this arch's key.
  cache::Record a = r;
  a.arch = "sm_80";
  store->put("kernels", jit::cache_key(k_arch, "sm_90").bytes(), cache::encode_record(a));

  std::string log;
  {
    CaptureStderr cap(dir.path() / "stderr.txt");
    for (const auto& k : {k_schema, k_tool, k_arch}) {
      jit::CompiledKernel ck = compile_from_disk(dir, k);
      CHECK_FALSE(ck.from_cache());
      CHECK(ck.cubin() != "NOT A CUBIN");
    }
    jit::flush_cache_writes();
    log = cap.finish();
  }
  CHECK(count_of(log, "kernel cache record is not valid") == 1);  // the schema
  CHECK(count_of(log, "another target or toolchain") == 1);       // toolchain and arch: one topic
  CHECK(compile_from_disk(dir, k_tool).cubin() == reference);
  for (const auto& k : {k_schema, k_tool, k_arch}) CHECK(compile_from_disk(dir, k).from_cache());
}

TEST_CASE("the size cap: the cache stays under KAIO_CACHE_MAX_BYTES, the most recently used survive",
          "[jit][cache][robustness]") {
  TempDir dir;
  auto store = cache::Store::open(dir.path());
  auto present = [&](const std::string& prefix, int i) {
    return store->get("kernels", jit::cache_key(numbered_kernel(prefix, i), "sm_90").bytes()).has_value();
  };
  // A: 10 records, B: 20 records, written without a cap.
  for (int i = 0; i < 10; ++i) compile_in(dir, numbered_kernel("cap_a", i));
  jit::flush_cache_writes();
  const uint64_t bytes_a = cache_bytes(*store);
  for (int i = 0; i < 20; ++i) compile_in(dir, numbered_kernel("cap_b", i));
  jit::flush_cache_writes();
  const uint64_t bytes_ab = cache_bytes(*store);
  const uint64_t per_record = (bytes_ab - bytes_a) / 20;
  REQUIRE(per_record > 0);

  // Room for about 45 records; 50 are coming.
  const uint64_t cap = bytes_ab + 15 * per_record;
  ScopedEnv env("KAIO_CACHE_MAX_BYTES", std::to_string(cap));
  // A is used again (disk hits), after B was written: A is now more recent than B.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (int i = 0; i < 10; ++i) CHECK(compile_from_disk(dir, numbered_kernel("cap_a", i)).from_cache());
  jit::flush_cache_writes();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  uint64_t peak = 0;
  for (int i = 0; i < 20; ++i) {
    compile_in(dir, numbered_kernel("cap_c", i));
    jit::flush_cache_writes();
    peak = std::max(peak, cache_bytes(*store));
  }
  INFO("cap " << cap << ", per record " << per_record << ", peak " << peak);
  CHECK(peak <= cap);
  CHECK(cache_bytes(*store) <= cap);
  int a = 0, b = 0, c = 0;
  for (int i = 0; i < 10; ++i) a += present("cap_a", i);
  for (int i = 0; i < 20; ++i) b += present("cap_b", i);
  for (int i = 0; i < 20; ++i) c += present("cap_c", i);
  CHECK(a == 10);  // used recently
  CHECK(c == 20);  // written last
  CHECK(b < 20);   // the least recently used went first
  CHECK(store->count("kernels") == uint64_t(a + b + c));
}

TEST_CASE("an unusable cache directory never fails a compile", "[jit][cache][robustness]") {
  TempDir dir;
  SECTION("missing parent directories are created") {
    const std::string nested = (dir.path() / "a" / "b" / "c").string();
    ir::Kernel k = numbered_kernel("nested_dir", 0);
    CHECK_FALSE(jit::compile(k, {.arch = "sm_90", .cache_dir = nested}).from_cache());
    jit::flush_cache_writes();
    jit::clear_memory_cache();
    CHECK(jit::compile(k, {.arch = "sm_90", .cache_dir = nested}).from_cache());
  }
  SECTION("a directory that cannot be created (under /proc, which root cannot write either)") {
    std::string log;
    {
      CaptureStderr cap(dir.path() / "stderr.txt");
      for (int i = 0; i < 3; ++i) {
        jit::CompiledKernel ck = jit::compile(numbered_kernel("proc_dir", i), {.arch = "sm_90", .cache_dir = "/proc/kaio-no-such-dir/cache"});
        CHECK_FALSE(ck.from_cache());
        CHECK_FALSE(ck.cubin().empty());
      }
      jit::flush_cache_writes();
      log = cap.finish();
    }
    CHECK(count_of(log, "kernel cache disabled") == 1);
  }
  SECTION("a file where the directory should be") {
    const std::string file = (dir.path() / "file").string();
    { std::ofstream(file) << "x"; }
    CHECK_FALSE(jit::compile(numbered_kernel("file_dir", 0), {.arch = "sm_90", .cache_dir = file}).from_cache());
  }
  SECTION("a data.mdb that is not an LMDB file") {
    { std::ofstream(dir.path() / "data.mdb") << "junk junk junk"; }
    CHECK_FALSE(compile_in(dir, numbered_kernel("junk_mdb", 0)).from_cache());
    jit::flush_cache_writes();
  }
  SECTION("an existing cache on a read-only file system") {
    // A read-only mount is the one thing root cannot write to. Needs mount rights (root
    // with CAP_SYS_ADMIN); skipped where the sandbox has none.
    const std::string mnt = (dir.path() / "ro").string();
    std::filesystem::create_directories(mnt);
    if (std::system(("mount -t tmpfs -o size=16m tmpfs '" + mnt + "' 2>/dev/null").c_str()) != 0) {
      WARN("cannot mount a tmpfs here; read-only file system case skipped");
      return;
    }
    // Populated by another process, so that no environment of ours holds files open.
    const auto first = test::run_command("KAIO_CACHE_DIR='" + mnt + "' '" + test::child_exe() + "' 2>&1");
    CHECK(first.status == 0);
    const bool remounted = std::system(("mount -o remount,ro '" + mnt + "'").c_str()) == 0;
    if (remounted) {
      const auto again = test::run_command("KAIO_CACHE_DIR='" + mnt + "' '" + test::child_exe() + "' 2>&1");
      CHECK(again.status == 0);
      CHECK_THAT(again.out, Contains("kernel cache disabled"));
      CHECK_FALSE(jit::compile(numbered_kernel("ro_fs", 0), {.arch = "sm_90", .cache_dir = mnt}).from_cache());
      jit::flush_cache_writes();
      jit::clear_memory_cache();
      CHECK_FALSE(jit::compile(numbered_kernel("ro_fs", 0), {.arch = "sm_90", .cache_dir = mnt}).from_cache());
    }
    CHECK(std::system(("umount -l '" + mnt + "'").c_str()) == 0);
    CHECK(remounted);
  }
}

TEST_CASE("KAIO_FORCE_RECOMPILE=1 rebuilds and replaces records, memory hits still count",
          "[jit][cache][robustness]") {
  TempDir dir;
  ir::Kernel k = numbered_kernel("forced", 0);
  compile_in(dir, k);
  jit::flush_cache_writes();
  CHECK(compile_from_disk(dir, k).from_cache());

  auto store = cache::Store::open(dir.path());
  const std::string key = jit::cache_key(k, "sm_90").bytes();
  // Mark the record so that its replacement shows.
  cache::Record marked = *cache::decode_record(*store->get("kernels", key));
  marked.created_unix = 12345;
  store->put("kernels", key, cache::encode_record(marked));
  {
    ScopedEnv force("KAIO_FORCE_RECOMPILE", "1");
    jit::CompiledKernel a = compile_from_disk(dir, k);
    CHECK_FALSE(a.from_cache());
    CHECK(compile_in(dir, k).from_cache());  // the in-process cache still answers
    jit::flush_cache_writes();
  }
  CHECK(cache::decode_record(*store->get("kernels", key))->created_unix != 12345);
  CHECK(compile_from_disk(dir, k).from_cache());
}

TEST_CASE("disk hits do not write: last use and hits are batched", "[jit][cache][robustness]") {
  TempDir dir;
  constexpr int kKernels = 5, kRounds = 10;
  for (int i = 0; i < kKernels; ++i) compile_in(dir, numbered_kernel("batched", i));
  const auto clock0 = std::chrono::steady_clock::now();  // at or before the flush clock's reset
  jit::flush_cache_writes();
  auto store = cache::Store::open(dir.path());
  cache::Counters before;
  store->view([&](cache::Txn& t) { before = cache::read_counters(t); });

  const uint64_t writes = jit::disk::usage_write_count();
  const uint64_t t0 = cache::now_unix_us();
  for (int r = 0; r < kRounds; ++r)
    for (int i = 0; i < kKernels; ++i) REQUIRE(compile_from_disk(dir, numbered_kernel("batched", i)).from_cache());
  // 50 hits, no write transaction for them yet (a background flush runs at most every
  // kUsageFlushSeconds; flush_cache_writes() above just reset that clock).
  // Where the hits outlasted that period (a loaded machine), background flushes may have
  // run, at most one a period: then only their number is bounded.
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock0).count();
  const bool quiet = took < jit::disk::kUsageFlushSeconds;
  INFO("the hits took " << took << " s since the flush clock's reset");
  if (quiet) CHECK(jit::disk::usage_write_count() == writes);
  jit::flush_cache_writes();
  const uint64_t n = jit::disk::usage_write_count() - writes;
  if (quiet) CHECK(n == 1);
  else CHECK((n >= 1 && n <= uint64_t(took / jit::disk::kUsageFlushSeconds) + 2));

  store->view([&](cache::Txn& t) {
    const cache::Counters c = cache::read_counters(t);
    CHECK(c.hits - before.hits == uint64_t(kKernels) * kRounds);
    for (int i = 0; i < kKernels; ++i) {
      const cache::KeyUsage u = cache::usage_of(t, jit::cache_key(numbered_kernel("batched", i), "sm_90").bytes());
      CHECK(u.hits == uint64_t(kRounds));
      CHECK(u.last_use_us >= t0);
    }
  });
  // Misses are counted too.
  compile_in(dir, numbered_kernel("batched_miss", 0));
  jit::flush_cache_writes();
  store->view([&](cache::Txn& t) { CHECK(cache::read_counters(t).misses > before.misses); });
}
