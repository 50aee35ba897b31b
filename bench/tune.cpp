// tune: the autotuner on the matmul bench shapes. For each type (f32, tf32, f16, bf16) and
// shape (1024..8192 cubes, 1x4096x4096, 16x4096x4096, 128x11008x4096, 4096x4096x128, 1000^3)
// it tunes the bucket afresh (as KAIO_TUNE=force would) and prints the time the tuning took,
// scratch inputs included (cold: the first tuning of the bucket in the process, so its
// kernels compiled or loaded from the disk cache; warm: a second tuning, kernels loaded),
// the chosen variant, its time and TFLOP/s, the runner-up and its margin, and how many
// candidates were timed / failed. Then the per-call host cost of matmul_auto's
// hot path beside ops::matmul with the same variant and a raw launch of its loaded kernel,
// and a stored-choice lookup in a fresh in-process map (zero timed runs).
// e4m3 / e5m2: A row-major, B column-major, bf16 out, k rounded up to 16 (1000^3 runs as
// 1000x1000x1008).
// Usage: tune [--quick] [--dtype f32|tf32|f16|bf16|e4m3|e5m2]... [--shape MxNxK]...  (uses the kernel cache; set
// KAIO_CACHE_DIR to a scratch folder to leave yours alone)
//        tune --crowd N [--procs P]: N threads (in each of P processes) make their first calls at
// once from a cold cache (a fresh folder unless KAIO_CACHE_DIR is set) and the tunings per
// bucket are printed (tune_crowd.cpp); exit 1 when a bucket was tuned more than once.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kaio/jit/driver.h"
#include "kaio/kaio.h"
#include "kaio/ops/matmul_auto.h"
#include "kaio/ops/matmul_tune.h"
#include "tune_crowd.h"

using namespace kaio;

namespace {

struct Shape {
  uint32_t m, n, k;
};

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, crowd_child = false;
  int crowd = 0, procs = 1;
  std::vector<std::string> dtypes;
  std::vector<Shape> own;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--crowd") && i + 1 < argc) crowd = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--procs") && i + 1 < argc) procs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--crowd-child")) crowd_child = true;
    else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("usage: tune [--quick] [--dtype f32|tf32|f16|bf16|e4m3|e5m2]... [--shape MxNxK]...\n"
                  "       tune --crowd N [--procs P]   N threads x P processes, first calls at once, cold cache\n");
      return 0;
    }
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) dtypes.push_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      Shape s{};
      if (std::sscanf(argv[++i], "%ux%ux%u", &s.m, &s.n, &s.k) != 3 || !s.m || !s.n || !s.k) {
        std::fprintf(stderr, "tune: --shape %s is not MxNxK\n", argv[i]);
        return 1;
      }
      own.push_back(s);
    }
  }
  if (crowd > 0 || procs != 1) {
    if (crowd < 1 || procs < 1) {
      std::fprintf(stderr, "tune: --crowd N and --procs P take positive counts\n");
      return 1;
    }
    if (!jit::interpret_mode() && !jit::driver::available()) {
      std::fprintf(stderr, "tune: needs a GPU (or KAIO_INTERPRET=1, where the times mean nothing)\n");
      return 1;
    }
    try {
      return crowd_main(crowd, procs, crowd_child, std::filesystem::read_symlink("/proc/self/exe").c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tune: %s\n", e.what());
      return 1;
    }
  }
  if (dtypes.empty()) dtypes = {"f32", "tf32", "f16", "bf16"};
  std::vector<Shape> shapes = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
                               {1, 4096, 4096},    {16, 4096, 4096},   {128, 11008, 4096},  {4096, 4096, 128},
                               {1000, 1000, 1000}};
  if (quick) shapes = {{1024, 1024, 1024}, {4096, 4096, 4096}, {16, 4096, 4096}};
  if (!own.empty()) shapes = own;
  try {
    if (!jit::interpret_mode() && !jit::driver::available()) {
      std::fprintf(stderr, "tune: needs a GPU (or KAIO_INTERPRET=1, where the times mean nothing)\n");
      return 1;
    }
    jit::Stream stream;
    std::printf("device: %s, %d SMs, %s, L2 %llu MiB\n", tuner::device().name.c_str(), tuner::device().sms,
                tuner::device().arch.c_str(), (unsigned long long)(tuner::device().l2_bytes >> 20));
    std::printf("%-5s %-17s %8s %8s  %-30s %9s %8s  %-30s %7s %6s\n", "type", "shape", "cold s", "warm s", "chosen",
                "ms", "TFLOP/s", "runner-up", "margin", "t/f");
    std::vector<ops::MatmulProblem> tuned;
    for (const std::string& dt : dtypes) {
      for (const Shape& s : shapes) {
        ops::MatmulProblem p{.m = s.m, .n = s.n, .k = s.k};
        if (dt == "e4m3" || dt == "e5m2") {  // FP8: K-major A and B, bf16 out; k in whole 16-byte rows
          p.in = dt == "e4m3" ? ir::Scalar::E4M3 : ir::Scalar::E5M2;
          p.out = ir::Scalar::BF16;
          p.b = ops::MatLayout::ColMajor;
          p.k = (p.k + 15) / 16 * 16;
        } else if (dt == "f32") p.in = ir::Scalar::F32;
        else if (dt == "tf32") p.tf32 = true;
        else if (dt == "f16") p.in = ir::Scalar::F16;
        else if (dt == "bf16") p.in = ir::Scalar::BF16;
        else {
          std::fprintf(stderr, "tune: --dtype %s is not f32, tf32, f16, bf16, e4m3 or e5m2\n", dt.c_str());
          return 1;
        }
        // Cold: this process has compiled nothing yet for the bucket (the disk cache may hold
        // the kernels); warm: everything loaded, only checking and timing.
        const tuner::MatmulChoice cold = tuner::choose_matmul(p, &stream, true);
        const tuner::MatmulChoice warm = tuner::choose_matmul(p, &stream, true);
        const tuner::Record& r = warm.record;
        const tuner::CandidateResult* best = nullptr;
        const tuner::CandidateResult* second = nullptr;
        size_t timed = 0, failed = 0;
        for (const auto& c : r.candidates) {
          if (c.status != "ok") {
            ++failed;
            continue;
          }
          ++timed;
          if (!best || c.median_ms < best->median_ms) {
            second = best;
            best = &c;
          } else if (!second || c.median_ms < second->median_ms) {
            second = &c;
          }
        }
        const double flops = 2.0 * s.m * s.n * s.k;
        char shape[32], margin[16] = "-";
        std::snprintf(shape, sizeof shape, "%ux%ux%u", p.m, p.n, p.k);
        if (auto mg = r.runner_up_margin()) std::snprintf(margin, sizeof margin, "+%.1f%%", *mg * 100);
        std::printf("%-5s %-17s %8.2f %8.2f  %-30s %9.4f %8.1f  %-30s %7s %3zu/%zu\n", dt.c_str(), shape,
                    cold.record.tune_seconds, r.tune_seconds, warm.variant->name, best ? best->median_ms : 0.0,
                    best ? flops / (best->median_ms * 1e-3) / 1e12 : 0.0, second ? second->name.c_str() : "-", margin,
                    timed, failed);
        for (const auto& c : r.candidates)
          if (c.status != "ok") std::printf("      skipped %s: %s\n", c.name.c_str(), c.status.c_str());
        std::fflush(stdout);
        tuned.push_back(p);
      }
    }

    // Stored choices: a fresh in-process map reads each bucket's record, with no timing.
    ops::matmul_auto_reset();
    tuner::reset_stats();
    const double t0 = now_us();
    for (const auto& p : tuned) ops::matmul_auto_variant(p, &stream);
    const double per_lookup = (now_us() - t0) / double(std::max<size_t>(tuned.size(), 1));
    const tuner::Stats st = tuner::stats();
    std::printf("\nstored choices: %zu buckets read in %.1f us each, %llu stored hits, %llu timed runs\n", tuned.size(),
                per_lookup, (unsigned long long)st.stored_hits, (unsigned long long)st.timed_runs);

    // Hot path: host time per call on a tiny problem (the GPU work is negligible; launches
    // queue on the stream), matmul_auto against ops::matmul with the variant it chose.
    const ops::MatmulProblem tiny{.m = 16, .n = 16, .k = 16};
    DeviceBuffer<float> a(256), b(256), c(256);
    const ops::MatmulVariant& v = ops::matmul_auto_variant(tiny, &stream);
    const int iters = jit::interpret_mode() ? 20 : 20000;
    for (int i = 0; i < 100 && !jit::interpret_mode(); ++i) ops::matmul_auto(a, b, c, tiny, &stream);
    stream.synchronize();
    // The floor: the loaded kernel launched with its arguments packed once (no checks).
    const ops::MatmulProblem rp = ops::matmul_resolved(tiny);
    const jit::CompiledKernel& raw_k =
        ops::matmul_family().get({uint32_t(&v - ops::matmul_variants().data()), rp.in, rp.out, rp.a, rp.b});
    using jit::detail::make_arg;
    const jit::detail::Arg raw_args[] = {make_arg(a), make_arg(b), make_arg(c), make_arg(rp.m), make_arg(rp.n),
                                         make_arg(rp.k), make_arg(rp.lda), make_arg(rp.ldb), make_arg(rp.ldc),
                                         make_arg(rp.alpha), make_arg(rp.beta), make_arg(rp.stride_a),
                                         make_arg(rp.stride_b), make_arg(rp.stride_c), make_arg(rp.split_k),
                                         make_arg(ops::matmul_k_chunk(rp))};
    const jit::LaunchConfig raw_lc = ops::matmul_launch_config(v, rp, &stream);
    double best_auto = 1e30, best_direct = 1e30, best_raw = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      double r0 = now_us();
      for (int i = 0; i < iters; ++i) raw_k.launch_packed(raw_lc, raw_args, std::size(raw_args));
      best_raw = std::min(best_raw, (now_us() - r0) / iters);
      stream.synchronize();
      double s0 = now_us();
      for (int i = 0; i < iters; ++i) ops::matmul_auto(a, b, c, tiny, &stream);
      best_auto = std::min(best_auto, (now_us() - s0) / iters);
      stream.synchronize();
      s0 = now_us();
      for (int i = 0; i < iters; ++i)
        ops::matmul(v, a.device_address(), b.device_address(), c.device_address(), tiny, &stream);
      best_direct = std::min(best_direct, (now_us() - s0) / iters);
      stream.synchronize();
    }
    std::printf("hot path (%s, host us per call, best of 5 x %d): raw launch %.3f, ops::matmul %.3f, matmul_auto %.3f; "
                "matmul_auto over raw %.3f (target <= 0.5)\n",
                v.name, iters, best_raw, best_direct, best_auto, best_auto - best_raw);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune: %s\n", e.what());
    return 1;
  }
}
