// Builder-side layout helpers: where element (row, col) of a shared-memory tile lives, and
// which (row, col) of an mma operand a lane's fragment register holds. Every tensor-core
// kernel addresses its tiles through these, so cp.async writes and ldmatrix reads agree.
//
//   auto sa = b.shared<half>(ir::SmemLayout::swizzled(64, ir::Scalar::F16).elements(128), 128);
//   ir::SmemLayout la = ir::SmemLayout::swizzled(64, ir::Scalar::F16);   // 128-byte rows
//   b.cp_async(sa, la.index(row, col), a, g_index, 16);                   // 16-byte chunks
//   auto frag = b.ldmatrix(sa, la.index(lane % 16u, (lane / 16u) * 8u), 4);
//
// Layouts (indices are element indices for ptr[index]; a row holds `cols` elements):
//   row_major(cols)          row * cols + col
//   padded(cols, pad)        row * (cols + pad) + col: consecutive rows start in different
//                            banks (pad 8 halves = 16 bytes keeps 16-byte chunks aligned)
//   swizzled(cols, elem, S)  the row-major byte offset o with its 16-byte chunk number XORed
//                            with the 128-byte line number: o ^ (((o >> 7) & (S/16 - 1)) << 4),
//                            S = 32, 64 or 128 bytes (CuTe's Swizzle<1|2|3, 4, 3>, the
//                            pattern of TMA's and wgmma's 32/64/128-byte swizzle modes).
//                            16-byte chunks stay whole and inside their 128-byte line, so the
//                            tile needs rows * cols * sizeof(elem) to be a multiple of 128.
//   line_swizzled(cols, elem) rows of whole 128-byte lines: the 16-byte chunk c of row r goes
//                            to chunk (c % 8) ^ (r % 8) of its own line. For 128-byte rows it
//                            is swizzled(cols, elem, 128); for longer rows (256 bytes and up)
//                            it keeps eight consecutive rows' chunk j in eight different bank
//                            groups, where swizzled's line-number key repeats every 4 (or
//                            fewer) rows and an 8-row ldmatrix collides two ways. The copies
//                            of one 128-byte global line land in one 128-byte shared line,
//                            so the L2 sees the line in one request (cp.async reaches it in
//                            the groups of lanes the shared side takes together).
#pragma once

#include <cstdint>

#include "kaio/ir/builder.h"

namespace kaio::ir {

class SmemLayout {
 public:
  enum class Kind : uint8_t { RowMajor, Padded, Swizzled, LineSwizzled };

  static SmemLayout row_major(uint32_t cols);
  static SmemLayout padded(uint32_t cols, uint32_t pad);
  static SmemLayout swizzled(uint32_t cols, Scalar elem, uint32_t swizzle_bytes = 128);
  static SmemLayout line_swizzled(uint32_t cols, Scalar elem);

  Kind kind() const { return kind_; }
  uint32_t cols() const { return cols_; }
  uint32_t row_stride() const { return stride_; }  // elements from one row to the next
  // Elements to allocate for `rows` rows (UsageError when a swizzled tile is not a whole
  // number of 128-byte lines).
  uint32_t elements(uint32_t rows) const;
  // The element index of (row, col): host integers, or u32 kernel values.
  uint32_t index(uint32_t row, uint32_t col) const;
  Value index(Value row, Value col) const;
  template <Operand R, Operand C>
    requires(ExprHandle<R> || ExprHandle<C>)
  Value index(const R& row, const C& col) const {
    auto r = KernelBuilder::make_operand(row), c = KernelBuilder::make_operand(col);
    KernelBuilder* b = r.is_value ? r.value.builder() : c.value.builder();
    return index(as_u32(*b, r), as_u32(*b, c));
  }
  // LineSwizzled only: index(row, col) == row * row_stride() + (col ^ xor_key(row)). The key
  // is row % 8 in chunk units, so it touches only the chunk bits inside a 128-byte line: a
  // column taken apart as line * (128 / element bytes) + rest swizzles only `rest`, and an
  // unrolled walk over lines adds constants to a (rest ^ key) computed once per row class.
  Value xor_key(Value row) const;

 private:
  SmemLayout(Kind k, uint32_t cols, uint32_t stride, uint32_t esize, uint32_t mask)
      : kind_(k), cols_(cols), stride_(stride), esize_(esize), mask_(mask) {}
  static Value as_u32(KernelBuilder& b, const KernelBuilder::AnyOperand& x);
  Kind kind_;
  uint32_t cols_, stride_;
  uint32_t esize_ = 1;  // element bytes (swizzled)
  uint32_t mask_ = 0;   // swizzle: line-number bits XORed into the chunk number
};

// The (row, col) that register `reg`, element `elem` of a lane's fragment holds, for a lane
// given as a kernel value (b.lane_id()): e.g. where to store accumulator acc[r].
Value frag_row(const FragLayout& f, Value lane, int reg, int elem = 0);
Value frag_col(const FragLayout& f, Value lane, int reg, int elem = 0);

}  // namespace kaio::ir
