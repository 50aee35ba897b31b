// interp: interpreted thread-instructions per second (per core and in total) on saxpy, the
// row_sum loop kernel of ops/reduction.h (one thread per row, a loop over the columns), and
// a real shared-memory block reduction (b.block_reduce_sum: a strided loop per thread, warp
// shuffles, shared partials, two barriers).
// A thread-instruction is one program step (an IR instruction, or a loop/branch step of
// the flat program) executed by one active lane; Param/Const/special registers are set up
// once and not counted.
// Usage: interp [--rounds N]   (median of N rounds; KAIO_INTERP_THREADS sets "all")
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/ir/builder.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"

using namespace kaio;
using Clock = std::chrono::steady_clock;

namespace {

struct Result {
  double seconds;
  uint64_t thread_insts;
};

template <class F>
Result measure(int rounds, F&& run) {
  std::vector<double> t;
  uint64_t insts = 0;
  run();  // warm: program compile, page faults
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    insts = run();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return Result{t[t.size() / 2], insts};
}

void row(const char* kernel, const char* shape, unsigned threads, const Result& r) {
  double total = r.thread_insts / r.seconds / 1e6;
  std::printf("| %-8s | %-24s | %7u | %12.3e | %9.4f | %14.1f | %14.1f |\n", kernel, shape, threads,
              double(r.thread_insts), r.seconds, total, total / threads);
}

// out[block] = sum of in[block * chunk .. + chunk): each thread folds a strided slice, then
// b.block_reduce_sum.
ir::Kernel block_sum_kernel() {
  ir::KernelBuilder b("bench_block_sum");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto chunk = b.param<uint32_t>("chunk");
  ir::Value blk = b.block_idx_x(), tid = b.thread_idx_x(), nt = b.block_dim_x();
  ir::Value start = blk * chunk;
  auto acc = b.var<float>(0.0f);
  b.for_(start + tid, start + chunk, nt, [&](ir::Value i) {
    ir::Value x = in[i];
    acc = acc + x;
  });
  ir::Value r = b.block_reduce_sum(acc);
  b.if_(tid == 0u, [&] { out[blk] = r; });
  return b.build();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
  const unsigned all = ir::interp::default_threads();

  const uint32_t n = 1u << 22;
  std::vector<float> x(n, 1.5f), y(n, 2.0f);
  const uint32_t rows = 1u << 15, cols = 256;
  std::vector<float> m(size_t(rows) * cols, 0.25f), sums(rows);
  const uint32_t bblocks = 1024, bchunk = 4096;
  std::vector<float> bin(size_t(bblocks) * bchunk, 0.5f), bout(bblocks);
  const ir::Kernel bsum = block_sum_kernel();

  std::printf("| kernel   | shape                    | threads | thread-insts | seconds   | M t-inst/s all | M t-inst/s/core |\n");
  std::printf("|----------|--------------------------|---------|--------------|-----------|----------------|-----------------|\n");
  for (unsigned threads : {1u, all}) {
    ir::interp::RunOptions o{.threads = threads};
    Result s = measure(rounds, [&] {
      ir::interp::HostArg a[] = {ir::interp::host_arg(1.0001f), ir::interp::host_arg(x), ir::interp::host_arg(y),
                                 ir::interp::host_arg(n)};
      return ir::interp::interpret_packed(ops::saxpy_kernel(), {.grid = {n / 256}, .block = {256}}, a, 4, o)
          .thread_instructions;
    });
    row("saxpy", "n=2^22, block 256", threads, s);
    Result r = measure(rounds, [&] {
      ir::interp::HostArg a[] = {ir::interp::host_arg(m), ir::interp::host_arg(sums), ir::interp::host_arg(rows),
                                 ir::interp::host_arg(cols)};
      return ir::interp::interpret_packed(ops::row_sum_kernel(), {.grid = {rows / 128}, .block = {128}}, a, 4, o)
          .thread_instructions;
    });
    row("row_sum", "2^15 rows x 256, blk 128", threads, r);
    Result br = measure(rounds, [&] {
      ir::interp::HostArg a[] = {ir::interp::host_arg(bin), ir::interp::host_arg(bout), ir::interp::host_arg(bchunk)};
      return ir::interp::interpret_packed(bsum, {.grid = {bblocks}, .block = {256}}, a, 3, o).thread_instructions;
    });
    for (float v : bout)
      if (v != 0.5f * bchunk) {
        std::fprintf(stderr, "block_sum: wrong result %g\n", double(v));
        return 1;
      }
    row("blk_sum", "2^22 f32, 1024 x blk 256", threads, br);
    if (all == 1) break;
  }
  return 0;
}
