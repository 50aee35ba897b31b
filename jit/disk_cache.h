// Internal: the compile path's view of the on-disk cache. Every failure here is logged
// once and turned into a miss; a cache problem never fails a compile.
//
// Use tracking. A disk hit records (key -> last use, hits) in an in-process buffer, not
// in LMDB: no write transaction on the hit path. The buffer goes to the "meta" database
// with the next background record write, by a background flush at most every
// kUsageFlushSeconds, in flush(), and at process exit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kaio/cache/record.h"
#include "kaio/cache/store.h"

namespace kaio::jit::disk {

inline constexpr int kUsageFlushSeconds = 10;

// The store for `dir` (empty: default location), or null when the cache is unusable.
std::shared_ptr<cache::Store> store_for(const std::string& dir);

enum class Lookup { Hit, Miss, Bad };
// Reads and validates the record of `key`; Bad means a record exists but must not be
// served. Hits and misses are counted (buffered, see above).
Lookup read(const std::shared_ptr<cache::Store>& s, const std::string& key, const std::string& arch,
            cache::Record& out);

// Queues a write; `replace` overwrites an existing (bad or forced) record. The write keeps
// the cache under KAIO_CACHE_MAX_BYTES by evicting the least recently used records.
void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace);
// Waits for queued writes, then writes the buffered use counts.
void flush();

// Write transactions that carried buffered use counts (for tests: hits must not write).
uint64_t usage_write_count();

}  // namespace kaio::jit::disk
