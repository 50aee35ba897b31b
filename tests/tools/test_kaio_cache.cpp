// kaio-cache run as a subprocess over a cache populated through Store.
#include <catch2/catch.hpp>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "../support.h"

#ifndef KAIO_CACHE_TOOL_REL
#error "KAIO_CACHE_TOOL_REL must name the kaio-cache executable"
#endif

using Catch::Matchers::Contains;
using kaio::cache::Record;
using kaio::test::run_command;
using kaio::test::TempDir;

namespace {

// Keys are 16 raw bytes; the tool shows them as lowercase hex.
const std::string kKeyA("\x01\x23\x45\x67\x89\xab\xcd\xef\x00\x11\x22\x33\x44\x55\x66\x77", 16);
const std::string kKeyB("\xfe\xdc\xba\x98\x76\x54\x32\x10\xff\xee\xdd\xcc\xbb\xaa\x99\x88", 16);
const std::string kKeyBad(16, '\x5a');

Record make_record(const std::string& name, const std::string& arch, size_t cubin_bytes,
                   size_t ptx_bytes, uint64_t age_seconds) {
  Record r;
  r.name = name;
  r.arch = arch;
  r.toolchain = "codegen=1;ptx=8.4";
  r.created_unix = static_cast<uint64_t>(std::time(nullptr)) - age_seconds;
  r.cubin.assign(cubin_bytes, 'c');
  r.ptx.assign(ptx_bytes, 'p');
  r.info_log = "info";
  return r;
}

// Three entries: two records and one value that is not a record.
void populate(const std::filesystem::path& dir) {
  auto store = kaio::cache::Store::open(dir);
  store->put("kernels", kKeyA, kaio::cache::encode_record(make_record("saxpy_f32", "sm_90", 2048, 1000, 3 * 3600 + 5)));
  store->put("kernels", kKeyB, kaio::cache::encode_record(make_record("reduce_sum", "sm_80", 100, 28, 90)));
  store->put("kernels", kKeyBad, "garbage");
}

std::string tool(const std::string& args) { return "'" + kaio::test::cache_tool_exe() + "' " + args; }
std::string quoted(const TempDir& d) { return "'" + d.str() + "'"; }

}  // namespace

TEST_CASE("kaio-cache ls lists records as a table", "[tools][cache]") {
  TempDir dir;
  populate(dir.path());
  const auto r = run_command(tool("--cache-dir " + quoted(dir) + " ls"));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("NAME") && Contains("KEY") && Contains("ARCH") && Contains("SIZE") &&
                        Contains("AGE"));
  CHECK_THAT(r.out, Contains("saxpy_f32") && Contains("0123456789ab") && Contains("sm_90"));
  CHECK_THAT(r.out, Contains("reduce_sum") && Contains("fedcba987654") && Contains("sm_80"));
  CHECK_THAT(r.out, Contains("3.0 KiB") && Contains("128 B"));  // cubin + ptx
  CHECK_THAT(r.out, Contains("3h") && Contains("1m"));
  CHECK_THAT(r.out, Contains("<corrupt>") && Contains("5a5a5a5a5a5a"));
  // The table shows only the first 12 hex digits of a key.
  CHECK_THAT(r.out, !Contains("0123456789abcdef"));
  CHECK_THAT(r.out, Contains("3 kernels, 3.1 KiB total"));
}

TEST_CASE("kaio-cache ls --json", "[tools][cache]") {
  TempDir dir;
  populate(dir.path());
  // The global option may also follow the subcommand.
  const auto r = run_command(tool("ls --json --cache-dir " + quoted(dir)));
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 3);

  bool saw_a = false, saw_bad = false;
  for (const auto& e : j) {
    if (e.at("key") == "0123456789abcdef0011223344556677") {
      saw_a = true;
      CHECK(e.at("name") == "saxpy_f32");
      CHECK(e.at("arch") == "sm_90");
      CHECK(e.at("toolchain") == "codegen=1;ptx=8.4");
      CHECK(e.at("cubin_bytes") == 2048);
      CHECK(e.at("ptx_bytes") == 1000);
      CHECK(e.at("created_unix").get<uint64_t>() <= static_cast<uint64_t>(std::time(nullptr)));
    } else if (e.at("name") == "<corrupt>") {
      saw_bad = true;
      std::string hex;
      for (int i = 0; i < 16; ++i) hex += "5a";
      CHECK(e.at("key") == hex);
      CHECK_FALSE(e.at("error").get<std::string>().empty());
    }
  }
  CHECK(saw_a);
  CHECK(saw_bad);
}

TEST_CASE("kaio-cache on an empty cache prints only the header", "[tools][cache]") {
  TempDir dir;
  kaio::cache::Store::open(dir.path());
  const auto r = run_command(tool("--cache-dir " + quoted(dir) + " ls"));
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Contains("NAME"));
  CHECK_THAT(r.out, Contains("0 kernels, 0 B total"));
}

TEST_CASE("kaio-cache on a missing cache says so and creates nothing", "[tools][cache]") {
  TempDir dir;
  const auto missing = dir.path() / "nothing-here";
  const auto r = run_command(tool("--cache-dir '" + missing.string() + "' ls"));
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("no cache at"));
  CHECK_FALSE(std::filesystem::exists(missing));

  // --json still prints valid JSON.
  const auto j = run_command(tool("--cache-dir '" + missing.string() + "' ls --json 2>/dev/null"));
  CHECK(j.status == 0);
  CHECK(nlohmann::json::parse(j.out) == nlohmann::json::array());
}

TEST_CASE("kaio-cache --help and usage errors", "[tools][cache]") {
  const auto help = run_command(tool("--help"));
  CHECK(help.status == 0);
  CHECK_THAT(help.out, Contains("ls") && Contains("--cache-dir"));

  const auto ls_help = run_command(tool("ls --help"));
  CHECK(ls_help.status == 0);
  CHECK_THAT(ls_help.out, Contains("--json"));

  CHECK(run_command(tool("2>/dev/null")).status != 0);              // no subcommand
  CHECK(run_command(tool("frobnicate 2>/dev/null")).status != 0);   // unknown subcommand
}

TEST_CASE("kaio-cache fails clearly when the cache cannot be opened", "[tools][cache]") {
  TempDir dir;
  // data.mdb exists but is not an LMDB file.
  { std::FILE* f = std::fopen((dir.path() / "data.mdb").c_str(), "w"); REQUIRE(f); std::fputs("junk", f); std::fclose(f); }
  const auto r = run_command(tool("--cache-dir " + quoted(dir) + " ls 2>&1"));
  CHECK(r.status != 0);
  CHECK_THAT(r.out, Contains("kaio-cache") && Contains("LMDB"));
}
