#include "kaio/ir/types.h"

namespace kaio::ir {

bool Type::is_float() const {
  return !ptr && (elem == Scalar::F16 || elem == Scalar::BF16 || elem == Scalar::F32 ||
                  elem == Scalar::F64);
}

bool Type::is_int() const { return !ptr && !is_float() && !is_packed() && !is_fp8() && elem != Scalar::Pred; }

bool Type::is_signed() const {
  if (ptr) return false;
  switch (elem) {
    case Scalar::S8: case Scalar::S16: case Scalar::S32: case Scalar::S64:
      return true;
    default:
      return is_float();
  }
}

int scalar_bytes(Scalar s) {
  switch (s) {
    case Scalar::Pred: case Scalar::S8: case Scalar::U8: case Scalar::E4M3: case Scalar::E5M2: return 1;
    case Scalar::S16: case Scalar::U16: case Scalar::F16: case Scalar::BF16: return 2;
    case Scalar::S32: case Scalar::U32: case Scalar::F32: case Scalar::F16x2: case Scalar::BF16x2: return 4;
    case Scalar::S64: case Scalar::U64: case Scalar::F64: return 8;
  }
  return 0;
}

int scalar_bits(Scalar s) { return s == Scalar::Pred ? 1 : 8 * scalar_bytes(s); }

const char* scalar_name(Scalar s) {
  switch (s) {
    case Scalar::Pred: return "pred";
    case Scalar::S8: return "s8";
    case Scalar::S16: return "s16";
    case Scalar::S32: return "s32";
    case Scalar::S64: return "s64";
    case Scalar::U8: return "u8";
    case Scalar::U16: return "u16";
    case Scalar::U32: return "u32";
    case Scalar::U64: return "u64";
    case Scalar::F16: return "f16";
    case Scalar::BF16: return "bf16";
    case Scalar::F32: return "f32";
    case Scalar::F64: return "f64";
    case Scalar::F16x2: return "f16x2";
    case Scalar::BF16x2: return "bf16x2";
    case Scalar::E4M3: return "e4m3";
    case Scalar::E5M2: return "e5m2";
  }
  return "?";
}

std::string Type::str() const {
  if (!ptr) return scalar_name(elem);
  return std::string("ptr<") + (space == Space::Shared ? "shared " : space == Space::Param ? "param " : "") + (is_const ? "const " : "") +
         scalar_name(elem) + ">";
}

}  // namespace kaio::ir
