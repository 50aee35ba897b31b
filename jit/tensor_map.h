// TMA tensor maps (sm_90+): the 128-byte descriptor a kernel's cp.async.bulk.tensor reads,
// made on the host by the driver's cuTensorMapEncodeTiled. kaio checks every parameter
// against the driver's documented limits first, so that a mistake is a UsageError naming
// the argument rather than a bare CUDA_ERROR_INVALID_VALUE. No CUDA header needed.
//
//   jit::TensorMapTiled t{.dtype = ir::Scalar::F16, .global_address = a.device_address(),
//                         .global_dims = {K, M}, .global_strides = {K * 2},
//                         .box_dims = {64, 128}, .swizzle = jit::TensorMapSwizzle::B128};
//   jit::TensorMap map = jit::encode_tensor_map_tiled(t);
//   k.launch(cfg, map, ...);   // a 128-byte by-value parameter
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "kaio/ir/types.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::jit {

enum class TensorMapInterleave : uint8_t { None, B16, B32 };
enum class TensorMapSwizzle : uint8_t { None, B32, B64, B128 };
enum class TensorMapL2Promotion : uint8_t { None, B64, B128, B256 };
enum class TensorMapOobFill : uint8_t { Zero, NanRequestZeroFma };

// The parameters of cuTensorMapEncodeTiled. Dimension 0 is the innermost (contiguous) one.
struct TensorMapTiled {
  ir::Scalar dtype = ir::Scalar::F32;  // u8, u16, u32, s32, u64, s64, f16, bf16, f32, f64
  uint64_t global_address = 0;         // device address; 16-byte aligned (32 with B32 interleave)
  std::vector<uint64_t> global_dims;   // rank 1..5 entries, each 1..2^32
  std::vector<uint64_t> global_strides;  // rank - 1 entries, in bytes: stride of dims 1..rank-1
  std::vector<uint32_t> box_dims;        // rank entries, each 1..256
  std::vector<uint32_t> element_strides;  // rank entries, each 1..8; empty: all 1
  TensorMapInterleave interleave = TensorMapInterleave::None;
  TensorMapSwizzle swizzle = TensorMapSwizzle::None;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::None;
  TensorMapOobFill oob_fill = TensorMapOobFill::Zero;
};

// The opaque CUtensorMap, 64-byte aligned as the driver requires.
struct alignas(64) TensorMap {
  std::array<uint8_t, 128> bytes{};
};

// Throws UsageError("", "encode_tensor_map_tiled", "<argument>: ...") for a parameter the
// driver would reject; nothing is asked of the driver then.
void validate_tensor_map_tiled(const TensorMapTiled& t);
// Validates, then encodes through the driver (ToolError when there is no driver, or when it
// lacks cuTensorMapEncodeTiled, i.e. older than CUDA 12.0).
TensorMap encode_tensor_map_tiled(const TensorMapTiled& t);

}  // namespace kaio::jit
