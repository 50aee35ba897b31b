// Matmul from the variant table: every variant in the interpreter at small odd shapes
// (1x1x1, 17x33x65, 70x3x129) against float64, both layouts, alpha/beta, batches; every
// declared config assembled for sm_80 and sm_90 without local memory; can_implement's
// refusals; [gpu]: ops::matmul on the device (or KAIO_INTERPRET=1) at edge shapes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/matmul.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "matmul_support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ops::MatLayout;
using ops::MatmulProblem;

namespace {

using test::matmul::as_double;
using test::matmul::at;
using test::matmul::random_vec;
using test::matmul::rng;

// Checks C against float64: |C - ref| <= tol_terms * sum |terms| + tol_out * |ref|.
template <class In, class Out>
void check_result(const MatmulProblem& p, const std::vector<In>& a, const std::vector<In>& b, const std::vector<Out>& c0,
                  const std::vector<Out>& c, double tol_terms, double tol_out) {
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i = 0; i < p.m; ++i)
      for (uint32_t j = 0; j < p.n; ++j) {
        const auto [ref, mag] = test::matmul::reference_at(p, a, b, c0, z, i, j, p.alpha);
        const size_t ci = z * p.stride_c + size_t(i) * p.ldc + j;
        INFO("batch " << z << " C[" << i << "][" << j << "] = " << as_double(c[ci]) << ", float64 " << ref);
        // f16 results below 2^-14 are subnormal: absolute rounding error up to 2^-25
        const double tiny = std::is_same_v<Out, half> ? 0x1p-25 : 1e-30;
        REQUIRE(std::abs(as_double(c[ci]) - ref) <= tol_terms * mag + tol_out * std::abs(ref) + tiny);
      }
  // what lies between the rows of a strided C is untouched
  for (size_t i = 0; i < c.size(); ++i) {
    size_t z = i / p.stride_c, rem = i % p.stride_c, row = rem / p.ldc, col = rem % p.ldc;
    if (z >= p.batch || row >= p.m || col >= p.n) REQUIRE(as_double(c[i]) == as_double(c0[i]));
  }
}

template <class In, class Out>
struct Tolerance {
  // f32 SIMT: a chain of k fmas; tensor cores: f32 sums of exact products; tf32: each input
  // truncated to 10 mantissa bits (2^-10 relative, twice per product); f16/bf16 output: one more rounding.
  // Split-K adds, per chunk, one alpha product and one atomic add, and the beta scaling.
  static double terms(uint32_t k, bool tf32, uint32_t splits) {
    const double roundings = k + 2 + (splits > 1 ? 2 * splits + 1 : 0);
    if (tf32) return 0x1p-9 + roundings * 0x1p-22;
    return std::is_same_v<In, float> ? roundings * 0x1p-24 : roundings * 0x1p-22;
  }
  static double out() {
    if constexpr (std::is_same_v<Out, half>) return 0x1p-11;
    else if constexpr (std::is_same_v<Out, bfloat16>) return 0x1p-8;
    else return 0;
  }
};

// The inputs of a problem (sized by its strides), C poisoned outside nothing: C starts random.
template <class In, class Out>
void run_problem(const ops::MatmulVariant& v, MatmulProblem q, bool launch) {
  const MatmulProblem p = ops::matmul_resolved(q);
  std::vector<In> a = random_vec<In>(p.stride_a * p.batch), b = random_vec<In>(p.stride_b * p.batch);
  std::vector<Out> c0 = random_vec<Out>(p.stride_c * p.batch), c = c0;
  INFO(v.name << " " << p.m << "x" << p.n << "x" << p.k << " batch " << p.batch << " layouts "
               << int(p.a) << int(p.b) << " alpha " << p.alpha << " beta " << p.beta);
  if (!launch) {
    const ops::MatmulConfig cfg{static_cast<uint32_t>(&v - ops::matmul_variants().data()), p.in, p.out, p.a, p.b};
    jit::LaunchConfig lc = ops::matmul_launch_config(v, p, nullptr);
    if (p.split_k > 1) {  // as ops::matmul does: C = beta * C, then the blocks add into it
      if constexpr (std::is_same_v<Out, float>)
        ir::interpret(ops::matmul_scale_kernel(), {.grid = {(p.n + 255) / 256, p.m, p.batch}, .block = {256}}, c, p.m, p.n,
                      p.ldc, p.stride_c, p.beta);
    }
    ir::interpret(ops::matmul_kernel(cfg), {.grid = lc.grid, .block = lc.block, .shared_bytes = lc.shared_bytes}, a, b, c,
                  p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.alpha, p.beta, p.stride_a, p.stride_b, p.stride_c, p.split_k,
                  ops::matmul_k_chunk(p));
  } else {
    DeviceBuffer<In> da(a), db(b);
    DeviceBuffer<Out> dc(c0);
    ops::matmul(v, da.device_address(), db.device_address(), dc.device_address(), q);
    c = dc.to_host();
  }
  check_result(p, a, b, c0, c, Tolerance<In, Out>::terms(p.k, p.tf32, p.split_k), Tolerance<In, Out>::out());
}

struct Shape { uint32_t m, n, k; };
constexpr Shape kOddShapes[] = {{1, 1, 1}, {17, 33, 65}, {70, 3, 129}};

uint32_t round_up(uint32_t x, uint32_t a) { return (x + a - 1) / a * a; }

// Odd shapes; cp.async variants need leading dimensions that are multiples of 8 elements,
// so their A and B are stored with rows padded to 8 (the shapes themselves stay odd).
template <class In, class Out>
void run_variant(const ops::MatmulVariant& v, bool launch, std::span<const Shape> shapes, bool layouts = true) {
  const ir::Scalar in = ir::ScalarOf<In>::value, out = ir::ScalarOf<Out>::value;
  const uint32_t align = v.engine == ops::MatmulEngine::MmaAsync ? 8 : v.engine == ops::MatmulEngine::SimtDb ? 4 : 1;
  for (const Shape& s : shapes) {
    MatmulProblem p{.m = s.m, .n = s.n, .k = s.k, .in = in, .out = out};
    p.tf32 = v.engine != ops::MatmulEngine::Simt && v.engine != ops::MatmulEngine::SimtDb &&
             in == ir::Scalar::F32;
    p.lda = round_up(s.k, align);
    p.ldb = round_up(s.n, align);
    REQUIRE(v.can_implement(p, 80));
    run_problem<In, Out>(v, p, launch);
  }
  if (!layouts) return;
  // both layouts, padded leading dimensions, alpha/beta, two batches with gaps
  for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
    for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
      const Shape s = shapes[std::min<size_t>(1, shapes.size() - 1)];  // 17 x 33 x 65
      MatmulProblem p{.m = s.m, .n = s.n, .k = s.k, .in = in, .out = out, .a = la, .b = lb};
      p.tf32 = v.engine != ops::MatmulEngine::Simt && v.engine != ops::MatmulEngine::SimtDb && in == ir::Scalar::F32;
      p.lda = round_up(la == MatLayout::RowMajor ? s.k : s.m, align) + (align > 1 ? 8 : 3);
      p.ldb = round_up(lb == MatLayout::RowMajor ? s.n : s.k, align) + (align > 1 ? 16 : 5);
      REQUIRE(v.can_implement(p, 80));
      p.ldc = s.n + 2;
      p.batch = 2;
      p.stride_c = uint64_t(p.ldc) * s.m + 7;
      p.alpha = -1.5f;
      p.beta = 0.75f;
      run_problem<In, Out>(v, p, launch);
      if (!std::is_same_v<Out, float> || la != lb) continue;
      // split-K: 3 splits (chunks of 64: the second short, the third empty), and 7 (6 empty)
      for (uint32_t split : {3u, 7u}) {
        p.split_k = split;
        REQUIRE(v.can_implement(p, 80));
        run_problem<In, Out>(v, p, launch);
      }
    }
}

// full: every input/output type with every layout combination (the interpreter, no
// compile needed); otherwise the layout matrix for the first type pair only, so that a
// launched run compiles about 50 kernels rather than 100.
void run_all(bool launch, std::span<const Shape> shapes, bool full) {
  for (const ops::MatmulVariant& v : ops::matmul_variants()) {
    if (v.engine == ops::MatmulEngine::Wgmma) continue;  // no interpreter model: test_matmul_wgmma.cpp
    if (v.engine == ops::MatmulEngine::Gemv) continue;   // m <= 8 only: test_matmul_gemv.cpp
    if (v.engine == ops::MatmulEngine::Simt || v.engine == ops::MatmulEngine::SimtDb) {
      run_variant<float, float>(v, launch, shapes);
    } else {
      // the other type pairs at the smaller shapes unless full (the float64 reference of
      // 1023 x 1025 x 511 costs a second of host time per problem)
      std::span<const Shape> some = full ? shapes : shapes.first(std::min<size_t>(2, shapes.size()));
      run_variant<half, float>(v, launch, shapes);
      run_variant<bfloat16, float>(v, launch, some, full);
      run_variant<half, half>(v, launch, some, full);
      run_variant<bfloat16, bfloat16>(v, launch, some, full);
      if (v.can_implement({.tf32 = true}, 80)) run_variant<float, float>(v, launch, some, full);  // tf32
    }
  }
}

}  // namespace

TEST_CASE("matmul: every variant in the interpreter at odd shapes, layouts, alpha/beta, batches", "[ops][matmul][interp]") {
  run_all(false, kOddShapes, true);
}

TEST_CASE("matmul: every variant's unchecked path (blocks inside the matrix, full k-steps) in the interpreter", "[ops][matmul][interp]") {
  // two block tiles and a bit in m and n, two BK steps and a partial one in k: interior
  // blocks take the unchecked copies in full steps, the others and the last step the
  // masked ones; every layout (each operand contiguous along k or not)
  for (const ops::MatmulVariant& v : ops::matmul_variants()) {
    if (v.engine == ops::MatmulEngine::Wgmma) continue;  // no interpreter model: test_matmul_wgmma.cpp
    if (v.engine == ops::MatmulEngine::Gemv) continue;   // m <= 8 only: test_matmul_gemv.cpp
    const bool simt = v.engine == ops::MatmulEngine::Simt || v.engine == ops::MatmulEngine::SimtDb;
    for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
        MatmulProblem p{.m = 2 * v.bm + 3, .n = 2 * v.bn + 5, .k = 2 * v.bk + 7, .a = la, .b = lb, .beta = 0.5f};
        p.lda = round_up(la == MatLayout::RowMajor ? p.k : p.m, 8);
        p.ldb = round_up(lb == MatLayout::RowMajor ? p.n : p.k, 8);
        if (simt) {
          run_problem<float, float>(v, p, false);
          continue;
        }
        p.in = ir::Scalar::BF16;
        run_problem<bfloat16, float>(v, p, false);
        p.in = ir::Scalar::F32, p.tf32 = true;
        if (v.can_implement(p, 90)) run_problem<float, float>(v, p, false);
      }
  }
}

TEST_CASE("matmul: blocks in groups of 8 block rows cover every tile once (a grid of 10 and 19 block rows)", "[ops][matmul][interp]") {
  // 10 block rows: one full group and a last group of 2; 19: two full groups and one of 3
  run_problem<float, float>(ops::matmul_variant("simt_32x32x8_2x2"), {.m = 300, .n = 40, .k = 9}, false);
  run_problem<half, float>(ops::matmul_variant("mma_cp_16x32x128_w16x16_s4"),
                           {.m = 300, .n = 72, .k = 24, .in = ir::Scalar::F16, .alpha = 0.5f, .beta = 0.25f}, false);
}

TEST_CASE("matmul: the SimtDb epilogue stores 4 columns at once where C allows, single elements elsewhere", "[ops][matmul][interp]") {
  // ldc and batch stride multiples of 4: vectors, the last column (45 = 11 * 4 + 1) alone; else every element alone
  const ops::MatmulVariant& v = ops::matmul_variant("simt_db_64x64x16_4x4");
  for (uint32_t ldc : {48u, 47u})
    for (float beta : {0.0f, 0.5f}) {
      MatmulProblem p{.m = 37, .n = 45, .k = 40, .lda = 40, .ldb = 48, .ldc = ldc, .batch = 2, .alpha = 1.25f, .beta = beta};
      p.stride_c = uint64_t(ldc) * 37 + (ldc % 4 ? 1 : 4);
      run_problem<float, float>(v, p, false);
    }
}

TEST_CASE("matmul: the cp.async epilogue stores column pairs where C allows, single elements elsewhere", "[ops][matmul][interp]") {
  // even ldc and batch stride: pairs, the odd last column alone; odd ldc: every element alone
  const ops::MatmulVariant& v = ops::matmul_variant("mma_cp_64x64x32_w32x32_s4");
  for (uint32_t ldc : {46u, 47u})
    for (float beta : {0.0f, 0.5f}) {
      MatmulProblem p{.m = 37, .n = 45, .k = 40, .lda = 40, .ldb = 48, .ldc = ldc, .batch = 2, .alpha = 1.25f, .beta = beta};
      p.stride_c = uint64_t(ldc) * 37 + (ldc % 2 ? 1 : 2);
      p.in = ir::Scalar::F16, p.out = ir::Scalar::F16;
      run_problem<half, half>(v, p, false);
      p.in = ir::Scalar::BF16, p.out = ir::Scalar::BF16;
      run_problem<bfloat16, bfloat16>(v, p, false);
      p.in = ir::Scalar::BF16, p.out = ir::Scalar::F32;
      run_problem<bfloat16, float>(v, p, false);
      p.in = ir::Scalar::F32, p.out = ir::Scalar::F32, p.tf32 = true;
      run_problem<float, float>(v, p, false);
    }
}

TEST_CASE("matmul: every declared config assembles for sm_80 and sm_90 without local memory", "[ops][matmul][nvjitlink]") {
  jit::Family<ops::MatmulConfig>& f = ops::matmul_family();
  REQUIRE(f.config_count() == 98);  // 40 SIMT and mma.sync, 40 Wgmma (4 per row), 18 Gemv
  for (size_t i = 0; i < f.config_count(); ++i) {
    ir::Kernel k = f.declared_kernel(i);
    if (k.arch_specific()) continue;  // the wgmma variants: sm_90a only (test_matmul_wgmma.cpp)
    const bool mma = k.name().find("mma") != std::string::npos;
    for (const char* arch : {"sm_80", "sm_90"}) {
      INFO(f.config_name(i) << " for " << arch);
      std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
      CHECK(ptx.find(".local") == std::string::npos);
      if (k.name().find("simt_128") != std::string::npos || k.name().find("simt_64") != std::string::npos ||
          k.name().find("simt_db") != std::string::npos)
        CHECK(ptx.find("ld.shared.v4.f32") != std::string::npos);  // 16-byte reads of the thread's A and B values
      if (k.name().find("mma_cp") != std::string::npos) CHECK(ptx.find("cp.async.cg.shared.global") != std::string::npos);
      if (k.name().find("simt_db") != std::string::npos) CHECK(ptx.find("ld.global.v4.f32") != std::string::npos);
      jit::LinkResult r = test::link_ptx(ptx, arch, k.name());
      jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
      std::string sass = test::sass_of(r.cubin);
      if (sass.empty()) continue;  // no cuobjdump here (test_mma_kernel.cpp warns)
      CHECK_THAT(sass, Contains(mma ? "HMMA" : "FFMA"));
      CHECK(sass.find("STL") == std::string::npos);
    }
  }
}

TEST_CASE("matmul: a variant's register cap reaches its kernel (.maxnreg) and ptxas obeys it", "[ops][matmul][nvjitlink]") {
  int capped = 0;
  for (const ops::MatmulVariant& v : ops::matmul_variants()) {
    if (!v.max_registers) continue;
    ++capped;
    const bool simt = v.engine == ops::MatmulEngine::Simt || v.engine == ops::MatmulEngine::SimtDb;
    // every layout for sm_90, row/row for sm_80: the cap must not make any of them spill
    for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
        const ops::MatmulConfig cfg{static_cast<uint32_t>(&v - ops::matmul_variants().data()),
                                    simt ? ir::Scalar::F32 : ir::Scalar::F16, ir::Scalar::F32, la, lb};
        ir::Kernel k = ops::matmul_kernel(cfg);
        for (const char* arch : {"sm_80", "sm_90"}) {
          if (std::string(arch) == "sm_80" && (la != MatLayout::RowMajor || lb != MatLayout::RowMajor)) continue;
          INFO(k.name() << " for " << arch);
          std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
          CHECK(ptx.find(".maxnreg " + std::to_string(v.max_registers) + "\n") != std::string::npos);
          jit::Resources res = jit::parse_resources(test::link_ptx(ptx, arch, k.name()).info_log, 0);
          CHECK(res.registers <= static_cast<int>(v.max_registers));
          CHECK(res.spill_stores == 0);
          CHECK(res.local_bytes == 0);
        }
      }
  }
  CHECK(capped > 0);
}

TEST_CASE("matmul: can_implement refuses what a variant cannot serve, and says why", "[ops][matmul]") {
  const ops::MatmulVariant& simt = ops::matmul_variant("simt_64x64x8_4x4");
  const ops::MatmulVariant& mma = ops::matmul_variant("mma_64x64x32_w32x32");
  std::string why;
  CHECK_FALSE(simt.can_implement({.m = 4, .n = 4, .k = 4, .in = ir::Scalar::F16}, 90, &why));
  CHECK_THAT(why, Contains("simt_64x64x8_4x4") && Contains("f32 x f32 -> f32, not f16"));
  CHECK_FALSE(mma.can_implement({.m = 4, .n = 4, .k = 4}, 90, &why));
  CHECK_THAT(why, Contains("f16 or bf16 inputs here (f32 with problem.tf32)"));
  CHECK(mma.can_implement({.m = 4, .n = 4, .k = 4, .tf32 = true}, 90));
  CHECK_FALSE(mma.can_implement({.m = 4, .n = 4, .k = 4, .in = ir::Scalar::F16, .out = ir::Scalar::F16, .split_k = 2}, 90, &why));
  CHECK_THAT(why, Contains("split-K adds partial products atomically: the output must be f32"));
  CHECK_FALSE(ops::matmul_variant("mma_128x128x32_w64x64").can_implement({.m = 4, .n = 4, .k = 4, .tf32 = true}, 90, &why));
  CHECK_THAT(why, Contains("tf32 needs a warp tile of at most 32 x 32"));
  CHECK_FALSE(mma.can_implement({.m = 4, .n = 4, .k = 4, .in = ir::Scalar::F16, .out = ir::Scalar::BF16}, 90, &why));
  CHECK_THAT(why, Contains("the output is f32 or the input type"));
  CHECK_FALSE(mma.can_implement({.m = 4, .n = 4, .k = 4, .in = ir::Scalar::F16}, 75, &why));
  CHECK_THAT(why, Contains("sm_80"));
  CHECK_FALSE(simt.can_implement({.m = 4, .n = 4, .k = 4, .batch = 0}, 90, &why));
  CHECK(mma.can_implement({.m = 4, .n = 4, .k = 4, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16}, 80));
  CHECK_THAT(test::usage_error_of([] { (void)ops::matmul_variant("nope"); }).what(), Contains("'nope'"));
  const ops::MatmulVariant& cp = ops::matmul_variant("mma_cp_64x64x32_w32x32_s4");
  CHECK_FALSE(cp.can_implement({.m = 17, .n = 33, .k = 65, .in = ir::Scalar::F16}, 90, &why));
  CHECK_THAT(why, Contains("lda and ldb must be multiples of 8 elements, got 65 and 33"));
  CHECK(cp.can_implement({.m = 17, .n = 33, .k = 65, .in = ir::Scalar::F16, .lda = 72, .ldb = 40}, 90));
  // the stages of a deep tile fit sm_80's and sm_90's shared memory, not sm_86's
  const ops::MatmulVariant& deep = ops::matmul_variant("mma_cp_128x256x64_w64x64_s3");
  CHECK(deep.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16}, 80));
  CHECK(deep.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16}, 90));
  CHECK_FALSE(deep.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16}, 86, &why));
  CHECK_THAT(why, Contains("bytes of shared memory, sm_86 gives a block at most 101376"));
  CHECK_FALSE(cp.can_implement({.m = 16, .n = 16, .k = 16, .in = ir::Scalar::F16, .ptr_align = 8}, 90, &why));
  CHECK_THAT(why, Contains("16-byte aligned"));
  CHECK_THAT(test::usage_error_of([] { (void)ops::matmul_resolved({.m = 4, .n = 4, .k = 8, .lda = 7}); }).what(),
             Contains("lda = 7"));
}

TEST_CASE("matmul: ops::matmul on the device at edge shapes", "[gpu][ops][matmul]") {
  static constexpr Shape kDevice[] = {{1, 1, 1}, {17, 33, 65}, {1023, 1025, 511}};
  static constexpr Shape kInterp[] = {{1, 1, 1}, {17, 33, 65}, {70, 3, 129}};
  run_all(true, jit::interpret_mode() ? std::span<const Shape>(kInterp) : std::span<const Shape>(kDevice), false);
  // a refused problem is a UsageError naming the reason
  DeviceBuffer<float> x(std::vector<float>(16, 1.0f));
  UsageError e = test::usage_error_of([&] {
    ops::matmul(ops::matmul_variant("mma_64x64x32_w32x32"), x.device_address(), x.device_address(), x.device_address(),
                {.m = 4, .n = 4, .k = 4});
  });
  CHECK(e.op() == "matmul");
  CHECK_THAT(e.what(), Contains("f16 or bf16 inputs"));
}
