// A compiled kernel: its key, PTX and cubin, and a checked launch.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/resources.h"

namespace kaio::jit {

// The cache key: xxh3-128 of IR, shape, target and toolchain (see README).
struct Key {
  ir::Hash128 h;
  std::string hex() const { return h.hex(); }
  std::string bytes() const;  // 16 bytes, high word first (sorts like hex())
  bool operator==(const Key&) const = default;
};

// A grid or block extent: any integer type converts; ranges are checked at launch.
using Dim3 = ir::Extent;

class Stream;
struct TensorMap;

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  uint32_t shared_bytes = 0;       // dynamic shared memory
  const Stream* stream = nullptr;  // null: the default stream
  // Thread-block cluster shape (sm_90+). 1x1x1: no cluster (a plain launch). Otherwise the
  // grid must be a multiple of it in each dimension and it may hold at most 8 blocks (the
  // portable cluster size); the launch goes through cuLaunchKernelEx.
  Dim3 cluster;
  // Programmatic dependent launch (sm_90+ devices; ignored elsewhere): the kernel may start
  // before the previous kernel in the stream has finished, so it must call
  // KernelBuilder::grid_dependency_wait() before reading anything that kernel writes.
  bool overlap_previous = false;
};

namespace detail {

struct KernelState;

// One launch argument before it is matched against the kernel's parameter.
struct Arg {
  enum Kind : uint8_t { Pointer, Int, UInt, Bool, F32, F64, F16, BF16, Bytes, Fp8 } kind;
  ir::Scalar elem = ir::Scalar::Pred;  // pointee for Pointer; e4m3 or e5m2 for Fp8
  int64_t i = 0;   // also: the size of a Bytes blob
  uint64_t u = 0;  // also: pointer address, raw f16/bf16/f32/f64 bits, host address of a Bytes blob
  double d = 0;
};
// A by-value parameter of `n` bytes (e.g. a jit::TensorMap); the blob must outlive the launch call.
inline Arg make_bytes_arg(const void* p, size_t n) {
  return Arg{Arg::Bytes, {}, static_cast<int64_t>(n), reinterpret_cast<uint64_t>(p), 0};
}

template <class T>
Arg make_arg(const DeviceBuffer<T>& b) { return Arg{Arg::Pointer, ir::ScalarOf<T>::value, 0, b.device_address(), 0}; }
template <class T>
Arg make_arg(const DevicePtr<T>& p) { return Arg{Arg::Pointer, ir::ScalarOf<std::remove_cv_t<T>>::value, 0, p.address, 0}; }
inline Arg make_arg(bool v) { return Arg{Arg::Bool, {}, v, v, 0}; }
inline Arg make_arg(float v) { return Arg{Arg::F32, {}, 0, kaio::detail::f32_bits(v), v}; }
inline Arg make_arg(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return Arg{Arg::F64, {}, 0, u, v};
}
inline Arg make_arg(kaio::half v) { return Arg{Arg::F16, {}, 0, v.bits, static_cast<float>(v)}; }
inline Arg make_arg(kaio::bfloat16 v) { return Arg{Arg::BF16, {}, 0, v.bits, static_cast<float>(v)}; }
inline Arg make_arg(kaio::fp8_e4m3 v) { return Arg{Arg::Fp8, ir::Scalar::E4M3, 0, v.bits, static_cast<float>(v)}; }
inline Arg make_arg(kaio::fp8_e5m2 v) { return Arg{Arg::Fp8, ir::Scalar::E5M2, 0, v.bits, static_cast<float>(v)}; }
Arg make_arg(const TensorMap& m);  // a 128-byte by-value parameter (jit/tensor_map.h)
template <std::integral T>
  requires(!std::same_as<T, bool>)
Arg make_arg(T v) {
  if constexpr (std::is_signed_v<T>) return Arg{Arg::Int, {}, static_cast<int64_t>(v), 0, 0};
  else return Arg{Arg::UInt, {}, 0, static_cast<uint64_t>(v), 0};
}

}  // namespace detail

class CompiledKernel {
 public:
  CompiledKernel() = default;
  CompiledKernel(std::shared_ptr<detail::KernelState> s, bool from_cache) : s_(std::move(s)), from_cache_(from_cache) {}

  const Key& key() const;
  const std::string& name() const;
  const std::string& arch() const;
  const std::string& ptx() const;
  const std::string& cubin() const;
  const std::string& info_log() const;  // nvJitLink's info log
  const std::vector<ir::Param>& params() const;
  // Registers, shared and local memory, max threads per block: from the link log, and from
  // the driver when the kernel is loaded on a device.
  Resources resources() const;
  // How many clusters of cfg's shape (with its block and dynamic shared memory) the device
  // can hold at once, e.g. to size a persistent grid; 0 when unknown (no device).
  int max_active_clusters(const LaunchConfig& cfg) const;
  // True when this compile was answered by the in-memory or the on-disk cache.
  bool from_cache() const { return from_cache_; }
  bool valid() const { return s_ != nullptr; }

  // Loads the module into the current device's context (launch does it on first use).
  void load() const;
  // Looks up the kernel's function in its module (launch does it on first use). With the
  // driver's lazy loading (the default) this is where the function's code is loaded.
  void resolve() const;

  // Checks the arguments against the kernel's parameters (count and type) and the launch
  // shape before anything runs, then launches asynchronously on cfg.stream. Thread-safe:
  // one kernel may be launched from many threads at once.
  template <class... A>
  void launch(const LaunchConfig& cfg, const A&... args) const {
    if constexpr (sizeof...(A) == 0) {
      launch_packed(cfg, nullptr, 0);
    } else {
      const detail::Arg packed[] = {detail::make_arg(args)...};
      launch_packed(cfg, packed, sizeof...(A));
    }
  }
  void launch_packed(const LaunchConfig& cfg, const detail::Arg* args, size_t n) const;

 private:
  detail::KernelState& state() const;
  std::shared_ptr<detail::KernelState> s_;
  bool from_cache_ = false;
};

}  // namespace kaio::jit
