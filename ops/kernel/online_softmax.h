// FlashAttention's online softmax on mma.sync score tiles (the FA2-style forward and the
// tensor-core decode kernel): a warp's S tile is one m16 tile of `key_tiles` n8 tiles in an
// AccTile (array 0), so each thread holds 2 rows (h = 0: fragment row lane / 4, h = 1: + 8).
//
// online_softmax folds the tile into the rows' running max m and sum l: the new max, the
// correction exp(m_old - m_new) (0 for a row with no key yet, never NaN), S becomes
// P = exp(S - m_new), l = l * correction + row sum of P, and O's rows are rescaled by the
// correction. Exponentials are exp2 of x · log2(e) (ex2.approx.ftz, as FlashAttention).
//
// p_fragment: P (f32 C fragments) rounded to the 16-bit dtype as the A fragment of the
// P · V mma of k-step ks: the C fragments of key tiles 2 ks and 2 ks + 1 are that A
// fragment's registers, so P never goes through shared memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ops/kernel/reg_tile.h"

namespace kaio::ops::kernel {

inline constexpr float kLog2e = 1.4426950408889634f;

inline void online_softmax(const AccTile& S, const AccTile& O, std::vector<ir::Var>& m, std::vector<ir::Var>& l,
                           uint32_t key_tiles) {
  std::vector<ir::Value> mx = S.row_reduce(0, AccTile::Reduce::Max), corr(2), ms(2);
  for (uint32_t h = 0; h < 2; ++h) {
    ir::Value m_new = ir::max(m[h].get(), mx[h]);
    ms[h] = ir::select(m_new == -INFINITY, 0.0f, m_new);  // no key yet: exp(-inf) = 0, not NaN
    corr[h] = ir::exp2_ftz((m[h].get() - ms[h]) * kLog2e);
    m[h] = m_new;
  }
  for (uint32_t ni = 0; ni < key_tiles; ++ni)
    for (uint32_t r = 0; r < 4; ++r) {
      ir::Var x = S.at(0, 0, ni, r);
      x = ir::exp2_ftz((x.get() - ms[r / 2]) * kLog2e);
    }
  std::vector<ir::Value> sum = S.row_reduce(0, AccTile::Reduce::Sum);
  for (uint32_t h = 0; h < 2; ++h) l[h] = l[h].get() * corr[h] + sum[h];
  O.scale_rows(0, corr);
}

inline std::vector<ir::Value> p_fragment(const AccTile& S, uint32_t ks, ir::Scalar dtype) {
  const ir::Type t16 = ir::Type::scalar(dtype);
  auto pair = [&](uint32_t ni, uint32_t r) {
    ir::Value lo = ir::cast(S.at(0, 0, ni, r).get(), t16, ir::Rounding::Rn);
    ir::Value hi = ir::cast(S.at(0, 0, ni, r + 1).get(), t16, ir::Rounding::Rn);
    return ir::pack2(lo, hi);
  };
  return {pair(2 * ks, 0), pair(2 * ks, 2), pair(2 * ks + 1, 0), pair(2 * ks + 1, 2)};
}

}  // namespace kaio::ops::kernel
