#include "kaio_cache_remote.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/remote_record.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/disk_cache_remote.h"
#include "kaio/tuner/tuner.h"

namespace kaio::tools {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace kr = kaio::jit::remote;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The tier the tools use: the compile path's settings with longer default timeouts (a
// tool waits for an answer; a compile must not).
std::shared_ptr<kr::Tier> open_tier(const RemoteOptions& o) {
  setenv("KAIO_REMOTE_CACHE_TIMEOUT_MS", "2000", 0);
  setenv("KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "2000", 0);
  std::string error;
  std::optional<kr::Settings> s = kr::resolve(o.url, &error);
  if (!s) {
    if (!error.empty()) throw std::runtime_error(error);
    throw std::runtime_error("no remote cache: set KAIO_REMOTE_CACHE=redis://host:port or pass --url");
  }
  return std::make_shared<kr::Tier>(std::move(*s));
}

bool arch_wanted(const RemoteOptions& o, const std::string& arch) {
  return o.archs.empty() || std::find(o.archs.begin(), o.archs.end(), arch) != o.archs.end();
}

// Progress on stderr, at most once a second, only on long runs.
class Progress {
 public:
  explicit Progress(const char* verb) : verb_(verb) {}
  void tick(uint64_t done, uint64_t total) {
    if (since(last_) < 1.0) return;
    last_ = Clock::now();
    if (total) std::fprintf(stderr, "%s %llu/%llu ...\n", verb_, (unsigned long long)done, (unsigned long long)total);
    else std::fprintf(stderr, "%s %llu ...\n", verb_, (unsigned long long)done);
  }

 private:
  const char* verb_;
  Clock::time_point last_ = Clock::now();
};

std::vector<uint8_t> from_hex(std::string_view h) {
  std::vector<uint8_t> out;
  if (h.size() % 2) return {};
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < h.size(); i += 2) {
    const int a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0) return {};
    out.push_back(static_cast<uint8_t>(a * 16 + b));
  }
  return out;
}

// Every Redis key matching `pattern` (SCAN: never blocks the server like KEYS).
bool scan(cache::RedisConnection& c, const std::string& pattern, std::vector<std::string>& keys, std::string& error) {
  std::string cursor = "0";
  do {
    cache::RedisReply r = c.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok() || r.items.size() != 2) {
      error = r.ok() ? "unexpected SCAN reply" : std::string(cache::status_name(r.status)) + ": " + r.value;
      return false;
    }
    cursor = r.items[0].value;
    for (auto& k : r.items[1].items) keys.push_back(std::move(k.value));
  } while (cursor != "0");
  return true;
}

std::string pattern_of(const kr::Settings& s, char kind) {
  // Glob characters in the namespace are escaped: the namespace is matched literally.
  std::string p;
  for (char ch : s.ns) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') p += '\\';
    p += ch;
  }
  return p + ":" + kind + ":*";
}

}  // namespace

std::string describe(const PushSummary& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "published %llu records (%.1f MiB), %llu already there, %llu skipped, %llu failed, %.2f s",
                (unsigned long long)s.written, double(s.bytes) / (1 << 20), (unsigned long long)s.present,
                (unsigned long long)s.skipped, (unsigned long long)s.failed, s.seconds);
  return std::string(buf) + (s.first_error.empty() ? "" : " (first failure: " + s.first_error + ")");
}

PushSummary push_keys(cache::Store& store, const std::vector<std::string>& keys, const RemoteOptions& o) {
  auto tier = open_tier(o);
  if (!tier->settings().can_publish())
    throw std::runtime_error("the remote cache is read-only without KAIO_REMOTE_CACHE_KEY_FILE (a shared signing key); "
                             "KAIO_REMOTE_CACHE_TRUST=unsigned publishes unsigned records (unsafe)");
  PushSummary s;
  const auto t0 = Clock::now();
  Progress progress("pushed");
  const std::string& tc = jit::toolchain_id();
  uint64_t i = 0;
  for (const std::string& key : keys) {
    progress.tick(i++, keys.size());
    std::optional<std::string> bytes = store.get("kernels", key);
    std::optional<cache::RecordInfo> info;
    if (bytes) info = cache::decode_record_info(*bytes);
    // Only records this toolchain would serve, of the archs asked for.
    if (!info || info->toolchain != tc || !arch_wanted(o, info->arch)) {
      ++s.skipped;
      continue;
    }
    kr::PutOutcome p = tier->put(cache::kRemoteKernel, key, *bytes, o.force);
    if (p.written) {
      ++s.written;
      s.bytes += bytes->size();
    } else if (p.exists) {
      ++s.present;
    } else {
      ++s.failed;
      if (s.first_error.empty()) s.first_error = p.error;
    }
  }
  s.seconds = since(t0);
  return s;
}

int remote_push(const std::filesystem::path& dir, const RemoteOptions& o) {
  std::error_code ec;
  if (!std::filesystem::exists(dir / "data.mdb", ec)) throw std::runtime_error("no cache at " + dir.string());
  auto store = cache::Store::open(dir, {.move_aside_damaged = false});
  std::vector<std::string> keys;
  store->for_each("kernels", [&](std::string_view k, std::string_view) { keys.emplace_back(k); });
  PushSummary s = push_keys(*store, keys, o);
  uint64_t tunings = 0, tuning_failed = 0;
  if (o.tuning) {
    auto tier = open_tier(o);
    std::vector<std::pair<std::string, std::string>> recs;
    store->for_each("tuning", [&](std::string_view k, std::string_view v) { recs.emplace_back(k, v); });
    for (const auto& [k, v] : recs) {
      if (!tuner::decode(v)) continue;  // a damaged record stays here
      kr::PutOutcome p = tier->put(cache::kRemoteTuning, k, v, true);
      (p.written ? tunings : tuning_failed) += 1;
    }
  }
  std::cout << describe(s) << "; tuning records " << tunings << " published, " << tuning_failed << " failed\n";
  return s.failed || tuning_failed ? 1 : 0;
}

int remote_pull(const std::filesystem::path& dir, const RemoteOptions& o) {
  auto tier = open_tier(o);
  const kr::Settings& st = tier->settings();
  std::vector<std::string> rkeys;
  std::string error;
  if (!scan(tier->connection(), pattern_of(st, cache::kRemoteKernel), rkeys, error))
    throw std::runtime_error("remote cache " + st.endpoint.describe() + ": " + error);
  auto store = cache::Store::open(dir, {.move_aside_damaged = false});
  const uint64_t cap = cache::max_bytes_from_env();
  const std::string& tc = jit::toolchain_id();
  const std::string prefix = st.ns + ":k:";
  uint64_t pulled = 0, present = 0, other = 0, bad = 0, failed = 0, bytes_in = 0;
  std::string first_bad;
  const auto t0 = Clock::now();
  Progress progress("pulled");
  uint64_t i = 0;
  for (const std::string& rk : rkeys) {
    progress.tick(i++, rkeys.size());
    const std::vector<uint8_t> raw = from_hex(std::string_view(rk).substr(std::min(prefix.size(), rk.size())));
    const std::string key(raw.begin(), raw.end());
    if (key.empty()) {
      ++bad;
      continue;
    }
    if (store->get("kernels", key)) {
      ++present;
      continue;
    }
    std::string payload, why;
    const kr::Got g = tier->get(cache::kRemoteKernel, key, payload, &why);
    if (g == kr::Got::Miss) continue;  // expired or evicted since the scan
    if (g == kr::Got::Unavailable) {
      ++failed;
      if (first_bad.empty()) first_bad = why;
      continue;
    }
    std::optional<cache::Record> rec;
    if (g == kr::Got::Hit) rec = cache::decode_record(payload, &why);
    if (!rec) {
      ++bad;
      if (first_bad.empty()) first_bad = why;
      continue;
    }
    if (rec->toolchain != tc || !arch_wanted(o, rec->arch)) {
      ++other;
      continue;
    }
    bool wrote = false;
    store->update([&](cache::Txn& t) { wrote = cache::put_record(t, key, payload, false, cap); });
    if (wrote) {
      ++pulled;
      bytes_in += payload.size();
    } else {
      ++present;
    }
  }
  uint64_t tunings = 0;
  if (o.tuning) {
    std::vector<std::string> tkeys;
    if (scan(tier->connection(), pattern_of(st, cache::kRemoteTuning), tkeys, error)) {
      const std::string tprefix = st.ns + ":t:";
      for (const std::string& rk : tkeys) {
        const std::string key = rk.substr(std::min(tprefix.size(), rk.size()));
        std::string payload, why;
        if (tier->get(cache::kRemoteTuning, key, payload, &why) != kr::Got::Hit) continue;
        auto rec = tuner::decode(payload, &why);
        if (!rec || rec->key != key) {
          ++bad;
          continue;
        }
        store->put("tuning", key, payload);
        ++tunings;
      }
    }
  }
  std::printf("pulled %llu records (%.1f MiB) of %zu in %s, %llu already here, %llu for another arch or toolchain, "
              "%llu refused, %llu failed; %llu tuning records; %.2f s\n",
              (unsigned long long)pulled, double(bytes_in) / (1 << 20), rkeys.size(), st.ns.c_str(),
              (unsigned long long)present, (unsigned long long)other, (unsigned long long)bad, (unsigned long long)failed,
              (unsigned long long)tunings, since(t0));
  if (!first_bad.empty()) std::fprintf(stderr, "first refused or failed record: %s\n", first_bad.c_str());
  return failed ? 1 : 0;
}

int remote_status(const std::filesystem::path& dir, const RemoteOptions& o) {
  auto tier = open_tier(o);
  const kr::Settings& st = tier->settings();
  cache::RedisConnection& c = tier->connection();
  json j{{"endpoint", st.endpoint.describe()},
         {"namespace", st.ns},
         {"signed", !st.secret.empty()},
         {"publishes", st.can_publish()},
         {"ttl_s", st.ttl_s},
         {"max_record_bytes", st.max_bytes}};
  std::vector<double> ms;
  std::string error;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    cache::RedisReply r = c.command({"PING"});
    if (!r.ok()) {
      error = std::string(cache::status_name(r.status)) + ": " + r.value;
      break;
    }
    ms.push_back(since(t0) * 1e3);
  }
  j["reachable"] = error.empty();
  if (!error.empty()) j["error"] = error;
  uint64_t kernels = 0, tunings = 0, bytes = 0;
  if (error.empty()) {
    std::sort(ms.begin(), ms.end());
    j["latency_ms"] = ms[ms.size() / 2];
    cache::RedisReply info = c.command({"INFO", "server"});
    if (auto p = info.value.find("redis_version:"); info.ok() && p != std::string::npos)
      j["redis_version"] = info.value.substr(p + 14, info.value.find('\r', p) - p - 14);
    std::vector<std::string> keys;
    if (scan(c, pattern_of(st, cache::kRemoteKernel), keys, error)) {
      kernels = keys.size();
      Progress progress("sized");
      uint64_t i = 0;
      for (const auto& k : keys) {
        progress.tick(i++, keys.size());
        cache::RedisReply r = c.command({"STRLEN", k});
        if (r.ok()) bytes += static_cast<uint64_t>(r.integer);
      }
    }
    keys.clear();
    if (scan(c, pattern_of(st, cache::kRemoteTuning), keys, error)) tunings = keys.size();
    j["kernel_records"] = kernels;
    j["tuning_records"] = tunings;
    j["record_bytes"] = bytes;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir / "data.mdb", ec)) {
    auto store = cache::Store::open(dir, {.move_aside_damaged = false});
    cache::RemoteCounters rc;
    store->view([&](cache::Txn& t) { rc = cache::read_remote_counters(t); });
    j["counters"] = {{"hits", rc.hits},         {"misses", rc.misses},       {"bad", rc.bad},
                     {"timeouts", rc.timeouts}, {"errors", rc.errors},       {"skipped", rc.skipped},
                     {"published", rc.published}, {"dropped", rc.dropped}};
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "remote     " << st.endpoint.describe() << " (namespace " << st.ns << ")\n";
    if (j["reachable"].get<bool>()) {
      char lat[32];
      std::snprintf(lat, sizeof lat, "%.3f", j["latency_ms"].get<double>());
      std::cout << "reachable  yes, " << lat << " ms round trip"
                << (j.contains("redis_version") ? ", Redis " + j["redis_version"].get<std::string>() : "") << "\n"
                << "records    " << kernels << " kernels (" << bytes << " bytes), " << tunings << " tuning\n";
    } else {
      std::cout << "reachable  no: " << j["error"].get<std::string>() << "\n";
    }
    std::cout << "trust      " << (st.secret.empty() ? (st.can_publish() ? "UNSIGNED (unsafe)" : "read-only, no key")
                                                      : "signed (HMAC-SHA256)")
              << "\n";
    if (j.contains("counters")) {
      const json& k = j["counters"];
      std::cout << "this cache hits " << k["hits"] << ", misses " << k["misses"] << ", bad " << k["bad"] << ", timeouts "
                << k["timeouts"] << ", errors " << k["errors"] << ", skipped " << k["skipped"] << ", published "
                << k["published"] << ", dropped " << k["dropped"] << "\n";
    }
  }
  return j["reachable"].get<bool>() ? 0 : 1;
}

}  // namespace kaio::tools
