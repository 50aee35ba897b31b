#include "kaio/cache/repair.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <string_view>

#include "kaio/cache/lmdb_file.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/ir/error.h"

namespace kaio::cache {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fs_fail(const std::string& what) {
  throw ToolError("filesystem", std::strerror(errno), what + ": " + std::strerror(errno));
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

SalvageResult salvage(const fs::path& dir) {
  const fs::path data = dir / "data.mdb";
  SalvageResult r;

  // Freed pages still hold older versions of some records: keep the newest per key.
  struct Found {
    std::string bytes;
    uint64_t created = 0;
  };
  std::map<std::string, Found> records;
  r.entries_seen = scan_leaf_entries(data, [&](std::string_view key, std::string_view value) {
    auto info = decode_record_info(value, true);
    if (!info || key.empty()) return;
    Found& f = records[std::string(key)];
    if (f.bytes.empty() || info->created_unix >= f.created) {
      f.bytes.assign(value);
      f.created = info->created_unix;
    }
  });

  // The fresh environment is built beside the damaged one, on the same file system, so
  // that it can be renamed into place.
  const fs::path work = dir / (".repair-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(work, ec);
  {
    auto fresh = Store::open(work);
    fresh->update([&](Txn& t) {
      r.salvaged = r.bytes = 0;
      for (const auto& [key, f] : records) {
        t.put("kernels", key, f.bytes);
        t.put("meta", meta_key(key), encode_usage({f.created * 1000000, 0}));
        ++r.salvaged;
        r.bytes += f.bytes.size();
      }
    });
  }  // closed: its files may move

  // Same lock as the applications' move-aside (cache/lmdb_calls.cpp): one repair at a time.
  const int lock = ::open((dir / ".kaio-repair.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (lock < 0) fs_fail("cannot lock " + dir.string());
  while (::flock(lock, LOCK_EX) != 0 && errno == EINTR) {
  }
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_lock{lock};
  fs::path aside = dir / ("data.mdb.damaged-" + utc_stamp());
  for (int n = 1; fs::exists(aside); ++n) aside = dir / ("data.mdb.damaged-" + utc_stamp() + "-" + std::to_string(n));
  // The damaged file keeps a second name, then the fresh one replaces it in one rename:
  // data.mdb is never missing.
  if (::link(data.c_str(), aside.c_str()) != 0) fs_fail("cannot keep the damaged " + data.string() + " as " + aside.string());
  if (::rename((work / "data.mdb").c_str(), data.c_str()) != 0) fs_fail("cannot move the repaired cache into " + dir.string());
  ::unlink((dir / "lock.mdb").c_str());
  fs::remove_all(work, ec);
  r.moved_to = aside;
  return r;
}

}  // namespace kaio::cache
