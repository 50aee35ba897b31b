// What an LMDB data file (data.mdb) claims about itself, read with pread before LMDB maps
// it, and a page scanner that salvages records from a file LMDB cannot open.
//
// Why: LMDB trusts its meta pages. A data.mdb cut short (a partial copy, a backup tool, a
// full disk) still names pages past its end; LMDB maps them and the first access raises
// SIGBUS. Checking the meta pages against the file's real size first turns that into an
// ordinary "damaged" answer.
//
// Layout (liblmdb 0.9.x, 64-bit; see mdb.c): pages 0 and 1 are meta pages. Each starts
// with the 16-byte page header (pgno u64, pad u16, flags u16, lower u16, upper u16) and
// holds MDB_meta: magic u32 (0xBEEFC0DE), version u32 (1), address u64, mapsize u64,
// two MDB_db records (48 bytes each: pad u32 = page size for the first, flags u16,
// depth u16, branch/leaf/overflow pages u64, entries u64, root u64), last_pg u64,
// txnid u64. LMDB uses the meta with the larger txnid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace kaio::cache {

struct DataFileCheck {
  bool exists = false;  // data.mdb exists and is not empty (an empty one is a new cache)
  bool ok = true;       // false: LMDB must not map it
  std::string problem;  // why not ok
  uint64_t file_bytes = 0;
  uint64_t page_bytes = 0, last_page = 0, map_bytes = 0, txnid = 0;  // of the meta LMDB would use
  dev_t dev = 0;        // identity of the file checked (to move aside exactly this one)
  ino_t ino = 0;
};

// Checks both meta pages (page header flag, magic, version, page size), and for the meta
// LMDB would use: the last page and the database roots against the file's real size,
// the root pages' headers, and a mappable map size. Never maps the file.
DataFileCheck check_data_file(const std::filesystem::path& data_mdb);

// Reads every page of `data_mdb` with pread and calls fn(key, value) for each leaf entry
// that fits in the file (inline or on overflow pages), whatever tree it belongs to and
// whether or not a meta page still reaches it. The caller decides what is worth keeping
// (kaio records carry their own checksum). Bounds-checked throughout: never maps the
// file. Returns the number of entries passed to fn. Throws ToolError if the file cannot
// be read at all.
uint64_t scan_leaf_entries(const std::filesystem::path& data_mdb,
                           const std::function<void(std::string_view key, std::string_view value)>& fn);

}  // namespace kaio::cache
