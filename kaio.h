// kaio: build GPU kernels at run time, compile them to cubins, cache and launch them.
#pragma once

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/ir/half.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio {
using jit::DeviceBuffer;
using jit::DevicePtr;
using jit::Stream;
}  // namespace kaio
