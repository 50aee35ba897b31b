#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/ir/kernel.h"

namespace kaio::ir {

const char* op_name(Op op) {
  switch (op) {
    case Op::Param: return "param";
    case Op::Const: return "const";
    case Op::SReg: return "sreg";
    case Op::Neg: return "neg";
    case Op::Not: return "not";
    case Op::Abs: return "abs";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Rem: return "rem";
    case Op::Min: return "min";
    case Op::Max: return "max";
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Xor: return "xor";
    case Op::Shl: return "shl";
    case Op::Shr: return "shr";
    case Op::Eq: return "eq";
    case Op::Ne: return "ne";
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    case Op::Ge: return "ge";
    case Op::Select: return "select";
    case Op::Fma: return "fma";
    case Op::Sqrt: return "sqrt";
    case Op::Rsqrt: return "rsqrt";
    case Op::Exp: return "exp";
    case Op::Log: return "log";
    case Op::Tanh: return "tanh";
    case Op::Sin: return "sin";
    case Op::Cos: return "cos";
    case Op::Rcp: return "rcp";
    case Op::Exp2: return "exp2";
    case Op::Log2: return "log2";
    case Op::Erf: return "erf";
    case Op::Floor: return "floor";
    case Op::Ceil: return "ceil";
    case Op::Round: return "round";
    case Op::Trunc: return "trunc";
    case Op::Rint: return "rint";
    case Op::Pow: return "pow";
    case Op::CopySign: return "copysign";
    case Op::IsNan: return "isnan";
    case Op::IsInf: return "isinf";
    case Op::LoadVec: return "load_vec";
    case Op::StoreVec: return "store_vec";
    case Op::SharedAlloc: return "shared";
    case Op::DynamicShared: return "dynamic_shared";
    case Op::AtomicRmw: return "atomic";
    case Op::AtomicCas: return "atomic_cas";
    case Op::Barrier: return "barrier";
    case Op::Fence: return "fence";
    case Op::Shfl: return "shfl";
    case Op::Vote: return "vote";
    case Op::Comment: return "comment";
    case Op::Pack: return "pack";
    case Op::Unpack: return "unpack";
    case Op::Cast: return "cast";
    case Op::Load: return "load";
    case Op::Store: return "store";
    case Op::VarDecl: return "var";
    case Op::VarRead: return "read";
    case Op::VarWrite: return "write";
    case Op::If: return "if";
    case Op::For: return "for";
    case Op::While: return "while";
    case Op::Return: return "return";
  }
  return "?";
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
