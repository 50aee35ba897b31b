// The mma.sync instruction shapes as data: one descriptor per shape (sizes, element and
// register types, the PTX spelling) and its fragment layouts, i.e. which lane and which
// register (and which element packed inside it) holds which (row, col) of A (M x K, row
// major), B (K x N, "col": indexed as K rows, N columns) and C/D (M x N). The interpreter
// executes mma_sync through these descriptors, tests build their fragments with them and
// kernels use them to store accumulators; nothing else spells a fragment layout out.
//
// Every layout of the four shapes is affine in
//   g = lane / 4 (groupID), t = lane % 4 (threadID_in_group), e (element inside the
//   register, low bits first), r0 = reg & 1, r1 = reg >> 1
// so each coordinate is stored as five coefficients (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type", "... for mma.m16n8k8", "... for mma.m16n8k32"):
//
//   m16n8k16 f16/bf16  A: row g + 8 r0,  col 2t + e + 8 r1   B: row 2t + e + 8 r0,  col g
//   m16n8k8  tf32      A: row g + 8 r0,  col t + 4 r1        B: row t + 4 r0,       col g
//   m16n8k32 s8        A: row g + 8 r0,  col 4t + e + 16 r1  B: row 4t + e + 16 r0, col g
//   all                C: row g + 8 r1,  col 2t + r0         (one element per register)
#pragma once

#include <cstdint>

#include "kaio/ir/op_table.h"
#include "kaio/ir/types.h"

namespace kaio::ir {

// coordinate = g*cg + t*ct + e*ce + (reg & 1)*c0 + (reg >> 1)*c1
struct FragAxis {
  uint8_t cg, ct, ce, c0, c1;
  constexpr int at(int lane, int reg, int elem) const {
    return (lane >> 2) * cg + (lane & 3) * ct + elem * ce + (reg & 1) * c0 + (reg >> 1) * c1;
  }
};

// One operand's fragment: `regs` 32-bit registers per lane, each holding `per_reg` elements.
struct FragLayout {
  int regs;
  int per_reg;
  FragAxis row, col;
  constexpr int row_of(int lane, int reg, int elem = 0) const { return row.at(lane, reg, elem); }
  constexpr int col_of(int lane, int reg, int elem = 0) const { return col.at(lane, reg, elem); }
};

struct MmaShape {
  MmaKind kind;
  const char* name;    // "m16n8k16.f16"
  const char* ptx;     // the instruction: "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
  int m, n, k;
  Scalar in;           // the A/B element type (F32 stands for tf32: f32 values whose low 13 bits are ignored)
  Scalar frag;         // the type of an A/B fragment register: f16x2, bf16x2, or u32 (tf32 also f32)
  Scalar acc;          // the accumulator element type: f32 or s32
  FragLayout a, b, c;
  int min_sm;
};

inline constexpr FragLayout kMmaC{4, 1, {1, 0, 0, 0, 8}, {0, 2, 0, 1, 0}};

inline constexpr MmaShape kMmaShapes[] = {
    {MmaKind::F16, "m16n8k16.f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, 8, 16, Scalar::F16,
     Scalar::F16x2, Scalar::F32, {4, 2, {1, 0, 0, 8, 0}, {0, 2, 1, 0, 8}}, {2, 2, {0, 2, 1, 8, 0}, {1, 0, 0, 0, 0}},
     kMmaC, 80},
    {MmaKind::BF16, "m16n8k16.bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 16, 8, 16, Scalar::BF16,
     Scalar::BF16x2, Scalar::F32, {4, 2, {1, 0, 0, 8, 0}, {0, 2, 1, 0, 8}}, {2, 2, {0, 2, 1, 8, 0}, {1, 0, 0, 0, 0}},
     kMmaC, 80},
    {MmaKind::TF32, "m16n8k8.tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", 16, 8, 8, Scalar::F32,
     Scalar::U32, Scalar::F32, {4, 1, {1, 0, 0, 8, 0}, {0, 1, 0, 0, 4}}, {2, 1, {0, 1, 0, 4, 0}, {1, 0, 0, 0, 0}},
     kMmaC, 80},
    {MmaKind::S8, "m16n8k32.s8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", 16, 8, 32, Scalar::S8,
     Scalar::U32, Scalar::S32, {4, 4, {1, 0, 0, 8, 0}, {0, 4, 1, 0, 16}}, {2, 4, {0, 4, 1, 16, 0}, {1, 0, 0, 0, 0}},
     kMmaC, 80},
};

constexpr const MmaShape& mma_shape(MmaKind k) { return kMmaShapes[static_cast<int>(k)]; }

// ldmatrix: matrix j of an .x1/.x2/.x4 load takes its 8 row addresses from lanes 8j..8j+7
// (lane 8j + i gives row i). Each lane receives, in register j, 32 bits of row lane / 4:
// the 16-bit elements 2 (lane % 4) and 2 (lane % 4) + 1 (low half first). With .trans the
// matrix is transposed first: lane gets elements (row 2 (lane % 4) + h, col lane / 4).
struct LdmatrixLayout {
  static constexpr int row_of(int lane, int half, bool trans) { return trans ? 2 * (lane & 3) + half : lane >> 2; }
  static constexpr int col_of(int lane, int half, bool trans) { return trans ? lane >> 2 : 2 * (lane & 3) + half; }
  static constexpr int address_lane(int matrix, int row) { return 8 * matrix + row; }
};

}  // namespace kaio::ir
