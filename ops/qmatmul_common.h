// Internal to the quantized matmul kernels (qmatmul_int8.cpp, qmatmul_int4.cpp): the
// parameters of one part (weights, output, n, scales, zeros, bias) and how a QKV launch
// picks its part by blockIdx.z, the checks of the call paths.
#pragma once

#include <string>
#include <tuple>

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/ops/kernel/signature.h"

namespace kaio::ops::detail {

// One part's parameters; all of them are absent for a part the config does not have.
struct QPart {
  kernel::Opt<kernel::Ptr> w, c, s, zeros, bias;
  kernel::Opt<kernel::Param<uint32_t>> n;
  QPart(int i, bool on, ir::Scalar w_elem, ir::Scalar c_elem, ir::Scalar s_elem, bool s_on, ir::Scalar bias_elem,
        bool bias_on, bool zeros_on) {
    static const char* const names[3][6] = {{"w0", "c0", "n0", "scale0", "zeros0", "bias0"},
                                            {"w1", "c1", "n1", "scale1", "zeros1", "bias1"},
                                            {"w2", "c2", "n2", "scale2", "zeros2", "bias2"}};
    w.name = names[i][0], c.name = names[i][1], n.name = names[i][2], s.name = names[i][3], zeros.name = names[i][4],
    bias.name = names[i][5];
    w.elem = w_elem, c.elem = c_elem, s.elem = s_elem, zeros.elem = ir::Scalar::U8, bias.elem = bias_elem;
    w.is_const = s.is_const = zeros.is_const = bias.is_const = true;
    w.on = c.on = n.on = on;
    s.on = on && s_on;
    zeros.on = on && zeros_on;
    bias.on = on && bias_on;
  }
  auto fields() { return std::tie(w, c, n, s, zeros, bias); }
};

// This block's part: part 0, or by blockIdx.z among three (invalid values where absent).
struct QPartValues {
  ir::Value w, c, n, s, zeros, bias;
};
inline QPartValues select_part(ir::KernelBuilder& b, uint32_t parts, const QPart& p0, const QPart& p1, const QPart& p2) {
  QPartValues v{p0.w.ir, p0.c.ir, p0.n.ir, p0.s.ir, p0.zeros.ir, p0.bias.ir};
  if (parts == 1) return v;
  ir::Value z = b.block_idx_z();
  ir::Value is0 = z == 0u, is1 = z == 1u;
  auto pick = [&](ir::Value a, ir::Value x, ir::Value y) { return a.valid() ? ir::select(is0, a, ir::select(is1, x, y)) : a; };
  return {pick(p0.w.ir, p1.w.ir, p2.w.ir),         pick(p0.c.ir, p1.c.ir, p2.c.ir),
          pick(p0.n.ir, p1.n.ir, p2.n.ir),         pick(p0.s.ir, p1.s.ir, p2.s.ir),
          pick(p0.zeros.ir, p1.zeros.ir, p2.zeros.ir), pick(p0.bias.ir, p1.bias.ir, p2.bias.ir)};
}

// A device pointer the kernels read or write in 16-byte vectors.
inline void check_aligned(const char* op, const char* arg, uint64_t p) {
  if (p % 16) throw UsageError("", op, std::string(arg) + ": the address must be 16-byte aligned");
}

}  // namespace kaio::ops::detail
