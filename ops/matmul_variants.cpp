// The matmul variant table, what each variant can serve, the kernel family and the launch.
#include <algorithm>
#include <atomic>
#include <string>
#include <tuple>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/builder.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/driver.h"
#include "kaio/jit/tensor_map.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

// name, engine, BM, BN, BK, TM, TN (Simt: per thread; Mma: per warp; Wgmma: per consumer
// warpgroup), stages, register cap, cluster (and its direction), ping-pong consumers.
// The caps bring a row's registers (nvJitLink's report, sm_90) to the next occupancy step
// without spilling (tests/ops/test_matmul.cpp checks every layout for spills).
constexpr MatmulVariant kVariants[] = {
    {"simt_db_128x128x8_8x8", MatmulEngine::SimtDb, 128, 128, 8, 8, 8, 1, 128},  // 149 registers -> 128: 2 blocks per SM
    {"simt_db_128x128x16_8x8", MatmulEngine::SimtDb, 128, 128, 16, 8, 8},
    {"simt_db_128x64x8_8x8", MatmulEngine::SimtDb, 128, 64, 8, 8, 8},  // a cap of 128 spills (row/col)
    {"simt_db_64x64x16_4x4", MatmulEngine::SimtDb, 64, 64, 16, 4, 4, 1, 72},      // uncapped: 64 under .maxntid 256, spilling
    {"simt_128x128x8_8x8", MatmulEngine::Simt, 128, 128, 8, 8, 8},
    {"simt_64x64x8_4x4", MatmulEngine::Simt, 64, 64, 8, 4, 4, 1, 64},             // 77 registers -> 64: 4 blocks per SM
    {"simt_32x32x8_2x2", MatmulEngine::Simt, 32, 32, 8, 2, 2},
    {"mma_128x128x32_w64x64", MatmulEngine::Mma, 128, 128, 32, 64, 64},
    {"mma_64x64x32_w32x32", MatmulEngine::Mma, 64, 64, 32, 32, 32, 1, 128},       // 136 registers -> 128: 4 blocks per SM
    {"mma_cp_128x256x32_w64x64_s3", MatmulEngine::MmaAsync, 128, 256, 32, 64, 64, 3},
    {"mma_cp_128x256x64_w64x64_s3", MatmulEngine::MmaAsync, 128, 256, 64, 64, 64, 3},
    {"mma_cp_256x128x64_w64x64_s3", MatmulEngine::MmaAsync, 256, 128, 64, 64, 64, 3},
    {"mma_cp_128x128x32_w64x64_s4", MatmulEngine::MmaAsync, 128, 128, 32, 64, 64, 4},
    {"mma_cp_128x64x32_w64x32_s3", MatmulEngine::MmaAsync, 128, 64, 32, 64, 32, 3},  // a cap of 128 spills (tf32)
    {"mma_cp_64x64x32_w32x32_s4", MatmulEngine::MmaAsync, 64, 64, 32, 32, 32, 4, 96},     // 106 registers -> 96: 5 blocks per SM
    {"mma_cp_16x32x128_w16x16_s4", MatmulEngine::MmaAsync, 16, 32, 128, 16, 16, 4},  // m <= 16: no empty mma rows
    // Hopper: BK is 128 bytes of k (64 for 16-bit elements, 32 for tf32)
    {"wgmma_256x128x64_s4_c2", MatmulEngine::Wgmma, 256, 128, 64, 128, 128, 4, 0, 2},
    {"wgmma_256x128x64_s4_n2", MatmulEngine::Wgmma, 256, 128, 64, 128, 128, 4, 0, 2, false, true},
    {"wgmma_256x128x64_s4", MatmulEngine::Wgmma, 256, 128, 64, 128, 128, 4},
    {"wgmma_pp_128x128x64_s6", MatmulEngine::Wgmma, 128, 128, 64, 128, 128, 6, 0, 1, true},
    {"wgmma_pp_64x256x64_s4", MatmulEngine::Wgmma, 64, 256, 64, 64, 256, 4, 0, 1, true},
    {"wgmma_128x256x64_s4_c2", MatmulEngine::Wgmma, 128, 256, 64, 64, 256, 4, 0, 2},
    {"wgmma_128x256x64_s4", MatmulEngine::Wgmma, 128, 256, 64, 64, 256, 4},
    {"wgmma_128x128x64_s6", MatmulEngine::Wgmma, 128, 128, 64, 64, 128, 6},
    {"wgmma_64x128x64_s8", MatmulEngine::Wgmma, 64, 128, 64, 64, 128, 8},
    // GEMV, m <= BM: TM warps, TN threads along n (B row-major) or columns per warp (B
    // column-major), BK 16-byte loads of B per thread and step
    {"gemv_m1_w8_n4_k8", MatmulEngine::Gemv, 1, 0, 8, 8, 4},
    {"gemv_m1_w8_n8_k8", MatmulEngine::Gemv, 1, 0, 8, 8, 8},   // B row-major: 128-byte row segments
    {"gemv_m1_w8_n2_k8", MatmulEngine::Gemv, 1, 0, 8, 8, 2},   // B col-major: 16 columns a block, more blocks
    {"gemv_m1_w16_n4_k8", MatmulEngine::Gemv, 1, 0, 8, 16, 4}, // 512 threads: 16-bit B row-major, 128 blocks at n = 4096
    {"gemv_m4_w8_n4_k4", MatmulEngine::Gemv, 4, 0, 4, 8, 4},
    {"gemv_m8_w8_n4_k4", MatmulEngine::Gemv, 8, 0, 4, 8, 4},
};

bool fail(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return false;
}

const char* layout_name(MatLayout l) { return l == MatLayout::RowMajor ? "row" : "col"; }

}  // namespace

bool simt(MatmulEngine e) { return e == MatmulEngine::Simt || e == MatmulEngine::SimtDb; }

uint32_t MatmulVariant::threads() const {
  if (engine == MatmulEngine::Wgmma) return 128 * ((pingpong ? 2 : bm / tm) + 1);  // the producer and the consumer warpgroups
  if (engine == MatmulEngine::Gemv) return 32 * tm;
  return simt(engine) ? (bm / tm) * (bn / tn) : (bm / tm) * (bn / tn) * 32;
}

bool MatmulVariant::can_implement(const MatmulProblem& p, int sm, std::string* why) const {
  const std::string v = std::string("variant ") + name + ": ";
  if (engine == MatmulEngine::Wgmma) {
    if (sm != 90)
      return fail(why, v + "wgmma and TMA run on sm_90 devices (compiled for sm_90a), the device is sm_" + std::to_string(sm));
    if (jit::interpret_mode()) return fail(why, v + "the interpreter does not model wgmma and TMA (an sm_90 GPU runs it)");
    const bool tf32 = p.in == ir::Scalar::F32 && p.tf32, fp8 = p.in == ir::Scalar::E4M3 || p.in == ir::Scalar::E5M2;
    if (p.in != ir::Scalar::F16 && p.in != ir::Scalar::BF16 && !tf32 && !fp8)
      return fail(why, v + "wgmma takes f16 or bf16 inputs, e4m3 or e5m2 too (f32 with problem.tf32), not " +
                           std::string(ir::scalar_name(p.in)));
    if ((tf32 || fp8) && (p.a != MatLayout::RowMajor || p.b != MatLayout::ColMajor))
      return fail(why, v + (fp8 ? "e4m3 / e5m2" : "tf32") +
                           " wgmma reads K-major operands only: A row-major and B column-major (the transposing forms "
                           "take 16-bit elements)");
    if (fp8 && p.out != ir::Scalar::F32 && p.out != ir::Scalar::F16 && p.out != ir::Scalar::BF16)
      return fail(why, v + "the output of e4m3 / e5m2 inputs is f32, f16 or bf16, not " + std::string(ir::scalar_name(p.out)));
    if (!fp8 && p.out != ir::Scalar::F32 && p.out != p.in)
      return fail(why, v + "the output is f32 or the input type, not " + std::string(ir::scalar_name(p.out)));
  } else if (engine == MatmulEngine::Gemv) {
    if (!matmul_gemv_can_implement(*this, p, why)) return false;
  } else if (simt(engine)) {
    if (p.in != ir::Scalar::F32 || p.out != ir::Scalar::F32)
      return fail(why, v + "SIMT computes f32 x f32 -> f32, not " + ir::scalar_name(p.in) + " -> " + ir::scalar_name(p.out));
  } else {
    if (sm < 80) return fail(why, v + "mma.sync needs sm_80 or newer, the device is sm_" + std::to_string(sm));
    const bool tf32 = p.in == ir::Scalar::F32 && p.tf32;
    if (tf32 && engine == MatmulEngine::Mma && tm * tn > 32 * 32)  // its 64 x 64 warp tile spills
      return fail(why, v + "tf32 needs a warp tile of at most 32 x 32");
    if (p.in != ir::Scalar::F16 && p.in != ir::Scalar::BF16 && !tf32)
      return fail(why, v + "tensor cores take f16 or bf16 inputs here (f32 with problem.tf32), not " +
                           std::string(ir::scalar_name(p.in)));
    if (p.out != ir::Scalar::F32 && p.out != p.in)
      return fail(why, v + "the output is f32 or the input type, not " + std::string(ir::scalar_name(p.out)));
  }
  if (engine == MatmulEngine::MmaAsync || engine == MatmulEngine::SimtDb || engine == MatmulEngine::Wgmma) {
    // 16-byte vectors (TMA: 16-byte strides) along the contiguous dimensions
    const uint64_t per = 16 / static_cast<uint64_t>(ir::scalar_bytes(p.in));   // elements per vector
    const bool ar = p.a == MatLayout::RowMajor, br = p.b == MatLayout::RowMajor;
    const uint64_t lda = p.lda ? p.lda : (ar ? p.k : p.m), ldb = p.ldb ? p.ldb : (br ? p.n : p.k);
    const uint64_t sa = p.stride_a ? p.stride_a : lda * (ar ? p.m : p.k), sb = p.stride_b ? p.stride_b : ldb * (br ? p.k : p.n);
    if (p.ptr_align % 16) return fail(why, v + "16-byte loads need 16-byte aligned A and B, the problem promises " + std::to_string(p.ptr_align));
    if (lda % per || ldb % per)
      return fail(why, v + "16-byte loads along the rows: lda and ldb must be multiples of " + std::to_string(per) +
                           " elements, got " + std::to_string(lda) + " and " + std::to_string(ldb));
    if (p.batch > 1 && (sa % per || sb % per))
      return fail(why, v + "batch strides of A and B must be multiples of " + std::to_string(per) + " elements");
  }
  if (engine == MatmulEngine::MmaAsync) {  // the stages must fit in a block's shared memory
    const uint32_t need = matmul_async_shared_bytes(*this, p.in, p.a, p.b);
    const uint32_t have = sm == 80 || sm == 87 ? 166912u : sm == 90 || sm == 100 ? 232448u : 101376u;
    if (need > have)
      return fail(why, v + "its stages need " + std::to_string(need) + " bytes of shared memory, sm_" + std::to_string(sm) +
                           " gives a block at most " + std::to_string(have));
  }
  if (p.batch == 0 || p.batch > 65535) return fail(why, v + "batch must be 1..65535, got " + std::to_string(p.batch));
  if (p.split_k == 0 || uint64_t(p.split_k) * p.batch > 65535)
    return fail(why, v + "split_k must be 1.. with batch * split_k <= 65535, got " + std::to_string(p.split_k));
  if (p.split_k > 1 && (p.epilogue.bias || p.epilogue.activation))
    return fail(why, v + "a fused epilogue (bias, activation) needs split_k == 1: split-K blocks add partial products into C");
  if (p.split_k > 1 && p.out != ir::Scalar::F32)
    return fail(why, v + "split-K adds partial products atomically: the output must be f32, not " +
                         std::string(ir::scalar_name(p.out)));
  if ((uint64_t(p.m) + bm - 1) / bm > 65535)
    return fail(why, v + "m = " + std::to_string(p.m) + " needs more than 65535 block rows");
  return true;
}

std::span<const MatmulVariant> matmul_variants() { return kVariants; }

const MatmulVariant& matmul_variant(const std::string& name) {
  for (const MatmulVariant& v : kVariants)
    if (name == v.name) return v;
  throw UsageError("matmul", "matmul", "no matmul variant is called '" + name + "'");
}

std::string MatmulConfig::str() const {
  std::string e = bias ? ", + bias" : "";
  if (activation) e += ", " + detail::matmul_activation_of(activation).name;
  if (fast_math) e += " (fast math)";
  return std::string("matmul(") + kVariants[variant].name + ", " + ir::scalar_name(in) + " -> " + ir::scalar_name(out) +
         ", " + layout_name(a) + "/" + layout_name(b) + e + ")";
}

ir::Kernel matmul_kernel(const MatmulConfig& c) {
  if (c.variant >= std::size(kVariants)) throw UsageError("matmul", "matmul", "variant index out of range");
  const MatmulVariant& v = kVariants[c.variant];
  MatmulProblem p;
  p.in = c.in;
  p.out = c.out;
  p.tf32 = true;  // a config with f32 inputs on a tensor-core engine is the tf32 kernel
  std::string why;
  if (v.engine != MatmulEngine::Wgmma && !v.can_implement(p, 80, &why)) throw UsageError("matmul", "matmul", why);
  if (v.engine == MatmulEngine::Wgmma && (c.in == ir::Scalar::F32 || ir::scalar_bytes(c.in) == 1) &&
      (c.a != MatLayout::RowMajor || c.b != MatLayout::ColMajor))
    throw UsageError("matmul", "matmul", std::string("variant ") + v.name + ": " + ir::scalar_name(c.in) +
                                             " wgmma reads A row-major and B column-major only");
  switch (v.engine) {
    case MatmulEngine::Simt: return build_matmul_simt(v, c);
    case MatmulEngine::SimtDb: return build_matmul_simt_db(v, c);
    case MatmulEngine::Mma: return build_matmul_mma(v, c);
    case MatmulEngine::MmaAsync: return build_matmul_mma_async(v, c);
    case MatmulEngine::Wgmma: return build_matmul_wgmma(v, c);
    case MatmulEngine::Gemv: return build_matmul_gemv(v, c);
  }
  throw UsageError("matmul", "matmul", "unknown engine");
}

jit::Family<MatmulConfig>& matmul_family() {
  static jit::Family<MatmulConfig> f("matmul", matmul_kernel, [] {
    std::vector<MatmulConfig> declared;
    for (uint32_t i = 0; i < std::size(kVariants); ++i) {
      if (simt(kVariants[i].engine)) {
        declared.push_back({i, ir::Scalar::F32, ir::Scalar::F32});
      } else {
        declared.push_back({i, ir::Scalar::F16, ir::Scalar::F32});
        declared.push_back({i, ir::Scalar::BF16, ir::Scalar::F32});
        if (kVariants[i].can_implement({.tf32 = true}, 80)) declared.push_back({i, ir::Scalar::F32, ir::Scalar::F32});
        if (kVariants[i].engine == MatmulEngine::Wgmma)  // FP8: K-major operands, bf16 out (torch._scaled_mm's usual)
          for (ir::Scalar f8 : {ir::Scalar::E4M3, ir::Scalar::E5M2})
            declared.push_back({i, f8, ir::Scalar::BF16, MatLayout::RowMajor, MatLayout::ColMajor});
      }
    }
    return declared;
  }());
  return f;
}

MatmulProblem matmul_resolved(const MatmulProblem& q) {
  MatmulProblem p = q;
  const bool ar = p.a == MatLayout::RowMajor, br = p.b == MatLayout::RowMajor;
  const uint32_t min_lda = ar ? p.k : p.m, min_ldb = br ? p.n : p.k;
  if (!p.lda) p.lda = min_lda;
  if (!p.ldb) p.ldb = min_ldb;
  if (!p.ldc) p.ldc = p.n;
  auto check = [](const char* what, uint32_t ld, uint32_t min) {
    if (ld < min)
      throw UsageError("matmul", "matmul", std::string(what) + " = " + std::to_string(ld) + " is smaller than the " +
                                               std::to_string(min) + " elements of a row (or column)");
  };
  check("lda", p.lda, min_lda);
  check("ldb", p.ldb, min_ldb);
  check("ldc", p.ldc, p.n);
  if (!p.stride_a) p.stride_a = uint64_t(p.lda) * (ar ? p.m : p.k);
  if (!p.stride_b) p.stride_b = uint64_t(p.ldb) * (br ? p.k : p.n);
  if (!p.stride_c) p.stride_c = uint64_t(p.ldc) * p.m;
  return p;
}

uint32_t matmul_k_chunk(const MatmulProblem& p) {
  const uint32_t per = (p.k + p.split_k - 1) / std::max(p.split_k, 1u), bk = ir::scalar_bytes(p.in) == 1 ? 128 : 64;
  return (per + bk - 1) / bk * bk;  // a multiple of every BK: k steps never cross into the next chunk (TMA reads whole steps)
}

ir::Kernel matmul_scale_kernel() {
  ir::KernelBuilder b("matmul_scale_c");
  auto C = b.param<float*>("c");
  auto m = b.param<uint32_t>("m");
  auto n = b.param<uint32_t>("n");
  auto ldc = b.param<uint32_t>("ldc");
  auto stride = b.param<uint64_t>("stride_c");
  auto beta = b.param<float>("beta");
  ir::Value col = b.global_id_x(), row = b.block_idx_y();
  b.if_(col < n && row < m, [&] {
    ir::Value idx = ir::cast<uint64_t>(b.block_idx_z()) * stride + ir::cast<uint64_t>(row * ldc + col);
    b.if_(beta == 0.0f, [&] { C[idx] = 0.0f; }).else_([&] {
      ir::Value old = C[idx];
      C[idx] = beta * old;
    });
  });
  return b.build();
}

namespace {
struct ScaleConfig {
  ir::Scalar out = ir::Scalar::F32;  // the one config
  auto fields() const { return std::tie(out); }
};
jit::Family<ScaleConfig>& scale_family() {
  static jit::Family<ScaleConfig> f("matmul_scale", [](const ScaleConfig&) { return matmul_scale_kernel(); }, {{}});
  return f;
}
}  // namespace

namespace {
// Work items of the persistent Wgmma kernels: tiles x batches x splits.
// Tile rows and columns; along the cluster's direction a multiple of it (a CTA past the
// last tile still loads its share of the tiles its peer reads).
uint32_t matmul_wgmma_tiles_m(const MatmulVariant& v, const MatmulProblem& p) {
  const uint32_t c = v.cluster_n ? 1 : v.cluster;
  return ((p.m + v.bm - 1) / v.bm + c - 1) / c * c;
}
uint32_t matmul_wgmma_tiles_n(const MatmulVariant& v, const MatmulProblem& p) {
  const uint32_t c = v.cluster_n ? v.cluster : 1;
  return ((p.n + v.bn - 1) / v.bn + c - 1) / c * c;
}

uint32_t matmul_wgmma_work(const MatmulVariant& v, const MatmulProblem& p) {
  const uint64_t w = uint64_t(matmul_wgmma_tiles_n(v, p)) * matmul_wgmma_tiles_m(v, p) * p.batch * p.split_k;
  return static_cast<uint32_t>(std::min<uint64_t>(w, 0xffffffffu));
}

// The device's SMs (one persistent block each); 132 where no driver says (an H100's count,
// only for launch configs computed without a device).
uint32_t matmul_sm_count() {
  static const uint32_t n = [] {
    const int c = jit::interpret_mode() || !jit::driver::available() ? 0 : jit::driver::device_sm_count();
    return c > 0 ? static_cast<uint32_t>(c) : 132u;
  }();
  return n;
}

}  // namespace

jit::LaunchConfig matmul_launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  if (v.engine == MatmulEngine::Wgmma)  // persistent: at most one block per SM, each takes work items in turn
    return {.grid = {std::min<uint32_t>(matmul_wgmma_work(v, p), matmul_sm_count() / v.cluster * v.cluster), 1, 1},
            .block = {v.threads()},
            .shared_bytes = matmul_wgmma_shared_bytes(v),
            .stream = stream,
            .cluster = {v.cluster, 1, 1}};
  if (v.engine == MatmulEngine::Gemv) return matmul_gemv_launch_config(v, p, stream);
  const uint32_t smem = v.engine == MatmulEngine::MmaAsync ? matmul_async_shared_bytes(v, p.in, p.a, p.b) : 0;
  return {.grid = {(p.n + v.bn - 1) / v.bn, (p.m + v.bm - 1) / v.bm, p.batch * p.split_k},
          .block = {v.threads()},
          .shared_bytes = smem,
          .stream = stream};
}

namespace {
// The tensor map of operand A (a) or B: 3-D (contiguous, other, batch), 128-byte swizzle,
// out-of-bounds elements read as zeros.
jit::TensorMap operand_map(const MatmulVariant& v, const MatmulProblem& p, bool is_a, uint64_t addr) {
  const bool row = (is_a ? p.a : p.b) == MatLayout::RowMajor;
  const bool k_major = is_a ? row : !row;
  const uint64_t es = static_cast<uint64_t>(ir::scalar_bytes(p.in));
  const uint64_t outer = is_a ? p.m : p.n;  // the operand's m or n extent
  const uint64_t ld = is_a ? p.lda : p.ldb, stride = is_a ? p.stride_a : p.stride_b;
  const MatmulTmaBox box = matmul_wgmma_box(v, p.in, is_a, k_major);
  jit::TensorMapTiled t;
  t.dtype = p.in;
  t.global_address = addr;
  t.global_dims = {k_major ? p.k : outer, k_major ? outer : p.k, p.batch};
  t.global_strides = {ld * es, stride * es};
  t.box_dims = {box.inner, box.outer, 1};
  t.swizzle = jit::TensorMapSwizzle::B128;
  t.l2_promotion = jit::TensorMapL2Promotion::B256;
  return jit::encode_tensor_map_tiled(t);
}

void matmul_wgmma_launch(const MatmulVariant& v, const MatmulConfig& cfg, uint64_t a, uint64_t b, uint64_t c,
                         const MatmulProblem& p, const jit::Stream* stream, const MatmulScales& sc) {
  using jit::detail::make_arg;
  const jit::TensorMap ma = operand_map(v, p, true, a), mb = operand_map(v, p, false, b);
  // C through shared memory and TMA stores where the map can describe it (16-byte aligned
  // rows and batches) and nothing needs reading or adding: beta == 0 and no split-K. The
  // rows' length in bytes must be a multiple of 16 too: a TMA store writes the last
  // 16-byte chunk of a row whole, so columns n.. up to the next 16 bytes would be written
  // (measured on an H100 with n = 257, bf16: the row padding came back zeroed).
  const uint64_t oes = static_cast<uint64_t>(ir::scalar_bytes(p.out));
  const uint32_t tma_store = p.beta == 0.0f && p.split_k == 1 && c % 16 == 0 && p.ldc * oes % 16 == 0 &&
                             p.n * oes % 16 == 0 && (p.batch == 1 || p.stride_c * oes % 16 == 0);
  jit::TensorMap mc{};
  if (tma_store) {
    jit::TensorMapTiled t;
    t.dtype = p.out;
    t.global_address = c;
    t.global_dims = {p.n, p.m, p.batch};
    t.global_strides = {p.ldc * oes, p.stride_c * oes};
    t.box_dims = {static_cast<uint32_t>(128 / oes), 64, 1};
    t.swizzle = jit::TensorMapSwizzle::B128;
    mc = jit::encode_tensor_map_tiled(t);
  }
  const uint32_t tiles_n = matmul_wgmma_tiles_n(v, p), tiles_m = matmul_wgmma_tiles_m(v, p);
  const uint64_t out_bytes = static_cast<uint64_t>(ir::scalar_bytes(p.out));
  const uint32_t pairs = p.ldc % 2 == 0 && (p.batch == 1 || p.stride_c % 2 == 0) && c % (2 * out_bytes) == 0 && p.split_k == 1;
  const jit::detail::Arg args[] = {make_arg(ma),       make_arg(mb),       make_arg(mc),
                                   jit::detail::Arg{jit::detail::Arg::Pointer, p.out, 0, c, 0},
                                   make_arg(p.m),      make_arg(p.n),      make_arg(p.k),
                                   make_arg(p.ldc),    make_arg(p.alpha),  make_arg(p.beta),
                                   make_arg(p.stride_c), make_arg(p.split_k), make_arg(matmul_k_chunk(p)),
                                   make_arg(tiles_n),  make_arg(tiles_m),  make_arg(matmul_wgmma_work(v, p)),
                                   make_arg(pairs),    make_arg(tma_store),
                                   // FP8 kernels only: the scale pointers and which of them are given
                                   jit::detail::Arg{jit::detail::Arg::Pointer, ir::Scalar::F32, 0, sc.a, 0},
                                   jit::detail::Arg{jit::detail::Arg::Pointer, ir::Scalar::F32, 0, sc.b, 0},
                                   make_arg(uint32_t(sc.a != 0) | uint32_t(sc.b != 0) << 1)};
  size_t nargs = ir::scalar_bytes(p.in) == 1 ? std::size(args) : std::size(args) - 3;
  jit::detail::Arg all[std::size(args) + 1];
  std::copy(args, args + nargs, all);
  if (cfg.bias) all[nargs++] = jit::detail::Arg{jit::detail::Arg::Pointer, p.out, 0, p.epilogue.bias, 0};
  const jit::CompiledKernel& k = matmul_family().get(cfg);
  jit::LaunchConfig lc = matmul_launch_config(v, p, stream);
  if (v.cluster > 1) {  // a persistent grid of clusters: only as many as can be resident at once
    static std::atomic<int> resident[std::size(kVariants)];
    std::atomic<int>& r = resident[&v - kVariants];
    int n = r.load(std::memory_order_relaxed);
    if (n == 0) r.store(n = std::max(1, k.max_active_clusters(lc)), std::memory_order_relaxed);
    lc.grid.x = std::min<uint64_t>(lc.grid.x, uint64_t(n) * v.cluster);
  }
  k.launch_packed(lc, all, nargs);
}
}  // namespace

void matmul(const MatmulVariant& v, uint64_t a, uint64_t b, uint64_t c, const MatmulProblem& q, const jit::Stream* stream,
            const MatmulScales& scales) {
  if (&v < kVariants || &v >= kVariants + std::size(kVariants))
    throw UsageError("matmul", "matmul", "the variant is not a row of matmul_variants()");
  if ((scales.a || scales.b) && ir::scalar_bytes(q.in) != 1)
    throw UsageError("matmul", "matmul", std::string("scales: per-tensor scales apply to e4m3 / e5m2 inputs, not ") +
                                             ir::scalar_name(q.in) + " (fold a scale into alpha)");
  if (scales.a % 4 || scales.b % 4)
    throw UsageError("matmul", "matmul", "scales: the scale pointers must be 4-byte aligned f32 addresses (or 0)");
  std::string why;
  const int sm = codegen::parse_arch(jit::detail::backend().default_arch()).sm;
  if (!v.can_implement(q, sm, &why)) throw UsageError("matmul", "matmul", why);
  if (q.m == 0 || q.n == 0) return;
  const MatmulProblem p = matmul_resolved(q);
  const uint64_t need = std::max<uint32_t>(p.ptr_align, 1);
  if (a % need || b % need || c % need)
    throw UsageError("matmul", "matmul", "A, B and C must be " + std::to_string(need) +
                                             "-byte aligned as the problem's ptr_align says");
  if (p.epilogue.bias % ir::scalar_bytes(p.out))
    throw UsageError("matmul", "matmul", std::string("epilogue.bias: the address must be aligned to its ") +
                                             ir::scalar_name(p.out) + " elements");
  const MatmulConfig cfg{static_cast<uint32_t>(&v - kVariants), p.in, p.out, p.a, p.b, p.epilogue.bias != 0,
                         p.epilogue.activation ? matmul_activation(*p.epilogue.activation) : 0,
                         p.epilogue.fast_math && p.epilogue.activation};
  using jit::detail::Arg;
  using jit::detail::make_arg;
  if (p.split_k > 1)  // C = beta * C first; the blocks then add alpha * their chunk's product
    scale_family().launch(ScaleConfig{}, {.grid = {(p.n + 255) / 256, p.m, p.batch}, .block = {256}, .stream = stream},
                          jit::DevicePtr<float>{c}, p.m, p.n, p.ldc, p.stride_c, p.beta);
  if (v.engine == MatmulEngine::Wgmma) return matmul_wgmma_launch(v, cfg, a, b, c, p, stream, scales);
  if (v.engine == MatmulEngine::Gemv) return matmul_gemv_launch(v, cfg, a, b, c, p, stream);
  const Arg args[] = {Arg{Arg::Pointer, p.in, 0, a, 0},  Arg{Arg::Pointer, p.in, 0, b, 0}, Arg{Arg::Pointer, p.out, 0, c, 0},
                      make_arg(p.m),     make_arg(p.n),     make_arg(p.k),     make_arg(p.lda), make_arg(p.ldb),
                      make_arg(p.ldc),   make_arg(p.alpha), make_arg(p.beta),  make_arg(p.stride_a),
                      make_arg(p.stride_b), make_arg(p.stride_c), make_arg(p.split_k), make_arg(matmul_k_chunk(p)),
                      Arg{Arg::Pointer, p.out, 0, p.epilogue.bias, 0}};  // bias: only with cfg.bias
  const size_t nargs = cfg.bias ? std::size(args) : std::size(args) - 1;
  matmul_family().get(cfg).launch_packed(matmul_launch_config(v, p, stream), args, nargs);
}

}  // namespace kaio::ops
