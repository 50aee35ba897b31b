#include "kaio/jit/tensor_map.h"

#include <cstring>
#include <string>

#include "kaio/jit/driver.h"

namespace kaio::jit {

namespace detail {
Arg make_arg(const TensorMap& m) { return make_bytes_arg(m.bytes.data(), m.bytes.size()); }
}  // namespace detail

namespace {

[[noreturn]] void bad(const std::string& arg, const std::string& why) {
  throw UsageError("", "encode_tensor_map_tiled", arg + ": " + why);
}

// The driver's data type for an element type; false when TMA has none.
bool tma_type(ir::Scalar s, CUtensorMapDataType& t) {
  switch (s) {
    case ir::Scalar::U8: t = CU_TENSOR_MAP_DATA_TYPE_UINT8; return true;
    case ir::Scalar::E4M3: case ir::Scalar::E5M2: t = CU_TENSOR_MAP_DATA_TYPE_UINT8; return true;  // bytes to TMA
    case ir::Scalar::U16: t = CU_TENSOR_MAP_DATA_TYPE_UINT16; return true;
    case ir::Scalar::U32: t = CU_TENSOR_MAP_DATA_TYPE_UINT32; return true;
    case ir::Scalar::S32: t = CU_TENSOR_MAP_DATA_TYPE_INT32; return true;
    case ir::Scalar::U64: t = CU_TENSOR_MAP_DATA_TYPE_UINT64; return true;
    case ir::Scalar::S64: t = CU_TENSOR_MAP_DATA_TYPE_INT64; return true;
    case ir::Scalar::F16: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; return true;
    case ir::Scalar::BF16: t = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; return true;
    case ir::Scalar::F32: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; return true;
    case ir::Scalar::F64: t = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; return true;
    default: return false;
  }
}

std::string idx(const char* name, size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

}  // namespace

// The limits of cuTensorMapEncodeTiled as documented in cuda.h (CUDA 12/13).
void validate_tensor_map_tiled(const TensorMapTiled& t) {
  CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  if (!tma_type(t.dtype, dt))
    bad("dtype", std::string(ir::scalar_name(t.dtype)) + " has no TMA data type (u8, u16, u32, s32, u64, s64, f16, bf16, f32, f64)");
  const uint64_t esize = static_cast<uint64_t>(ir::scalar_bytes(t.dtype));
  const size_t rank = t.global_dims.size();
  const bool interleaved = t.interleave != TensorMapInterleave::None;
  if (rank < 1 || rank > 5) bad("global_dims", "rank " + std::to_string(rank) + " is not in 1..5");
  if (interleaved && rank < 3) bad("global_dims", "an interleaved layout needs rank >= 3, got " + std::to_string(rank));
  const uint64_t align = t.interleave == TensorMapInterleave::B32 ? 32 : 16;
  if (t.global_address == 0) bad("global_address", "is null");
  if (t.global_address % align)
    bad("global_address", "must be " + std::to_string(align) + "-byte aligned (it is " +
                              std::to_string(t.global_address % align) + " bytes past a boundary)");
  for (size_t i = 0; i < rank; ++i)
    if (t.global_dims[i] == 0 || t.global_dims[i] > (uint64_t(1) << 32))
      bad(idx("global_dims", i), std::to_string(t.global_dims[i]) + " is not in 1..2^32");
  if (t.global_strides.size() != rank - 1)
    bad("global_strides", "needs rank - 1 = " + std::to_string(rank - 1) + " entries (bytes between consecutive "
                          "indices of dims 1.." + std::to_string(rank - 1) + "), got " +
                          std::to_string(t.global_strides.size()));
  for (size_t i = 0; i + 1 < rank; ++i) {
    uint64_t s = t.global_strides[i];
    if (s % align) bad(idx("global_strides", i), std::to_string(s) + " bytes is not a multiple of " + std::to_string(align));
    if (s >= (uint64_t(1) << 40)) bad(idx("global_strides", i), std::to_string(s) + " bytes is not below 2^40");
    // Each stride spans the dimension below it (strides are bytes, not elements).
    uint64_t below = i == 0 ? t.global_dims[0] * esize : t.global_dims[i] * t.global_strides[i - 1];
    if (s < below)
      bad(idx("global_strides", i), std::to_string(s) + " bytes is less than the " + std::to_string(below) +
                                        " bytes the dimension below spans (strides are in bytes)");
  }
  if (t.box_dims.size() != rank)
    bad("box_dims", "needs " + std::to_string(rank) + " entries, got " + std::to_string(t.box_dims.size()));
  for (size_t i = 0; i < rank; ++i)
    if (t.box_dims[i] == 0 || t.box_dims[i] > 256)
      bad(idx("box_dims", i), std::to_string(t.box_dims[i]) + " is not in 1..256");
  const uint64_t inner = t.box_dims[0] * esize;
  if (!interleaved && inner % 16)
    bad("box_dims[0]", std::to_string(t.box_dims[0]) + " elements are " + std::to_string(inner) +
                           " bytes, not a multiple of 16");
  if (!t.element_strides.empty()) {
    if (t.element_strides.size() != rank)
      bad("element_strides", "needs " + std::to_string(rank) + " entries (or none), got " +
                                 std::to_string(t.element_strides.size()));
    for (size_t i = 0; i < rank; ++i)
      if (t.element_strides[i] == 0 || t.element_strides[i] > 8)
        bad(idx("element_strides", i), std::to_string(t.element_strides[i]) + " is not in 1..8");
  }
  if (t.interleave == TensorMapInterleave::B32 && t.swizzle != TensorMapSwizzle::B32)
    bad("swizzle", "a 32-byte interleave needs the 32-byte swizzle");
  if (!interleaved && t.swizzle != TensorMapSwizzle::None) {
    uint64_t span = t.swizzle == TensorMapSwizzle::B32 ? 32 : t.swizzle == TensorMapSwizzle::B64 ? 64 : 128;
    if (inner > span)
      bad("box_dims[0]", std::to_string(inner) + " bytes exceed the " + std::to_string(span) + "-byte swizzle span");
  }
  if (t.oob_fill == TensorMapOobFill::NanRequestZeroFma && !ir::Type::scalar(t.dtype).is_float())
    bad("oob_fill", "the NaN fill needs a floating-point dtype, not " + std::string(ir::scalar_name(t.dtype)));
}

TensorMap encode_tensor_map_tiled(const TensorMapTiled& t) {
  validate_tensor_map_tiled(t);
  const driver::Api& a = driver::api();
  driver::ensure_context();  // the driver needs a current context (CUDA_ERROR_INVALID_CONTEXT otherwise)
  auto encode = driver::require(a.tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
  CUtensorMapDataType dt = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  tma_type(t.dtype, dt);
  const size_t rank = t.global_dims.size();
  cuuint64_t dims[5], strides[5];
  cuuint32_t box[5], estr[5];
  for (size_t i = 0; i < rank; ++i) {
    dims[i] = t.global_dims[i];
    box[i] = t.box_dims[i];
    estr[i] = t.element_strides.empty() ? 1 : t.element_strides[i];
    if (i + 1 < rank) strides[i] = t.global_strides[i];
  }
  CUtensorMap m;
  driver::check(encode(&m, dt, static_cast<cuuint32_t>(rank), reinterpret_cast<void*>(t.global_address), dims, strides, box,
                       estr, static_cast<CUtensorMapInterleave>(t.interleave), static_cast<CUtensorMapSwizzle>(t.swizzle),
                       static_cast<CUtensorMapL2promotion>(t.l2_promotion),
                       static_cast<CUtensorMapFloatOOBfill>(t.oob_fill)),
                "cuTensorMapEncodeTiled");
  static_assert(sizeof(CUtensorMap) == sizeof(TensorMap::bytes));
  TensorMap out;
  std::memcpy(out.bytes.data(), &m, sizeof m);
  return out;
}

}  // namespace kaio::jit
