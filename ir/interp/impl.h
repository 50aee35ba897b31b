// Internal to the interpreter: the flat program, the warp and block state, and the value
// representation shared by the per-family executors (interp_arith / _convert / _math /
// _memory.cpp; control flow lives in interp.cpp).
//
// Program: the IR tree compiled once per kernel (cached by its hash) into a vector of
// decoded instructions. Operands are register slots (slot = value id; loops add temporary
// slots). Structured control flow becomes mask instructions with resolved jump targets:
//
//   If c        saved[d] = active; else[d] = active & ~c; active &= c; none left: -> target
//   Else        active = else[d]; none: -> target (the Join)
//   Join        active = saved[d] & ~returned; none: -> target (the enclosing region's join)
//   Enter       saved[d] = active                       (loop entry)
//   Test c      active &= c; none: -> target (the loop's Join)
//   Jump        -> target
//   Return      returned |= active; active = 0; -> target (the enclosing region's join)
//   Barrier     the warp stops here (pc saved) until every warp of the block has reached a
//               barrier or ended; then all resume (bar.sync 0)
//   End         the warp is done
//
// d is the construct's nesting depth (frames are per depth, not a dynamic stack). Param,
// Const, special registers and shared-memory pointers (SharedAlloc, DynamicShared) are not
// instructions: their slots are filled when a register file is set up (params, constants,
// shared pointers) or a warp starts (special registers). Comment and Fence compile to
// nothing.
//
// Shared memory: a shared pointer is an offset in the block's shared window (u32, as the
// GPU's 32-bit shared addresses): the static arrays first, each 16-byte aligned, then the
// dynamic shared memory (LaunchShape::shared_bytes, 16-byte aligned). Every shared access
// is checked against its array and against a per-byte shadow (ShadowByte): reads of bytes
// no thread of the block has stored, and races (two threads, the same byte, at least one
// writing, no barrier between) stop with a UsageError.
//
// Registers: per warp, struct-of-arrays [slot][lane] of 64-bit words. Representation:
// pred 0/1; signed integers sign-extended, unsigned zero-extended (8/16-bit values wrap);
// f16/bf16/f32 as their bits (low 16/32 bits), f64 bits; e4m3/e5m2 codes zero-extended;
// pointers as addresses.
//
// Pure instructions compute all 32 lanes (their results in inactive lanes are never read:
// SSA values are scoped to the region that defines them); instructions with effects
// (stores, variable writes, loads, math) touch only active lanes.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kaio/ir/half.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir::interp::impl {

constexpr int kLanes = 32;
constexpr uint32_t kNamedBarriers = 16;  // bar.sync ids 0..15
constexpr uint32_t kFullMask = 0xffffffffu;

struct Warp;
struct PInst;
using ExecFn = void (*)(Warp&, const PInst&);

enum class Kind : uint8_t { Exec, If, Else, Join, Enter, Test, Jump, Return, Barrier, End };

struct PInst {
  Kind kind = Kind::Exec;
  uint8_t depth = 0;
  ExecFn fn = nullptr;
  uint32_t dst = 0, a = 0, b = 0, c = 0;
  uint32_t target = 0;
  const Inst* src = nullptr;  // the IR instruction: op, types, operand ids, attributes
};

struct Program {
  Kernel kernel;  // keeps the IR that PInst::src points into alive
  std::vector<PInst> code;
  uint32_t nslots = 0;
  uint32_t frames = 1;
  struct ConstInit { uint32_t slot; uint64_t bits; };
  struct ParamInit { uint32_t slot; uint32_t index; Type type; };
  struct SRegInit { uint32_t slot; SpecialReg reg; };
  std::vector<ConstInit> consts;
  std::vector<ParamInit> params;
  std::vector<SRegInit> sregs;
  // Shared memory: one entry per SharedAlloc (in program order), and the dynamic pointers.
  struct SharedArray { uint32_t slot; uint32_t offset; uint32_t bytes; Scalar elem; };
  std::vector<SharedArray> shared_arrays;
  std::vector<uint32_t> dynamic_slots;  // DynamicShared results (offset = dynamic_offset)
  std::vector<uint32_t> warp_index_slots;  // WarpIndex results (the warp's index, set at warp start)
  uint32_t static_shared = 0;           // bytes of static shared memory (16-byte multiples)
  uint32_t dynamic_align = 16;          // the largest alignment asked of the dynamic shared memory
  uint32_t dynamic_offset() const { return (static_shared + dynamic_align - 1) / dynamic_align * dynamic_align; }
};

// An allocation resolved for one launch.
struct LRegion {
  uint64_t base = 0, end = 0;
  bool writable = true;
};

struct LaunchCtx {
  const Program* prog = nullptr;
  const Kernel::Data* k = nullptr;  // the launched kernel (names for messages)
  LaunchShape shape;
  std::vector<LRegion> regions;
};

// Per-block state. Shared memory lives here (shape.shared_bytes of dynamic shared memory,
// plus static allocations when the IR gets them); the shadow state for shared-memory
// diagnostics (initialized bytes, last writer per byte and barrier epoch for races) goes
// beside it, and `epoch` counts the block's barriers.
struct ShadowByte {
  uint32_t init = 0;   // == BlockCtx::gen: stored by this block
  uint32_t wep = 0;    // epoch of the last plain store
  uint32_t rep = 0;    // epoch of the last plain load
  uint16_t writer = 0; // linear thread id of the last store
  uint16_t reader = 0; // linear thread id of the last load (kManyReaders: several)
};
constexpr uint16_t kManyReaders = 0xffff;

// A shared array of the launch: [offset, offset + bytes) of the window.
struct SharedRegion {
  uint32_t offset = 0, bytes = 0;
  uint32_t value = kNoValue;  // the SharedAlloc / DynamicShared value id (kNoValue: dynamic)
  Scalar elem = Scalar::U8;
};

struct BlockCtx {
  uint32_t ctaid[3] = {0, 0, 0};
  std::vector<uint8_t> shared;
  std::vector<ShadowByte> shadow;
  std::vector<SharedRegion> regions;  // static arrays, then the dynamic memory
  uint32_t epoch = 0;  // increases at each block start, each barrier and each mbarrier phase (never reset per block)
  uint32_t gen = 0;    // the epoch at which this block started
  uint32_t bar_arrived[kNamedBarriers] = {};  // threads arrived at each named barrier (with a thread count)
  uint64_t events = 0;  // mbarrier state changes: a spinning warp that sees none is not progressing
  // cp.async: per shared byte, the copies in flight that will write it (nonzero: no thread
  // may read or write it yet), and their total (0: nothing to check).
  std::vector<uint8_t> async_busy;
  uint32_t async_inflight = 0;
};

// A cp.async issued by one lane and not yet completed: its bytes (read from global memory
// at issue; zero-filled past the source size) land in shared memory when a
// cp_async_wait_group of that lane covers its group.
struct AsyncCopy {
  uint32_t addr = 0;       // shared-window offset
  uint32_t group = 0;      // the lane's group number, once committed
  uint8_t lane = 0, n = 0;
  bool committed = false;
  uint8_t data[16] = {};
};

struct Warp {
  uint64_t* R = nullptr;  // [slot][lane]
  uint32_t* saved = nullptr;
  uint32_t* els = nullptr;
  uint32_t active = 0, returned = 0, pc = 0;
  bool done = false;
  bool yielded = false;  // stopped at a failing mbarrier_try_wait: let the other warps run
  int bar = -1;          // parked at this barrier id (-1: runnable)
  uint32_t index = 0;  // warp index in the block
  uint32_t tid[3][kLanes] = {};
  const LaunchCtx* L = nullptr;
  BlockCtx* B = nullptr;
  const LRegion* last = nullptr;
  uint64_t steps = 0, lane_steps = 0;
  std::vector<AsyncCopy> copies;        // cp.async in flight (all lanes)
  uint32_t async_groups[kLanes] = {};   // cp.async groups committed so far, per lane

  uint64_t* slot(uint32_t s) { return R + size_t(s) * kLanes; }
  uint32_t mask_of(uint32_t s) const {
    const uint64_t* p = R + size_t(s) * kLanes;
    uint32_t m = 0;
    for (int l = 0; l < kLanes; ++l) m |= uint32_t(p[l] & 1) << l;
    return m;
  }
  const LRegion* region_of(uint64_t ptr) {
    if (last && ptr >= last->base && ptr < last->end) return last;
    for (const LRegion& r : L->regions)
      if (ptr >= r.base && ptr < r.end) return last = &r;
    return nullptr;
  }
  // "block (1, 0, 0), thread (5, 0, 0)"
  std::string where(int lane) const;
  [[noreturn]] void fail(const PInst& p, int lane, const std::string& msg) const;
};

template <class F>
inline void for_active(uint32_t mask, F&& f) {
  if (mask == kFullMask) {
    for (int l = 0; l < kLanes; ++l) f(l);
  } else {
    while (mask) {
      int l = std::countr_zero(mask);
      mask &= mask - 1;
      f(l);
    }
  }
}

// ---- values in slots ----
template <class T>
struct VInt {
  using C = T;
  static C get(uint64_t x) { return static_cast<T>(x); }
  static uint64_t put(C v) {
    if constexpr (std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(v));
    else return static_cast<uint64_t>(v);
  }
};
template <Scalar S>
struct V;
template <> struct V<Scalar::S8> : VInt<int8_t> {};
template <> struct V<Scalar::S16> : VInt<int16_t> {};
template <> struct V<Scalar::S32> : VInt<int32_t> {};
template <> struct V<Scalar::S64> : VInt<int64_t> {};
template <> struct V<Scalar::U8> : VInt<uint8_t> {};
template <> struct V<Scalar::U16> : VInt<uint16_t> {};
template <> struct V<Scalar::U32> : VInt<uint32_t> {};
template <> struct V<Scalar::U64> : VInt<uint64_t> {};
template <>
struct V<Scalar::Pred> {
  using C = bool;
  static C get(uint64_t x) { return (x & 1) != 0; }
  static uint64_t put(C v) { return v ? 1 : 0; }
};
template <>
struct V<Scalar::F32> {
  using C = float;
  static C get(uint64_t x) { return kaio::detail::bits_f32(static_cast<uint32_t>(x)); }
  static uint64_t put(C v) { return kaio::detail::f32_bits(v); }
};
template <>
struct V<Scalar::F64> {
  using C = double;
  static C get(uint64_t x) { return std::bit_cast<double>(x); }
  static uint64_t put(C v) { return std::bit_cast<uint64_t>(v); }
};
// f16/bf16 compute in f32 and round once to nearest even (as the PTX codegen does).
template <>
struct V<Scalar::F16> {
  using C = float;
  static C get(uint64_t x) { return kaio::detail::f16_bits_to_f32(static_cast<uint16_t>(x)); }
  static uint64_t put(C v) { return kaio::detail::f32_to_f16_bits(v); }
};
template <>
struct V<Scalar::BF16> {
  using C = float;
  static C get(uint64_t x) { return kaio::detail::bits_f32(static_cast<uint32_t>(x & 0xffff) << 16); }
  static uint64_t put(C v) { return kaio::bfloat16(v).bits; }
};

// Calls f.template operator()<S>() for the runtime scalar s.
template <class F>
decltype(auto) with_scalar(Scalar s, F&& f) {
  switch (s) {
    case Scalar::Pred: return f.template operator()<Scalar::Pred>();
    case Scalar::S8: return f.template operator()<Scalar::S8>();
    case Scalar::S16: return f.template operator()<Scalar::S16>();
    case Scalar::S32: return f.template operator()<Scalar::S32>();
    case Scalar::S64: return f.template operator()<Scalar::S64>();
    case Scalar::U8: return f.template operator()<Scalar::U8>();
    case Scalar::U16: return f.template operator()<Scalar::U16>();
    case Scalar::U32: return f.template operator()<Scalar::U32>();
    case Scalar::U64: return f.template operator()<Scalar::U64>();
    case Scalar::F16: return f.template operator()<Scalar::F16>();
    case Scalar::BF16: return f.template operator()<Scalar::BF16>();
    case Scalar::F32: return f.template operator()<Scalar::F32>();
    case Scalar::F64: return f.template operator()<Scalar::F64>();
    // Packed pairs move as 32-bit words; their arithmetic is picked apart (pick_packed).
    case Scalar::F16x2: case Scalar::BF16x2: return f.template operator()<Scalar::U32>();
    // fp8 codes move as bytes (zero-extended); conversions pick them apart (pick_convert).
    case Scalar::E4M3: case Scalar::E5M2: return f.template operator()<Scalar::U8>();
  }
  return f.template operator()<Scalar::Pred>();
}

constexpr bool is_int_scalar(Scalar s) { return s >= Scalar::S8 && s <= Scalar::U64; }
constexpr bool is_float_scalar(Scalar s) { return s >= Scalar::F16 && s <= Scalar::F64; }
constexpr bool is_half_scalar(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16; }

// A constant or parameter bit pattern in slot representation.
uint64_t normalize(Type t, uint64_t bits);

// Rounding helpers shared by conversions and fma (interp_convert.cpp).
float f64_to_f32(double d, Rounding r);   // rn/rz/rm/rp
float f64_to_f32_odd(double d);           // round to odd (for a later narrowing)
uint16_t f32_to_half_bits(float f, bool bf16, Rounding r);  // rn/rz/rm/rp

// Lane l's access of `n` bytes at ptr[index] (elements of `es` bytes) of the shared
// window, for ops of other families whose args[0], args[1] are that pointer and index:
// bounds, alignment to `align` bytes, then the race/initialization shadow (a store, or a
// load). Returns the window offset. (memory.cpp)
enum class ShadowUse : uint8_t { Load, Store };
uint32_t shared_span(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint32_t es, uint32_t n,
                     uint32_t align, ShadowUse use);

// Per-family pickers: the executor of one IR instruction, or nullptr when the interpreter
// does not support it (the compiler then throws UsageError "not supported ... yet").
ExecFn pick_arith(const Kernel::Data& k, const Inst& i);    // neg..shr, compare, select, fma
ExecFn pick_math(const Kernel::Data& k, const Inst& i);     // sqrt rsqrt exp log tanh sin cos
ExecFn pick_convert(const Kernel::Data& k, const Inst& i);  // cast
ExecFn pick_memory(const Kernel::Data& k, const Inst& i);   // load store load_vec store_vec (global, shared)
ExecFn pick_parallel(const Kernel::Data& k, const Inst& i); // atomics, shfl, vote
ExecFn pick_packed(const Kernel::Data& k, const Inst& i);   // f16x2/bf16x2 arithmetic, pack, unpack
ExecFn packed_atomic_add_fn(bool bf, bool shared);
ExecFn pick_mbarrier(const Kernel::Data& k, const Inst& i);  // mbarriers, shared addresses (memory.cpp)
ExecFn pick_tensor(const Kernel::Data& k, const Inst& i);   // mma.sync, ldmatrix, cp.async (tensor.cpp)
// Used by the control-flow compiler: a pure copy, a masked copy, for-loop compare and step.
// The compiled program of a kernel, from the bounded per-kernel cache (program.cpp);
// throws UsageError for ops the interpreter does not model.
std::shared_ptr<const Program> program_for(const Kernel& k);
ExecFn copy_all_fn();
ExecFn copy_masked_fn();
ExecFn less_fn(Scalar s);
ExecFn add_fn(Scalar s);

}  // namespace kaio::ir::interp::impl
