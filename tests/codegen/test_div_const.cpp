// Integer division and remainder by a constant (codegen/div_magic.h): the magic numbers
// against x / d on the host at both widths (edge values and random ones, many divisors), the
// PTX each form emits, and on the device (in CI: the interpreter, which runs the IR) every
// integer type's quotient and remainder by constant divisors against the host's.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kaio/codegen/div_magic.h"
#include "kaio/codegen/ptx.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "../link_memo.h"
#include "../support.h"
#include "ptx_check.h"

using namespace kaio;

namespace {

std::mt19937_64& rng() {
  return ::kaio::test::rng64();
}

// Divisors: small ones, primes, near powers of two, the widest.
std::vector<uint64_t> divisors(int bits) {
  std::vector<uint64_t> d = {3, 5, 6, 7, 9, 10, 11, 12, 24, 25, 100, 125, 641, 1000, 6700417, 65535, 65537};
  const uint64_t top = bits == 64 ? ~uint64_t(0) : 0xffffffffull;
  for (int k = 3; k < bits; k += 5) {
    d.push_back((uint64_t(1) << k) - 1);
    d.push_back((uint64_t(1) << k) + 1);
  }
  d.push_back(top);
  d.push_back(top - 1);
  d.push_back(top / 3);
  for (int i = 0; i < 40; ++i) d.push_back((rng()() & top) | 3);  // odd-ish, rarely a power of two
  std::vector<uint64_t> out;
  for (uint64_t v : d)
    if (v > 2 && (v & (v - 1)) != 0) out.push_back(v);
  return out;
}

}  // namespace

TEST_CASE("div_magic: the multiply-high form equals x / d at 32 and 64 bits", "[codegen][div]") {
  for (int bits : {32, 64}) {
    const uint64_t top = bits == 64 ? ~uint64_t(0) : 0xffffffffull;
    for (uint64_t d : divisors(bits)) {
      const codegen::DivMagic m = codegen::udiv_magic(d, bits);
      std::vector<uint64_t> xs = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, top, top - 1, top / 2, top / 2 + 1, top - top % d, top - top % d - 1};
      for (int i = 0; i < 2000; ++i) xs.push_back(rng()() & top);
      size_t bad = 0;
      for (uint64_t x : xs) bad += codegen::udiv_by_magic(x & top, m, bits) != (x & top) / d;
      INFO("bits " << bits << " d " << d << " mul " << m.mul << " shift " << m.shift);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("division by a constant: shifts and masks for powers of two, a multiply-high otherwise", "[codegen][golden][div]") {
  CHECK_PTX(uint32_t, a / 32u, "shr.u32 %r4, %r0, 5");
  CHECK_PTX(uint32_t, a % 32u, "and.b32 %r4, %r0, 31U");
  CHECK_PTX(uint64_t, a / uint64_t(8), "shr.u64 %rd6, %rd0, 3");
  CHECK_PTX(uint32_t, a / 7u, "mul.hi.u32 %r5, %r0, 613566757U");
  CHECK_PTX(int32_t, a / 4, "shr.s32 %r4, %r5, 2");
  CHECK_PTX(int32_t, a / 7, "div.s32 %r4, %r0, %r3");  // signed, not a power of two: the generic form
  CHECK_PTX(uint32_t, a / bb, "div.u32 %r3, %r0, %r1");
}

namespace {

template <class T>
std::vector<T> const_divisors() {
  return std::is_signed_v<T> ? std::vector<T>{1, 2, 4, 64, 7, 10, 641, std::numeric_limits<T>::max()}
                             : std::vector<T>{1, 2, 4, 64, 3, 7, 10, 641, T(std::numeric_limits<T>::max() / 3), std::numeric_limits<T>::max()};
}

// out[i * 2d] = x / d_j, out[.. + 1] = x % d_j for each constant divisor j.
template <class T>
ir::Kernel division_kernel(const std::vector<T>& ds) {
  ir::KernelBuilder b(std::string("div_const_") + ir::scalar_name(ir::type_of<T>().elem));
  auto in = b.param<const T*>("in");
  auto out = b.param<T*>("out");
  auto n = b.param<uint32_t>("n");
  ir::Value i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value x = in[i];
    for (size_t j = 0; j < ds.size(); ++j) {
      ir::Value d = b.constant<T>(ds[j]);
      out[i * uint32_t(2 * ds.size()) + uint32_t(2 * j)] = x / d;
      out[i * uint32_t(2 * ds.size()) + uint32_t(2 * j + 1)] = x % d;
    }
  });
  return b.build();
}

template <class T>
void check_division_on_device() {
  const std::vector<T> ds = const_divisors<T>();
  jit::CompiledKernel ck = jit::compile(division_kernel(ds));
  std::vector<T> xs = {0, 1, 2, 3, 63, 64, 65, 640, 641, 642, std::numeric_limits<T>::max(), T(std::numeric_limits<T>::max() - 1)};
  if constexpr (std::is_signed_v<T>) {
    for (T v : {T(-1), T(-2), T(-3), T(-63), T(-64), T(-65), T(-641), T(-642), std::numeric_limits<T>::min(), T(std::numeric_limits<T>::min() + 1)})
      xs.push_back(v);
  }
  for (int k = 0; k < 4000; ++k) xs.push_back(T(rng()()));
  const uint32_t count = uint32_t(xs.size());
  jit::DeviceBuffer<T> din(xs);
  jit::DeviceBuffer<T> dout(size_t(count) * 2 * ds.size());
  dout.fill_bytes(0xA5);
  ck.launch({.grid = {(count + 127) / 128}, .block = {128}}, din, dout, count);
  const std::vector<T> got = dout.to_host();
  size_t bad = 0;
  for (uint32_t e = 0; e < count; ++e)
    for (size_t j = 0; j < ds.size(); ++j) {
      const T x = xs[e], d = ds[j];
      const bool q_ok = got[size_t(e) * 2 * ds.size() + 2 * j] == T(x / d), r_ok = got[size_t(e) * 2 * ds.size() + 2 * j + 1] == T(x % d);
      if (!(q_ok && r_ok) && bad++ < 5) UNSCOPED_INFO(+x << " by " << +d);
    }
  CHECK(bad == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("division by constants assembles for sm_80, sm_90 and sm_90a without local memory", "[codegen][div][nvjitlink]",
                   uint32_t, int32_t, uint64_t, int64_t) {
  const ir::Kernel k = division_kernel(const_divisors<TestType>());
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    INFO(arch);
    const std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
    const jit::Resources res = jit::parse_resources(test::link_ptx(ptx, arch, k.name()).info_log, 0);
    CHECK(res.local_bytes == 0);
  }
}

TEMPLATE_TEST_CASE("division by constants on the device equals the host's", "[gpu][div]", uint32_t, int32_t, uint64_t, int64_t) {
  check_division_on_device<TestType>();
}
