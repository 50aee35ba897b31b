// The persistent tile scheduler: work item w (a block takes w = blockIdx.x, + gridDim.x, ...)
// names one output tile of one slice (a batch, or a batch's split-K chunk). Tiles are visited
// in groups of `group_rows` tile rows, column by column (grouped raster), so that the blocks
// working at the same time share their operand tiles in L2. With a cluster along n, a unit of
// `cluster_n` consecutive items (the cluster's CTAs) takes neighbouring columns of one tile row
// and the units follow the grouped raster.
//
//   const kernel::TileScheduler sched{.tiles_m = tm, .tiles_n = tn, .cluster_n = 1, .group_rows = 8};
//   kernel::TileScheduler::Tile t = sched.at(w);   // t.m, t.n: tile coordinates; t.slice
#pragma once

#include <cstdint>

#include "kaio/ir/builder.h"

namespace kaio::ops::kernel {

struct TileScheduler {
  ir::Value tiles_m, tiles_n;  // tiles per slice (tiles_n a multiple of cluster_n)
  uint32_t cluster_n = 1;      // CTAs of a cluster along n
  uint32_t group_rows = 8;     // tile rows per raster group

  struct Tile {
    ir::Value m, n, slice;  // tile row, tile column, slice
  };
  Tile at(ir::Value w) const {
    const uint32_t cn = cluster_n;
    ir::Value unit = w / cn, units_n = tiles_n / cn;
    ir::Value per_slice = tiles_m * units_n;
    ir::Value zz = unit / per_slice, pid = unit % per_slice;
    ir::Value per_group = units_n * group_rows;
    ir::Value first_m = (pid / per_group) * group_rows;
    ir::Value group_m = ir::min(tiles_m - first_m, group_rows);
    ir::Value tile_m = first_m + (pid % per_group) % group_m, tile_n = (pid % per_group) / group_m * cn + w % cn;
    return {tile_m, tile_n, zz};
  }
};

}  // namespace kaio::ops::kernel
