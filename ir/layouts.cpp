// Shared-memory tile layouts and mma fragment coordinates (layouts.h).
#include "kaio/ir/layouts.h"

#include <bit>
#include <string>

namespace kaio::ir {

namespace {
[[noreturn]] void bad(const std::string& msg) { throw UsageError("", "smem_layout", msg); }
}  // namespace

SmemLayout SmemLayout::row_major(uint32_t cols) {
  if (cols == 0) bad("cols: a row holds at least one element");
  return SmemLayout(Kind::RowMajor, cols, cols, 1, 0);
}

SmemLayout SmemLayout::padded(uint32_t cols, uint32_t pad) {
  if (cols == 0) bad("cols: a row holds at least one element");
  return SmemLayout(Kind::Padded, cols, cols + pad, 1, 0);
}

SmemLayout SmemLayout::swizzled(uint32_t cols, Scalar elem, uint32_t swizzle_bytes) {
  const uint32_t es = static_cast<uint32_t>(scalar_bytes(elem));
  if (elem == Scalar::Pred || es > 16) bad(std::string("elem: ") + scalar_name(elem) + " cannot be swizzled");
  if (swizzle_bytes != 32 && swizzle_bytes != 64 && swizzle_bytes != 128)
    bad("swizzle_bytes: 32, 64 or 128, got " + std::to_string(swizzle_bytes));
  if (cols == 0 || (uint64_t(cols) * es) % 16)
    bad("cols: a swizzled row is a whole number of 16-byte chunks; " + std::to_string(cols) + " x " + scalar_name(elem) +
        " is not");
  return SmemLayout(Kind::Swizzled, cols, cols, es, swizzle_bytes / 16 - 1);
}

SmemLayout SmemLayout::line_swizzled(uint32_t cols, Scalar elem) {
  const uint32_t es = static_cast<uint32_t>(scalar_bytes(elem));
  if (elem == Scalar::Pred || es > 16) bad(std::string("elem: ") + scalar_name(elem) + " cannot be swizzled");
  if (cols == 0 || (uint64_t(cols) * es) % 128)
    bad("cols: a line-swizzled row is a whole number of 128-byte lines; " + std::to_string(cols) + " x " +
        scalar_name(elem) + " is not");
  return SmemLayout(Kind::LineSwizzled, cols, cols, es, 7);
}

uint32_t SmemLayout::elements(uint32_t rows) const {
  uint64_t n = uint64_t(rows) * stride_;
  if (kind_ == Kind::Swizzled && (n * esize_) % 128)
    bad("a swizzled tile is a whole number of 128-byte lines; " + std::to_string(rows) + " rows of " +
        std::to_string(uint64_t(cols_) * esize_) + " bytes are not");
  if (n > 0xffffffffu) bad("the tile has more than 2^32 elements");
  return static_cast<uint32_t>(n);
}

uint32_t SmemLayout::index(uint32_t row, uint32_t col) const {
  uint32_t i = row * stride_ + col;
  if (kind_ == Kind::LineSwizzled) return row * stride_ + ((col * esize_) ^ ((row & mask_) << 4)) / esize_;
  if (kind_ != Kind::Swizzled) return i;
  uint32_t o = i * esize_;
  o ^= ((o >> 7) & mask_) << 4;
  return o / esize_;
}

Value SmemLayout::as_u32(KernelBuilder& b, const KernelBuilder::AnyOperand& x) {
  if (!x.is_value) return b.constant(Type::scalar(Scalar::U32), x.lit, "smem_layout");
  if (!(x.value.type() == Type::scalar(Scalar::U32)))
    b.fail("smem_layout", "row and col are u32 values, got " + x.value.type().str());
  return x.value;
}

Value SmemLayout::xor_key(Value row) const {
  if (kind_ != Kind::LineSwizzled) bad("xor_key: only a line_swizzled layout has one");
  // (row % 8) moved to the chunk bits of the element index: an XOR of the column alone
  const uint32_t shift = static_cast<uint32_t>(std::countr_zero(esize_));  // element size: a power of two
  Value key = row & mask_;
  return shift < 4 ? key << (4u - shift) : key;
}

Value SmemLayout::index(Value row, Value col) const {
  const uint32_t shift = static_cast<uint32_t>(std::countr_zero(esize_));  // element size: a power of two
  if (kind_ == Kind::LineSwizzled) return row * stride_ + (col ^ xor_key(row));
  Value i = row * stride_ + col;
  if (kind_ != Kind::Swizzled) return i;
  Value o = shift ? i << shift : i;
  o = o ^ (((o >> 7u) & mask_) << 4u);
  return shift ? o >> shift : o;
}

namespace {
Value axis(const FragAxis& a, Value lane, int reg, int elem) {
  Value g = lane >> 2u, t = lane & 3u;
  uint32_t k = uint32_t(elem) * a.ce + uint32_t(reg & 1) * a.c0 + uint32_t(reg >> 1) * a.c1;
  Value v = g * uint32_t(a.cg) + t * uint32_t(a.ct);
  return k ? v + k : v;
}
}  // namespace

Value frag_row(const FragLayout& f, Value lane, int reg, int elem) { return axis(f.row, lane, reg, elem); }
Value frag_col(const FragLayout& f, Value lane, int reg, int elem) { return axis(f.col, lane, reg, elem); }

}  // namespace kaio::ir
