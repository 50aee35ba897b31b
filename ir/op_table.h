// The op definition table (ops.def) as data: the Op enum, each op's operand and result
// rule, types, effects, attributes, implementing family and oldest target. The builder's
// checks, the verifier, the printer, the hash, codegen and the interpreter all read it.
#pragma once

#include <cstdint>
#include <string>

#include "kaio/ir/types.h"

namespace kaio::ir {

// Operand and result rules. The verifier checks each op by its rule (verifier.cpp).
enum class OpRule : uint8_t {
  Leaf,        // no operands; one result of the instruction's type
  NoOperands,  // no operands, no result
  Unary,       // a -> T, a : T
  Binary,      // a, b -> T, all T
  Ternary,     // a, b, c -> T, all T
  Compare,     // a, b : T -> pred
  Classify,    // a : float -> pred
  Select,      // c : pred, a, b : T -> T
  Convert,     // a : any scalar -> T
  Pack,        // lo, hi : f16|bf16 -> f16x2|bf16x2
  Unpack,      // pair -> f16|bf16
  Load,        // ptr, index -> nresults x elem
  Store,       // ptr (mutable), index, nvalues x elem
  Atomic,      // ptr (mutable), index, 1 or 2 x elem -> elem
  Address,     // ptr<shared T>, index -> u32 shared-window address
  Shfl,        // v : T, lane : u32 -> T
  Vote,        // p : pred -> pred | u32
  Mbarrier,    // ptr<shared u64>, index [, u32 count/bytes/CTA rank | pred parity] -> nothing, u64 or pred
  Mma,         // accumulator variables (a register array, in and out), then the u64 A and B descriptors
  MmaSync,     // accumulator variables (in and out), then the A and B fragment registers (mma_layout.h)
  Ldmatrix,    // ptr<shared T>, index -> 1, 2 or 4 b32 fragment registers
  CpAsync,     // ptr<shared T> (mutable), index, ptr<global T>, index [, u32 source bytes]
  TmaLoad,     // ptr<shared T> (mutable), index, tensor map (ptr<param u8>), ptr<shared u64> mbarrier, index,
               // attr.count coordinates (s32), [u16 multicast CTA mask]
  TmaStore,    // tensor map (ptr<param u8>), attr.count coordinates (s32), ptr<shared T>, index
  VarDecl,     // init : T -> nresults variables of T (a register array when nresults > 1)
  VarRead,     // var -> T
  VarWrite,    // var, value
  If,          // cond : pred; regions then, else
  For,         // lo, hi, step : int; result: induction value; region body
  While,       // regions cond, body; attr cond: the condition value
};

// Type classes an op is defined on (its operands' type for compare/classify ops).
namespace TC {
enum : uint16_t {
  Pred = 1 << 0,
  SInt = 1 << 1,
  UInt = 1 << 2,
  Half = 1 << 3,  // f16, bf16
  F32 = 1 << 4,
  F64 = 1 << 5,
  Packed = 1 << 6,  // f16x2, bf16x2
  Fp8 = 1 << 7,     // e4m3, e5m2: storage types, no op computes on them (convert first)
  Int = SInt | UInt,
  Float32 = Half | F32,  // computed in f32: no f64 form
  Float = Half | F32 | F64,
  Signed = SInt | Float,
  Number = Int | Float,
};
}  // namespace TC
uint16_t type_class(Type t);              // the TC bit of a scalar type (0 for pointers)
std::string describe_classes(uint16_t m); // "integer, f32 or f64"

// Effects: what the divergence analysis, the async-register rule and the interpreter's
// race detector need to know about an op.
namespace Effect {
enum : uint16_t {
  None = 0,
  Reads = 1 << 0,           // reads memory
  Writes = 1 << 1,          // writes memory
  ThreadVarying = 1 << 2,   // the result may differ between the threads of a warp
  WarpVarying = 1 << 3,     // the result is the same for the threads of a warp (may differ between warps)
  Collective = 1 << 4,      // every thread of the block must reach it (bar.sync of the whole block)
  WarpCollective = 1 << 5,  // whole warps must reach it (named barriers, setmaxnreg)
  Region = 1 << 6,          // structured control flow
  Release = 1 << 7,         // mbarrier arrive: earlier accesses are ordered before the phase completes
  Acquire = 1 << 8,         // mbarrier wait: later accesses are ordered after the phase completed
  AsyncIssue = 1 << 9,      // writes its variable operands asynchronously, until an AsyncWait
  AsyncCommit = 1 << 10,    // closes the group of asynchronous ops issued since the last commit
  AsyncWait = 1 << 11,      // waits until at most attr.count committed groups are in flight
  AsyncCopy = 1 << 12,      // with the Async bits: the per-thread cp.async queue (writes shared memory,
                            // no registers), not the warpgroup MMA queue
};
}  // namespace Effect

// Named attributes of an instruction (Inst::attr); an op's table entry lists the ones it has.
namespace Attr {
enum : uint32_t {
  None = 0,
  Bits = 1 << 0,      // Const: the value's bit pattern
  Index = 1 << 1,     // Param: the parameter number; Comment: the text number
  Sreg = 1 << 2,      // SReg: which special register
  Rounding = 1 << 3,  // Cast
  Saturate = 1 << 4,  // Cast
  High = 1 << 5,      // Unpack: the high half
  Hint = 1 << 6,      // Load/Store: the cache hint
  Count = 1 << 7,     // SharedAlloc: elements; TmaLoad, TmaStore: the tensor's rank; waits: groups in flight
  Align = 1 << 8,     // SharedAlloc, DynamicShared: byte alignment
  Atomic = 1 << 9,    // AtomicRmw: the operation
  Id = 1 << 10,       // Barrier: the barrier number (0..15)
  Threads = 1 << 11,  // Barrier: participating threads (0: the whole block)
  Scope = 1 << 12,    // Fence; BulkWait: Cta = until the shared sources are read (.read), Gpu = writes done
  Regs = 1 << 13,     // SetMaxNReg: the register count
  Increase = 1 << 14, // SetMaxNReg: .inc (else .dec)
  Shfl = 1 << 15,     // Shfl: the mode
  Width = 1 << 16,    // Shfl: the segment width
  Mask = 1 << 17,     // Shfl, Vote: the member mask
  Vote = 1 << 18,     // Vote: the mode
  HasElse = 1 << 19,  // If
  Cond = 1 << 20,     // While: the condition value
  Shape = 1 << 21,    // tensor-core ops: the instruction shape's N
  Elem = 1 << 22,     // tensor-core ops: the A/B element type
  Mma = 1 << 23,      // MmaSync: the instruction shape and types (MmaKind, mma_layout.h)
  Trans = 1 << 24,    // Ldmatrix: .trans (1); wgmma: bit 0 A, bit 1 B are MN-major (transposed)
  ElemB = 1 << 25,    // wgmma: the B element type (Elem is A's; they differ only for e4m3 x e5m2)
};
}  // namespace Attr

// Which emitter (codegen/emit_<family>.cpp) and interpreter picker implement an op.
// Tensor: the warp-level tensor-core and asynchronous-copy ops of sm_80 (mma.sync, ldmatrix, cp.async).
enum class Family : uint8_t { Arith, Math, Convert, Packed, Memory, Parallel, Control, Tensor, kCount };

#define KAIO_OP(E, ...) E,
enum class Op : uint8_t {
#include "kaio/ir/ops.def"
};
#undef KAIO_OP
#define KAIO_OP(E, ...) +1
inline constexpr int kOpCount = 0
#include "kaio/ir/ops.def"
    ;
#undef KAIO_OP

struct OpDef {
  Op op;
  const char* name;
  OpRule rule;
  uint16_t types;    // TC bits (0: any / given by the rule)
  uint16_t effects;  // Effect bits
  uint32_t attrs;    // Attr bits
  Family family;
  int min_sm;
  bool has(uint16_t effect) const { return (effects & effect) != 0; }
};

const OpDef& op_def(Op op);  // every Op has one (the enum is made from the same table)
// Instructions that exist only on the arch-specific target (sm_90a), not on sm_90 or later.
inline bool is_arch_specific(Op op) {
  return op == Op::WgmmaFence || op == Op::WgmmaMma || op == Op::WgmmaCommit || op == Op::WgmmaWait || op == Op::SetMaxNReg;
}
const char* op_name(Op op);

enum class SpecialReg : uint8_t {
  TidX, TidY, TidZ, NtidX, NtidY, NtidZ, CtaidX, CtaidY, CtaidZ, NctaidX, NctaidY, NctaidZ, LaneId,
};

enum class CacheHint : uint8_t { Default, ReadOnly /* ld.global.nc */, Streaming /* .cs */, Global /* .cg */, LastUse /* .lu */ };
enum class AtomicOp : uint8_t { Add, Min, Max, Exch };
enum class FenceScope : uint8_t { Cta, Gpu, Sys };
enum class ShflMode : uint8_t { Up, Down, Xor, Idx };
enum class VoteMode : uint8_t { All, Any, Ballot };
enum class Rounding : uint8_t { Default, Rn, Rz, Rm, Rp };
// The mma.sync instruction shapes kaio has (their fragment layouts are in mma_layout.h):
// m16n8k16 f16 / bf16 -> f32, m16n8k8 tf32 -> f32, m16n8k32 s8 -> s32.
enum class MmaKind : uint8_t { F16, BF16, TF32, S8 };
// The shared-memory swizzle a wgmma descriptor describes (the values are the descriptor's
// bits 62-63).
enum class WgmmaSwizzle : uint8_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };

inline constexpr uint32_t kNoValue = 0xffffffffu;
// WgmmaMma's attrs.trans bit for the form whose A is 4 fragment registers (not a descriptor).
inline constexpr uint8_t kWgmmaARegs = 4;

// The attribute values of one instruction; which of them an op uses is in its OpDef.
// Narrow fields (56 bytes in all) keep instructions small; the builder checks each value's
// range before it stores it (ids 0..15, threads <= 1024, regs <= 256, widths <= 32,
// alignments <= 4096, shapes <= 256), and the encoding writes them at their full width.
struct Attrs {
  uint64_t bits = 0;
  uint32_t index = 0;
  uint32_t count = 0;
  uint32_t mask = 0xffffffffu;
  uint32_t cond = kNoValue;
  uint16_t align = 0;
  uint16_t threads = 0;
  uint16_t regs = 0;
  uint16_t shape = 0;
  uint8_t id = 0;
  uint8_t width = 32;
  Scalar elem = Scalar::F16;
  Scalar elem_b = Scalar::F16;
  MmaKind mma = MmaKind::F16;
  SpecialReg sreg = SpecialReg::TidX;
  Rounding rounding = Rounding::Default;
  CacheHint hint = CacheHint::Default;
  AtomicOp atomic = AtomicOp::Add;
  FenceScope scope = FenceScope::Gpu;
  ShflMode shfl = ShflMode::Up;
  VoteMode vote = VoteMode::All;
  bool saturate = false;
  bool high = false;
  bool increase = false;
  bool has_else = false;
  uint8_t trans = 0;  // Ldmatrix: 1 = .trans; WgmmaMma: bit 0 A, bit 1 B are MN-major, kWgmmaARegs: A from registers
};

}  // namespace kaio::ir
