// The GGUF reader: a bounds-checked cursor over the mapped bytes (see gguf.h).
#include "kaio/quant/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "kaio/ir/error.h"
#include "kaio/quant/blocks.h"

namespace kaio::quant {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // ggml's tensors have at most 4 dimensions
constexpr int kMaxArrayDepth = 4;
constexpr uint64_t kInt64Max = uint64_t(std::numeric_limits<int64_t>::max());

size_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;  // string, array
  }
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A scalar of type t at p, as a double.
double scalar_number(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::U8: case GgufType::Bool: return *p;
    case GgufType::I8: return int8_t(*p);
    case GgufType::U16: return load<uint16_t>(p);
    case GgufType::I16: return load<int16_t>(p);
    case GgufType::U32: return load<uint32_t>(p);
    case GgufType::I32: return load<int32_t>(p);
    case GgufType::F32: return load<float>(p);
    case GgufType::U64: return double(load<uint64_t>(p));
    case GgufType::I64: return double(load<int64_t>(p));
    default: return load<double>(p);
  }
}

bool is_integer(GgufType t) { return t != GgufType::F32 && t != GgufType::F64 && scalar_bytes(t) > 0; }
bool is_signed(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

[[noreturn]] void wrong_type(std::string_view key, const GgufValue& v, const char* want) {
  throw UsageError("", "gguf", "metadata '" + std::string(key) + "' is " + gguf_type_name(v.type) + ", not " + want);
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* const names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

uint64_t GgufValue::as_uint(std::string_view key) const {
  if (!is_integer(type)) wrong_type(key, *this, "an unsigned integer");
  if (is_signed(type) && as_int(key) < 0) wrong_type(key, *this, "a non-negative integer");
  switch (scalar_bytes(type)) {
    case 1: return raw[0];
    case 2: return load<uint16_t>(raw.data());
    case 4: return load<uint32_t>(raw.data());
    default: return load<uint64_t>(raw.data());
  }
}

int64_t GgufValue::as_int(std::string_view key) const {
  if (!is_integer(type)) wrong_type(key, *this, "an integer");
  switch (type) {
    case GgufType::I8: return int8_t(raw[0]);
    case GgufType::I16: return load<int16_t>(raw.data());
    case GgufType::I32: return load<int32_t>(raw.data());
    case GgufType::I64: return load<int64_t>(raw.data());
    case GgufType::U64:
      if (load<uint64_t>(raw.data()) > kInt64Max) wrong_type(key, *this, "an integer below 2^63");
      return int64_t(load<uint64_t>(raw.data()));
    default: return int64_t(scalar_number(type, raw.data()));
  }
}

double GgufValue::as_float(std::string_view key) const {
  if (scalar_bytes(type) == 0) wrong_type(key, *this, "a number");
  return scalar_number(type, raw.data());
}

std::string_view GgufValue::as_string(std::string_view key) const {
  if (type != GgufType::String) wrong_type(key, *this, "a string");
  return str;
}

double GgufValue::number(size_t i) const {
  if (type != GgufType::Array || scalar_bytes(elem) == 0)
    throw UsageError("", "gguf", std::string("number(): not an array of numbers (") + gguf_type_name(type) + ")");
  if (i >= count) throw UsageError("", "gguf", "number(): index " + std::to_string(i) + " of " + std::to_string(count));
  return scalar_number(elem, raw.data() + i * scalar_bytes(elem));
}

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

// The cursor: every read checks that its bytes lie inside the file first.
class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), p_(f.bytes_.data()), size_(f.bytes_.size()) {}

  void run() {
    const uint32_t magic = u32("the magic");
    if (magic != kMagic) fail_at(0, "not a GGUF file (the magic is not \"GGUF\")");
    const uint32_t version = u32("the version");
    if (version == 1) fail_at(4, "GGUF version 1 is not supported (versions 2 and 3 are)");
    if (version > 0xffff && (version & 0xffff) == 0) fail_at(4, "a big-endian GGUF file is not supported");
    if (version != 2 && version != 3) fail_at(4, "unknown GGUF version " + std::to_string(version));
    f_.version_ = version;
    const uint64_t tensors = u64("the tensor count");
    const uint64_t kvs = u64("the metadata count");
    // Each entry takes at least this many bytes, so a count the file cannot hold is
    // refused before anything is reserved for it.
    count_fits(kvs, 8 + 4 + 1, "metadata pairs");
    count_fits(tensors, 8 + 4 + 4 + 8, "tensors");
    std::unordered_set<std::string_view> keys;
    f_.kv_.reserve(kvs);
    for (uint64_t i = 0; i < kvs; ++i) {
      const size_t at = pos_;
      GgufKv kv;
      kv.key = string("a metadata key");
      if (!keys.insert(kv.key).second) fail_at(at, "metadata key '" + std::string(kv.key) + "' appears twice");
      const uint32_t t = u32("a metadata type");
      kv.value = value(t, 0, kv.key);
      f_.kv_.push_back(std::move(kv));
    }
    if (const GgufValue* a = f_.find("general.alignment")) {
      const size_t at = a->raw.empty() ? 0 : size_t(a->raw.data() - p_);  // where the value is
      if (a->type != GgufType::U32) fail_at(at, std::string("general.alignment is ") + gguf_type_name(a->type) + ", not u32");
      const uint32_t al = load<uint32_t>(a->raw.data());
      if (al == 0 || (al & (al - 1))) fail_at(at, "general.alignment " + std::to_string(al) + " is not a power of two");
      f_.alignment_ = al;
    }
    std::unordered_set<std::string_view> names;
    std::vector<size_t> info_at;  // where each tensor's info starts, for the errors below
    f_.tensors_.reserve(tensors);
    for (uint64_t i = 0; i < tensors; ++i) {
      const size_t at = pos_;
      info_at.push_back(at);
      GgufTensor t = tensor_info();
      if (!names.insert(t.name).second) fail_at(at, "tensor '" + std::string(t.name) + "' appears twice");
      f_.tensors_.push_back(std::move(t));
    }
    // The data section starts at the next multiple of the alignment.
    const uint64_t al = f_.alignment_;
    const uint64_t pad = (al - pos_ % al) % al;
    f_.data_offset_ = pos_ + pad;  // pos_ <= size_, pad < 2^32: no overflow
    for (size_t i = 0; i < f_.tensors_.size(); ++i) {
      const GgufTensor& t = f_.tensors_[i];
      const std::string what = "tensor '" + std::string(t.name) + "'";
      if (t.offset % al) fail_at(info_at[i], what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(al));
      if (!t.bytes) continue;
      if (f_.data_offset_ > size_ || t.offset > size_ - f_.data_offset_ || *t.bytes > size_ - f_.data_offset_ - t.offset)
        fail_at(info_at[i], what + ": its " + std::to_string(*t.bytes) + " bytes at data offset " + std::to_string(t.offset) +
                       " lie past the end of the file (" + std::to_string(size_) + " bytes, data from " +
                       std::to_string(f_.data_offset_) + ")");
    }
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw ToolError("gguf", "GGUF_INVALID", f_.name_ + ": at byte " + std::to_string(at) + ": " + what);
  }
  void need(uint64_t n, const std::string& what) const {
    if (n > size_ - pos_)
      fail_at(pos_, what + " needs " + std::to_string(n) + " bytes, the file has " + std::to_string(size_ - pos_) + " left");
  }
  void count_fits(uint64_t count, uint64_t min_bytes, const char* what) const {
    if (count > (size_ - pos_) / min_bytes)
      fail_at(pos_, std::to_string(count) + " " + what + " cannot fit in the " + std::to_string(size_ - pos_) +
                        " bytes left");
  }
  const uint8_t* take(uint64_t n, const std::string& what) {
    need(n, what);
    const uint8_t* q = p_ + pos_;
    pos_ += n;
    return q;
  }
  uint32_t u32(const char* what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const char* what) { return load<uint64_t>(take(8, what)); }
  std::string_view string(const std::string& what) {
    const uint64_t n = u64(("the length of " + what).c_str());
    return {reinterpret_cast<const char*>(take(n, what)), size_t(n)};
  }
  GgufType type_of(uint32_t t, std::string_view key) const {
    if (t > uint32_t(GgufType::F64))
      fail_at(pos_ - 4, "metadata '" + std::string(key) + "': unknown value type " + std::to_string(t));
    return GgufType(t);
  }

  GgufValue value(uint32_t type, int depth, std::string_view key) {
    GgufValue v;
    v.type = type_of(type, key);
    const std::string what = "the value of '" + std::string(key) + "'";
    if (v.type == GgufType::String) {
      v.str = string(what);
    } else if (v.type == GgufType::Array) {
      if (depth >= kMaxArrayDepth) fail_at(pos_, what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      v.elem = type_of(u32("an array's element type"), key);
      v.count = u64("an array's length");
      if (const size_t es = scalar_bytes(v.elem)) {
        if (v.count > (size_ - pos_) / es)
          fail_at(pos_, what + ": " + std::to_string(v.count) + " elements of " + gguf_type_name(v.elem) +
                            " cannot fit in the " + std::to_string(size_ - pos_) + " bytes left");
        v.raw = {take(v.count * es, what), size_t(v.count * es)};
      } else if (v.elem == GgufType::String) {
        count_fits(v.count, 8, "strings");
        v.strings.reserve(v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(string(what + " (element " + std::to_string(i) + ")"));
      } else {
        count_fits(v.count, 12, "arrays");
        v.arrays.reserve(v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.arrays.push_back(value(uint32_t(GgufType::Array), depth + 1, key));
      }
    } else {
      const size_t n = scalar_bytes(v.type);
      v.raw = {take(n, what), n};
    }
    return v;
  }

  GgufTensor tensor_info() {
    GgufTensor t;
    t.name = string("a tensor name");
    const std::string what = "tensor '" + std::string(t.name) + "'";
    const uint32_t n = u32("a tensor's dimension count");
    if (n == 0 || n > kMaxDims) fail_at(pos_ - 4, what + ": " + std::to_string(n) + " dimensions (1 to 4)");
    t.elements = 1;
    for (uint32_t d = 0; d < n; ++d) {
      const uint64_t dim = u64("a tensor dimension");
      if (dim == 0 || dim > kInt64Max) fail_at(pos_ - 8, what + ": dimension " + std::to_string(d) + " is " + std::to_string(dim));
      if (__builtin_mul_overflow(t.elements, dim, &t.elements) || t.elements > kInt64Max)
        fail_at(pos_ - 8, what + ": more than 2^63 elements");
      t.dims.push_back(dim);
    }
    t.type = u32("a tensor type");
    t.offset = u64("a tensor offset");
    if (const auto info = type_info(t.type)) {
      if (t.dims[0] % info->block)
        fail_at(pos_ - 12, what + ": rows of " + std::to_string(t.dims[0]) + " elements are not a multiple of the " +
                               info->name + " block (" + std::to_string(info->block) + ")");
      uint64_t bytes = 0;
      if (__builtin_mul_overflow(t.elements / info->block, uint64_t(info->bytes), &bytes))
        fail_at(pos_ - 12, what + ": its size overflows");
      t.bytes = bytes;
    }
    return t;
  }

  GgufFile& f_;
  const uint8_t* p_;
  size_t size_, pos_ = 0;
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  GgufFile f;
  f.bytes_ = bytes;
  f.name_ = std::move(name);
  GgufParser(f).run();
  return f;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  auto sys_fail = [&](const char* call) {
    const int e = errno;
    throw ToolError("gguf", strerrorname_np(e) ? strerrorname_np(e) : "errno " + std::to_string(e),
                    name + ": " + call + " failed: " + std::strerror(e));
  };
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) sys_fail("open");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    sys_fail("fstat");
  }
  auto map = std::make_unique<Mapping>();
  map->size = size_t(st.st_size);
  if (map->size == 0) {
    ::close(fd);
    throw ToolError("gguf", "GGUF_INVALID", name + ": the file is empty");
  }
  void* a = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int e = errno;
  ::close(fd);
  if (a == MAP_FAILED) {
    errno = e;
    sys_fail("mmap");
  }
  map->addr = a;
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(a), map->size);
  GgufFile f = parse(bytes, name);
  f.map_ = std::move(map);
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKv& kv : kv_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const uint8_t> GgufFile::data(const GgufTensor& t) const {
  if (!t.bytes)
    throw UsageError("", "gguf", name_ + ": tensor '" + std::string(t.name) + "' has " + type_name(t.type) +
                                     ", a tensor type kaio does not know");
  return bytes_.subspan(data_offset_ + t.offset, *t.bytes);
}

}  // namespace kaio::quant
