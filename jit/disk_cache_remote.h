// Internal: the remote cache tier behind the on-disk cache (Redis, through
// cache/redis_client.h). LMDB stays the only cache on the hot path:
//
//   read-through   a local miss asks Redis; a record that passes every check (envelope:
//                  key, kind, size, signature; record: magic, schema, checksum, sizes;
//                  then arch and toolchain) is queued for the local LMDB (like a
//                  compiled record) and loaded from the verified bytes
//   write-behind   a freshly compiled record is queued for a background publisher (a
//                  bounded queue: when full the record is dropped, never waited for)
//   tuning         records of the tuning table travel the same way, keyed by the tuning
//                  key (op, shapes, device model, SM count)
//
// Settings (environment; a CompileOptions::remote_cache URL replaces KAIO_REMOTE_CACHE):
//   KAIO_REMOTE_CACHE=redis://[user:password@]host:port[/db]   the tier (empty/"off": none)
//   KAIO_REMOTE_CACHE_NAMESPACE   key prefix (default kaio:v<record schema>)
//   KAIO_REMOTE_CACHE_TTL         seconds a published record lives (default 0: no expiry)
//   KAIO_REMOTE_CACHE_KEY_FILE    shared secret: records are signed (HMAC-SHA256) and only
//                                 records signed with it are loaded
//   KAIO_REMOTE_CACHE_TRUST       "unsigned": without a key, publish unsigned records too
//                                 (UNSAFE: whoever can write to Redis can feed code to the
//                                 fleet). Without a key the tier is read-only by default.
//   KAIO_REMOTE_CACHE_TIMEOUT_MS, KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS   (default 50, 50)
//   KAIO_REMOTE_CACHE_RETRY_MS    how long the circuit stays open (default 5000)
//   KAIO_REMOTE_CACHE_FAILURES    failures in a row that open it (default 3)
//   KAIO_REMOTE_CACHE_MAX_BYTES   largest record published or loaded (default 64M)
//   KAIO_REMOTE_CACHE_CLAIM_MS    compile once per fleet: a node that misses claims the key
//                                 (SET NX with this lease) and compiles; the others wait
//                                 for its record, at most this long, then compile
//                                 themselves (default 10000; 0: no claims)
//
// Never a failed job: every remote failure is a miss or a dropped publish, counted; the
// first failure of an outage is one warning, the recovery one info line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/redis_client.h"
#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"

namespace kaio::jit::remote {

struct Settings {
  std::string url;  // as given (shown without the password by `endpoint.describe()`)
  cache::RedisEndpoint endpoint;
  std::string ns;
  uint64_t ttl_s = 0;
  cache::RedisTimeouts timeouts;
  cache::Breaker::Options breaker;
  std::string secret;  // empty: no signing key
  bool trust_unsigned = false;
  uint64_t max_bytes = 0;
  uint64_t claim_ms = 10000;
  size_t queue_records = 256;            // write-behind queue bound, records
  uint64_t queue_bytes = uint64_t(256) << 20;  // and bytes
  bool can_publish() const { return !secret.empty() || trust_unsigned; }
};
// The settings for `url` (empty: KAIO_REMOTE_CACHE). nullopt when the tier is off; with
// `error` set when the settings are wrong (then the tier is off too).
std::optional<Settings> resolve(const std::string& url, std::string* error);

class Tier;
// The tier of `url` (empty: KAIO_REMOTE_CACHE) in this process, or null when off. Wrong
// settings: one warning, null.
std::shared_ptr<Tier> tier_for(const std::string& url);

enum class Got { Hit, Miss, Bad, Unavailable };
struct PutOutcome {
  bool written = false;
  bool exists = false;  // NX and already there
  std::string error;    // why not written (empty when written or exists)
};

class Tier {
 public:
  explicit Tier(Settings s);
  ~Tier();
  const Settings& settings() const { return s_; }
  // A verified payload (envelope checks only; the payload's own format is the caller's).
  // `store` (may be null) receives the counters of what went wrong.
  Got get(char kind, const std::string& key, std::string& payload, std::string* why,
          const std::shared_ptr<cache::Store>& store = nullptr);
  // get(), and on a miss the fleet's compile-once protocol: claim the key (then Miss: the
  // caller compiles and publishes) or wait for the claimant's record (Hit), bounded by
  // claim_ms (then Miss). Only a tier that can publish claims.
  Got get_or_claim(char kind, const std::string& key, std::string& payload, std::string* why,
                   const std::shared_ptr<cache::Store>& store = nullptr);
  // Synchronous publish (tools). Refuses oversize records and publishing without a key
  // (unless trusted unsigned).
  PutOutcome put(char kind, const std::string& key, const std::string& payload, bool replace,
                 const std::shared_ptr<cache::Store>& store = nullptr);
  // Queues a publish; never blocks. `store` receives the counters (may be null).
  void publish_async(char kind, std::string key, std::string payload, bool replace, std::shared_ptr<cache::Store> store);
  // Waits up to `ms` for queued publishes; false when some are left.
  bool drain(int ms);
  // A connection of its own, for tools (status, scans).
  cache::RedisConnection& connection() { return *reader_; }
  // Publishes not yet done, and the thread's state.
  size_t queued() const;

  struct Impl;

 private:
  Settings s_;
  std::shared_ptr<cache::Breaker> breaker_;
  std::unique_ptr<cache::RedisConnection> reader_;
  std::unique_ptr<Impl> impl_;
  // Logs an outage's start (one warning) and end, counts timeouts and errors.
  void note_reply(const cache::RedisReply& r, const std::shared_ptr<cache::Store>& store, const char* what);
  friend struct Impl;
};

// The compile path. A verified record is queued for `store` (LMDB) and returned as a Hit;
// `remote_bad` is set when the remote record was refused (the compile then replaces it).
disk::Lookup fetch_kernel(Tier& t, const std::shared_ptr<cache::Store>& store, const std::string& key,
                          const std::string& arch, cache::Record& out, bool& remote_bad);
void publish_kernel(Tier& t, const std::shared_ptr<cache::Store>& store, const std::string& key,
                    const std::string& record_bytes, bool replace);

// The tuner's hooks (KAIO_REMOTE_CACHE): a record's bytes from the remote tier that
// `valid` accepts (the tuner decodes and checks them; a refusal is a bad record), and a
// record published after a tuning.
std::optional<std::string> fetch_tuning(const std::shared_ptr<cache::Store>& store, const std::string& key,
                                        const std::function<bool(const std::string&, std::string*)>& valid);
void publish_tuning(const std::shared_ptr<cache::Store>& store, const std::string& key, const std::string& bytes);

// This process's counters, all tiers together.
cache::RemoteCounters stats();
void reset_stats();
// Adds to the counters of this process and of `store` (saved with its use counts).
void count(const std::shared_ptr<cache::Store>& store, const cache::RemoteCounters& c);

// Waits (bounded) for queued publishes: flush_cache_writes() and process exit.
inline constexpr int kFlushWaitMs = 5000;
inline constexpr int kExitWaitMs = 1000;
void flush(int ms = kFlushWaitMs);

}  // namespace kaio::jit::remote
