// A CPU interpreter for verified kernels: the whole grid, the threads of a block in
// lock-step per warp (32 lanes) with active masks for structured control flow, so that
// warp-level operations keep their GPU meaning. Integer, conversion and f16/bf16 semantics
// are those of the PTX code generator; math is computed in double and rounded (see README
// "Interpreter" for the bounds). Barriers park each warp until all warps of the block have
// arrived; shared memory is per block (static arrays, then LaunchShape::shared_bytes of
// dynamic memory). Out-of-bounds global or shared accesses, misaligned vector accesses,
// reads of uninitialized shared memory and shared-memory races (no barrier between two
// threads' accesses, one a store) stop with a UsageError that names the kernel, the op, the
// block and thread, and the index and address.
//
//   std::vector<float> x = ..., y = ...;
//   ir::interpret(saxpy, {.grid = {(n + 255) / 256}, .block = {256}}, 2.0f, x, y, n);
//
// Pointer parameters take host buffers: std::vector<T>& / std::span<T> (read and written in
// place) or const std::vector<T>& / std::span<const T> (read only). The interpreter knows
// only the allocations registered with it (the buffers of one interpret() call, and, in
// jit interpret mode, every DeviceBuffer), so any access outside them is caught.
//
// This header has no CUDA, LMDB or file dependency; jit uses interp::run() for
// KAIO_INTERPRET=1.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {


struct LaunchShape {
  Extent grid;
  Extent block;
  uint32_t shared_bytes = 0;  // dynamic shared memory per block (allocated per block)
};

namespace interp {

// One allocation the interpreter may access: [base, base + bytes).
struct Region {
  uint64_t base = 0;
  uint64_t bytes = 0;
  bool writable = true;
};

// The process-wide registry (DeviceBuffer in interpret mode). Thread-safe.
void register_allocation(uint64_t base, uint64_t bytes);
void unregister_allocation(uint64_t base);

struct RunOptions {
  unsigned threads = 0;  // host threads for blocks; 0: $KAIO_INTERP_THREADS, else all cores
};

struct RunStats {
  uint64_t thread_instructions = 0;  // sum over executed program steps of active lanes
  uint64_t warp_instructions = 0;    // program steps executed by warps
  uint64_t blocks = 0;
  unsigned threads = 0;              // host threads used
};

// Runs a kernel. `params` holds one 64-bit slot per parameter in the launch representation
// (pointers as addresses, integers sign- or zero-extended, floats as their bits). Pointers
// are resolved in `local` first, then in the registry. Throws UsageError on misuse and on
// any out-of-bounds access; the launch then stops (blocks already run keep their stores).
RunStats run(const Kernel& k, const LaunchShape& shape, std::span<const uint64_t> params,
             std::span<const Region> local = {}, const RunOptions& options = {});

// Host threads a run uses by default ($KAIO_INTERP_THREADS, else hardware concurrency).
unsigned default_threads();

// Compiled interpreter programs are cached by kernel hash, at most this many (least
// recently used dropped first; 0: no cap). Thread-safe.
inline constexpr size_t kDefaultProgramCacheCapacity = 1024;
void set_program_cache_capacity(size_t n);
size_t program_cache_size();

// ---- host arguments for ir::interpret ----
struct HostArg {
  enum Kind : uint8_t { Buffer, Bool, Int, UInt, F32, F64, F16, BF16, Bytes, Fp8 } kind = Int;
  Scalar elem = Scalar::Pred;  // Buffer: element type; Fp8: e4m3 or e5m2
  bool writable = false;       // Buffer: may the kernel store through it
  int64_t i = 0;
  uint64_t u = 0;              // Buffer: address; F*: bits
  uint64_t bytes = 0;          // Buffer, Bytes: size
};

// The bytes of a by-value parameter (b.param_bytes), read in place during the run.
inline HostArg host_arg(std::span<const std::byte> blob) {
  return HostArg{HostArg::Bytes, Scalar::U8, false, 0, reinterpret_cast<uint64_t>(blob.data()), blob.size()};
}

template <class T>
  requires(HostScalar<T> && !std::same_as<std::remove_cv_t<T>, bool>)
HostArg host_arg(std::span<T> s) {
  return HostArg{HostArg::Buffer, ScalarOf<std::remove_cv_t<T>>::value, !std::is_const_v<T>, 0,
                 reinterpret_cast<uint64_t>(s.data()), s.size_bytes()};
}
template <class T>
  requires(HostScalar<T> && !std::same_as<T, bool>)
HostArg host_arg(std::vector<T>& v) { return host_arg(std::span<T>(v)); }
template <class T>
  requires(HostScalar<T> && !std::same_as<T, bool>)
HostArg host_arg(const std::vector<T>& v) { return host_arg(std::span<const T>(v)); }
inline HostArg host_arg(bool v) { return HostArg{HostArg::Bool, {}, false, v, v, 0}; }
inline HostArg host_arg(float v) { return HostArg{HostArg::F32, {}, false, 0, kaio::detail::f32_bits(v), 0}; }
HostArg host_arg(double v);
inline HostArg host_arg(kaio::half v) { return HostArg{HostArg::F16, {}, false, 0, v.bits, 0}; }
inline HostArg host_arg(kaio::bfloat16 v) { return HostArg{HostArg::BF16, {}, false, 0, v.bits, 0}; }
inline HostArg host_arg(kaio::fp8_e4m3 v) { return HostArg{HostArg::Fp8, Scalar::E4M3, false, 0, v.bits, 0}; }
inline HostArg host_arg(kaio::fp8_e5m2 v) { return HostArg{HostArg::Fp8, Scalar::E5M2, false, 0, v.bits, 0}; }
template <std::integral T>
  requires(!std::same_as<T, bool>)
HostArg host_arg(T v) {
  if constexpr (std::is_signed_v<T>) return HostArg{HostArg::Int, {}, false, static_cast<int64_t>(v), 0, 0};
  else return HostArg{HostArg::UInt, {}, false, 0, static_cast<uint64_t>(v), 0};
}

RunStats interpret_packed(const Kernel& k, const LaunchShape& shape, const HostArg* args, size_t n,
                          const RunOptions& options = {});

}  // namespace interp

// Runs `k` on the CPU over host buffers; checks the arguments against the parameters first.
template <class... A>
interp::RunStats interpret(const Kernel& k, const LaunchShape& shape, A&&... args) {
  if constexpr (sizeof...(A) == 0) {
    return interp::interpret_packed(k, shape, nullptr, 0);
  } else {
    const interp::HostArg packed[] = {interp::host_arg(args)...};
    return interp::interpret_packed(k, shape, packed, sizeof...(A));
  }
}

}  // namespace kaio::ir
