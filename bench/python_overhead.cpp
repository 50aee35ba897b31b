// The C++ side of bench/python_overhead.py: microseconds per call of ops::add, ops::softmax
// and ops::matmul_auto on small f32 arrays (the shapes the Python script uses), measured as
// the wall time of N back-to-back calls on one stream plus a final synchronize, over N (best of 5).
// At these sizes a call is bound by its host cost, so this is the floor a Python binding
// adds to. Prints one line per op: "<op> <us per call>", then the same calls on the legacy
// default stream ("<op>@null"): torch's current stream unless a program picks another, so
// the stream kaio.ops launches on in the Python bench.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "kaio/jit/buffer.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/softmax.h"

using namespace kaio;

// Best of 5 rounds of n calls: the least disturbed round (the Python script does the same).
static double us_per_call(const jit::Stream& s, int n, const std::function<void()>& f) {
  for (int i = 0; i < 50; ++i) f();  // load kernels, tune matmul_auto's bucket
  s.synchronize();
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) f();
    s.synchronize();
    best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  return best;
}

static void run(const jit::Stream& s, int n, const char* suffix) {
  const uint32_t elems = 4096, rows = 8, cols = 128, mm = 64;
  jit::DeviceBuffer<float> a(std::vector<float>(elems, 1.0f)), b(std::vector<float>(elems, 2.0f)), c(elems);
  jit::DeviceBuffer<float> x(std::vector<float>(rows * cols, 0.5f)), y(rows * cols);
  jit::DeviceBuffer<float> ma(std::vector<float>(mm * mm, 1.0f)), mb(std::vector<float>(mm * mm, 1.0f)), mc(mm * mm);
  std::printf("add%s %.3f\n", suffix, us_per_call(s, n, [&] { ops::add<float>(c, a, b, elems, &s); }));
  std::printf("softmax%s %.3f\n", suffix, us_per_call(s, n, [&] {
                ops::softmax(ops::as_rows(x, rows, cols), ops::as_rows(y, rows, cols), &s);
              }));
  ops::MatmulProblem p{.m = mm, .n = mm, .k = mm};
  std::printf("matmul_auto%s %.3f\n", suffix, us_per_call(s, n, [&] { ops::matmul_auto(ma, mb, mc, p, &s); }));
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  jit::Stream s;
  run(s, n, "");
  run(jit::Stream::borrow(nullptr), n, "@null");
  return 0;
}
