// Warp-level tensor-core kernels end to end: one m16n8k16 tile fed by cp.async (with
// zero-fill) and ldmatrix from swizzled / padded shared tiles, a 64-register accumulator
// over several mma.sync, and one kernel per shape. Each is checked against float64 in the
// interpreter (and on the device under [gpu]), assembled by nvJitLink for sm_80 and sm_90,
// and its SASS checked for the tensor-core instruction and for no local memory.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "mma_kernels.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ir::MmaKind;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

template <class T>
std::vector<T> random_vec(size_t n, float lo = -2.0f, float hi = 2.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = T(u(rng()));
  return v;
}

// |d - ref| <= 2^-18 * (|c| + sum |a b|): the tensor core adds K exact products in f32
// (its own order and internal rounding), so a few ulp of the terms' magnitude.
template <class T>
void check_tile(const std::vector<T>& a, const std::vector<T>& b, const std::vector<float>& c, const std::vector<float>& d,
                uint32_t k_valid) {
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double ref = c[i * 8 + j], mag = std::abs(ref);
      for (uint32_t k = 0; k < k_valid; ++k) {
        double p = double(float(a[i * 16 + k])) * double(float(b[k * 8 + j]));
        ref += p;
        mag += std::abs(p);
      }
      INFO("k_valid " << k_valid << " D[" << i << "][" << j << "] = " << d[i * 8 + j] << ", float64 " << ref);
      REQUIRE(std::abs(d[i * 8 + j] - ref) <= 0x1p-18 * mag + 1e-30);
    }
}

// The tile kernel in the interpreter (ir::interpret) or through jit launch (the device, or
// the interpreter with KAIO_INTERPRET=1), fresh inputs, output poisoned.
template <class T>
void run_tile(MmaKind kind, bool launch) {
  ir::Kernel k = test::warp_mma_tile(kind);
  for (uint32_t k_valid : {16u, 11u, 8u, 1u, 0u}) {
    std::vector<T> a = random_vec<T>(256), b = random_vec<T>(128);
    std::vector<float> c = random_vec<float>(128), d(128, std::nanf(""));
    if (!launch) {
      ir::interpret(k, {.grid = {1}, .block = {32}}, a, b, c, d, k_valid);
    } else {
      jit::CompiledKernel ck = jit::compile(k);
      DeviceBuffer<T> da(a), db(b);
      DeviceBuffer<float> dc(c), dd(d);
      ck.launch({.grid = {1}, .block = {32}}, da, db, dc, dd, k_valid);
      d = dd.to_host();
    }
    check_tile(a, b, c, d, k_valid);
  }
}

// nvJitLink for sm_80 and sm_90: no local memory, no spills; the SASS has `op` and no LDL/STL.
void check_cubins(const ir::Kernel& k, const char* op, int min_registers = 0) {
  std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  CHECK(ptx.find(".local") == std::string::npos);
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(k.name() << " for " << arch);
    jit::LinkResult r = test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
    jit::Resources res = jit::parse_resources(r.info_log, 0);
    CHECK(res.local_bytes == 0);
    CHECK(res.spill_stores == 0);
    CHECK(res.registers >= min_registers);
    std::string sass = test::sass_of(r.cubin);
    if (sass.empty()) {
      WARN("cuobjdump not found (set KAIO_CUOBJDUMP): the SASS of " << k.name() << " is not checked");
      continue;
    }
    INFO(sass);
    CHECK_THAT(sass, Contains(op));
    CHECK_FALSE(sass.find("LDL") != std::string::npos);
    CHECK_FALSE(sass.find("STL") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("mma kernel: one m16n8k16 tile from cp.async and ldmatrix, in the interpreter", "[ir][tensor][interp]") {
  run_tile<half>(MmaKind::F16, false);
  run_tile<bfloat16>(MmaKind::BF16, false);
}

TEST_CASE("mma kernel: one m16n8k16 tile from cp.async and ldmatrix, launched", "[gpu][tensor]") {
  run_tile<half>(MmaKind::F16, true);
  run_tile<bfloat16>(MmaKind::BF16, true);
}

TEST_CASE("mma kernel: the tile kernels assemble for sm_80 and sm_90 to HMMA, without local memory", "[codegen][tensor][nvjitlink]") {
  check_cubins(test::warp_mma_tile(MmaKind::F16), "HMMA");
  check_cubins(test::warp_mma_tile(MmaKind::BF16), "HMMA");
  std::string ptx = codegen::emit_ptx(test::warp_mma_tile(MmaKind::F16), {"sm_80", 9, 0});
  CHECK_THAT(ptx, Contains("cp.async.cg.shared.global") && Contains("cp.async.ca.shared.global") &&
                      Contains("ldmatrix.sync.aligned.m8n8.x4.shared.b16") &&
                      Contains("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"));
}

TEST_CASE("mma kernel: each shape assembles to its tensor-core SASS (HMMA; IMMA for s8)", "[codegen][tensor][nvjitlink]") {
  check_cubins(test::direct_mma(MmaKind::F16), "HMMA");
  check_cubins(test::direct_mma(MmaKind::BF16), "HMMA");
  check_cubins(test::direct_mma(MmaKind::TF32), "HMMA");
  check_cubins(test::direct_mma(MmaKind::S8), "IMMA");
}

namespace {

void run_acc64(bool launch) {
  ir::Kernel k = test::accumulator_tile_64();
  const uint32_t K = 48;
  std::vector<half> a = random_vec<half>(64 * K), b = random_vec<half>(K * 32);
  std::vector<float> d(64 * 32, std::nanf(""));
  if (!launch) {
    ir::interpret(k, {.grid = {1}, .block = {32}}, a, b, d, K);
  } else {
    jit::CompiledKernel ck = jit::compile(k);
    DeviceBuffer<half> da(a), db(b);
    DeviceBuffer<float> dd(d);
    ck.launch({.grid = {1}, .block = {32}}, da, db, dd, K);
    d = dd.to_host();
  }
  for (uint32_t i = 0; i < 64; ++i)
    for (uint32_t j = 0; j < 32; ++j) {
      double ref = 0, mag = 0;
      for (uint32_t kk = 0; kk < K; ++kk) {
        double p = double(float(a[i * K + kk])) * double(float(b[kk * 32 + j]));
        ref += p;
        mag += std::abs(p);
      }
      INFO("D[" << i << "][" << j << "]");
      REQUIRE(std::abs(d[i * 32 + j] - ref) <= 0x1p-18 * mag + 1e-30);
    }
}

}  // namespace

TEST_CASE("mma kernel: a 64-register accumulator over 16 mma.sync per step stays in registers", "[ir][tensor][interp]") {
  ir::Kernel k = test::accumulator_tile_64();
  std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
  size_t n = 0;
  for (size_t p = 0; (p = ptx.find("mma.sync.aligned.m16n8k16", p)) != std::string::npos; ++p) ++n;
  CHECK(n == 16);  // one per m16n8 tile of the 64 x 32 block, inside the K loop
  check_cubins(k, "HMMA", 64);
  run_acc64(false);
}

TEST_CASE("mma kernel: the 64-register accumulator, launched", "[gpu][tensor]") { run_acc64(true); }

namespace {

float tf32_exact(float x) {  // a value tf32 holds exactly, so truncation and rounding agree
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}

// D = A * B + C for one shape through jit (the device, or KAIO_INTERPRET=1), float64 reference.
template <class T>
void run_direct_launched(MmaKind kind) {
  const ir::MmaShape& s = ir::mma_shape(kind);
  INFO(s.name);
  jit::CompiledKernel ck = jit::compile(test::direct_mma(kind));
  std::vector<T> a = random_vec<T>(size_t(s.m) * s.k), b = random_vec<T>(size_t(s.k) * s.n);
  if constexpr (std::is_same_v<T, float>) {
    for (auto& x : a) x = tf32_exact(x);
    for (auto& x : b) x = tf32_exact(x);
  }
  std::vector<float> c = random_vec<float>(size_t(s.m) * s.n), d(c.size(), std::nanf(""));
  DeviceBuffer<T> da(a), db(b);
  DeviceBuffer<float> dc(c), dd(d);
  ck.launch({.grid = {1}, .block = {32}}, da, db, dc, dd);
  d = dd.to_host();
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double ref = c[i * s.n + j], mag = std::abs(ref);
      for (int k = 0; k < s.k; ++k) {
        double p = double(float(a[i * s.k + k])) * double(float(b[k * s.n + j]));
        ref += p;
        mag += std::abs(p);
      }
      INFO("D[" << i << "][" << j << "]");
      REQUIRE(std::abs(d[i * s.n + j] - ref) <= 0x1p-18 * mag + 1e-30);
    }
}

}  // namespace

TEST_CASE("mma kernel: every shape, launched, against float64", "[gpu][tensor]") {
  // The direct kernels: fragments through the descriptors, so the device checks the
  // descriptors the interpreter uses (test_tensor_core.cpp runs them in the interpreter).
  run_direct_launched<half>(MmaKind::F16);
  run_direct_launched<bfloat16>(MmaKind::BF16);
  run_direct_launched<float>(MmaKind::TF32);
  jit::CompiledKernel ck = jit::compile(test::direct_mma(MmaKind::S8));
  std::uniform_int_distribution<int> i8(-128, 127);
  std::vector<int8_t> a(16 * 32), b(32 * 8);
  for (auto& x : a) x = static_cast<int8_t>(i8(rng()));
  for (auto& x : b) x = static_cast<int8_t>(i8(rng()));
  std::vector<int32_t> c(128), d(128, 0x7eadbeef);
  for (auto& x : c) x = i8(rng()) * 1000;
  DeviceBuffer<int8_t> da(a), db(b);
  DeviceBuffer<int32_t> dc(c), dd(d);
  ck.launch({.grid = {1}, .block = {32}}, da, db, dc, dd);
  d = dd.to_host();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      int64_t ref = c[i * 8 + j];
      for (int k = 0; k < 32; ++k) ref += int64_t(a[i * 32 + k]) * b[k * 8 + j];
      INFO("s8 D[" << i << "][" << j << "]");
      REQUIRE(d[i * 8 + j] == ref);
    }
}
