// An LMDB environment holding named databases: "kernels" (key -> record bytes), "meta"
// (per-key last use and hits, global counters; see cache/meta.h) and "tuning". One
// environment per process per path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kaio/ir/error.h"

namespace kaio::cache {

// The cache file is damaged: its meta pages do not match the file, LMDB reported
// corruption, or reading the mapped file faulted (SIGBUS/SIGSEGV, caught). `moved_to` is
// where the damaged data.mdb was moved aside (empty when it was not moved).
class DamagedCache : public ToolError {
 public:
  DamagedCache(std::string code, const std::string& message, std::filesystem::path file, std::filesystem::path moved_to)
      : ToolError("LMDB", std::move(code), message), file_(std::move(file)), moved_to_(std::move(moved_to)) {}
  const std::filesystem::path& file() const noexcept { return file_; }
  const std::filesystem::path& moved_to() const noexcept { return moved_to_; }

 private:
  std::filesystem::path file_, moved_to_;
};

struct OpenOptions {
  // A damaged data.mdb is renamed to data.mdb.damaged-<UTC time> (lock.mdb is removed)
  // and a fresh cache started, at open or when a later read finds the damage. Off: open
  // throws DamagedCache and the file is left alone (kaio-cache inspects it).
  bool move_aside_damaged = true;
};

// Fault injection for tests: the next `count` write transactions of this process fail
// at commit with `code` (ENOSPC, EDQUOT, EIO, ... or MDB_MAP_FULL; kInjectHang blocks
// the writer forever, like a writer stuck in the kernel). The environment variable
// KAIO_CACHE_FAIL_WRITES="COUNT:CODE" (COUNT a number or "all"; CODE ENOSPC, EDQUOT, EIO,
// MAP_FULL or HANG) does the same for a whole process, read at its first write.
inline constexpr int kInjectHang = -1;
void inject_write_failures(int count, int code);

// $KAIO_CACHE_DIR, else $XDG_CACHE_HOME/kaio, else $HOME/.cache/kaio.
std::filesystem::path default_dir();

class Store;

// A transaction handed to Store::update (read-write) or Store::view (read-only). Views of
// stored bytes are valid until the transaction ends. Only usable inside the callback.
class Txn {
 public:
  std::optional<std::string_view> get(std::string_view db, std::string_view key);
  // Returns false when `overwrite` is false and the key exists. Read-only: UsageError.
  bool put(std::string_view db, std::string_view key, std::string_view value, bool overwrite = true);
  bool erase(std::string_view db, std::string_view key);
  // Removes every entry of a database.
  void clear(std::string_view db);
  void for_each(std::string_view db, const std::function<void(std::string_view key, std::string_view value)>& fn);
  uint64_t count(std::string_view db);
  // Pages the database occupies (branch + leaf + overflow) times the page size: what its
  // entries cost on disk, as this transaction sees it. O(1).
  uint64_t bytes(std::string_view db);

 private:
  friend class Store;
  Txn(void* txn, Store* store, bool writable) : txn_(txn), store_(store), writable_(writable) {}
  void* txn_;
  Store* store_;
  bool writable_;
};

class Store {
 public:
  // Opens (creating the directory if needed) the environment at `dir`; the same path in one
  // process returns the same Store. Throws kaio::ToolError("LMDB" or "filesystem", ...).
  // Before LMDB maps data.mdb its meta pages are checked against the file (see
  // cache/lmdb_file.h); a damaged file is handled as `options` says. Throws DamagedCache
  // or ToolError.
  static std::shared_ptr<Store> open(const std::filesystem::path& dir, OpenOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& dir() const;

  // True once this store found its file damaged; every later operation throws
  // DamagedCache. Store::open then opens a fresh store (if the file was moved aside).
  bool damaged() const;
  // Set when open() moved a damaged file aside: one sentence naming both paths.
  const std::string& open_notice() const;

  // A miss is nullopt, not an exception. Throws ToolError on LMDB failures.
  std::optional<std::string> get(std::string_view db, std::string_view key);
  // Calls fn with the stored bytes, in place, inside the read transaction (no copy; the
  // view is valid only during the call). Returns false on a miss.
  bool visit(std::string_view db, std::string_view key, const std::function<void(std::string_view value)>& fn);
  // Writes key -> value unless the key exists (a lost race is a normal outcome: returns
  // false). Grows the map (a bounded number of times) and retries on MDB_MAP_FULL.
  bool put_if_absent(std::string_view db, std::string_view key, std::string_view value);
  // Writes key -> value, replacing any previous value.
  void put(std::string_view db, std::string_view key, std::string_view value);
  bool erase(std::string_view db, std::string_view key);
  // Visits every entry of a database in key order inside one read transaction.
  void for_each(std::string_view db, const std::function<void(std::string_view key, std::string_view value)>& fn);
  uint64_t count(std::string_view db);
  uint64_t map_size() const;

  // Runs fn in one write transaction and commits it: all of fn's changes or none. fn may
  // run more than once (the map is grown, at most a few times, and fn retried on
  // MDB_MAP_FULL), so it must only
  // change the store through the Txn. Exceptions from fn abort the transaction.
  void update(const std::function<void(Txn&)>& fn);
  // Runs fn in one read transaction (a consistent snapshot).
  void view(const std::function<void(Txn&)>& fn);

  struct Usage {
    uint64_t map_bytes = 0;   // the map size (address space reserved; the file is sparse)
    uint64_t used_bytes = 0;  // pages in use up to the high-water mark, times the page size
    uint64_t file_bytes = 0;  // size of data.mdb
    uint64_t page_bytes = 0;
  };
  Usage usage();

  struct Impl;

 private:
  friend class Txn;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kaio::cache
