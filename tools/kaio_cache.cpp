// kaio-cache: inspects the kernel cache.
//
//   kaio-cache [--cache-dir DIR] ls [--json]
//
// The cache directory is --cache-dir, else $KAIO_CACHE_DIR, $XDG_CACHE_HOME/kaio or
// ~/.cache/kaio. Listing never creates a cache that does not exist.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/ir/error.h"

namespace {

namespace fs = std::filesystem;
using kaio::cache::Record;

constexpr size_t kShortKeyChars = 12;

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

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

std::string human_age(uint64_t created_unix, uint64_t now) {
  // A record from the future (clock skew between machines sharing a cache) is "0s" old.
  const uint64_t s = now > created_unix ? now - created_unix : 0;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

// One entry of the "kernels" database; `record` is empty when the bytes do not decode.
struct Entry {
  std::string key;
  std::optional<Record> record;
  std::string error;       // why decoding failed
  uint64_t stored_bytes;   // size of the stored value

  std::string name() const { return record ? record->name : "<corrupt>"; }
  uint64_t code_bytes() const { return record ? record->cubin.size() + record->ptx.size() : 0; }
};

std::vector<Entry> load_kernels(kaio::cache::Store& store) {
  std::vector<Entry> entries;
  store.for_each("kernels", [&](std::string_view key, std::string_view value) {
    Entry e{std::string(key), std::nullopt, {}, value.size()};
    e.record = kaio::cache::decode_record(value, &e.error);
    entries.push_back(std::move(e));
  });
  // By name, damaged entries last; ties keep key order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.record.has_value() != b.record.has_value()) return a.record.has_value();
    return a.name() < b.name();
  });
  return entries;
}

void print_json(const std::vector<Entry>& entries) {
  auto out = nlohmann::json::array();
  for (const Entry& e : entries) {
    if (!e.record) {
      out.push_back({{"name", e.name()}, {"key", to_hex(e.key)}, {"error", e.error},
                     {"stored_bytes", e.stored_bytes}});
      continue;
    }
    const Record& r = *e.record;
    out.push_back({{"name", r.name},
                   {"key", to_hex(e.key)},
                   {"arch", r.arch},
                   {"toolchain", r.toolchain},
                   {"cubin_bytes", r.cubin.size()},
                   {"ptx_bytes", r.ptx.size()},
                   {"created_unix", r.created_unix}});
  }
  std::cout << out.dump(2) << "\n";
}

void print_table(const std::vector<Entry>& entries) {
  struct Row {
    std::string name, key, arch, size, age;
  };
  const auto now = static_cast<uint64_t>(std::time(nullptr));
  std::vector<Row> rows{{"NAME", "KEY", "ARCH", "SIZE", "AGE"}};
  uint64_t total = 0;
  size_t corrupt = 0;
  for (const Entry& e : entries) {
    const std::string key = to_hex(e.key).substr(0, kShortKeyChars);
    if (e.record) {
      rows.push_back({e.name(), key, e.record->arch, human_size(e.code_bytes()),
                      human_age(e.record->created_unix, now)});
      total += e.code_bytes();
    } else {
      rows.push_back({e.name(), key, "-", human_size(e.stored_bytes), "-"});
      ++corrupt;
    }
  }

  size_t w_name = 0, w_key = 0, w_arch = 0, w_size = 0;
  for (const Row& r : rows) {
    w_name = std::max(w_name, r.name.size());
    w_key = std::max(w_key, r.key.size());
    w_arch = std::max(w_arch, r.arch.size());
    w_size = std::max(w_size, r.size.size());
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size(), ' '); };
  auto pad_left = [](const std::string& s, size_t w) { return std::string(w - s.size(), ' ') + s; };
  for (const Row& r : rows)
    std::cout << pad(r.name, w_name) << "  " << pad(r.key, w_key) << "  " << pad(r.arch, w_arch)
              << "  " << pad_left(r.size, w_size) << "  " << r.age << "\n";

  std::cout << entries.size() << " kernels, " << human_size(total) << " total";
  if (corrupt) std::cout << " (" << corrupt << " corrupt)";
  std::cout << "\n";
}

int cmd_ls(const fs::path& dir, bool json) {
  // An LMDB environment is a directory holding data.mdb: without one there is no cache,
  // and listing must not create it.
  std::error_code ec;
  if (!fs::exists(dir / "data.mdb", ec)) {
    if (json) {
      std::cout << "[]\n";
      std::cerr << "no cache at " << dir.string() << "\n";
    } else {
      std::cout << "no cache at " << dir.string() << "\n";
    }
    return 0;
  }
  auto store = kaio::cache::Store::open(dir);
  const std::vector<Entry> entries = load_kernels(*store);
  if (json) print_json(entries);
  else print_table(entries);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect kaio's cache of compiled kernels.", "kaio-cache"};
  app.require_subcommand(1);
  // Global options may also follow the subcommand: `kaio-cache ls --cache-dir DIR`.
  app.fallthrough();

  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "Cache directory (default: $KAIO_CACHE_DIR, $XDG_CACHE_HOME/kaio or ~/.cache/kaio)")
      ->type_name("DIR");

  bool json = false;
  CLI::App* ls = app.add_subcommand("ls", "List the compiled kernels in the cache");
  ls->add_flag("--json", json, "Print a JSON array instead of a table");

  CLI11_PARSE(app, argc, argv);

  try {
    const fs::path dir = cache_dir.empty() ? kaio::cache::default_dir() : fs::path(cache_dir);
    if (ls->parsed()) return cmd_ls(dir, json);
    return 2;  // unreachable while ls is the only subcommand (one is required)
  } catch (const std::exception& e) {
    std::cerr << "kaio-cache: " << e.what() << "\n";
    return 1;
  }
}
