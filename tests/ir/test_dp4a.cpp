// dp4a: the builder's type rule, the printed IR, and the result against the host formula
// (four signed byte products added to c, wrapping at 32 bits) on edge and random words,
// in the interpreter or on the device ([gpu]).
#include <catch2/catch.hpp>

#include <random>

#include "kaio/kaio.h"
#include "../support.h"

using namespace kaio;

namespace {

int32_t dp4a_ref(uint32_t a, uint32_t b, int32_t c) {
  uint32_t s = uint32_t(c);
  for (int k = 0; k < 32; k += 8) s += uint32_t(int32_t(int8_t(a >> k)) * int32_t(int8_t(b >> k)));
  return int32_t(s);
}

ir::Kernel dp4a_kernel() {
  ir::KernelBuilder b("dp4a_test");
  auto a = b.param<const int32_t*>("a");
  auto bb = b.param<const int32_t*>("b");
  auto c = b.param<const int32_t*>("c");
  auto out = b.param<int32_t*>("out");
  ir::Value i = b.global_id_x();
  ir::Value x = a[i], y = bb[i], z = c[i];
  out[i] = ir::dp4a(x, y, z);
  return b.build();
}

}  // namespace

TEST_CASE("dp4a: s32 operands only; printed as dp4a", "[ir][dp4a]") {
  ir::KernelBuilder b("dp4a_types");
  auto p = b.param<const uint32_t*>("p");
  auto q = b.param<const int32_t*>("q");
  ir::Value u = p[0], s = q[0];
  try {
    ir::dp4a(u, s, s);
    FAIL("u32 accepted");
  } catch (const UsageError& e) {
    CHECK(e.op() == "dp4a");
    CHECK_THAT(e.what(), Catch::Contains("s32"));
  }
  const std::string ir_text = dp4a_kernel().print();
  CHECK_THAT(ir_text, Catch::Contains("dp4a"));
}

TEST_CASE("dp4a: four signed byte products plus c, wrapping, on edge and random words", "[gpu][ir][dp4a]") {
  std::vector<uint32_t> a = {0, 0x80808080u, 0x7f7f7f7fu, 0x80808080u, 0xffffffffu, 0x01020304u, 0x7f7f7f7fu, 0x0f0f0f0fu};
  std::vector<uint32_t> b = {0, 0x80808080u, 0x7f7f7f7fu, 0x7f7f7f7fu, 0x01010101u, 0xfffefdfcu, 0x7f7f7f7fu, 0x01010101u};
  std::vector<int32_t> c = {0, 0, 0, -5, 7, 1, 0x7fffffff, int32_t(0x80000000u)};
  std::mt19937 rng(11);
  while (a.size() < 256) a.push_back(rng()), b.push_back(rng()), c.push_back(int32_t(rng()));
  std::vector<int32_t> ai(a.begin(), a.end()), bi(b.begin(), b.end());
  DeviceBuffer<int32_t> da(ai), db(bi), dc(c), dout(a.size());
  dout.fill_bytes(0xA5);
  jit::CompiledKernel k = jit::compile(dp4a_kernel());
  CHECK_THAT(k.ptx(), Catch::Contains("dp4a.s32.s32"));
  k.launch({.grid = {uint32_t(a.size() / 64)}, .block = {64}}, da, db, dc, dout);
  const std::vector<int32_t> got = dout.to_host();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(i << ": a " << a[i] << " b " << b[i] << " c " << c[i]);
    REQUIRE(got[i] == dp4a_ref(a[i], b[i], c[i]));
  }
  CHECK(dp4a_ref(0x80808080u, 0x80808080u, 0) == 4 * 16384);  // the formula itself, by hand
  CHECK(dp4a_ref(0x7f7f7f7fu, 0x7f7f7f7fu, 0x7fffffff) == int32_t(0x7fffffffu + 4u * 16129u));
}
