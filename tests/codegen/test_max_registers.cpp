// The per-kernel register cap: b.max_registers(n) is an IR attribute (printed, hashed),
// emitted as the PTX .maxnreg directive, checked (24..255), and obeyed by ptxas.
#include <catch2/catch.hpp>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

// 64 accumulators live across a loop: without a cap ptxas keeps them all in registers.
ir::Kernel pressure(uint32_t cap, uint32_t bound = 0) {
  ir::KernelBuilder b("pressure");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto n = b.param<uint32_t>("n");
  if (bound) b.launch_bounds(bound);
  if (cap) b.max_registers(cap);
  auto acc = b.array<float>(64, 0.0f);
  b.for_(0u, n, [&](ir::Value i) {
    for (uint32_t j = 0; j < 64; ++j) {
      ir::Value v = x[i * 64u + j];
      acc[j] = ir::fma(v, v, acc[(j + 1) % 64]);
    }
  });
  for (uint32_t j = 0; j < 64; ++j) y[b.thread_idx_x() * 64u + j] = acc[j];
  return b.build();
}

}  // namespace

TEST_CASE("ptx: max_registers emits .maxnreg after the launch bounds", "[codegen][golden]") {
  std::string ptx = codegen::emit_ptx(pressure(40, 256), {"sm_90", 9, 0});
  INFO(ptx);
  CHECK(ptx.find(")\n.maxntid 256, 1, 1\n.maxnreg 40\n{") != std::string::npos);
  CHECK(codegen::emit_ptx(pressure(0), {"sm_90", 9, 0}).find(".maxnreg") == std::string::npos);
}

TEST_CASE("max_registers: printed, in the hash and the cache key", "[ir][hash][printer]") {
  CHECK_THAT(pressure(40).print(), Contains("  .max_registers 40\n"));
  CHECK(pressure(0).print().find(".max_registers") == std::string::npos);
  CHECK(pressure(40).hash() == pressure(40).hash());
  CHECK_FALSE(pressure(40).hash() == pressure(0).hash());
  CHECK_FALSE(pressure(40).hash() == pressure(48).hash());
  const jit::CompileOptions o{.arch = "sm_90", .use_cache = false};
  CHECK_FALSE(jit::compile(pressure(40), o).key() == jit::compile(pressure(0), o).key());
  CHECK(jit::compile(pressure(40), o).key() == jit::compile(pressure(40), o).key());
}

TEST_CASE("max_registers: 24..255, else a UsageError naming the op", "[ir][builder]") {
  for (uint32_t bad : {0u, 23u, 256u}) {
    ir::KernelBuilder b("capped");
    UsageError e = test::usage_error_of([&] { b.max_registers(bad); });
    CHECK(e.op() == "max_registers");
    CHECK_THAT(e.what(), Contains("24..255") && Contains(std::to_string(bad)));
  }
  ir::KernelBuilder b("capped");
  b.max_registers(24);
  b.max_registers(255);  // the last call wins
  CHECK_THAT(b.build().print(), Contains(".max_registers 255"));
}

TEST_CASE("max_registers: nvJitLink obeys the cap for sm_80 and sm_90", "[codegen][nvjitlink]") {
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(arch);
    const ir::Kernel free = pressure(0), capped = pressure(32);
    jit::Resources rf = jit::parse_resources(test::link_ptx(codegen::emit_ptx(free, {arch, 9, 0}), arch, "pressure").info_log, 0);
    jit::Resources rc = jit::parse_resources(test::link_ptx(codegen::emit_ptx(capped, {arch, 9, 0}), arch, "pressure").info_log, 0);
    CHECK(rf.registers > 32);   // the uncapped kernel wants more ...
    CHECK(rc.registers <= 32);  // ... and the capped one stays within its cap
  }
}
