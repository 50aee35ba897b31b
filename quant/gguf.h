// A GGUF file (ggml's model container, versions 2 and 3, little-endian), memory-mapped:
// its metadata (key / value pairs of every GGUF value type, arrays and strings included)
// and its tensors (name, type, dimensions, offset), each tensor's bytes a span into the
// mapping (no copy).
//
//   auto f = kaio::quant::GgufFile::open("model.gguf");
//   for (const auto& t : f.tensors()) std::cout << t.name << " " << type_name(t.type) << "\n";
//   std::span<const uint8_t> w = f.data(*f.tensor("blk.0.attn_q.weight"));
//
// Nothing in the file is trusted: every length, count and offset is checked against the
// file's size (overflow-safe) before it is used. A file that is not a well-formed GGUF
// file is a ToolError (tool "gguf", code GGUF_INVALID) naming the file, the byte offset
// and what is wrong; a file that cannot be opened or mapped is a ToolError with the errno
// name. Tensors of a type kaio does not know are listed; asking for their bytes is a
// UsageError.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kaio::quant {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

// One metadata value. Scalars keep their little-endian bytes in `raw`; an array of
// scalars keeps its packed elements there (`count` of type `elem`), an array of strings
// its strings in `strings`, an array of arrays its arrays in `arrays`. All views point
// into the mapping.
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem = GgufType::U8;  // arrays: the element type
  uint64_t count = 0;            // arrays: the element count
  std::span<const uint8_t> raw;
  std::string_view str;
  std::vector<std::string_view> strings;
  std::vector<GgufValue> arrays;

  // The value as a number or string; the wrong type is a UsageError naming `key`.
  uint64_t as_uint(std::string_view key = {}) const;  // unsigned integers, non-negative signed ones, bool
  int64_t as_int(std::string_view key = {}) const;    // any integer that fits
  double as_float(std::string_view key = {}) const;   // any number
  std::string_view as_string(std::string_view key = {}) const;
  // Element i of an array of numbers, as a double (exact for integers below 2^53).
  double number(size_t i) const;
};

struct GgufKv {
  std::string_view key;
  GgufValue value;
};

struct GgufTensor {
  std::string_view name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the innermost (the length of a row)
  uint32_t type = 0;           // ggml's type number (GgmlType)
  uint64_t offset = 0;         // from the start of the data section
  uint64_t elements = 0;
  std::optional<uint64_t> bytes;  // set where the type is known
  uint64_t rows() const { return dims.empty() ? 1 : elements / dims[0]; }
};

class GgufFile {
 public:
  // Maps and parses `path`.
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes the caller keeps alive; `name` names them in errors.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts
  const std::vector<GgufKv>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(std::string_view name) const;
  // The tensor's bytes in the mapping; a type kaio does not know is a UsageError.
  std::span<const uint8_t> data(const GgufTensor& t) const;

 private:
  GgufFile() = default;
  struct Mapping;
  std::unique_ptr<Mapping> map_;
  std::span<const uint8_t> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32, data_offset_ = 0;
  std::vector<GgufKv> kv_;
  std::vector<GgufTensor> tensors_;
  friend class GgufParser;
};

}  // namespace kaio::quant
