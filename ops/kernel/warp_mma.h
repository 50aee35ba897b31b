// A warp's mma.sync products over 16-bit tiles in shared memory: the inner loops of the
// FA2-style attention kernels (forward, decode, backward). One warp owns 16 rows of C, an
// AccTile of n / 8 n8 tiles (array 0); each k-step of 16 is one ldmatrix x4 of A and, per
// pair of n8 tiles, one ldmatrix x4 of B and two m16n8k16 mma.sync.
//
//   mma_abt  C (16 x n) += A (16 x kdim) · Bᵀ, B's n rows K-contiguous ("col" B: S = Q Kᵀ,
//            dP = dO Vᵀ, ...). a_at(ks): the lane's ldmatrix address of A at k-step ks;
//            b_at(ni, ks): of B's n8 tiles ni and ni + 1 at k-step ks.
//   mma_ab   C (16 x n) += A · B, A's fragments from registers (a_frag(ks): p_fragment of a
//            score tile, say) and B's kdim rows N-contiguous, read by ldmatrix.trans (O += P V).
//            b_at(ks, ni): the lane's address of B's rows 16 ks.. and n8 tiles ni, ni + 1.
//
// The caller's address functions carry each kernel's layout (strides, swizzles); the order of
// the emitted instructions is the loops' (A's load, then per pair B's load and two mma).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/reg_tile.h"

namespace kaio::ops::kernel {

inline void mma_abt(ir::KernelBuilder& b, ir::MmaKind kind, ir::Value smem, const AccTile& C, uint32_t kdim, uint32_t n,
                    const std::function<ir::Value(uint32_t ks)>& a_at,
                    const std::function<ir::Value(uint32_t ni, uint32_t ks)>& b_at) {
  for (uint32_t ks = 0; ks < kdim / 16; ++ks) {
    std::vector<ir::Value> a = b.ldmatrix(smem, a_at(ks), 4, false);
    for (uint32_t ni = 0; ni < n / 8; ni += 2) {
      std::vector<ir::Value> m = b.ldmatrix(smem, b_at(ni, ks), 4, false);
      b.mma_sync(kind, C.tile(0, 0, ni), a, {m[0], m[1]});
      b.mma_sync(kind, C.tile(0, 0, ni + 1), a, {m[2], m[3]});
    }
  }
}

inline void mma_ab(ir::KernelBuilder& b, ir::MmaKind kind, ir::Value smem, const AccTile& C, uint32_t kdim, uint32_t n,
                   const std::function<std::vector<ir::Value>(uint32_t ks)>& a_frag,
                   const std::function<ir::Value(uint32_t ks, uint32_t ni)>& b_at) {
  for (uint32_t ks = 0; ks < kdim / 16; ++ks) {
    std::vector<ir::Value> a = a_frag(ks);
    for (uint32_t ni = 0; ni < n / 8; ni += 2) {
      std::vector<ir::Value> m = b.ldmatrix(smem, b_at(ks, ni), 4, true);
      b.mma_sync(kind, C.tile(0, 0, ni), a, {m[0], m[1]});
      b.mma_sync(kind, C.tile(0, 0, ni + 1), a, {m[2], m[3]});
    }
  }
}

}  // namespace kaio::ops::kernel
