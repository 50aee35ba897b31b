// The C ABI's shared parts: errors as status codes, DLPack views, host regions for the
// interpreter, type names, and the library-wide functions.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "kaio/capi/internal.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/compile.h"

namespace kaio::capi {

namespace {

struct LastError {
  std::string message, kernel, op, tool, code, log;
};
thread_local LastError last_error;

int record(int status, const std::string& message) {
  last_error = LastError{};
  last_error.message = message;
  return status;
}

}  // namespace

int set_error_from_current() {
  try {
    throw;
  } catch (const CallbackFailed&) {
    return record(KAIO_ERR_CALLBACK, "a callback failed");
  } catch (const UsageError& e) {
    record(KAIO_ERR_USAGE, e.what());
    last_error.kernel = e.kernel();
    last_error.op = e.op();
    return KAIO_ERR_USAGE;
  } catch (const ToolError& e) {
    record(KAIO_ERR_TOOL, e.what());
    last_error.tool = e.tool();
    last_error.code = e.code();
    last_error.log = e.log();
    return KAIO_ERR_TOOL;
  } catch (const InternalError& e) {
    return record(KAIO_ERR_INTERNAL, e.what());
  } catch (const std::exception& e) {
    return record(KAIO_ERR_OTHER, e.what());
  } catch (...) {
    return record(KAIO_ERR_OTHER, "unknown exception");
  }
}

void set_usage_error(const std::string& op, const std::string& message) { throw UsageError("", op, message); }

// ---------------- views ----------------

namespace {

constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAManaged = 13;

bool dtype_of(kaio_dl_dtype d, ir::Scalar& s) {
  using ir::Scalar;
  switch (d.code) {
    case 0:  // int
      switch (d.bits) {
        case 8: s = Scalar::S8; return true;
        case 16: s = Scalar::S16; return true;
        case 32: s = Scalar::S32; return true;
        case 64: s = Scalar::S64; return true;
      }
      return false;
    case 1:  // uint
      switch (d.bits) {
        case 8: s = Scalar::U8; return true;
        case 16: s = Scalar::U16; return true;
        case 32: s = Scalar::U32; return true;
        case 64: s = Scalar::U64; return true;
      }
      return false;
    case 2:  // float
      switch (d.bits) {
        case 16: s = Scalar::F16; return true;
        case 32: s = Scalar::F32; return true;
        case 64: s = Scalar::F64; return true;
      }
      return false;
    case 4:  // bfloat
      if (d.bits == 16) { s = Scalar::BF16; return true; }
      return false;
    case 6:  // bool
      if (d.bits == 8) { s = Scalar::Pred; return true; }
      return false;
  }
  return false;
}

std::string arg_text(const char* arg) { return std::string("argument '") + arg + "': "; }

}  // namespace

const char* dtype_name(ir::Scalar s) {
  switch (s) {
    case ir::Scalar::F32: return "float32";
    case ir::Scalar::F16: return "float16";
    case ir::Scalar::BF16: return "bfloat16";
    case ir::Scalar::F64: return "float64";
    case ir::Scalar::S8: return "int8";
    case ir::Scalar::S16: return "int16";
    case ir::Scalar::S32: return "int32";
    case ir::Scalar::S64: return "int64";
    case ir::Scalar::U8: return "uint8";
    case ir::Scalar::U16: return "uint16";
    case ir::Scalar::U32: return "uint32";
    case ir::Scalar::U64: return "uint64";
    case ir::Scalar::Pred: return "bool";
    default: return ir::scalar_name(s);
  }
}

bool View::contiguous() const {
  int64_t expect = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

int64_t View::extent() const {
  if (numel == 0) return 0;
  int64_t last = 0;
  for (int i = 0; i < ndim(); ++i) last += (shape[i] - 1) * strides[i];
  return last + 1;
}

uint64_t View::bytes() const {
  return numel == 0 ? 0 : static_cast<uint64_t>(extent()) * static_cast<uint64_t>(ir::scalar_bytes(dtype));
}

std::string View::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

View view(const char* op, const char* arg, const kaio_tensor* t) {
  if (!t) throw UsageError("", op, arg_text(arg) + "is missing");
  View v;
  const bool host = jit::interpret_mode();
  const int32_t dev = t->device.device_type;
  if (host && dev != kDLCPU)
    throw UsageError("", op, arg_text(arg) + "is on a device (DLPack device type " + std::to_string(dev) +
                                 "), but kaio runs in interpret mode (KAIO_INTERPRET=1), where arrays live in host memory");
  if (!host && dev != kDLCUDA && dev != kDLCUDAManaged)
    throw UsageError("", op, arg_text(arg) + (dev == kDLCPU ? std::string("is in host memory") :
                                                "is on DLPack device type " + std::to_string(dev)) +
                                 "; kaio needs a CUDA device array");
  if (!host && t->device.device_id != 0)
    throw UsageError("", op, arg_text(arg) + "is on CUDA device " + std::to_string(t->device.device_id) +
                                 "; kaio runs on device 0");
  if (t->dtype.lanes != 1 || !dtype_of(t->dtype, v.dtype))
    throw UsageError("", op, arg_text(arg) + "has a DLPack dtype (code " + std::to_string(t->dtype.code) + ", " +
                                 std::to_string(t->dtype.bits) + " bits, " + std::to_string(t->dtype.lanes) +
                                 " lanes) that kaio does not support");
  if (t->ndim < 0 || t->ndim > 16) throw UsageError("", op, arg_text(arg) + "has " + std::to_string(t->ndim) + " dimensions");
  v.address = reinterpret_cast<uint64_t>(t->data) + t->byte_offset;
  v.shape.assign(t->shape, t->shape + t->ndim);
  v.strides.resize(t->ndim);
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (v.shape[i] < 0) throw UsageError("", op, arg_text(arg) + "has a negative dimension");
    v.strides[i] = t->strides ? t->strides[i] : expect;
    if (v.strides[i] < 0 && v.shape[i] > 1)
      throw UsageError("", op, arg_text(arg) + "has a negative stride, which kaio does not support");
    expect *= v.shape[i];
  }
  v.numel = expect;
  if (v.numel > 0 && v.address == 0) throw UsageError("", op, arg_text(arg) + "has a null data pointer");
  return v;
}

void require_dtype(const char* op, const char* arg, const View& v, ir::Scalar want) {
  if (v.dtype != want)
    throw UsageError("", op, arg_text(arg) + "has dtype " + dtype_name(v.dtype) + "; expected " + dtype_name(want));
}

void require_float(const char* op, const char* arg, const View& v) {
  if (v.dtype != ir::Scalar::F32 && v.dtype != ir::Scalar::F16 && v.dtype != ir::Scalar::BF16)
    throw UsageError("", op, arg_text(arg) + "has dtype " + dtype_name(v.dtype) +
                                 "; expected float32, float16 or bfloat16");
}

void require_same(const char* op, const char* arg, const View& v, const char* like_name, const View& like) {
  if (v.dtype != like.dtype)
    throw UsageError("", op, arg_text(arg) + "has dtype " + dtype_name(v.dtype) + ", but '" + like_name + "' has " +
                                 dtype_name(like.dtype));
  if (v.shape != like.shape)
    throw UsageError("", op, arg_text(arg) + "has shape " + v.shape_str() + ", but '" + like_name + "' has " +
                                 like.shape_str() + " (kaio does not broadcast)");
}

bool as_rows(const View& v, Rows& r) {
  if (v.ndim() == 0) {
    r = Rows{1, 1, 1};
    return true;
  }
  const int n = v.ndim();
  r.cols = static_cast<uint64_t>(v.shape[n - 1]);
  if (r.cols > 1 && v.strides[n - 1] != 1) return false;
  r.rows = 1;
  for (int i = 0; i < n - 1; ++i) r.rows *= static_cast<uint64_t>(v.shape[i]);
  // Leading dimensions fold into rows when each steps over whole rows of the next.
  int64_t ld = -1;
  for (int i = n - 2; i >= 0; --i) {
    if (v.shape[i] == 1) continue;
    if (ld < 0) {
      ld = v.strides[i];
      continue;
    }
    int64_t inner = 1;  // rows spanned by dimension i + 1 .. n - 2
    for (int j = i + 1; j < n - 1; ++j) inner *= v.shape[j];
    if (v.strides[i] != ld * inner) return false;
  }
  r.ld = ld < 0 ? r.cols : static_cast<uint64_t>(ld);
  if (r.rows > 1 && r.ld < r.cols) return false;
  return true;
}

Rows rows_of(const char* op, const char* arg, const View& v) {
  Rows r;
  if (!as_rows(v, r)) {
    std::string s = "[";
    for (int i = 0; i < v.ndim(); ++i) s += (i ? ", " : "") + std::to_string(v.strides[i]);
    throw UsageError("", op, arg_text(arg) + "has strides " + s + "] for shape " + v.shape_str() +
                                 "; kaio needs a unit stride along the last dimension and evenly spaced rows "
                                 "(make it contiguous first)");
  }
  return r;
}

// ---------------- host regions ----------------

namespace {
std::mutex regions_mutex;
std::map<uint64_t, std::pair<uint64_t, uint64_t>>& regions() {  // base -> (count, bytes)
  static auto* m = new std::map<uint64_t, std::pair<uint64_t, uint64_t>>;
  return *m;
}
}  // namespace

namespace {
// Counted registrations keyed by base (the interpreter's registry holds one extent per base).
void acquire(uint64_t base, uint64_t bytes) {
  auto& e = regions()[base];
  ++e.first;
  if (bytes > e.second) {
    e.second = bytes;
    ir::interp::register_allocation(base, bytes);
  }
}
void release(uint64_t base) {
  auto it = regions().find(base);
  if (it == regions().end()) return;
  if (--it->second.first == 0) {
    ir::interp::unregister_allocation(base);
    regions().erase(it);
  }
}
}  // namespace

void HostRegions::add(const View& v) { add(v.address, v.bytes()); }

bool registers_host_memory() {
  // Fixed for the process (the backend is chosen once). KAIO_INTERPRET=dry runs no kernel,
  // so nothing needs registering: a dry call then costs what a device call costs on the host.
  static const bool on = [] {
    const char* v = std::getenv("KAIO_INTERPRET");
    return jit::interpret_mode() && !(v && std::string(v) == "dry");
  }();
  return on;
}

void HostRegions::add(uint64_t address, uint64_t bytes) {
  if (bytes == 0 || !registers_host_memory()) return;
  uint64_t b = address, e = address + bytes;
  std::lock_guard<std::mutex> g(regions_mutex);
  // Arguments that overlap (views of one array) become one region: the interpreter finds an
  // address in the region with the nearest base below it, which must then hold it.
  for (size_t k = 0; k < spans_.size();) {
    if (spans_[k].first <= e && b <= spans_[k].second) {
      b = std::min(b, spans_[k].first);
      e = std::max(e, spans_[k].second);
      release(spans_[k].first);
      spans_.erase(spans_.begin() + static_cast<std::ptrdiff_t>(k));
      k = 0;
    } else {
      ++k;
    }
  }
  acquire(b, e - b);
  spans_.emplace_back(b, e);
}

HostRegions::~HostRegions() {
  if (spans_.empty()) return;
  std::lock_guard<std::mutex> g(regions_mutex);
  for (const auto& sp : spans_) release(sp.first);
}

// ---------------- types ----------------

ir::Type parse_type(const char* op, const char* text) {
  std::string s = text ? text : "";
  auto trim = [](std::string x) {
    while (!x.empty() && x.front() == ' ') x.erase(x.begin());
    while (!x.empty() && x.back() == ' ') x.pop_back();
    return x;
  };
  s = trim(s);
  bool ptr = false, is_const = false;
  ir::Space space = ir::Space::Global;
  if (s.rfind("ptr<", 0) == 0 && s.back() == '>') {
    ptr = true;
    s = trim(s.substr(4, s.size() - 5));
  } else if (!s.empty() && s.back() == '*') {
    ptr = true;
    s = trim(s.substr(0, s.size() - 1));
  }
  if (ptr && s.rfind("shared ", 0) == 0) {
    space = ir::Space::Shared;
    s = trim(s.substr(7));
  }
  if (ptr && s.rfind("const ", 0) == 0) {
    is_const = true;
    s = trim(s.substr(6));
  }
  static const std::map<std::string, ir::Scalar> aliases = {
      {"bool", ir::Scalar::Pred}, {"i8", ir::Scalar::S8},       {"i16", ir::Scalar::S16},
      {"i32", ir::Scalar::S32},   {"i64", ir::Scalar::S64},     {"int32", ir::Scalar::S32},
      {"int64", ir::Scalar::S64}, {"uint32", ir::Scalar::U32},  {"uint64", ir::Scalar::U64},
      {"float32", ir::Scalar::F32}, {"float16", ir::Scalar::F16}, {"bfloat16", ir::Scalar::BF16},
      {"float64", ir::Scalar::F64}};
  for (int i = 0; i <= static_cast<int>(ir::Scalar::E5M2); ++i) {
    auto sc = static_cast<ir::Scalar>(i);
    if (s == ir::scalar_name(sc)) return ptr ? ir::Type::pointer(sc, is_const, space) : ir::Type::scalar(sc);
  }
  auto it = aliases.find(s);
  if (it != aliases.end()) return ptr ? ir::Type::pointer(it->second, is_const, space) : ir::Type::scalar(it->second);
  throw UsageError("", op, std::string("unknown type '") + (text ? text : "") +
                               "' (write e.g. \"f32\", \"u32\", \"ptr<f32>\" or \"ptr<const f16>\")");
}

}  // namespace kaio::capi

using namespace kaio;

extern "C" {

int kaio_abi_version(void) { return KAIO_C_ABI_VERSION; }

const char* kaio_version(void) { return KAIO_VERSION_STRING; }

const char* kaio_last_error_message(void) { return capi::last_error.message.c_str(); }

const char* kaio_last_error_field(const char* field) {
  static const std::string empty;
  const auto& e = capi::last_error;
  if (!field) return empty.c_str();
  std::string f = field;
  if (f == "kernel") return e.kernel.c_str();
  if (f == "op") return e.op.c_str();
  if (f == "tool") return e.tool.c_str();
  if (f == "code") return e.code.c_str();
  if (f == "log") return e.log.c_str();
  if (f == "message") return e.message.c_str();
  return empty.c_str();
}

int kaio_interpret_mode(void) {
  try {
    return jit::interpret_mode() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

int kaio_synchronize(void) {
  return capi::guard([] { jit::synchronize(); });
}

const char* kaio_toolchain_id(void) {
  try {
    return jit::toolchain_id().c_str();
  } catch (...) {
    capi::set_error_from_current();
    return "";
  }
}

int kaio_flush_cache_writes(void) {
  return capi::guard([] { jit::flush_cache_writes(); });
}

}  // extern "C"
