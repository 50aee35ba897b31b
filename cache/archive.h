// Export and import of cache records, to ship a warm cache with an application.
//
// File layout (little-endian): magic "KAIOEXP\0" | u32 version (1) |
//   per record: u32 key bytes | u64 record bytes | key | record |
//   end: u32 0 | u64 record count
// Every record carries its own checksum (cache/record.h); the trailing count detects a
// truncated file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "kaio/cache/store.h"

namespace kaio::cache {

struct ExportResult {
  uint64_t records = 0;
  uint64_t bytes = 0;    // record bytes written
  uint64_t damaged = 0;  // records left out because they do not check out
};
// Writes every valid record of `store` to `file` (replaced). Throws ToolError.
ExportResult export_records(Store& store, const std::filesystem::path& file);

struct ImportResult {
  uint64_t imported = 0;
  uint64_t present = 0;          // the key was already in the cache
  uint64_t other_toolchain = 0;  // made by another toolchain: skipped
  uint64_t damaged = 0;          // not a valid record: skipped
  uint64_t evicted = 0;          // records evicted to stay under max_bytes
  uint64_t bytes = 0;            // record bytes imported
};
// Checks the structure of an export file without importing it: magic, version, every
// entry's sizes against the bytes that remain (a hostile size never allocates), the end
// marker, the record count and nothing after it. Returns the number of records; throws
// ToolError naming the problem and its offset.
uint64_t validate_archive(const std::filesystem::path& file);

// Adds the records of `file` that `store` lacks. Records whose toolchain differs from
// `toolchain` are skipped (empty: import all). Then evicts down to `max_bytes` (0: no cap).
// The file is validated first (validate_archive): a damaged or hostile file throws
// ToolError before anything is written. Single records that do not check out are skipped
// and counted.
ImportResult import_records(Store& store, const std::filesystem::path& file, const std::string& toolchain,
                            uint64_t max_bytes);

}  // namespace kaio::cache
