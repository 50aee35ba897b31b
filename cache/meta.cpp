#include "kaio/cache/meta.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <unordered_map>

#include "kaio/cache/record.h"

namespace kaio::cache {

namespace {

constexpr std::string_view kHitsKey = "c:hits";
constexpr std::string_view kMissesKey = "c:misses";
constexpr std::string_view kWriteFailuresKey = "c:write_failures";
constexpr std::string_view kLastWriteFailureKey = "c:last_write_failure";

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(std::string_view b) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(b[i])) << (8 * i);
  return v;
}

uint64_t read_counter(Txn& t, std::string_view key) {
  auto v = t.get("meta", key);
  return v && v->size() == 8 ? get_u64(*v) : 0;
}

void add_counter(Txn& t, std::string_view key, uint64_t n) {
  if (n == 0) return;
  std::string v;
  put_u64(v, read_counter(t, key) + n);
  t.put("meta", key, v);
}

// Parses "<number><suffix>" where the suffix is looked up in `units` (lowercase).
std::optional<uint64_t> parse_scaled(std::string_view s, const std::vector<std::pair<std::string_view, uint64_t>>& units) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const uint64_t n = std::strtoull(std::string(s.substr(0, digits)).c_str(), nullptr, 10);
  std::string suffix;
  for (char c : s.substr(digits)) suffix.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  for (const auto& [name, mul] : units)
    if (suffix == name) {
      if (mul && n > UINT64_MAX / mul) return std::nullopt;
      return n * mul;
    }
  return std::nullopt;
}

}  // namespace

uint64_t now_unix_us() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

std::string meta_key(std::string_view kernel_key) {
  std::string k;
  k.reserve(1 + kernel_key.size());
  k.push_back('k');
  k.append(kernel_key);
  return k;
}

std::string encode_usage(const KeyUsage& u) {
  std::string out;
  out.reserve(16);
  put_u64(out, u.last_use_us);
  put_u64(out, u.hits);
  return out;
}

std::optional<KeyUsage> decode_usage(std::string_view b) {
  if (b.size() != 16) return std::nullopt;
  return KeyUsage{get_u64(b), get_u64(b.substr(8))};
}

std::optional<uint64_t> parse_bytes(std::string_view s) {
  static const std::vector<std::pair<std::string_view, uint64_t>> units = {
      {"", 1},           {"b", 1},
      {"k", 1ull << 10}, {"kb", 1ull << 10}, {"kib", 1ull << 10},
      {"m", 1ull << 20}, {"mb", 1ull << 20}, {"mib", 1ull << 20},
      {"g", 1ull << 30}, {"gb", 1ull << 30}, {"gib", 1ull << 30},
      {"t", 1ull << 40}, {"tb", 1ull << 40}, {"tib", 1ull << 40}};
  return parse_scaled(s, units);
}

std::optional<uint64_t> parse_duration_seconds(std::string_view s) {
  static const std::vector<std::pair<std::string_view, uint64_t>> units = {
      {"", 1}, {"s", 1}, {"m", 60}, {"min", 60}, {"h", 3600}, {"d", 86400}, {"w", 7 * 86400}};
  return parse_scaled(s, units);
}

uint64_t max_bytes_from_env(std::string* error) {
  const char* s = std::getenv("KAIO_CACHE_MAX_BYTES");
  if (!s || !*s) return kDefaultMaxBytes;
  if (auto n = parse_bytes(s)) return *n;
  if (error) *error = std::string("KAIO_CACHE_MAX_BYTES='") + s + "' is not a byte count; using the default (4 GiB)";
  return kDefaultMaxBytes;
}

uint64_t cache_bytes(Txn& t) { return t.bytes("kernels") + t.bytes("meta"); }

KeyUsage usage_of(Txn& t, std::string_view kernel_key) {
  if (auto m = t.get("meta", meta_key(kernel_key)))
    if (auto u = decode_usage(*m)) return *u;
  if (auto rec = t.get("kernels", kernel_key))
    if (auto info = decode_record_info(*rec, false)) return KeyUsage{info->created_unix * 1000000, 0};
  return {};
}

Counters read_counters(Txn& t) { return Counters{read_counter(t, kHitsKey), read_counter(t, kMissesKey)}; }

void add_counters(Txn& t, uint64_t hits, uint64_t misses) {
  add_counter(t, kHitsKey, hits);
  add_counter(t, kMissesKey, misses);
}

RemoteCounters& RemoteCounters::operator+=(const RemoteCounters& o) {
  hits += o.hits;
  misses += o.misses;
  bad += o.bad;
  timeouts += o.timeouts;
  errors += o.errors;
  skipped += o.skipped;
  published += o.published;
  dropped += o.dropped;
  return *this;
}

bool RemoteCounters::empty() const {
  return !(hits | misses | bad | timeouts | errors | skipped | published | dropped);
}

namespace {
// Each counter with its "meta" key, in one table so that reading and adding cannot drift.
template <class C, class Fn>
void each_remote_counter(C& c, Fn&& fn) {
  fn("c:remote_hits", c.hits);
  fn("c:remote_misses", c.misses);
  fn("c:remote_bad", c.bad);
  fn("c:remote_timeouts", c.timeouts);
  fn("c:remote_errors", c.errors);
  fn("c:remote_skipped", c.skipped);
  fn("c:remote_published", c.published);
  fn("c:remote_dropped", c.dropped);
}
}  // namespace

RemoteCounters read_remote_counters(Txn& t) {
  RemoteCounters c;
  each_remote_counter(c, [&](std::string_view key, uint64_t& v) { v = read_counter(t, key); });
  return c;
}

void add_remote_counters(Txn& t, const RemoteCounters& c) {
  if (c.empty()) return;
  each_remote_counter(c, [&](std::string_view key, const uint64_t& v) {
    if (v) add_counter(t, key, v);
  });
}

WriteFailures read_write_failures(Txn& t) {
  WriteFailures w;
  w.count = read_counter(t, kWriteFailuresKey);
  if (auto v = t.get("meta", kLastWriteFailureKey); v && v->size() >= 8) {
    w.last_unix = get_u64(*v);
    w.last_error.assign(v->substr(8));
  }
  return w;
}

void add_write_failures(Txn& t, uint64_t count, uint64_t last_unix, const std::string& last_error) {
  if (count == 0) return;
  add_counter(t, kWriteFailuresKey, count);
  if (last_unix >= read_write_failures(t).last_unix) {
    std::string v;
    put_u64(v, last_unix);
    v += last_error.substr(0, 1000);
    t.put("meta", kLastWriteFailureKey, v);
  }
}

void add_usage(Txn& t, std::string_view kernel_key, uint64_t last_use_us, uint64_t hits) {
  if (!t.get("kernels", kernel_key)) return;
  KeyUsage u = usage_of(t, kernel_key);
  u.last_use_us = std::max(u.last_use_us, last_use_us);
  u.hits += hits;
  t.put("meta", meta_key(kernel_key), encode_usage(u));
}

bool remove_record(Txn& t, std::string_view key) {
  t.erase("meta", meta_key(key));
  return t.erase("kernels", key);
}

bool put_record(Txn& t, std::string_view key, std::string_view record_bytes, bool replace, uint64_t max_bytes,
                Removed* evicted) {
  // Key, value and page overhead: a record that alone would exceed the cap is not kept.
  if (max_bytes && record_bytes.size() + key.size() + 64 > max_bytes) return false;
  if (!t.put("kernels", key, record_bytes, replace)) return false;
  KeyUsage u{now_unix_us(), 0};
  if (auto m = t.get("meta", meta_key(key)))
    if (auto old = decode_usage(*m)) u.hits = old->hits;
  t.put("meta", meta_key(key), encode_usage(u));
  if (max_bytes && cache_bytes(t) > max_bytes) {
    Removed r = evict_lru(t, max_bytes - max_bytes / 10, key);
    if (evicted) *evicted = r;
  }
  return true;
}

Removed evict_lru(Txn& t, uint64_t target_bytes, std::string_view keep) {
  Removed out;
  if (cache_bytes(t) <= target_bytes) return out;
  // Last use of every record: meta entries first, then the records that have none.
  std::unordered_map<std::string_view, uint64_t> last_use;
  t.for_each("meta", [&](std::string_view k, std::string_view v) {
    if (k.size() > 1 && k[0] == 'k')
      if (auto u = decode_usage(v)) last_use.emplace(k.substr(1), u->last_use_us);
  });
  std::vector<std::pair<uint64_t, std::string>> order;  // (last use, key)
  t.for_each("kernels", [&](std::string_view k, std::string_view v) {
    if (k == keep) return;
    auto it = last_use.find(k);
    uint64_t lu = 0;
    if (it != last_use.end()) lu = it->second;
    else if (auto info = decode_record_info(v, false)) lu = info->created_unix * 1000000;
    order.emplace_back(lu, std::string(k));
  });
  std::sort(order.begin(), order.end());
  for (const auto& [lu, key] : order) {
    if (cache_bytes(t) <= target_bytes) break;
    auto v = t.get("kernels", key);
    const uint64_t n = v ? v->size() : 0;
    if (remove_record(t, key)) {
      ++out.records;
      out.bytes += n;
    }
  }
  return out;
}

Removed remove_unused_since(Txn& t, uint64_t cutoff_us) {
  std::vector<std::pair<std::string, uint64_t>> victims;
  t.for_each("kernels", [&](std::string_view k, std::string_view v) { victims.emplace_back(std::string(k), v.size()); });
  Removed out;
  for (const auto& [key, n] : victims) {
    if (usage_of(t, key).last_use_us >= cutoff_us) continue;
    if (remove_record(t, key)) {
      ++out.records;
      out.bytes += n;
    }
  }
  return out;
}

Removed remove_unservable(Txn& t, const std::string& toolchain) {
  std::vector<std::pair<std::string, uint64_t>> victims;
  t.for_each("kernels", [&](std::string_view k, std::string_view v) {
    auto info = decode_record_info(v, true);
    if (!info || (!toolchain.empty() && info->toolchain != toolchain)) victims.emplace_back(std::string(k), v.size());
  });
  Removed out;
  for (const auto& [key, n] : victims)
    if (remove_record(t, key)) {
      ++out.records;
      out.bytes += n;
    }
  std::vector<std::string> orphans;
  t.for_each("meta", [&](std::string_view k, std::string_view) {
    if (k.size() > 1 && k[0] == 'k' && !t.get("kernels", k.substr(1))) orphans.emplace_back(k);
  });
  for (const auto& k : orphans) t.erase("meta", k);
  return out;
}

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

std::vector<std::string> keys_with_prefix(Txn& t, std::string_view hex_prefix) {
  std::string want;
  for (char c : hex_prefix) want.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::vector<std::string> out;
  t.for_each("kernels", [&](std::string_view k, std::string_view) {
    if (to_hex(k).compare(0, want.size(), want) == 0) out.emplace_back(k);
  });
  return out;
}

}  // namespace kaio::cache
