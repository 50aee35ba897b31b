// Kernels that move registers between warpgroups (setmaxnreg) are loaded from their PTX, which
// the driver compiles as a whole program: nvJitLink's separate compile ignores setmaxnreg
// (ptxas C7504) and spills the consumers (jit/backend_device.cpp).
//
// The kernel here: 384 threads, the first warpgroup gives its registers away (24), the other
// two take 240 each and keep 200 floats live through a few rounds of fused multiply-adds, more
// than the 168 a thread of a 384-thread block starts with.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/device.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "../ir/mma_kernels.h"
#include "../link_memo.h"
#include "../support.h"

using namespace kaio;

namespace {

constexpr uint32_t kLive = 200, kConsumerThreads = 256, kRounds = 3;

ir::Kernel reallocating_kernel(const std::string& name, bool reallocate) {
  ir::KernelBuilder b(name);
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto rounds = b.param<uint32_t>("rounds");
  b.launch_bounds(384, 1);
  if (reallocate) b.max_registers(168);
  ir::Value warp = b.warp_id();
  b.if_(warp < 4u, [&] {
     if (reallocate) b.setmaxnreg(24, false);
   }).else_([&] {
    if (reallocate) b.setmaxnreg(240, true);
    ir::Value t = b.block_idx_x() * kConsumerThreads + (b.thread_idx_x() - 128u);
    ir::Value base = ir::cast<uint64_t>(t) * uint64_t(kLive);
    auto v = b.array<float>(kLive, 0.0f);
    for (uint32_t i = 0; i < kLive; ++i) v[i] = x[base + uint64_t(i)];
    b.for_(0u, rounds, [&](ir::Value) {
      for (uint32_t i = 0; i < kLive; ++i) v[i] = ir::fma(v[i], v[(i + 1) % kLive], v[(i + 7) % kLive]);
    });
    for (uint32_t i = 0; i < kLive; ++i) y[base + uint64_t(i)] = v[i];
  });
  return b.build();
}

// The same rounds on the host, in the same order (fmaf rounds once, as fma.rn.f32).
std::vector<float> reference(const std::vector<float>& x) {
  std::vector<float> y = x;
  for (size_t t = 0; t < x.size() / kLive; ++t) {
    float* v = y.data() + t * kLive;
    for (uint32_t r = 0; r < kRounds; ++r)
      for (uint32_t i = 0; i < kLive; ++i) v[i] = std::fmaf(v[i], v[(i + 1) % kLive], v[(i + 7) % kLive]);
  }
  return y;
}

bool interpreted() {
  const char* v = std::getenv("KAIO_INTERPRET");
  return v && *v && std::string(v) != "0";
}

}  // namespace

TEST_CASE("a kernel with setmaxnreg is marked for a whole-program compile", "[jit][nvjitlink]") {
  CHECK(reallocating_kernel("wp_flag", true).reallocates_registers());
  CHECK(!reallocating_kernel("wp_flag_plain", false).reallocates_registers());
  const ir::Kernel k = reallocating_kernel("wp_compile", true);
  const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
  // nvJitLink links it (its cubin is the fallback) but ignores setmaxnreg: the reason for the
  // whole-program load.
  const jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
  CHECK(!r.cubin.empty());
  CHECK(r.info_log.find("C7504") != std::string::npos);
  CHECK(jit::parse_resources(r.info_log, 384).local_bytes > 0);
  // As a whole program, the 200 live floats fit the consumers' 240 registers.
  const test::WholeProgram w = test::whole_program_compile(ptx, "sm_90a");
  if (!w.ran) {
    WARN("ptxas not found (set KAIO_PTXAS): the whole-program compile is not checked");
    return;
  }
  INFO(w.log);
  REQUIRE(!w.cubin.empty());
  const jit::Resources res = jit::parse_resources(w.log, 384);
  CHECK(res.local_bytes == 0);
  CHECK(res.spill_stores == 0);
  CHECK(w.log.find("bytes stack frame") != std::string::npos);
  CHECK(w.log.find("C7504") == std::string::npos);
}

TEST_CASE("a kernel with setmaxnreg runs from the driver's whole-program compile", "[gpu]") {
  if (!interpreted() && jit::device_info().sm != 90) {
    WARN("setmaxnreg needs an sm_90 device (sm_90a): not run on this " << jit::device_info().arch);
    return;
  }
  std::mt19937 rng(::kaio::test::case_seed());
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  const uint32_t blocks = interpreted() ? 2 : 264;  // two blocks an SM on an H100 / H200
  std::vector<float> x(size_t(blocks) * kConsumerThreads * kLive);
  for (float& e : x) e = d(rng);
  const std::vector<float> want = reference(x);
  // KAIO_WHOLE_PROGRAM=0 loads nvJitLink's cubin (setmaxnreg ignored, consumers spill):
  // slower, the same results. Each form is its own kernel, so each loads afresh.
  for (bool whole : {true, false}) {
    INFO((whole ? "whole-program load" : "KAIO_WHOLE_PROGRAM=0: nvJitLink's cubin"));
    if (!whole) setenv("KAIO_WHOLE_PROGRAM", "0", 1);
    const jit::CompiledKernel ck = jit::compile(reallocating_kernel(whole ? "wp_run" : "wp_run_cubin", true));
    DeviceBuffer<float> dx(x), dy(x.size());
    dy.fill_bytes(0xFF);
    ck.launch({.grid = {blocks}, .block = {384}}, dx, dy, kRounds);
    const std::vector<float> got = dy.to_host();
    if (!whole) unsetenv("KAIO_WHOLE_PROGRAM");
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ < 5)
        UNSCOPED_INFO("element " << i << ": got " << got[i] << ", expected " << want[i]);
    CHECK(bad == 0);
    if (interpreted()) continue;
    const jit::Resources res = ck.resources();
    INFO(res.str());
    CHECK(res.from_device);
    CHECK(res.whole_program == whole);
    if (whole) CHECK(res.local_bytes == 0);
    else CHECK(res.local_bytes > 0);
  }
}
