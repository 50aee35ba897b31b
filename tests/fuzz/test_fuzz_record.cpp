// Record-decoding fuzzer: corrupt, truncated and foreign records fed to the decoder (in
// process, many cases) and to `kaio-cache show/verify/ls/import` (child processes, so that
// a signal is a failure). CI runs a fixed budget from a fixed seed; see fuzz_support.h.
#include <catch2/catch.hpp>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "kaio/cache/archive.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "../cache/cache_files.h"
#include "fuzz_support.h"

using Catch::Matchers::Contains;
using kaio::test::ChildResult;
using kaio::test::run_tool;
using kaio::test::TempDir;
namespace kc = kaio::cache;

namespace {

std::vector<std::string> base_records() {
  std::vector<std::string> out;
  kc::Record r;
  out.push_back(kc::encode_record(r));  // every field empty
  r.name = "saxpy";
  r.arch = "sm_90";
  r.toolchain = "codegen=1;ptx=9.0;nvjitlink=13.0;record=1";
  r.created_unix = 1700000000;
  r.cubin.assign(300, '\x7f');
  r.ptx = ".version 9.0\n.target sm_90\n";
  r.info_log = "ptxas info: 12 registers";
  out.push_back(kc::encode_record(r));
  r.name = "\xce\xbb-kernel";  // UTF-8 name
  r.cubin.assign(70000, 'c');  // larger than a page: an overflow value in LMDB
  out.push_back(kc::encode_record(r));
  return out;
}

// One mutation of a valid record; `kind` says which (for the failure message).
std::string mutate(std::mt19937_64& rng, const std::string& base, std::string& kind) {
  std::string m = base;
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  auto put = [&](size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes && at + i < m.size(); ++i) m[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  static const uint64_t hostile[] = {0, 1, 0x7f, 0xff, 0xffff, 0x7fffffff, 0xffffffff, 0xffffffffffffffffull,
                                     0x8000000000000000ull};
  switch (pick(8)) {
    case 0:
      kind = "bit flips";
      for (uint64_t i = 0, n = 1 + pick(8); i < n && !m.empty(); ++i) m[pick(m.size())] ^= static_cast<char>(1u << pick(8));
      break;
    case 1:
      kind = "truncated";
      m.resize(pick(m.size()));
      break;
    case 2:
      kind = "extended";
      for (uint64_t i = 0, n = 1 + pick(64); i < n; ++i) m.push_back(static_cast<char>(rng()));
      break;
    case 3:
      kind = "hostile header size";
      put(12, hostile[pick(std::size(hostile))], 4);
      break;
    case 4:
      // A length or size field inside the header: string lengths and the u64 sizes sit
      // at varying offsets, so any 4- or 8-byte slot of the first 200 bytes will do.
      kind = "hostile field";
      put(16 + pick(std::min<size_t>(m.size(), 200)), hostile[pick(std::size(hostile))], pick(2) ? 4 : 8);
      break;
    case 5:
      kind = "foreign magic";
      put(0, rng(), 8);
      break;
    case 6:
      kind = "another schema";
      put(8, kc::kRecordSchema + 1 + pick(1000), 4);
      break;
    default:
      kind = "random bytes";
      m.resize(pick(300));
      for (auto& c : m) c = static_cast<char>(rng());
      break;
  }
  return m;
}

}  // namespace

TEST_CASE("record fuzzer: the decoder rejects every damaged record and accepts only exact encodings",
          "[fuzz][record]") {
  const uint64_t seed = kaio::test::fuzz_seed(12345);
  const uint64_t iterations = kaio::test::fuzz_iterations(20000);
  std::mt19937_64 rng(seed);
  const std::vector<std::string> bases = base_records();
  uint64_t accepted = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    std::string kind;
    const std::string& base = bases[rng() % bases.size()];
    const std::string m = mutate(rng, base, kind);
    std::string why, why_info;
    const auto rec = kaio::cache::decode_record(m, &why);
    const auto info = kaio::cache::decode_record_info(m, true, &why_info);
    const auto unchecked = kaio::cache::decode_record_info(m, false);
    if (rec.has_value() != info.has_value() || (info && !unchecked) || (!rec && why.empty())) {
      FAIL_CHECK("seed " << seed << ", case " << i << " (" << kind << "): decoders disagree: " << why << " / " << why_info);
      continue;
    }
    if (!rec) continue;
    ++accepted;
    // Only a mutation that changed nothing (a field written past the end, the same
    // value) may still decode: anything else would need an xxh3 collision.
    if (m != base) FAIL_CHECK("seed " << seed << ", case " << i << " (" << kind << "): a changed record was accepted");
    // The checksum pins the bytes: what decodes is exactly a record's encoding.
    if (kaio::cache::encode_record(*rec) != m)
      FAIL_CHECK("seed " << seed << ", case " << i << " (" << kind << "): accepted bytes that are no encoding");
    if (info->cubin_bytes != rec->cubin.size() || info->ptx_bytes != rec->ptx.size() ||
        info->log_bytes != rec->info_log.size())
      FAIL_CHECK("seed " << seed << ", case " << i << " (" << kind << "): sizes disagree");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("record fuzzer: seed " << seed << ", " << iterations << " records, " << accepted
                              << " accepted (mutations that changed nothing), " << s << " s");
  CHECK(accepted * 10 < iterations);
}

TEST_CASE("record fuzzer: kaio-cache ls, show and verify on damaged and foreign records", "[fuzz][record][tools]") {
  const uint64_t seed = kaio::test::fuzz_seed(54321);
  const uint64_t rounds = kaio::test::fuzz_iterations(20000) / 5000 + 1;  // 5 rounds in CI
  std::mt19937_64 rng(seed);
  const std::vector<std::string> bases = base_records();
  for (uint64_t round = 0; round < rounds; ++round) {
    INFO("seed " << seed << ", round " << round);
    TempDir dir;
    std::vector<std::pair<std::string, bool>> keys;  // key, valid
    {
      auto store = kc::Store::open(dir.path());
      for (int i = 0; i < 8; ++i) {
        std::string kind;
        const std::string key(16, static_cast<char>(0x10 + i));
        const std::string bytes = i < 2 ? bases[1] : mutate(rng, bases[rng() % bases.size()], kind);
        store->put("kernels", key, bytes);
        store->put("meta", kc::meta_key(key), i == 7 ? std::string("short") : kc::encode_usage({1, 2}));
        keys.emplace_back(key, kc::decode_record(bytes).has_value());
      }
    }
    bool any_bad = false;
    for (const auto& [key, valid] : keys) any_bad |= !valid;
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"ls"}, {"ls", "--json"}, {"ls", "--sort", "size"}, {"stats"}, {"verify"}, {"verify", "--json"}}) {
      const ChildResult r = run_tool(dir.path(), args);
      INFO(args[0] << " " << r.describe());
      REQUIRE(r.exited);
      CHECK(r.code == (args[0] == "verify" && any_bad ? 1 : 0));
    }
    for (const auto& [key, valid] : keys) {
      const std::string prefix = kc::to_hex(key).substr(0, 8);
      for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
               {"show", prefix}, {"show", prefix, "--json"}, {"show", prefix, "--no-ptx", "--cubin", (dir.path() / "c.bin").string()}}) {
        const ChildResult r = run_tool(dir.path(), args);
        INFO("show " << prefix << " " << r.describe());
        REQUIRE(r.exited);
        CHECK(r.code == (valid ? 0 : 1));
      }
    }
    const ChildResult rep = run_tool(dir.path(), {"verify", "--repair"});
    REQUIRE(rep.exited);
    CHECK(rep.code == 0);
    const ChildResult v = run_tool(dir.path(), {"verify"});
    REQUIRE(v.exited);
    CHECK(v.code == 0);
  }
}

TEST_CASE("record fuzzer: kaio-cache import of mutated archives fails cleanly or imports only valid records",
          "[fuzz][record][import]") {
  const uint64_t seed = kaio::test::fuzz_seed(777);
  const uint64_t cases = kaio::test::fuzz_iterations(20000) / 500;  // 40 in CI
  std::mt19937_64 rng(seed);
  TempDir work;
  {
    auto src = kc::Store::open(work.path() / "src");
    const std::vector<std::string> bases = base_records();
    for (size_t i = 0; i < bases.size(); ++i) src->put("kernels", std::string(16, static_cast<char>('a' + i)), bases[i]);
    REQUIRE(kc::export_records(*src, work.path() / "good.kaio").records == bases.size());
  }
  const std::string good = kaio::test::read_file(work.path() / "good.kaio");
  uint64_t refused = 0, imported = 0;
  for (uint64_t i = 0; i < cases; ++i) {
    std::string kind;
    const std::string bytes = mutate(rng, good, kind);
    INFO("seed " << seed << ", case " << i << " (" << kind << ")");
    TempDir dir;
    {
      auto store = kc::Store::open(dir.path());
      store->put("kernels", std::string(16, 'z'), base_records()[1]);
    }
    const std::string before = kaio::test::read_file(dir.path() / "data.mdb");
    const auto file = work.path() / ("case" + std::to_string(i) + ".kaio");
    kaio::test::write_file(file, bytes);
    const ChildResult r = run_tool(dir.path(), {"import", file.string(), "--any-toolchain"});
    INFO(r.describe());
    REQUIRE(r.exited);
    REQUIRE((r.code == 0 || r.code == 1));
    if (r.code == 1) {
      ++refused;
      CHECK_THAT(r.err, Contains("kaio-cache:"));
      CHECK(kaio::test::read_file(dir.path() / "data.mdb") == before);
    } else {
      ++imported;
      const ChildResult v = run_tool(dir.path(), {"verify"});
      REQUIRE(v.exited);
      CHECK(v.code == 0);  // damaged records inside a whole archive are skipped, never stored
    }
  }
  WARN("archive fuzzer: seed " << seed << ", " << cases << " archives, " << refused << " refused, " << imported
                               << " imported");
}
