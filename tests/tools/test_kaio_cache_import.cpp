// kaio-cache import of damaged and hostile archives: a clear error, exit 1, and the cache
// left exactly as it was (not even created when it did not exist).
#include <catch2/catch.hpp>

#include <string>

#include "kaio/cache/archive.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "../cache/cache_files.h"

using Catch::Matchers::Contains;
using kaio::test::ChildResult;
using kaio::test::run_tool;
using kaio::test::TempDir;
namespace kc = kaio::cache;

namespace {

void put_le(std::string& s, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// An export of three records. Layout (cache/archive.h): magic(8) version(4), per record
// key bytes u32, record bytes u64, key, record; end: u32 0, u64 count.
std::string valid_archive(const TempDir& work) {
  auto src = kc::Store::open(work.path() / "src");
  for (int i = 0; i < 3; ++i) {
    kc::Record r;
    r.name = "k" + std::to_string(i);
    r.arch = "sm_90";
    r.toolchain = "tc";
    r.cubin.assign(100 + i, 'c');
    src->put("kernels", std::string(16, static_cast<char>('a' + i)), kc::encode_record(r));
  }
  const auto file = work.path() / "good.kaio";
  REQUIRE(kc::export_records(*src, file).records == 3);
  return kaio::test::read_file(file);
}

}  // namespace

TEST_CASE("kaio-cache import refuses damaged and hostile archives and leaves the cache untouched",
          "[tools][cache][import]") {
  TempDir work;
  const std::string good = valid_archive(work);
  const size_t first_entry = 12;
  const size_t first_record = first_entry + 12 + 16;

  struct Case {
    const char* name;
    std::string bytes;
    const char* says;
  };
  std::vector<Case> cases;
  auto with = [&](auto edit) {
    std::string s = good;
    edit(s);
    return s;
  };
  cases.push_back({"empty file", "", "wrong magic"});
  cases.push_back({"wrong magic", with([](std::string& s) { s[0] = 'X'; }), "wrong magic"});
  cases.push_back({"another version", with([](std::string& s) { put_le(s, 8, 7, 4); }), "unsupported version"});
  cases.push_back({"truncated in a record", good.substr(0, first_record + 10), "remain"});
  cases.push_back({"truncated before the end marker", good.substr(0, good.size() - 12), "truncated"});
  cases.push_back({"a huge record size", with([&](std::string& s) { put_le(s, first_entry + 4, uint64_t(1) << 62, 8); }),
                   "record of"});
  cases.push_back({"a record size past the end",
                   with([&](std::string& s) { put_le(s, first_entry + 4, s.size(), 8); }), "remain"});
  cases.push_back({"a huge key size", with([&](std::string& s) { put_le(s, first_entry, 0xffffffffu, 4); }), "key of"});
  cases.push_back({"a wrong record count", with([](std::string& s) { put_le(s, s.size() - 8, 2, 8); }), "counts 2"});
  cases.push_back({"bytes after the end marker", good + "junk", "after the end marker"});

  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      TempDir dir;
      // An existing cache with one record, whose file must not change.
      {
        auto store = kc::Store::open(dir.path());
        kc::Record r;
        r.name = "existing";
        r.toolchain = "tc";
        store->put("kernels", std::string(16, 'z'), kc::encode_record(r));
      }
      const std::string before = kaio::test::read_file(dir.path() / "data.mdb");
      const auto file = work.path() / "bad.kaio";
      kaio::test::write_file(file, c.bytes);
      const ChildResult r = run_tool(dir.path(), {"import", file.string(), "--any-toolchain"});
      INFO(r.describe());
      REQUIRE(r.exited);
      CHECK(r.code == 1);
      CHECK_THAT(r.err, Contains("not a valid kaio cache export") && Contains(c.says));
      CHECK(kaio::test::read_file(dir.path() / "data.mdb") == before);
      // A cache that did not exist is not created.
      const auto fresh = dir.path() / "not-there";
      const ChildResult r2 = run_tool(fresh, {"import", file.string()});
      CHECK(r2.exited);
      CHECK(r2.code == 1);
      CHECK_FALSE(std::filesystem::exists(fresh));
    }
  }
  SECTION("the valid archive imports") {
    TempDir dir;
    const auto file = work.path() / "good-copy.kaio";
    kaio::test::write_file(file, good);
    const ChildResult r = run_tool(dir.path(), {"import", file.string(), "--any-toolchain"});
    INFO(r.describe());
    REQUIRE(r.exited);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Contains("imported 3 records"));
  }
}
