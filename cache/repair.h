// Salvage of a damaged cache file: the records that can still be read are copied into a
// fresh data.mdb, which replaces the damaged one (kept beside it as
// data.mdb.damaged-<time>). Used by `kaio-cache verify --repair`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kaio::cache {

struct SalvageResult {
  uint64_t entries_seen = 0;  // leaf entries found on the file's pages
  uint64_t salvaged = 0;      // kernel records copied (checksum intact; newest per key)
  uint64_t bytes = 0;         // their bytes
  std::filesystem::path moved_to;  // where the damaged file went
};

// Reads <dir>/data.mdb page by page (never mapping it), keeps every entry that decodes as
// a kaio record with a valid checksum (records carry their own; use counts and tuning
// entries are not recognisable and are dropped), writes them to a fresh environment and
// swaps it in. Throws ToolError when the directory cannot be written.
SalvageResult salvage(const std::filesystem::path& dir);

}  // namespace kaio::cache
