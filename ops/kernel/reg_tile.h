// Register tiles: f32 (or s32) accumulators in the m16n8 C-fragment layout of the MMA atom tables
// (ir/mma_layout.h), which both mma.sync tiles and wgmma's per-warp 16-row slices use.
//
// AccTile: `arrays` register arrays (one per wgmma m64 row block, or one for a warp's
// mt x nt mma.sync tiles), each holding mt x nt tiles of 16 x 8; register r of tile
// (mi, ni) is at(a, mi, ni, r), and a lane holds rows row(mi, r) and columns col(ni, r)
// of it. Registers 2h and 2h + 1 are neighbours in one row (one vector store).
//
// The row operations an online softmax needs: row_reduce(a, max or add) gives each thread
// the reduction of its rows (2 per mi: fragment rows lane / 4 and lane / 4 + 8) across the
// tile's columns: first over its own registers, then across the 4 lanes of a quad that
// share the rows (shfl.bfly 1 and 2). scale_rows multiplies each row by a per-row value.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::ops::kernel {

class AccTile {
 public:
  enum class Reduce : uint8_t { Max, Sum };

  // elem: f32, or s32 (integer MMAs: mma.sync / wgmma s8); the row operations are f32 only.
  AccTile(ir::KernelBuilder& b, uint32_t arrays, uint32_t mt, uint32_t nt, ir::Scalar elem = ir::Scalar::F32)
      : b_(&b), mt_(mt), nt_(nt), elem_(elem) {
    for (uint32_t a = 0; a < arrays; ++a)
      regs_.push_back(elem == ir::Scalar::F32 ? b.array<float>(mt * nt * 4, 0.0f) : b.array<int32_t>(mt * nt * 4, 0));
  }

  uint32_t mt() const { return mt_; }
  uint32_t nt() const { return nt_; }
  size_t arrays() const { return regs_.size(); }
  const ir::RegArray& array(size_t a) const { return regs_[a]; }
  ir::Var at(size_t a, uint32_t mi, uint32_t ni, uint32_t r) const { return regs_[a][4 * (mi * nt_ + ni) + r]; }
  // mma.sync's 4 accumulators of tile (mi, ni).
  ir::RegArray tile(size_t a, uint32_t mi, uint32_t ni) const { return regs_[a].slice(4 * (mi * nt_ + ni), 4); }

  static const ir::FragLayout& layout() { return ir::mma_shape(ir::MmaKind::F16).c; }
  // The row (within the array's 16 * mt rows) and column (within 8 * nt) of register r.
  ir::Value row(ir::Value lane, uint32_t mi, uint32_t r) const { return ir::frag_row(layout(), lane, int(r)) + mi * 16; }
  ir::Value col(ir::Value lane, uint32_t ni, uint32_t r) const { return ir::frag_col(layout(), lane, int(r)) + ni * 8; }

  void zero() const {
    for (const ir::RegArray& a : regs_)
      for (uint32_t r = 0; r < a.size(); ++r) {
        if (elem_ == ir::Scalar::F32) a[r] = 0.0f;
        else a[r] = b_->constant<int32_t>(0);
      }
  }

  // Per thread: the reduction of each of its rows over the tile's columns and the quad's
  // lanes; result[2 * mi + h] is row row(lane, mi, 2 * h) of array a.
  std::vector<ir::Value> row_reduce(size_t a, Reduce op) const {
    auto combine = [op](ir::Value x, ir::Value y) { return op == Reduce::Max ? ir::max(x, y) : x + y; };
    std::vector<ir::Value> out;
    for (uint32_t mi = 0; mi < mt_; ++mi)
      for (uint32_t h = 0; h < 2; ++h) {
        ir::Value x = at(a, mi, 0, 2 * h);
        x = combine(x, at(a, mi, 0, 2 * h + 1));
        for (uint32_t ni = 1; ni < nt_; ++ni) x = combine(combine(x, at(a, mi, ni, 2 * h)), at(a, mi, ni, 2 * h + 1));
        for (uint32_t d = 1; d <= 2; d *= 2) x = combine(x, ir::shfl_xor(x, d));
        out.push_back(x);
      }
    return out;
  }

  // Row k's registers (k = 2 * mi + h, as row_reduce numbers them) times f[k].
  void scale_rows(size_t a, const std::vector<ir::Value>& f) const {
    for (uint32_t mi = 0; mi < mt_; ++mi)
      for (uint32_t ni = 0; ni < nt_; ++ni)
        for (uint32_t r = 0; r < 4; ++r) {
          ir::Var x = at(a, mi, ni, r);
          x = ir::Value(x) * f[2 * mi + r / 2];
        }
  }

 private:
  ir::KernelBuilder* b_;
  uint32_t mt_, nt_;
  std::vector<ir::RegArray> regs_;
  ir::Scalar elem_ = ir::Scalar::F32;
};

}  // namespace kaio::ops::kernel
