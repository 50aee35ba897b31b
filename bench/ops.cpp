// ops: the op library at the speed of the memory.
//   Table 1: every op at 8192 x 8192 in f32 and bf16: GB/s (the bytes the op must move,
//     counted once, over the median time of one call) and the ratio to a device-to-device
//     copy (cuMemcpyDtoDAsync) moving the same bytes, measured in the same run.
//   Table 2: the decode shapes 1 x 4096, 16 x 4096, 128 x 4096 in bf16: us per call, from
//     back-to-back calls (--calls per timed round), so launch cost counts as it does in a
//     model's decode step.
//   Table 3: what an op's call path adds to a raw launch of the same kernel (host time per
//     call over many back-to-back calls).
// Timing: jit::Event around each round after 3 warm-up calls; median of --rounds (25).
// --csv FILE also writes the rows as CSV for bench/ops_torch.py (PyTorch's numbers beside
// kaio's). Without a GPU (KAIO_INTERPRET=1) it runs small shapes as a smoke test.
// Usage: ops [--rounds N] [--calls N] [--csv FILE] [--only SUBSTRING] [--big RxC]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kaio/bench/ops_case.h"
#include "kaio/jit/device.h"
#include "kaio/jit/driver.h"
#include "kaio/bench/timing.h"
#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"

using namespace kaio;
using bench::OpCase;

using bench::copy_fn;
using bench::median;
using bench::ms_per_call;

namespace {

struct Options {
  int rounds = 25;
  int calls = 50;  // per round in the decode table
  std::string csv, only;
  uint32_t big_rows = 8192, big_cols = 8192;
};

// A bandwidth row is at memory speed at this fraction of the copy's GB/s or more.
constexpr double kVerdictOfCopy = 0.90;

// GB/s of a device-to-device copy that reads bytes / 2 and writes bytes / 2 (0: no device).
double copy_gbps(const jit::Stream& s, double bytes, int rounds) {
  static std::map<double, double> memo;
  if (auto it = memo.find(bytes); it != memo.end()) return it->second;
  if (jit::interpret_mode() || !copy_fn()) return memo[bytes] = 0;
  const size_t half = static_cast<size_t>(bytes / 2);
  DeviceBuffer<uint8_t> src(half), dst(half);
  src.fill_bytes(1);
  double ms = ms_per_call(s, rounds, 1, [&] {
    jit::driver::check(copy_fn()(dst.device_address(), src.device_address(), half, static_cast<CUstream>(s.handle())),
                       "cuMemcpyDtoDAsync");
  });
  return memo[bytes] = bytes / (ms * 1e6);
}

std::vector<OpCase> all_cases(ir::Scalar d, uint32_t rows, uint32_t cols) {
  std::vector<OpCase> v = bench::elementwise_cases(d, rows, cols);
  for (auto* f : {&bench::reduction_cases, &bench::row_op_cases})
    for (OpCase& c : f(d, rows, cols)) v.push_back(std::move(c));
  return v;
}

std::string shape_str(uint32_t r, uint32_t c) { return std::to_string(r) + "x" + std::to_string(c); }

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const char* usage =
      "usage: ops [--rounds N] [--calls N] [--csv FILE] [--only SUBSTRING] [--big RxC]\n"
      "  op library GB/s at --big (default 8192x8192) beside a device copy, decode-shape us per call, the call path\n";
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ops: %s needs a value\n%s", argv[i], usage);
      return 2;
    }
    if (a == "--rounds") o.rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--calls") o.calls = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--csv") o.csv = argv[i + 1];
    else if (a == "--only") o.only = argv[i + 1];
    else if (a == "--big") std::sscanf(argv[i + 1], "%ux%u", &o.big_rows, &o.big_cols);
    else {
      std::fprintf(stderr, "ops: unknown argument '%s'\n%s", argv[i], usage);
      return 2;
    }
  }
  const bool device = !jit::interpret_mode();
  if (!device) {  // a smoke test of every case
    o.big_rows = std::min(o.big_rows, 64u);
    o.big_cols = std::min(o.big_cols, 256u);
    o.rounds = std::min(o.rounds, 3);
    o.calls = std::min(o.calls, 2);
  }
  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (csv) std::fprintf(csv, "table,op,dtype,rows,cols,bytes,us,gbps,copy_gbps\n");
  jit::Stream s;
  std::string dev = device ? jit::driver::device_arch() : "interpreter";
  auto wanted = [&](const OpCase& c) { return o.only.empty() || c.op.find(o.only) != std::string::npos; };

  std::printf("Table 1: %s, GB/s = bytes moved (counted once) / median time; copy = cuMemcpyDtoDAsync of the same bytes (%s, %s)\n",
              shape_str(o.big_rows, o.big_cols).c_str(), jit::device_info().name.c_str(), dev.c_str());
  std::printf("verdict: ok at >= %.0f%% of copy, else SHORT (bench/ops_torch.py adds the comparison with PyTorch)\n",
              100 * kVerdictOfCopy);
  std::printf("%-16s %-5s %12s %10s %10s %10s %8s %8s\n", "op", "dtype", "shape", "MB", "us", "GB/s", "of copy", "verdict");
  std::vector<std::string> short_rows;
  for (ir::Scalar d : {ir::Scalar::F32, ir::Scalar::F16, ir::Scalar::BF16}) {
    std::vector<OpCase> cases = all_cases(d, o.big_rows, o.big_cols);
    for (OpCase& c : cases) {
      if (!wanted(c)) continue;
      double ms = ms_per_call(s, o.rounds, 1, [&] { c.run(&s); });
      double gbps = c.bytes / (ms * 1e6), copy = copy_gbps(s, c.bytes, o.rounds);
      const double of_copy = copy > 0 ? gbps / copy : 0.0;
      const bool ok = copy > 0 && of_copy >= kVerdictOfCopy;
      if (copy > 0 && !ok) short_rows.push_back(c.op + " " + ir::scalar_name(d));
      std::printf("%-16s %-5s %12s %10.1f %10.1f %10.1f %7.1f%% %8s\n", c.op.c_str(), ir::scalar_name(d),
                  shape_str(c.rows, c.cols).c_str(), c.bytes / 1e6, ms * 1e3, gbps, 100 * of_copy,
                  copy > 0 ? (ok ? "ok" : "SHORT") : "-");
      if (csv)
        std::fprintf(csv, "bandwidth,%s,%s,%u,%u,%.0f,%.3f,%.1f,%.1f\n", c.op.c_str(), ir::scalar_name(d), c.rows,
                     c.cols, c.bytes, ms * 1e3, gbps, copy);
      std::fflush(stdout);
    }
  }

  if (device) {  // the shortfalls again, so that none hides in the long table
    std::printf("Table 1 verdict: %zu row(s) below %.0f%% of copy%s", short_rows.size(), 100 * kVerdictOfCopy,
                short_rows.empty() ? "\n" : ":");
    for (size_t i = 0; i < short_rows.size(); ++i)
      std::printf("%s%s", i ? ", " : " ", short_rows[i].c_str());
    if (!short_rows.empty()) std::printf("\n");
  }

  std::printf("\nTable 2: decode shapes, bf16, us per call (%d back-to-back calls per round)\n", o.calls);
  std::printf("%-16s %12s %12s %12s\n", "op", "1x4096", "16x4096", "128x4096");
  {
    std::map<std::string, std::vector<double>> us;
    std::vector<std::string> order;
    for (uint32_t rows : {1u, 16u, 128u}) {
      std::vector<OpCase> cases = all_cases(ir::Scalar::BF16, rows, 4096);
      for (OpCase& c : cases) {
        if (!wanted(c)) continue;
        double ms = ms_per_call(s, o.rounds, o.calls, [&] { c.run(&s); });
        if (!us.count(c.op)) order.push_back(c.op);
        us[c.op].push_back(ms * 1e3);
        if (csv)
          std::fprintf(csv, "decode,%s,bf16,%u,%u,%.0f,%.3f,%.1f,0\n", c.op.c_str(), rows, 4096u, c.bytes, ms * 1e3,
                       c.bytes / (ms * 1e6));
      }
    }
    for (const std::string& op : order) {
      std::printf("%-16s", op.c_str());
      for (double v : us[op]) std::printf(" %12.2f", v);
      std::printf("\n");
    }
  }

  // Table 3: ops::add<float> against a raw launch of the kernel it picks (1 x 4096 f32).
  {
    const uint32_t n = 4096;
    DeviceBuffer<float> a(n), b(n), out(n);
    a.fill_bytes(0);
    b.fill_bytes(0);
    const ops::detail::MapKernels& k = ops::elementwise_op("add");
    std::vector<uint64_t> in = {a.device_address(), b.device_address()};
    const ops::MapConfig cfg = k.config_for(ir::Scalar::F32, out.device_address(), in);
    const jit::CompiledKernel& raw = k.family().get(cfg);
    const LaunchConfig lc = k.launch_shape(cfg, n, &s);
    const int launches = device ? 20000 : 20;
    auto host_us = [&](auto&& f) {
      for (int i = 0; i < 100 && device; ++i) f();
      s.synchronize();
      std::vector<double> r;
      for (int round = 0; round < (device ? 15 : 1); ++round) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < launches; ++i) f();
        r.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / launches);
        s.synchronize();
      }
      return median(r);
    };
    const uint64_t builds = k.family().builds();
    double t_raw = host_us([&] { raw.launch(lc, a, b, out, uint64_t(n)); });
    double t_op = host_us([&] { ops::add<float>(out, a, b, n, &s); });
    std::printf("\nTable 3: call path, host us per call (%d back-to-back calls, 1x4096 f32 add)\n", launches);
    std::printf("%-36s %10.3f\n", "CompiledKernel::launch (raw)", t_raw);
    std::printf("%-36s %10.3f  (%+.3f)\n", "ops::add<float>", t_op, t_op - t_raw);
    std::printf("builder runs while measuring: %llu (must be 0)\n",
                static_cast<unsigned long long>(k.family().builds() - builds));
    if (csv) std::fprintf(csv, "overhead,add,f32,1,4096,0,%.3f,%.3f,0\n", t_op, t_op - t_raw);
  }
  if (csv) std::fclose(csv);
  return 0;
}
