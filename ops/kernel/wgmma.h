// Warpgroup MMA over one stage of a TMA-fed ring (Hopper): the accumulators of an AccTile
// (one array per m64 row block) += A x B of the stage, in wgmma instructions of 32 bytes of
// k each, straight from shared memory through matrix descriptors.
//
//   ir::Value da = ta.stage_descriptor(desc_a, slot.stage), db = tb.stage_descriptor(desc_b, slot.stage);
//   kernel::wgmma_stage(b, acc, ta, tb, da, db, in);   // fence, the MMAs, commit
#pragma once

#include <cstdint>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/reg_tile.h"
#include "kaio/ops/kernel/shared_tile.h"

namespace kaio::ops::kernel {

// The k of one wgmma: 32 bytes of the input type (tf32 8, f16 / bf16 16, 8-bit 32).
inline uint32_t wgmma_k(ir::Scalar in) {
  return in == ir::Scalar::F32 ? 8 : ir::scalar_bytes(in) == 1 ? 32 : 16;
}

// Issues the stage's MMAs as one wgmma group (the caller waits on it with wgmma_wait_group).
// da / db: the descriptors of the stage's A and B tiles (first row block, k 0).
inline void wgmma_stage(ir::KernelBuilder& b, const AccTile& acc, const TmaTile& ta, const TmaTile& tb, ir::Value da,
                        ir::Value db, ir::Scalar in) {
  const uint32_t k_inst = wgmma_k(in);
  const uint32_t a_k_step = ta.k_step_bytes(k_inst), b_k_step = tb.k_step_bytes(k_inst);  // bytes per wgmma along k
  const uint32_t a_half = ta.row_block_bytes();  // bytes between m64 row blocks of A
  b.wgmma_fence();
  for (uint32_t ki = 0; ki < ta.bk() / k_inst; ++ki)
    for (uint32_t h = 0; h < acc.arrays(); ++h)
      b.wgmma(acc.array(h), da + b.constant<uint64_t>((ki * a_k_step + h * a_half) / 16), db + b.constant<uint64_t>(ki * b_k_step / 16),
              in, !ta.k_major, !tb.k_major);
  b.wgmma_commit_group();
}

}  // namespace kaio::ops::kernel
