// The row ops' kernel families (softmax, log_softmax, rms_norm, layer_norm, add_rms_norm,
// rope) and their declared kernels: the common row-length buckets of every dtype, for
// kaio-precompile's catalog.
#pragma once

#include <vector>

#include "kaio/ir/kernel.h"
#include "kaio/jit/family.h"

namespace kaio::ops {

// The families (constructs them, so that they are registered with jit::families()).
std::vector<jit::FamilyBase*> row_op_families();
// The IR of every declared config of those families.
std::vector<ir::Kernel> row_op_catalog();

}  // namespace kaio::ops
