// The fused matmul epilogue, C = act(alpha * A * B + beta * C + bias[col]): its kernels
// (names, the bias parameter, every engine assembled without local memory, the Wgmma rows
// for sm_90a), the refusals (split-K, an activation that is not one input and no scalars,
// a misaligned bias), and [gpu] (KAIO_INTERPRET=1 where there is no GPU): one row of each
// engine, and every Wgmma row on an sm_90 device (both of its epilogues: TMA stores at
// beta == 0 with whole 16-byte rows, register stores otherwise), against float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/matmul.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "matmul_support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ops::MatLayout;
using ops::MatmulProblem;
using test::matmul::as_double;
using test::matmul::index_of;
using test::matmul::random_vec;

namespace {

// An activation and its float64 reference.
struct Act {
  const ops::detail::MapKernels* map;  // null: none
  std::function<double(double)> ref;
};
Act none() { return {nullptr, [](double x) { return x; }}; }
Act relu() { return {&ops::elementwise_op("relu"), [](double x) { return x < 0 ? 0.0 : x; }}; }
Act gelu() { return {&ops::elementwise_op("gelu"), [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }}; }
Act silu() { return {&ops::elementwise_op("silu"), [](double x) { return x / (1 + std::exp(-x)); }}; }
Act gelu_tanh() {
  return {&ops::elementwise_op("gelu_tanh"),
          [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }};
}

ops::MatmulConfig config_of(const ops::MatmulVariant& v, ir::Scalar in, ir::Scalar out, bool bias, const Act& act,
                            MatLayout b = MatLayout::RowMajor) {
  return {index_of(v), in, out, MatLayout::RowMajor, b, bias, act.map ? ops::matmul_activation(*act.map) : 0};
}

// Runs q with a random bias (when `bias`) and `act`, and checks every element of C against
// float64; what lies between C's rows and batches stays untouched.
// `fast`: the activation in .approx forms (tanh.approx: 2^-10.9 relative).
template <class In, class Out>
void check_epilogue(const ops::MatmulVariant& v, MatmulProblem q, bool bias, const Act& act, bool fast = false) {
  const MatmulProblem p = ops::matmul_resolved(q);
  INFO(v.name << " " << p.m << "x" << p.n << "x" << p.k << " batch " << p.batch << " in " << ir::scalar_name(p.in)
              << " out " << ir::scalar_name(p.out) << " beta " << p.beta << " bias " << bias << " activation "
              << (act.map ? act.map->spec().name : "none") << (fast ? " (fast math)" : ""));
  REQUIRE(v.can_implement(p, jit::interpret_mode() ? 80 : codegen::parse_arch(jit::detail::backend().default_arch()).sm));
  std::vector<In> a = random_vec<In>(p.stride_a * p.batch), b = random_vec<In>(p.stride_b * p.batch);
  std::vector<Out> c0 = random_vec<Out>(p.stride_c * p.batch), bv = random_vec<Out>(p.n);
  DeviceBuffer<In> da(a), db(b);
  DeviceBuffer<Out> dc(c0), dbias(bv);
  q.epilogue = {.bias = bias ? dbias.device_address() : 0, .activation = act.map, .fast_math = fast};
  ops::matmul(v, da.device_address(), db.device_address(), dc.device_address(), q);
  const std::vector<Out> c = dc.to_host();
  const bool f32_simt = std::is_same_v<In, float> && !p.tf32;
  const double rel = f32_simt ? double(p.k + 4) * 0x1p-24 : double(p.k + 8) * 0x1p-22;
  const double out = std::is_same_v<Out, half> ? 0x1p-11 : std::is_same_v<Out, bfloat16> ? 0x1p-8 : 0;
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i = 0; i < p.m; ++i)
      for (uint32_t j = 0; j < p.n; ++j) {
        auto [pre, mag] = test::matmul::reference_at(p, a, b, c0, z, i, j, p.alpha);
        if (bias) {
          pre += as_double(bv[j]);
          mag += std::abs(as_double(bv[j]));
        }
        const double ref = act.ref(pre);
        const size_t ci = z * p.stride_c + size_t(i) * p.ldc + j;
        INFO("batch " << z << " C[" << i << "][" << j << "] = " << as_double(c[ci]) << ", float64 " << ref
                      << " (before the activation " << pre << ")");
        // the activations' slopes are at most 1.13; their f32 evaluation adds a few ulps
        const double act_err = fast ? 0x1p-10 * std::abs(pre) : 4e-6 * std::abs(pre);
        REQUIRE(std::abs(as_double(c[ci]) - ref) <= 1.13 * rel * mag + out * std::abs(ref) + act_err + 0x1p-30);
      }
  for (size_t i = 0; i < c.size(); ++i) {
    const size_t z = i / p.stride_c, rem = i % p.stride_c, row = rem / p.ldc, col = rem % p.ldc;
    if (z >= p.batch || row >= p.m || col >= p.n) REQUIRE(as_double(c[i]) == as_double(c0[i]));
  }
}

bool on_sm90() { return !jit::interpret_mode() && codegen::parse_arch(jit::detail::backend().default_arch()).sm == 90; }

}  // namespace

TEST_CASE("matmul epilogue: kernels name the epilogue, take the bias last, and assemble on every engine", "[ops][matmul][epilogue][nvjitlink]") {
  // one row of each pre-Hopper engine for sm_80 and sm_90, every Wgmma row for sm_90a
  for (const char* name : {"simt_32x32x8_2x2", "simt_db_128x128x8_8x8", "mma_64x64x32_w32x32", "mma_cp_128x256x64_w64x64_s3",
                           "gemv_m4_w8_n4_k4"}) {
    const ops::MatmulVariant& v = ops::matmul_variant(name);
    const bool simt = v.engine == ops::MatmulEngine::Simt || v.engine == ops::MatmulEngine::SimtDb;
    const ir::Scalar in = simt ? ir::Scalar::F32 : ir::Scalar::BF16, out = simt ? ir::Scalar::F32 : ir::Scalar::BF16;
    const ops::MatmulConfig cfg = config_of(v, in, out, true, gelu());
    ir::Kernel k = ops::matmul_kernel(cfg);
    INFO(cfg.str());
    CHECK_THAT(k.name(), Contains("_bias_gelu"));
    CHECK_THAT(cfg.str(), Contains("+ bias, gelu"));
    CHECK(k.params().back().name == "bias");
    CHECK(k.params().size() == ops::matmul_kernel({index_of(v), in, out}).params().size() + 1);
    for (const char* arch : {"sm_80", "sm_90"}) {
      jit::LinkResult r = test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
      jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
    }
  }
  for (const ops::MatmulVariant* v : test::matmul::rows_of(ops::MatmulEngine::Wgmma))
    for (ir::Scalar out : {ir::Scalar::BF16, ir::Scalar::F32}) {
      const ops::MatmulConfig cfg = config_of(*v, ir::Scalar::BF16, out, true, silu());
      ir::Kernel k = ops::matmul_kernel(cfg);
      INFO(cfg.str());
      CHECK_THAT(k.name(), Contains("_bias_silu"));
      CHECK(k.params().back().name == "bias");
      const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
      jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
      if (!test::as_loaded(k, ptx, r)) continue;  // a row with setmaxnreg: as the driver compiles it
      jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
    }
  // fast math: the activation's tanh in its .approx form
  {
    const ops::MatmulVariant& v = ops::matmul_variant("mma_cp_64x64x32_w32x32_s4");
    ops::MatmulConfig cfg = config_of(v, ir::Scalar::BF16, ir::Scalar::BF16, true, gelu_tanh());
    CHECK(codegen::emit_ptx(ops::matmul_kernel(cfg), {"sm_80", 9, 0}).find("tanh.approx.f32") == std::string::npos);
    cfg.fast_math = true;
    ir::Kernel k = ops::matmul_kernel(cfg);
    CHECK_THAT(k.name(), Contains("_bias_gelu_tanh_fast"));
    CHECK_THAT(cfg.str(), Contains("gelu_tanh (fast math)"));
    CHECK_THAT(codegen::emit_ptx(k, {"sm_80", 9, 0}), Contains("tanh.approx.f32"));
  }
  // without an epilogue a kernel is what it was: no bias parameter, no suffix
  ir::Kernel plain = ops::matmul_kernel({index_of(ops::matmul_variant("simt_32x32x8_2x2"))});
  CHECK(plain.params().back().name == "k_chunk");
  CHECK(plain.name().find("bias") == std::string::npos);
}

TEST_CASE("matmul epilogue: an activation is one input and no scalars; maps of one name stay apart", "[ops][matmul][epilogue]") {
  UsageError e = test::usage_error_of([] { (void)ops::matmul_activation(ops::elementwise_op("silu_gate")); });
  CHECK(e.op() == "matmul");
  CHECK_THAT(e.what(), Contains("epilogue.activation") && Contains("'silu_gate' takes 2 inputs") &&
                           Contains("one input and no scalars"));
  auto scaled = ops::map<float>("scaled_act", 1, 1, [](ir::KernelBuilder&, std::span<ir::Value> in,
                                                       std::span<ir::Value> s) { return s[0] * in[0]; });
  CHECK_THAT(test::usage_error_of([&] { (void)ops::matmul_activation(scaled.kernels()); }).what(),
             Contains("1 scalars"));
  // a map made after another of its name died has its own serial, so its own kernels
  uint64_t first = 0;
  {
    auto m = ops::map<float>("epi_act", 1, [](ir::KernelBuilder&, std::span<ir::Value> in) { return in[0] * 2.0f; });
    first = ops::matmul_activation(m.kernels());
    CHECK(ops::matmul_activation(m.kernels()) == first);  // registered once
  }
  auto m2 = ops::map<float>("epi_act", 1, [](ir::KernelBuilder&, std::span<ir::Value> in) { return -in[0]; });
  const uint64_t second = ops::matmul_activation(m2.kernels());
  CHECK(second != first);
  const ops::MatmulVariant& v = ops::matmul_variant("simt_32x32x8_2x2");
  ir::Kernel k1 = ops::matmul_kernel({index_of(v), ir::Scalar::F32, ir::Scalar::F32, MatLayout::RowMajor,
                                      MatLayout::RowMajor, false, first});
  ir::Kernel k2 = ops::matmul_kernel({index_of(v), ir::Scalar::F32, ir::Scalar::F32, MatLayout::RowMajor,
                                      MatLayout::RowMajor, false, second});
  CHECK(k1.name() == k2.name());  // both "epi_act" ...
  CHECK(codegen::emit_ptx(k1, {"sm_80", 9, 0}) != codegen::emit_ptx(k2, {"sm_80", 9, 0}));  // ... with their own bodies
  // split-K adds partial products: no epilogue
  std::string why;
  MatmulProblem p{.m = 8, .n = 8, .k = 4096, .split_k = 4};
  CHECK(v.can_implement(p, 80));
  p.epilogue.activation = &ops::elementwise_op("relu");
  CHECK_FALSE(v.can_implement(p, 80, &why));
  CHECK_THAT(why, Contains("simt_32x32x8_2x2") && Contains("fused epilogue") && Contains("split_k == 1"));
  p.epilogue = {.bias = 256};
  CHECK_FALSE(v.can_implement(p, 80, &why));
}

TEST_CASE("matmul epilogue: bias and activations against float64, one row of each engine", "[gpu][ops][matmul][epilogue]") {
  const MatmulProblem base{.m = 37, .n = 45, .k = 70, .ldc = 47, .batch = 2, .alpha = 0.75f};
  // f32 SIMT rows (SimtDb: leading dimensions and batch strides of whole 16-byte vectors)
  for (const char* name : {"simt_32x32x8_2x2", "simt_db_64x64x16_4x4"}) {
    const ops::MatmulVariant& v = ops::matmul_variant(name);
    MatmulProblem p = base;
    p.lda = 72;
    p.ldb = 48;
    p.ldc = 48;
    check_epilogue<float, float>(v, p, true, gelu());
    p.beta = -0.5f;
    check_epilogue<float, float>(v, p, true, relu());
    check_epilogue<float, float>(v, p, false, silu());
    p.beta = 0.0f;
    check_epilogue<float, float>(v, p, true, none());
  }
  // mma.sync (element stores) and cp.async (pair stores where C allows) rows, 16-bit out
  for (const char* name : {"mma_64x64x32_w32x32", "mma_cp_64x64x32_w32x32_s4"}) {
    const ops::MatmulVariant& v = ops::matmul_variant(name);
    MatmulProblem p = base;
    p.in = p.out = ir::Scalar::BF16;
    p.lda = 72;
    p.ldb = 48;
    check_epilogue<bfloat16, bfloat16>(v, p, true, gelu());
    p.ldc = 48;
    p.beta = 0.5f;
    check_epilogue<bfloat16, bfloat16>(v, p, true, silu());
    check_epilogue<bfloat16, bfloat16>(v, p, true, gelu_tanh(), true);
    p.in = p.out = ir::Scalar::F16;
    check_epilogue<half, half>(v, p, false, relu());
    p.out = ir::Scalar::F32;
    check_epilogue<half, float>(v, p, true, none());
  }
  // GEMV: m <= 4 rows
  {
    const ops::MatmulVariant& v = ops::matmul_variant("gemv_m4_w8_n4_k4");
    for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
      MatmulProblem p{.m = 3, .n = 72, .k = 80, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16, .b = lb, .alpha = 1.25f};
      check_epilogue<bfloat16, bfloat16>(v, p, true, gelu());
      p.beta = 1.0f;
      p.out = ir::Scalar::F32;
      check_epilogue<bfloat16, float>(v, p, true, relu());
    }
  }
  // a user map as the activation
  auto clamp = ops::map<float>("epi_clamp", 1, [](ir::KernelBuilder&, std::span<ir::Value> in) {
    return ir::min(ir::max(in[0], -0.25f), 0.25f);
  });
  check_epilogue<float, float>(ops::matmul_variant("simt_32x32x8_2x2"), base, true,
                               {&clamp.kernels(), [](double x) { return std::min(std::max(x, -0.25), 0.25); }});
  // a misaligned bias is refused before anything is launched
  DeviceBuffer<float> x(std::vector<float>(64, 1.0f));
  MatmulProblem p{.m = 4, .n = 4, .k = 4};
  p.epilogue.bias = x.device_address() + 2;
  UsageError e = test::usage_error_of([&] {
    ops::matmul(ops::matmul_variant("simt_32x32x8_2x2"), x.device_address(), x.device_address(), x.device_address(), p);
  });
  CHECK_THAT(e.what(), Contains("epilogue.bias") && Contains("aligned"));
}

TEST_CASE("matmul epilogue: every Wgmma row, TMA-store and register epilogues, against float64", "[gpu][ops][matmul][epilogue][wgmma]") {
  if (!on_sm90()) {
    WARN("the wgmma engine runs on sm_90 devices only; skipped here");
    return;
  }
  for (const ops::MatmulVariant* v : test::matmul::rows_of(ops::MatmulEngine::Wgmma)) {
    // beta == 0, rows of whole 16-byte chunks: C leaves by TMA stores (n = 264: the last
    // tile's columns past n are clipped; the bias is read only below n)
    MatmulProblem p{.m = 200, .n = 264, .k = 192, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16, .ldc = 272,
                    .batch = 2, .alpha = 0.5f};
    p.stride_c = uint64_t(p.ldc) * p.m + 8;
    check_epilogue<bfloat16, bfloat16>(*v, p, true, gelu());
    check_epilogue<bfloat16, bfloat16>(*v, p, true, gelu_tanh(), true);
    p.out = ir::Scalar::F32;
    check_epilogue<bfloat16, float>(*v, p, true, silu());
    p.in = p.out = ir::Scalar::F16;
    p.b = MatLayout::ColMajor;
    p.ldb = 192;
    check_epilogue<half, half>(*v, p, false, relu());
    // register stores: beta != 0, or n = 257
    p.beta = -1.0f;
    check_epilogue<half, half>(*v, p, true, gelu());
    p.beta = 0.0f;
    p.n = 257;
    p.in = p.out = ir::Scalar::BF16;
    p.b = MatLayout::RowMajor;
    p.ldb = 264;
    check_epilogue<bfloat16, bfloat16>(*v, p, true, none());
  }
}
