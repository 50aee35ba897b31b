#include "kaio/cache/record.h"

#include <array>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kaio::cache {

namespace {

constexpr std::array<char, 8> kMagic = {'K', 'A', 'I', 'O', 'R', 'E', 'C', '\0'};
// magic | u32 schema | u32 header bytes
constexpr size_t kPrefixBytes = kMagic.size() + 4 + 4;
constexpr size_t kChecksumBytes = 8;

// Integers are written byte by byte so that the format is little-endian on every host.
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, const std::string& s) {
  put_u32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

uint64_t load_le(std::string_view bytes, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return v;
}

// Reads the header field by field; every read is bounds-checked, so a damaged header
// reports failure instead of reading past the input.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool u32(uint32_t& v) { return fixed(4, v); }
  bool u64(uint64_t& v) { return fixed(8, v); }
  bool str(std::string& s) {
    uint32_t n = 0;
    if (!u32(n) || n > rest_.size()) return false;
    s.assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  template <class T>
  bool fixed(size_t n, T& v) {
    if (rest_.size() < n) return false;
    v = static_cast<T>(load_le(rest_, n));
    rest_.remove_prefix(n);
    return true;
  }
  std::string_view rest_;
};

}  // namespace

std::string encode_record(const Record& r) {
  std::string header;
  put_str(header, r.name);
  put_str(header, r.arch);
  put_str(header, r.toolchain);
  put_u64(header, r.created_unix);
  put_u64(header, r.cubin.size());
  put_u64(header, r.ptx.size());
  put_u64(header, r.info_log.size());

  std::string out;
  out.reserve(kPrefixBytes + header.size() + r.cubin.size() + r.ptx.size() + r.info_log.size() +
              kChecksumBytes);
  out.append(kMagic.data(), kMagic.size());
  put_u32(out, kRecordSchema);
  put_u32(out, static_cast<uint32_t>(header.size()));
  out += header;
  out += r.cubin;
  out += r.ptx;
  out += r.info_log;
  // The checksum covers header and payload: everything after the fixed prefix.
  std::string_view body(out.data() + kPrefixBytes, out.size() - kPrefixBytes);
  put_u64(out, XXH3_64bits(body.data(), body.size()));
  return out;
}

namespace {

template <class T>
std::optional<T> fail_as(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

// Parses and checks everything but the payload copy; `payload` is set to the payload bytes.
std::optional<RecordInfo> parse(std::string_view bytes, bool check_checksum, std::string* why,
                                std::string_view* payload_out) {
  using R = RecordInfo;
  if (bytes.size() < kPrefixBytes + kChecksumBytes)
    return fail_as<R>(why, "short record: " + std::to_string(bytes.size()) + " bytes");
  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0)
    return fail_as<R>(why, "bad magic (not a kaio record)");
  const auto schema = static_cast<uint32_t>(load_le(bytes.substr(8), 4));
  if (schema != kRecordSchema)
    return fail_as<R>(why, "record schema " + std::to_string(schema) + ", expected " +
                               std::to_string(kRecordSchema));
  const uint64_t header_bytes = load_le(bytes.substr(12), 4);
  const std::string_view body =
      bytes.substr(kPrefixBytes, bytes.size() - kPrefixBytes - kChecksumBytes);
  if (header_bytes > body.size())
    return fail_as<R>(why, "size mismatch: header of " + std::to_string(header_bytes) +
                               " bytes in a body of " + std::to_string(body.size()));

  RecordInfo r;
  Reader header(body.substr(0, header_bytes));
  if (!header.str(r.name) || !header.str(r.arch) || !header.str(r.toolchain) ||
      !header.u64(r.created_unix) || !header.u64(r.cubin_bytes) || !header.u64(r.ptx_bytes) ||
      !header.u64(r.log_bytes) || !header.done())
    return fail_as<R>(why, "malformed header");

  // Compared one by one so that huge sizes in a damaged header cannot overflow a sum.
  std::string_view payload = body.substr(header_bytes);
  const uint64_t payload_bytes = payload.size();
  if (r.cubin_bytes > payload_bytes || r.ptx_bytes > payload_bytes - r.cubin_bytes ||
      r.log_bytes != payload_bytes - r.cubin_bytes - r.ptx_bytes)
    return fail_as<R>(why, "size mismatch: header declares " + std::to_string(r.cubin_bytes) + "+" +
                               std::to_string(r.ptx_bytes) + "+" + std::to_string(r.log_bytes) +
                               " payload bytes, record holds " + std::to_string(payload_bytes));

  if (check_checksum) {
    const uint64_t stored = load_le(bytes.substr(bytes.size() - kChecksumBytes), 8);
    const uint64_t actual = XXH3_64bits(body.data(), body.size());
    if (stored != actual) return fail_as<R>(why, "checksum mismatch (record is damaged)");
  }
  if (payload_out) *payload_out = payload;
  return r;
}

}  // namespace

std::optional<RecordInfo> decode_record_info(std::string_view bytes, bool check_checksum, std::string* why) {
  return parse(bytes, check_checksum, why, nullptr);
}

std::optional<Record> decode_record(std::string_view bytes, std::string* why) {
  std::string_view payload;
  std::optional<RecordInfo> info = parse(bytes, true, why, &payload);
  if (!info) return std::nullopt;
  Record r;
  r.name = std::move(info->name);
  r.arch = std::move(info->arch);
  r.toolchain = std::move(info->toolchain);
  r.created_unix = info->created_unix;
  r.cubin.assign(payload.substr(0, info->cubin_bytes));
  r.ptx.assign(payload.substr(info->cubin_bytes, info->ptx_bytes));
  r.info_log.assign(payload.substr(info->cubin_bytes + info->ptx_bytes));
  return r;
}

}  // namespace kaio::cache
