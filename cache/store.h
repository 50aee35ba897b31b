// An LMDB environment holding named databases: "kernels" (key -> record bytes), "meta"
// (reserved for last use / hits) and "tuning". One environment per process per path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kaio::cache {

// $KAIO_CACHE_DIR, else $XDG_CACHE_HOME/kaio, else $HOME/.cache/kaio.
std::filesystem::path default_dir();

class Store {
 public:
  // Opens (creating the directory if needed) the environment at `dir`; the same path in one
  // process returns the same Store. Throws kaio::ToolError("LMDB" or "filesystem", ...).
  static std::shared_ptr<Store> open(const std::filesystem::path& dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& dir() const;

  // A miss is nullopt, not an exception. Throws ToolError on LMDB failures.
  std::optional<std::string> get(std::string_view db, std::string_view key);
  // Calls fn with the stored bytes, in place, inside the read transaction (no copy; the
  // view is valid only during the call). Returns false on a miss.
  bool visit(std::string_view db, std::string_view key, const std::function<void(std::string_view value)>& fn);
  // Writes key -> value unless the key exists (a lost race is a normal outcome: returns
  // false). Grows the map and retries on MDB_MAP_FULL.
  bool put_if_absent(std::string_view db, std::string_view key, std::string_view value);
  // Writes key -> value, replacing any previous value.
  void put(std::string_view db, std::string_view key, std::string_view value);
  bool erase(std::string_view db, std::string_view key);
  // Visits every entry of a database in key order inside one read transaction.
  void for_each(std::string_view db, const std::function<void(std::string_view key, std::string_view value)>& fn);
  uint64_t count(std::string_view db);
  uint64_t map_size() const;

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kaio::cache
