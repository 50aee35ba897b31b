// The on-disk record of one compiled kernel. The cache stores bytes and knows nothing of
// kernels: these fields are labels the tools show, plus the two payloads.
//
// Layout (little-endian): magic "KAIOREC\0" | u32 schema | u32 header bytes | header |
//                         payload | u64 xxh3-64 of (header ‖ payload)
// A record whose magic, schema or checksum does not match is never served.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kaio::cache {

inline constexpr uint32_t kRecordSchema = 1;

struct Record {
  std::string name;       // kernel name
  std::string arch;       // target, e.g. "sm_90"
  std::string toolchain;  // toolchain identity (codegen, PTX ISA, nvJitLink versions)
  uint64_t created_unix = 0;  // seconds since the epoch
  std::string cubin;
  std::string ptx;
  std::string info_log;   // nvJitLink's info log (resource usage)
};

// The labels of a record and the sizes of its payloads, without copying the payloads.
struct RecordInfo {
  std::string name, arch, toolchain;
  uint64_t created_unix = 0;
  uint64_t cubin_bytes = 0, ptx_bytes = 0, log_bytes = 0;
};

std::string encode_record(const Record& r);
// Validates the layout and, when `check_checksum`, the checksum (xxh3 over the bytes, no
// copy); nullopt with `why` when the bytes would not be served.
std::optional<RecordInfo> decode_record_info(std::string_view bytes, bool check_checksum = true,
                                             std::string* why = nullptr);
// nullopt when the bytes are not a valid record of this schema; `why` says what is wrong.
std::optional<Record> decode_record(std::string_view bytes, std::string* why = nullptr);

}  // namespace kaio::cache
