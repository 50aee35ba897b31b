#include <limits>

#include "kaio/jit/compiled_kernel.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/kernel_state.h"

namespace kaio::jit {

namespace detail {
KernelState::~KernelState() {
  if (module && driver::available()) driver::api().module_unload(module);
}
}  // namespace detail

std::string Key::bytes() const {
  std::string b(16, '\0');
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<char>(h.hi >> (56 - 8 * i));
    b[8 + i] = static_cast<char>(h.lo >> (56 - 8 * i));
  }
  return b;
}

const detail::KernelState& CompiledKernel::state() const {
  if (!s_) throw UsageError("", "CompiledKernel", "this CompiledKernel is empty (default-constructed)");
  return *s_;
}

const Key& CompiledKernel::key() const { return state().key; }
const std::string& CompiledKernel::name() const { return state().name; }
const std::string& CompiledKernel::arch() const { return state().arch; }
const std::string& CompiledKernel::ptx() const { return state().ptx; }
const std::string& CompiledKernel::cubin() const { return state().cubin; }
const std::string& CompiledKernel::info_log() const { return state().info_log; }
const std::vector<ir::Param>& CompiledKernel::params() const { return state().params; }

Resources CompiledKernel::resources() const {
  const detail::KernelState& s = state();
  Resources r = parse_resources(s.info_log, s.launch_bound_threads);
  if (driver::available() && driver::device_arch() == s.arch.substr(0, driver::device_arch().size())) {
    resolve();
    const driver::Api& a = driver::api();
    int v = 0;
    if (a.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, s.function) == CUDA_SUCCESS) r.registers = v;
    if (a.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, s.function) == CUDA_SUCCESS) r.static_shared = v;
    if (a.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, s.function) == CUDA_SUCCESS) r.local_bytes = v;
    if (a.func_get_attribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, s.function) == CUDA_SUCCESS)
      r.max_threads_per_block = v;
    r.from_device = true;
  }
  return r;
}

void CompiledKernel::load() const {
  const detail::KernelState& cs = state();
  if (interpret_mode()) return;  // nothing to load: launches run in the interpreter
  auto& s = const_cast<detail::KernelState&>(cs);
  driver::ensure_context();
  std::call_once(s.load_once, [&] {
    const std::string& dev = driver::device_arch();
    // A cubin runs only on its own SM (an 'a'/'f' suffix keeps the number).
    if (s.arch.compare(0, dev.size(), dev) != 0)
      throw UsageError(s.name, "launch", "kernel compiled for " + s.arch + " cannot run on this " + dev + " device");
    driver::check(driver::api().module_load_data(&s.module, s.cubin.data()), "cuModuleLoadData for kernel '" + s.name + "'");
  });
}

void CompiledKernel::resolve() const {
  if (interpret_mode()) return;
  load();
  auto& s = const_cast<detail::KernelState&>(state());
  std::call_once(s.function_once, [&] {
    driver::check(driver::api().module_get_function(&s.function, s.module, s.name.c_str()),
                  "cuModuleGetFunction for kernel '" + s.name + "'");
  });
}

namespace {

std::string arg_desc(const detail::Arg& a) {
  switch (a.kind) {
    case detail::Arg::Pointer: return std::string("a buffer of ") + ir::scalar_name(a.elem);
    case detail::Arg::Int: return "a signed integer (" + std::to_string(a.i) + ")";
    case detail::Arg::UInt: return "an unsigned integer (" + std::to_string(a.u) + ")";
    case detail::Arg::Bool: return "a bool";
    case detail::Arg::F32: return "a float";
    case detail::Arg::F64: return "a double";
    case detail::Arg::F16: return "a kaio::half";
    case detail::Arg::BF16: return "a kaio::bfloat16";
  }
  return "?";
}

// Writes the argument into an 8-byte slot in the parameter's representation, or says why not.
bool pack(const detail::Arg& a, const ir::Type& t, uint64_t& slot, std::string& why) {
  using detail::Arg;
  slot = 0;
  if (t.ptr) {
    if (a.kind != Arg::Pointer) return false;
    if (a.elem != t.elem) return false;
    slot = a.u;
    return true;
  }
  switch (t.elem) {
    case ir::Scalar::Pred:
      if (a.kind != Arg::Bool) return false;
      slot = a.u;
      return true;
    case ir::Scalar::F32:
      if (a.kind != Arg::F32) return false;
      slot = a.u;
      return true;
    case ir::Scalar::F64:
      if (a.kind != Arg::F64) return false;
      slot = a.u;
      return true;
    case ir::Scalar::F16:
      if (a.kind != Arg::F16) return false;
      slot = a.u;
      return true;
    case ir::Scalar::BF16:
      if (a.kind != Arg::BF16) return false;
      slot = a.u;
      return true;
    default:
      break;
  }
  // Integers: any C++ integer is accepted when its value fits the parameter's type.
  if (a.kind != Arg::Int && a.kind != Arg::UInt) return false;
  int bits = ir::scalar_bits(t.elem);
  bool neg = a.kind == Arg::Int && a.i < 0;
  if (t.is_signed()) {
    int64_t lo = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits - 1));
    int64_t hi = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1;
    bool fits = a.kind == Arg::UInt ? a.u <= uint64_t(hi) : (a.i >= lo && a.i <= hi);
    if (!fits) {
      why = "its value does not fit in " + t.str();
      return false;
    }
  } else {
    uint64_t hi = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
    if (neg || (a.kind == Arg::UInt ? a.u : uint64_t(a.i)) > hi) {
      why = "its value does not fit in " + t.str();
      return false;
    }
  }
  slot = a.kind == Arg::UInt ? a.u : static_cast<uint64_t>(a.i);
  return true;
}

void check_dim(const CompiledKernel& k, const char* what, const Dim3& d, uint64_t max_x) {
  if (d.x == 0 || d.y == 0 || d.z == 0 || d.x > max_x || d.y > 65535 || d.z > 65535)
    throw UsageError(k.name(), "launch",
                     std::string(what) + " (" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
                         std::to_string(d.z) + ") is out of range (each dimension >= 1; x <= " +
                         std::to_string(max_x) + ", y and z <= 65535)");
}

}  // namespace

// Dynamic shared memory above 48 KB needs the function's limit raised first; more than the
// device allows per block (minus the static part) is a usage error, not a launch failure.
void CompiledKernel::set_dynamic_shared(uint32_t bytes) const {
  auto& s = const_cast<detail::KernelState&>(state());
  if (bytes <= 48 * 1024 || static_cast<int>(bytes) <= s.dynamic_smem_set) return;
  const driver::Api& a = driver::api();
  CUdevice dev;
  int optin = 0, static_bytes = 0;
  driver::check(a.device_get(&dev, 0), "cuDeviceGet");
  driver::check(a.device_get_attribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev), "cuDeviceGetAttribute");
  driver::check(a.func_get_attribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, s.function), "cuFuncGetAttribute");
  if (static_cast<int64_t>(bytes) + static_bytes > optin)
    throw UsageError(s.name, "launch",
                     "asked for " + std::to_string(bytes) + " bytes of dynamic shared memory; with " +
                         std::to_string(static_bytes) + " static bytes this device allows at most " +
                         std::to_string(optin - static_bytes));
  driver::check(a.func_set_attribute(s.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for kernel '" + s.name + "'");
  s.dynamic_smem_set = static_cast<int>(bytes);
}

void CompiledKernel::launch_packed(const LaunchConfig& cfg, const detail::Arg* args, size_t n) const {
  const detail::KernelState& s = state();
  if (n != s.params.size())
    throw UsageError(s.name, "launch", "expected " + std::to_string(s.params.size()) + " arguments, got " + std::to_string(n));
  uint64_t slots[64];
  void* ptrs[64];
  if (n > 64) throw UsageError(s.name, "launch", "more than 64 kernel arguments");
  for (size_t i = 0; i < n; ++i) {
    std::string why;
    if (!pack(args[i], s.params[i].type, slots[i], why))
      throw UsageError(s.name, "launch",
                       "argument " + std::to_string(i) + " ('" + s.params[i].name + "') is " + arg_desc(args[i]) +
                           ", the kernel expects " + s.params[i].type.str() + (why.empty() ? "" : "; " + why));
    ptrs[i] = &slots[i];
  }
  check_dim(*this, "grid", cfg.grid, 0x7fffffffu);
  check_dim(*this, "block", cfg.block, 1024);
  if (cfg.block.x * cfg.block.y * cfg.block.z > 1024)
    throw UsageError(s.name, "launch", "a block holds at most 1024 threads, asked for " +
                                           std::to_string(cfg.block.x * cfg.block.y * cfg.block.z));
  if (interpret_mode()) {  // synchronous, on the host; any stream is ignored
    if (!s.kernel.valid())
      throw UsageError(s.name, "launch", "interpret mode: this compiled kernel carries no IR to interpret");
    ir::LaunchShape shape{cfg.grid, cfg.block, cfg.shared_bytes};
    ir::interp::run(s.kernel, shape, std::span<const uint64_t>(slots, n));
    return;
  }
  resolve();
  set_dynamic_shared(cfg.shared_bytes);
  CUstream stream = cfg.stream ? static_cast<CUstream>(cfg.stream->handle()) : nullptr;
  driver::check(driver::api().launch_kernel(s.function, static_cast<unsigned>(cfg.grid.x), static_cast<unsigned>(cfg.grid.y),
                                            static_cast<unsigned>(cfg.grid.z), static_cast<unsigned>(cfg.block.x),
                                            static_cast<unsigned>(cfg.block.y), static_cast<unsigned>(cfg.block.z),
                                            cfg.shared_bytes, stream, n ? ptrs : nullptr, nullptr),
                "cuLaunchKernel for kernel '" + s.name + "'");
}

}  // namespace kaio::jit
