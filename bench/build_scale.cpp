// Builder scaling: the time to build and seal (verify + encode + hash) a kernel of N ops,
// for N = 1k, 4k, 16k. Building must be linear in the kernel's size: vector accesses check
// their constant index in O(1), and the verifier, divergence and async passes are linear.
//   build/bench/build_scale [--rounds R] [--ops N]   (--ops: only that size, e.g. for a profile)
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
// Builds into `b`; the caller seals.
void fill(ir::KernelBuilder& b, int ops) {
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
}

struct Times {
  double total, build, seal;  // medians, microseconds
};

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

Times measure(int ops, int rounds) {
  std::vector<double> total, build, seal;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    ir::Kernel k;
    {
      ir::KernelBuilder b("scale");
      fill(b, ops);
      auto t1 = std::chrono::steady_clock::now();
      k = b.build();
      auto t2 = std::chrono::steady_clock::now();
      build.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      seal.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    auto t3 = std::chrono::steady_clock::now();
    if (!k.valid()) std::abort();
    total.push_back(std::chrono::duration<double, std::micro>(t3 - t0).count());
  }
  return {median(total), median(build), median(seal)};
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  std::vector<int> sizes{1000, 4000, 16000};
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--ops")) sizes = {std::max(1, std::atoi(argv[i + 1]))};
  }
  measure(1000, 3);  // warm up the allocator
  std::printf("| ops | build+seal us (median of %d) | us per op | of which build | seal (verify, encode, hash) |\n"
              "|---|---|---|---|---|\n", rounds);
  double base = 0;
  for (int ops : sizes) {
    Times t = measure(ops, rounds);
    if (base == 0) base = t.total;
    std::printf("| %d | %.1f | %.3f | %.1f | %.1f |\n", ops, t.total, t.total / ops, t.build, t.seal);
  }
  std::printf("\n4k/1k and 16k/1k ratios show linearity (4 and 16 when linear); base %.1f us\n", base);
  return 0;
}
