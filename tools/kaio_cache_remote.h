// `kaio-cache remote ...` and `kaio-precompile --push`: the fleet-shared tier seen from the
// command line (jit/disk_cache_remote.h). Tools wait longer than compiles: their timeouts
// default to 2 s (KAIO_REMOTE_CACHE_TIMEOUT_MS and _CONNECT_TIMEOUT_MS still win).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kaio/cache/store.h"

namespace kaio::tools {

struct RemoteOptions {
  std::string url;                 // empty: KAIO_REMOTE_CACHE
  std::vector<std::string> archs;  // empty: every arch
  bool tuning = true;              // tuning records too
  bool force = false;              // push: overwrite records already there
  bool json = false;
};

// Reachability, latency (median of PINGs), server version, the namespace's record count and
// bytes, this cache's remote counters. Exit 1 when Redis does not answer.
int remote_status(const std::filesystem::path& dir, const RemoteOptions& o);
// Publishes this cache's records (of this toolchain, the archs asked) and tuning records.
int remote_push(const std::filesystem::path& dir, const RemoteOptions& o);
// Copies the namespace's records (checked like a read-through) into this cache.
int remote_pull(const std::filesystem::path& dir, const RemoteOptions& o);

struct PushSummary {
  uint64_t written = 0, present = 0, failed = 0, skipped = 0, bytes = 0;
  double seconds = 0;
  std::string first_error;
};
// Publishes the records of `keys` (raw cache keys) from `store`; progress on stderr at most
// once a second. Throws kaio::UsageError-free std::runtime_error on wrong settings.
PushSummary push_keys(cache::Store& store, const std::vector<std::string>& keys, const RemoteOptions& o);
std::string describe(const PushSummary& s);

}  // namespace kaio::tools
