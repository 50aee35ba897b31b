// The GGUF reader: every metadata value type, tensor infos with alignment, tensor bytes
// as spans into the mapping; malformed files refused with errors that name the file and
// the fault; a file written by the Python gguf package.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "../child_process.h"
#include "../support.h"
#include "gguf_writer.h"
#include "kaio/ir/error.h"

using namespace kaio::quant;
using kaio::test::GgufWriter;
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

std::string bytes_of(const std::vector<float>& x, uint32_t t) { return quantize(t, x.data(), x.size()); }

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = scale * std::sin(0.37f * float(i) + 1.0f);
  return x;
}

// A file with one value of every type, an array of each kind, and five tensors.
GgufWriter sample(uint32_t alignment) {
  GgufWriter w;
  w.alignment = alignment;
  w.kv<uint8_t>("u8", GgufType::U8, 200);
  w.kv<int8_t>("i8", GgufType::I8, -5);
  w.kv<uint16_t>("u16", GgufType::U16, 60000);
  w.kv<int16_t>("i16", GgufType::I16, -30000);
  w.kv<uint32_t>("u32", GgufType::U32, 4000000000u);
  w.kv<int32_t>("i32", GgufType::I32, -2000000000);
  w.kv<float>("f32", GgufType::F32, 0.25f);
  w.kv<uint8_t>("bool", GgufType::Bool, 1);
  w.kv_string("name", "kaio test");
  w.kv<uint64_t>("u64", GgufType::U64, uint64_t(1) << 40);
  w.kv<int64_t>("i64", GgufType::I64, -(int64_t(1) << 40));
  w.kv<double>("f64", GgufType::F64, -1.5);
  if (alignment != 32) w.kv<uint32_t>("general.alignment", GgufType::U32, alignment);
  // arrays: of u32, of strings, of arrays of i16
  GgufWriter::str(w.meta, "arr.u32");
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::Array));
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::U32));
  GgufWriter::put<uint64_t>(w.meta, 3);
  for (uint32_t v : {7u, 8u, 9u}) GgufWriter::put<uint32_t>(w.meta, v);
  GgufWriter::str(w.meta, "arr.str");
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::Array));
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::String));
  GgufWriter::put<uint64_t>(w.meta, 2);
  GgufWriter::str(w.meta, "alpha");
  GgufWriter::str(w.meta, "");
  GgufWriter::str(w.meta, "arr.arr");
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::Array));
  GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::Array));
  GgufWriter::put<uint64_t>(w.meta, 2);
  for (int a = 0; a < 2; ++a) {
    GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::I16));
    GgufWriter::put<uint64_t>(w.meta, uint64_t(a + 1));
    for (int i = 0; i <= a; ++i) GgufWriter::put<int16_t>(w.meta, int16_t(-i - 10 * a));
  }
  w.kvs += 3;
  w.tensor("t.f32", {8, 3}, uint32_t(GgmlType::F32), bytes_of(ramp(24, 1), 0));
  w.tensor("t.q8_0", {64, 2}, uint32_t(GgmlType::Q8_0), bytes_of(ramp(128, 2), 8));
  w.tensor("t.q4_K", {256, 1}, uint32_t(GgmlType::Q4_K), bytes_of(ramp(256, 3), 12));
  w.tensor("t.q6_K", {256, 2}, uint32_t(GgmlType::Q6_K), bytes_of(ramp(512, 4), 14));
  w.tensor("t.iq", {256}, 23, std::string(66, '\x11'));  // a type kaio does not know
  return w;
}

}  // namespace

TEST_CASE("gguf: metadata of every type, tensor infos and data spans from a mapped file", "[quant][gguf]") {
  for (uint32_t alignment : {32u, 64u}) {
    INFO("alignment " << alignment);
    kaio::test::TempDir dir;
    const fs::path p = dir.path() / "model.gguf";
    const GgufWriter w = sample(alignment);
    const std::string image = w.bytes(alignment == 32 ? 3 : 2);
    write_file(p, image);
    const GgufFile f = GgufFile::open(p);
    CHECK(f.version() == (alignment == 32 ? 3u : 2u));
    CHECK(f.alignment() == alignment);
    CHECK(f.data_offset() % alignment == 0);
    CHECK(f.find("u8")->as_uint() == 200);
    CHECK(f.find("i8")->as_int() == -5);
    CHECK(f.find("u16")->as_uint() == 60000);
    CHECK(f.find("i16")->as_int() == -30000);
    CHECK(f.find("u32")->as_uint() == 4000000000u);
    CHECK(f.find("i32")->as_int() == -2000000000);
    CHECK(f.find("f32")->as_float() == 0.25);
    CHECK(f.find("bool")->as_uint() == 1);
    CHECK(f.find("name")->as_string() == "kaio test");
    CHECK(f.find("u64")->as_uint() == (uint64_t(1) << 40));
    CHECK(f.find("i64")->as_int() == -(int64_t(1) << 40));
    CHECK(f.find("f64")->as_float() == -1.5);
    const GgufValue* a = f.find("arr.u32");
    REQUIRE(a);
    CHECK(a->count == 3);
    CHECK(a->number(2) == 9);
    CHECK_THROWS_AS(a->number(3), kaio::UsageError);
    CHECK(f.find("arr.str")->strings == std::vector<std::string_view>{"alpha", ""});
    const GgufValue* aa = f.find("arr.arr");
    REQUIRE(aa->arrays.size() == 2);
    CHECK(aa->arrays[1].count == 2);
    CHECK(aa->arrays[1].number(1) == -11);
    CHECK(f.find("missing") == nullptr);
    CHECK_THROWS_AS(f.find("name")->as_uint("name"), kaio::UsageError);
    CHECK_THROWS_AS(f.find("i8")->as_uint("i8"), kaio::UsageError);  // negative

    REQUIRE(f.tensors().size() == 5);
    const GgufTensor* q6 = f.tensor("t.q6_K");
    REQUIRE(q6);
    CHECK(q6->dims == std::vector<uint64_t>{256, 2});
    CHECK(q6->rows() == 2);
    CHECK(q6->type == uint32_t(GgmlType::Q6_K));
    CHECK(*q6->bytes == 2 * 210);
    for (const GgufTensor& t : f.tensors()) {
      INFO(t.name);
      CHECK(t.offset % alignment == 0);
      if (!t.bytes) continue;
      const auto span = f.data(t);
      // The span is the file's bytes at data offset + offset: no copy, the same bytes.
      CHECK(std::string(reinterpret_cast<const char*>(span.data()), span.size()) ==
            w.data.substr(t.offset, *t.bytes));
    }
    // Decoded tensors are what was quantised (exactly for f32).
    std::vector<float> y(512);
    dequantize(q6->type, f.data(*q6).data(), y.data(), 512);
    const std::vector<float> src = ramp(512, 4);
    for (size_t i = 0; i < 512; ++i) REQUIRE(std::fabs(y[i] - src[i]) < 0.2f);
    dequantize(0, f.data(*f.tensor("t.f32")).data(), y.data(), 24);
    for (size_t i = 0; i < 24; ++i) REQUIRE(y[i] == ramp(24, 1)[i]);
    const GgufTensor* iq = f.tensor("t.iq");
    REQUIRE(iq);
    CHECK_FALSE(iq->bytes);
    try {
      f.data(*iq);
      FAIL("no error");
    } catch (const kaio::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("type 23") && Catch::Contains("t.iq"));
    }
  }
}

TEST_CASE("gguf: malformed files are ToolErrors naming the file and the fault", "[quant][gguf]") {
  const std::string good = sample(32).bytes();
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      GgufFile::parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "damaged.gguf");
    } catch (const kaio::ToolError& e) {
      CHECK(e.tool() == "gguf");
      CHECK(e.code() == "GGUF_INVALID");
      CHECK_THAT(e.what(), Catch::Contains("damaged.gguf"));
      return e.what();
    }
    return "parsed";
  };
  auto patched = [&](size_t at, const std::string& with) {
    std::string s = good;
    s.replace(at, with.size(), with);
    return s;
  };
  auto u64s = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto u32s = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  CHECK_THAT(error_of(patched(0, "GGUX")), Catch::Contains("not a GGUF file"));
  CHECK_THAT(error_of(patched(4, u32s(1))), Catch::Contains("version 1"));
  CHECK_THAT(error_of(patched(4, u32s(7))), Catch::Contains("unknown GGUF version 7"));
  CHECK_THAT(error_of(patched(4, u32s(0x03000000))), Catch::Contains("big-endian"));
  CHECK_THAT(error_of(good.substr(0, 20)), Catch::Contains("needs 8 bytes"));
  CHECK_THAT(error_of(patched(8, u64s(~uint64_t(0)))), Catch::Contains("tensors cannot fit"));
  CHECK_THAT(error_of(patched(16, u64s(uint64_t(1) << 62))), Catch::Contains("metadata pairs cannot fit"));
  CHECK_THAT(error_of(patched(24, u64s(~uint64_t(0) - 3))), Catch::Contains("needs"));  // the first key's length
  {
    // Cut one byte off the last tensor of a known type (t.iq's size is unknown: not checked).
    const GgufFile f = GgufFile::parse({reinterpret_cast<const uint8_t*>(good.data()), good.size()}, "good");
    const GgufTensor& t = *f.tensor("t.q6_K");
    const size_t end = f.data_offset() + t.offset + *t.bytes;
    CHECK_THAT(error_of(good.substr(0, end - 1)), Catch::Contains("past the end of the file"));
    CHECK(error_of(good.substr(0, end)) == "parsed");
  }
  // A key that appears twice, a tensor offset off the alignment, an unknown value type.
  {
    GgufWriter w;
    w.kv<uint32_t>("k", GgufType::U32, 1);
    w.kv<uint32_t>("k", GgufType::U32, 2);
    CHECK_THAT(error_of(w.bytes()), Catch::Contains("'k' appears twice"));
  }
  {
    GgufWriter w;
    w.kv<uint32_t>("general.alignment", GgufType::U32, 48);
    CHECK_THAT(error_of(w.bytes()), Catch::Contains("not a power of two"));
  }
  {
    GgufWriter w;
    w.kv<uint32_t>("k", GgufType(13), 1);
    CHECK_THAT(error_of(w.bytes()), Catch::Contains("unknown value type 13"));
  }
  {
    GgufWriter w;
    w.tensor("t", {32}, 0, std::string(128, '\0'));
    std::string s = w.bytes();
    const size_t off_at = 24 + 8 + 1 + 4 + 8 + 4;  // header, name, n_dims, dim, type
    s.replace(off_at, 8, u64s(4));
    CHECK_THAT(error_of(s), Catch::Contains("not a multiple of the alignment"));
    s = w.bytes();
    s.replace(24 + 8 + 1 + 4, 8, u64s(0));
    CHECK_THAT(error_of(s), Catch::Contains("dimension 0 is 0"));
    s = w.bytes();
    s.replace(24 + 8 + 1, 4, u32s(5));
    CHECK_THAT(error_of(s), Catch::Contains("5 dimensions"));
  }
  {
    GgufWriter w;
    w.tensor("t", {100}, uint32_t(GgmlType::Q8_0), std::string(200, '\0'));
    CHECK_THAT(error_of(w.bytes()), Catch::Contains("not a multiple of the q8_0 block"));
  }
  {
    GgufWriter w;
    w.tensor("t", {uint64_t(1) << 40, uint64_t(1) << 40}, 0, "");
    CHECK_THAT(error_of(w.bytes()), Catch::Contains("more than 2^63 elements"));
  }
  // The file system's errors carry errno's name and the path.
  try {
    GgufFile::open("/nonexistent/kaio/model.gguf");
    FAIL("opened");
  } catch (const kaio::ToolError& e) {
    CHECK(e.code() == "ENOENT");
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent/kaio/model.gguf"));
  }
  kaio::test::TempDir dir;
  write_file(dir.path() / "empty.gguf", "");
  CHECK_THROWS_AS(GgufFile::open(dir.path() / "empty.gguf"), kaio::ToolError);
}

// The Python interpreter with the gguf package: $KAIO_TEST_PYTHON, else /usr/bin/python3;
// empty (and a warning naming the test) where there is none.
std::string gguf_python(const char* test) {
  const char* env = std::getenv("KAIO_TEST_PYTHON");
  const std::string python = env && *env ? env : "/usr/bin/python3";
  if (!fs::exists(python)) {
    WARN("no Python at " << python << " (set KAIO_TEST_PYTHON): " << test << " skipped");
    return "";
  }
  const kaio::test::ChildResult probe = kaio::test::run_child({python, "-c", "import gguf, numpy"});
  if (!probe.exited || probe.code != 0) {
    WARN(python << " has no gguf package (pip install gguf numpy; KAIO_TEST_PYTHON names the interpreter): " << test
                << " skipped");
    return "";
  }
  return python;
}

const std::string kScript = std::string(KAIO_SOURCE_DIR) + "/tests/quant/write_gguf.py";

TEST_CASE("gguf: the gguf package's decoder agrees with kaio's on random blocks", "[quant][gguf]") {
  const std::string python = gguf_python("the decoder cross-check");
  if (python.empty()) return;
  kaio::test::TempDir dir;
  std::mt19937 rng(5);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const TypeInfo info = *type_info(uint32_t(t));
    INFO(info.name);
    // Random bytes are valid blocks (every scale, min and value bit pattern), except that
    // the f16 scales are made finite: a random half in [2^-10, 2) with a random sign.
    const size_t blocks = 64;
    std::string raw(blocks * info.bytes, '\0');
    for (auto& c : raw) c = char(rng());
    auto finite_half = [&](size_t at) {
      const uint16_t h = uint16_t((rng() & 0x8000u) | ((5 + rng() % 11) << 10) | (rng() & 0x3ffu));
      std::memcpy(raw.data() + at, &h, 2);
    };
    for (size_t b = 0; b < blocks; ++b) {
      const size_t at = b * info.bytes;
      if (t == GgmlType::Q8_0) finite_half(at);
      if (t == GgmlType::Q4_K) finite_half(at), finite_half(at + 2);
      if (t == GgmlType::Q6_K) finite_half(at + 208);
    }
    const fs::path in = dir.path() / "blocks.bin", out = dir.path() / "values.bin";
    write_file(in, raw);
    const kaio::test::ChildResult r = kaio::test::run_child({python, kScript, "--decode", info.name, in.string(), out.string()});
    INFO(r.describe());
    REQUIRE(r.exited);
    REQUIRE(r.code == 0);
    std::ifstream f(out, std::ios::binary);
    std::vector<float> theirs(blocks * info.block), ours(blocks * info.block);
    f.read(reinterpret_cast<char*>(theirs.data()), std::streamsize(theirs.size() * 4));
    REQUIRE(f.gcount() == std::streamsize(theirs.size() * 4));
    dequantize(uint32_t(t), raw.data(), ours.data(), ours.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO("element " << i);
      // The same products in f32; a different order of the scale products may differ in
      // the last bit.
      REQUIRE(std::fabs(ours[i] - theirs[i]) <= std::ldexp(std::fabs(ours[i]), -22));
    }
  }
}

TEST_CASE("gguf: a file written by the Python gguf package", "[quant][gguf]") {
  const std::string python = gguf_python("the gguf package file test");
  if (python.empty()) return;
  const std::string script = kScript;
  kaio::test::TempDir dir;
  const fs::path p = dir.path() / "py.gguf";
  const kaio::test::ChildResult r = kaio::test::run_child({python, script, p.string()});
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.code == 0);
  const GgufFile f = GgufFile::open(p);
  CHECK(f.find("general.architecture")->as_string() == "kaio-test");
  CHECK(f.find("kaio.u32")->as_uint() == 7);
  CHECK(f.find("kaio.f32")->as_float() == 0.5);
  CHECK(f.find("kaio.text")->as_string() == "hello gguf");
  const GgufValue* arr = f.find("kaio.ints");
  REQUIRE(arr);
  REQUIRE(arr->count == 3);
  CHECK(arr->number(0) == 1);
  CHECK(arr->number(2) == 3);
  CHECK(f.find("kaio.words")->strings == std::vector<std::string_view>{"a", "bc"});
  // The script's tensors: x[i] = sin(0.37 i + 1) * scale, rows of `cols`, numpy shape (rows, cols).
  const struct {
    const char* name;
    GgmlType type;
    uint64_t rows, cols;
    float scale, tol;
  } want[] = {{"w.f32", GgmlType::F32, 3, 8, 1, 0},
              {"w.f16", GgmlType::F16, 2, 64, 2, 2e-3f},
              {"w.q8_0", GgmlType::Q8_0, 4, 128, 3, 3.0f / 127}};
  for (const auto& w : want) {
    INFO(w.name);
    const GgufTensor* t = f.tensor(w.name);
    REQUIRE(t);
    CHECK(t->type == uint32_t(w.type));
    CHECK(t->dims == std::vector<uint64_t>{w.cols, w.rows});
    CHECK(t->offset % f.alignment() == 0);
    const size_t n = w.rows * w.cols;
    std::vector<float> y(n);
    dequantize(t->type, f.data(*t).data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double x = double(w.scale) * std::sin(0.37 * double(i) + 1.0);
      REQUIRE(std::fabs(y[i] - x) <= w.tol + 1e-6);
    }
  }
}
