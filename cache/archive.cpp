#include "kaio/cache/archive.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/ir/error.h"

namespace kaio::cache {

namespace {

constexpr char kMagic[8] = {'K', 'A', 'I', 'O', 'E', 'X', 'P', '\0'};
constexpr uint32_t kVersion = 1;
// Records of one import transaction: bounds the dirty pages of a write transaction.
constexpr uint64_t kBatchBytes = 64ull << 20;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

[[noreturn]] void io_fail(const std::filesystem::path& file, const std::string& what) {
  throw ToolError("filesystem", what, what + ": " + file.string());
}

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

constexpr uint64_t kMaxKeyBytes = 4096;

[[noreturn]] void bad_archive(const std::filesystem::path& file, const std::string& what, uint64_t at) {
  throw ToolError("filesystem", "bad export file",
                  "not a valid kaio cache export: " + what + " at byte " + std::to_string(at) + ": " + file.string());
}

}  // namespace

uint64_t validate_archive(const std::filesystem::path& file) {
  File f(std::fopen(file.c_str(), "rb"));
  if (!f) io_fail(file, "cannot open the export file");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(file, ec);
  if (ec) io_fail(file, "cannot read the size of the export file");
  char head[12];
  if (size < sizeof head || std::fread(head, 1, sizeof head, f.get()) != sizeof head ||
      std::memcmp(head, kMagic, sizeof kMagic) != 0)
    bad_archive(file, "wrong magic (not a kaio cache export)", 0);
  if (get_le(head + 8, 4) != kVersion)
    bad_archive(file, "unsupported version " + std::to_string(get_le(head + 8, 4)), 8);
  uint64_t at = sizeof head, records = 0;
  for (;;) {
    char h[12];
    if (size - at < 4 || std::fread(h, 1, 4, f.get()) != 4) bad_archive(file, "truncated (no end marker)", at);
    const uint64_t key_bytes = get_le(h, 4);
    if (key_bytes == 0) {
      if (size - at - 4 < 8 || std::fread(h, 1, 8, f.get()) != 8) bad_archive(file, "truncated end marker", at);
      if (get_le(h, 8) != records)
        bad_archive(file, "the end marker counts " + std::to_string(get_le(h, 8)) + " records, the file holds " +
                              std::to_string(records), at);
      if (at + 12 != size) bad_archive(file, std::to_string(size - at - 12) + " bytes after the end marker", at + 12);
      return records;
    }
    if (size - at < 12 || std::fread(h + 4, 1, 8, f.get()) != 8) bad_archive(file, "truncated entry header", at);
    const uint64_t rec_bytes = get_le(h + 4, 8);
    const uint64_t left = size - at - 12;
    if (key_bytes > kMaxKeyBytes) bad_archive(file, "a key of " + std::to_string(key_bytes) + " bytes", at);
    if (rec_bytes > (uint64_t(1) << 32)) bad_archive(file, "a record of " + std::to_string(rec_bytes) + " bytes", at);
    if (rec_bytes > left || key_bytes > left - rec_bytes)
      bad_archive(file, "truncated or damaged: an entry of " + std::to_string(key_bytes) + " + " +
                            std::to_string(rec_bytes) + " bytes where " + std::to_string(left) + " remain",
                  at);
    at += 12 + key_bytes + rec_bytes;
    if (std::fseek(f.get(), static_cast<long>(at), SEEK_SET) != 0) bad_archive(file, "cannot seek", at);
    ++records;
  }
}

ExportResult export_records(Store& store, const std::filesystem::path& file) {
  const std::filesystem::path tmp = file.string() + ".part";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) io_fail(tmp, "cannot create the export file");
  std::vector<char> buf(1 << 20);
  std::setvbuf(f.get(), buf.data(), _IOFBF, buf.size());
  std::string head(kMagic, sizeof kMagic);
  put_le(head, kVersion, 4);
  bool ok = std::fwrite(head.data(), 1, head.size(), f.get()) == head.size();

  ExportResult r;
  store.view([&](Txn& t) {
    t.for_each("kernels", [&](std::string_view key, std::string_view rec) {
      if (!ok) return;
      if (!decode_record_info(rec, true)) {
        ++r.damaged;
        return;
      }
      std::string h;
      put_le(h, key.size(), 4);
      put_le(h, rec.size(), 8);
      ok = std::fwrite(h.data(), 1, h.size(), f.get()) == h.size() &&
           std::fwrite(key.data(), 1, key.size(), f.get()) == key.size() &&
           std::fwrite(rec.data(), 1, rec.size(), f.get()) == rec.size();
      ++r.records;
      r.bytes += rec.size();
    });
  });
  std::string tail;
  put_le(tail, 0, 4);
  put_le(tail, r.records, 8);
  ok = ok && std::fwrite(tail.data(), 1, tail.size(), f.get()) == tail.size();
  ok = std::fflush(f.get()) == 0 && ok;
  f.reset();
  std::error_code ec;
  if (!ok) {
    std::filesystem::remove(tmp, ec);
    io_fail(file, "writing the export file failed");
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) io_fail(file, "cannot move the export file into place (" + ec.message() + ")");
  return r;
}

ImportResult import_records(Store& store, const std::filesystem::path& file, const std::string& toolchain,
                            uint64_t max_bytes) {
  validate_archive(file);  // nothing is written from a file that is not whole
  File f(std::fopen(file.c_str(), "rb"));
  if (!f) io_fail(file, "cannot open the export file");
  std::vector<char> buf(1 << 20);
  std::setvbuf(f.get(), buf.data(), _IOFBF, buf.size());
  char head[12];
  if (std::fread(head, 1, sizeof head, f.get()) != sizeof head || std::memcmp(head, kMagic, sizeof kMagic) != 0)
    io_fail(file, "not a kaio cache export");
  if (get_le(head + 8, 4) != kVersion) io_fail(file, "unsupported kaio cache export version");

  ImportResult r;
  std::vector<std::pair<std::string, std::string>> batch;
  uint64_t batch_bytes = 0;
  const uint64_t now = now_unix_us();
  auto commit = [&] {
    if (batch.empty()) return;
    uint64_t imported = 0, present = 0, bytes = 0;
    store.update([&](Txn& t) {  // may run again after map growth: count inside, publish after
      imported = present = bytes = 0;
      for (const auto& [key, rec] : batch) {
        if (t.put("kernels", key, rec, false)) {
          t.put("meta", meta_key(key), encode_usage({now, 0}));
          ++imported;
          bytes += rec.size();
        } else {
          ++present;
        }
      }
    });
    r.imported += imported;
    r.present += present;
    r.bytes += bytes;
    batch.clear();
    batch_bytes = 0;
  };

  uint64_t seen = 0;
  for (;;) {
    char h[12];
    if (std::fread(h, 1, 4, f.get()) != 4) {
      commit();
      io_fail(file, "truncated kaio cache export");
    }
    const uint64_t key_bytes = get_le(h, 4);
    if (key_bytes == 0) {
      if (std::fread(h, 1, 8, f.get()) != 8 || get_le(h, 8) != seen) {
        commit();
        io_fail(file, "truncated kaio cache export (record count does not match)");
      }
      break;
    }
    if (std::fread(h + 4, 1, 8, f.get()) != 8) {
      commit();
      io_fail(file, "truncated kaio cache export");
    }
    const uint64_t rec_bytes = get_le(h + 4, 8);
    if (key_bytes > kMaxKeyBytes || rec_bytes > (uint64_t(1) << 32)) {
      commit();
      io_fail(file, "damaged kaio cache export (implausible sizes)");
    }
    std::string key(key_bytes, '\0'), rec(rec_bytes, '\0');
    if (std::fread(key.data(), 1, key.size(), f.get()) != key.size() ||
        std::fread(rec.data(), 1, rec.size(), f.get()) != rec.size()) {
      commit();
      io_fail(file, "truncated kaio cache export");
    }
    ++seen;
    auto info = decode_record_info(rec, true);
    if (!info) {
      ++r.damaged;
      continue;
    }
    if (!toolchain.empty() && info->toolchain != toolchain) {
      ++r.other_toolchain;
      continue;
    }
    batch_bytes += rec.size();
    batch.emplace_back(std::move(key), std::move(rec));
    if (batch_bytes >= kBatchBytes) commit();
  }
  commit();
  if (max_bytes) {
    Removed ev;
    store.update([&](Txn& t) { ev = evict_lru(t, max_bytes); });
    r.evicted = ev.records;
  }
  return r;
}

}  // namespace kaio::cache
