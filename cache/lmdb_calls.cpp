#include "kaio/cache/lmdb_calls.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <vector>

#include "kaio/cache/fault_guard.h"
#include "kaio/cache/store.h"

namespace kaio::cache {

namespace fs = std::filesystem;

namespace {

// Damaged files kept beside the cache (the newest ones; older ones are deleted).
constexpr int kKeepDamaged = 2;

// Fault injection (see store.h).

struct Injection {
  std::mutex m;
  bool env_read = false;
  int remaining = 0;
  int code = 0;
};
Injection& injection() {
  static Injection* i = new Injection;  // never destroyed: writers may run during exit
  return *i;
}

int injected_code(const std::string& name) {
  if (name == "ENOSPC") return ENOSPC;
  if (name == "EDQUOT") return EDQUOT;
  if (name == "EIO") return EIO;
  if (name == "MAP_FULL") return MDB_MAP_FULL;
  if (name == "HANG") return kInjectHang;
  return 0;
}

// The code the next commit must fail with, or 0. Never throws: it runs inside a write
// transaction (the environment variable was read by Store::open, see read_injection_env).
int take_injected_failure() {
  Injection& in = injection();
  std::lock_guard<std::mutex> g(in.m);
  if (in.remaining <= 0) return 0;
  if (in.remaining != INT_MAX) --in.remaining;
  return in.code;
}

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

namespace detail {

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
    case kFault: return "SIGBUS";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EIO: return "EIO";
    case EACCES: return "EACCES";
    case EROFS: return "EROFS";
    case ENOMEM: return "ENOMEM";
    default: return rc < 0 ? "LMDB error " + std::to_string(rc) : "errno " + std::to_string(rc);
  }
}

std::string lmdb_message(int rc) {
  if (rc == kFault) return "memory fault reading the mapped file (damaged or truncated)";
  return mdb_strerror(rc);
}

// LMDB codes that mean the file itself is wrong (not the disk, permissions or memory).
bool is_damage(int rc) {
  return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND || rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ||
         rc == MDB_INCOMPATIBLE || rc == kFault;
}

[[noreturn]] void lmdb_fail(int rc, const std::string& what) {
  throw ToolError("LMDB", lmdb_code_name(rc), what + ": " + lmdb_message(rc));
}

int g_txn_begin(MDB_env* env, unsigned flags, MDB_txn** txn) {
  return detail::guarded([&] { return mdb_txn_begin(env, nullptr, flags, txn); }, kFault);
}
void g_txn_abort(MDB_txn* txn) {
  detail::guarded([&] { mdb_txn_abort(txn); return 0; }, kFault);
}
int g_get(MDB_txn* txn, MDB_dbi dbi, MDB_val* k, MDB_val* v) {
  return detail::guarded([&] {
    const int rc = mdb_get(txn, dbi, k, v);
    if (rc == MDB_SUCCESS) detail::touch(v->mv_data, v->mv_size);
    return rc;
  }, kFault);
}
int g_put(MDB_txn* txn, MDB_dbi dbi, MDB_val* k, MDB_val* v, unsigned flags) {
  return detail::guarded([&] { return mdb_put(txn, dbi, k, v, flags); }, kFault);
}
int g_del(MDB_txn* txn, MDB_dbi dbi, MDB_val* k) {
  return detail::guarded([&] { return mdb_del(txn, dbi, k, nullptr); }, kFault);
}
int g_drop(MDB_txn* txn, MDB_dbi dbi) {
  return detail::guarded([&] { return mdb_drop(txn, dbi, 0); }, kFault);
}
int g_cursor_get(MDB_cursor* c, MDB_val* k, MDB_val* v, MDB_cursor_op op) {
  return detail::guarded([&] {
    const int rc = mdb_cursor_get(c, k, v, op);
    if (rc == MDB_SUCCESS) {
      detail::touch(k->mv_data, k->mv_size);
      detail::touch(v->mv_data, v->mv_size);
    }
    return rc;
  }, kFault);
}
int g_stat(MDB_txn* txn, MDB_dbi dbi, MDB_stat* st) {
  return detail::guarded([&] { return mdb_stat(txn, dbi, st); }, kFault);
}
int g_env_set_mapsize(MDB_env* env, size_t size) {
  return detail::guarded([&] { return mdb_env_set_mapsize(env, size); }, kFault);
}
int g_env_stat(MDB_env* env, MDB_stat* st) {
  return detail::guarded([&] { return mdb_env_stat(env, st); }, kFault);
}
int g_cursor_open(MDB_txn* txn, MDB_dbi dbi, MDB_cursor** c) {
  return detail::guarded([&] { return mdb_cursor_open(txn, dbi, c); }, kFault);
}
int g_env_info(MDB_env* env, MDB_envinfo* info) {
  return detail::guarded([&] { return mdb_env_info(env, info); }, kFault);
}

int commit(MDB_txn* txn, bool injectable) {
  if (const int injected = injectable ? take_injected_failure() : 0) {
    g_txn_abort(txn);
    if (injected == kInjectHang)
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    return injected;
  }
  // Frees the transaction whatever it returns; after a fault it has not, so abort it.
  const int rc = detail::guarded([&] { return mdb_txn_commit(txn); }, kFault);
  if (rc == kFault) g_txn_abort(txn);
  return rc;
}


// Under an exclusive flock on `.kaio-repair.lock`, so that two processes finding the same
// damage move it once and never move the fresh file the other one started.
fs::path move_aside(const fs::path& dir, dev_t dev, ino_t ino) {
  const fs::path data = dir / "data.mdb";
  const int lock = ::open((dir / ".kaio-repair.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (lock < 0)
    throw ToolError("filesystem", std::strerror(errno), "cannot move the damaged " + data.string() + " aside");
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the flock
  } unlock{lock};
  struct stat st;
  if (::stat(data.c_str(), &st) != 0 || st.st_dev != dev || st.st_ino != ino) return {};
  fs::path aside = dir / ("data.mdb.damaged-" + utc_stamp());
  for (int n = 1; fs::exists(aside); ++n) aside = dir / ("data.mdb.damaged-" + utc_stamp() + "-" + std::to_string(n));
  if (::rename(data.c_str(), aside.c_str()) != 0)
    throw ToolError("filesystem", std::strerror(errno),
                    "cannot move the damaged " + data.string() + " aside: " + std::strerror(errno));
  ::unlink((dir / "lock.mdb").c_str());
  std::vector<fs::path> old;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("data.mdb.damaged-", 0) == 0) old.push_back(e.path());
  std::sort(old.begin(), old.end());  // the stamps sort by time
  for (size_t i = 0; i + kKeepDamaged < old.size(); ++i) fs::remove(old[i], ec);
  return aside;
}

bool wait_for_setup_by_another(const fs::path& dir, std::chrono::milliseconds limit) {
  const int fd = ::open((dir / "lock.mdb").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no lock file: nobody has begun to open the environment
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_it{fd};
  const auto until = std::chrono::steady_clock::now() + limit;
  bool waited = false;
  for (;;) {
    struct flock q {};
    q.l_type = F_WRLCK;  // would a write lock on byte 0 conflict with another process's?
    q.l_whence = SEEK_SET;
    q.l_start = 0;
    q.l_len = 1;
    // F_GETLK reports the first lock of another process that would conflict: a read lock
    // is an open environment, a write lock one being set up.
    if (::fcntl(fd, F_GETLK, &q) != 0 || q.l_type != F_WRLCK) return waited;
    if (std::chrono::steady_clock::now() >= until) return waited;
    waited = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string moved_sentence(const fs::path& data, const std::string& why, const fs::path& aside) {
  return "the kernel cache file " + data.string() + " is damaged (" + why + "); moved it to " + aside.string() +
         " and started a fresh cache";
}

void read_injection_env() {
  Injection& in = injection();
  std::lock_guard<std::mutex> g(in.m);
  if (in.env_read) return;
  const char* s = std::getenv("KAIO_CACHE_FAIL_WRITES");
  if (!s || !*s) {
    in.env_read = true;
    return;
  }
  const std::string v(s);
  const size_t colon = v.find(':');
  const std::string count = v.substr(0, colon);
  const int code = colon == std::string::npos ? 0 : injected_code(v.substr(colon + 1));
  const bool number = !count.empty() && count.find_first_not_of("0123456789") == std::string::npos;
  if (code == 0 || !(number || count == "all"))
    throw UsageError("", "cache", "KAIO_CACHE_FAIL_WRITES='" + v +
                                      "' is not COUNT:CODE (COUNT a number or all; CODE ENOSPC, EDQUOT, EIO, "
                                      "MAP_FULL or HANG)");
  in.remaining = count == "all" ? INT_MAX : std::atoi(count.c_str());
  in.code = code;
  in.env_read = true;  // only a valid value: a malformed one disables every open
}

}  // namespace detail

void inject_write_failures(int count, int code) {
  Injection& in = injection();
  std::lock_guard<std::mutex> g(in.m);
  in.env_read = true;  // an explicit call replaces the environment's setting
  in.remaining = count;
  in.code = code;
}

}  // namespace kaio::cache
