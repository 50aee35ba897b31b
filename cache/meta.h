// Cache policy on top of the Store: the "meta" database (last use and hits per record,
// global hit/miss counters), the size cap with least-recently-used eviction, and pruning.
//
// "meta" layout (all integers u64 little-endian):
//   'k' ‖ kernel key  -> last_use_unix_us ‖ hits      (wall clock, microseconds)
//   "c:hits", "c:misses"  -> count                    (disk lookups of every process)
//   "c:write_failures"    -> count                    (record writes that failed: full
//                                                      disk, I/O error, map full)
//   "c:last_write_failure" -> unix seconds ‖ message  (the latest of them)
// Write failures are saved by the next write that succeeds (a full disk cannot take them).
// A record without a meta entry (written by an older kaio or by hand) counts as last used
// when it was created.
//
// Size. The cache's size is the pages that "kernels" and "meta" occupy (Txn::bytes): what
// the entries cost on disk, whole pages included. data.mdb never shrinks, but LMDB reuses
// freed pages, so the file stays near the high-water mark of that size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kaio/cache/store.h"

namespace kaio::cache {

inline constexpr uint64_t kDefaultMaxBytes = uint64_t(4) << 30;  // KAIO_CACHE_MAX_BYTES default

struct KeyUsage {
  uint64_t last_use_us = 0;  // wall clock, microseconds since the epoch
  uint64_t hits = 0;
};

uint64_t now_unix_us();

std::string meta_key(std::string_view kernel_key);
std::string encode_usage(const KeyUsage& u);
std::optional<KeyUsage> decode_usage(std::string_view bytes);

// "4294967296", "4G", "4GiB", "512M", "64k" (binary multiples). nullopt if malformed.
std::optional<uint64_t> parse_bytes(std::string_view s);
// "7d", "12h", "30m", "45s", "2w", or plain seconds. nullopt if malformed.
std::optional<uint64_t> parse_duration_seconds(std::string_view s);
// KAIO_CACHE_MAX_BYTES (0 = no cap), else kDefaultMaxBytes. A malformed value gives the
// default and sets `error`.
uint64_t max_bytes_from_env(std::string* error = nullptr);

// The size of the cache as `t` sees it: pages of "kernels" and "meta".
uint64_t cache_bytes(Txn& t);

// Usage of one record: its meta entry, else (created, 0) from the record's header.
KeyUsage usage_of(Txn& t, std::string_view kernel_key);

struct Counters {
  uint64_t hits = 0, misses = 0;
};
Counters read_counters(Txn& t);
void add_counters(Txn& t, uint64_t hits, uint64_t misses);

// The remote tier's counters (cache/remote_record.h), saved like the hit counters:
// "c:remote_<name>" in "meta".
struct RemoteCounters {
  uint64_t hits = 0;       // local misses answered by the remote tier (verified)
  uint64_t misses = 0;     // asked, not there
  uint64_t bad = 0;        // there, refused (signature, checksum, size, schema, arch)
  uint64_t timeouts = 0;   // connect or command timeouts
  uint64_t errors = 0;     // other failures (refused connection, reset, garbage, server errors)
  uint64_t skipped = 0;    // not asked: the circuit breaker was open
  uint64_t published = 0;  // records written to the remote tier
  uint64_t dropped = 0;    // records not published (queue full, remote failing, oversize)
  RemoteCounters& operator+=(const RemoteCounters& o);
  bool empty() const;
};
RemoteCounters read_remote_counters(Txn& t);
void add_remote_counters(Txn& t, const RemoteCounters& c);

struct WriteFailures {
  uint64_t count = 0;
  uint64_t last_unix = 0;  // seconds since the epoch; 0 when none was saved
  std::string last_error;
};
WriteFailures read_write_failures(Txn& t);
// Adds `count` failures; the latest is replaced when `last_unix` is newer.
void add_write_failures(Txn& t, uint64_t count, uint64_t last_unix, const std::string& last_error);
// Raises a record's last use to `last_use_us` (never lowers it) and adds `hits`; nothing
// when the record is gone (evicted or removed meanwhile).
void add_usage(Txn& t, std::string_view kernel_key, uint64_t last_use_us, uint64_t hits);

struct Removed {
  uint64_t records = 0;
  uint64_t bytes = 0;  // stored record bytes removed
};

// Writes a record and its meta entry (last use = now). Without `replace` an existing record
// is kept and false returned. Then, if the cache is over `max_bytes` (0: no cap), evicts
// least-recently-used records (never this one) down to 90% of it. A record larger than
// the cap on its own is not written (returns false).
bool put_record(Txn& t, std::string_view key, std::string_view record_bytes, bool replace, uint64_t max_bytes,
                Removed* evicted = nullptr);

// Removes a record and its meta entry.
bool remove_record(Txn& t, std::string_view key);
// Removes least-recently-used records until the cache is at most `target_bytes`; `keep` is
// never removed.
Removed evict_lru(Txn& t, uint64_t target_bytes, std::string_view keep = {});
// Removes records last used before `cutoff_us`.
Removed remove_unused_since(Txn& t, uint64_t cutoff_us);
// Removes records that would not be served: damaged, or (when `toolchain` is not empty)
// made by another toolchain. Also drops meta entries whose record is gone.
Removed remove_unservable(Txn& t, const std::string& toolchain);

// Every record's key matching a hex prefix (case-insensitive), in key order.
std::vector<std::string> keys_with_prefix(Txn& t, std::string_view hex_prefix);
std::string to_hex(std::string_view bytes);

}  // namespace kaio::cache
