// The kernel IR: a tree of structured blocks holding instructions over numbered values.
// Values are numbered in creation order, so the same builder program always yields the
// same numbering; that numbering is what the canonical encoding and the printer use.
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <concepts>
#include <type_traits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kaio/ir/op_table.h"
#include "kaio/ir/types.h"

namespace kaio::ir {

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

// Operand ids: up to four inline (almost every op), more on the heap (vector stores, mma),
// so that building an instruction allocates nothing in the common case. 24 bytes, so that
// instructions stay small: building moves them when a block's vector grows.
class Operands {
 public:
  Operands() = default;
  Operands(std::initializer_list<uint32_t> l) {
    reserve(l.size());
    for (uint32_t v : l) push_back(v);
  }
  Operands(const Operands& o) { *this = o; }
  Operands& operator=(const Operands& o) {
    if (this != &o) {
      clear();
      reserve(o.n_);
      for (uint32_t v : o) push_back(v);
    }
    return *this;
  }
  Operands(Operands&& o) noexcept { take(o); }
  Operands& operator=(Operands&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~Operands() { release(); }

  void push_back(uint32_t v) {
    if (n_ == cap_) reserve(cap_ * 2);
    data()[n_++] = v;
  }
  void reserve(size_t n) {
    if (n <= cap_) return;
    auto* p = new uint32_t[n];
    std::copy(begin(), end(), p);
    release_heap();
    heap_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void clear() { n_ = 0; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const uint32_t* begin() const { return cap_ > kInline ? heap_ : inline_; }
  const uint32_t* end() const { return begin() + n_; }
  uint32_t operator[](size_t i) const { return begin()[i]; }

 private:
  static constexpr uint32_t kInline = 4;
  uint32_t* data() { return cap_ > kInline ? heap_ : inline_; }
  void release_heap() {
    if (cap_ > kInline) delete[] heap_;
  }
  void release() {
    release_heap();
    n_ = 0;
    cap_ = kInline;
  }
  void take(Operands& o) {
    n_ = o.n_;
    cap_ = o.cap_;
    if (cap_ > kInline) heap_ = o.heap_;
    else std::copy(o.inline_, o.inline_ + kInline, inline_);
    o.n_ = 0;
    o.cap_ = kInline;
  }
  uint32_t n_ = 0;
  uint32_t cap_ = kInline;
  union {
    uint32_t inline_[kInline] = {};
    uint32_t* heap_;
  };
};

// The nested blocks of a control-flow op (if: then/else, for: body, while: cond/body).
// A pointer and a count rather than a vector: most instructions have none.
class Regions {
 public:
  Regions() = default;
  Regions(const Regions& o) { *this = o; }
  Regions& operator=(const Regions& o);
  Regions(Regions&&) noexcept = default;
  Regions& operator=(Regions&&) noexcept = default;
  ~Regions();
  void resize(size_t n);  // n blocks, empty ones where new
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Block& operator[](size_t i);  // defined below Block (it must be complete)
  const Block& operator[](size_t i) const;
  Block* begin() { return p_.get(); }
  Block* end();
  const Block* begin() const { return p_.get(); }
  const Block* end() const;

 private:
  struct Free {
    void operator()(Block* b) const;
  };
  std::unique_ptr<Block, Free> p_;
  uint32_t n_ = 0;
};

struct Inst {
  Op op{};
  Type type{};                 // result type (element type for loads; variable type for VarDecl)
  uint32_t result = kNoValue;  // the first value defined by this instruction
  uint32_t nresults = 1;       // LoadVec and register arrays define nresults consecutive values
  Operands args;               // operands (variadic; their meaning is the op's rule)
  Attrs attr;                  // named attributes; the op's table entry says which apply
  Regions regions;
  const OpDef& def() const { return op_def(op); }
};

struct Block {
  std::vector<Inst> insts;
};

inline Block& Regions::operator[](size_t i) { return p_.get()[i]; }
inline const Block& Regions::operator[](size_t i) const { return p_.get()[i]; }
inline Block* Regions::end() { return p_.get() + n_; }
inline const Block* Regions::end() const { return p_.get() + n_; }

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
  bool is_const = false;  // defined by a Const (bits: its bit pattern), for O(1) checks while building
  uint64_t bits = 0;
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
    uint32_t max_registers = 0;   // register cap per thread: .maxnreg (0: none)
    bool fast_math = false;       // .approx forms for div, sqrt, rcp, exp, log, sin, cos, tanh
    // Uses arch-specific instructions (wgmma, setmaxnreg): compiled for sm_90a, never plain
    // sm_90 (set by build() from the verifier; follows from the instructions, so not encoded).
    bool arch_specific = false;
    // Moves registers between warpgroups (setmaxnreg): ptxas honours that only when it
    // compiles the kernel as a whole program, which nvJitLink's separate compilation is not
    // (jit/backend_device.cpp loads such a kernel from its PTX). Set like arch_specific.
    bool reallocates_registers = false;
    std::vector<std::string> comments;  // b.comment() texts (not part of the key)
    std::vector<SpecConstant> specs;
    std::vector<ValueInfo> values;
    // Names of parameter and spec-constant values, for messages and the printer only (never
    // encoded); kept beside `values` so that a value's entry stays small.
    std::vector<std::pair<uint32_t, std::string>> value_names;
    Block body;
    // The name of value `id` ("" when it has none).
    const std::string& value_name(uint32_t id) const;
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
  bool arch_specific() const { return d_->arch_specific; }
  bool reallocates_registers() const { return d_->reallocates_registers; }
  const Hash128& hash() const { return d_->hash; }

  std::string print() const;  // canonical text form

 private:
  std::shared_ptr<const Data> d_;
};

// Implemented in verifier.cpp / encode.cpp / printer.cpp.
struct VerifyResult {
  bool arch_specific = false;  // uses sm_90a-only instructions (Kernel::Data::arch_specific)
  bool setmaxnreg = false;     // Kernel::Data::reallocates_registers
};
VerifyResult verify(const Kernel::Data& k);  // throws UsageError
std::string encode(const Kernel::Data& k);
Hash128 hash_bytes(const void* data, size_t size);
std::string print(const Kernel::Data& k);
std::string print_inst(const Kernel::Data& k, const Inst& i);  // one line (control flow: header only)

}  // namespace kaio::ir
