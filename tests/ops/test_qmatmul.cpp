// Quantized matmul, host side: the int4 packing and the host decoder, the quantisers, the
// usage errors of the ops (naming op and argument), and every declared kernel emitted, a
// representative set assembled by nvJitLink for sm_80, sm_90 and sm_90a with tensor-core
// SASS (IMMA for int8, HMMA for the int4 mma path) where cuobjdump is available.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/jit/device.h"
#include "kaio/kaio.h"
#include "kaio/ops/qmatmul.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ir::Scalar;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

template <class F>
void check_usage(F&& f, const std::string& op, const std::string& text) {
  try {
    f();
    FAIL("no UsageError for " << text);
  } catch (const UsageError& e) {
    CHECK(e.op() == op);
    CHECK_THAT(e.what(), Contains(text));
  }
}

}  // namespace

TEST_CASE("qmatmul: pack_int4 places element 8r + i in nibble kInt4Nibble[i]; int4_at inverts it", "[ops][qmatmul]") {
  const uint32_t k = 32, n = 8;
  std::vector<uint8_t> v(k * n);
  std::uniform_int_distribution<int> d(0, 15);
  for (auto& x : v) x = uint8_t(d(rng()));
  const std::vector<uint32_t> q = ops::pack_int4(v, k, n);
  REQUIRE(q.size() == k / 8 * n);
  for (uint32_t r = 0; r < k; ++r)
    for (uint32_t j = 0; j < n; ++j) {
      CHECK(ops::int4_at(q, n, r, j) == v[r * n + j]);
      CHECK(((q[(r / 8) * n + j] >> (4 * ops::kInt4Nibble[r % 8])) & 15u) == v[r * n + j]);
    }
  // elements 2j and 2j + 1 are nibbles j and j + 4: the two halves of one and-mask 0x000f000f << 4j
  for (uint32_t i = 0; i < 8; i += 2) CHECK(ops::kInt4Nibble[i + 1] == ops::kInt4Nibble[i] + 4);
  v[3] = 16;
  check_usage([&] { (void)ops::pack_int4(v, k, n); }, "pack_int4", "values 0..15");
}

TEST_CASE("qmatmul: quantize_int4 round-trips within half a step of its group's scale", "[ops][qmatmul]") {
  const uint32_t k = 128, n = 16;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(k * n);
  for (auto& x : w) x = u(rng());
  for (Scalar dt : {Scalar::F16, Scalar::BF16})
    for (bool zp : {false, true})
      for (uint32_t g : {32u, 64u, 128u}) {
        const ops::Int4Host h = ops::quantize_int4(w, k, n, g, dt, zp);
        CHECK(h.zeros.size() == (zp ? k / g * n : 0));
        const std::vector<float> dq = ops::dequantize_int4(h);
        for (uint32_t r = 0; r < k; ++r)
          for (uint32_t j = 0; j < n; ++j) {
            const float s = dt == Scalar::F16 ? float(half::from_bits(h.scales[r / g * n + j]))
                                              : float(bfloat16::from_bits(h.scales[r / g * n + j]));
            const int z = zp ? h.zeros[r / g * n + j] : 8;
            // the decoder: (v - z) * s, one rounding to the 16-bit type
            const double exact = double(int(ops::int4_at(h.q, n, r, j)) - z) * s;
            CHECK(std::abs(dq[r * n + j] - exact) <= std::abs(exact) * (dt == Scalar::F16 ? 0x1p-11 : 0x1p-8));
            // half a step, or one where the rounded zero point pushes the group's maximum past 15
            CHECK(std::abs(dq[r * n + j] - w[r * n + j]) <= s * (zp ? 1.01 : 0.51) + std::abs(w[r * n + j]) * 0x1p-7);
          }
      }
}

TEST_CASE("qmatmul: quantize_int8 is symmetric per row with max |row| at 127", "[ops][qmatmul]") {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, 0.0f, 0.0f};
  const ops::Int8Quantized q = ops::quantize_int8(x, 2, 3);
  CHECK(q.q[1] == -127);
  CHECK(q.q[0] == 64);  // 0.5 / (1 / 127) = 63.5 -> 64 (to nearest even)
  CHECK(q.scale[0] == Approx(1.0 / 127));
  CHECK(q.scale[1] == 1.0f);  // a zero row
  check_usage([&] { (void)ops::quantize_int8(x, 4, 3); }, "quantize_int8", "x:");
}

TEST_CASE("qmatmul: shapes a format cannot take are usage errors naming the op and the argument", "[ops][qmatmul]") {
  std::vector<float> w(96 * 8, 0.5f);
  check_usage([&] { (void)ops::quantize_int4(w, 96, 8, 64, Scalar::F16, true); }, "quantize_int4", "k: a positive multiple of the group (64)");
  check_usage([&] { (void)ops::quantize_int4(w, 96, 8, 48, Scalar::F16, true); }, "quantize_int4", "group: 32, 64 or 128");
  std::vector<float> w12(128 * 12, 0.5f);
  check_usage([&] { (void)ops::quantize_int4(w12, 128, 12, 32, Scalar::F16, true); }, "quantize_int4", "n: a positive multiple of 8");
  // The ops check before any launch: these addresses are never read.
  const uint64_t p = 1 << 20;
  ops::Int4Weights iw{.q = p, .scales = p, .zeros = 0, .k = 96, .n = 64, .group = 64};
  check_usage([&] { ops::matmul_int4(p, iw, p, 4, Scalar::F16); }, "matmul_int4", "w.k: a positive multiple of the group (64)");
  iw.k = 128, iw.n = 60;
  check_usage([&] { ops::matmul_int4(p, iw, p, 4, Scalar::F16); }, "matmul_int4", "w.n: a positive multiple of 8");
  iw.n = 64, iw.group = 16;
  check_usage([&] { ops::matmul_int4(p, iw, p, 4, Scalar::F16); }, "matmul_int4", "group: 32, 64 or 128");
  iw.group = 32;
  check_usage([&] { ops::matmul_int4(p, iw, p, 4, Scalar::F32); }, "matmul_int4", "dtype: f16 or bf16");
  check_usage([&] { ops::matmul_int4(p + 2, iw, p, 4, Scalar::F16); }, "matmul_int4", "x: the address must be 16-byte aligned");
  ops::Int4Part parts[3] = {{iw, p, 0}, {iw, p, 0}, {iw, p, 0}};
  parts[2].w.group = 64;
  check_usage([&] { ops::matmul_int4_qkv(p, parts, 4, Scalar::F16); }, "matmul_int4_qkv", "group");
  check_usage([&] { ops::matmul_int8(p, p, p, {.m = 4, .n = 8, .k = 40}); }, "matmul_int8", "k: a positive multiple of 16");
  check_usage([&] { ops::matmul_int8(p, p, p, {.m = 4, .n = 8, .k = 64, .out = Scalar::S32}, {.a = p}); }, "matmul_int8",
              "out: s32 is the raw product");
  check_usage([&] { ops::matmul_int8(p, p, p, {.m = 4, .n = 8, .k = 64, .out = Scalar::S8}); }, "matmul_int8", "out: s32, f16, bf16 or f32");
  check_usage([&] { ops::matmul_int8(p, p, p, {.m = 4, .n = 8, .k = 64, .tile = 9}); }, "matmul_int8", "tile: 9");
  if (!jit::device_info().present || jit::interpret_mode()) {  // the wgmma tile needs an sm_90 device
    const int wg = int(ops::matmul_int8_tiles().size()) - 1;
    REQUIRE(ops::matmul_int8_tiles()[size_t(wg)].rfind("wgmma", 0) == 0);
    check_usage([&] { ops::matmul_int8(p, p, p, {.m = 4, .n = 8, .k = 64, .tile = wg}); }, "matmul_int8", "needs an sm_90 device");
  }
}

// Every declared kernel (68) is linked once, the archs taken in turn, so that each family is
// assembled for sm_80, sm_90 and sm_90a while the test stays near 20 s of nvJitLink.
TEST_CASE("qmatmul: every declared kernel assembles (sm_80, sm_90, sm_90a in turn) with tensor-core SASS", "[ops][qmatmul][nvjitlink]") {
  const char* archs[] = {"sm_80", "sm_90", "sm_90a"};
  size_t i = 0, int8 = 0, int4_mma = 0, wgmma = 0, int4_wgmma = 0;
  for (jit::FamilyBase* f : {&ops::matmul_int8_family(), &ops::matmul_int4_family()})
    for (size_t c = 0; c < f->config_count(); ++c, ++i) {
      ir::Kernel k = f->declared_kernel(c);
      const std::string n = k.name();
      const char* arch = k.arch_specific() ? "sm_90a" : archs[i % 3];  // wgmma exists on sm_90a only
      INFO(n << " for " << arch);
      const std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
      CHECK(ptx.find(".local") == std::string::npos);
      const char* op = "";
      if (n.find("int8_wgmma") != std::string::npos) {
        CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"));
        CHECK_THAT(ptx, Contains("cp.async.bulk.tensor"));
        op = "GMMA";
        ++wgmma;
      } else if (n.find("int4_wgmma") != std::string::npos) {
        // The weights as wgmma's A from registers (no shared-memory descriptor for A), the
        // activations through TMA, Y out by TMA stores.
        const std::string shape = n.find("wgmma_256") != std::string::npos ? "m64n256k16" : "m64n128k16";
        CHECK_THAT(ptx, Contains("wgmma.mma_async.sync.aligned." + shape + ".f32." + (n.find("bf16") != std::string::npos ? "bf16.bf16" : "f16.f16") + " {"));
        CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.3d.shared::cluster.global"));
        CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.2d.global.shared::cta"));
        op = "GMMA";
        ++int4_wgmma;
      } else if (n.rfind("matmul_int8", 0) == 0) {
        CHECK_THAT(ptx, Contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
        op = "IMMA";
        ++int8;
      } else {
        CHECK_THAT(ptx, Contains("and.b32"));  // the magic-number dequantisation
        CHECK_THAT(ptx, Contains(n.find("bf16") != std::string::npos ? "bf16x2" : "f16x2"));
        // Both paths run on tensor cores (the streaming one with the m rows in an m16 tile).
        CHECK_THAT(ptx, Contains("mma.sync.aligned.m16n8k16"));
        op = "HMMA";
        ++int4_mma;
      }
      jit::LinkResult r = test::link_ptx(ptx, arch, n);
      jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(r.info_log.find("C7512") == std::string::npos);  // ptxas serialising the wgmmas (registers)
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
      const std::string sass = test::sass_of(r.cubin);
      if (sass.empty()) continue;
      if (*op) CHECK_THAT(sass, Contains(op));
      // The W4A16 Hopper kernel keeps slices in flight (4 with 128-row tiles, 2 with 256): a
      // wait for all of them after every wgmma means ptxas serialised the pipeline.
      if (n.find("int4_wgmma") != std::string::npos)
        CHECK_THAT(sass, Contains(n.find("wgmma_256") != std::string::npos ? "DEPBAR.LE gsb0, 0x1" : "DEPBAR.LE gsb0, 0x3"));
      CHECK(sass.find("STL") == std::string::npos);
    }
  CHECK(int8 >= 3);
  CHECK(wgmma >= 3);
  CHECK(int4_mma >= 10);
  CHECK(int4_wgmma >= 9);
  if (test::cuobjdump_path().empty()) WARN("cuobjdump not found (set KAIO_CUOBJDUMP): the SASS (IMMA / HMMA) is not checked");
}
