// The dtype of the map kernel being built on this thread. The library's own map bodies read
// it to pick forms built for the precision their result is stored in (ops/elementwise_ops.cpp:
// a bf16 or f16 output keeps 8 or 11 bits, so short forms with .approx steps suffice there).
// It is F32 outside a build; build_map_kernel sets it for the duration of one build.
#pragma once

#include "kaio/ir/types.h"

namespace kaio::ops::detail {

ir::Scalar building_map_dtype();

}  // namespace kaio::ops::detail
