// The cache policy layer: transactions, use counts, the size cap, parsing of sizes and
// durations, export/import.
#include <catch2/catch.hpp>

#include <fstream>
#include <stdexcept>
#include <string>

#include "kaio/cache/archive.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/ir/error.h"
#include "../support.h"

namespace kc = kaio::cache;
using kaio::test::ScopedEnv;
using kaio::test::TempDir;

namespace {

std::string rec_bytes(const std::string& name, size_t cubin, const std::string& toolchain = "tc") {
  kc::Record r;
  r.name = name;
  r.arch = "sm_90";
  r.toolchain = toolchain;
  r.created_unix = 1000;
  r.cubin.assign(cubin, 'c');
  return kc::encode_record(r);
}

uint64_t bytes_of(kc::Store& s) {
  uint64_t n = 0;
  s.view([&](kc::Txn& t) { n = kc::cache_bytes(t); });
  return n;
}

}  // namespace

TEST_CASE("parse_bytes and parse_duration_seconds", "[cache][meta]") {
  CHECK(kc::parse_bytes("1234") == 1234u);
  CHECK(kc::parse_bytes("4G") == (uint64_t(4) << 30));
  CHECK(kc::parse_bytes("4GiB") == (uint64_t(4) << 30));
  CHECK(kc::parse_bytes("512m") == (uint64_t(512) << 20));
  CHECK(kc::parse_bytes("64 KiB") == (uint64_t(64) << 10));
  CHECK(kc::parse_bytes("0") == 0u);
  CHECK_FALSE(kc::parse_bytes("").has_value());
  CHECK_FALSE(kc::parse_bytes("G").has_value());
  CHECK_FALSE(kc::parse_bytes("12X").has_value());
  CHECK_FALSE(kc::parse_bytes("-1").has_value());
  CHECK_FALSE(kc::parse_bytes("99999999999999999999").has_value());
  CHECK_FALSE(kc::parse_bytes("17179869184T").has_value());  // overflows
  CHECK(kc::parse_duration_seconds("7d") == 7u * 86400);
  CHECK(kc::parse_duration_seconds("12h") == 12u * 3600);
  CHECK(kc::parse_duration_seconds("30m") == 1800u);
  CHECK(kc::parse_duration_seconds("45s") == 45u);
  CHECK(kc::parse_duration_seconds("2w") == 14u * 86400);
  CHECK(kc::parse_duration_seconds("90") == 90u);
  CHECK_FALSE(kc::parse_duration_seconds("soon").has_value());
  CHECK_FALSE(kc::parse_duration_seconds("7y").has_value());
}

TEST_CASE("KAIO_CACHE_MAX_BYTES", "[cache][meta]") {
  {
    ScopedEnv e("KAIO_CACHE_MAX_BYTES", std::nullopt);
    CHECK(kc::max_bytes_from_env() == kc::kDefaultMaxBytes);
  }
  {
    ScopedEnv e("KAIO_CACHE_MAX_BYTES", "256M");
    CHECK(kc::max_bytes_from_env() == (uint64_t(256) << 20));
  }
  {
    ScopedEnv e("KAIO_CACHE_MAX_BYTES", "lots");
    std::string err;
    CHECK(kc::max_bytes_from_env(&err) == kc::kDefaultMaxBytes);
    CHECK_THAT(err, Catch::Contains("KAIO_CACHE_MAX_BYTES"));
  }
}

TEST_CASE("Store::update is all or nothing", "[cache][store]") {
  TempDir tmp;
  auto store = kc::Store::open(tmp.path());
  CHECK_THROWS_AS(store->update([](kc::Txn& t) {
    t.put("kernels", "a", "1");
    throw std::runtime_error("boom");
  }),
                  std::runtime_error);
  CHECK_FALSE(store->get("kernels", "a").has_value());
  store->update([](kc::Txn& t) {
    t.put("kernels", "a", "1");
    t.put("kernels", "b", "2");
    CHECK_FALSE(t.put("kernels", "a", "3", false));
    CHECK(t.get("kernels", "a") == std::optional<std::string_view>("1"));
    CHECK(t.erase("kernels", "b"));
    CHECK_FALSE(t.erase("kernels", "b"));
  });
  CHECK(store->count("kernels") == 1);
  // A view is read-only.
  store->view([](kc::Txn& t) { CHECK_THROWS_AS(t.put("kernels", "x", "y"), kaio::UsageError); });
  store->update([](kc::Txn& t) { t.clear("kernels"); });
  CHECK(store->count("kernels") == 0);
}

TEST_CASE("Store::update grows the map and reruns on MDB_MAP_FULL", "[cache][store]") {
  TempDir tmp;
  ScopedEnv small("KAIO_CACHE_INITIAL_MAP_BYTES", std::to_string(1 << 20));
  auto store = kc::Store::open(tmp.path());
  int runs = 0;
  store->update([&](kc::Txn& t) {
    ++runs;
    for (int i = 0; i < 64; ++i) t.put("kernels", "k" + std::to_string(i), std::string(64 << 10, 'x'));
  });
  CHECK(runs > 1);
  CHECK(store->count("kernels") == 64);
  CHECK(store->map_size() > (1u << 20));
  const kc::Store::Usage u = store->usage();
  CHECK(u.used_bytes >= 64u * (64 << 10));
  CHECK(u.map_bytes >= u.used_bytes);
  CHECK(u.file_bytes > 0);
  CHECK(u.page_bytes >= 4096);
}

TEST_CASE("use counts: last use only moves forward, hits add up, gone records are skipped", "[cache][meta]") {
  TempDir tmp;
  auto store = kc::Store::open(tmp.path());
  store->update([&](kc::Txn& t) {
    kc::put_record(t, "key1", rec_bytes("a", 100), false, 0);
    const uint64_t written = kc::usage_of(t, "key1").last_use_us;
    CHECK(written > 0);
    kc::add_usage(t, "key1", written + 10, 2);
    kc::add_usage(t, "key1", written + 5, 3);  // older time: kept at +10
    kc::add_usage(t, "gone", written, 1);      // no record: nothing
    const kc::KeyUsage u = kc::usage_of(t, "key1");
    CHECK(u.last_use_us == written + 10);
    CHECK(u.hits == 5);
    CHECK_FALSE(t.get("meta", kc::meta_key("gone")).has_value());
    // A record without meta entry counts as used when it was created.
    t.put("kernels", "bare", rec_bytes("b", 10));
    CHECK(kc::usage_of(t, "bare").last_use_us == 1000u * 1000000);
    kc::add_counters(t, 3, 1);
    kc::add_counters(t, 1, 0);
    CHECK(kc::read_counters(t).hits == 4);
    CHECK(kc::read_counters(t).misses == 1);
    // Replacing a record keeps its hits.
    kc::put_record(t, "key1", rec_bytes("a2", 100), true, 0);
    CHECK(kc::usage_of(t, "key1").hits == 5);
  });
}

TEST_CASE("put_record keeps the cache under the cap, least recently used first", "[cache][meta]") {
  TempDir tmp;
  auto store = kc::Store::open(tmp.path());
  const uint64_t cap = 40 * 8192;  // each record below takes two 4 KiB overflow pages
  for (int i = 0; i < 100; ++i) {
    store->update([&](kc::Txn& t) { CHECK(kc::put_record(t, "r" + std::to_string(1000 + i), rec_bytes("r", 5000), false, cap)); });
    CHECK(bytes_of(*store) <= cap);
    if (i == 10) {  // r1000 is used again: it outlives the records written before it was used
      store->update([&](kc::Txn& t) { kc::add_usage(t, "r1000", kc::now_unix_us(), 1); });
    }
  }
  CHECK(store->get("kernels", "r1099").has_value());
  CHECK(store->get("kernels", "r1000").has_value() == (store->get("kernels", "r1011").has_value()));
  CHECK_FALSE(store->get("kernels", "r1001").has_value());
  CHECK(store->count("kernels") < 40);
  CHECK(store->count("meta") == store->count("kernels"));  // evicted records take their meta entry along

  // A record bigger than the cap on its own is not stored.
  store->update([&](kc::Txn& t) { CHECK_FALSE(kc::put_record(t, "huge", rec_bytes("h", cap), false, cap)); });
  CHECK_FALSE(store->get("kernels", "huge").has_value());
  // keep is never evicted.
  store->update([&](kc::Txn& t) {
    kc::evict_lru(t, 0, "r1099");
    CHECK(t.count("kernels") == 1);
  });
  CHECK(store->get("kernels", "r1099").has_value());
}

TEST_CASE("remove_unused_since and remove_unservable", "[cache][meta]") {
  TempDir tmp;
  auto store = kc::Store::open(tmp.path());
  store->update([&](kc::Txn& t) {
    t.put("kernels", "old", rec_bytes("old", 10));  // created at 1000 s, no meta
    kc::put_record(t, "new", rec_bytes("new", 10), false, 0);
    kc::put_record(t, "foreign", rec_bytes("f", 10, "other"), false, 0);
    t.put("kernels", "broken", "garbage");
    t.put("meta", kc::meta_key("orphan"), kc::encode_usage({1, 1}));
  });
  store->update([&](kc::Txn& t) {
    CHECK(kc::remove_unused_since(t, 2000u * 1000000).records == 2);  // old, broken (no time)
    CHECK(t.count("kernels") == 2);
  });
  store->update([&](kc::Txn& t) {
    t.put("kernels", "broken", "garbage");
    const kc::Removed r = kc::remove_unservable(t, "tc");
    CHECK(r.records == 2);  // foreign, broken
    CHECK(t.get("kernels", "new").has_value());
    CHECK_FALSE(t.get("meta", kc::meta_key("orphan")).has_value());
  });
}

TEST_CASE("export and import round trip; import filters by toolchain", "[cache][archive]") {
  TempDir a, b, files;
  auto src = kc::Store::open(a.path());
  src->update([&](kc::Txn& t) {
    for (int i = 0; i < 50; ++i) t.put("kernels", "k" + std::to_string(i), rec_bytes("k", 100 + i * 37, i % 5 ? "tc" : "old"));
    t.put("kernels", "bad", "garbage");
  });
  const auto file = files.path() / "x.kaio";
  const kc::ExportResult ex = kc::export_records(*src, file);
  CHECK(ex.records == 50);
  CHECK(ex.damaged == 1);
  CHECK_FALSE(std::filesystem::exists(file.string() + ".part"));

  auto dst = kc::Store::open(b.path());
  dst->put("kernels", "k1", rec_bytes("mine", 1));
  const kc::ImportResult im = kc::import_records(*dst, file, "tc", 0);
  CHECK(im.imported == 39);
  CHECK(im.present == 1);
  CHECK(im.other_toolchain == 10);
  CHECK(im.damaged == 0);
  CHECK(dst->get("kernels", "k1") == std::optional<std::string>(rec_bytes("mine", 1)));  // never overwritten
  CHECK(dst->get("kernels", "k2") == src->get("kernels", "k2"));
  CHECK_FALSE(dst->get("kernels", "k0").has_value());

  // A damaged record inside an export is skipped, not imported.
  std::string bytes;
  {
    std::ifstream f(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[bytes.size() / 2] ^= 0x20;
  { std::ofstream(files.path() / "y.kaio", std::ios::binary) << bytes; }
  TempDir c;
  const kc::ImportResult im2 = kc::import_records(*kc::Store::open(c.path()), files.path() / "y.kaio", "", 0);
  CHECK(im2.damaged == 1);
  CHECK(im2.imported == 49);
  CHECK_THROWS_AS(kc::import_records(*dst, files.path() / "missing", "", 0), kaio::ToolError);
}
