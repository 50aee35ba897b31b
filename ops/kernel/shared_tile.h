// Shared tiles: where a tile of a kernel's shared memory lives and how it is laid out.
//
// SharedTile: `rows` rows of an ir::SmemLayout (row-major, padded, or 32/64/128-byte
// swizzled), starting at element `base` of a dynamic shared array, `count` copies of it
// (a stage ring's stages) one after the other. Element (r, c) of copy s is at
// at(s, r, c); cp.async writes and ldmatrix reads agree because both go through it.
//
// TmaTile (Hopper): an operand tile that TMA writes with 128-byte swizzling and wgmma reads
// through a matrix descriptor. K-major: rows of 128 bytes along k, one box of `rows` rows;
// MN-major: boxes of (128 bytes of m or n) x BK, side by side. It knows the descriptor of
// its first row, the byte steps between wgmma's k slices and m64 row blocks, and how to
// load a stage of itself (or a cluster peer's share of it) with TMA.
//
// swizzle128(row, byte): the byte offset of (row, byte) in a 128-byte-swizzled tile: the
// 16-byte chunk number XORed with row % 8 (TMA's SWIZZLE_128B; conflict-free for 8 rows).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"

namespace kaio::ops::kernel {

inline constexpr uint32_t kSwizzleBytes = 128;

inline ir::Value swizzle128(ir::Value row, ir::Value byte) {
  return row * kSwizzleBytes + (((byte / 16u) ^ (row % 8u)) * 16u) + byte % 16u;
}

struct SharedTile {
  ir::SmemLayout lay;
  uint32_t rows = 0;
  uint32_t base = 0;   // element index of copy 0
  uint32_t count = 1;  // copies (stages)

  uint32_t elements() const { return lay.elements(rows); }         // one copy
  uint32_t total() const { return elements() * count; }            // every copy
  uint32_t end() const { return base + total(); }                  // the next tile's base
  ir::Value stage(ir::Value s) const { return s * elements(); }    // copy s's offset from base
  template <class R, class C>
  auto at(const R& r, const C& c) const { return lay.index(r, c); }  // within one copy
};

// Rows of `d` 16-bit elements from global memory into tile `t` (its t.rows rows) at element
// `dst` of the shared array `smem`, in 16-byte cp.async chunks spread over `threads` threads
// (this one `tid`): tile row r comes from global row first_row + r, at element
// row_offset(row) of `src`; rows at or past `rows` are zero-filled (a 0-byte copy from the
// in-bounds offset `base`).
inline void copy_rows(ir::KernelBuilder& b, ir::Value smem, const SharedTile& t, ir::Value dst, ir::Value src, ir::Value base,
                      ir::Value first_row, ir::Value rows, uint32_t d, ir::Value tid, uint32_t threads,
                      const std::function<ir::Value(ir::Value)>& row_offset) {
  const uint32_t per_row = d / 8, chunks = t.rows * per_row;
  for (uint32_t e = 0; e < (chunks + threads - 1) / threads; ++e) {
    ir::Value id = tid + e * threads;
    auto one = [&] {
      ir::Value r = id / per_row, col = (id - r * per_row) * 8u;
      ir::Value row = first_row + r;
      ir::Value ok = row < rows;
      ir::Value off = ir::select(ok, row_offset(row), base);
      b.cp_async(smem, dst + t.at(r, col), src, off + ir::cast<uint64_t>(col), 16, ir::CacheHint::Global,
                 ir::select(ok, b.constant<uint32_t>(16u), b.constant<uint32_t>(0u)));
    };
    if ((e + 1) * threads <= chunks) one();
    else b.if_(id < chunks, one);
  }
}

struct TmaTile {
  uint32_t rows = 0;     // m or n extent of the tile
  uint32_t esize = 2;    // element bytes
  bool k_major = true;   // rows along k (128 bytes each), else boxes of 128-byte rows along m / n
  uint32_t base = 0;     // element index of stage 0

  uint32_t per_row() const { return kSwizzleBytes / esize; }          // elements in a 128-byte row
  uint32_t bk() const { return kSwizzleBytes / esize; }               // k of a stage
  uint32_t box_bytes() const { return per_row() * bk() * esize; }     // one MN-major box
  uint32_t stage_bytes() const { return rows * kSwizzleBytes; }
  uint32_t stage_elements() const { return stage_bytes() / esize; }
  // Bytes between the wgmma k slices of `k_inst` elements, and between m64 row blocks.
  uint32_t k_step_bytes(uint32_t k_inst) const { return k_major ? k_inst * esize : k_inst / 8 * 1024; }
  uint32_t row_block_bytes() const { return k_major ? 64 * kSwizzleBytes : box_bytes(); }

  // The matrix descriptor of the tile from element `start` of stage 0.
  template <class I>
  ir::Value descriptor(ir::KernelBuilder& b, ir::Value smem, const I& start) const {
    const ir::WgmmaSwizzle sw = ir::WgmmaSwizzle::B128;
    return k_major ? b.wgmma_descriptor(smem, start, sw, 16, 1024) : b.wgmma_descriptor(smem, start, sw, box_bytes(), 1024);
  }
  // A descriptor of stage 0 moved to stage `s` (its start field counts 16-byte units).
  ir::Value stage_descriptor(ir::Value desc, ir::Value s) const { return desc + ir::cast<uint64_t>(s * (stage_bytes() / 16)); }
  // The element of stage 0 where row `r` (a multiple of 64) starts.
  ir::Value row_start(ir::Value r) const { return k_major ? r * (kSwizzleBytes / esize) : r / 64u * (box_bytes() / esize); }

  // TMA loads of one stage: the tile at element `at` from the map at (k, o0, batch),
  // completing the full barrier bar() of `bars` (a callable: each load names it). With a cluster of `share` > 1 CTAs sharing the
  // tile, this CTA loads part `part` of it and multicasts it to the CTAs in `mask`.
  template <class Bar>
  void load(ir::KernelBuilder& b, ir::Value smem, ir::Value at, ir::Value map, ir::Value k, ir::Value o0, ir::Value batch,
            ir::Value bars, const Bar& bar, uint32_t share, ir::Value part, ir::Value mask) const {
    if (k_major) {
      ir::Value r0 = part * (rows / share);
      b.tma_load(smem, at + r0 * (kSwizzleBytes / esize), map, {k, o0 + r0, batch}, bars, bar(), mask);
    } else {
      for (uint32_t j = 0; j < rows / per_row() / share; ++j) {
        ir::Value box = part * (rows / per_row() / share) + j;
        b.tma_load(smem, at + box * (box_bytes() / esize), map, {o0 + box * per_row(), k, batch}, bars, bar(), mask);
      }
    }
  }
};

}  // namespace kaio::ops::kernel
