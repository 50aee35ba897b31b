// A warpgroup's register tile out through shared memory and TMA stores (Hopper): 64 rows x
// 128 bytes at a time, written in the 128-byte swizzled layout of the output's tensor map
// (conflict-free: the 8 rows of a store land in 8 different 16-byte chunks), then stored by
// one TMA store that clips the edges. Two chunk buffers: one fills while the other's store
// reads it; the leader thread waits for the store that read a buffer two chunks ago.
//
// The accumulators are an AccTile of m64 row blocks (arrays), each a warp's 16 rows x N
// columns. value(h, j, r) gives the output of register r (and r + 1: q) of n8 block j of row
// block h, already converted to the output type; begin_block(j) runs first for each n8 block
// (e.g. to read a bias for its columns once); issue(h, c0, buf) issues the TMA store of the
// chunk (row block h, columns c0..) from buffer element `buf` (the leader thread only).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/layouts.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"

namespace kaio::ops::kernel {

struct TmaStoreChunks {
  static constexpr uint32_t kChunkBytes = 64 * kSwizzleBytes;  // one TMA-store box: 64 rows of 128 bytes

  ir::KernelBuilder& b;
  ir::Value buffer;   // the shared array the chunks live in (of the output type)
  std::function<ir::Value()> first;  // element index of this warpgroup's two chunk buffers (built once, in store)
  uint32_t esize;     // output element bytes
  ir::Value warp, lane;

  void store(const AccTile& acc, uint32_t cols_total, const std::function<void()>& sync,
             const std::function<void(uint32_t j)>& begin_block,
             const std::function<ir::Value(uint32_t h, uint32_t j, uint32_t r, uint32_t q)>& value,
             const std::function<void(uint32_t h, uint32_t c0, ir::Value buf)>& issue) const {
    const uint32_t cols = kSwizzleBytes / esize;  // output columns of a chunk
    ir::Value leader = (warp % 4u == 0u) && (lane == 0u);
    ir::Value buf0 = first();
    uint32_t chunk = 0;
    for (uint32_t h = 0; h < acc.arrays(); ++h)
      for (uint32_t c0 = 0; c0 < cols_total; c0 += cols, ++chunk) {
        ir::Value buf = buf0 + (chunk % 2) * (kChunkBytes / esize);
        b.if_(leader, [&] { b.bulk_wait_group(1, true); });  // the store that read this buffer two chunks ago is done
        sync();
        for (uint32_t j = c0 / 8; j < (c0 + cols) / 8; ++j) {
          begin_block(j);
          for (uint32_t r = 0; r < 4; r += 2) {
            ir::Value row = (warp % 4u) * 16u + ir::frag_row(AccTile::layout(), lane, int(r));  // within the 64-row chunk
            const uint32_t cb = (j * 8 - c0) * esize;  // the pair's byte column, + frag col
            ir::Value off = swizzle128(row, ir::frag_col(AccTile::layout(), lane, int(r)) * esize + cb);
            std::vector<ir::Value> pair;
            for (uint32_t q = 0; q < 2; ++q) pair.push_back(value(h, j, r, q));
            ir::store_vec(buffer, buf + off / esize, pair);
          }
        }
        b.fence_proxy_async();  // the generic-proxy writes, before the TMA (async proxy) reads them
        sync();
        b.if_(leader, [&] {
          issue(h, c0, buf);
          b.bulk_commit_group();
        });
      }
  }
};

}  // namespace kaio::ops::kernel
