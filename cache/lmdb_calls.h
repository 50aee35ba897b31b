// Internal to cache/: LMDB calls under the fault guard, error codes, fault injection and
// moving a damaged file aside. Shared by the store and the repair code.
#pragma once

#include <lmdb.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace kaio::cache::detail {

// Not an LMDB or errno code: a SIGBUS/SIGSEGV caught while reading the map.
inline constexpr int kFault = -30500;

std::string lmdb_code_name(int rc);
std::string lmdb_message(int rc);
// LMDB codes that mean the file itself is wrong (not the disk, permissions or memory).
bool is_damage(int rc);
[[noreturn]] void lmdb_fail(int rc, const std::string& what);

// LMDB calls that read the map, under the fault guard (see cache/fault_guard.h). Each
// returns kFault when reading the file faulted; values are touched before they return.
int g_txn_begin(MDB_env* env, unsigned flags, MDB_txn** txn);
void g_txn_abort(MDB_txn* txn);
int g_get(MDB_txn* txn, MDB_dbi dbi, MDB_val* k, MDB_val* v);
int g_put(MDB_txn* txn, MDB_dbi dbi, MDB_val* k, MDB_val* v, unsigned flags);
int g_del(MDB_txn* txn, MDB_dbi dbi, MDB_val* k);
int g_drop(MDB_txn* txn, MDB_dbi dbi);
int g_cursor_get(MDB_cursor* c, MDB_val* k, MDB_val* v, MDB_cursor_op op);
int g_stat(MDB_txn* txn, MDB_dbi dbi, MDB_stat* st);
int g_env_info(MDB_env* env, MDB_envinfo* info);
int g_env_stat(MDB_env* env, MDB_stat* st);
// With a map, setting its size reads the meta page (size 0: take the file's).
int g_env_set_mapsize(MDB_env* env, size_t size);
// Opening a cursor reads the tree's root page when the transaction has not yet.
int g_cursor_open(MDB_txn* txn, MDB_dbi dbi, MDB_cursor** c);

// Commits, unless a failure is injected (see inject_write_failures in store.h): then the
// transaction is aborted and the injected code returned, exactly as a failed commit
// leaves things (nothing written). Opening a cache commits with `injectable` false, so
// that injected failures hit the writes a test is about.
int commit(MDB_txn* txn, bool injectable = true);
// Reads KAIO_CACHE_FAIL_WRITES once per process (Store::open calls it); UsageError when
// the value is malformed.
void read_injection_env();

// Moves aside <dir>/data.mdb if it is still the file (dev, ino) found damaged, removes
// lock.mdb, and keeps only the newest few damaged files. Returns the new path, or empty
// when another process had already replaced the file; throws ToolError when it cannot.
std::filesystem::path move_aside(const std::filesystem::path& dir, dev_t dev, ino_t ino);
// Whether another process is setting up the environment in <dir>: LMDB holds a write lock
// on byte 0 of lock.mdb from the start of mdb_env_open until it has written (or read) the
// meta pages, and a file seen in that window may be short or half written. If so, waits
// (polling, at most `limit`) until the lock is released and returns true. Only queries the
// lock (F_GETLK), so that no POSIX lock of this process's own environments is disturbed.
bool wait_for_setup_by_another(const std::filesystem::path& dir, std::chrono::milliseconds limit);
// "the kernel cache file A is damaged (why); moved it to B and started a fresh cache"
std::string moved_sentence(const std::filesystem::path& data, const std::string& why, const std::filesystem::path& aside);

}  // namespace kaio::cache::detail
