// The Hopper matmul engine (Wgmma): every declared config emitted and assembled for
// sm_90a (wgmma, TMA, mbarriers, setmaxnreg; no local memory; HGMMA in the SASS where
// cuobjdump is installed), refused elsewhere with the reason; [gpu] on an sm_90 device:
// float64 references at edge, odd, skinny and large shapes, both layouts, alpha/beta,
// batches, split-K. Large problems are checked on a random sample of C's elements (each
// one a full float64 dot product), the small ones everywhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
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

std::vector<const ops::MatmulVariant*> wgmma_variants() { return test::matmul::rows_of(ops::MatmulEngine::Wgmma); }

int device_sm() { return codegen::parse_arch(jit::detail::backend().default_arch()).sm; }

}  // namespace

TEST_CASE("matmul wgmma: every config emits TMA, mbarriers and wgmma, and assembles for sm_90a only", "[ops][matmul][wgmma][nvjitlink]") {
  REQUIRE(wgmma_variants().size() >= 2);
  jit::Family<ops::MatmulConfig>& f = ops::matmul_family();
  int seen = 0;
  for (size_t i = 0; i < f.config_count(); ++i) {
    ir::Kernel k = f.declared_kernel(i);
    if (k.name().find("wgmma") == std::string::npos) continue;
    ++seen;
    INFO(f.config_name(i));
    CHECK(k.arch_specific());
    const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
    CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes ["));
    CHECK_THAT(ptx, Contains("mbarrier.arrive.expect_tx.shared::cta.b64"));
    CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n"));
    CHECK_THAT(ptx, Contains("wgmma.wait_group.sync.aligned 1;"));
    CHECK_THAT(ptx, Contains(".extern .shared .align 1024 .b8 kaio_dynamic_smem[];"));
    CHECK(ptx.find(".local") == std::string::npos);
    jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
    CHECK(!r.cubin.empty());
    // A row whose consumers take the producer's registers (setmaxnreg) runs as the driver
    // compiles its PTX, a whole program; nvJitLink's cubin (setmaxnreg ignored) is only the
    // fallback. Checked here with ptxas alike.
    CHECK(k.reallocates_registers() == (k.name().find("256x192") != std::string::npos));
    if (!test::as_loaded(k, ptx, r)) continue;
    CHECK(r.info_log.find("serialized") == std::string::npos);
    jit::Resources res = jit::parse_resources(r.info_log, 0);
    CHECK(res.local_bytes == 0);
    CHECK(res.spill_stores == 0);
    const std::string sass = test::sass_of(r.cubin);
    if (!sass.empty()) {
      CHECK_THAT(sass, Contains(k.name().find("_e4m3_") != std::string::npos || k.name().find("_e5m2_") != std::string::npos
                                    ? "QGMMA"
                                    : "HGMMA"));
      CHECK_THAT(sass, Contains("UTMALDG"));
      CHECK(sass.find("STL") == std::string::npos);
    }
    // plain sm_90 (or sm_80) cannot hold wgmma: a UsageError that says sm_90a
    for (const char* arch : {"sm_90", "sm_80"}) {
      UsageError e = test::usage_error_of([&] { (void)jit::compile(k, {.arch = arch, .use_cache = false}); });
      CHECK_THAT(e.what(), Contains("sm_90a"));
    }
  }
  CHECK(seen == int(wgmma_variants().size()) * 4);  // f16 and bf16 inputs with f32 output, e4m3 and e5m2 with bf16 declared
}

TEST_CASE("matmul wgmma: the layouts and types each config serves, refused with the reason", "[ops][matmul][wgmma]") {
  const ops::MatmulVariant& v = *wgmma_variants().front();
  std::string why;
  CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16}, 80, &why));
  CHECK_THAT(why, Contains("sm_90"));
  if (!jit::interpret_mode()) {
    for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor})
        CHECK(v.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16, .a = la, .b = lb}, 90));
    CHECK(v.can_implement({.m = 64, .n = 64, .k = 64, .a = MatLayout::RowMajor, .b = MatLayout::ColMajor, .tf32 = true}, 90));
    CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 64, .a = MatLayout::ColMajor, .tf32 = true}, 90, &why));
    CHECK_THAT(why, Contains("K-major"));
    CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 60, .in = ir::Scalar::F16}, 90, &why));
    CHECK_THAT(why, Contains("multiples of 8"));
    CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 64}, 90, &why));
    CHECK_THAT(why, Contains("f16 or bf16"));
  } else {
    CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 64, .in = ir::Scalar::BF16}, 90, &why));
    CHECK_THAT(why, Contains("interpreter"));
  }
  // tf32 kernels of the engine exist for A row-major, B column-major only
  const uint32_t idx = static_cast<uint32_t>(&v - ops::matmul_variants().data());
  ir::Kernel tf = ops::matmul_kernel({idx, ir::Scalar::F32, ir::Scalar::F32, MatLayout::RowMajor, MatLayout::ColMajor});
  CHECK_THAT(codegen::emit_ptx(tf, {"sm_90a", 9, 0}), Contains("k8.f32.tf32.tf32"));
  CHECK_THAT(test::usage_error_of([&] {
               (void)ops::matmul_kernel({idx, ir::Scalar::F32, ir::Scalar::F32, MatLayout::RowMajor, MatLayout::RowMajor});
             }).what(),
             Contains("column-major"));
  // the MN-major (transposing) forms for the other layouts
  ir::Kernel t = ops::matmul_kernel({idx, ir::Scalar::BF16, ir::Scalar::BF16, MatLayout::ColMajor, MatLayout::RowMajor});
  CHECK_THAT(codegen::emit_ptx(t, {"sm_90a", 9, 0}), Contains(", 1, 1, 1, 1;"));
}

namespace {

using test::matmul::at;
using test::matmul::random_vec;
using test::matmul::rng;
template <class T>
double dbl(T x) { return test::matmul::as_double(x); }

// Runs one problem and checks C against float64 on every element (small problems) or on
// `samples` random ones plus the four corners of every batch; the rows between strided
// C rows must stay untouched (checked where the whole C is compared).
template <class In, class Out>
void check_wgmma(const ops::MatmulVariant& v, MatmulProblem q, size_t samples) {
  const MatmulProblem p = ops::matmul_resolved(q);
  INFO(v.name << " " << p.m << "x" << p.n << "x" << p.k << " batch " << p.batch << " layouts " << int(p.a) << int(p.b)
               << " alpha " << p.alpha << " beta " << p.beta << " split_k " << p.split_k << " in "
               << ir::scalar_name(p.in) << " out " << ir::scalar_name(p.out));
  REQUIRE(v.can_implement(p, 90));
  std::vector<In> a = random_vec<In>(p.stride_a * p.batch), b = random_vec<In>(p.stride_b * p.batch);
  std::vector<Out> c0 = random_vec<Out>(p.stride_c * p.batch);
  DeviceBuffer<In> da(a), db(b);
  DeviceBuffer<Out> dc(c0);
  ops::matmul(v, da.device_address(), db.device_address(), dc.device_address(), q);
  const std::vector<Out> c = dc.to_host();
  const bool tf32 = p.in == ir::Scalar::F32;
  const double rel = tf32 ? 0x1p-9 : double(p.k + 8) * 0x1p-22;
  const double out = std::is_same_v<Out, half> ? 0x1p-11 : std::is_same_v<Out, bfloat16> ? 0x1p-8 : 0;
  auto check = [&](uint32_t z, uint32_t i, uint32_t j) {
    const auto [ref, mag] = test::matmul::reference_at(p, a, b, c0, z, i, j, p.alpha);
    const size_t ci = z * p.stride_c + size_t(i) * p.ldc + j;
    INFO("batch " << z << " C[" << i << "][" << j << "] = " << dbl(c[ci]) << ", float64 " << ref);
    REQUIRE(std::abs(dbl(c[ci]) - ref) <= rel * mag + out * std::abs(ref) + 0x1p-24);
  };
  if (samples == 0) {
    for (uint32_t z = 0; z < p.batch; ++z)
      for (uint32_t i = 0; i < p.m; ++i)
        for (uint32_t j = 0; j < p.n; ++j) check(z, i, j);
    for (size_t i = 0; i < c.size(); ++i) {
      const size_t z = i / p.stride_c, rem = i % p.stride_c, row = rem / p.ldc, col = rem % p.ldc;
      if (z >= p.batch || row >= p.m || col >= p.n) REQUIRE(dbl(c[i]) == dbl(c0[i]));
    }
    return;
  }
  std::uniform_int_distribution<uint32_t> zi(0, p.batch - 1), mi(0, p.m - 1), ni(0, p.n - 1);
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i : {0u, p.m - 1})
      for (uint32_t j : {0u, p.n - 1}) check(z, i, j);
  for (size_t s = 0; s < samples; ++s) check(zi(rng()), mi(rng()), ni(rng()));
}

}  // namespace

namespace {
bool wgmma_device() {
  if (!jit::interpret_mode() && device_sm() == 90) return true;
  WARN("the wgmma engine runs on sm_90 devices only; skipped here");
  return false;
}

struct S { uint32_t m, n, k; size_t samples; };

// Both input types at each shape (A row-major with B column-major, then both row-major).
void shapes(const ops::MatmulVariant& v, std::initializer_list<S> list) {
  auto up8 = [](uint32_t x) { return (x + 7) / 8 * 8; };  // TMA: 16-byte row strides
  for (const S& s : list) {
    check_wgmma<bfloat16, float>(
        v, {.m = s.m, .n = s.n, .k = s.k, .in = ir::Scalar::BF16, .b = MatLayout::ColMajor, .lda = up8(s.k), .ldb = up8(s.k)},
        s.samples);
    check_wgmma<half, float>(v, {.m = s.m, .n = s.n, .k = s.k, .in = ir::Scalar::F16, .lda = up8(s.k), .ldb = up8(s.n)},
                             s.samples);
  }
}
}  // namespace

TEST_CASE("matmul wgmma: large and skinny shapes against float64 (sampled) on the device", "[gpu][ops][matmul][wgmma][large]") {
  if (!wgmma_device()) return;
  for (const ops::MatmulVariant* v : wgmma_variants()) {
    shapes(*v, {{1000, 1000, 1000, 3000}, {16, 4096, 4096, 2000}, {4096, 4096, 128, 2000}, {4096, 4096, 4096, 600}});
    check_wgmma<float, float>(*v, {.m = 1000, .n = 1000, .k = 1000, .b = MatLayout::ColMajor, .tf32 = true}, 2000);
  }
  // the 8192^3 problem once, with the first (largest) variant
  check_wgmma<bfloat16, float>(*wgmma_variants().front(), {.m = 8192, .n = 8192, .k = 8192, .in = ir::Scalar::BF16}, 300);
}

TEST_CASE("matmul wgmma: float64 references on the device at edge shapes, layouts, batches, split-K", "[gpu][ops][matmul][wgmma]") {
  if (!wgmma_device()) return;
  for (const ops::MatmulVariant* v : wgmma_variants()) {
    shapes(*v, {{64, 64, 64, 0}, {129, 257, 65, 0}, {1, 8, 8, 0}});
    // every layout pair, outputs in the input type, padded leading dimensions, alpha/beta,
    // two batches with gaps, split-K
    for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
        MatmulProblem p{.m = 129, .n = 257, .k = 65, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16, .a = la, .b = lb};
        p.lda = (la == MatLayout::RowMajor ? 72 : 136) + 8;
        p.ldb = (lb == MatLayout::RowMajor ? 264 : 72) + 16;
        p.ldc = 259;
        p.batch = 2;
        p.stride_c = uint64_t(p.ldc) * p.m + 7;
        p.alpha = -1.5f;
        p.beta = 0.75f;
        check_wgmma<bfloat16, bfloat16>(*v, p, 0);
        p.in = p.out = ir::Scalar::F16;
        check_wgmma<half, half>(*v, p, 0);
        p.in = ir::Scalar::BF16;
        p.out = ir::Scalar::F32;
        p.split_k = 3;
        p.k = 300;
        p.lda = la == MatLayout::RowMajor ? 304 : 136;
        p.ldb = lb == MatLayout::RowMajor ? 264 : 304;
        check_wgmma<bfloat16, float>(*v, p, 0);
      }
    // tf32: A row-major, B column-major
    check_wgmma<float, float>(*v, {.m = 129, .n = 257, .k = 68, .b = MatLayout::ColMajor, .tf32 = true}, 0);
    // beta == 0: the TMA-store epilogue where rows are whole 16-byte chunks (n = 256: edge
    // tiles clipped by the map, the rows' padding and the gap between batches untouched),
    // register stores where they are not (n = 257: a TMA store would write the rest of
    // the row's last 16-byte chunk)
    for (uint32_t n : {256u, 257u})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
        MatmulProblem p{.m = 129, .n = n, .k = 200, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16, .b = lb};
        p.lda = 200;
        p.ldb = lb == MatLayout::RowMajor ? 264 : 200;
        p.ldc = 272;
        p.batch = 2;
        p.stride_c = uint64_t(p.ldc) * p.m + 8;
        p.alpha = 0.5f;
        check_wgmma<bfloat16, bfloat16>(*v, p, 0);
        p.in = p.out = ir::Scalar::F16;
        check_wgmma<half, half>(*v, p, 0);
        p.in = ir::Scalar::BF16;
        p.out = ir::Scalar::F32;
        p.ldc = 260;
        p.stride_c = uint64_t(p.ldc) * p.m + 4;
        check_wgmma<bfloat16, float>(*v, p, 0);
      }
  }
}
