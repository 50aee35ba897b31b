#include "kaio/cache/lmdb_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "kaio/ir/error.h"

namespace kaio::cache {

namespace {

constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;
constexpr size_t kPageHeader = 16;
constexpr uint16_t kPageBranch = 0x01, kPageLeaf = 0x02, kPageOverflow = 0x04, kPageMeta = 0x08,
                   kPageLeaf2 = 0x20, kPageSub = 0x40;
constexpr uint16_t kNodeBigData = 0x01, kNodeSubData = 0x02, kNodeDupData = 0x04;
constexpr size_t kNodeHeader = 8;
constexpr uint64_t kInvalidPage = ~uint64_t(0);
// Beyond this no map can be made on a 64-bit host (47-bit user address space): a meta
// page asking for more is damaged, not ambitious.
constexpr uint64_t kMaxMapBytes = uint64_t(1) << 46;

// Offsets inside MDB_meta (which starts after the page header).
constexpr size_t kMetaMagic = 0, kMetaVersion = 4, kMetaAddress = 8, kMetaMapSize = 16, kMetaDbs = 24,
                 kDbBytes = 48, kMetaLastPage = kMetaDbs + 2 * kDbBytes, kMetaTxnid = kMetaLastPage + 8,
                 kMetaBytes = kMetaTxnid + 8;
// Offsets inside MDB_db.
constexpr size_t kDbPad = 0, kDbDepth = 6, kDbRoot = 40;

uint64_t le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at off; false on a short read or an error.
bool read_at(int fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return true;
}

struct Meta {
  uint16_t page_flags = 0;
  uint32_t magic = 0, version = 0, psize = 0;
  uint64_t address = 0, mapsize = 0, last_pg = 0, txnid = 0;
  uint64_t root[2] = {0, 0};
  uint16_t depth[2] = {0, 0};
};

Meta parse_meta(const unsigned char* page) {
  Meta m;
  m.page_flags = static_cast<uint16_t>(le(page + 10, 2));
  const unsigned char* p = page + kPageHeader;
  m.magic = static_cast<uint32_t>(le(p + kMetaMagic, 4));
  m.version = static_cast<uint32_t>(le(p + kMetaVersion, 4));
  m.address = le(p + kMetaAddress, 8);
  m.mapsize = le(p + kMetaMapSize, 8);
  m.psize = static_cast<uint32_t>(le(p + kMetaDbs + kDbPad, 4));
  for (int i = 0; i < 2; ++i) {
    m.depth[i] = static_cast<uint16_t>(le(p + kMetaDbs + i * kDbBytes + kDbDepth, 2));
    m.root[i] = le(p + kMetaDbs + i * kDbBytes + kDbRoot, 8);
  }
  m.last_pg = le(p + kMetaLastPage, 8);
  m.txnid = le(p + kMetaTxnid, 8);
  return m;
}

// What LMDB itself requires of both meta pages before it picks one.
std::string header_problem(const Meta& m, int which) {
  const std::string name = "meta page " + std::to_string(which);
  if (!(m.page_flags & kPageMeta)) return name + " is not marked as a meta page";
  if (m.magic != kMagic) return name + " has a bad magic number (not an LMDB file)";
  if (m.version != kDataVersion) return name + " has LMDB format version " + std::to_string(m.version);
  return {};
}

bool power_of_two(uint64_t v) { return v && !(v & (v - 1)); }

}  // namespace

DataFileCheck check_data_file(const std::filesystem::path& data_mdb) {
  DataFileCheck c;
  Fd f{::open(data_mdb.c_str(), O_RDONLY | O_CLOEXEC)};
  // Not there, or not readable: LMDB creates it or reports the error itself.
  if (f.fd < 0) return c;
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return c;
  c.dev = st.st_dev;
  c.ino = st.st_ino;
  c.file_bytes = static_cast<uint64_t>(st.st_size);
  if (c.file_bytes == 0) return c;  // LMDB initialises an empty file
  c.exists = true;
  auto fail = [&](std::string why) {
    c.ok = false;
    c.problem = std::move(why);
    return c;
  };
  if (c.file_bytes < kPageHeader + kMetaBytes)
    return fail("the file has " + std::to_string(c.file_bytes) + " bytes, less than one meta page");

  std::vector<unsigned char> page(kPageHeader + kMetaBytes);
  if (!read_at(f.fd, page.data(), page.size(), 0)) return fail("cannot read meta page 0");
  const Meta m0 = parse_meta(page.data());
  if (std::string p = header_problem(m0, 0); !p.empty()) return fail(p);
  if (!power_of_two(m0.psize) || m0.psize < 512 || m0.psize > 65536)
    return fail("meta page 0 claims a page size of " + std::to_string(m0.psize) + " bytes");
  const uint64_t psize = m0.psize;
  if (c.file_bytes < 2 * psize)
    return fail("the file has " + std::to_string(c.file_bytes) + " bytes, less than its two meta pages of " +
                std::to_string(psize) + " bytes");
  if (!read_at(f.fd, page.data(), page.size(), psize)) return fail("cannot read meta page 1");
  const Meta m1 = parse_meta(page.data());
  if (std::string p = header_problem(m1, 1); !p.empty()) return fail(p);

  // The one LMDB will use.
  const bool first = m0.txnid >= m1.txnid;
  const Meta& m = first ? m0 : m1;
  const std::string name = std::string("meta page ") + (first ? "0" : "1") + " (txn " + std::to_string(m.txnid) + ")";
  c.page_bytes = psize;
  c.last_page = m.last_pg;
  c.map_bytes = m.mapsize;
  c.txnid = m.txnid;
  if (m.psize != psize) return fail(name + " claims a page size of " + std::to_string(m.psize) + " bytes, meta page 0 " + std::to_string(psize));
  if (m.address != 0) return fail(name + " asks for a fixed map address");
  const uint64_t pages_in_file = c.file_bytes / psize;
  if (m.last_pg < 1 || m.last_pg >= pages_in_file)
    return fail(name + " claims " + std::to_string(m.last_pg + 1) + " pages (" +
                std::to_string((m.last_pg + 1) * psize) + " bytes), the file has " +
                std::to_string(c.file_bytes) + " bytes (truncated?)");
  if (m.mapsize > kMaxMapBytes) return fail(name + " claims a map of " + std::to_string(m.mapsize) + " bytes");
  for (int i = 0; i < 2; ++i) {
    const char* db = i == 0 ? "free-page" : "main";
    if (m.root[i] == kInvalidPage) continue;  // an empty tree
    if (m.root[i] < 2 || m.root[i] > m.last_pg)
      return fail(name + ": the " + db + " tree's root page " + std::to_string(m.root[i]) + " lies outside pages 2.." +
                  std::to_string(m.last_pg));
    if (m.depth[i] == 0 || m.depth[i] > 32)
      return fail(name + ": the " + db + " tree claims a depth of " + std::to_string(m.depth[i]));
    unsigned char h[kPageHeader];
    if (!read_at(f.fd, h, sizeof h, m.root[i] * psize)) return fail(name + ": cannot read the " + db + " tree's root");
    const uint64_t pgno = le(h, 8);
    const uint16_t flags = static_cast<uint16_t>(le(h + 10, 2));
    const uint16_t lower = static_cast<uint16_t>(le(h + 12, 2)), upper = static_cast<uint16_t>(le(h + 14, 2));
    if (pgno != m.root[i] || !(flags & (kPageBranch | kPageLeaf)) || lower < kPageHeader || lower > upper ||
        upper > psize)
      return fail(name + ": the " + db + " tree's root page " + std::to_string(m.root[i]) + " is not a tree page");
  }
  return c;
}

uint64_t scan_leaf_entries(const std::filesystem::path& data_mdb,
                           const std::function<void(std::string_view, std::string_view)>& fn) {
  Fd f{::open(data_mdb.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw ToolError("filesystem", std::strerror(errno), "cannot open " + data_mdb.string());
  struct stat st;
  if (::fstat(f.fd, &st) != 0) throw ToolError("filesystem", std::strerror(errno), "cannot stat " + data_mdb.string());
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  // The page size from meta page 0 when it is believable, else the usual 4096.
  uint64_t psize = 4096;
  std::vector<unsigned char> page(kPageHeader + kMetaBytes);
  if (size >= page.size() && read_at(f.fd, page.data(), page.size(), 0)) {
    const Meta m0 = parse_meta(page.data());
    if (m0.magic == kMagic && power_of_two(m0.psize) && m0.psize >= 512 && m0.psize <= 65536) psize = m0.psize;
  }
  page.resize(psize);
  uint64_t found = 0;
  std::string big;
  for (uint64_t pg = 2; (pg + 1) * psize <= size; ++pg) {
    if (!read_at(f.fd, page.data(), psize, pg * psize)) break;
    const uint16_t flags = static_cast<uint16_t>(le(page.data() + 10, 2));
    if (le(page.data(), 8) != pg || !(flags & kPageLeaf) || (flags & (kPageLeaf2 | kPageSub | kPageOverflow | kPageMeta)))
      continue;
    const uint64_t lower = le(page.data() + 12, 2);
    if (lower < kPageHeader || lower > psize) continue;
    const uint64_t nkeys = (lower - kPageHeader) / 2;
    for (uint64_t i = 0; i < nkeys; ++i) {
      const uint64_t at = le(page.data() + kPageHeader + 2 * i, 2);
      if (at < lower || at + kNodeHeader > psize) continue;
      const unsigned char* node = page.data() + at;
      const uint64_t dsize = le(node, 2) | (le(node + 2, 2) << 16);
      const uint16_t nflags = static_cast<uint16_t>(le(node + 4, 2));
      const uint64_t ksize = le(node + 6, 2);
      if (nflags & (kNodeSubData | kNodeDupData)) continue;  // not a plain key/value pair
      if (at + kNodeHeader + ksize > psize) continue;
      const std::string_view key(reinterpret_cast<const char*>(node + kNodeHeader), ksize);
      const uint64_t data_at = at + kNodeHeader + ksize;
      if (nflags & kNodeBigData) {
        if (data_at + 8 > psize) continue;
        const uint64_t ov = le(page.data() + data_at, 8);
        // The value lies after the overflow page's header; all of it must be in the file.
        if (ov < 2 || ov >= size / psize || dsize > size - ov * psize - kPageHeader) continue;
        big.resize(dsize);
        if (!read_at(f.fd, big.data(), dsize, ov * psize + kPageHeader)) continue;
        fn(key, big);
      } else {
        if (data_at + dsize > psize) continue;
        fn(key, std::string_view(reinterpret_cast<const char*>(page.data() + data_at), dsize));
      }
      ++found;
    }
  }
  return found;
}

}  // namespace kaio::cache
