// kaio-cache: inspects and looks after the kernel cache.
//
//   kaio-cache [--cache-dir DIR] ls [--name GLOB] [--arch ARCH] [--sort KEY] [--reverse] [--json]
//   kaio-cache show KEY-PREFIX [--cubin FILE] [--no-ptx] [--json]
//   kaio-cache stats [--json]
//   kaio-cache rm KEY-PREFIX...
//   kaio-cache clear [--tuning]
//   kaio-cache prune [--max-bytes N] [--older-than DURATION] [--stale]
//   kaio-cache verify [--repair] [--json]
//   kaio-cache export FILE
//   kaio-cache import FILE [--any-toolchain]
//   kaio-cache tune ls [--json]
//   kaio-cache remote status [--url URL] [--json]
//   kaio-cache remote push [--url URL] [--arch ARCH...] [--force] [--no-tuning]
//   kaio-cache remote pull [--url URL] [--arch ARCH...] [--no-tuning]
//
// The cache directory is --cache-dir, else $KAIO_CACHE_DIR, $XDG_CACHE_HOME/kaio or
// ~/.cache/kaio. Only `import` creates a cache that does not exist.
//
// A damaged cache file is reported, never moved aside (applications do that): every
// subcommand exits 1 naming the file and the problem; `verify` reports it as damaged and
// `verify --repair` salvages the readable records into a fresh file.
#include <CLI/CLI.hpp>
#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kaio/cache/archive.h"
#include "kaio/cache/lmdb_file.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/repair.h"
#include "kaio/cache/store.h"
#include "kaio/ir/error.h"
#include "kaio/jit/compile.h"
#include "kaio_cache_remote.h"
#include "kaio_cache_tune.h"

namespace {

namespace fs = std::filesystem;
namespace kc = kaio::cache;
using nlohmann::json;

constexpr size_t kShortKeyChars = 12;

// A command-line failure the user can fix (exit status 1, message on stderr).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string human_size(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u) v /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string human_age(uint64_t then_unix, uint64_t now) {
  // A time in the future (clock skew between machines sharing a cache) is "0s" ago.
  const uint64_t s = now > then_unix ? now - then_unix : 0;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string iso_time(uint64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

uint64_t now_unix() { return static_cast<uint64_t>(std::time(nullptr)); }

// One entry of the "kernels" database; `info` is empty when the bytes do not check out.
struct Entry {
  std::string key;
  std::optional<kc::RecordInfo> info;
  std::string error;  // why it does not check out
  uint64_t stored_bytes = 0;
  kc::KeyUsage usage;  // last use (meta, else created) and hits

  std::string name() const { return info ? info->name : "<corrupt>"; }
  uint64_t code_bytes() const { return info ? info->cubin_bytes + info->ptx_bytes : 0; }
  uint64_t created() const { return info ? info->created_unix : 0; }
  uint64_t last_use() const { return usage.last_use_us / 1000000; }
};

// An LMDB environment is a directory holding data.mdb: without one there is no cache, and
// a read-only command must not create it.
bool cache_exists(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / "data.mdb", ec);
}

// Opens an existing cache as it is: a damaged file throws DamagedCache and stays put.
std::shared_ptr<kc::Store> open_as_is(const fs::path& dir) { return kc::Store::open(dir, {.move_aside_damaged = false}); }

std::vector<Entry> load_entries(kc::Store& store) {
  std::vector<Entry> entries;
  store.view([&](kc::Txn& t) {
    std::unordered_map<std::string_view, kc::KeyUsage> usage;
    t.for_each("meta", [&](std::string_view k, std::string_view v) {
      if (k.size() > 1 && k[0] == 'k')
        if (auto u = kc::decode_usage(v)) usage.emplace(k.substr(1), *u);
    });
    entries.reserve(t.count("kernels"));
    t.for_each("kernels", [&](std::string_view key, std::string_view value) {
      Entry e;
      e.key.assign(key);
      e.stored_bytes = value.size();
      e.info = kc::decode_record_info(value, true, &e.error);
      if (auto it = usage.find(key); it != usage.end()) e.usage = it->second;
      else if (e.info) e.usage.last_use_us = e.info->created_unix * 1000000;
      entries.push_back(std::move(e));
    });
  });
  return entries;
}

// A JSON string literal (quotes and escapes included).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

// Prints rows as left-aligned columns, except those listed in `right`.
void print_columns(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> w(rows.empty() ? 0 : rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string pad(w[i] - r[i].size(), ' ');
      const bool last = i + 1 == r.size();
      if (right[i]) out += pad + r[i];
      else out += last ? r[i] : r[i] + pad;
      if (!last) out += "  ";
    }
    out += '\n';
  }
  std::cout << out;
}

// ---------------------------------------------------------------------------------------
// ls

struct LsOptions {
  std::string name_glob, arch, sort = "name";
  bool reverse = false, json = false;
};

int cmd_ls(const fs::path& dir, const LsOptions& o) {
  if (!cache_exists(dir)) {
    if (o.json) {
      std::cout << "[]\n";
      std::cerr << "no cache at " << dir.string() << "\n";
    } else {
      std::cout << "no cache at " << dir.string() << "\n";
    }
    return 0;
  }
  auto store = open_as_is(dir);
  std::vector<Entry> all = load_entries(*store);
  std::vector<Entry> entries;
  entries.reserve(all.size());
  for (Entry& e : all) {
    if (!o.name_glob.empty() && fnmatch(o.name_glob.c_str(), e.name().c_str(), 0) != 0) continue;
    if (!o.arch.empty() && (!e.info || e.info->arch != o.arch)) continue;
    entries.push_back(std::move(e));
  }

  // Damaged entries last; within a kind, by the sort key; ties keep key order.
  auto cmp = [&](const Entry& a, const Entry& b) {
    if (o.sort == "size") return a.stored_bytes > b.stored_bytes;         // largest first
    if (o.sort == "age") return a.created() < b.created();               // oldest first
    if (o.sort == "last-use") return a.usage.last_use_us > b.usage.last_use_us;  // most recent first
    if (o.sort == "hits") return a.usage.hits > b.usage.hits;             // most first
    return a.name() < b.name();
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (a.info.has_value() != b.info.has_value()) return a.info.has_value();
    return o.reverse ? cmp(b, a) : cmp(a, b);
  });

  if (o.json) {
    // Written by hand, entry by entry (nlohmann::json objects cost ~5 us each: 100 000
    // records would take most of a second). Same fields as entry_json().
    std::string out = "[";
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      out += i ? ",\n  {" : "\n  {";
      auto str = [&](const char* k, const std::string& v, bool last = false) {
        out += "\n    \"";
        out += k;
        out += "\": ";
        out += json_string(v);
        if (!last) out += ',';
      };
      auto num = [&](const char* k, uint64_t v, bool last = false) {
        out += "\n    \"";
        out += k;
        out += "\": ";
        out += std::to_string(v);
        if (!last) out += ',';
      };
      str("name", e.name());
      str("key", kc::to_hex(e.key));
      if (e.info) {
        str("arch", e.info->arch);
        str("toolchain", e.info->toolchain);
        num("cubin_bytes", e.info->cubin_bytes);
        num("ptx_bytes", e.info->ptx_bytes);
        num("log_bytes", e.info->log_bytes);
        num("created_unix", e.info->created_unix);
      } else {
        str("error", e.error);
      }
      num("stored_bytes", e.stored_bytes);
      num("last_use_unix", e.last_use());
      num("hits", e.usage.hits, true);
      out += "\n  }";
    }
    out += entries.empty() ? "]\n" : "\n]\n";
    std::cout << out;
    return 0;
  }
  const uint64_t now = now_unix();
  std::vector<std::vector<std::string>> rows;
  rows.reserve(entries.size() + 1);
  rows.push_back({"NAME", "KEY", "ARCH", "SIZE", "AGE", "LAST USE", "HITS"});
  uint64_t total = 0;
  size_t corrupt = 0;
  for (const Entry& e : entries) {
    std::string key = kc::to_hex(e.key).substr(0, kShortKeyChars);
    if (e.info) {
      rows.push_back({e.name(), std::move(key), e.info->arch, human_size(e.code_bytes()),
                      human_age(e.info->created_unix, now), human_age(e.last_use(), now), std::to_string(e.usage.hits)});
      total += e.code_bytes();
    } else {
      rows.push_back({e.name(), std::move(key), "-", human_size(e.stored_bytes), "-", "-", "-"});
      ++corrupt;
    }
  }
  print_columns(rows, {false, false, false, true, true, true, true});
  std::cout << entries.size() << " kernels, " << human_size(total) << " total";
  if (corrupt) std::cout << " (" << corrupt << " corrupt)";
  std::cout << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------
// show, rm

// The one record key starting with `prefix`; Failure when none or several.
std::string resolve(kc::Txn& t, const std::string& prefix) {
  if (prefix.empty() || prefix.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw Failure("'" + prefix + "' is not a hexadecimal key prefix");
  std::vector<std::string> keys = kc::keys_with_prefix(t, prefix);
  if (keys.empty()) throw Failure("no record with a key starting with " + prefix);
  if (keys.size() > 1) {
    std::string msg = "key prefix " + prefix + " is ambiguous (" + std::to_string(keys.size()) + " records):";
    for (size_t i = 0; i < keys.size() && i < 10; ++i) msg += " " + kc::to_hex(keys[i]).substr(0, 16);
    throw Failure(msg);
  }
  return keys[0];
}

int cmd_show(const fs::path& dir, const std::string& prefix, const std::string& cubin_file, bool no_ptx, bool as_json) {
  if (!cache_exists(dir)) throw Failure("no cache at " + dir.string());
  auto store = open_as_is(dir);
  std::string key, bytes;
  kc::KeyUsage usage;
  store->view([&](kc::Txn& t) {
    key = resolve(t, prefix);
    bytes = std::string(*t.get("kernels", key));
    usage = kc::usage_of(t, key);
  });
  std::string why;
  std::optional<kc::Record> rec = kc::decode_record(bytes, &why);
  if (!rec) {
    if (as_json)
      std::cout << json{{"key", kc::to_hex(key)}, {"error", why}, {"stored_bytes", bytes.size()}}.dump(2) << "\n";
    else
      std::cout << "key        " << kc::to_hex(key) << "\nstatus     damaged: " << why << "\nstored     "
                << human_size(bytes.size()) << "\n";
    return 1;
  }
  if (!cubin_file.empty()) {
    std::ofstream f(cubin_file, std::ios::binary | std::ios::trunc);
    f.write(rec->cubin.data(), static_cast<std::streamsize>(rec->cubin.size()));
    if (!f.flush()) throw Failure("cannot write " + cubin_file);
  }
  const bool current = rec->toolchain == kaio::jit::toolchain_id();
  if (as_json) {
    json j{{"key", kc::to_hex(key)},
           {"name", rec->name},
           {"arch", rec->arch},
           {"toolchain", rec->toolchain},
           {"current_toolchain", current},
           {"created_unix", rec->created_unix},
           {"last_use_unix", usage.last_use_us / 1000000},
           {"hits", usage.hits},
           {"cubin_bytes", rec->cubin.size()},
           {"ptx_bytes", rec->ptx.size()},
           {"stored_bytes", bytes.size()},
           {"info_log", rec->info_log}};
    if (!no_ptx) j["ptx"] = rec->ptx;
    if (!cubin_file.empty()) j["cubin_file"] = cubin_file;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  const uint64_t now = now_unix();
  const uint64_t last = usage.last_use_us / 1000000;
  std::cout << "key        " << kc::to_hex(key) << "\n"
            << "name       " << rec->name << "\n"
            << "arch       " << rec->arch << "\n"
            << "toolchain  " << rec->toolchain << (current ? "" : "  (not this kaio's: never served)") << "\n"
            << "created    " << iso_time(rec->created_unix) << " (" << human_age(rec->created_unix, now) << " ago)\n"
            << "last use   " << iso_time(last) << " (" << human_age(last, now) << " ago)\n"
            << "hits       " << usage.hits << "\n"
            << "cubin      " << human_size(rec->cubin.size()) << "\n"
            << "ptx        " << human_size(rec->ptx.size()) << "\n"
            << "stored     " << human_size(bytes.size()) << "\n";
  if (!cubin_file.empty()) std::cout << "cubin written to " << cubin_file << "\n";
  std::cout << "\n--- resource report (nvJitLink info log) ---\n" << rec->info_log;
  if (!rec->info_log.empty() && rec->info_log.back() != '\n') std::cout << "\n";
  if (!no_ptx) {
    std::cout << "\n--- PTX ---\n" << rec->ptx;
    if (!rec->ptx.empty() && rec->ptx.back() != '\n') std::cout << "\n";
  }
  return 0;
}

int cmd_rm(const fs::path& dir, const std::vector<std::string>& prefixes) {
  if (!cache_exists(dir)) throw Failure("no cache at " + dir.string());
  auto store = open_as_is(dir);
  std::vector<std::pair<std::string, std::string>> removed;  // key, name
  store->update([&](kc::Txn& t) {
    removed.clear();
    std::vector<std::string> keys;
    for (const auto& p : prefixes) keys.push_back(resolve(t, p));  // all resolve, or none is removed
    for (const auto& k : keys) {
      auto v = t.get("kernels", k);
      if (!v) continue;  // named twice
      auto info = kc::decode_record_info(*v, false);
      removed.emplace_back(k, info ? info->name : "<corrupt>");
      kc::remove_record(t, k);
    }
  });
  for (const auto& [k, name] : removed) std::cout << "removed " << kc::to_hex(k).substr(0, kShortKeyChars) << "  " << name << "\n";
  return 0;
}

// ---------------------------------------------------------------------------------------
// stats, clear, prune, verify

int cmd_stats(const fs::path& dir, bool as_json) {
  json j{{"cache_dir", dir.string()}, {"exists", cache_exists(dir)}};
  std::string env_error;
  const uint64_t cap = kc::max_bytes_from_env(&env_error);
  j["max_bytes"] = cap;
  if (!cache_exists(dir)) {
    if (as_json) std::cout << j.dump(2) << "\n";
    else std::cout << "no cache at " << dir.string() << "\n";
    return 0;
  }
  auto store = open_as_is(dir);
  uint64_t entries = 0, record_bytes = 0, size = 0, tuning = 0, damaged = 0, other = 0;
  kc::Counters c;
  kc::WriteFailures wf;
  kc::RemoteCounters rc;
  const std::string& tc = kaio::jit::toolchain_id();
  store->view([&](kc::Txn& t) {
    rc = kc::read_remote_counters(t);
    entries = t.count("kernels");
    tuning = t.count("tuning");
    size = kc::cache_bytes(t);
    c = kc::read_counters(t);
    wf = kc::read_write_failures(t);
    t.for_each("kernels", [&](std::string_view, std::string_view v) {
      record_bytes += v.size();
      auto info = kc::decode_record_info(v, false);
      if (!info) ++damaged;
      else if (info->toolchain != tc) ++other;
    });
  });
  const kc::Store::Usage u = store->usage();
  const uint64_t lookups = c.hits + c.misses;
  const double rate = lookups ? double(c.hits) / double(lookups) : 0.0;
  j.update({{"entries", entries},
            {"record_bytes", record_bytes},
            {"cache_bytes", size},
            {"hits", c.hits},
            {"misses", c.misses},
            {"hit_rate", rate},
            {"map_bytes", u.map_bytes},
            {"map_used_bytes", u.used_bytes},
            {"file_bytes", u.file_bytes},
            {"other_toolchain", other},
            {"malformed", damaged},
            {"tuning_entries", tuning},
            {"write_failures", wf.count},
            {"toolchain", tc}});
  j["remote"] = {{"hits", rc.hits},       {"misses", rc.misses},   {"bad", rc.bad},
                 {"timeouts", rc.timeouts}, {"errors", rc.errors},   {"skipped", rc.skipped},
                 {"published", rc.published}, {"dropped", rc.dropped}};
  if (wf.last_unix) j["last_write_failure"] = {{"unix", wf.last_unix}, {"error", wf.last_error}};
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * rate);
  std::vector<std::vector<std::string>> rows = {
      {"cache", dir.string()},
      {"entries", std::to_string(entries) + (other ? " (" + std::to_string(other) + " from another toolchain)" : "") +
                      (damaged ? " (" + std::to_string(damaged) + " malformed)" : "")},
      {"records", human_size(record_bytes)},
      {"size", human_size(size) + " of " + (cap ? human_size(cap) : std::string("unlimited")) + " (KAIO_CACHE_MAX_BYTES)"},
      {"hits", std::to_string(c.hits)},
      {"misses", std::to_string(c.misses)},
      {"hit rate", lookups ? std::string(pct) : std::string("-")},
      {"map", human_size(u.map_bytes) + ", " + human_size(u.used_bytes) + " used, file " + human_size(u.file_bytes)},
      {"tuning", std::to_string(tuning) + " entries"},
      {"write failures", std::to_string(wf.count) +
                             (wf.last_unix ? " (last " + iso_time(wf.last_unix) + ": " + wf.last_error + ")" : "")},
      {"remote", "hits " + std::to_string(rc.hits) + ", misses " + std::to_string(rc.misses) + ", bad records " +
                     std::to_string(rc.bad) + ", timeouts " + std::to_string(rc.timeouts) + ", errors " +
                     std::to_string(rc.errors) + ", skipped (circuit open) " + std::to_string(rc.skipped) +
                     ", published " + std::to_string(rc.published) + ", dropped " + std::to_string(rc.dropped)},
      {"toolchain", tc}};
  print_columns(rows, {false, false});
  if (!env_error.empty()) std::cerr << env_error << "\n";
  return 0;
}

int cmd_clear(const fs::path& dir, bool tuning) {
  if (!cache_exists(dir)) {
    std::cout << "no cache at " << dir.string() << "\n";
    return 0;
  }
  auto store = open_as_is(dir);
  uint64_t n = 0, t_n = 0;
  store->update([&](kc::Txn& t) {
    n = t.count("kernels");
    t.clear("kernels");
    t.clear("meta");
    t_n = 0;
    if (tuning) {
      t_n = t.count("tuning");
      t.clear("tuning");
    }
  });
  std::cout << "removed " << n << " records";
  if (tuning) std::cout << " and " << t_n << " tuning entries";
  std::cout << "\n";
  return 0;
}

int cmd_prune(const fs::path& dir, const std::string& max_bytes, const std::string& older_than, bool stale) {
  if (max_bytes.empty() && older_than.empty() && !stale)
    throw Failure("prune needs --max-bytes, --older-than or --stale");
  std::optional<uint64_t> cap, age;
  if (!max_bytes.empty() && !(cap = kc::parse_bytes(max_bytes)))
    throw Failure("--max-bytes '" + max_bytes + "' is not a size (e.g. 4294967296, 512M, 4G)");
  if (!older_than.empty() && !(age = kc::parse_duration_seconds(older_than)))
    throw Failure("--older-than '" + older_than + "' is not a duration (e.g. 7d, 12h, 30m)");
  if (!cache_exists(dir)) {
    std::cout << "no cache at " << dir.string() << "\n";
    return 0;
  }
  auto store = open_as_is(dir);
  kc::Removed by_stale, by_age, by_size;
  uint64_t before = 0, after = 0;
  const std::string& tc = kaio::jit::toolchain_id();
  store->update([&](kc::Txn& t) {
    before = kc::cache_bytes(t);
    by_stale = stale ? kc::remove_unservable(t, tc) : kc::Removed{};
    by_age = age ? kc::remove_unused_since(t, kc::now_unix_us() - *age * 1000000) : kc::Removed{};
    by_size = cap ? kc::evict_lru(t, *cap) : kc::Removed{};
    after = kc::cache_bytes(t);
  });
  const uint64_t n = by_stale.records + by_age.records + by_size.records;
  std::cout << "removed " << n << " records (" << human_size(by_stale.bytes + by_age.bytes + by_size.bytes) << ")";
  if (stale) std::cout << "; " << by_stale.records << " unservable";
  if (age) std::cout << "; " << by_age.records << " unused for " << older_than;
  if (cap) std::cout << "; " << by_size.records << " least recently used";
  std::cout << "\ncache size " << human_size(before) << " -> " << human_size(after) << "\n";
  return 0;
}

// Reports a damaged file (exit 1); with --repair salvages its readable records into a
// fresh one (exit 0).
int verify_damaged_file(const fs::path& dir, const std::string& why, bool repair, bool as_json) {
  const fs::path data = dir / "data.mdb";
  std::optional<kc::SalvageResult> r;
  if (repair) r = kc::salvage(dir);
  if (as_json) {
    json j{{"file", data.string()}, {"file_damaged", true}, {"file_error", why}, {"repaired", repair}};
    if (r)
      j.update({{"salvaged", r->salvaged}, {"salvaged_bytes", r->bytes}, {"entries_seen", r->entries_seen},
                {"moved_to", r->moved_to.string()}});
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "damaged file " << data.string() << ": " << why << "\n";
    if (r)
      std::cout << "salvaged " << r->salvaged << " records (" << human_size(r->bytes) << ") into a fresh "
                << data.string() << "; the damaged file is now " << r->moved_to.string() << "\n";
    else
      std::cout << "`kaio-cache verify --repair` salvages the readable records into a fresh file\n";
  }
  return repair ? 0 : 1;
}

int cmd_verify(const fs::path& dir, bool repair, bool as_json) {
  if (!cache_exists(dir)) {
    if (as_json) std::cout << json{{"checked", 0}, {"ok", 0}, {"damaged", json::array()}}.dump(2) << "\n";
    else std::cout << "no cache at " << dir.string() << "\n";
    return 0;
  }
  // The meta pages first: LMDB must not map a file they do not match.
  const kc::DataFileCheck file = kc::check_data_file(dir / "data.mdb");
  if (!file.ok) return verify_damaged_file(dir, file.problem, repair, as_json);
  const std::string& tc = kaio::jit::toolchain_id();
  struct Bad {
    std::string key, why;
  };
  std::vector<Bad> damaged;
  std::vector<std::string> other;
  std::vector<std::string> orphans;
  uint64_t checked = 0;
  std::shared_ptr<kc::Store> store;
  try {
    store = open_as_is(dir);
    // Every page of both trees is visited: LMDB reports (or the fault guard catches)
    // damage that the meta pages do not show.
    store->view([&](kc::Txn& t) {
      t.for_each("kernels", [&](std::string_view k, std::string_view v) {
        ++checked;
        std::string why;
        auto info = kc::decode_record_info(v, true, &why);
        if (!info) damaged.push_back({std::string(k), why});
        else if (info->toolchain != tc) other.emplace_back(k);
      });
      t.for_each("meta", [&](std::string_view k, std::string_view v) {
        if (k.size() > 1 && k[0] == 'k' && (!t.get("kernels", k.substr(1)) || !kc::decode_usage(v))) orphans.emplace_back(k);
      });
      t.for_each("tuning", [](std::string_view, std::string_view) {});
    });
  } catch (const kc::DamagedCache& e) {
    store.reset();  // closed before a repair moves its file
    return verify_damaged_file(dir, e.what(), repair, as_json);
  }
  if (repair && (!damaged.empty() || !orphans.empty())) {
    store->update([&](kc::Txn& t) {
      for (const Bad& b : damaged) kc::remove_record(t, b.key);
      for (const auto& k : orphans) t.erase("meta", k);
    });
  }
  const uint64_t ok = checked - damaged.size();
  if (as_json) {
    json bad = json::array();
    for (const Bad& b : damaged) bad.push_back({{"key", kc::to_hex(b.key)}, {"error", b.why}});
    json oth = json::array();
    for (const auto& k : other) oth.push_back(kc::to_hex(k));
    std::cout << json{{"checked", checked},      {"ok", ok},
                      {"damaged", bad},          {"other_toolchain", oth},
                      {"orphan_meta", orphans.size()}, {"repaired", repair},
                      {"file_damaged", false}}
                     .dump(2)
              << "\n";
  } else {
    for (const Bad& b : damaged)
      std::cout << (repair ? "removed " : "damaged ") << kc::to_hex(b.key).substr(0, kShortKeyChars) << "  " << b.why
                << "\n";
    for (const auto& k : other)
      std::cout << "other toolchain " << kc::to_hex(k).substr(0, kShortKeyChars)
                << "  (never served; `prune --stale` removes it)\n";
    std::cout << checked << " records checked: " << ok << " ok, " << damaged.size() << " damaged";
    if (!orphans.empty()) std::cout << ", " << orphans.size() << " orphan meta entries";
    if (repair && (!damaged.empty() || !orphans.empty())) std::cout << " (repaired)";
    std::cout << "\n";
  }
  return damaged.empty() || repair ? 0 : 1;
}

// ---------------------------------------------------------------------------------------
// export, import, tune ls

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string rate(uint64_t bytes, double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", s > 0 ? double(bytes) / 1e6 / s : 0.0);
  return buf;
}

int cmd_export(const fs::path& dir, const std::string& file) {
  if (!cache_exists(dir)) throw Failure("no cache at " + dir.string());
  auto store = open_as_is(dir);
  const auto t0 = std::chrono::steady_clock::now();
  kc::ExportResult r = kc::export_records(*store, file);
  const double s = seconds_since(t0);
  std::cout << "exported " << r.records << " records (" << human_size(r.bytes) << ") to " << file << " in "
            << std::to_string(s).substr(0, 5) << " s, " << rate(r.bytes, s);
  if (r.damaged) std::cout << "; left out " << r.damaged << " damaged";
  std::cout << "\n";
  return 0;
}

int cmd_import(const fs::path& dir, const std::string& file, bool any_toolchain) {
  std::string env_error;
  const uint64_t cap = kc::max_bytes_from_env(&env_error);
  if (!env_error.empty()) std::cerr << env_error << "\n";
  // A damaged or hostile file fails here, before the cache is opened or created.
  kc::validate_archive(file);
  auto store = kc::Store::open(dir, {.move_aside_damaged = false});
  const auto t0 = std::chrono::steady_clock::now();
  kc::ImportResult r = kc::import_records(*store, file, any_toolchain ? "" : kaio::jit::toolchain_id(), cap);
  const double s = seconds_since(t0);
  std::cout << "imported " << r.imported << " records (" << human_size(r.bytes) << ") in "
            << std::to_string(s).substr(0, 5) << " s, " << rate(r.bytes, s) << "; skipped " << r.present
            << " already present, " << r.other_toolchain << " for another toolchain, " << r.damaged << " damaged";
  if (r.evicted) std::cout << "; evicted " << r.evicted << " to stay under " << human_size(cap);
  std::cout << "\n";
  return 0;
}

int cmd_tune_ls(const fs::path& dir, bool as_json) { return kaio::tools::tune_ls(dir, as_json); }

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  CLI::App app{"Inspect and look after kaio's cache of compiled kernels.", "kaio-cache"};
  app.require_subcommand(1);
  // Global options may also follow the subcommand: `kaio-cache ls --cache-dir DIR`.
  app.fallthrough();

  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "Cache directory (default: $KAIO_CACHE_DIR, $XDG_CACHE_HOME/kaio or ~/.cache/kaio)")
      ->type_name("DIR");

  LsOptions ls_o;
  CLI::App* ls = app.add_subcommand("ls", "List the compiled kernels in the cache");
  ls->add_option("--name", ls_o.name_glob, "Only kernels whose name matches this glob (e.g. 'saxpy*')")->type_name("GLOB");
  ls->add_option("--arch", ls_o.arch, "Only records for this target (e.g. sm_90)")->type_name("ARCH");
  ls->add_option("--sort", ls_o.sort,
                 "Order: name (A-Z), size (largest first), age (oldest first), last-use (most recent first), "
                 "hits (most first)")
      ->check(CLI::IsMember({"name", "size", "age", "last-use", "hits"}))
      ->type_name("KEY");
  ls->add_flag("--reverse,-r", ls_o.reverse, "Reverse the order");
  ls->add_flag("--json", ls_o.json, "Print a JSON array instead of a table");

  std::string show_prefix, show_cubin;
  bool show_json = false, show_no_ptx = false;
  CLI::App* show = app.add_subcommand("show", "Show one record: metadata, resource report (nvJitLink info log), PTX");
  show->add_option("key", show_prefix, "Key or a unique prefix of it (hex)")->required()->type_name("KEY-PREFIX");
  show->add_option("--cubin", show_cubin, "Write the cubin to FILE")->type_name("FILE");
  show->add_flag("--no-ptx", show_no_ptx, "Leave the PTX out");
  show->add_flag("--json", show_json, "Print a JSON object");

  bool stats_json = false;
  CLI::App* stats = app.add_subcommand("stats", "Entries, size, hits, misses, hit rate, LMDB map use");
  stats->add_flag("--json", stats_json, "Print a JSON object");

  std::vector<std::string> rm_prefixes;
  CLI::App* rm = app.add_subcommand("rm", "Remove records (each prefix must name exactly one)");
  rm->add_option("keys", rm_prefixes, "Keys or unique prefixes (hex)")->required()->type_name("KEY-PREFIX...");

  bool clear_tuning = false;
  CLI::App* clear = app.add_subcommand("clear", "Remove every record and the use counters");
  clear->add_flag("--tuning", clear_tuning, "Also empty the tuning database");

  std::string prune_bytes, prune_age;
  bool prune_stale = false;
  CLI::App* prune = app.add_subcommand("prune", "Remove least recently used, unused or unservable records");
  prune->add_option("--max-bytes", prune_bytes, "Evict least recently used records until the cache is at most N bytes (4G, 512M, ...)")
      ->type_name("N");
  prune->add_option("--older-than", prune_age, "Remove records not used for DURATION (7d, 12h, 30m, 2w)")->type_name("DURATION");
  prune->add_flag("--stale", prune_stale, "Remove damaged records and records of another toolchain");

  bool verify_repair = false, verify_json = false;
  CLI::App* verify = app.add_subcommand("verify", "Check the cache file and every record's checksum (exit 1 if damaged)");
  verify->add_flag("--repair", verify_repair,
                   "Remove damaged records and orphan meta entries; a damaged file: salvage its readable records "
                   "into a fresh one");
  verify->add_flag("--json", verify_json, "Print a JSON object");

  std::string export_file;
  CLI::App* exp = app.add_subcommand("export", "Write every valid record to FILE (to ship a warm cache)");
  exp->add_option("file", export_file, "Output file")->required()->type_name("FILE");

  std::string import_file;
  bool import_any = false;
  CLI::App* imp = app.add_subcommand("import", "Add the records of an export FILE made by this toolchain");
  imp->add_option("file", import_file, "File written by `kaio-cache export`")->required()->type_name("FILE");
  imp->add_flag("--any-toolchain", import_any, "Also import records of other toolchains (they are never served)");

  bool tune_json = false;
  CLI::App* tune = app.add_subcommand("tune", "The tuning database");
  tune->require_subcommand(1);
  tune->fallthrough();
  CLI::App* tune_ls = tune->add_subcommand(
      "ls", "List tuning records: the winner, its time, the runner-up and how much slower it is; then tunings in progress (claims)");
  tune_ls->add_flag("--json", tune_json, "Print a JSON array");

  kaio::tools::RemoteOptions remote_o;
  CLI::App* remote = app.add_subcommand("remote", "The fleet-shared remote tier (Redis; KAIO_REMOTE_CACHE)");
  remote->require_subcommand(1);
  remote->fallthrough();
  remote->add_option("--url", remote_o.url, "redis://[user:password@]host:port[/db] (default: $KAIO_REMOTE_CACHE)")
      ->type_name("URL");
  CLI::App* remote_status = remote->add_subcommand(
      "status", "Reachability, round-trip latency, the namespace's records and bytes, this cache's remote counters "
                "(exit 1 when Redis does not answer)");
  remote_status->add_flag("--json", remote_o.json, "Print a JSON object");
  CLI::App* remote_push = remote->add_subcommand(
      "push", "Publish this cache's records (signed with KAIO_REMOTE_CACHE_KEY_FILE) and tuning records");
  CLI::App* remote_pull =
      remote->add_subcommand("pull", "Copy the namespace's records into this cache, each checked like a read-through");
  bool no_tuning = false;
  for (CLI::App* sub : {remote_push, remote_pull}) {
    sub->add_option("--arch", remote_o.archs, "Only records for these targets (sm_80,sm_90 or repeated)")
        ->delimiter(',')
        ->type_name("ARCH");
    sub->add_flag("--no-tuning", no_tuning, "Leave the tuning records out");
  }
  remote_push->add_flag("--force", remote_o.force, "Overwrite records already there");

  CLI11_PARSE(app, argc, argv);
  remote_o.tuning = !no_tuning;

  try {
    const fs::path dir = cache_dir.empty() ? kc::default_dir() : fs::path(cache_dir);
    if (ls->parsed()) return cmd_ls(dir, ls_o);
    if (show->parsed()) return cmd_show(dir, show_prefix, show_cubin, show_no_ptx, show_json);
    if (stats->parsed()) return cmd_stats(dir, stats_json);
    if (rm->parsed()) return cmd_rm(dir, rm_prefixes);
    if (clear->parsed()) return cmd_clear(dir, clear_tuning);
    if (prune->parsed()) return cmd_prune(dir, prune_bytes, prune_age, prune_stale);
    if (verify->parsed()) return cmd_verify(dir, verify_repair, verify_json);
    if (exp->parsed()) return cmd_export(dir, export_file);
    if (imp->parsed()) return cmd_import(dir, import_file, import_any);
    if (tune_ls->parsed()) return cmd_tune_ls(dir, tune_json);
    if (remote_status->parsed()) return kaio::tools::remote_status(dir, remote_o);
    if (remote_push->parsed()) return kaio::tools::remote_push(dir, remote_o);
    if (remote_pull->parsed()) return kaio::tools::remote_pull(dir, remote_o);
    return 2;
  } catch (const Failure& e) {
    std::cout.flush();
    std::cerr << "kaio-cache: " << e.what() << "\n";
    return 1;
  } catch (const kc::DamagedCache& e) {
    std::cout.flush();
    std::cerr << "kaio-cache: " << e.what() << "\nkaio-cache: `kaio-cache verify --repair` salvages the readable "
              << "records into a fresh file\n";
    return 1;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "kaio-cache: " << e.what() << "\n";
    return 1;
  }
}
