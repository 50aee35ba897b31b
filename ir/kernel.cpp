#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {
using enum Family;
constexpr OpDef kOps[] = {
#define KAIO_OP(E, NAME, RULE, TYPES, EFFECTS, ATTRS, FAMILY, MINSM) \
  OpDef{Op::E, NAME, OpRule::RULE, static_cast<uint16_t>(TYPES), static_cast<uint16_t>(EFFECTS), static_cast<uint32_t>(ATTRS), FAMILY, MINSM},
#include "kaio/ir/ops.def"
#undef KAIO_OP
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kOpCount);
constexpr bool table_in_order() {
  for (int i = 0; i < kOpCount; ++i)
    if (static_cast<int>(kOps[i].op) != i) return false;
  return true;
}
static_assert(table_in_order(), "kOps is indexed by Op");
}  // namespace

const OpDef& op_def(Op op) {
  auto i = static_cast<size_t>(op);
  KAIO_ASSERT(i < static_cast<size_t>(kOpCount), "op number " + std::to_string(i) + " has no table entry");
  return kOps[i];
}

const char* op_name(Op op) { return op_def(op).name; }

uint16_t type_class(Type t) {
  if (t.ptr) return 0;
  switch (t.elem) {
    case Scalar::Pred: return TC::Pred;
    case Scalar::S8: case Scalar::S16: case Scalar::S32: case Scalar::S64: return TC::SInt;
    case Scalar::U8: case Scalar::U16: case Scalar::U32: case Scalar::U64: return TC::UInt;
    case Scalar::F16: case Scalar::BF16: return TC::Half;
    case Scalar::F32: return TC::F32;
    case Scalar::F64: return TC::F64;
    case Scalar::F16x2: case Scalar::BF16x2: return TC::Packed;
    case Scalar::E4M3: case Scalar::E5M2: return TC::Fp8;
  }
  return 0;
}

std::string describe_classes(uint16_t m) {
  std::string parts[8];
  int n = 0;
  if (m & TC::Pred) parts[n++] = "pred";
  if ((m & TC::Int) == TC::Int) parts[n++] = "integer";
  else if (m & TC::SInt) parts[n++] = "signed integer";
  else if (m & TC::UInt) parts[n++] = "unsigned integer";
  if (m & TC::Half) parts[n++] = "f16/bf16";
  if (m & TC::F32) parts[n++] = "f32";
  if (m & TC::F64) parts[n++] = "f64";
  if (m & TC::Packed) parts[n++] = "f16x2/bf16x2";
  if (m & TC::Fp8) parts[n++] = "e4m3/e5m2";
  std::string s;
  for (int i = 0; i < n; ++i) s += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + parts[i];
  return s;
}

const char* sreg_name(SpecialReg r) {
  static const char* names[] = {"tid.x",   "tid.y",   "tid.z",    "ntid.x",   "ntid.y",   "ntid.z",
                                "ctaid.x", "ctaid.y", "ctaid.z", "nctaid.x", "nctaid.y", "nctaid.z",
                                "laneid"};
  return names[static_cast<int>(r)];
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::Default: return "default";
    case Rounding::Rn: return "rn";
    case Rounding::Rz: return "rz";
    case Rounding::Rm: return "rm";
    case Rounding::Rp: return "rp";
  }
  return "?";
}

std::string Hash128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

Hash128 hash_bytes(const void* data, size_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  return Hash128{h.low64, h.high64};
}

std::string Kernel::print() const { return ir::print(*d_); }

}  // namespace kaio::ir

namespace kaio::ir {

void Regions::Free::operator()(Block* b) const { delete[] b; }

Regions::~Regions() = default;

Regions& Regions::operator=(const Regions& o) {
  if (this == &o) return *this;
  resize(0);
  resize(o.n_);
  for (uint32_t i = 0; i < o.n_; ++i) p_.get()[i] = o.p_.get()[i];
  return *this;
}

void Regions::resize(size_t n) {
  if (n == n_) return;
  std::unique_ptr<Block, Free> p(n ? new Block[n] : nullptr);
  for (size_t i = 0; i < std::min<size_t>(n, n_); ++i) p.get()[i] = std::move(p_.get()[i]);
  p_ = std::move(p);
  n_ = static_cast<uint32_t>(n);
}

const std::string& Kernel::Data::value_name(uint32_t id) const {
  static const std::string none;
  for (const auto& [v, name] : value_names)
    if (v == id) return name;
  return none;
}

}  // namespace kaio::ir
