// The cache store on LMDB.
//
// Concurrency. LMDB allows many readers and one writer per environment, across threads and
// processes. Inside one process:
//  - write transactions are serialized by `write_mu` (LMDB would block on its own writer
//    lock anyway; taking ours first keeps map growth, below, to one thread at a time);
//  - every transaction, read or write, holds `map_mu` shared. Changing the map size
//    (mdb_env_set_mapsize) unmaps and remaps the file, which is only safe when no
//    transaction of this process is open, so it takes `map_mu` exclusive.
// The environment is opened with MDB_NOTLS: a read transaction is tied to its MDB_txn
// rather than to the thread's reader slot, so that threads may come and go freely.
// MDB_NOMETASYNC skips the fsync of the meta page: after an OS crash the last committed
// transaction may be lost, but the file stays consistent (a cache can afford that).
//
// Map size. The map starts at 1 GiB (the file itself grows only as pages are written)
// or at $KAIO_CACHE_INITIAL_MAP_BYTES. A write that finds the map full doubles it and
// retries. When another process has grown the map past our mapping, LMDB answers
// MDB_MAP_RESIZED and we adopt the size it recorded.
//
// fork(). An LMDB environment must not be used across fork(): the child would share the
// parent's reader slots and lock state. A child must open its own: the registry records
// the pid that opened each environment and never hands a parent's environment to a child,
// and every operation on a Store checks that it runs in the process that opened it. A
// child also never closes an environment it inherited, because closing the lock file
// would drop the POSIX locks that its own environment on the same path holds. Fork only
// from a point where no other thread is inside Store::open (the registry mutex would be
// inherited locked).
#include "kaio/cache/store.h"

#include <lmdb.h>
#include <pwd.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "kaio/ir/error.h"

namespace kaio::cache {

namespace fs = std::filesystem;

namespace {

constexpr size_t kDefaultInitialMapBytes = size_t(1) << 30;
constexpr unsigned kMaxDbs = 8;
constexpr unsigned kMaxReaders = 254;
// Bounds the grow-and-retry loops: 16 doublings of even a 1 MiB map reach 64 GiB.
constexpr int kMaxRetries = 16;
constexpr std::array<const char*, 3> kDbNames = {"kernels", "meta", "tuning"};

std::string lmdb_code_name(int rc) {
  switch (rc) {
    case MDB_KEYEXIST: return "MDB_KEYEXIST";
    case MDB_NOTFOUND: return "MDB_NOTFOUND";
    case MDB_PAGE_NOTFOUND: return "MDB_PAGE_NOTFOUND";
    case MDB_CORRUPTED: return "MDB_CORRUPTED";
    case MDB_PANIC: return "MDB_PANIC";
    case MDB_VERSION_MISMATCH: return "MDB_VERSION_MISMATCH";
    case MDB_INVALID: return "MDB_INVALID";
    case MDB_MAP_FULL: return "MDB_MAP_FULL";
    case MDB_DBS_FULL: return "MDB_DBS_FULL";
    case MDB_READERS_FULL: return "MDB_READERS_FULL";
    case MDB_TLS_FULL: return "MDB_TLS_FULL";
    case MDB_TXN_FULL: return "MDB_TXN_FULL";
    case MDB_CURSOR_FULL: return "MDB_CURSOR_FULL";
    case MDB_PAGE_FULL: return "MDB_PAGE_FULL";
    case MDB_MAP_RESIZED: return "MDB_MAP_RESIZED";
    case MDB_INCOMPATIBLE: return "MDB_INCOMPATIBLE";
    case MDB_BAD_RSLOT: return "MDB_BAD_RSLOT";
    case MDB_BAD_TXN: return "MDB_BAD_TXN";
    case MDB_BAD_VALSIZE: return "MDB_BAD_VALSIZE";
    case MDB_BAD_DBI: return "MDB_BAD_DBI";
    default: return mdb_strerror(rc);  // an errno value
  }
}

[[noreturn]] void lmdb_fail(int rc, const std::string& what) {
  throw ToolError("LMDB", lmdb_code_name(rc), what + ": " + mdb_strerror(rc));
}

void lmdb_check(int rc, const std::string& what) {
  if (rc != MDB_SUCCESS) lmdb_fail(rc, what);
}

[[noreturn]] void fs_fail(const std::error_code& ec, const std::string& what) {
  throw ToolError("filesystem", ec.message(), what);
}

MDB_val as_val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }
std::string_view as_view(const MDB_val& v) { return {static_cast<const char*>(v.mv_data), v.mv_size}; }

size_t initial_map_bytes() {
  const char* s = std::getenv("KAIO_CACHE_INITIAL_MAP_BYTES");
  if (!s || !*s) return kDefaultInitialMapBytes;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(s, &end, 10);
  if (*end != '\0' || n == 0)
    throw UsageError("", "cache", std::string("KAIO_CACHE_INITIAL_MAP_BYTES='") + s +
                                      "' is not a positive byte count");
  return static_cast<size_t>(n);
}

// Read-only transactions and their cursors are released on every path out, throws included.
struct TxnAbort {
  MDB_txn* txn;
  ~TxnAbort() { mdb_txn_abort(txn); }
};
struct CursorClose {
  MDB_cursor* cursor;
  ~CursorClose() { mdb_cursor_close(cursor); }
};

// Thrown by a Txn operation that found the map full; Store::update grows it and retries.
struct MapFull {};

}  // namespace

// ---------------------------------------------------------------------------------------
// Impl: one open environment.

struct Store::Impl {
  fs::path dir;
  MDB_env* env = nullptr;
  pid_t pid = getpid();
  std::array<MDB_dbi, kDbNames.size()> dbis{};
  mutable std::shared_mutex map_mu;  // shared: any transaction; exclusive: remapping
  std::mutex write_mu;               // one write transaction at a time in this process

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    // A fork child leaves an inherited environment alone (see the top of this file).
    if (env && pid == getpid()) mdb_env_close(env);
  }

  std::string where(std::string_view op, std::string_view db) const {
    std::string s(op);
    if (!db.empty()) s += " '" + std::string(db) + "'";
    return s + " in " + dir.string();
  }

  MDB_dbi dbi(std::string_view db) const {
    for (size_t i = 0; i < kDbNames.size(); ++i)
      if (db == kDbNames[i]) return dbis[i];
    throw UsageError("", "cache", "unknown cache database '" + std::string(db) +
                                      "' (expected kernels, meta or tuning)");
  }

  void check_process() const {
    if (pid != getpid())
      throw UsageError("", "cache", "the cache at " + dir.string() + " was opened by process " +
                                        std::to_string(pid) + "; a forked process (" +
                                        std::to_string(getpid()) +
                                        ") must call Store::open itself");
  }

  uint64_t current_map_size() const {
    MDB_envinfo info;
    lmdb_check(mdb_env_info(env, &info), where("reading the map size of", ""));
    return info.me_mapsize;
  }

  // Caller holds map_mu exclusive. Size 0 makes LMDB take the size recorded in the file,
  // which another process may have grown; ours is restored if it was larger.
  void adopt_recorded_map_size() {
    const uint64_t ours = current_map_size();
    lmdb_check(mdb_env_set_mapsize(env, 0), where("adopting the map size of", ""));
    if (current_map_size() < ours)
      lmdb_check(mdb_env_set_mapsize(env, ours), where("restoring the map size of", ""));
  }

  void on_map_resized() {
    std::unique_lock lock(map_mu);
    adopt_recorded_map_size();
  }

  void grow_map(std::string_view op, std::string_view db) {
    std::unique_lock lock(map_mu);
    const uint64_t next = current_map_size() * 2;
    lmdb_check(mdb_env_set_mapsize(env, next),
               where("growing the map to " + std::to_string(next) + " bytes for " + std::string(op), db));
  }

  // Runs fn(txn) in a read transaction and returns its result.
  template <class Fn>
  auto read(std::string_view op, std::string_view db, Fn&& fn) {
    check_process();
    bool readers_checked = false;
    for (int attempt = 0;; ++attempt) {
      int rc;
      {
        std::shared_lock lock(map_mu);
        MDB_txn* txn = nullptr;
        rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        if (rc == MDB_SUCCESS) {
          TxnAbort guard{txn};
          return fn(txn);
        }
      }
      if (rc == MDB_MAP_RESIZED && attempt < kMaxRetries) {
        on_map_resized();
      } else if (rc == MDB_READERS_FULL && !readers_checked) {
        // Slots of crashed processes are only freed by a reader check.
        readers_checked = true;
        int dead = 0;
        mdb_reader_check(env, &dead);
      } else {
        lmdb_fail(rc, where(op, db));
      }
    }
  }

  // Runs apply(txn) in a write transaction and commits. apply returns an LMDB code:
  // MDB_KEYEXIST and MDB_NOTFOUND are outcomes, returned to the caller after an abort;
  // MDB_MAP_FULL (from apply or commit) grows the map and runs apply again.
  template <class Fn>
  int write(std::string_view op, std::string_view db, Fn&& apply) {
    check_process();
    std::lock_guard writer(write_mu);
    for (int attempt = 0;; ++attempt) {
      int rc;
      {
        std::shared_lock lock(map_mu);
        MDB_txn* txn = nullptr;
        rc = mdb_txn_begin(env, nullptr, 0, &txn);
        if (rc == MDB_SUCCESS) {
          rc = apply(txn);
          if (rc == MDB_SUCCESS) {
            rc = mdb_txn_commit(txn);  // frees the transaction whatever it returns
            if (rc == MDB_SUCCESS) return rc;
          } else {
            mdb_txn_abort(txn);
            if (rc == MDB_KEYEXIST || rc == MDB_NOTFOUND) return rc;
          }
        }
      }
      if (rc == MDB_MAP_FULL && attempt < kMaxRetries) {
        grow_map(op, db);
      } else if (rc == MDB_MAP_RESIZED && attempt < kMaxRetries) {
        on_map_resized();
      } else {
        lmdb_fail(rc, where(op, db));
      }
    }
  }
};

namespace {

std::unique_ptr<Store::Impl> open_environment(const fs::path& dir) {
  auto impl = std::make_unique<Store::Impl>();
  impl->dir = dir;
  const std::string where = "opening the cache at " + dir.string();
  lmdb_check(mdb_env_create(&impl->env), where);
  // From here on ~Impl closes the environment, as LMDB requires after a failed open.
  const size_t initial = initial_map_bytes();
  lmdb_check(mdb_env_set_maxdbs(impl->env, kMaxDbs), where);
  lmdb_check(mdb_env_set_maxreaders(impl->env, kMaxReaders), where);
  lmdb_check(mdb_env_set_mapsize(impl->env, initial), where);
  lmdb_check(mdb_env_open(impl->env, dir.c_str(), MDB_NOTLS | MDB_NOMETASYNC, 0664), where);
  // Free the reader slots of processes that died inside a read transaction.
  int dead = 0;
  lmdb_check(mdb_reader_check(impl->env, &dead), where);
  // A configured size replaces the one recorded in the file; keep the larger of the two
  // so that a cache grown earlier does not start by hitting MDB_MAP_FULL.
  impl->adopt_recorded_map_size();

  MDB_txn* txn = nullptr;
  lmdb_check(mdb_txn_begin(impl->env, nullptr, 0, &txn), where);
  for (size_t i = 0; i < kDbNames.size(); ++i) {
    const int rc = mdb_dbi_open(txn, kDbNames[i], MDB_CREATE, &impl->dbis[i]);
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn);
      lmdb_fail(rc, where + " (database '" + kDbNames[i] + "')");
    }
  }
  lmdb_check(mdb_txn_commit(txn), where);
  return impl;
}

// One environment per canonical path per process. LMDB forbids opening the same
// environment twice in a process: closing either would release the POSIX locks of both.
// So a new environment is opened only after the previous one for that path has closed.
struct Registry {
  struct Entry {
    std::weak_ptr<Store> store;
    const Store* owner = nullptr;  // identifies the entry for ~Store
    pid_t pid = 0;
  };
  std::mutex mu;
  std::condition_variable closed;  // signalled when a Store has closed its environment
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: Stores may outlive static destruction
  return *r;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Store

fs::path default_dir() {
  if (const char* d = std::getenv("KAIO_CACHE_DIR"); d && *d) return d;
  // The XDG base directory spec says relative values are to be ignored.
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return fs::path(x) / "kaio";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "kaio";
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir &&
      *found->pw_dir)
    return fs::path(found->pw_dir) / ".cache" / "kaio";
  throw ToolError("filesystem", "no home directory",
                  "cannot place the kaio cache: set KAIO_CACHE_DIR (HOME is unset)");
}

std::shared_ptr<Store> Store::open(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fs_fail(ec, "creating the cache directory " + dir.string());
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) fs_fail(ec, "resolving the cache directory " + dir.string());
  const std::string key = canonical.string();

  Registry& reg = registry();
  std::unique_lock lock(reg.mu);
  for (;;) {
    auto it = reg.entries.find(key);
    // An entry from another pid was inherited across fork(): never reuse it.
    if (it == reg.entries.end() || it->second.pid != getpid()) break;
    if (auto live = it->second.store.lock()) return live;
    reg.closed.wait(lock);  // its last owner is still closing the environment
  }
  std::shared_ptr<Store> store(new Store(open_environment(canonical)));
  reg.entries[key] = {store, store.get(), getpid()};
  return store;
}

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Store::~Store() {
  const std::string key = impl_->dir.string();
  impl_.reset();  // closes the environment
  Registry& reg = registry();
  {
    std::lock_guard lock(reg.mu);
    auto it = reg.entries.find(key);
    if (it != reg.entries.end() && it->second.owner == this) reg.entries.erase(it);
  }
  reg.closed.notify_all();
}

const fs::path& Store::dir() const { return impl_->dir; }

std::optional<std::string> Store::get(std::string_view db, std::string_view key) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("reading from", db, [&](MDB_txn* txn) -> std::optional<std::string> {
    MDB_val k = as_val(key), v{};
    const int rc = mdb_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return std::nullopt;
    lmdb_check(rc, impl_->where("reading from", db));
    return std::string(as_view(v));  // the map may move once the transaction ends
  });
}

bool Store::visit(std::string_view db, std::string_view key, const std::function<void(std::string_view)>& fn) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("reading from", db, [&](MDB_txn* txn) -> bool {
    MDB_val k = as_val(key), v{};
    const int rc = mdb_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return false;
    lmdb_check(rc, impl_->where("reading from", db));
    fn(as_view(v));
    return true;
  });
}

bool Store::put_if_absent(std::string_view db, std::string_view key, std::string_view value) {
  const MDB_dbi dbi = impl_->dbi(db);
  const int rc = impl_->write("writing to", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key), v = as_val(value);
    return mdb_put(txn, dbi, &k, &v, MDB_NOOVERWRITE);
  });
  return rc != MDB_KEYEXIST;
}

void Store::put(std::string_view db, std::string_view key, std::string_view value) {
  const MDB_dbi dbi = impl_->dbi(db);
  impl_->write("writing to", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key), v = as_val(value);
    return mdb_put(txn, dbi, &k, &v, 0);
  });
}

bool Store::erase(std::string_view db, std::string_view key) {
  const MDB_dbi dbi = impl_->dbi(db);
  const int rc = impl_->write("erasing from", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key);
    return mdb_del(txn, dbi, &k, nullptr);
  });
  return rc != MDB_NOTFOUND;
}

// `fn` runs inside the read transaction: it must not write to this Store (a writer that
// needs to grow the map would wait for this transaction to end).
void Store::for_each(std::string_view db,
                     const std::function<void(std::string_view key, std::string_view value)>& fn) {
  const MDB_dbi dbi = impl_->dbi(db);
  impl_->read("listing", db, [&](MDB_txn* txn) {
    MDB_cursor* cursor = nullptr;
    lmdb_check(mdb_cursor_open(txn, dbi, &cursor), impl_->where("listing", db));
    CursorClose guard{cursor};
    MDB_val k{}, v{};
    int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);
    for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) fn(as_view(k), as_view(v));
    if (rc != MDB_NOTFOUND) lmdb_fail(rc, impl_->where("listing", db));
  });
}

uint64_t Store::count(std::string_view db) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("counting", db, [&](MDB_txn* txn) -> uint64_t {
    MDB_stat st;
    lmdb_check(mdb_stat(txn, dbi, &st), impl_->where("counting", db));
    return st.ms_entries;
  });
}

uint64_t Store::map_size() const {
  std::shared_lock lock(impl_->map_mu);
  return impl_->current_map_size();
}

void Store::update(const std::function<void(Txn&)>& fn) {
  Impl& im = *impl_;
  im.check_process();
  std::lock_guard writer(im.write_mu);
  for (int attempt = 0;; ++attempt) {
    int rc;
    {
      std::shared_lock lock(im.map_mu);
      MDB_txn* txn = nullptr;
      rc = mdb_txn_begin(im.env, nullptr, 0, &txn);
      if (rc == MDB_SUCCESS) {
        bool full = false;
        try {
          Txn t(txn, this, true);
          fn(t);
        } catch (const MapFull&) {
          full = true;
        } catch (...) {
          mdb_txn_abort(txn);
          throw;
        }
        if (full) {
          mdb_txn_abort(txn);
          rc = MDB_MAP_FULL;
        } else {
          rc = mdb_txn_commit(txn);  // frees the transaction whatever it returns
          if (rc == MDB_SUCCESS) return;
        }
      }
    }
    if (rc == MDB_MAP_FULL && attempt < kMaxRetries) {
      im.grow_map("updating", "");
    } else if (rc == MDB_MAP_RESIZED && attempt < kMaxRetries) {
      im.on_map_resized();
    } else {
      lmdb_fail(rc, im.where("updating", ""));
    }
  }
}

void Store::view(const std::function<void(Txn&)>& fn) {
  impl_->read("reading", "", [&](MDB_txn* txn) {
    Txn t(txn, this, false);
    fn(t);
  });
}

Store::Usage Store::usage() {
  Usage u;
  impl_->read("measuring", "", [&](MDB_txn*) {
    MDB_envinfo info;
    MDB_stat st;
    lmdb_check(mdb_env_info(impl_->env, &info), impl_->where("measuring", ""));
    lmdb_check(mdb_env_stat(impl_->env, &st), impl_->where("measuring", ""));
    u.map_bytes = info.me_mapsize;
    u.page_bytes = st.ms_psize;
    u.used_bytes = (uint64_t(info.me_last_pgno) + 1) * st.ms_psize;
    return 0;
  });
  std::error_code ec;
  const auto size = fs::file_size(impl_->dir / "data.mdb", ec);
  u.file_bytes = ec ? 0 : size;
  return u;
}

// ---------------------------------------------------------------------------------------
// Txn

namespace {
int txn_op_check(int rc, Store::Impl& im, std::string_view op, std::string_view db) {
  if (rc == MDB_MAP_FULL) throw MapFull{};
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND && rc != MDB_KEYEXIST) lmdb_fail(rc, im.where(op, db));
  return rc;
}
}  // namespace

std::optional<std::string_view> Txn::get(std::string_view db, std::string_view key) {
  Store::Impl& im = *store_->impl_;
  MDB_val k = as_val(key), v{};
  const int rc = txn_op_check(mdb_get(static_cast<MDB_txn*>(txn_), im.dbi(db), &k, &v), im, "reading from", db);
  if (rc == MDB_NOTFOUND) return std::nullopt;
  return as_view(v);
}

bool Txn::put(std::string_view db, std::string_view key, std::string_view value, bool overwrite) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "put in a read-only transaction");
  MDB_val k = as_val(key), v = as_val(value);
  const int rc = txn_op_check(mdb_put(static_cast<MDB_txn*>(txn_), im.dbi(db), &k, &v, overwrite ? 0 : MDB_NOOVERWRITE),
                              im, "writing to", db);
  return rc != MDB_KEYEXIST;
}

bool Txn::erase(std::string_view db, std::string_view key) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "erase in a read-only transaction");
  MDB_val k = as_val(key);
  const int rc = txn_op_check(mdb_del(static_cast<MDB_txn*>(txn_), im.dbi(db), &k, nullptr), im, "erasing from", db);
  return rc != MDB_NOTFOUND;
}

void Txn::clear(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "clear in a read-only transaction");
  txn_op_check(mdb_drop(static_cast<MDB_txn*>(txn_), im.dbi(db), 0), im, "clearing", db);
}

void Txn::for_each(std::string_view db, const std::function<void(std::string_view, std::string_view)>& fn) {
  Store::Impl& im = *store_->impl_;
  MDB_cursor* cursor = nullptr;
  lmdb_check(mdb_cursor_open(static_cast<MDB_txn*>(txn_), im.dbi(db), &cursor), im.where("listing", db));
  CursorClose guard{cursor};
  MDB_val k{}, v{};
  int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);
  for (; rc == MDB_SUCCESS; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) fn(as_view(k), as_view(v));
  if (rc != MDB_NOTFOUND) lmdb_fail(rc, im.where("listing", db));
}

uint64_t Txn::count(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  MDB_stat st;
  lmdb_check(mdb_stat(static_cast<MDB_txn*>(txn_), im.dbi(db), &st), im.where("counting", db));
  return st.ms_entries;
}

uint64_t Txn::bytes(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  MDB_stat st;
  lmdb_check(mdb_stat(static_cast<MDB_txn*>(txn_), im.dbi(db), &st), im.where("measuring", db));
  return (uint64_t(st.ms_branch_pages) + st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize;
}

}  // namespace kaio::cache
