// FP8 on the device (sm_89+; in interpret mode, the interpreter): the GPU's cvt forms against
// the independent reference of tests/ir/fp8_support.h on every code and at every rounding
// boundary, so that a device run checks that the interpreter's model is the hardware's.
#include <catch2/catch.hpp>

#include <cstring>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/kaio.h"
#include "../ir/fp8_support.h"

using namespace kaio;
namespace f8 = kaio::test::fp8;

namespace {

bool fp8_device() {
  if (jit::interpret_mode() || codegen::parse_arch(jit::detail::backend().default_arch()).sm >= 89) return true;
  WARN("fp8 conversions need sm_89 or newer; skipped here");
  return false;
}

template <class From, class To>
std::vector<To> device_cast(const std::vector<From>& in) {
  const jit::CompiledKernel k = jit::compile(f8::cast_kernel(ir::ScalarOf<From>::value, ir::ScalarOf<To>::value));
  DeviceBuffer<From> x(in);
  DeviceBuffer<To> out(in.size());
  out.fill_bytes(0xa5);  // poisoned
  k.launch({.grid = {uint32_t(in.size() + 255) / 256}, .block = {256}}, x, out, uint32_t(in.size()));
  return out.to_host();
}

template <class F8>
void check_format() {
  const f8::Format& f = std::is_same_v<F8, fp8_e5m2> ? f8::kE5M2 : f8::kE4M3;
  std::vector<F8> codes;
  for (int c = 0; c < 256; ++c) codes.push_back(F8::from_bits(uint8_t(c)));
  const std::vector<half> h = device_cast<F8, half>(codes);
  const std::vector<float> s = device_cast<F8, float>(codes);
  for (int c = 0; c < 256; ++c) {
    INFO((f.e5m2 ? "e5m2" : "e4m3") << " code 0x" << std::hex << c << ": f16 0x" << h[c].bits);
    const double ref = f8::value(f, uint8_t(c));
    if (std::isnan(ref)) {
      CHECK(h[c].bits == 0x7fff);  // the canonical f16 NaN the interpreter assumes
      CHECK(std::isnan(s[c]));
      continue;
    }
    CHECK(double(float(h[c])) == ref);
    CHECK(std::signbit(float(h[c])) == bool(c & 0x80));
    CHECK(double(s[c]) == ref);
  }
  // to the other format: through the exact f16, one rounding (satfinite)
  using Other = std::conditional_t<std::is_same_v<F8, fp8_e5m2>, fp8_e4m3, fp8_e5m2>;
  const f8::Format& g = std::is_same_v<F8, fp8_e5m2> ? f8::kE4M3 : f8::kE5M2;
  const std::vector<Other> other = device_cast<F8, Other>(codes);
  for (int c = 0; c < 256; ++c) {
    INFO("code 0x" << std::hex << c << " -> 0x" << int(other[c].bits));
    CHECK(int(other[c].bits) == int(f8::encode(g, f8::value(f, uint8_t(c)), true)));
  }
  const std::vector<float> xs = f8::inputs(f, 20000);
  const std::vector<F8> from_f32 = device_cast<float, F8>(xs);
  std::vector<half> xh;
  for (float x : xs) xh.push_back(half(x));
  const std::vector<F8> from_f16 = device_cast<half, F8>(xh);
  for (size_t i = 0; i < xs.size(); ++i) {
    INFO((f.e5m2 ? "e5m2 " : "e4m3 ") << xs[i] << " -> 0x" << std::hex << int(from_f32[i].bits));
    REQUIRE(int(from_f32[i].bits) == int(f8::encode(f, xs[i], true)));
    REQUIRE(int(from_f16[i].bits) == int(f8::encode(f, float(xh[i]), true)));
  }
}

}  // namespace

TEST_CASE("fp8 on the device: cvt on every code and every rounding boundary matches the reference", "[gpu][fp8]") {
  if (!fp8_device()) return;
  check_format<fp8_e4m3>();
  check_format<fp8_e5m2>();
}

TEST_CASE("fp8 on the device: scalar parameters of both formats, refused from other host types", "[gpu][fp8]") {
  if (!fp8_device()) return;
  ir::KernelBuilder b("fp8_params");
  auto x = b.param<fp8_e4m3>("x");
  auto y = b.param<fp8_e5m2>("y");
  auto out = b.param<float*>("out");
  auto raw = b.param<fp8_e5m2*>("raw");
  out[0] = ir::cast<float>(x);
  out[1] = ir::cast<float>(y);
  raw[0] = y;
  const jit::CompiledKernel k = jit::compile(b.build());
  DeviceBuffer<float> o(std::vector<float>{-1.0f, -1.0f});
  DeviceBuffer<fp8_e5m2> r(std::vector<fp8_e5m2>{fp8_e5m2::from_bits(0x11)});
  k.launch({.grid = {1}, .block = {1}}, fp8_e4m3(-0.4375f), fp8_e5m2(-57344.0f), o, r);
  const std::vector<float> h = o.to_host();
  CHECK(h[0] == -0.4375f);
  CHECK(h[1] == -57344.0f);
  CHECK(r.to_host()[0].bits == 0xfb);
  CHECK_THROWS_AS(k.launch({.grid = {1}, .block = {1}}, fp8_e5m2(1.0f), fp8_e5m2(1.0f), o, r), UsageError);
  CHECK_THROWS_AS(k.launch({.grid = {1}, .block = {1}}, 3u, fp8_e5m2(1.0f), o, r), UsageError);
}
