// Internal: the compile path's view of the on-disk cache. Every failure here is logged
// and turned into a miss or a dropped write; a cache problem never fails a compile.
//
// Use tracking. A disk hit records (key -> last use, hits) in an in-process buffer, not
// in LMDB: no write transaction on the hit path. The buffer goes to the "meta" database
// with the next background record write, by a background flush at most every
// kUsageFlushSeconds, in flush(), and at process exit.
//
// Failing writes (full disk, quota, I/O error, a map that cannot grow, a damaged file).
// A record write is tried at most kWriteAttempts times (a full disk or a full map is not
// retried at all); then the record is dropped: the kernel is already in memory. The first
// failure of a cache is a warning; more of them pause that cache's writes, for 1 s after
// the second and doubling up to kMaxBackoffSeconds, and writes queued while paused are
// skipped. Failures are counted here and saved in the cache's "meta" database by the next
// write that succeeds (`kaio-cache stats` shows them). Process exit waits at most
// kExitWaitMs for writers still running (a writer can be stuck in the kernel on a failing
// disk), then leaves them; their transactions are never committed half-way (LMDB).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"

namespace kaio::jit::disk {

inline constexpr int kUsageFlushSeconds = 10;
inline constexpr int kWriteAttempts = 2;
inline constexpr int kMaxBackoffSeconds = 60;
inline constexpr int kExitWaitMs = 2000;
// flush() gives up when no writer has finished for this long (it is called by
// applications and tests that then expect the records to be there: slow progress is
// waited for, a stuck writer is not).
inline constexpr int kFlushStallSeconds = 10;
// How long the writer of fetched remote records waits for more before it ends.
inline constexpr int kFetchedLingerMs = 20;

// The store for `dir` (empty: default location), or null when the cache is unusable. A
// store found damaged is dropped and the cache opened afresh (its file was moved aside).
std::shared_ptr<cache::Store> store_for(const std::string& dir);

enum class Lookup { Hit, Miss, Bad };
// Reads and validates the record of `key`; Bad means a record exists but must not be
// served. Hits and misses are counted (buffered, see above).
Lookup read(const std::shared_ptr<cache::Store>& s, const std::string& key, const std::string& arch,
            cache::Record& out);

// Buffers the remote tier's counters with this store's use counts (saved with them).
void note_remote(const std::shared_ptr<cache::Store>& s, const cache::RemoteCounters& c);

// Queues a write; `replace` overwrites an existing (bad or forced) record. The write keeps
// the cache under KAIO_CACHE_MAX_BYTES by evicting the least recently used records.
void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace);
// Queues a record fetched (and verified) from the remote tier, replacing any local one.
// One background thread writes the queue, a store's records in one transaction.
void write_fetched_async(std::shared_ptr<cache::Store> s, std::string key, std::string bytes);
// Waits for queued writes (see kFlushStallSeconds) and remote publishes (bounded), then
// writes the buffered use counts.
void flush();

// Write transactions that carried buffered use counts (for tests: hits must not write).
uint64_t usage_write_count();

struct WriteStats {
  uint64_t written = 0;  // records committed
  uint64_t failed = 0;   // record writes that failed (after their attempts)
  uint64_t skipped = 0;  // record writes dropped while the cache's writes were paused
};
// This process's record writes, all caches together.
WriteStats write_stats();

}  // namespace kaio::jit::disk
