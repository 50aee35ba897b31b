// kaio: build GPU kernels at run time, compile them to cubins, cache and launch them.
#pragma once

#include "kaio/ir/builder.h"
#include "kaio/ir/error.h"
#include "kaio/ir/fp8.h"
#include "kaio/ir/half.h"
#include "kaio/ir/layouts.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/event.h"
#include "kaio/jit/family.h"
#include "kaio/jit/tensor_map.h"

// The names an application uses most are also reachable as kaio::X (jit::X stays valid).
namespace kaio {
using jit::DeviceBuffer;
using jit::DevicePtr;
using jit::Stream;
using jit::Event;
using jit::elapsed_ms;
using jit::synchronize;
using jit::Dim3;
using jit::LaunchConfig;
using jit::CompiledKernel;
using jit::CompileOptions;
using jit::Family;
using jit::TensorMap;
using jit::TensorMapTiled;
using jit::encode_tensor_map_tiled;
}  // namespace kaio
