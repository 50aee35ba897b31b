// Builder scaling: the time to build and seal (verify + encode + hash) a kernel of N ops,
// for N = 1k, 4k, 16k. Building must be linear in the kernel's size: vector accesses check
// their constant index in O(1), and the verifier, divergence and async passes are linear.
//   build/bench/build_scale [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kaio/kaio.h"

using namespace kaio;

namespace {

// About `ops` IR ops: vector loads with constant indices, arithmetic, and a register array.
ir::Kernel build(int ops) {
  ir::KernelBuilder b("scale");
  auto x = b.param<const float*>("x");
  auto out = b.param<float*>("out");
  auto acc = b.array<float>(16, 0.0f);
  int made = 0, k = 0;
  while (made < ops) {
    std::vector<ir::Value> v = ir::load_vec(x, 4 * k, 4);    // const + load_vec: 2 ops
    ir::Value s = v[0] * v[1] + v[2];                           // 2
    acc[k % 16] = ir::fma(s, v[3], acc[k % 16]);                // read + fma + write: 3
    made += 7;
    ++k;
  }
  for (int j = 0; j < 16; ++j) out[j] = acc[j];
  return b.build();
}

double median_us(int ops, int rounds) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    ir::Kernel k = build(ops);
    auto t1 = std::chrono::steady_clock::now();
    if (!k.valid()) std::abort();
    t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
  build(1000);  // warm up the allocator
  std::printf("| ops | build+seal us (median of %d) | us per op |\n|---|---|---|\n", rounds);
  double base = 0;
  for (int ops : {1000, 4000, 16000}) {
    double us = median_us(ops, rounds);
    if (ops == 1000) base = us;
    std::printf("| %d | %.1f | %.3f |\n", ops, us, us / ops);
  }
  std::printf("\n4k/1k and 16k/1k ratios show linearity (4 and 16 when linear); base %.1f us\n", base);
  return 0;
}
