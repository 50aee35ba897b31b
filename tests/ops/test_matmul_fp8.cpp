// FP8 matmul on the Hopper engine: e4m3 / e5m2 inputs (A row-major, B column-major: both
// K-major), f32 accumulation, f32 / f16 / bf16 out, per-tensor scales read from device
// memory. Host: every fp8 kernel assembles for sm_90a (k32 e4m3/e5m2 wgmma, QGMMA where
// cuobjdump is installed, no local memory), the f16/bf16 kernels keep their parameters,
// what cannot be served is refused with the reason. [gpu] on an sm_90 device: float64
// references computed from the dequantised inputs, at edge, odd and large shapes, with
// scales, beta, batches and split-K.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/matmul_tune.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "matmul_support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ops::MatLayout;
using ops::MatmulProblem;

namespace {

std::vector<const ops::MatmulVariant*> wgmma_rows() { return test::matmul::rows_of(ops::MatmulEngine::Wgmma); }
using test::matmul::index_of;

}  // namespace

TEST_CASE("matmul fp8: every fp8 kernel assembles for sm_90a with k32 wgmma and scales; f16 kernels unchanged", "[ops][matmul][wgmma][fp8][nvjitlink]") {
  using ir::Scalar;
  for (const ops::MatmulVariant* v : wgmma_rows()) {
    struct C { Scalar in, out; };
    for (const C& c : {C{Scalar::E4M3, Scalar::BF16}, C{Scalar::E5M2, Scalar::F32}, C{Scalar::E4M3, Scalar::F16}}) {
      ir::Kernel k = ops::matmul_kernel({index_of(*v), c.in, c.out, MatLayout::RowMajor, MatLayout::ColMajor});
      INFO(k.name());
      CHECK(k.arch_specific());
      CHECK(k.params().size() == 21);  // the f16 kernel's 18, then scale_a, scale_b, scales
      CHECK(k.params().back().name == "scales");
      const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
      const std::string t = ir::scalar_name(c.in);
      CHECK_THAT(ptx, Contains("k32.f32." + t + "." + t + " {"));
      CHECK(ptx.find(".local") == std::string::npos);
      jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
      if (!test::as_loaded(k, ptx, r)) continue;  // a row with setmaxnreg: as the driver compiles it
      jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
      const std::string sass = test::sass_of(r.cubin);
      if (!sass.empty()) {
        CHECK_THAT(sass, Contains("QGMMA"));
        CHECK_THAT(sass, Contains("UTMALDG"));
        CHECK(sass.find("STL") == std::string::npos);
      }
    }
    ir::Kernel h = ops::matmul_kernel({index_of(*v), Scalar::F16, Scalar::F32, MatLayout::RowMajor, MatLayout::ColMajor});
    CHECK(h.params().size() == 18);  // no scale parameters, no scale loads
    CHECK(h.params().back().name == "tma_store");
    // other layouts cannot feed 8-bit wgmma
    UsageError e = test::usage_error_of(
        [&] { (void)ops::matmul_kernel({index_of(*v), Scalar::E4M3, Scalar::BF16, MatLayout::RowMajor, MatLayout::RowMajor}); });
    CHECK_THAT(e.what(), Contains("A row-major and B column-major"));
  }
  // declared (kaio-precompile): e4m3 and e5m2 -> bf16 of every Wgmma row
  int fp8 = 0;
  for (const std::string& n : ops::matmul_family().config_names()) fp8 += n.find("e4m3 -> bf16") != std::string::npos || n.find("e5m2 -> bf16") != std::string::npos;
  CHECK(fp8 == int(wgmma_rows().size()) * 2);
  // the other engines refuse fp8 with their reason; scales are for fp8 only
  for (const ops::MatmulVariant& v : ops::matmul_variants())
    if (v.engine != ops::MatmulEngine::Wgmma)
      CHECK_FALSE(v.can_implement({.m = 64, .n = 64, .k = 64, .in = Scalar::E4M3, .out = Scalar::F32}, 90));
  const uint64_t fake = 256;
  UsageError e = test::usage_error_of([&] {
    ops::matmul(ops::matmul_variants()[0], 0, 0, 0, {.m = 8, .n = 8, .k = 8}, nullptr, {.a = fake});
  });
  CHECK_THAT(e.what(), Contains("scales") && Contains("e4m3 / e5m2 inputs, not f32"));
}

TEST_CASE("matmul fp8: what the Wgmma rows serve, refused with the reason", "[ops][matmul][wgmma][fp8]") {
  using ir::Scalar;
  const ops::MatmulVariant& v = *wgmma_rows().front();
  std::string why;
  const MatmulProblem ok{.m = 64, .n = 64, .k = 64, .in = Scalar::E4M3, .out = Scalar::BF16, .b = MatLayout::ColMajor};
  if (jit::interpret_mode()) {
    CHECK_FALSE(v.can_implement(ok, 90, &why));
    CHECK_THAT(why, Contains("interpreter"));
    return;
  }
  CHECK(v.can_implement(ok, 90));
  for (Scalar out : {Scalar::F32, Scalar::F16, Scalar::BF16}) {
    MatmulProblem p = ok;
    p.out = out;
    p.in = Scalar::E5M2;
    CHECK(v.can_implement(p, 90));
  }
  MatmulProblem p = ok;
  p.out = Scalar::E4M3;
  CHECK_FALSE(v.can_implement(p, 90, &why));
  CHECK_THAT(why, Contains("f32, f16 or bf16"));
  for (auto [la, lb] : {std::pair{MatLayout::RowMajor, MatLayout::RowMajor}, std::pair{MatLayout::ColMajor, MatLayout::ColMajor},
                        std::pair{MatLayout::ColMajor, MatLayout::RowMajor}}) {
    p = ok;
    p.a = la;
    p.b = lb;
    CHECK_FALSE(v.can_implement(p, 90, &why));
    CHECK_THAT(why, Contains("K-major operands only"));
  }
  p = ok;
  p.k = 72;  // 72 bytes per row: TMA needs 16-byte multiples
  CHECK_FALSE(v.can_implement(p, 90, &why));
  CHECK_THAT(why, Contains("multiples of 16"));
  CHECK_FALSE(v.can_implement(ok, 80, &why));
  CHECK_THAT(why, Contains("sm_90"));
  // split-K chunks are whole 128-element stages
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 1008, .in = Scalar::E4M3, .split_k = 3}) == 384);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 1008, .in = Scalar::F16, .split_k = 3}) == 384);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 1000, .in = Scalar::E4M3, .split_k = 4}) == 256);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 1000, .in = Scalar::F16, .split_k = 4}) == 256);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 600, .in = Scalar::E5M2, .split_k = 3}) == 256);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 600, .in = Scalar::BF16, .split_k = 3}) == 256);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 500, .in = Scalar::E5M2, .split_k = 3}) == 256);
  CHECK(ops::matmul_k_chunk({.m = 8, .n = 8, .k = 500, .in = Scalar::BF16, .split_k = 3}) == 192);
}

namespace {

using test::matmul::at;
using test::matmul::rng;

template <class T>
double dbl(T x) { return double(float(x)); }

// n fp8 values of a spread of magnitudes (uniform in [-2, 2), then rounded).
template <class F8>
std::vector<F8> random_fp8(size_t n) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<F8> v(n);
  for (auto& x : v) x = F8(u(rng()));
  return v;
}

struct Scales {
  float a = 1, b = 1;
  bool pass_a = false, pass_b = false;  // given as device pointers (else 0: scale 1)
};

// Runs one problem and checks C against float64 of the dequantised inputs on every element
// (samples == 0: also the gaps between strided C rows stay untouched) or on `samples`
// random ones plus the corners of every batch. Tolerance: f32 accumulation, 1e-3 of
// |alpha sa sb| sum |a||b| + |beta c|; then the output's rounding (f16 2^-11, bf16 2^-8).
template <class F8, class Out>
void check_fp8(const ops::MatmulVariant* v, MatmulProblem q, Scales s, size_t samples, bool use_auto = false) {
  const MatmulProblem p = ops::matmul_resolved(q);
  INFO((v ? v->name : "matmul_auto") << " " << p.m << "x" << p.n << "x" << p.k << " batch " << p.batch << " alpha " << p.alpha
                                     << " beta " << p.beta << " scales " << s.a << (s.pass_a ? "" : "(none)") << " " << s.b
                                     << (s.pass_b ? "" : "(none)") << " split_k " << p.split_k << " in "
                                     << ir::scalar_name(p.in) << " out " << ir::scalar_name(p.out));
  if (v) REQUIRE(v->can_implement(p, 90));
  const std::vector<F8> a = random_fp8<F8>(p.stride_a * p.batch), b = random_fp8<F8>(p.stride_b * p.batch);
  std::vector<Out> c0 = test::matmul::random_vec<Out>(p.stride_c * p.batch);
  DeviceBuffer<F8> da(a), db(b);
  DeviceBuffer<Out> dc(c0);
  if (p.beta == 0.0f) {  // C is only written: poison it
    dc.fill_bytes(0xff);
    std::memset(static_cast<void*>(c0.data()), 0xff, c0.size() * sizeof(Out));
  }
  DeviceBuffer<float> dscale(std::vector<float>{s.a, s.b});
  const ops::MatmulScales sc{s.pass_a ? dscale.device_address() : 0, s.pass_b ? dscale.device_address() + 4 : 0};
  if (use_auto) ops::matmul_auto(da.device_address(), db.device_address(), dc.device_address(), q, nullptr, sc);
  else ops::matmul(*v, da.device_address(), db.device_address(), dc.device_address(), q, nullptr, sc);
  const std::vector<Out> c = dc.to_host();
  const double scale = double(p.alpha) * (s.pass_a ? s.a : 1.0) * (s.pass_b ? s.b : 1.0);
  const double out = std::is_same_v<Out, half> ? 0x1p-11 : std::is_same_v<Out, bfloat16> ? 0x1p-8 : 0;
  auto check = [&](uint32_t z, uint32_t i, uint32_t j) {
    const auto [ref, mag] = test::matmul::reference_at(p, a, b, c0, z, i, j, scale);
    const size_t ci = z * p.stride_c + size_t(i) * p.ldc + j;
    INFO("batch " << z << " C[" << i << "][" << j << "] = " << dbl(c[ci]) << ", float64 " << ref);
    REQUIRE(std::abs(dbl(c[ci]) - ref) <= 1e-3 * mag + out * std::abs(ref) + 1e-6);
  };
  if (samples == 0) {
    for (uint32_t z = 0; z < p.batch; ++z)
      for (uint32_t i = 0; i < p.m; ++i)
        for (uint32_t j = 0; j < p.n; ++j) check(z, i, j);
    for (size_t i = 0; i < c.size(); ++i) {
      const size_t z = i / p.stride_c, rem = i % p.stride_c, row = rem / p.ldc, col = rem % p.ldc;
      if (z >= p.batch || row >= p.m || col >= p.n) REQUIRE(std::memcmp(&c[i], &c0[i], sizeof(Out)) == 0);
    }
    return;
  }
  std::uniform_int_distribution<uint32_t> zi(0, p.batch - 1), mi(0, p.m - 1), ni(0, p.n - 1);
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i : {0u, p.m - 1})
      for (uint32_t j : {0u, p.n - 1}) check(z, i, j);
  for (size_t n = 0; n < samples; ++n) check(zi(rng()), mi(rng()), ni(rng()));
}

bool wgmma_device() {
  if (!jit::interpret_mode() && codegen::parse_arch(jit::detail::backend().default_arch()).sm == 90) return true;
  WARN("the wgmma engine runs on sm_90 devices only; skipped here");
  return false;
}

MatmulProblem tn(uint32_t m, uint32_t n, uint32_t k, ir::Scalar in, ir::Scalar out) {
  return {.m = m, .n = n, .k = k, .in = in, .out = out, .a = MatLayout::RowMajor, .b = MatLayout::ColMajor};
}

}  // namespace

TEST_CASE("matmul fp8: float64 references of the dequantised inputs on the device, scales, beta, batches", "[gpu][ops][matmul][wgmma][fp8]") {
  if (!wgmma_device()) return;
  using ir::Scalar;
  for (const ops::MatmulVariant* v : wgmma_rows()) {
    check_fp8<fp8_e4m3, float>(v, tn(64, 64, 64, Scalar::E4M3, Scalar::F32), {}, 0);
    check_fp8<fp8_e5m2, bfloat16>(v, tn(64, 64, 64, Scalar::E5M2, Scalar::BF16), {0.5f, 4.0f, true, true}, 0);
    check_fp8<fp8_e4m3, bfloat16>(v, tn(129, 257, 64, Scalar::E4M3, Scalar::BF16), {0.25f, 3.0f, true, true}, 0);
    check_fp8<fp8_e4m3, half>(v, tn(129, 257, 80, Scalar::E4M3, Scalar::F16), {2.0f, 1.0f, true, false}, 0);
    check_fp8<fp8_e5m2, float>(v, tn(1, 8, 16, Scalar::E5M2, Scalar::F32), {1.0f, 0.125f, false, true}, 0);
    // padded leading dimensions, alpha and beta, two batches with gaps between C's rows and batches
    MatmulProblem p = tn(129, 257, 208, Scalar::E4M3, Scalar::F32);
    p.lda = 240;
    p.ldb = 224;
    p.ldc = 259;
    p.batch = 2;
    p.stride_c = uint64_t(p.ldc) * p.m + 7;
    p.alpha = -1.5f;
    p.beta = 0.75f;
    check_fp8<fp8_e4m3, float>(v, p, {0.5f, 2.0f, true, true}, 0);
    p.out = Scalar::BF16;
    p.in = Scalar::E5M2;
    check_fp8<fp8_e5m2, bfloat16>(v, p, {0.75f, 1.5f, true, true}, 0);
    // split-K (f32 out): chunks of whole 128-element stages
    p = tn(129, 257, 1008, Scalar::E4M3, Scalar::F32);
    p.split_k = 3;
    p.beta = 0.5f;
    check_fp8<fp8_e4m3, float>(v, p, {0.5f, 0.5f, true, true}, 0);
    check_fp8<fp8_e4m3, bfloat16>(v, tn(1000, 1000, 1008, Scalar::E4M3, Scalar::BF16), {0.5f, 2.0f, true, true}, 3000);
  }
  // matmul_auto: the tuner's pick, with scales
  check_fp8<fp8_e4m3, bfloat16>(nullptr, tn(1000, 1000, 1008, Scalar::E4M3, Scalar::BF16), {0.25f, 2.0f, true, true}, 2000, true);
}

TEST_CASE("matmul fp8: large shapes on the device (sampled float64)", "[gpu][ops][matmul][wgmma][fp8][large]") {
  if (!wgmma_device()) return;
  using ir::Scalar;
  for (const ops::MatmulVariant* v : wgmma_rows()) {
    check_fp8<fp8_e4m3, bfloat16>(v, tn(4096, 4096, 4096, Scalar::E4M3, Scalar::BF16), {0.5f, 2.0f, true, true}, 600);
    check_fp8<fp8_e4m3, bfloat16>(v, tn(128, 11008, 4096, Scalar::E4M3, Scalar::BF16), {1.0f, 1.0f, true, true}, 600);
    check_fp8<fp8_e5m2, float>(v, tn(16, 4096, 4096, Scalar::E5M2, Scalar::F32), {}, 600);
    check_fp8<fp8_e4m3, float>(v, tn(4096, 4096, 128, Scalar::E4M3, Scalar::F32), {0.5f, 0.5f, true, false}, 600);
  }
}

// [gpu]: the key names the device (the interpreter, or a GPU).
TEST_CASE("matmul fp8: tuning keys name the fp8 type and count alignment in 16-element rows", "[gpu][tuner][matmul][fp8]") {
  MatmulProblem p = tn(1000, 1000, 1008, ir::Scalar::E4M3, ir::Scalar::BF16);
  const std::string k = tuner::matmul_key(p);
  CHECK_THAT(k, Contains("matmul|e4m3>bf16|row/col|") && Contains("|m1024|n1024|k1024|b1|align15"));
  p.k = 1000;  // rows of 1000 bytes: not whole 16-byte TMA rows, another bucket (f16 would keep align15)
  CHECK_THAT(tuner::matmul_key(p), Contains("|align9"));
  MatmulProblem h = p;
  h.in = ir::Scalar::F16;
  CHECK_THAT(tuner::matmul_key(h), Contains("matmul|f16>bf16|row/col|") && Contains("|align15"));
  p.in = ir::Scalar::E5M2;
  CHECK_THAT(tuner::matmul_key(p), Contains("matmul|e5m2>bf16|"));
}
