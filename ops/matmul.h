// Matmul kernels generated from a variant table: C = alpha * A * B + beta * C for any
// M, N, K, A and B each row- or column-major, strided batches. A variant is data (engine,
// tile shape, per-thread or per-warp tile); one builder per engine turns it into a kernel,
// and no variant is a hand-copied kernel.
//
//   engines   Simt  f32: a BM x BN block tile, BK deep, thread_m x thread_n accumulators per thread
//             SimtDb  as Simt, with 16-byte global loads and double buffering (needs
//                   leading dimensions and batch strides that are multiples of 4 elements)
//             Mma   f16 / bf16 in, f32 accumulate (mma.sync m16n8k16): warps of warp_m x warp_n
//                   tiles, operands through ldmatrix from padded shared tiles; f32 in
//                   with problem.tf32: mma.sync m16n8k8 tf32, fragments read from shared
//             MmaAsync  as Mma (tf32 too), the tiles brought in by cp.async through a ring
//                   of 2-4 shared stages (needs 16-byte aligned rows: leading dimensions and
//                   batch strides whole 16-byte vectors, 16-byte aligned pointers)
//             Wgmma  Hopper (sm_90a, an sm_90 device): a TMA producer warpgroup and BM / consumer_m
//                   wgmma consumer warpgroups of consumer_m x BN (or two taking alternate tiles:
//                   ping-pong), STAGES-deep mbarrier ring, C out through TMA stores; f16 /
//                   bf16 (either layout), tf32 or e4m3 / e5m2 with per-tensor scales (A
//                   row-major, B column-major); rows 16-byte aligned as for MmaAsync
//                   (matmul_wgmma.cpp)
//             Gemv  m <= BM (1..8 rows of A): B streamed once, each element used for all m
//                   rows; f32 / f16 / bf16 in, f32 accumulate; 16-byte loads of B along n
//                   (row-major: k split over the block's threads, summed in shared memory)
//                   or along k (col-major: a warp per `lanes` columns, shuffle sums); ldb and B's
//                   batch stride whole 16-byte vectors (matmul_gemv.cpp)
//   problem   m, n, k; the input type (f32 for Simt; f16 / bf16 for Mma) and the output type
//             (f32; f16 / bf16 too for Mma, rounded once); layouts; lda / ldb / ldc (0:
//             packed); batch and element strides between batches (0: packed); an optional
//             fused epilogue (a bias per column, an activation), on every engine
//
// Each engine is one file behind one interface (ops/matmul_engine.h): threads,
// can_implement, build, launch config, argument packing, declared configs.
//
// Every variant has can_implement(problem, sm): a problem it cannot serve is refused with
// the reason, and ops::matmul(variant, ...) throws that reason as a UsageError.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <tuple>

#include "kaio/ir/kernel.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/compiled_kernel.h"
#include "kaio/jit/family.h"
#include "kaio/ops/map.h"

namespace kaio::ops {

enum class MatLayout : uint8_t { RowMajor, ColMajor };

// A fused epilogue: C = act(alpha * A * B + beta * C + bias[col]), computed in f32 and
// rounded once to C's type, in the kernel's own epilogue (no second pass over C):
//
//   p.epilogue = {.bias = d_bias.device_address(), .activation = &ops::elementwise_op("gelu")};
//
// The activation is any map (ops/map.h) of one input and no scalars: the op library's
// ("relu", "silu", "gelu", "gelu_tanh", "exp") or a user's (`&my_map.kernels()`); its body is
// built into the matmul kernel. The bias is n elements of C's type, the same for every row
// and batch. Not with split-K (its blocks add partial products into C).
struct MatmulEpilogue {
  uint64_t bias = 0;                              // device address of bias[0 .. n); 0: none
  const detail::MapKernels* activation = nullptr;  // null: none
  // The activation's division, exp, tanh, ... in PTX's .approx forms (tanh.approx: 2^-10.9
  // relative): an epilogue as cheap as cuBLASLt's, accurate enough for bf16 output, not for f32.
  bool fast_math = false;
};

struct MatmulProblem {
  uint32_t m = 0, n = 0, k = 0;
  ir::Scalar in = ir::Scalar::F32;   // A and B
  ir::Scalar out = ir::Scalar::F32;  // C (row-major)
  MatLayout a = MatLayout::RowMajor, b = MatLayout::RowMajor;
  uint32_t lda = 0, ldb = 0, ldc = 0;  // leading dimensions (0: packed, k or m for A, n or k for B, n for C)
  uint32_t batch = 1;
  uint64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batches (0: packed)
  float alpha = 1.0f, beta = 0.0f;                    // beta == 0: C is not read
  uint32_t ptr_align = 16;  // the byte alignment A, B and C have (matmul() checks the pointers)
  bool tf32 = false;        // f32 inputs may run on tensor cores as tf32 (10-bit mantissas, truncated)
  uint32_t split_k = 1;     // > 1: k split into this many chunks computed by separate blocks and
                            // added into C atomically (f32 output; for small m x n with a large k)
  MatmulEpilogue epilogue;  // none by default
};

// The engines, one file each (ops/matmul_<engine>.cpp) behind one interface
// (ops/matmul_engine.h); the list is ops/matmul_engines.def.
enum class MatmulEngine : uint8_t {
#define KAIO_MATMUL_ENGINE(Engine, file) Engine,
#include "kaio/ops/matmul_engines.def"
#undef KAIO_MATMUL_ENGINE
};

// One row of the variant table: data with named fields, written with designated
// initialisers (ops/matmul_variants.cpp) and checked when the library compiles. Each
// engine reads the fields that describe its kernels and requires the others to stay 0.
struct MatmulVariant {
  const char* name = "";
  MatmulEngine engine = MatmulEngine::Simt;
  uint32_t bm = 0, bn = 0, bk = 0;  // the block tile (Gemv: bm = the most rows of A, bk = 16-byte
                                    // loads of B per thread and step, bn unused)
  uint32_t thread_m = 0, thread_n = 0;  // Simt, SimtDb: accumulators per thread
  uint32_t warp_m = 0, warp_n = 0;      // Mma, MmaAsync: a warp's tile
  uint32_t warp_k = 1;                  // MmaAsync: warps sharing each warp tile, each on its own
                                        // slice of a stage's k (summed through shared memory at the end)
  uint32_t consumer_m = 0;              // Wgmma: a consumer warpgroup's rows (64 or 128) of BM x BN
  uint32_t warps = 0, lanes = 0;        // Gemv: warps per block; threads along n (B row-major) or
                                        // columns per warp (B col-major)
  uint32_t stages = 1;         // MmaAsync, Wgmma: shared-memory stages of the ring (2..8)
  uint32_t max_registers = 0;  // register cap per thread (PTX .maxnreg, in the kernel's key); 0: none
  uint32_t cluster = 1;        // Wgmma: CTAs of a cluster (1 or 2), neighbours along m sharing each B
                               // tile by TMA multicast, or along n sharing each A tile (cluster_n)
  bool cluster_n = false;      // Wgmma: the cluster's CTAs are neighbours along n (they share A)
  bool pingpong = false;       // Wgmma: two consumer warpgroups take alternate tiles (consumer_m == BM),
                               // so that one's epilogue runs under the other's MMAs
  bool rolled = false;         // SimtDb: one k-step per loop iteration, the shared buffer chosen by a
                               // register (half the loop's code), not two with fixed buffers
  uint32_t consumer_regs = 0;  // Wgmma: registers a consumer thread takes from the producer (setmaxnreg;
                               // the producer keeps 40); 0: as ptxas assigns. Such a kernel loads from
                               // its PTX, compiled by the driver as a whole program (jit/backend_device.cpp)
  uint32_t threads() const;
  // Whether the variant serves the problem on sm_<sm>; if not, *why says what is missing.
  bool can_implement(const MatmulProblem& p, int sm, std::string* why = nullptr) const;
  // Every field, for listings and the tuner's table hash ("simt_...: Simt 128x128x8 thread 8x8 ...").
  std::string str() const;
};

// The table, in order of preference for a problem that several can serve.
std::span<const MatmulVariant> matmul_variants();
const MatmulVariant& matmul_variant(const std::string& name);  // UsageError when unknown

// What selects a kernel of a variant (the problem's sizes are run-time parameters).
struct MatmulConfig {
  uint32_t variant = 0;  // index in matmul_variants()
  ir::Scalar in = ir::Scalar::F32, out = ir::Scalar::F32;
  MatLayout a = MatLayout::RowMajor, b = MatLayout::RowMajor;
  bool bias = false;        // the fused epilogue adds a bias (a last kernel parameter: const Out* bias)
  uint64_t activation = 0;  // the fused epilogue's activation: its map's serial() (0: none)
  bool fast_math = false;   // the activation in .approx forms (the kernel is built with fast math)
  auto fields() const { return std::tie(variant, in, out, a, b, bias, activation, fast_math); }
  std::string str() const;
};

// Kernel parameters: const In* A, const In* B, Out* C, u32 m, n, k, lda, ldb, ldc, f32
// alpha, beta, u64 stride_a, stride_b, stride_c, u32 splits, k_chunk (then each engine's
// own, and last, with config.bias, const Out* bias). Grid (ceil(n / BN),
// ceil(m / BM), batch * splits). With splits > 1, C must first be scaled by beta
// (matmul_scale_kernel), and each block adds alpha * its chunk's product atomically.
ir::Kernel matmul_kernel(const MatmulConfig& c);
// The serial of an epilogue activation, which a config names (UsageError, op "matmul",
// unless the map takes one input and no scalars). The body is kept for the process's
// lifetime, so that kernels of the config can be built after the map is gone.
uint64_t matmul_activation(const detail::MapKernels& m);
jit::Family<MatmulConfig>& matmul_family();
jit::LaunchConfig matmul_launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream);
// The problem with its defaults filled in (leading dimensions, strides); UsageError when
// a leading dimension is too small.
MatmulProblem matmul_resolved(const MatmulProblem& p);
// Split-K: the k of each chunk (a multiple of every variant's BK).
uint32_t matmul_k_chunk(const MatmulProblem& p);
// C = beta * C (0 when beta == 0) over the problem's m x n x batch, before split-K blocks
// add into it. Params: f32* C, u32 m, n, ldc, u64 stride_c, f32 beta; grid
// (ceil(n / 256), m, batch), 256 threads.
ir::Kernel matmul_scale_kernel();

// Per-tensor scales of FP8 (e4m3 / e5m2) inputs: the device addresses of one f32 each (0:
// 1.0). The kernel reads them, so that scales computed on the GPU need no host sync:
// C = alpha * scale_a * scale_b * A * B + beta * C.
struct MatmulScales {
  uint64_t a = 0, b = 0;
};

// C = alpha * A * B + beta * C with one variant, on device pointers. UsageError (op
// "matmul") when the variant cannot serve the problem on this device, naming the reason.
void matmul(const MatmulVariant& v, uint64_t a, uint64_t b, uint64_t c, const MatmulProblem& p,
            const jit::Stream* stream = nullptr, const MatmulScales& scales = {});

}  // namespace kaio::ops
