// The kernels kaio-precompile warms the cache with: every declared config of every ops
// family (ops::families()): the example kernels, the elementwise maps (each op in f32,
// f16 and bf16: 1-D with 16-byte vectors and with one element per access, strided rows
// with 16-byte vectors), the row reductions (each
// op, dtype and team size, 16-byte vectors) and the whole-array reductions.
#pragma once

#include <vector>

#include "kaio/ir/kernel.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

// The ops families (constructs them, so that they are registered with jit::families()).
std::vector<jit::FamilyBase*> families();
// The IR of every declared config of every ops family.
std::vector<ir::Kernel> catalog();

}  // namespace kaio::ops
