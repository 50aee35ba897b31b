// Internal: the compile path's view of the on-disk cache. Every failure here is logged
// once and turned into a miss; a cache problem never fails a compile.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kaio/cache/record.h"
#include "kaio/cache/store.h"

namespace kaio::jit::disk {

// The store for `dir` (empty: default location), or null when the cache is unusable.
std::shared_ptr<cache::Store> store_for(const std::string& dir);

enum class Lookup { Hit, Miss, Bad };
// Reads and validates the record of `key`; Bad means a record exists but must not be served.
Lookup read(cache::Store& s, const std::string& key, const std::string& arch, cache::Record& out);

// Queues a write; `replace` overwrites an existing (bad or forced) record.
void write_async(std::shared_ptr<cache::Store> s, std::string key, cache::Record rec, bool replace);
void flush();

}  // namespace kaio::jit::disk
