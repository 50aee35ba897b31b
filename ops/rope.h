// Rotary position embedding (RoPE) as a kernel family.
//
// x holds one token per row: `heads` heads of `head_dim` elements each (cols = heads *
// head_dim), rows `stride` elements apart (e.g. the q or k slice of a fused qkv buffer).
// Token t sits at position `position_offset + t` (a KV-cache decode step passes the cache
// length). For the pairs i < rotary_dim / 2 of each head, with angle
// a = position * theta^(-2i / rotary_dim):
//   NeoX (half rotation):   (x[i], x[i + rotary_dim/2]) -> (x0 cos a - x1 sin a, x1 cos a + x0 sin a)
//   GPT-J (interleaved):    (x[2i], x[2i + 1])          -> the same rotation
// Elements past rotary_dim are copied. cos and sin are computed in the kernel (f32, from
// theta) or read from tables of rows = positions, cols = rotary_dim / 2 (f32, f16 or bf16,
// any row stride):
//
//   ops::Rope r{.style = ops::RopeStyle::NeoX, .heads = 32, .head_dim = 128, .position_offset = cache_len};
//   ops::rope(ops::as_rows(q, tokens, 32 * 128, qkv_stride), ops::as_rows(q, tokens, 32 * 128, qkv_stride), r);
//   ops::rope(x, y, ops::as_rows(cos_table, max_pos, 64), ops::as_rows(sin_table, max_pos, 64), r);
//
// Computed in f32, rounded once. In-kernel angles are f32 products position x frequency
// (as PyTorch's f32 tables are): past a few thousand positions their rounding dominates the
// error (about 1.5e-6 x the angle); tables computed in double avoid it. y may be x (in place). f32, f16, bf16; 16-byte accesses
// when the pointers, strides and head sizes allow. Each UsageError names the op and the
// argument and is raised before anything is launched.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "kaio/jit/family.h"
#include "kaio/ops/rows.h"

namespace kaio::ops {

enum class RopeStyle : uint8_t { NeoX, GptJ };

struct Rope {
  RopeStyle style = RopeStyle::NeoX;
  uint32_t heads = 1;
  uint32_t head_dim = 0;
  uint32_t rotary_dim = 0;        // 0: head_dim (must be even)
  float theta = 10000.0f;         // base of the in-kernel frequencies
  uint32_t position_offset = 0;   // position of row 0
};

void rope(const RowTensor& x, const RowTensor& y, const Rope& r, const jit::Stream* stream = nullptr);
void rope(const RowTensor& x, const RowTensor& y, const RowTensor& cos, const RowTensor& sin, const Rope& r,
          const jit::Stream* stream = nullptr);

struct RopeConfig {
  ir::Scalar dtype = ir::Scalar::F32;
  ir::Scalar table = ir::Scalar::Pred;  // the tables' dtype; Pred: cos/sin computed in the kernel
  RopeStyle style = RopeStyle::NeoX;
  uint32_t vec = 1;                     // elements per access
  auto fields() const { return std::tie(dtype, table, style, vec); }
  std::string str() const;
};

// One thread per unit of a head: the pairs of one 16-byte access (or one pair), or one
// copied vector past rotary_dim. Kernel params: const T* x, T* y, const U* cos,
// const U* sin, u32 units_total (tokens x heads x units), u32 units (per head),
// u32 rot_units (the rotation units among them), u32 heads, u32 head_dim, u32 rotary_dim,
// u64 x_stride, u64 y_stride, u64 table_stride, u32 position_offset,
// f32 freq_exp (= -2 log2(theta) / rotary_dim), u32 table_vec (f32 tables 16-byte
// aligned with a row stride of a multiple of 4: vector table loads).
jit::Family<RopeConfig>& rope_family();

}  // namespace kaio::ops
