// The kernel IR: a tree of structured blocks holding instructions over numbered values.
// Values are numbered in creation order, so the same builder program always yields the
// same numbering; that numbering is what the canonical encoding and the printer use.
#pragma once

#include <array>
#include <concepts>
#include <type_traits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kaio/ir/types.h"

namespace kaio::ir {

inline constexpr uint32_t kNoValue = 0xffffffffu;

enum class Op : uint8_t {
  // leaves
  Param,   // result = kernel parameter #imm
  Const,   // result = constant with bit pattern imm
  SReg,    // result = special register #imm (SpecialReg)
  // arithmetic and logic (operands and result share one type, except comparisons)
  Neg, Not, Abs,
  Add, Sub, Mul, Div, Rem, Min, Max,
  And, Or, Xor, Shl, Shr,
  Eq, Ne, Lt, Le, Gt, Ge,  // result pred
  Select,  // args: cond, a, b
  Fma,     // args: a, b, c -> a*b+c rounded once
  // math (floating point)
  Sqrt, Rsqrt, Exp, Log, Tanh, Sin, Cos,
  Rcp, Exp2, Log2, Erf, Floor, Ceil, Round, Trunc, Rint,
  Pow, CopySign,          // binary
  IsNan, IsInf,           // result pred
  Cast,    // imm = Rounding
  // memory (imm of Load/Store/LoadVec/StoreVec: CacheHint | vector width << 8)
  Load,    // args: ptr, index; result elem type
  Store,   // args: ptr, index, value
  LoadVec, // args: ptr, index (element index, aligned to the width); results: result .. result+N-1
  StoreVec,// args: ptr, index, v0 .. v{N-1}
  SharedAlloc,   // result ptr<shared T>; imm = element count (static shared memory)
  DynamicShared, // result ptr<shared T>: the dynamic shared memory sized at launch
  AtomicRmw,     // args: ptr, index, value; imm = AtomicOp; result = the old value
  AtomicCas,     // args: ptr, index, compare, value; result = the old value
  // synchronization and warp level
  Barrier,       // bar.sync 0
  Fence,         // imm = FenceScope
  Shfl,          // args: value, lane/delta; imm = ShflMode | member mask << 8 | width << 40
  Vote,          // args: pred; imm = VoteMode | member mask << 8; result pred (all/any) or u32 (ballot)
  Comment,       // no operands; the text is in Kernel::Data::comments[imm]
  Pack,          // args: lo, hi (f16 or bf16) -> f16x2 / bf16x2
  Unpack,        // args: pair; imm = 0 (lo) or 1 (hi)
  // mutable variables
  VarDecl, // result = the variable; args: initial value
  VarRead, // args: var
  VarWrite,// args: var, value
  // structured control flow
  If,      // args: cond; regions: then, else (else may be empty)
  For,     // args: lo, hi, step; result = induction value (scoped to the body); regions: body
  While,   // regions: cond block, body; imm = value id of the condition (in the cond block)
  Return,
};

enum class SpecialReg : uint8_t {
  TidX, TidY, TidZ, NtidX, NtidY, NtidZ, CtaidX, CtaidY, CtaidZ, NctaidX, NctaidY, NctaidZ, LaneId,
};

enum class CacheHint : uint8_t { Default, ReadOnly /* ld.global.nc */, Streaming /* .cs */, Global /* .cg */, LastUse /* .lu */ };
enum class AtomicOp : uint8_t { Add, Min, Max, Exch };
enum class FenceScope : uint8_t { Cta, Gpu, Sys };
enum class ShflMode : uint8_t { Up, Down, Xor, Idx };
enum class VoteMode : uint8_t { All, Any, Ballot };

// Cast flags beyond the rounding (kept in bits 8.. of a Cast's imm).
inline constexpr uint64_t kCastSaturate = 1u << 8;

enum class Rounding : uint8_t { Default, Rn, Rz, Rm, Rp };

const char* op_name(Op op);
const char* sreg_name(SpecialReg r);     // "tid.x"
const char* rounding_name(Rounding r);   // "rn"

// A grid or block extent. Any integer type converts; ranges are checked at
// launch (jit::Dim3 is this type).
struct Extent {
  uint64_t x = 1, y = 1, z = 1;
  Extent() = default;
  template <std::integral X, std::integral Y = int, std::integral Z = int>
  Extent(X x_, Y y_ = 1, Z z_ = 1) : x(u(x_)), y(u(y_)), z(u(z_)) {}

 private:
  template <class T>
  static uint64_t u(T v) {
    if constexpr (std::is_signed_v<T>) return v < 0 ? ~uint64_t(0) : static_cast<uint64_t>(v);
    else return static_cast<uint64_t>(v);
  }
};

struct Block;

struct Inst {
  Op op{};
  Type type{};                 // result type (element type for Load; var type for VarDecl)
  uint32_t result = kNoValue;  // value defined by this instruction
  uint8_t nargs = 0;
  uint8_t nresults = 1;  // LoadVec defines nresults consecutive values from `result`
  std::array<uint32_t, 6> args{kNoValue, kNoValue, kNoValue, kNoValue, kNoValue, kNoValue};
  uint64_t imm = 0;
  std::vector<Block> regions;
};

struct Block {
  std::vector<Inst> insts;
};

struct Param {
  std::string name;  // for messages and the printer only; PTX uses positional names
  Type type;         // a by-value byte parameter reads as u64: the parameter's generic address
  uint32_t bytes = 0;  // > 0: a by-value parameter of this many bytes (.param .align A .b8 p[bytes])
  uint32_t align = 0;  // its alignment (a power of two), with bytes > 0
};

struct SpecConstant {
  std::string name;
  Type type;
  uint64_t bits;
  uint32_t value;  // the Const value that carries it
};

struct ValueInfo {
  Type type;
  uint32_t scope = 0;  // the block scope that defines it
  bool is_var = false; // a mutable variable (VarDecl) rather than an SSA value
  std::string name;    // param / spec name, for messages only (never encoded)
};

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128&) const = default;
  std::string hex() const;  // 32 hex digits, high word first
};

// A verified, immutable kernel. Cheap to copy (shared state).
class Kernel {
 public:
  struct Data {
    std::string name;
    std::vector<Param> params;
    uint32_t max_threads = 0;     // launch bounds: .maxntid (0: none)
    uint32_t min_blocks = 0;      // launch bounds: .minnctapersm (0: none)
    bool fast_math = false;       // .approx forms for div, sqrt, rcp, exp, log, sin, cos, tanh
    std::vector<std::string> comments;  // b.comment() texts (not part of the key)
    std::vector<SpecConstant> specs;
    std::vector<ValueInfo> values;
    Block body;
    std::string canonical;  // canonical encoding (see encode.cpp)
    Hash128 hash;           // xxh3-128 of `canonical`
  };

  Kernel() = default;
  explicit Kernel(std::shared_ptr<const Data> d) : d_(std::move(d)) {}

  bool valid() const { return d_ != nullptr; }
  const Data& data() const { return *d_; }
  const std::string& name() const { return d_->name; }
  const std::vector<Param>& params() const { return d_->params; }
  const std::vector<SpecConstant>& specs() const { return d_->specs; }
  const std::vector<ValueInfo>& values() const { return d_->values; }
  const Block& body() const { return d_->body; }
  const std::string& canonical() const { return d_->canonical; }
  const Hash128& hash() const { return d_->hash; }

  std::string print() const;  // canonical text form

 private:
  std::shared_ptr<const Data> d_;
};

// Implemented in verifier.cpp / encode.cpp / printer.cpp.
void verify(const Kernel::Data& k);  // throws UsageError
std::string encode(const Kernel::Data& k);
Hash128 hash_bytes(const void* data, size_t size);
std::string print(const Kernel::Data& k);
std::string print_inst(const Kernel::Data& k, const Inst& i);  // one line (control flow: header only)

}  // namespace kaio::ir
