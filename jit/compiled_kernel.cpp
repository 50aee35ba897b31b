#include <limits>

#include "kaio/jit/compiled_kernel.h"
#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/kernel_state.h"

namespace kaio::jit {

namespace detail {
KernelState::~KernelState() {
  CUmodule m = module.load(std::memory_order_acquire);
  if (m && driver::available()) driver::api().module_unload(m);
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

detail::KernelState& CompiledKernel::state() const {
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
  detail::KernelState& s = state();
  Resources r = parse_resources(s.info_log, s.launch_bound_threads);
  int regs = 0, shared = 0, local = 0, threads = 0;
  if (detail::backend().device_resources(s, regs, shared, local, threads)) {
    r.registers = regs;
    r.static_shared = static_cast<uint64_t>(shared);
    r.local_bytes = static_cast<uint64_t>(local);
    r.max_threads_per_block = threads;
    r.from_device = true;
    if (s.loaded_from_ptx.load(std::memory_order_acquire)) {
      r.whole_program = true;
      r.spill_stores = r.spill_loads = 0;
    }
  }
  return r;
}

int CompiledKernel::max_active_clusters(const LaunchConfig& cfg) const {
  return detail::backend().max_active_clusters(state(), cfg);
}

void CompiledKernel::load() const { detail::backend().load(state()); }

void CompiledKernel::resolve() const { detail::backend().resolve(state()); }

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
    case detail::Arg::Bytes: return "a by-value blob of " + std::to_string(a.i) + " bytes";
    case detail::Arg::Fp8: return std::string("a kaio::fp8_") + ir::scalar_name(a.elem);
  }
  return "?";
}

// Writes the argument into an 8-byte slot in the parameter's representation, or says why not.
bool pack(const detail::Arg& a, const ir::Param& p, uint64_t& slot, std::string& why) {
  using detail::Arg;
  const ir::Type& t = p.type;
  slot = 0;
  if (p.bytes > 0) {  // by-value blob: the slot carries its host address
    if (a.kind != Arg::Bytes) return false;
    if (static_cast<uint64_t>(a.i) != p.bytes) {
      why = "the kernel expects " + std::to_string(p.bytes) + " bytes";
      return false;
    }
    slot = a.u;
    return true;
  }
  if (a.kind == Arg::Bytes) return false;
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
    case ir::Scalar::E4M3:
    case ir::Scalar::E5M2:
      if (a.kind != Arg::Fp8 || a.elem != t.elem) return false;
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

// A cluster launch: the grid must tile into clusters, at most 8 blocks (the portable size),
// and the kernel must be built for an SM with clusters (sm_90+). Checked here, before any
// backend runs, so that the errors are the same with and without a device.
void check_cluster(const detail::KernelState& s, const LaunchConfig& cfg) {
  const Dim3& c = cfg.cluster;
  if (c.x == 1 && c.y == 1 && c.z == 1) return;
  auto str = [](const Dim3& d) {
    return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
  };
  if (c.x == 0 || c.y == 0 || c.z == 0)
    throw UsageError(s.name, "launch", "cluster " + str(c) + ": each dimension must be >= 1");
  if (c.x * c.y * c.z > 8)
    throw UsageError(s.name, "launch", "cluster " + str(c) + " holds " + std::to_string(c.x * c.y * c.z) +
                                           " blocks; the portable maximum is 8");
  if (cfg.grid.x % c.x || cfg.grid.y % c.y || cfg.grid.z % c.z)
    throw UsageError(s.name, "launch", "grid " + str(cfg.grid) + " is not a multiple of the cluster " + str(c) +
                                           " in every dimension");
  if (codegen::parse_arch(s.arch).sm < 90)
    throw UsageError(s.name, "launch", "thread-block clusters need sm_90 or newer; the kernel is compiled for " + s.arch);
}

}  // namespace

void CompiledKernel::launch_packed(const LaunchConfig& cfg, const detail::Arg* args, size_t n) const {
  detail::KernelState& s = state();
  if (n != s.params.size())
    throw UsageError(s.name, "launch", "expected " + std::to_string(s.params.size()) + " arguments, got " + std::to_string(n));
  uint64_t slots[64];
  void* ptrs[64];
  if (n > 64) throw UsageError(s.name, "launch", "more than 64 kernel arguments");
  for (size_t i = 0; i < n; ++i) {
    std::string why;
    if (!pack(args[i], s.params[i], slots[i], why))
      throw UsageError(s.name, "launch",
                       "argument " + std::to_string(i) + " ('" + s.params[i].name + "') is " + arg_desc(args[i]) +
                           ", the kernel expects " + s.params[i].type.str() + (why.empty() ? "" : "; " + why));
    ptrs[i] = args[i].kind == detail::Arg::Bytes ? reinterpret_cast<void*>(args[i].u) : &slots[i];
  }
  check_dim(*this, "grid", cfg.grid, 0x7fffffffu);
  check_dim(*this, "block", cfg.block, 1024);
  if (cfg.block.x * cfg.block.y * cfg.block.z > 1024)
    throw UsageError(s.name, "launch", "a block holds at most 1024 threads, asked for " +
                                           std::to_string(cfg.block.x * cfg.block.y * cfg.block.z));
  check_cluster(s, cfg);
  detail::backend().launch(s, cfg, slots, ptrs, n);
}

}  // namespace kaio::jit
