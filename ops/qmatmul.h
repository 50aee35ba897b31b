// Quantized matmul on tensor cores (docs/quantized-matmul.md):
//
//   W8A8   C = scale_a[row] * scale_b[col] * (A . B^T) + bias[col], A (m x k) and B (n x k,
//          a Linear weight) s8, mma.sync m16n8k32 s8 -> s32 accumulate; or the raw s32
//          product (out = s32, like torch._int_mm).
//   W4A16  Y = X . dequant(W) + bias, X (m x k) f16 / bf16, W (k x n) 4-bit with f16 / bf16
//          scales and optional zero points per group of 32, 64 or 128 rows (GPTQ / AWQ);
//          dequantised in registers by the magic-number trick, then wgmma on sm_90 (m > 16,
//          the weights as A from registers), mma.sync f16 / bf16 elsewhere (m > 16) or a
//          weight-streaming kernel (m <= 16).
//   QKV    both formats with three weights, three outputs and one activation, one launch
//          (int4 on sm_90 with m > 16: one wgmma launch per part).
//
// Host helpers make the inputs: quantize_int8 (symmetric, one scale per row of a row-major
// matrix: per column of B = per row of the Linear weight, or per row of activations) and
// quantize_int4 / pack_int4 (the kernel's packed layout, below). Bad shapes are UsageErrors
// naming the op and the argument.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kaio/ir/types.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

// ---------------- W8A8 ----------------

// The scales of an int8 matmul: f32 device arrays (0: 1.0). `a` holds one value (per
// tensor) or m (a_per_row); `b` one or n (b_per_col). bias: n f32 (0: none).
struct Int8Scales {
  uint64_t a = 0, b = 0;
  bool a_per_row = false, b_per_col = false;
  uint64_t bias = 0;
};

// A is m x k s8 row-major, B is n x k s8 row-major (K-major: a Linear weight), C is m x n
// row-major of `out`: s32 (the raw product; scales and bias must be absent), f16, bf16 or
// f32. k a multiple of 16 (16-byte rows); A, B and C 16-byte aligned.
struct Int8Problem {
  uint32_t m = 0, n = 0, k = 0;
  ir::Scalar out = ir::Scalar::F16;
  int tile = -1;  // -1: chosen by the shape; else an index of matmul_int8_tiles() (tests, benches)
};
// The block tiles of the int8 kernels ("128x128_w64x32_s3", ...).
std::vector<std::string> matmul_int8_tiles();

void matmul_int8(uint64_t a, uint64_t b, uint64_t c, const Int8Problem& p, const Int8Scales& s = {},
                 const jit::Stream* stream = nullptr);

// Q, K and V of one activation in one launch: C_i = A . B_i^T, each with its own n, scales
// of B and bias (the activation's scales are shared). Out and k as for matmul_int8.
struct Int8Part {
  uint64_t b = 0, c = 0;
  uint32_t n = 0;
  uint64_t scale_b = 0, bias = 0;
};
void matmul_int8_qkv(uint64_t a, const Int8Part (&parts)[3], uint32_t m, uint32_t k, ir::Scalar out,
                     uint64_t scale_a = 0, bool a_per_row = false, bool b_per_col = false,
                     const jit::Stream* stream = nullptr);

// ---------------- W4A16 ----------------

// Packed 4-bit weights of a k x n matrix W (y = x . W; a Linear weight transposed):
//   q       u32 [k / 8][n]: word (r, j) holds W(8r .. 8r + 7, j), element 8r + i in nibble
//           kInt4Nibble[i] (the order that lets two elements be decoded by one and / or)
//   scales  f16 or bf16 (the activation's type) [k / group][n]
//   zeros   u8 [k / group][n], 0..15; 0 (no zeros): 8 for every group (symmetric)
// W(r, j) = (q - zero) * scale, rounded once to the activation's type.
inline constexpr uint32_t kInt4Nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
struct Int4Weights {
  uint64_t q = 0, scales = 0, zeros = 0;
  uint32_t k = 0, n = 0, group = 128;
};

// Y (m x n row-major, the activation's type) = X (m x k row-major, f16 or bf16) . W + bias
// (n of the activation's type; 0: none). n a multiple of 8, k of the group (32, 64, 128);
// X, Y and the weights' arrays 16-byte aligned.
void matmul_int4(uint64_t x, const Int4Weights& w, uint64_t y, uint32_t m, ir::Scalar dtype, uint64_t bias = 0,
                 const jit::Stream* stream = nullptr);

// Three weights (the same k and group, each its own n), three outputs, one launch.
struct Int4Part {
  Int4Weights w;
  uint64_t y = 0, bias = 0;
};
void matmul_int4_qkv(uint64_t x, const Int4Part (&parts)[3], uint32_t m, ir::Scalar dtype,
                     const jit::Stream* stream = nullptr);

// ---------------- host helpers ----------------

// Symmetric int8 of a row-major rows x cols matrix, one f32 scale per row: q = round(x /
// scale) with scale = max |row| / 127 (1 for a zero row). For B give the Linear weight
// (n x k): its scales are per column of C; for A the activations (per row).
struct Int8Quantized {
  std::vector<int8_t> q;
  std::vector<float> scale;
};
Int8Quantized quantize_int8(std::span<const float> x, uint32_t rows, uint32_t cols);

// 4-bit GPTQ-style weights on the host: values 0..15, scales as the bits of f16 or bf16.
struct Int4Host {
  std::vector<uint32_t> q;        // packed, [k / 8][n] (pack_int4)
  std::vector<uint16_t> scales;   // [k / group][n]
  std::vector<uint8_t> zeros;     // [k / group][n]; empty: symmetric (8)
  uint32_t k = 0, n = 0, group = 128;
  ir::Scalar dtype = ir::Scalar::F16;
};
// Quantises W (k x n row-major f32) per group of `group` rows and column: asymmetric
// (zero points, scale = (max - min) / 15) or symmetric (zero 8, scale = max |w| / 7.5).
// UsageError (op "quantize_int4") when k is not a multiple of the group or n of 8.
Int4Host quantize_int4(std::span<const float> w, uint32_t k, uint32_t n, uint32_t group, ir::Scalar dtype,
                       bool zero_points);
// The kernel's layout of 4-bit values v (k x n row-major, each 0..15): word (r, j) holds
// v(8r + i, j) in nibble kInt4Nibble[i].
std::vector<uint32_t> pack_int4(std::span<const uint8_t> v, uint32_t k, uint32_t n);
// The 4-bit value of W(r, j) from the packed words (the inverse of pack_int4).
uint8_t int4_at(std::span<const uint32_t> q, uint32_t n, uint32_t r, uint32_t j);
// The dequantised W (k x n) as the kernels compute it: (q - zero) * scale rounded once to
// the 16-bit type, returned as f32 (exact). round = false: (q - zero) * scale unrounded (exact
// in f32), the weights of the calls that apply the scale to their f32 sums
// (int4_exact_products in qmatmul_int4_kernels.h; docs/quantized-matmul.md).
std::vector<float> dequantize_int4(const Int4Host& w, bool round = true);

// The families (declared configs for kaio-precompile and tests): int8 by (tile, out, scale
// kinds, bias, parts), int4 by (path, dtype, zeros, bias, parts).
jit::FamilyBase& matmul_int8_family();
jit::FamilyBase& matmul_int4_family();

}  // namespace kaio::ops
