#include <catch2/catch.hpp>

#include <string>

#include "kaio/cache/record.h"

using kaio::cache::decode_record;
using kaio::cache::encode_record;
using kaio::cache::Record;

namespace {

Record sample_record() {
  Record r;
  r.name = "saxpy_f32";
  r.arch = "sm_90";
  r.toolchain = "kaio-codegen 1; ptx 8.4; nvJitLink 12.4";
  r.created_unix = 1'700'000'123;
  r.cubin = std::string("\x7f" "ELF\0\x01\x02", 7) + std::string(300, '\xab');
  r.ptx = ".version 8.4\n.target sm_90\n.address_size 64\n";
  r.info_log = "ptxas info    : Used 12 registers";
  return r;
}

// Offsets into an encoded record: magic (8) | schema (4) | header bytes (4) | header ...
constexpr size_t kSchemaOffset = 8;

}  // namespace

TEST_CASE("record round trip preserves every field", "[cache][record]") {
  const Record in = sample_record();
  const std::string bytes = encode_record(in);
  REQUIRE(bytes.compare(0, 8, std::string("KAIOREC\0", 8)) == 0);

  std::string why;
  const auto out = decode_record(bytes, &why);
  REQUIRE(out.has_value());
  CHECK(why.empty());
  CHECK(out->name == in.name);
  CHECK(out->arch == in.arch);
  CHECK(out->toolchain == in.toolchain);
  CHECK(out->created_unix == in.created_unix);
  CHECK(out->cubin == in.cubin);
  CHECK(out->ptx == in.ptx);
  CHECK(out->info_log == in.info_log);
}

TEST_CASE("record with empty fields round trips", "[cache][record]") {
  const Record in;
  const auto out = decode_record(encode_record(in));
  REQUIRE(out.has_value());
  CHECK(out->name.empty());
  CHECK(out->cubin.empty());
  CHECK(out->ptx.empty());
  CHECK(out->info_log.empty());
  CHECK(out->created_unix == 0);
}

TEST_CASE("record with a flipped payload byte is rejected by its checksum", "[cache][record]") {
  const Record in = sample_record();
  std::string bytes = encode_record(in);
  // A byte inside the cubin: the checksum and trailing 8 bytes are untouched.
  const size_t at = bytes.size() - 8 - in.info_log.size() - in.ptx.size() - 10;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x01);

  std::string why;
  CHECK_FALSE(decode_record(bytes, &why).has_value());
  CHECK_THAT(why, Catch::Contains("checksum"));
}

TEST_CASE("record with a damaged checksum is rejected", "[cache][record]") {
  std::string bytes = encode_record(sample_record());
  bytes.back() = static_cast<char>(bytes.back() ^ 0x80);
  std::string why;
  CHECK_FALSE(decode_record(bytes, &why).has_value());
  CHECK_THAT(why, Catch::Contains("checksum"));
}

TEST_CASE("record with the wrong magic is rejected", "[cache][record]") {
  std::string bytes = encode_record(sample_record());
  bytes[0] = 'X';
  std::string why;
  CHECK_FALSE(decode_record(bytes, &why).has_value());
  CHECK_THAT(why, Catch::Contains("magic"));
}

TEST_CASE("record of another schema is rejected", "[cache][record]") {
  std::string bytes = encode_record(sample_record());
  bytes[kSchemaOffset] = static_cast<char>(kaio::cache::kRecordSchema + 1);
  std::string why;
  CHECK_FALSE(decode_record(bytes, &why).has_value());
  CHECK_THAT(why, Catch::Contains("schema"));
}

TEST_CASE("truncated or extended records are rejected", "[cache][record]") {
  const std::string bytes = encode_record(sample_record());
  std::string why;

  SECTION("empty input") {
    CHECK_FALSE(decode_record("", &why).has_value());
    CHECK_THAT(why, Catch::Contains("short"));
  }
  SECTION("only the magic") {
    CHECK_FALSE(decode_record(std::string_view(bytes).substr(0, 8), &why).has_value());
    CHECK_THAT(why, Catch::Contains("short"));
  }
  SECTION("cut at every length") {
    // No prefix of a record is itself a valid record.
    for (size_t n = 0; n < bytes.size(); ++n) {
      INFO("length " << n);
      CHECK_FALSE(decode_record(std::string_view(bytes).substr(0, n), &why).has_value());
      CHECK_FALSE(why.empty());
    }
  }
  SECTION("trailing garbage") {
    CHECK_FALSE(decode_record(bytes + "extra", &why).has_value());
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("decode_record works without a why", "[cache][record]") {
  CHECK_FALSE(decode_record("not a record").has_value());
}
