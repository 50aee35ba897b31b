// Quantized matmul on the device, one table each:
//   1. W8A8 (ops::matmul_int8): TOPS of s8 x s8 -> s32 (raw) and -> bf16 (per-row and
//      per-column scales, bias) at 4096^3 and decoder shapes, every tile and the one the
//      shape picks. bench/quant_torch.py times torch._int_mm on the same shapes.
//   2. W4A16 (ops::matmul_int4) at m = 1 and 16: GB/s of weight bytes (packed words, scales,
//      zeros) per call beside a device copy (cuMemcpyDtoDAsync) of the same bytes measured
//      in the same run (read half, write half, as bench/ops counts it).
//   3. W4A16 at m = 512 and 4096: TFLOPS beside cuBLAS f16 (cublasGemmEx, f32 compute) on
//      the dequantised weights, on the path the call takes and on the others forced (mma,
//      and on sm_90 the wgmma path with 256-row tiles).
// Timing: CUDA events around each call after warm-up, the median of 20 (the W4A16 m = 1, 16
// rows and their copy: around 10 back-to-back calls); weight sets rotate so that L2 (50 MB)
// does not hold them.
//
//   build/bench/quant [--quick] [--int8 | --int4] [--small-m] [--group N] [--bf16] [--persistent]
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kaio/jit/device.h"
#include "kaio/jit/driver.h"
#include "kaio/bench/timing.h"
#include "kaio/kaio.h"
#include "kaio/ops/qmatmul.h"
#include "kaio/ops/qmatmul_int4_kernels.h"

using namespace kaio;
using ir::Scalar;

using bench::copy_fn;
using bench::median;

namespace {

// Median ms per call of f(i) over 20 timed rounds of `calls` back-to-back calls (i rotates
// over `sets`), after two warm-up calls. calls = 1 times one launch between two events, so
// the host's launch path shows as idle device time; the memory-bound rows use 10, as a
// model's layers run (enqueued back to back) and as bench/ops times its ops.
template <class F>
double time_ms(const jit::Stream& s, int sets, F&& f, int calls = 1) {
  f(0);
  f(sets > 1 ? 1 : 0);
  std::vector<double> t;
  int next = 0;
  for (int i = 0; i < 20; ++i) {
    jit::Event a, b;
    a.record(&s);
    for (int c = 0; c < calls; ++c) f(next++ % sets);
    b.record(&s);
    t.push_back(jit::elapsed_ms(a, b) / calls);
  }
  return median(t);
}

// GB/s of a copy that reads bytes / 2 and writes bytes / 2 (bench/ops's copy rate), timed as
// the W4A16 rows are: 10 back-to-back copies per round over buffer pairs that L2 cannot hold.
double copy_gbps(const jit::Stream& s, double bytes) {
  if (!copy_fn()) return 0;
  const size_t half_bytes = static_cast<size_t>(bytes / 2);
  const int sets = std::clamp(int((256u << 20) / bytes) + 1, 1, 8);
  std::vector<DeviceBuffer<uint8_t>> src, dst;
  for (int i = 0; i < sets; ++i) {
    src.emplace_back(half_bytes);
    dst.emplace_back(half_bytes);
    src.back().fill_bytes(1);
  }
  const double ms = time_ms(s, sets, [&](int i) {
    jit::driver::check(copy_fn()(dst[size_t(i)].device_address(), src[size_t(i)].device_address(), half_bytes,
                                 static_cast<CUstream>(s.handle())),
                       "cuMemcpyDtoDAsync");
  }, 10);
  return bytes / (ms * 1e6);
}

struct Cublas {  // cublasGemmEx, loaded at run time (as bench/matmul does)
  using Create = int (*)(void**);
  using SetStream = int (*)(void*, void*);
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  void* handle = nullptr;
  GemmEx gemm = nullptr;
  bool load(void* stream) {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"})
      if ((lib = dlopen(name, RTLD_NOW))) break;
    if (!lib) return false;
    auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
    auto set_stream = reinterpret_cast<SetStream>(dlsym(lib, "cublasSetStream_v2"));
    gemm = reinterpret_cast<GemmEx>(dlsym(lib, "cublasGemmEx"));
    return create && set_stream && gemm && create(&handle) == 0 && set_stream(handle, stream) == 0;
  }
  // Row-major f16 C (m x n) = A (m x k) . W (k x n row-major): column-major C^T = W^T A^T.
  int run(uint32_t m, uint32_t n, uint32_t k, uint64_t a, uint64_t w, uint64_t c) const {
    const float alpha = 1.0f, beta = 0.0f;
    constexpr int kOpN = 0, kF16 = 2, kCompute32F = 68, kDefaultAlgo = -1;
    return gemm(handle, kOpN, kOpN, int(n), int(m), int(k), &alpha, reinterpret_cast<void*>(w), kF16, int(n),
                reinterpret_cast<void*>(a), kF16, int(k), &beta, reinterpret_cast<void*>(c), kF16, int(n), kCompute32F,
                kDefaultAlgo);
  }
};

std::vector<int8_t> random_s8(size_t n, std::mt19937& rng) {
  std::vector<int8_t> v(n);
  std::uniform_int_distribution<int> d(-127, 127);
  for (auto& x : v) x = int8_t(d(rng));
  return v;
}

void bench_int8(const jit::Stream& s, bool quick) {
  std::mt19937 rng(1);
  struct Shape { uint32_t m, n, k; };
  std::vector<Shape> shapes = {{4096, 4096, 4096}, {128, 11008, 4096}, {16, 4096, 4096}};
  if (!quick) shapes.push_back({8192, 8192, 8192});
  std::printf("\nW8A8 int8 (TOPS = 2 m n k / median time); 'auto' is the tile the shape picks\n");
  std::printf("%-18s %-22s %10s %10s\n", "shape", "tile", "s32 TOPS", "bf16 TOPS");
  const std::vector<std::string> tiles = ops::matmul_int8_tiles();
  for (const Shape& sh : shapes) {
    DeviceBuffer<int8_t> a(random_s8(size_t(sh.m) * sh.k, rng)), b(random_s8(size_t(sh.n) * sh.k, rng));
    DeviceBuffer<int32_t> c32(size_t(sh.m) * sh.n);
    DeviceBuffer<uint16_t> c16(size_t(sh.m) * sh.n);
    DeviceBuffer<float> sa(std::vector<float>(sh.m, 1.0f / 127)), sb(std::vector<float>(sh.n, 1.0f / 127)),
        bias(std::vector<float>(sh.n, 0.5f));
    const double ops2 = 2.0 * sh.m * sh.n * sh.k;
    char shape[32];
    std::snprintf(shape, sizeof shape, "%ux%ux%u", sh.m, sh.n, sh.k);
    for (int t = -1; t < int(tiles.size()); ++t) {
      ops::Int8Problem p{.m = sh.m, .n = sh.n, .k = sh.k, .out = Scalar::S32, .tile = t};
      const double raw = time_ms(s, 1, [&](int) { ops::matmul_int8(a.device_address(), b.device_address(), c32.device_address(), p, {}, &s); });
      p.out = Scalar::BF16;
      const ops::Int8Scales sc{.a = sa.device_address(), .b = sb.device_address(), .a_per_row = true, .b_per_col = true,
                               .bias = bias.device_address()};
      const double scaled = time_ms(s, 1, [&](int) { ops::matmul_int8(a.device_address(), b.device_address(), c16.device_address(), p, sc, &s); });
      std::printf("%-18s %-22s %10.1f %10.1f\n", shape, t < 0 ? "auto" : tiles[t].c_str(), ops2 / raw / 1e9, ops2 / scaled / 1e9);
    }
  }
}

// Weight sets of one shape, enough to pass L2.
struct Int4Sets {
  std::vector<ops::Int4Host> host;
  std::vector<DeviceBuffer<uint32_t>> q;
  std::vector<DeviceBuffer<uint16_t>> sc;
  std::vector<DeviceBuffer<uint8_t>> z;
  std::vector<ops::Int4Weights> w;
  double bytes = 0;  // weight bytes of one set
};
uint32_t g_group = 128;         // --group: the W4A16 weights' group size
Scalar g_dtype = Scalar::F16;   // --bf16: the W4A16 rows at m = 1 and 16 in bf16
bool g_persistent = false;      // --persistent: the m = 1, 16 rows also on the persistent form, alternated

Int4Sets make_int4(uint32_t k, uint32_t n, std::mt19937& rng) {
  Int4Sets s;
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> wf(size_t(k) * n);
  for (auto& x : wf) x = u(rng);
  const ops::Int4Host h = ops::quantize_int4(wf, k, n, g_group, g_dtype, true);
  s.bytes = double(h.q.size()) * 4 + double(h.scales.size()) * 2 + double(h.zeros.size());
  const int sets = std::clamp(int((256u << 20) / s.bytes) + 1, 1, 8);
  for (int i = 0; i < sets; ++i) {
    s.q.emplace_back(h.q);
    s.sc.emplace_back(h.scales);
    s.z.emplace_back(h.zeros);
    s.w.push_back({.q = s.q.back().device_address(), .scales = s.sc.back().device_address(), .zeros = s.z.back().device_address(),
                   .k = k, .n = n, .group = g_group});
  }
  s.host.push_back(h);
  return s;
}

void bench_int4(const jit::Stream& s, bool quick, bool small_only) {
  std::mt19937 rng(2);
  struct Shape { uint32_t n, k; };
  std::vector<Shape> shapes = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {14336, 4096}, {4096, 14336}};
  if (quick) shapes.resize(2);
  Cublas cublas;
  const bool have_cublas = cublas.load(s.handle());
  std::printf("\nW4A16 int4, group %u with zeros, %s (GB/s = weight bytes / median time per call, 10 calls back to back; copy = cuMemcpyDtoDAsync of the same bytes, timed alike)\n", g_group, ir::scalar_name(g_dtype));
  if (g_persistent)
    std::printf("%-14s %6s %10s %15s %9s %15s %9s\n", "k x n", "m", "MB", "strips us", "of copy", "persistent us", "of copy");
  else
    std::printf("%-14s %6s %10s %10s %10s %9s\n", "k x n", "m", "MB", "us", "GB/s", "of copy");
  std::vector<std::string> large;
  for (const Shape& sh : shapes) {
    Int4Sets w = make_int4(sh.k, sh.n, rng);
    const int sets = int(w.w.size());
    const double copy = copy_gbps(s, w.bytes);
    char shape[32];
    std::snprintf(shape, sizeof shape, "%ux%u", sh.k, sh.n);
    for (uint32_t m : {1u, 16u}) {
      const uint16_t one_hundredth = g_dtype == Scalar::F16 ? half(0.01f).bits : bfloat16(0.01f).bits;
      DeviceBuffer<uint16_t> x(std::vector<uint16_t>(size_t(m) * sh.k, one_hundredth));
      DeviceBuffer<uint16_t> y(size_t(m) * sh.n);
      auto timed = [&] {
        return time_ms(s, sets, [&](int i) { ops::matmul_int4(x.device_address(), w.w[i], y.device_address(), m, g_dtype, 0, &s); }, 10);
      };
      if (g_persistent) {  // the grid of strips and the persistent form, alternated twice
        double t[2][2];
        for (int r = 0; r < 2; ++r)
          for (int p = 0; p < 2; ++p) {
            ops::detail::set_int4_stream_persistent(p ? int(jit::device_info().sm_count) : 0);
            t[p][r] = timed();
          }
        ops::detail::set_int4_stream_persistent(-1);
        auto pct = [&](double ms) { return copy > 0 ? 100 * w.bytes / (ms * 1e6) / copy : 0.0; };
        std::printf("%-14s %6u %10.1f %7.1f / %5.1f %8.0f%% %7.1f / %5.1f %8.0f%%\n", shape, m, w.bytes / 1e6, t[0][0] * 1e3, t[0][1] * 1e3,
                    pct(std::min(t[0][0], t[0][1])), t[1][0] * 1e3, t[1][1] * 1e3, pct(std::min(t[1][0], t[1][1])));
        continue;
      }
      const double ms = timed();
      const double gbps = w.bytes / (ms * 1e6);
      std::printf("%-14s %6u %10.1f %10.1f %10.0f %8.0f%%\n", shape, m, w.bytes / 1e6, ms * 1e3, gbps, copy > 0 ? 100 * gbps / copy : 0.0);
    }
    if (small_only || g_dtype != Scalar::F16 || (quick && sh.n != 4096)) continue;
    // m = 512 and 4096 beside cuBLAS f16 on the dequantised weights: the path the call takes
    // (on an sm_90 device the wgmma one), and the others forced (ops::detail::set_int4_override).
    std::vector<half> wd;
    for (float v : ops::dequantize_int4(w.host[0])) wd.push_back(half(v));
    DeviceBuffer<half> dw(wd);
    for (uint32_t m : {512u, 4096u}) {
      DeviceBuffer<half> x(std::vector<half>(size_t(m) * sh.k, half(0.01f))), y(size_t(m) * sh.n);
      const double flop = 2.0 * m * sh.n * sh.k;
      double cub = 0;
      if (have_cublas && cublas.run(m, sh.n, sh.k, x.device_address(), dw.device_address(), y.device_address()) == 0)
        cub = flop / (time_ms(s, 1, [&](int) { cublas.run(m, sh.n, sh.k, x.device_address(), dw.device_address(), y.device_address()); }) * 1e9);
      struct Path { const char* name; uint32_t mma, bx; };
      for (const Path& p : {Path{"chosen", 0, 0}, Path{"mma", 1, 0}, Path{"wgmma256", 0, 256}}) {
        if (p.bx && !jit::device_info().hopper()) continue;
        ops::detail::set_int4_override(p.mma, p.bx);
        const double ms = time_ms(s, sets, [&](int i) { ops::matmul_int4(x.device_address(), w.w[i], y.device_address(), m, Scalar::F16, 0, &s); });
        ops::detail::set_int4_override(0, 0);
        char line[160];
        std::snprintf(line, sizeof line, "%-14s %6u %-9s %12.1f %14.1f %8.0f%%", shape, m, p.name, flop / (ms * 1e9), cub,
                      cub > 0 ? 100 * flop / (ms * 1e9) / cub : 0.0);
        large.push_back(line);
      }
    }
  }
  std::printf("\nW4A16 int4 at m = 512 and 4096 (TFLOPS) beside cuBLAS f16 on the dequantised weights%s\n", have_cublas ? "" : " (cuBLAS not found)");
  std::printf("%-14s %6s %-9s %12s %14s %9s\n", "k x n", "m", "path", "int4 TFLOPS", "cuBLAS TFLOPS", "of cuBLAS");
  for (const std::string& l : large) std::printf("%s\n", l.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, int8 = true, int4 = true, small_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--small-m") small_only = true;
    else if (a == "--int8") int4 = false;
    else if (a == "--int4") int8 = false;
    else if (a == "--bf16") g_dtype = Scalar::BF16;
    else if (a == "--persistent") g_persistent = small_only = true;
    else if (a == "--group" && i + 1 < argc) {
      g_group = uint32_t(std::atoi(argv[++i]));
      if (g_group != 32 && g_group != 64 && g_group != 128) {
        std::fprintf(stderr, "quant: --group takes 32, 64 or 128\n");
        return 2;
      }
    }
    else if (a == "--help" || a == "-h") {
      std::printf("usage: quant [--quick] [--int8 | --int4] [--small-m] [--group 32|64|128] [--bf16] [--persistent]\n  int8 TOPS, int4 GB/s at m = 1 and 16 beside a device copy, int4 at m = 4096 beside cuBLAS f16\n  --int8 / --int4: that part only\n  --small-m: int4 at m = 1 and 16 only\n  --group: the int4 weights' group size (default 128)\n  --bf16: the int4 rows at m = 1 and 16 in bf16 (f16 otherwise; the large-m rows are f16 only)\n  --persistent: the m = 1 and 16 rows (only) on the grid of strips and on the persistent form (one block an SM,\n    strips in turn), alternated twice (where the persistent form cannot serve, both are the grid of strips)\n");
      return 0;
    } else {
      std::fprintf(stderr, "quant: unknown argument '%s' (--help)\n", argv[i]);
      return 2;
    }
  }
  if (jit::interpret_mode()) {
    std::fprintf(stderr, "quant: needs a GPU (unset KAIO_INTERPRET)\n");
    return 1;
  }
  jit::Stream s;
  std::printf("device: %s\n", jit::device_info().name.c_str());
  if (int8) bench_int8(s, quick);
  if (int4) bench_int4(s, quick, small_only);
  return 0;
}
