// Internal: the one interface every matmul engine implements. An engine is one file
// (ops/matmul_<engine>.cpp) ending in its definition:
//
//   extern const MatmulEngineDef kMatmulEngineWgmma = {
//       .name = "Wgmma", .threads = threads, .valid = valid, .can_implement = can_implement,
//       .build = build, .launch_config = launch_config, .launch = launch, .declare = declare};
//
// and a line in ops/matmul_engines.def. matmul_variants.cpp holds the table and the checks
// every engine shares (batch, split-K, epilogue); it dispatches through engine(v.engine)
// and knows nothing else of any engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kaio/ir/kernel.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/ops/matmul.h"

namespace kaio::ops::detail {

// The device pointers of one call.
struct MatmulOperands {
  uint64_t a = 0, b = 0, c = 0;
  MatmulScales scales;
};

struct MatmulEngineDef {
  const char* name;
  // The SM a config's types and layouts are checked against (can_implement) before build
  // runs; 0: build checks the config itself (an engine that cannot serve any problem
  // where kernels are built, e.g. under the interpreter).
  int build_sm;
  // Threads per block.
  uint32_t (*threads)(const MatmulVariant& v);
  // Whether a table row is well formed for this engine (fields it reads in range, the
  // others 0); why names the rule. Evaluated for every row when the family is made.
  bool (*valid)(const MatmulVariant& v, std::string* why);
  // The engine's own conditions on a problem (types, layouts, alignment, shared memory).
  bool (*can_implement)(const MatmulVariant& v, const MatmulProblem& p, int sm, std::string* why);
  // The kernel of a config (the config is already checked against the engine's types).
  ir::Kernel (*build)(const MatmulVariant& v, const MatmulConfig& c);
  jit::LaunchConfig (*launch_config)(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream);
  // Packs the kernel's arguments for a resolved problem and launches it.
  void (*launch)(const MatmulVariant& v, const MatmulConfig& c, const MatmulOperands& o, const MatmulProblem& p,
                 const jit::Stream* stream);
  // The configs of row `index` that kaio-precompile and the tuner see.
  void (*declare)(uint32_t index, const MatmulVariant& v, std::vector<MatmulConfig>& out);
};

#define KAIO_MATMUL_ENGINE(Engine, file) extern const MatmulEngineDef kMatmulEngine##Engine;
#include "kaio/ops/matmul_engines.def"
#undef KAIO_MATMUL_ENGINE

const MatmulEngineDef& engine(MatmulEngine e);

// Shared by the engines' can_implement: `why` gets "variant <name>: <msg>".
bool refuse(const MatmulVariant& v, std::string* why, const std::string& msg);
// 16-byte vector loads along the operands' contiguous dimensions (MmaAsync, SimtDb,
// Wgmma): aligned pointers, leading dimensions and batch strides whole vectors.
bool vector_rows_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why);
// The tensor-core engines' input and output types (f16 / bf16, f32 with problem.tf32).
bool mma_types_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why);

// The grid of the tiled engines: (ceil(n / BN), ceil(m / BM), batch * splits).
jit::LaunchConfig tiled_launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream,
                                      uint32_t shared_bytes = 0);
// The arguments of the common signature (MatmulSignature) for a resolved problem, then the
// engine's own `extra`, then the epilogue's bias when the config has one.
void launch_common(const MatmulConfig& c, const MatmulOperands& o, const MatmulProblem& p, const jit::LaunchConfig& lc,
                   std::span<const jit::detail::Arg> extra = {});
// launch_config / launch of the tiled engines without dynamic shared memory, and the launch
// of any engine whose kernels take the common signature (and, for Gemv, its extras).
jit::LaunchConfig tiled_launch(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream);
void launch_with_config(const MatmulVariant& v, const MatmulConfig& c, const MatmulOperands& o, const MatmulProblem& p,
                        const jit::Stream* stream);
// The SIMT engines' threads (one per thread_m x thread_n accumulator tile), row rules and
// declared configs (f32 in and out).
uint32_t simt_threads(const MatmulVariant& v);
bool simt_valid(const MatmulVariant& v, std::string* why);
bool simt_types_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why);
void declare_f32(uint32_t index, const MatmulVariant& v, std::vector<MatmulConfig>& out);
// The mma.sync engines' threads (a warp per warp_m x warp_n tile).
uint32_t warp_tile_threads(const MatmulVariant& v);
// Declared configs of a tensor-core row: f16 and bf16 in, f32 out; f32 in (tf32) where the
// row serves it.
void declare_mma(uint32_t index, const MatmulVariant& v, std::vector<MatmulConfig>& out);

}  // namespace kaio::ops::detail
