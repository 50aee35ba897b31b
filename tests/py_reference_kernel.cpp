// The kernel the Python tests build with kaio.KernelBuilder (python/tests/test_builder.py),
// built here with the C++ builder: shared memory, a grid-stride loop and warp reductions.
// Prints the cache key for sm_90 and compiles it into the cache, so that the Python side
// can check that both builders give one kernel, one key and one cache entry.
#include <cstdint>
#include <cstdio>

#include "kaio/ir/builder.h"
#include "kaio/jit/compile.h"

using namespace kaio;

int main() {
  ir::KernelBuilder b("py_block_sum");
  auto x = b.param<const float*>("x");
  auto out = b.param<float*>("out");
  auto n = b.param<uint32_t>("n");
  auto sh = b.shared<float>(8);
  auto tid = b.thread_idx_x();
  auto acc = b.var<float>(0.0f);
  // One emitting call per statement: C++ leaves the order of operands' evaluation open.
  auto bd = b.block_dim_x();
  auto gd = b.grid_dim_x();
  auto stride = bd * gd;
  auto start = b.global_id_x();
  b.for_(start, n, stride, [&](ir::Value i) { acc += x[i]; });
  auto s = b.warp_reduce_sum(acc);
  auto lane = b.lane_id();
  auto warp = b.warp_id();
  b.if_(lane == 0u, [&] { sh[warp] = s; });
  b.barrier();
  b.if_(tid < 32u, [&] {
    auto w = b.var<float>(0.0f);
    b.if_(tid < 8u, [&] { w = sh[tid]; });
    auto t = b.warp_reduce_sum(w);
    b.if_(tid == 0u, [&] { out[b.block_idx_x()] = t; });
  });
  ir::Kernel k = b.build();
  jit::CompiledKernel c = jit::compile(k, {.arch = "sm_90"});
  jit::flush_cache_writes();
  std::printf("%s %s\n", jit::cache_key(k, "sm_90").hex().c_str(), c.key().hex().c_str());
  return 0;
}
