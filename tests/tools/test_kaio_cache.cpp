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

// ---------------------------------------------------------------------------------------
// The maintenance subcommands.

#include <fstream>
#include <sstream>

#include "kaio/cache/meta.h"
#include "kaio/jit/compile.h"

namespace {

namespace kc = kaio::cache;

std::string at(const TempDir& d) { return "--cache-dir " + quoted(d) + " "; }

std::string key_n(int i) {
  std::string k(16, '\0');
  k[0] = static_cast<char>(0xc0);
  k[1] = static_cast<char>(i);
  for (int j = 2; j < 16; ++j) k[j] = static_cast<char>(i * 31 + j);
  return k;
}

// `n` current-toolchain records "lru_<i>", created 10 days ago; record i was last used
// n - i hours ago (the higher i, the more recent) and has i hits. Counters: 30 hits, 10 misses.
void populate_lru(const std::filesystem::path& dir, int n) {
  auto store = kc::Store::open(dir);
  const uint64_t now = kc::now_unix_us();
  store->update([&](kc::Txn& t) {
    for (int i = 0; i < n; ++i) {
      Record r = make_record("lru_" + std::to_string(i), i % 2 ? "sm_80" : "sm_90", 8000, 500, 10 * 86400);
      r.toolchain = kaio::jit::toolchain_id();
      kc::put_record(t, key_n(i), kc::encode_record(r), true, 0);
      t.put("meta", kc::meta_key(key_n(i)),
            kc::encode_usage({now - uint64_t(n - i) * 3600 * 1000000, uint64_t(i)}));
    }
    kc::add_counters(t, 30, 10);
  });
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("kaio-cache every subcommand answers --help", "[tools][cache]") {
  for (const char* sub : {"ls", "show", "stats", "rm", "clear", "prune", "verify", "export", "import", "tune", "tune ls"}) {
    INFO(sub);
    const auto r = run_command(tool(std::string(sub) + " --help"));
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Contains("Usage"));
  }
  CHECK_THAT(run_command(tool("ls --help")).out, Contains("--sort") && Contains("--name") && Contains("--arch"));
  CHECK_THAT(run_command(tool("prune --help")).out, Contains("--max-bytes") && Contains("--older-than"));
}

TEST_CASE("kaio-cache ls filters and sorts", "[tools][cache]") {
  TempDir dir;
  populate(dir.path());
  SECTION("by name glob") {
    const auto r = run_command(tool(at(dir) + "ls --name 'sax*'"));
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("saxpy_f32") && !Contains("reduce_sum") && Contains("1 kernels"));
  }
  SECTION("by arch") {
    const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --arch sm_80 --json")).out);
    REQUIRE(j.size() == 1);
    CHECK(j[0].at("name") == "reduce_sum");
  }
  SECTION("by size, largest first, and reversed") {
    auto j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --sort size --json")).out);
    REQUIRE(j.size() == 3);
    CHECK(j[0].at("name") == "saxpy_f32");
    CHECK(j[2].at("name") == "<corrupt>");  // damaged entries always last
    j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --sort size --reverse --json")).out);
    CHECK(j[0].at("name") == "reduce_sum");
  }
  SECTION("by age, oldest first") {
    const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --sort age --json")).out);
    CHECK(j[0].at("name") == "saxpy_f32");
  }
  SECTION("an unknown sort key is a usage error") {
    CHECK(run_command(tool(at(dir) + "ls --sort colour 2>/dev/null")).status != 0);
  }
}

TEST_CASE("kaio-cache ls by last use and hits", "[tools][cache]") {
  TempDir dir;
  populate_lru(dir.path(), 5);
  auto j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --sort hits --json")).out);
  REQUIRE(j.size() == 5);
  CHECK(j[0].at("name") == "lru_4");
  CHECK(j[0].at("hits") == 4);
  j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --sort last-use --json")).out);
  CHECK(j[0].at("name") == "lru_4");
  CHECK(j[4].at("name") == "lru_0");
  const auto t = run_command(tool(at(dir) + "ls --sort last-use"));
  CHECK_THAT(t.out, Contains("LAST USE") && Contains("HITS") && Contains("1h") && Contains("5h") && Contains("10d"));
}

TEST_CASE("kaio-cache show prints a record and writes its cubin", "[tools][cache]") {
  TempDir dir;
  auto store = kc::Store::open(dir.path());
  Record r = make_record("saxpy_f32", "sm_90", 0, 0, 60);
  r.cubin = std::string("\x7f" "ELF", 4) + std::string(100, '\x01');
  r.ptx = ".version 9.0\n.target sm_90\n";
  r.info_log = "ptxas info    : Used 8 registers, 380 bytes cmem[0]";
  store->put("kernels", kKeyA, kc::encode_record(r));
  store->put("kernels", kKeyB, kc::encode_record(make_record("reduce_sum", "sm_80", 10, 10, 60)));
  store->put("kernels", std::string("\x01\x24", 2) + std::string(14, '\0'), kc::encode_record(r));
  store->put("kernels", kKeyBad, "garbage");

  const auto cubin = dir.path() / "out.cubin";
  const auto s = run_command(tool(at(dir) + "show 012345 --cubin '" + cubin.string() + "'"));
  REQUIRE(s.status == 0);
  CHECK_THAT(s.out, Contains("0123456789abcdef0011223344556677") && Contains("saxpy_f32") && Contains("sm_90"));
  CHECK_THAT(s.out, Contains("resource report") && Contains("Used 8 registers"));
  CHECK_THAT(s.out, Contains("--- PTX ---") && Contains(".target sm_90"));
  CHECK_THAT(s.out, Contains("not this kaio's"));  // a made-up toolchain
  CHECK(slurp(cubin) == r.cubin);

  const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "show FEDC --json")).out);
  CHECK(j.at("name") == "reduce_sum");
  CHECK(j.at("cubin_bytes") == 10);
  CHECK(j.at("ptx") == std::string(10, 'p'));
  CHECK(j.at("info_log") == "info");

  const auto amb = run_command(tool(at(dir) + "show 01 2>&1"));
  CHECK(amb.status == 1);
  CHECK_THAT(amb.out, Contains("ambiguous"));
  const auto none = run_command(tool(at(dir) + "show 99 2>&1"));
  CHECK(none.status == 1);
  CHECK_THAT(none.out, Contains("no record"));
  CHECK(run_command(tool(at(dir) + "show xyz 2>/dev/null")).status == 1);
  const auto bad = run_command(tool(at(dir) + "show 5a5a"));
  CHECK(bad.status == 1);
  CHECK_THAT(bad.out, Contains("damaged"));
}

TEST_CASE("kaio-cache stats", "[tools][cache]") {
  TempDir dir;
  populate_lru(dir.path(), 4);
  const auto t = run_command(tool(at(dir) + "stats"));
  REQUIRE(t.status == 0);
  CHECK_THAT(t.out, Contains("entries") && Contains("hit rate") && Contains("75.0%") && Contains("map") &&
                        Contains("KAIO_CACHE_MAX_BYTES"));
  const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "stats --json")).out);
  CHECK(j.at("entries") == 4);
  CHECK(j.at("hits") == 30);
  CHECK(j.at("misses") == 10);
  CHECK(j.at("hit_rate").get<double>() == Approx(0.75));
  CHECK(j.at("map_bytes").get<uint64_t>() >= j.at("map_used_bytes").get<uint64_t>());
  CHECK(j.at("cache_bytes").get<uint64_t>() > 4 * 8000);
  CHECK(j.at("max_bytes").get<uint64_t>() == kc::kDefaultMaxBytes);
  CHECK(j.at("other_toolchain") == 0);

  TempDir none;
  CHECK_THAT(run_command(tool("--cache-dir '" + (none.path() / "x").string() + "' stats")).out, Contains("no cache"));
}

TEST_CASE("kaio-cache rm and clear", "[tools][cache]") {
  TempDir dir;
  populate(dir.path());
  CHECK(run_command(tool(at(dir) + "rm 0123 ffff 2>/dev/null")).status == 1);  // ffff names nothing: nothing removed
  CHECK(kc::Store::open(dir.path())->count("kernels") == 3);
  const auto r = run_command(tool(at(dir) + "rm 0123 fedcba"));
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Contains("removed 0123456789ab  saxpy_f32") && Contains("reduce_sum"));
  CHECK(kc::Store::open(dir.path())->count("kernels") == 1);

  populate_lru(dir.path(), 3);
  kc::Store::open(dir.path())->put("tuning", "t", "v");
  CHECK_THAT(run_command(tool(at(dir) + "clear")).out, Contains("removed 4 records"));
  auto store = kc::Store::open(dir.path());
  CHECK(store->count("kernels") == 0);
  CHECK(store->count("meta") == 0);
  CHECK(store->count("tuning") == 1);
  CHECK_THAT(run_command(tool(at(dir) + "clear --tuning")).out, Contains("1 tuning"));
  CHECK(store->count("tuning") == 0);
}

TEST_CASE("kaio-cache prune", "[tools][cache]") {
  TempDir dir;
  populate_lru(dir.path(), 20);  // lru_i last used 20 - i hours ago
  auto store = kc::Store::open(dir.path());
  auto present = [&](int i) { return store->get("kernels", key_n(i)).has_value(); };

  SECTION("--max-bytes keeps the most recently used") {
    uint64_t before = 0;
    store->view([&](kc::Txn& t) { before = kc::cache_bytes(t); });
    const uint64_t cap = before / 2;
    const auto r = run_command(tool(at(dir) + "prune --max-bytes " + std::to_string(cap)));
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("least recently used"));
    uint64_t after = 0;
    store->view([&](kc::Txn& t) { after = kc::cache_bytes(t); });
    CHECK(after <= cap);
    CHECK_FALSE(present(0));
    CHECK(present(19));
    // Survivors are a suffix: the most recent ones.
    bool seen = false;
    for (int i = 0; i < 20; ++i) {
      if (present(i)) seen = true;
      else CHECK_FALSE(seen);
    }
  }
  SECTION("--older-than") {
    const auto r = run_command(tool(at(dir) + "prune --older-than 10h"));
    REQUIRE(r.status == 0);
    for (int i = 0; i < 20; ++i) CHECK(present(i) == (20 - i < 10));
    CHECK(run_command(tool(at(dir) + "prune --older-than 1d")).status == 0);
    CHECK(store->count("kernels") == 9);
  }
  SECTION("--stale drops damaged records and other toolchains") {
    store->put("kernels", kKeyBad, "garbage");
    store->put("kernels", kKeyA, kc::encode_record(make_record("old", "sm_90", 10, 10, 0)));
    CHECK(store->count("kernels") == 22);
    CHECK(run_command(tool(at(dir) + "prune --stale")).status == 0);
    CHECK(store->count("kernels") == 20);
  }
  SECTION("bad arguments") {
    CHECK(run_command(tool(at(dir) + "prune 2>/dev/null")).status == 1);
    CHECK(run_command(tool(at(dir) + "prune --max-bytes lots 2>/dev/null")).status == 1);
    CHECK(run_command(tool(at(dir) + "prune --older-than soon 2>/dev/null")).status == 1);
    CHECK(store->count("kernels") == 20);
  }
}

TEST_CASE("kaio-cache verify and --repair", "[tools][cache]") {
  TempDir dir;
  populate(dir.path());
  // A record with a flipped payload byte.
  std::string flipped = kc::encode_record(make_record("flipped", "sm_90", 100, 100, 0));
  flipped[flipped.size() / 2] ^= 0x10;
  kc::Store::open(dir.path())->put("kernels", std::string(16, '\x33'), flipped);

  const auto r = run_command(tool(at(dir) + "verify"));
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Contains("4 records checked: 2 ok, 2 damaged") && Contains("checksum") && Contains("333333333333"));
  CHECK_THAT(r.out, Contains("other toolchain"));
  const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "verify --json")).out);
  CHECK(j.at("checked") == 4);
  CHECK(j.at("damaged").size() == 2);
  CHECK(j.at("other_toolchain").size() == 2);

  const auto fix = run_command(tool(at(dir) + "verify --repair"));
  CHECK(fix.status == 0);
  CHECK_THAT(fix.out, Contains("removed"));
  const auto again = run_command(tool(at(dir) + "verify"));
  CHECK(again.status == 0);
  CHECK_THAT(again.out, Contains("2 records checked: 2 ok, 0 damaged"));
}

TEST_CASE("kaio-cache export and import ship a warm cache", "[tools][cache]") {
  TempDir src, dst, any, files;
  populate_lru(src.path(), 6);
  populate(src.path());  // two records of another toolchain, one damaged
  const auto file = files.path() / "warm.kaio";
  const auto e = run_command(tool(at(src) + "export '" + file.string() + "'"));
  REQUIRE(e.status == 0);
  CHECK_THAT(e.out, Contains("exported 8 records") && Contains("MB/s") && Contains("left out 1 damaged"));

  const auto i = run_command(tool(at(dst) + "import '" + file.string() + "'"));
  REQUIRE(i.status == 0);
  CHECK_THAT(i.out, Contains("imported 6 records") && Contains("2 for another toolchain"));
  auto store = kc::Store::open(dst.path());
  CHECK(store->count("kernels") == 6);
  for (int n = 0; n < 6; ++n)
    CHECK(store->get("kernels", key_n(n)) == kc::Store::open(src.path())->get("kernels", key_n(n)));
  // Imported records have a last use (now), so the size cap treats them as fresh.
  store->view([&](kc::Txn& t) { CHECK(kc::usage_of(t, key_n(0)).last_use_us > 0); });

  // A second import finds them present.
  CHECK_THAT(run_command(tool(at(dst) + "import '" + file.string() + "'")).out, Contains("imported 0") && Contains("6 already present"));
  CHECK_THAT(run_command(tool(at(any) + "import --any-toolchain '" + file.string() + "'")).out, Contains("imported 8"));
  CHECK(run_command(tool(at(dst) + "verify")).status == 0);

  // Not an export, or cut short.
  { std::ofstream(files.path() / "junk") << "junk"; }
  CHECK(run_command(tool(at(dst) + "import '" + (files.path() / "junk").string() + "' 2>/dev/null")).status == 1);
  const std::string whole = slurp(file);
  { std::ofstream(files.path() / "cut", std::ios::binary) << whole.substr(0, whole.size() - 100); }
  const auto cut = run_command(tool(at(dst) + "import '" + (files.path() / "cut").string() + "' 2>&1"));
  CHECK(cut.status == 1);
  CHECK_THAT(cut.out, Contains("truncated"));
}

TEST_CASE("kaio-cache tune ls", "[tools][cache]") {
  TempDir dir;
  kc::Store::open(dir.path());
  const auto t = run_command(tool(at(dir) + "tune ls"));
  CHECK(t.status == 0);
  CHECK_THAT(t.out, Contains("KEY") && Contains("WINNER") && Contains("MARGIN") && Contains("0 tuning entries"));
  CHECK(nlohmann::json::parse(run_command(tool(at(dir) + "tune ls --json")).out) == nlohmann::json::array());
  kc::Store::open(dir.path())->put("tuning", "gemm/sm_90/1024", "tile=128");  // not a tuning record
  const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "tune ls --json")).out);
  REQUIRE(j.size() == 1);
  CHECK(j[0].at("key") == "gemm/sm_90/1024");
  CHECK_THAT(j[0].at("damaged").get<std::string>(), Contains("magic"));
  TempDir none;
  CHECK(nlohmann::json::parse(run_command(tool("--cache-dir '" + (none.path() / "x").string() + "' tune ls --json")).out) ==
        nlohmann::json::array());
}

TEST_CASE("kaio-cache ls --json escapes names", "[tools][cache]") {
  TempDir dir;
  const std::string odd = "we\"ird\\name\n\t\x01";
  kc::Store::open(dir.path())->put("kernels", kKeyA, kc::encode_record(make_record(odd, "sm_90", 1, 1, 0)));
  const auto j = nlohmann::json::parse(run_command(tool(at(dir) + "ls --json")).out);
  REQUIRE(j.size() == 1);
  CHECK(j[0].at("name") == odd);
  CHECK(j[0].at("hits") == 0);
}
