// The GGUF (ggml) block formats kaio reads and computes on: q8_0, q4_K and q6_K, laid out
// byte for byte as ggml stores them, with their decoders (block -> f32) and quantisers
// (f32 -> block) on the host.
//
//   q8_0  32 elements, 34 bytes:  f16 d | 32 x s8 q            x = d * q
//   q4_K  256 elements, 144 bytes: f16 d | f16 dmin | 12 bytes of 6-bit scales and mins |
//         128 bytes of nibbles. Eight sub-blocks of 32: x = d * sc[j] * q - dmin * m[j]
//   q6_K  256 elements, 210 bytes: 128 bytes ql (low 4 bits) | 64 bytes qh (high 2 bits) |
//         16 x s8 scales | f16 d. Sixteen sub-blocks of 16: x = d * sc[j] * (q - 32)
//
// The quantisers need not make the choices ggml's make (they pick scales more simply),
// but what they write decodes with ggml's decoders, and ggml's blocks decode with these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace kaio::quant {

// ggml's tensor type numbers, as a GGUF file stores them (only those kaio names).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

// What a tensor type's storage is: `block` elements in `bytes` bytes. Known types are
// those whose sizes kaio knows (it can say how many bytes a tensor takes); `computes` is
// set for the types kaio's kernels and decoders handle.
struct TypeInfo {
  const char* name;
  uint32_t block;
  uint32_t bytes;
  bool computes;
};
// The storage of type number `t`, or nullopt for a number kaio does not know.
std::optional<TypeInfo> type_info(uint32_t t);
std::string type_name(uint32_t t);  // "q4_K", or "type 42" for an unknown number

inline constexpr uint32_t kQK = 256;  // elements of a K-quant super-block

struct BlockQ8_0 {
  uint16_t d;     // f16 bits
  int8_t qs[32];
};
struct BlockQ4K {
  uint16_t d;     // f16 bits: the scale of the sub-block scales
  uint16_t dmin;  // f16 bits: the scale of the sub-block mins
  uint8_t scales[12];
  uint8_t qs[kQK / 2];
};
struct BlockQ6K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;     // f16 bits
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4K) == 144 && sizeof(BlockQ6K) == 210);

// Sub-block j (0..7) of a q4_K block: its 6-bit scale and min. Sub-blocks 0-3 keep theirs
// in the low 6 bits of bytes j and j + 4; sub-blocks 4-7 keep their low 4 bits in the two
// nibbles of byte j + 4 and their high 2 bits in the top bits of bytes j - 4 and j.
struct ScaleMin {
  uint8_t scale, min;
};
ScaleMin q4k_scale_min(const uint8_t scales[12], int j);
void q4k_pack_scale_min(uint8_t scales[12], int j, ScaleMin sm);  // the inverse (scale, min < 64)

// Element e (0..255) of a block, as the integer the format stores: q8_0's q (e < 32),
// q4_K's nibble (0..15), q6_K's 6-bit value minus 32 (-32..31).
int q8_0_value(const BlockQ8_0& b, int e);
int q4k_value(const BlockQ4K& b, int e);
int q6k_value(const BlockQ6K& b, int e);

// Decode n elements (a multiple of the type's block) of type t from `src` into `dst`.
// f32, f16, bf16, q8_0, q4_K and q6_K; another type is a UsageError naming `op`.
void dequantize(uint32_t t, const void* src, float* dst, size_t n, const char* op = "dequantize");

// Quantise n elements (a multiple of the block) into `dst` (n / block * bytes bytes).
void quantize_q8_0(const float* src, size_t n, BlockQ8_0* dst);
void quantize_q4_K(const float* src, size_t n, BlockQ4K* dst);
void quantize_q6_K(const float* src, size_t n, BlockQ6K* dst);
// By type number (q8_0, q4_K, q6_K, f32, f16, bf16): the bytes of n elements.
std::string quantize(uint32_t t, const float* src, size_t n);

}  // namespace kaio::quant
