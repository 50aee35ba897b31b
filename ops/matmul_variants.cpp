// The matmul variant table, what each variant can serve, the kernel family and the launch.
#include <algorithm>
#include <string_view>
#include <string>
#include <tuple>

#include "kaio/ir/builder.h"
#include "kaio/jit/device.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_common.h"

namespace kaio::ops {

namespace {

using E = MatmulEngine;

// The table, in order of preference. The caps bring a row's registers (nvJitLink's report,
// sm_90) to the next occupancy step without spilling (tests/ops/test_matmul.cpp checks
// every layout for spills).
constexpr MatmulVariant kVariants[] = {
    {.name = "simt_db_128x128x8_8x8", .engine = E::SimtDb, .bm = 128, .bn = 128, .bk = 8, .thread_m = 8, .thread_n = 8,
     .max_registers = 128},  // 149 registers -> 128: 2 blocks per SM
    {.name = "simt_db_128x128x16_8x8", .engine = E::SimtDb, .bm = 128, .bn = 128, .bk = 16, .thread_m = 8, .thread_n = 8},
    // 8 x 16 a thread (247 registers, one block an SM): half the loads and address work per
    // FFMA of 8 x 8; +1-2% at 4096^3 and 8192^3 on an H200 (bench/NOTES.md).
    {.name = "simt_db_128x256x8_8x16", .engine = E::SimtDb, .bm = 128, .bn = 256, .bk = 8, .thread_m = 8, .thread_n = 16},
    // the same, one k-step a loop iteration (the 35 KB two-step loop missed the instruction
    // cache: ncu's no-instruction stalls 0.13 -> 0.04 a warp instruction); +0.5-1% at 4096^3
    {.name = "simt_db_128x256x8_8x16_r", .engine = E::SimtDb, .bm = 128, .bn = 256, .bk = 8, .thread_m = 8, .thread_n = 16,
     .rolled = true},
    {.name = "simt_db_128x64x8_8x8", .engine = E::SimtDb, .bm = 128, .bn = 64, .bk = 8, .thread_m = 8, .thread_n = 8},  // a cap of 128 spills (row/col)
    {.name = "simt_db_64x64x16_4x4", .engine = E::SimtDb, .bm = 64, .bn = 64, .bk = 16, .thread_m = 4, .thread_n = 4,
     .max_registers = 72},  // uncapped: 64 under .maxntid 256, spilling
    {.name = "simt_128x128x8_8x8", .engine = E::Simt, .bm = 128, .bn = 128, .bk = 8, .thread_m = 8, .thread_n = 8},
    {.name = "simt_64x64x8_4x4", .engine = E::Simt, .bm = 64, .bn = 64, .bk = 8, .thread_m = 4, .thread_n = 4,
     .max_registers = 64},  // 77 registers -> 64: 4 blocks per SM
    {.name = "simt_32x32x8_2x2", .engine = E::Simt, .bm = 32, .bn = 32, .bk = 8, .thread_m = 2, .thread_n = 2},
    {.name = "mma_128x128x32_w64x64", .engine = E::Mma, .bm = 128, .bn = 128, .bk = 32, .warp_m = 64, .warp_n = 64},
    {.name = "mma_64x64x32_w32x32", .engine = E::Mma, .bm = 64, .bn = 64, .bk = 32, .warp_m = 32, .warp_n = 32,
     .max_registers = 128},  // 136 registers -> 128: 4 blocks per SM
    {.name = "mma_cp_128x256x32_w64x64_s3", .engine = E::MmaAsync, .bm = 128, .bn = 256, .bk = 32, .warp_m = 64, .warp_n = 64, .stages = 3},
    {.name = "mma_cp_128x256x64_w64x64_s3", .engine = E::MmaAsync, .bm = 128, .bn = 256, .bk = 64, .warp_m = 64, .warp_n = 64, .stages = 3},
    {.name = "mma_cp_256x128x64_w64x64_s3", .engine = E::MmaAsync, .bm = 256, .bn = 128, .bk = 64, .warp_m = 64, .warp_n = 64, .stages = 3},
    {.name = "mma_cp_128x128x32_w64x64_s4", .engine = E::MmaAsync, .bm = 128, .bn = 128, .bk = 32, .warp_m = 64, .warp_n = 64, .stages = 4},
    {.name = "mma_cp_128x64x32_w64x32_s3", .engine = E::MmaAsync, .bm = 128, .bn = 64, .bk = 32, .warp_m = 64, .warp_n = 32,
     .stages = 3},  // a cap of 128 spills (tf32)
    {.name = "mma_cp_64x64x32_w32x32_s4", .engine = E::MmaAsync, .bm = 64, .bn = 64, .bk = 32, .warp_m = 32, .warp_n = 32,
     .stages = 4, .max_registers = 96},  // 106 registers -> 96: 5 blocks per SM
    {.name = "mma_cp_16x32x128_w16x16_s4", .engine = E::MmaAsync, .bm = 16, .bn = 32, .bk = 128, .warp_m = 16, .warp_n = 16,
     .stages = 4},  // m <= 16: no empty mma rows
    // m <= 16, 16-bit: two warps of one tile issue too few instructions to keep an SM's
    // loads coming (the k-step is a chain of 8 ldmatrix + mma); four warps along k each
    // take 2 of the 8 mma k-steps of a stage
    {.name = "mma_cp_16x32x128_w16x16k4_s4", .engine = E::MmaAsync, .bm = 16, .bn = 32, .bk = 128, .warp_m = 16, .warp_n = 16,
     .warp_k = 4, .stages = 4},
    // the same with 8 stages (7 k-steps, 84 KB, in flight a block): the skinny rows wait on
    // memory latency with little in flight (bench/NOTES.md); f16 16x4096x4096 +2-5%
    {.name = "mma_cp_16x32x128_w16x16k4_s8", .engine = E::MmaAsync, .bm = 16, .bn = 32, .bk = 128, .warp_m = 16, .warp_n = 16,
     .warp_k = 4, .stages = 8},
    {.name = "mma_cp_16x64x128_w16x16k2_s4", .engine = E::MmaAsync, .bm = 16, .bn = 64, .bk = 128, .warp_m = 16, .warp_n = 16,
     .warp_k = 2, .stages = 4},
    // Hopper: BK is 128 bytes of k (64 for 16-bit elements, 32 for tf32)
    {.name = "wgmma_256x128x64_s4_c2", .engine = E::Wgmma, .bm = 256, .bn = 128, .bk = 64, .consumer_m = 128, .stages = 4, .cluster = 2},
    {.name = "wgmma_256x128x64_s4_n2", .engine = E::Wgmma, .bm = 256, .bn = 128, .bk = 64, .consumer_m = 128, .stages = 4, .cluster = 2,
     .cluster_n = true},
    {.name = "wgmma_256x128x64_s4", .engine = E::Wgmma, .bm = 256, .bn = 128, .bk = 64, .consumer_m = 128, .stages = 4},
    // 192 accumulators a consumer thread: past the 168 of a 384-thread block, so the producer
    // hands its registers over (40 left to it, 232 to each consumer)
    {.name = "wgmma_256x192x64_s3", .engine = E::Wgmma, .bm = 256, .bn = 192, .bk = 64, .consumer_m = 128, .stages = 3,
     .consumer_regs = 232},
    {.name = "wgmma_pp_128x128x64_s6", .engine = E::Wgmma, .bm = 128, .bn = 128, .bk = 64, .consumer_m = 128, .stages = 6, .pingpong = true},
    {.name = "wgmma_pp_64x256x64_s4", .engine = E::Wgmma, .bm = 64, .bn = 256, .bk = 64, .consumer_m = 64, .stages = 4, .pingpong = true},
    {.name = "wgmma_128x256x64_s4_c2", .engine = E::Wgmma, .bm = 128, .bn = 256, .bk = 64, .consumer_m = 64, .stages = 4, .cluster = 2},
    {.name = "wgmma_128x256x64_s4", .engine = E::Wgmma, .bm = 128, .bn = 256, .bk = 64, .consumer_m = 64, .stages = 4},
    {.name = "wgmma_128x128x64_s6", .engine = E::Wgmma, .bm = 128, .bn = 128, .bk = 64, .consumer_m = 64, .stages = 6},
    {.name = "wgmma_64x128x64_s8", .engine = E::Wgmma, .bm = 64, .bn = 128, .bk = 64, .consumer_m = 64, .stages = 8},
    // GEMV, m <= BM: BK 16-byte loads of B per thread and step
    {.name = "gemv_m1_w8_n4_k8", .engine = E::Gemv, .bm = 1, .bk = 8, .warps = 8, .lanes = 4},
    {.name = "gemv_m1_w8_n8_k8", .engine = E::Gemv, .bm = 1, .bk = 8, .warps = 8, .lanes = 8},    // B row-major: 128-byte row segments
    {.name = "gemv_m1_w8_n2_k8", .engine = E::Gemv, .bm = 1, .bk = 8, .warps = 8, .lanes = 2},    // B col-major: 16 columns a block, more blocks
    {.name = "gemv_m1_w16_n4_k8", .engine = E::Gemv, .bm = 1, .bk = 8, .warps = 16, .lanes = 4},  // 512 threads: 16-bit B row-major, 128 blocks at n = 4096
    {.name = "gemv_m4_w8_n4_k4", .engine = E::Gemv, .bm = 4, .bk = 4, .warps = 8, .lanes = 4},
    {.name = "gemv_m8_w8_n4_k4", .engine = E::Gemv, .bm = 8, .bk = 4, .warps = 8, .lanes = 4},
};

// Rules every row keeps whatever its engine, checked when the library compiles; each
// engine's own rules (MatmulEngineDef::valid) run when the family is made.
constexpr bool row_ok(const MatmulVariant& v) {
  const bool simt = v.engine == E::Simt || v.engine == E::SimtDb, mma = v.engine == E::Mma || v.engine == E::MmaAsync;
  const bool wg = v.engine == E::Wgmma, gemv = v.engine == E::Gemv;
  if (v.name[0] == 0 || v.bm == 0 || v.bk == 0 || (v.bn == 0) != gemv) return false;
  if ((v.thread_m || v.thread_n) != simt || (v.warp_m || v.warp_n) != mma || (v.consumer_m != 0) != wg ||
      (v.warps || v.lanes) != gemv)
    return false;  // an engine's tile fields, and only those
  if (simt && (v.bm % v.thread_m || v.bn % v.thread_n)) return false;
  if (mma && (v.warp_m % 16 || v.warp_n % 8 || v.bm % v.warp_m || v.bn % v.warp_n)) return false;
  if (v.warp_k == 0 || (v.warp_k != 1 && (v.engine != E::MmaAsync || v.bk % (16 * v.warp_k)))) return false;  // whole mma k-steps each
  if (wg && (v.bm % v.consumer_m || (v.pingpong && v.consumer_m != v.bm))) return false;
  if (!wg && (v.cluster != 1 || v.cluster_n || v.pingpong || v.consumer_regs)) return false;  // Wgmma's alone
  if (v.stages != 1 && v.engine != E::MmaAsync && !wg) return false;
  return true;
}
constexpr bool table_ok() {
  for (const MatmulVariant& v : kVariants)
    if (!row_ok(v)) return false;
  for (size_t i = 0; i < std::size(kVariants); ++i)
    for (size_t j = 0; j < i; ++j)
      if (std::string_view(kVariants[i].name) == kVariants[j].name) return false;  // names are unique
  return true;
}
static_assert(table_ok(), "a matmul variant row breaks the table's rules (row_ok)");

const char* layout_name(MatLayout l) { return l == MatLayout::RowMajor ? "row" : "col"; }

}  // namespace

namespace detail {

const MatmulEngineDef& engine(MatmulEngine e) {
  static const MatmulEngineDef* const defs[] = {
#define KAIO_MATMUL_ENGINE(Engine, file) &kMatmulEngine##Engine,
#include "kaio/ops/matmul_engines.def"
#undef KAIO_MATMUL_ENGINE
  };
  return *defs[static_cast<size_t>(e)];
}

bool refuse(const MatmulVariant& v, std::string* why, const std::string& msg) {
  if (why) *why = std::string("variant ") + v.name + ": " + msg;
  return false;
}

bool vector_rows_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why) {
  const uint64_t per = 16 / static_cast<uint64_t>(ir::scalar_bytes(p.in));  // elements per vector
  const bool ar = p.a == MatLayout::RowMajor, br = p.b == MatLayout::RowMajor;
  const uint64_t lda = p.lda ? p.lda : (ar ? p.k : p.m), ldb = p.ldb ? p.ldb : (br ? p.n : p.k);
  const uint64_t sa = p.stride_a ? p.stride_a : lda * (ar ? p.m : p.k), sb = p.stride_b ? p.stride_b : ldb * (br ? p.k : p.n);
  if (p.ptr_align % 16) return refuse(v, why, "16-byte loads need 16-byte aligned A and B, the problem promises " + std::to_string(p.ptr_align));
  if (lda % per || ldb % per)
    return refuse(v, why, "16-byte loads along the rows: lda and ldb must be multiples of " + std::to_string(per) +
                              " elements, got " + std::to_string(lda) + " and " + std::to_string(ldb));
  if (p.batch > 1 && (sa % per || sb % per))
    return refuse(v, why, "batch strides of A and B must be multiples of " + std::to_string(per) + " elements");
  return true;
}

bool mma_types_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why) {
  const bool tf32 = p.in == ir::Scalar::F32 && p.tf32;
  if (p.in != ir::Scalar::F16 && p.in != ir::Scalar::BF16 && !tf32)
    return refuse(v, why, "tensor cores take f16 or bf16 inputs here (f32 with problem.tf32), not " + std::string(ir::scalar_name(p.in)));
  if (p.out != ir::Scalar::F32 && p.out != p.in)
    return refuse(v, why, "the output is f32 or the input type, not " + std::string(ir::scalar_name(p.out)));
  return true;
}

jit::LaunchConfig tiled_launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream,
                                      uint32_t shared_bytes) {
  return {.grid = {(p.n + v.bn - 1) / v.bn, (p.m + v.bm - 1) / v.bm, p.batch * p.split_k},
          .block = {v.threads()},
          .shared_bytes = shared_bytes,
          .stream = stream};
}

void launch_common(const MatmulConfig& c, const MatmulOperands& o, const MatmulProblem& p, const jit::LaunchConfig& lc,
                   std::span<const jit::detail::Arg> extra) {
  MatmulSignature sig(c);
  sig.a.host = o.a;
  sig.b.host = o.b;
  sig.c.host = o.c;
  sig.m.host = p.m;
  sig.n.host = p.n;
  sig.k.host = p.k;
  sig.lda.host = p.lda;
  sig.ldb.host = p.ldb;
  sig.ldc.host = p.ldc;
  sig.alpha.host = p.alpha;
  sig.beta.host = p.beta;
  sig.stride_a.host = p.stride_a;
  sig.stride_b.host = p.stride_b;
  sig.stride_c.host = p.stride_c;
  sig.splits.host = p.split_k;
  sig.k_chunk.host = matmul_k_chunk(p);
  kernel::PackedArgs args = kernel::pack(sig);
  for (const jit::detail::Arg& x : extra) args.push(x);
  if (c.bias) args.push(jit::detail::Arg{jit::detail::Arg::Pointer, p.out, 0, p.epilogue.bias, 0});  // the epilogue's, last
  matmul_family().get(c).launch_packed(lc, args.data(), args.size());
}

jit::LaunchConfig tiled_launch(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  return tiled_launch_config(v, p, stream);
}

void launch_with_config(const MatmulVariant& v, const MatmulConfig& c, const MatmulOperands& o, const MatmulProblem& p,
                        const jit::Stream* stream) {
  launch_common(c, o, p, engine(v.engine).launch_config(v, p, stream));
}

uint32_t simt_threads(const MatmulVariant& v) { return (v.bm / v.thread_m) * (v.bn / v.thread_n); }

bool simt_valid(const MatmulVariant& v, std::string* why) {
  if (simt_threads(v) > 1024 || simt_threads(v) % 32)
    return refuse(v, why, "(BM / thread_m) x (BN / thread_n) must be whole warps, at most 1024 threads");
  return true;
}

bool simt_types_ok(const MatmulVariant& v, const MatmulProblem& p, std::string* why) {
  if (p.in != ir::Scalar::F32 || p.out != ir::Scalar::F32)
    return refuse(v, why, std::string("SIMT computes f32 x f32 -> f32, not ") + ir::scalar_name(p.in) + " -> " + ir::scalar_name(p.out));
  return true;
}

void declare_f32(uint32_t index, const MatmulVariant&, std::vector<MatmulConfig>& out) {
  out.push_back({index, ir::Scalar::F32, ir::Scalar::F32});
}

uint32_t warp_tile_threads(const MatmulVariant& v) { return (v.bm / v.warp_m) * (v.bn / v.warp_n) * v.warp_k * 32; }

void declare_mma(uint32_t index, const MatmulVariant& v, std::vector<MatmulConfig>& out) {
  out.push_back({index, ir::Scalar::F16, ir::Scalar::F32});
  out.push_back({index, ir::Scalar::BF16, ir::Scalar::F32});
  if (v.can_implement({.tf32 = true}, 80)) out.push_back({index, ir::Scalar::F32, ir::Scalar::F32});
}

}  // namespace detail

uint32_t MatmulVariant::threads() const { return detail::engine(engine).threads(*this); }

bool MatmulVariant::can_implement(const MatmulProblem& p, int sm, std::string* why) const {
  if (!detail::engine(engine).can_implement(*this, p, sm, why)) return false;
  if (p.batch == 0 || p.batch > 65535) return detail::refuse(*this, why, "batch must be 1..65535, got " + std::to_string(p.batch));
  if (p.split_k == 0 || uint64_t(p.split_k) * p.batch > 65535)
    return detail::refuse(*this, why, "split_k must be 1.. with batch * split_k <= 65535, got " + std::to_string(p.split_k));
  if (p.split_k > 1 && (p.epilogue.bias || p.epilogue.activation))
    return detail::refuse(*this, why, "a fused epilogue (bias, activation) needs split_k == 1: split-K blocks add partial products into C");
  if (p.split_k > 1 && p.out != ir::Scalar::F32)
    return detail::refuse(*this, why, "split-K adds partial products atomically: the output must be f32, not " +
                                          std::string(ir::scalar_name(p.out)));
  if ((uint64_t(p.m) + bm - 1) / bm > 65535)
    return detail::refuse(*this, why, "m = " + std::to_string(p.m) + " needs more than 65535 block rows");
  return true;
}

std::string MatmulVariant::str() const {
  auto u = [](uint32_t x) { return std::to_string(x); };
  std::string s = std::string(name) + ": " + detail::engine(engine).name + " " + u(bm) + "x" + u(bn) + "x" + u(bk);
  if (thread_m) s += " thread " + u(thread_m) + "x" + u(thread_n);
  if (warp_m) s += " warp " + u(warp_m) + "x" + u(warp_n) + (warp_k > 1 ? "x" + u(warp_k) + "k" : "");
  if (consumer_m) s += " consumer " + u(consumer_m);
  if (warps) s += " warps " + u(warps) + " lanes " + u(lanes);
  s += " stages " + u(stages) + " regs " + u(max_registers) + " cluster " + u(cluster) + (cluster_n ? "n" : "");
  if (pingpong) s += " pingpong";
  if (rolled) s += " rolled";
  if (consumer_regs) s += " consumer_regs " + u(consumer_regs);
  return s;
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
  const detail::MatmulEngineDef& e = detail::engine(v.engine);
  if (e.build_sm && !v.can_implement(p, e.build_sm, &why)) throw UsageError("matmul", "matmul", why);
  return detail::engine(v.engine).build(v, c);
}

jit::Family<MatmulConfig>& matmul_family() {
  static jit::Family<MatmulConfig> f("matmul", matmul_kernel, [] {
    std::vector<MatmulConfig> declared;
    for (uint32_t i = 0; i < std::size(kVariants); ++i) {
      const MatmulVariant& v = kVariants[i];
      std::string why;
      if (!detail::engine(v.engine).valid(v, &why))
        throw InternalError(std::string("matmul variant ") + v.name + " is not a valid " + detail::engine(v.engine).name + " row: " + why);
      detail::engine(v.engine).declare(i, v, declared);
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

jit::LaunchConfig matmul_launch_config(const MatmulVariant& v, const MatmulProblem& p, const jit::Stream* stream) {
  return detail::engine(v.engine).launch_config(v, p, stream);
}

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
  const int sm = jit::device_info().sm;
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
  if (p.split_k > 1)  // C = beta * C first; the blocks then add alpha * their chunk's product
    scale_family().launch(ScaleConfig{}, {.grid = {(p.n + 255) / 256, p.m, p.batch}, .block = {256}, .stream = stream},
                          jit::DevicePtr<float>{c}, p.m, p.n, p.ldc, p.stride_c, p.beta);
  detail::engine(v.engine).launch(v, cfg, {.a = a, .b = b, .c = c, .scales = scales}, p, stream);
}

}  // namespace kaio::ops
