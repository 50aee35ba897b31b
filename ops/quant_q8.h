// The q8 quantisation of activations shared by the GGUF matvec's pre-pass and its fused
// form (quant_matvec.cpp, quant_matvec_fused.cpp), so that both give the same bytes.
#pragma once

#include "kaio/ir/builder.h"

namespace kaio::ops::detail {

// 32 activations with max |x| = amax: d = amax / 127 and q = rint(x * (127 / amax))
// clamped to [-127, 127] (ties to even, s32); all zero when amax is 0. One division per
// 32 values, not one per value.
struct Q8Scale {
  ir::Value d, inv, any;
  explicit Q8Scale(ir::Value amax) : d(amax / 127.0f), inv(127.0f / amax), any(amax > 0.0f) {}
  ir::Value q(ir::Value x) const {
    return ir::cast(ir::select(any, ir::min(ir::max(ir::rint(x * inv), -127.0f), 127.0f), 0.0f),
                    ir::Type::scalar(ir::Scalar::S32));
  }
};

}  // namespace kaio::ops::detail
