#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kaio/cache/store.h"
#include "kaio/ir/error.h"
#include "../support.h"

namespace fs = std::filesystem;
using kaio::cache::Store;
using kaio::test::ScopedEnv;
using kaio::test::TempDir;  // declared before a Store, so the environment closes first

namespace {

std::string value_for(int i, size_t bytes) {
  std::string v(bytes, static_cast<char>('a' + i % 26));
  const std::string tag = "#" + std::to_string(i) + "#";
  v.replace(0, tag.size(), tag);
  return v;
}

// Waits for a child and returns its exit status, or -1 if it did not exit normally.
int wait_exit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("store get of a missing key is nullopt", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path() / "cache");
  CHECK(fs::is_directory(tmp.path() / "cache"));
  CHECK_FALSE(store->get("kernels", "nope").has_value());
  CHECK(store->count("kernels") == 0);
  CHECK(store->count("meta") == 0);
  CHECK(store->count("tuning") == 0);
}

TEST_CASE("store put_if_absent keeps the first value", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path());

  CHECK(store->put_if_absent("kernels", "k1", "first"));
  REQUIRE(store->get("kernels", "k1") == std::optional<std::string>("first"));

  CHECK_FALSE(store->put_if_absent("kernels", "k1", "second"));
  CHECK(store->get("kernels", "k1") == std::optional<std::string>("first"));
  CHECK(store->count("kernels") == 1);

  // Databases are separate key spaces.
  CHECK_FALSE(store->get("tuning", "k1").has_value());
  CHECK(store->put_if_absent("tuning", "k1", "tuned"));
  CHECK(store->get("kernels", "k1") == std::optional<std::string>("first"));
}

TEST_CASE("store put replaces, erase removes", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path());

  store->put("meta", "k", "v1");
  store->put("meta", "k", "v2");
  CHECK(store->get("meta", "k") == std::optional<std::string>("v2"));

  // Binary values and keys with zero bytes survive.
  const std::string key("\0\x01\xff\0", 4), value("\0\0payload\xfe", 10);
  store->put("kernels", key, value);
  CHECK(store->get("kernels", key) == std::optional<std::string>(value));

  CHECK(store->erase("meta", "k"));
  CHECK_FALSE(store->get("meta", "k").has_value());
  CHECK_FALSE(store->erase("meta", "k"));
  CHECK(store->count("meta") == 0);
}

TEST_CASE("store for_each visits entries in key order", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path());
  for (const char* k : {"delta", "alpha", "charlie", "bravo"}) store->put("kernels", k, std::string(k) + "!");

  std::vector<std::string> keys;
  store->for_each("kernels", [&](std::string_view k, std::string_view v) {
    CHECK(std::string(v) == std::string(k) + "!");
    keys.emplace_back(k);
  });
  CHECK(keys == std::vector<std::string>{"alpha", "bravo", "charlie", "delta"});
  CHECK(store->count("kernels") == 4);

  size_t visits = 0;
  store->for_each("tuning", [&](std::string_view, std::string_view) { ++visits; });
  CHECK(visits == 0);
}

TEST_CASE("store rejects unknown database names", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path());
  CHECK_THROWS_AS(store->get("nope", "k"), kaio::UsageError);
  CHECK_THROWS_AS(store->put("nope", "k", "v"), kaio::UsageError);
}

TEST_CASE("store reports LMDB failures as ToolError", "[cache][store]") {
  TempDir tmp;
  auto store = Store::open(tmp.path());
  // LMDB refuses empty keys.
  try {
    store->put("kernels", "", "v");
    FAIL("expected a ToolError");
  } catch (const kaio::ToolError& e) {
    CHECK(e.tool() == "LMDB");
    CHECK(e.code() == "MDB_BAD_VALSIZE");
    CHECK_THAT(std::string(e.what()), Catch::Contains(tmp.path().string()));
  }
}

TEST_CASE("store open of a file path is a filesystem ToolError", "[cache][store]") {
  TempDir tmp;
  const fs::path file = tmp.path() / "plain-file";
  { std::FILE* f = std::fopen(file.c_str(), "w"); REQUIRE(f); std::fclose(f); }
  try {
    Store::open(file / "sub");
    FAIL("expected a ToolError");
  } catch (const kaio::ToolError& e) {
    CHECK(e.tool() == "filesystem");
  }
}

TEST_CASE("store opened twice in one process is the same Store", "[cache][store]") {
  TempDir tmp;
  auto a = Store::open(tmp.path());
  auto b = Store::open(tmp.path());
  auto c = Store::open(tmp.path() / "." / "");
  CHECK(a == b);
  CHECK(a == c);
  CHECK(a->dir() == fs::canonical(tmp.path()));

  // After the last owner lets go, opening again gives a working environment.
  a->put("kernels", "k", "v");
  a.reset(); b.reset(); c.reset();
  auto d = Store::open(tmp.path());
  CHECK(d->get("kernels", "k") == std::optional<std::string>("v"));
}

TEST_CASE("store grows the map past its initial size", "[cache][store]") {
  TempDir tmp;
  ScopedEnv small_map("KAIO_CACHE_INITIAL_MAP_BYTES", std::to_string(1 << 20));
  auto store = Store::open(tmp.path());
  const uint64_t initial = store->map_size();
  CHECK(initial < (4u << 20));

  // 8 MiB in 64 KiB values, half through each write path.
  constexpr int kValues = 128;
  constexpr size_t kBytes = 64 << 10;
  for (int i = 0; i < kValues; ++i) {
    const std::string key = "key-" + std::to_string(i);
    if (i % 2) REQUIRE(store->put_if_absent("kernels", key, value_for(i, kBytes)));
    else store->put("kernels", key, value_for(i, kBytes));
  }
  CHECK(store->map_size() >= uint64_t(kValues) * kBytes);
  CHECK(store->count("kernels") == kValues);
  for (int i = 0; i < kValues; ++i) {
    INFO("key " << i);
    CHECK(store->get("kernels", "key-" + std::to_string(i)) == std::optional<std::string>(value_for(i, kBytes)));
  }

  // A later open keeps the grown size instead of starting again from 1 MiB.
  const uint64_t grown = store->map_size();
  store.reset();
  CHECK(Store::open(tmp.path())->map_size() >= grown);
}

TEST_CASE("store serves readers while writers grow the map", "[cache][store]") {
  TempDir tmp;
  ScopedEnv small_map("KAIO_CACHE_INITIAL_MAP_BYTES", std::to_string(1 << 20));
  auto store = Store::open(tmp.path());
  store->put("kernels", "fixed", "still here");

  constexpr int kWriters = 3, kPerWriter = 40;
  constexpr size_t kBytes = 32 << 10;
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        const int n = w * kPerWriter + i;
        if (!store->put_if_absent("kernels", "key-" + std::to_string(n), value_for(n, kBytes))) ++failures;
      }
    });
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&] {
      while (!done) {
        if (store->get("kernels", "fixed") != std::optional<std::string>("still here")) ++failures;
        size_t seen = 0;
        store->for_each("kernels", [&](std::string_view, std::string_view) { ++seen; });
        if (seen == 0) ++failures;
      }
    });
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  done = true;
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();

  CHECK(failures == 0);
  CHECK(store->count("kernels") == 1 + kWriters * kPerWriter);
  CHECK(store->map_size() > (1u << 20));
  for (int n = 0; n < kWriters * kPerWriter; ++n)
    CHECK(store->get("kernels", "key-" + std::to_string(n)) == std::optional<std::string>(value_for(n, kBytes)));
}

TEST_CASE("store is shared by several processes", "[cache][store]") {
  TempDir tmp;
  constexpr int kChildren = 4, kKeys = 50, kShared = 25;

  // The children wait on this pipe so that they write at the same time.
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: no Catch2 assertions here; the exit code is the number of keys it won,
      // 100 on any failure. _exit skips the parent's inherited destructors.
      close(gate[1]);
      char byte;
      (void)!read(gate[0], &byte, 1);
      int won = 0;
      try {
        auto store = Store::open(tmp.path());
        for (int i = 0; i < kKeys; ++i) {
          const std::string key = i < kShared ? "shared-" + std::to_string(i)
                                              : "child" + std::to_string(c) + "-" + std::to_string(i);
          if (store->put_if_absent("kernels", key, "written by child " + std::to_string(c))) ++won;
        }
      } catch (...) {
        _exit(100);
      }
      _exit(won);
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);  // releases the children

  int total_won = 0;
  for (pid_t pid : children) {
    const int code = wait_exit(pid);
    REQUIRE(code >= 0);
    REQUIRE(code < 100);
    total_won += code;
  }
  const int expected = kShared + kChildren * (kKeys - kShared);
  CHECK(total_won == expected);  // exactly one winner per key

  auto store = Store::open(tmp.path());
  CHECK(store->count("kernels") == uint64_t(expected));
  std::set<std::string> writers;
  for (int i = 0; i < kShared; ++i) {
    const auto v = store->get("kernels", "shared-" + std::to_string(i));
    REQUIRE(v.has_value());
    CHECK_THAT(*v, Catch::StartsWith("written by child "));
    writers.insert(*v);
  }
  for (int c = 0; c < kChildren; ++c)
    for (int i = kShared; i < kKeys; ++i)
      CHECK(store->get("kernels", "child" + std::to_string(c) + "-" + std::to_string(i)) ==
            std::optional<std::string>("written by child " + std::to_string(c)));
}

TEST_CASE("store in a fork child is opened afresh", "[cache][store]") {
  TempDir tmp;
  auto parent = Store::open(tmp.path());
  parent->put("kernels", "from-parent", "p");

  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      // The inherited Store refuses to work in the child...
      try {
        parent->get("kernels", "from-parent");
        code = 1;
      } catch (const kaio::UsageError&) {
      }
      // ...and open() gives the child its own environment.
      auto own = Store::open(tmp.path());
      if (own == parent) code = 2;
      else if (own->get("kernels", "from-parent") != std::optional<std::string>("p")) code = 3;
      else own->put("kernels", "from-child", "c");
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  CHECK(wait_exit(pid) == 0);
  CHECK(parent->get("kernels", "from-child") == std::optional<std::string>("c"));
}

TEST_CASE("visit reads a value in place; a miss returns false", "[cache]") {
  kaio::test::TempDir dir;
  auto store = kaio::cache::Store::open(dir.path());
  store->put("kernels", "k", "payload");
  std::string seen;
  CHECK(store->visit("kernels", "k", [&](std::string_view v) { seen = std::string(v); }));
  CHECK(seen == "payload");
  bool called = false;
  CHECK_FALSE(store->visit("kernels", "missing", [&](std::string_view) { called = true; }));
  CHECK_FALSE(called);
}

// A new data.mdb's meta pages land a page at a time inside another process's
// mdb_env_open, under LMDB's setup lock (a write lock on byte 0 of lock.mdb). A file seen
// in that window must not be taken for a damaged one and moved aside: its creator, and
// every process that opened it, would go on writing into the moved file. The child here
// plays the creator: it holds the setup lock, writes the first page of a valid file, waits,
// writes the rest and lets go.
TEST_CASE("store open waits for another process's setup before calling a short file damaged", "[cache][store]") {
  TempDir source, tmp;
  {
    auto s = Store::open(source.path());
    s->put("kernels", "written-before", "v");
  }
  std::string bytes;
  {
    std::ifstream f(source.path() / "data.mdb", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  REQUIRE(bytes.size() > 8192);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    const int lock = ::open((tmp.path() / "lock.mdb").c_str(), O_RDWR | O_CREAT, 0664);
    struct flock w {};
    w.l_type = F_WRLCK;
    w.l_whence = SEEK_SET;
    w.l_start = 0;
    w.l_len = 1;
    if (lock < 0 || fcntl(lock, F_SETLK, &w) != 0) _exit(1);
    const int data = ::open((tmp.path() / "data.mdb").c_str(), O_RDWR | O_CREAT, 0664);
    if (data < 0 || pwrite(data, bytes.data(), 4096, 0) != 4096) _exit(2);
    (void)!write(ready[1], "r", 1);
    usleep(300 * 1000);
    const auto rest = static_cast<ssize_t>(bytes.size() - 4096);
    if (pwrite(data, bytes.data() + 4096, bytes.size() - 4096, 4096) != rest) _exit(3);
    _exit(0);  // exiting releases the lock
  }
  close(ready[1]);
  char byte;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  close(ready[0]);
  {
    auto store = Store::open(tmp.path());
    CHECK(store->get("kernels", "written-before") == std::optional<std::string>("v"));
    CHECK(store->open_notice().empty());
  }
  CHECK(wait_exit(pid) == 0);
  for (const auto& e : fs::directory_iterator(tmp.path()))
    CHECK(e.path().filename().string().rfind("data.mdb.damaged-", 0) == std::string::npos);
}
