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
// retries, at most kMaxGrowths times per write and never past kMaxMapBytes: past that,
// MDB_MAP_FULL is a failed write like a full disk. When another process has grown the map
// past our mapping, LMDB answers MDB_MAP_RESIZED and we adopt the size it recorded.
//
// Damage. Before LMDB maps data.mdb, its meta pages are checked against the file
// (cache/lmdb_file.h): LMDB trusts them, and a file cut short would otherwise raise
// SIGBUS at the first read. Every LMDB call that reads the map runs under the fault guard
// (cache/fault_guard.h), and every value is touched before it is handed out, so damage
// inside pages is an error code too. A damaged file (a failed check, a corruption code
// from LMDB at open or read, a caught fault) marks the Store damaged; with
// OpenOptions::move_aside_damaged it is renamed to data.mdb.damaged-<time> under an
// exclusive lock (only the very file found damaged: its inode is compared), lock.mdb is
// removed, and the next Store::open starts a fresh cache. Processes that still have the
// old files open keep using them (an LMDB environment holds its descriptors), and closing
// them releases locks on the old inodes only. A file that fails the check while another
// process is inside mdb_env_open (it holds LMDB's setup lock) is checked again once that
// process is done: a new file's two meta pages land a page at a time, and moving a file
// aside in that window would leave its creator, and everyone who opened it, writing
// records into the moved file.
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
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "kaio/cache/fault_guard.h"
#include "kaio/cache/lmdb_calls.h"
#include "kaio/cache/lmdb_file.h"

namespace kaio::cache {

namespace fs = std::filesystem;
using namespace detail;

namespace {

constexpr size_t kDefaultInitialMapBytes = size_t(1) << 30;
constexpr unsigned kMaxDbs = 8;
constexpr unsigned kMaxReaders = 254;
// Bounds the adopt-and-retry loop on MDB_MAP_RESIZED (another process keeps growing it).
constexpr int kMaxRetries = 16;
// Map growth per write, and in all: 4 doublings of the 1 GiB default reach 16 GiB; a
// write that still does not fit fails (as a full disk does) instead of reserving the
// whole address space.
constexpr int kMaxGrowths = 4;
constexpr uint64_t kMaxMapBytes = uint64_t(1) << 40;
constexpr std::array<const char*, 3> kDbNames = {"kernels", "meta", "tuning"};

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
  ~TxnAbort() { g_txn_abort(txn); }
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
  bool move_aside_damaged = true;
  std::array<MDB_dbi, kDbNames.size()> dbis{};
  mutable std::shared_mutex map_mu;  // shared: any transaction; exclusive: remapping
  std::mutex write_mu;               // one write transaction at a time in this process
  std::atomic<bool> damaged{false};
  std::mutex damage_mu;
  std::string damage_message;  // what every operation throws once damaged
  std::string damage_code;
  fs::path moved_to;
  std::string open_notice;
  dev_t file_dev = 0;  // the data.mdb this environment opened
  ino_t file_ino = 0;

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

  [[noreturn]] void throw_damaged() {
    std::lock_guard<std::mutex> g(damage_mu);
    throw DamagedCache(damage_code, damage_message, dir / "data.mdb", moved_to);
  }

  // Marks the store damaged (the first report wins), moves the file aside when asked to,
  // and throws DamagedCache.
  [[noreturn]] void fail_damaged(int rc, const std::string& what) {
    {
      std::lock_guard<std::mutex> g(damage_mu);
      if (!damaged) {
        const std::string why = what + ": " + lmdb_code_name(rc) + ", " + lmdb_message(rc);
        damage_code = lmdb_code_name(rc);
        damage_message = "the kernel cache file " + (dir / "data.mdb").string() + " is damaged (" + why + ")";
        if (move_aside_damaged) {
          try {
            moved_to = move_aside(dir, file_dev, file_ino);
            if (!moved_to.empty()) damage_message = moved_sentence(dir / "data.mdb", why, moved_to);
          } catch (const std::exception& e) {
            damage_message += "; " + std::string(e.what());
          }
        }
        damaged = true;
      }
    }
    throw_damaged();
  }

  // Throws for a failed LMDB call: DamagedCache for damage, ToolError otherwise.
  [[noreturn]] void fail(int rc, const std::string& what) {
    if (is_damage(rc)) fail_damaged(rc, what);
    lmdb_fail(rc, what);
  }
  void check(int rc, const std::string& what) {
    if (rc != MDB_SUCCESS) fail(rc, what);
  }

  MDB_dbi dbi(std::string_view db) const {
    for (size_t i = 0; i < kDbNames.size(); ++i)
      if (db == kDbNames[i]) return dbis[i];
    throw UsageError("", "cache", "unknown cache database '" + std::string(db) +
                                      "' (expected kernels, meta or tuning)");
  }

  void check_usable() {
    if (pid != getpid())
      throw UsageError("", "cache", "the cache at " + dir.string() + " was opened by process " +
                                        std::to_string(pid) + "; a forked process (" +
                                        std::to_string(getpid()) +
                                        ") must call Store::open itself");
    if (damaged) throw_damaged();
  }

  uint64_t current_map_size() {
    MDB_envinfo info;
    check(g_env_info(env, &info), where("reading the map size of", ""));
    return info.me_mapsize;
  }

  // Caller holds map_mu exclusive. Size 0 makes LMDB take the size recorded in the file,
  // which another process may have grown; ours is restored if it was larger.
  void adopt_recorded_map_size() {
    const uint64_t ours = current_map_size();
    check(g_env_set_mapsize(env, 0), where("adopting the map size of", ""));
    if (current_map_size() < ours) check(g_env_set_mapsize(env, ours), where("restoring the map size of", ""));
  }

  void on_map_resized() {
    std::unique_lock lock(map_mu);
    adopt_recorded_map_size();
  }

  // False when the map may not grow any further (the write then fails with MDB_MAP_FULL).
  bool grow_map(std::string_view op, std::string_view db) {
    std::unique_lock lock(map_mu);
    const uint64_t next = current_map_size() * 2;
    if (next > kMaxMapBytes) return false;
    check(g_env_set_mapsize(env, next),
          where("growing the map to " + std::to_string(next) + " bytes for " + std::string(op), db));
    return true;
  }

  // Runs fn(txn) in a read transaction and returns its result.
  template <class Fn>
  auto read(std::string_view op, std::string_view db, Fn&& fn) {
    check_usable();
    bool readers_checked = false;
    for (int attempt = 0;; ++attempt) {
      int rc;
      {
        std::shared_lock lock(map_mu);
        MDB_txn* txn = nullptr;
        rc = g_txn_begin(env, MDB_RDONLY, &txn);
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
        fail(rc, where(op, db));
      }
    }
  }

  // Runs apply(txn) in a write transaction and commits. apply returns an LMDB code:
  // MDB_KEYEXIST and MDB_NOTFOUND are outcomes, returned to the caller after an abort;
  // MDB_MAP_FULL (from apply or commit) grows the map and runs apply again.
  template <class Fn>
  int write(std::string_view op, std::string_view db, Fn&& apply) {
    check_usable();
    std::lock_guard writer(write_mu);
    int growths = 0;
    for (int attempt = 0;; ++attempt) {
      int rc;
      {
        std::shared_lock lock(map_mu);
        MDB_txn* txn = nullptr;
        rc = g_txn_begin(env, 0, &txn);
        if (rc == MDB_SUCCESS) {
          rc = apply(txn);
          if (rc == MDB_SUCCESS) {
            rc = commit(txn);
            if (rc == MDB_SUCCESS) return rc;
          } else {
            g_txn_abort(txn);
            if (rc == MDB_KEYEXIST || rc == MDB_NOTFOUND) return rc;
          }
        }
      }
      if (rc == MDB_MAP_FULL && growths < kMaxGrowths && grow_map(op, db)) {
        ++growths;
      } else if (rc == MDB_MAP_RESIZED && attempt < kMaxRetries) {
        on_map_resized();
      } else {
        fail(rc, where(op, db));
      }
    }
  }
};

namespace {

// Opens the environment; an LMDB code that says the file is wrong is returned in
// `damage_rc` (0 otherwise) instead of thrown, so that the caller can move it aside.
std::unique_ptr<Store::Impl> open_environment(const fs::path& dir, bool move_aside_damaged, const DataFileCheck& chk,
                                              int& damage_rc, std::string& damage_what) {
  auto impl = std::make_unique<Store::Impl>();
  impl->dir = dir;
  impl->move_aside_damaged = move_aside_damaged;
  impl->file_dev = chk.dev;
  impl->file_ino = chk.ino;
  damage_rc = 0;
  const std::string where = "opening the cache at " + dir.string();
  auto step = [&](int rc, const std::string& what) {
    if (rc == MDB_SUCCESS) return true;
    if (!is_damage(rc)) lmdb_fail(rc, what);
    damage_rc = rc;
    damage_what = what;
    return false;
  };
  if (!step(mdb_env_create(&impl->env), where)) return nullptr;
  // From here on ~Impl closes the environment, as LMDB requires after a failed open.
  const size_t initial = initial_map_bytes();
  if (!step(mdb_env_set_maxdbs(impl->env, kMaxDbs), where)) return nullptr;
  if (!step(mdb_env_set_maxreaders(impl->env, kMaxReaders), where)) return nullptr;
  if (!step(mdb_env_set_mapsize(impl->env, initial), where)) return nullptr;
  const int open_rc = detail::guarded(
      [&] { return mdb_env_open(impl->env, dir.c_str(), MDB_NOTLS | MDB_NOMETASYNC, 0664); }, kFault);
  if (!step(open_rc, where)) return nullptr;
  // The file LMDB opened (it may have created it): the one to move aside if damaged.
  int fd = -1;
  struct stat st;
  if (mdb_env_get_fd(impl->env, &fd) == MDB_SUCCESS && ::fstat(fd, &st) == 0) {
    impl->file_dev = st.st_dev;
    impl->file_ino = st.st_ino;
  }
  // Free the reader slots of processes that died inside a read transaction.
  int dead = 0;
  if (!step(mdb_reader_check(impl->env, &dead), where)) return nullptr;
  // A configured size replaces the one recorded in the file; keep the larger of the two
  // so that a cache grown earlier does not start by hitting MDB_MAP_FULL.
  try {
    impl->adopt_recorded_map_size();
  } catch (const DamagedCache&) {
    step(MDB_CORRUPTED, where + " (map size)");
    return nullptr;
  }

  MDB_txn* txn = nullptr;
  if (!step(g_txn_begin(impl->env, 0, &txn), where)) return nullptr;
  for (size_t i = 0; i < kDbNames.size(); ++i) {
    MDB_dbi* out = &impl->dbis[i];
    const char* name = kDbNames[i];
    const int rc = detail::guarded([&] { return mdb_dbi_open(txn, name, MDB_CREATE, out); }, kFault);
    if (rc != MDB_SUCCESS) {
      g_txn_abort(txn);
      if (!step(rc, where + " (database '" + kDbNames[i] + "')")) return nullptr;
    }
  }
  if (!step(commit(txn, false), where)) return nullptr;
  return impl;
}

// Checks data.mdb, opens the environment, and handles a damaged file: moved aside and
// opened afresh (once), or DamagedCache.
std::unique_ptr<Store::Impl> open_checked(const fs::path& dir, const OpenOptions& o) {
  const fs::path data = dir / "data.mdb";
  std::string notice;
  for (int attempt = 0;; ++attempt) {
    DataFileCheck chk = check_data_file(data);
    // A file that fails the check may be one another process's mdb_env_open is writing
    // right now (a new file's meta pages appear a page at a time): wait until it is done
    // and look again, so that a fresh cache is never taken for a damaged one.
    if (!chk.ok && wait_for_setup_by_another(dir, std::chrono::seconds(10))) chk = check_data_file(data);
    std::string why;
    int rc = MDB_CORRUPTED;
    std::unique_ptr<Store::Impl> impl;
    if (!chk.ok) {
      why = chk.problem;
    } else {
      std::string what;
      impl = open_environment(dir, o.move_aside_damaged, chk, rc, what);
      if (impl) {
        impl->open_notice = notice;
        return impl;
      }
      why = what + ": " + lmdb_code_name(rc) + ", " + lmdb_message(rc);
    }
    const std::string damaged = "the kernel cache file " + data.string() + " is damaged (" + why + ")";
    if (!o.move_aside_damaged || attempt > 0) throw DamagedCache(lmdb_code_name(rc), damaged, data, {});
    impl.reset();  // closes the failed environment before its files move
    fs::path aside;
    try {
      aside = move_aside(dir, chk.dev, chk.ino);
    } catch (const std::exception& e) {
      throw DamagedCache(lmdb_code_name(rc), damaged + "; " + e.what(), data, {});
    }
    if (!aside.empty()) notice = moved_sentence(data, why, aside);
  }
}

// One environment per canonical path per process. LMDB forbids opening the same
// environment twice in a process: closing either would release the POSIX locks of both.
// So a new environment is opened only after the previous one for that path has closed,
// or when the previous one's files were moved aside (its locks are on other inodes).
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

std::shared_ptr<Store> Store::open(const fs::path& dir, OpenOptions options) {
  detail::install_fault_handler();
  read_injection_env();
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
    if (auto live = it->second.store.lock()) {
      if (!live->damaged()) return live;
      // Its files were moved aside: a fresh environment may open beside it. If they
      // could not be moved, opening the same files twice is not allowed: report it.
      if (live->impl_->moved_to.empty()) live->impl_->throw_damaged();
      break;
    }
    reg.closed.wait(lock);  // its last owner is still closing the environment
  }
  std::shared_ptr<Store> store(new Store(open_checked(canonical, options)));
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
bool Store::damaged() const { return impl_->damaged; }
const std::string& Store::open_notice() const { return impl_->open_notice; }

std::optional<std::string> Store::get(std::string_view db, std::string_view key) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("reading from", db, [&](MDB_txn* txn) -> std::optional<std::string> {
    MDB_val k = as_val(key), v{};
    const int rc = g_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return std::nullopt;
    impl_->check(rc, impl_->where("reading from", db));
    return std::string(as_view(v));  // the map may move once the transaction ends
  });
}

bool Store::visit(std::string_view db, std::string_view key, const std::function<void(std::string_view)>& fn) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("reading from", db, [&](MDB_txn* txn) -> bool {
    MDB_val k = as_val(key), v{};
    const int rc = g_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) return false;
    impl_->check(rc, impl_->where("reading from", db));
    fn(as_view(v));
    return true;
  });
}

bool Store::put_if_absent(std::string_view db, std::string_view key, std::string_view value) {
  const MDB_dbi dbi = impl_->dbi(db);
  const int rc = impl_->write("writing to", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key), v = as_val(value);
    return g_put(txn, dbi, &k, &v, MDB_NOOVERWRITE);
  });
  return rc != MDB_KEYEXIST;
}

void Store::put(std::string_view db, std::string_view key, std::string_view value) {
  const MDB_dbi dbi = impl_->dbi(db);
  impl_->write("writing to", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key), v = as_val(value);
    return g_put(txn, dbi, &k, &v, 0);
  });
}

bool Store::erase(std::string_view db, std::string_view key) {
  const MDB_dbi dbi = impl_->dbi(db);
  const int rc = impl_->write("erasing from", db, [&](MDB_txn* txn) {
    MDB_val k = as_val(key);
    return g_del(txn, dbi, &k);
  });
  return rc != MDB_NOTFOUND;
}

namespace {
// Walks a database with a cursor; each key and value is touched (readable) before fn.
void walk(Store::Impl& im, MDB_txn* txn, std::string_view db,
          const std::function<void(std::string_view, std::string_view)>& fn) {
  MDB_cursor* cursor = nullptr;
  im.check(g_cursor_open(txn, im.dbi(db), &cursor), im.where("listing", db));
  CursorClose guard{cursor};
  MDB_val k{}, v{};
  int rc = g_cursor_get(cursor, &k, &v, MDB_FIRST);
  for (; rc == MDB_SUCCESS; rc = g_cursor_get(cursor, &k, &v, MDB_NEXT)) fn(as_view(k), as_view(v));
  if (rc != MDB_NOTFOUND) im.fail(rc, im.where("listing", db));
}
}  // namespace

// `fn` runs inside the read transaction: it must not write to this Store (a writer that
// needs to grow the map would wait for this transaction to end).
void Store::for_each(std::string_view db,
                     const std::function<void(std::string_view key, std::string_view value)>& fn) {
  impl_->dbi(db);
  impl_->read("listing", db, [&](MDB_txn* txn) {
    walk(*impl_, txn, db, fn);
    return 0;
  });
}

uint64_t Store::count(std::string_view db) {
  const MDB_dbi dbi = impl_->dbi(db);
  return impl_->read("counting", db, [&](MDB_txn* txn) -> uint64_t {
    MDB_stat st;
    impl_->check(g_stat(txn, dbi, &st), impl_->where("counting", db));
    return st.ms_entries;
  });
}

uint64_t Store::map_size() const {
  std::shared_lock lock(impl_->map_mu);
  return impl_->current_map_size();
}

void Store::update(const std::function<void(Txn&)>& fn) {
  Impl& im = *impl_;
  im.check_usable();
  std::lock_guard writer(im.write_mu);
  int growths = 0;
  for (int attempt = 0;; ++attempt) {
    int rc;
    {
      std::shared_lock lock(im.map_mu);
      MDB_txn* txn = nullptr;
      rc = g_txn_begin(im.env, 0, &txn);
      if (rc == MDB_SUCCESS) {
        bool full = false;
        try {
          Txn t(txn, this, true);
          fn(t);
        } catch (const MapFull&) {
          full = true;
        } catch (...) {
          g_txn_abort(txn);
          throw;
        }
        if (full) {
          g_txn_abort(txn);
          rc = MDB_MAP_FULL;
        } else {
          rc = commit(txn);
          if (rc == MDB_SUCCESS) return;
        }
      }
    }
    if (rc == MDB_MAP_FULL && growths < kMaxGrowths && im.grow_map("updating", "")) {
      ++growths;
    } else if (rc == MDB_MAP_RESIZED && attempt < kMaxRetries) {
      im.on_map_resized();
    } else {
      im.fail(rc, im.where("updating", ""));
    }
  }
}

void Store::view(const std::function<void(Txn&)>& fn) {
  impl_->read("reading", "", [&](MDB_txn* txn) {
    Txn t(txn, this, false);
    fn(t);
    return 0;
  });
}

Store::Usage Store::usage() {
  Usage u;
  impl_->read("measuring", "", [&](MDB_txn*) {
    MDB_envinfo info;
    MDB_stat st;
    impl_->check(g_env_info(impl_->env, &info), impl_->where("measuring", ""));
    impl_->check(g_env_stat(impl_->env, &st), impl_->where("measuring", ""));
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
  if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND && rc != MDB_KEYEXIST) im.fail(rc, im.where(op, db));
  return rc;
}
}  // namespace

std::optional<std::string_view> Txn::get(std::string_view db, std::string_view key) {
  Store::Impl& im = *store_->impl_;
  MDB_val k = as_val(key), v{};
  const int rc = txn_op_check(g_get(static_cast<MDB_txn*>(txn_), im.dbi(db), &k, &v), im, "reading from", db);
  if (rc == MDB_NOTFOUND) return std::nullopt;
  return as_view(v);
}

bool Txn::put(std::string_view db, std::string_view key, std::string_view value, bool overwrite) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "put in a read-only transaction");
  MDB_val k = as_val(key), v = as_val(value);
  const int rc = txn_op_check(g_put(static_cast<MDB_txn*>(txn_), im.dbi(db), &k, &v, overwrite ? 0 : MDB_NOOVERWRITE),
                              im, "writing to", db);
  return rc != MDB_KEYEXIST;
}

bool Txn::erase(std::string_view db, std::string_view key) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "erase in a read-only transaction");
  MDB_val k = as_val(key);
  const int rc = txn_op_check(g_del(static_cast<MDB_txn*>(txn_), im.dbi(db), &k), im, "erasing from", db);
  return rc != MDB_NOTFOUND;
}

void Txn::clear(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  if (!writable_) throw UsageError("", "cache", "clear in a read-only transaction");
  txn_op_check(g_drop(static_cast<MDB_txn*>(txn_), im.dbi(db)), im, "clearing", db);
}

void Txn::for_each(std::string_view db, const std::function<void(std::string_view, std::string_view)>& fn) {
  walk(*store_->impl_, static_cast<MDB_txn*>(txn_), db, fn);
}

uint64_t Txn::count(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  MDB_stat st;
  im.check(g_stat(static_cast<MDB_txn*>(txn_), im.dbi(db), &st), im.where("counting", db));
  return st.ms_entries;
}

uint64_t Txn::bytes(std::string_view db) {
  Store::Impl& im = *store_->impl_;
  MDB_stat st;
  im.check(g_stat(static_cast<MDB_txn*>(txn_), im.dbi(db), &st), im.where("measuring", db));
  return (uint64_t(st.ms_branch_pages) + st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize;
}

}  // namespace kaio::cache
