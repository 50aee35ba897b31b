// The kernels kaio-precompile warms the cache with.
#pragma once

#include <vector>

#include "kaio/ir/kernel.h"

namespace kaio::ops {

std::vector<ir::Kernel> catalog();

}  // namespace kaio::ops
