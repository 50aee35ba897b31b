// Scalar and pointer types of the kernel language, and the map from C++ host types.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kaio/ir/fp8.h"
#include "kaio/ir/half.h"

namespace kaio::ir {

// F16x2 / BF16x2: two halves packed in 32 bits (low half first), computed pairwise.
// E4M3 / E5M2: 8-bit floats (ir/fp8.h), storage types: loaded, stored, moved and converted
// (ir::cast), never computed on. Appended so that older scalar numbers stay.
enum class Scalar : uint8_t { Pred, S8, S16, S32, S64, U8, U16, U32, U64, F16, BF16, F32, F64, F16x2, BF16x2, E4M3, E5M2 };

// Where a pointer points: global memory (kernel parameters), the block's shared memory, or
// a by-value kernel parameter (read-only; a generic address made with cvta.param).
enum class Space : uint8_t { Global, Shared, Param };

// A value's type: a scalar, or a pointer holding scalars of `elem`.
struct Type {
  Scalar elem = Scalar::Pred;
  bool ptr = false;
  bool is_const = false;  // pointee is read-only (only meaningful for pointers)
  Space space = Space::Global;

  static constexpr Type scalar(Scalar s) { return Type{s, false, false, Space::Global}; }
  static constexpr Type pointer(Scalar s, bool c, Space sp = Space::Global) { return Type{s, true, c, sp}; }
  bool operator==(const Type&) const = default;

  bool is_pred() const { return !ptr && elem == Scalar::Pred; }
  bool is_float() const;  // f16 bf16 f32 f64 scalars (not the fp8 storage types)
  bool is_int() const;    // signed or unsigned integer scalars
  bool is_fp8() const { return !ptr && (elem == Scalar::E4M3 || elem == Scalar::E5M2); }
  bool is_signed() const; // signed integers and floats
  bool is_packed() const { return !ptr && (elem == Scalar::F16x2 || elem == Scalar::BF16x2); }
  // A 32-bit word ir::bitcast reinterprets as another (u32, f32, f16x2, bf16x2).
  bool is_bitcast_word() const {
    return !ptr && (elem == Scalar::U32 || elem == Scalar::F32 || elem == Scalar::F16x2 || elem == Scalar::BF16x2);
  }
  bool is_shared_ptr() const { return ptr && space == Space::Shared; }
  std::string str() const;  // "f32", "ptr<const f32>", "ptr<shared f32>"
};

int scalar_bytes(Scalar s);  // pred counts as 1
int scalar_bits(Scalar s);
const char* scalar_name(Scalar s);

template <class T>
struct ScalarOf;
#define KAIO_SCALAR_OF(T, S) \
  template <>                \
  struct ScalarOf<T> {       \
    static constexpr Scalar value = Scalar::S; \
  };
KAIO_SCALAR_OF(bool, Pred)
KAIO_SCALAR_OF(int8_t, S8)
KAIO_SCALAR_OF(int16_t, S16)
KAIO_SCALAR_OF(int32_t, S32)
KAIO_SCALAR_OF(int64_t, S64)
KAIO_SCALAR_OF(uint8_t, U8)
KAIO_SCALAR_OF(uint16_t, U16)
KAIO_SCALAR_OF(uint32_t, U32)
KAIO_SCALAR_OF(uint64_t, U64)
KAIO_SCALAR_OF(kaio::half, F16)
KAIO_SCALAR_OF(kaio::bfloat16, BF16)
KAIO_SCALAR_OF(float, F32)
KAIO_SCALAR_OF(double, F64)
KAIO_SCALAR_OF(kaio::half2, F16x2)
KAIO_SCALAR_OF(kaio::bfloat162, BF16x2)
KAIO_SCALAR_OF(kaio::fp8_e4m3, E4M3)
KAIO_SCALAR_OF(kaio::fp8_e5m2, E5M2)
#undef KAIO_SCALAR_OF

template <class T>
concept HostScalar = requires { ScalarOf<std::remove_cv_t<T>>::value; };

// type_of<float>() == f32, type_of<const float*>() == ptr<const f32>.
template <class T>
constexpr Type type_of() {
  if constexpr (std::is_pointer_v<T>) {
    using E = std::remove_pointer_t<T>;
    static_assert(HostScalar<E>, "kaio: pointer to an unsupported element type");
    return Type::pointer(ScalarOf<std::remove_cv_t<E>>::value, std::is_const_v<E>);
  } else {
    static_assert(HostScalar<T>, "kaio: unsupported scalar type");
    return Type::scalar(ScalarOf<std::remove_cv_t<T>>::value);
  }
}

}  // namespace kaio::ir
