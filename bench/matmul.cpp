// matmul: TFLOP/s of every matmul variant (ops/matmul.h) that can serve a shape, beside
// cuBLAS at the same precision in and out (cublasGemmEx, f32 compute; loaded with dlopen
// by this program only), and the ratio of the best variant to cuBLAS. Shapes: 1024, 2048,
// 4096, 8192 cubes and 1, 4, 8, 16 x 4096 x 4096, 128x11008x4096, 4096x4096x128, 1000^3.
// f32-output shapes with a small m x n also run split-K (4 and 16 chunks).
// Timing: CUDA events, warm-up, then the median of 5-20 calls (as many as fit in about
// 0.1 s per variant, so the full table stays within minutes); inputs are rotated
// over several sets only when one set is smaller than 64 MB (twice the H100's / H200's
// L2), so that L2 does not hold them. Each variant's line gives its registers per thread
// (spills, if any) and the SASS tensor-core (or FFMA) instruction of its cubin
// (cuobjdump: $KAIO_CUOBJDUMP or PATH). A summary table, one row per dtype and shape,
// comes last. --loop-stats (no GPU) prints each kernel's k-loop PTX instruction counts.
// --dtype e4m3 / e5m2: the FP8 rows (A row-major, B column-major, bf16 out, per-tensor
// scales) beside cuBLASLt (bench/cublaslt_fp8.h) with and without its fast accumulation,
// each variant's largest difference from cuBLASLt's C on the same inputs.
// --epilogue ACT: every row with the fused epilogue C = ACT(A * B + bias) (ops/matmul.h;
// ACT one of the op library's activations, "none": the bias alone), cuBLAS without one;
// --fast-epilogue: the activation in .approx forms.
// Usage: matmul [--quick | --skinny] [--dtype f32|tf32|f16|bf16|e4m3|e5m2]... [--shape MxNxK]... [--b-col]
//               [--epilogue ACT] | --loop-stats [ARCH]
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/matmul.h"
#include "cublaslt_fp8.h"

using namespace kaio;

namespace {

// ---- cuBLAS, loaded at run time ----
struct Cublas {
  using Create = int (*)(void**);
  using SetStream = int (*)(void*, void*);
  using GemmEx = int (*)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                         const void*, void*, int, int, int, int);
  void* lib = nullptr;
  void* handle = nullptr;
  GemmEx gemm = nullptr;
  bool load(void* stream) {
    for (const char* name : {"libcublas.so.13", "libcublas.so", "/usr/local/cuda/lib64/libcublas.so.13"})
      if ((lib = dlopen(name, RTLD_NOW))) break;
    if (!lib) return false;
    auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
    auto set_stream = reinterpret_cast<SetStream>(dlsym(lib, "cublasSetStream_v2"));
    gemm = reinterpret_cast<GemmEx>(dlsym(lib, "cublasGemmEx"));
    if (!create || !set_stream || !gemm || create(&handle) != 0) return false;
    return set_stream(handle, stream) == 0;
  }
  // Row-major C (m x n) = A (m x k) * B (k x n): column-major C^T = B^T A^T. b_col: B is
  // column-major (an n x k row-major weight), B^T is then read transposed.
  int run(ir::Scalar in, ir::Scalar out, bool tf32, uint32_t m, uint32_t n, uint32_t k, uint64_t a, uint64_t b,
          uint64_t c, bool b_col = false) const {
    auto type = [](ir::Scalar s) { return s == ir::Scalar::F16 ? 2 : s == ir::Scalar::BF16 ? 14 : 0; };
    const float alpha = 1.0f, beta = 0.0f;
    constexpr int kOpN = 0, kOpT = 1, kCompute32F = 68, kCompute32FFastTf32 = 77, kDefaultAlgo = -1;
    return gemm(handle, b_col ? kOpT : kOpN, kOpN, int(n), int(m), int(k), &alpha, reinterpret_cast<void*>(b), type(in),
                int(b_col ? k : n),
                reinterpret_cast<void*>(a), type(in), int(k), &beta, reinterpret_cast<void*>(c), type(out), int(n),
                tf32 ? kCompute32FFastTf32 : kCompute32F, kDefaultAlgo);
  }
};

struct Shape {
  uint32_t m, n, k;
  bool b_col = false;  // B column-major (else row-major; A is row-major)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of one call of f(set): a warm-up call, one timed to size the run, then 5 to
// 20 timed calls, as many as fit in about 0.1 s.
template <class F>
double time_ms(const jit::Stream& s, int sets, F&& f) {
  f(0);  // loads the kernel on its first use
  jit::Event a0, b0;
  a0.record(&s);
  f(0);
  b0.record(&s);
  const double first = jit::elapsed_ms(a0, b0);
  const int reps = std::clamp(static_cast<int>(100.0 / std::max(first, 1e-3)), 5, 20);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    jit::Event a, b;
    a.record(&s);
    f((i + 1) % sets);
    b.record(&s);
    t.push_back(jit::elapsed_ms(a, b));
  }
  return median(t);
}

// The first tensor-core / FFMA opcode in the kernel's SASS ("HMMA.16816.F32"), or "-".
std::string sass_op(const jit::CompiledKernel& k) {
  static std::map<std::string, std::string> seen;  // cache key -> opcode (one cuobjdump per kernel)
  if (auto it = seen.find(k.key().hex()); it != seen.end()) return it->second;
  std::string& memo = seen[k.key().hex()];
  memo = "-";
  const char* tool = std::getenv("KAIO_CUOBJDUMP");
  std::string cmd = tool ? tool : "cuobjdump";
  const std::string& cubin = k.cubin();
  std::string path = "/tmp/kaio_bench_matmul.cubin";
  std::ofstream(path, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  FILE* p = popen((cmd + " --dump-sass " + path + " 2>/dev/null").c_str(), "r");
  if (!p) return "-";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  for (const char* op : {"HGMMA", "QGMMA", "HMMA", "IMMA", "FFMA"}) {
    size_t at = out.find(op);
    if (at == std::string::npos) continue;
    size_t end = out.find_first_of(" \t", at);
    return memo = out.substr(at, end - at);
  }
  return memo;
}

// The k-loop of a matmul kernel's PTX: the loop with the most mma / fma instructions
// (from its label to its backward branch). Counts the instructions one iteration runs
// when every `if` holds (full k-steps, tiles inside the matrix: a conditional branch falls
// through, an unconditional one, which jumps over an else, is taken), without the movs
// (register-array copies that ptxas coalesces), by kind.
struct LoopStats {
  int body = 0, path = 0, mma = 0, shared = 0, ldmatrix = 0, global = 0, other = 0;
  bool found = false;  // a loop with mma / fma instructions whose path ends at its backward branch
};
LoopStats loop_stats(const std::string& ptx) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < ptx.size();) {
    size_t end = ptx.find('\n', at);
    if (end == std::string::npos) end = ptx.size();
    std::string l = ptx.substr(at, end - at);
    const size_t f = l.find_first_not_of(" \t"), b = l.find_last_not_of(" \t;");
    lines.push_back(f == std::string::npos ? "" : l.substr(f, b - f + 1));
    at = end + 1;
  }
  std::map<std::string, size_t> labels;
  for (size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].empty() && lines[i].back() == ':') labels[lines[i].substr(0, lines[i].size() - 1)] = i;
  auto opcode = [](const std::string& l) {
    std::string x = l[0] == '@' ? l.substr(l.find(' ') + 1) : l;
    return x.substr(0, x.find_first_of(" \t"));
  };
  auto target = [&](const std::string& l) -> std::string {
    const std::string op = opcode(l);
    if (op != "bra" && op != "bra.uni") return "";
    return l.substr(l.find_last_of(" \t") + 1);
  };
  auto is_ins = [](const std::string& l) {
    return !l.empty() && l.back() != ':' && l[0] != '.' && l[0] != '{' && l[0] != '}' && l.rfind("//", 0) != 0;
  };
  size_t lo = 0, hi = 0;
  int best = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto it = labels.find(target(lines[i]));
    if (!is_ins(lines[i]) || it == labels.end() || it->second > i) continue;
    int w = 0;
    for (size_t j = it->second; j <= i; ++j) w += lines[j].rfind("mma.", 0) == 0 || lines[j].rfind("fma.", 0) == 0;
    if (w > best) best = w, lo = it->second, hi = i;
  }
  LoopStats s;
  if (best <= 0) return s;  // no loop does mma / fma (wgmma kernels: wgmma.mma_async, waits on mbarriers)
  for (size_t j = lo; j <= hi; ++j) s.body += is_ins(lines[j]);
  for (size_t i = lo, guard = 0; i <= hi && guard < 1000000; ++guard) {
    const std::string& l = lines[i];
    if (!is_ins(l)) { ++i; continue; }
    const std::string op = opcode(l), t = target(l);
    if (i == hi) {  // the backward branch
      s.found = true;
      break;
    }
    if (op.rfind("mov.", 0) != 0) {
      ++s.path;
      if (op.rfind("mma.", 0) == 0 || op.rfind("fma.", 0) == 0) ++s.mma;
      else if (op.rfind("ldmatrix", 0) == 0) ++s.ldmatrix;
      else if (op.rfind("ld.shared", 0) == 0 || op.rfind("st.shared", 0) == 0) ++s.shared;
      else if (op.rfind("ld.global", 0) == 0 || op.rfind("cp.async", 0) == 0) ++s.global;
      else ++s.other;
    }
    if (!t.empty() && l[0] != '@' && labels.count(t)) i = labels[t];
    else ++i;
  }
  return s;
}

// --loop-stats: the k-loop counts of every declared kernel (row-major A and B), no GPU needed.
int print_loop_stats(const std::string& arch) {
  jit::Family<ops::MatmulConfig>& f = ops::matmul_family();
  std::printf("k-loop of each declared kernel's PTX for %s (one iteration with every if true; SimtDb runs two\n"
              "k-steps per iteration; movs not counted), and ptxas' registers\n", arch.c_str());
  std::printf("%-52s %6s %6s %6s %6s %8s %6s %6s %5s\n", "kernel", "body", "path", "mma/ffma", "shared", "ldmatrix",
              "global", "other", "regs");
  for (size_t i = 0; i < f.config_count(); ++i) {
    ir::Kernel k = f.declared_kernel(i);
    if (k.arch_specific() && arch != "sm_90" && arch != "sm_90a") continue;  // wgmma kernels exist for sm_90a only
    const std::string karch = k.arch_specific() ? "sm_90a" : arch;
    const std::string ptx = codegen::emit_ptx(k, {karch, 9, 0});
    const LoopStats s = loop_stats(ptx);
    const jit::Resources r = jit::parse_resources(jit::link_ptx(ptx, karch, k.name()).info_log, 0);
    auto num = [&](int v) { return s.found ? std::to_string(v) : std::string("-"); };  // "-": no k-loop it can follow
    std::printf("%-52s %6s %6s %8s %6s %8s %6s %6s %5d%s\n", k.name().c_str(), num(s.body).c_str(), num(s.path).c_str(),
                num(s.mma).c_str(), num(s.shared).c_str(), num(s.ldmatrix).c_str(), num(s.global).c_str(),
                num(s.other).c_str(), r.registers, r.spill_stores ? " (spills)" : "");
  }
  return 0;
}

struct Row {  // one line of the summary
  std::string dtype, shape, best;
  double tflops = 0, cublas = 0;
};
std::vector<Row> summary;
std::string only_variant;  // --variant: rows whose name contains it (profiling one kernel)
std::string epilogue;      // --epilogue: the fused epilogue's activation ("none": the bias alone), "" without one
bool fast_epilogue = false;  // --fast-epilogue: the activation in .approx forms

template <class T>
DeviceBuffer<T> random_buffer(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<T> h(n);
  for (auto& x : h) x = T(u(rng));
  return DeviceBuffer<T>(h);
}

// The operand sets the timed runs rotate through: one set when it is at least 64 MB (more
// than L2 holds), else as many as make 256 MB (at most 8), so caches do not flatter.
template <class In, class Out>
struct Operands {
  std::vector<DeviceBuffer<In>> A, B;
  std::vector<DeviceBuffer<Out>> C;
};

template <class In, class Out>
Operands<In, Out> make_operands(const Shape& sh, std::mt19937& rng) {
  const size_t set_bytes = (size_t(sh.m) * sh.k + size_t(sh.k) * sh.n) * sizeof(In) + size_t(sh.m) * sh.n * sizeof(Out);
  const int sets = set_bytes >= (64u << 20) ? 1 : static_cast<int>(std::clamp<size_t>((256u << 20) / set_bytes + 1, 1, 8));
  Operands<In, Out> o;
  for (int i = 0; i < sets; ++i) {
    o.A.push_back(random_buffer<In>(size_t(sh.m) * sh.k, rng));
    o.B.push_back(random_buffer<In>(size_t(sh.k) * sh.n, rng));
    o.C.emplace_back(size_t(sh.m) * sh.n);
  }
  return o;
}

template <class In, class Out>
void bench_dtype(const std::vector<Shape>& shapes, const Cublas* cublas, const jit::Stream& s, const std::string& arch,
                 bool tf32 = false) {
  const ir::Scalar in = ir::ScalarOf<In>::value, out = ir::ScalarOf<Out>::value;
  const int sm = codegen::parse_arch(arch).sm;
  std::mt19937 rng(1);
  for (const Shape& sh : shapes) {
    auto [A, B, C] = make_operands<In, Out>(sh, rng);
    const int sets = static_cast<int>(A.size());
    const double flop = 2.0 * sh.m * sh.n * sh.k;
    double cublas_tf = 0;
    const char* bl = sh.b_col ? " Bcol" : "";
    if (cublas && cublas->run(in, out, tf32, sh.m, sh.n, sh.k, A[0].device_address(), B[0].device_address(),
                              C[0].device_address(), sh.b_col) != 0) {
      std::printf("cuBLAS refused %u x %u x %u for %s\n", sh.m, sh.n, sh.k, ir::scalar_name(in));
    } else if (cublas) {
      double ms = time_ms(s, sets, [&](int i) {
        cublas->run(in, out, tf32, sh.m, sh.n, sh.k, A[i].device_address(), B[i].device_address(), C[i].device_address(),
                    sh.b_col);
      });
      cublas_tf = flop / ms / 1e9;
    }
    double best = 0;
    std::string best_name = "-";
    // split-K for f32 output when m x n fills few blocks (not with a fused epilogue)
    std::vector<uint32_t> splits = {1};
    if (out == ir::Scalar::F32 && uint64_t(sh.m) * sh.n <= 128u * 4096u && sh.k >= 1024 && epilogue.empty())
      splits = {1, 4, 16};
    ops::MatmulEpilogue epi;
    DeviceBuffer<Out> bias = random_buffer<Out>(epilogue.empty() ? 1 : sh.n, rng);
    if (!epilogue.empty()) {
      epi.bias = bias.device_address();
      if (epilogue != "none") epi.activation = &ops::elementwise_op(epilogue);
      epi.fast_math = fast_epilogue;
    }
    for (const ops::MatmulVariant& v : ops::matmul_variants())
      for (uint32_t split : splits) {
        ops::MatmulProblem p{.m = sh.m, .n = sh.n, .k = sh.k, .in = in, .out = out};
        p.b = sh.b_col ? ops::MatLayout::ColMajor : ops::MatLayout::RowMajor;
        p.tf32 = tf32;
        p.split_k = split;
        p.epilogue = epi;
        const bool simt = v.engine == ops::MatmulEngine::Simt || v.engine == ops::MatmulEngine::SimtDb;
        if (!v.can_implement(p, sm) || (tf32 && simt)) continue;
        if (!only_variant.empty() && std::string(v.name).find(only_variant) == std::string::npos) continue;
        double ms = time_ms(s, sets, [&](int i) {
          ops::matmul(v, A[i].device_address(), B[i].device_address(), C[i].device_address(), p, &s);
        });
        const double tf = flop / ms / 1e9;
        const ops::MatmulConfig cfg{static_cast<uint32_t>(&v - ops::matmul_variants().data()), in, out,
                                    ops::MatLayout::RowMajor, p.b, epi.bias != 0,
                                    epi.activation ? ops::matmul_activation(*epi.activation) : 0,
                                    epi.fast_math && epi.activation};
        std::string name = std::string(v.name) + (split > 1 ? "/split" + std::to_string(split) : "");
        const jit::Resources res = ops::matmul_family().get(cfg).resources();
        std::string regs = std::to_string(res.registers) + " regs";
        if (res.spill_stores) regs += " SPILLS " + std::to_string(res.spill_stores) + " B";
        std::printf("%-6s %5u x %5u x %5u%s  %-32s %8.2f TFLOP/s  %7.3f ms  %-8s %s\n", tf32 ? "tf32" : ir::scalar_name(in),
                    sh.m, sh.n, sh.k, bl, name.c_str(), tf, ms, regs.c_str(),
                    split == 1 ? sass_op(ops::matmul_family().get(cfg)).c_str() : "");
        if (tf > best) {
          best = tf;
          best_name = name;
        }
      }
    std::printf("%-6s %5u x %5u x %5u%s  %-32s %8.2f TFLOP/s  best %s: %.0f%% of cuBLAS\n\n",
                tf32 ? "tf32" : ir::scalar_name(in), sh.m, sh.n,
                sh.k, bl, "cuBLAS", cublas_tf, best_name.c_str(), cublas_tf > 0 ? 100.0 * best / cublas_tf : 0.0);
    std::fflush(stdout);
    summary.push_back({std::string(tf32 ? "tf32" : ir::scalar_name(in)) + (epilogue.empty() ? "" : " +bias " + epilogue + (fast_epilogue ? " fast" : "")),
                       std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k) + bl, best_name, best,
                       cublas_tf});
  }
}

// FP8: e4m3 (or e5m2) A row-major and B column-major (both K-major, as cuBLASLt and
// torch._scaled_mm require), bf16 C, scales 0.5 and 2 read from device memory.
template <class F8>
void bench_fp8(const std::vector<Shape>& shapes, bench::CublasLtFp8* lt, const jit::Stream& s, const std::string& arch) {
  const ir::Scalar in = ir::ScalarOf<F8>::value, out = ir::Scalar::BF16;
  const std::string dtype = std::string(ir::scalar_name(in)) + ">bf16";
  const int sm = codegen::parse_arch(arch).sm;
  std::mt19937 rng(1);
  DeviceBuffer<float> scale_buf(std::vector<float>{0.5f, 2.0f});
  const ops::MatmulScales sc{scale_buf.device_address(), scale_buf.device_address() + 4};
  for (const Shape& sh : shapes) {
    auto [A, B, C] = make_operands<F8, bfloat16>(sh, rng);
    const int sets = static_cast<int>(A.size());
    const double flop = 2.0 * sh.m * sh.n * sh.k;
    std::vector<bfloat16> ref;  // cuBLASLt's C of set 0 (default accumulation)
    double lt_best = 0;
    for (bool fast : {false, true}) {
      if (!lt) break;
      const char* name = fast ? "cuBLASLt (fast accum)" : "cuBLASLt";
      int st = lt->prepare(in, in, sh.m, sh.n, sh.k, sc.a, sc.b, fast, s.handle());
      if (!st) st = lt->run(A[0].device_address(), B[0].device_address(), C[0].device_address());
      if (st) {
        std::printf("%-9s %5u x %5u x %5u  %-32s refused: %s\n", dtype.c_str(), sh.m, sh.n, sh.k, name,
                    bench::CublasLtFp8::status_name(st).c_str());
        continue;
      }
      s.synchronize();  // the stream does not block: copies wait for it only so
      if (!fast) ref = C[0].to_host();
      const double ms = time_ms(s, sets, [&](int i) {
        lt->run(A[i].device_address(), B[i].device_address(), C[i].device_address());
      });
      lt_best = std::max(lt_best, flop / ms / 1e9);
      std::printf("%-9s %5u x %5u x %5u  %-32s %8.2f TFLOP/s  %7.3f ms\n", dtype.c_str(), sh.m, sh.n, sh.k, name,
                  flop / ms / 1e9, ms);
    }
    double best = 0;
    std::string best_name = "-";
    for (const ops::MatmulVariant& v : ops::matmul_variants()) {
      const ops::MatmulProblem p{.m = sh.m, .n = sh.n, .k = sh.k, .in = in, .out = out, .a = ops::MatLayout::RowMajor,
                                 .b = ops::MatLayout::ColMajor};
      if (!v.can_implement(p, sm)) continue;
      const double ms = time_ms(s, sets, [&](int i) {
        ops::matmul(v, A[i].device_address(), B[i].device_address(), C[i].device_address(), p, &s, sc);
      });
      // the largest difference from cuBLASLt's C, relative to its largest |C|
      std::string diff = "";
      if (!ref.empty()) {
        s.synchronize();
        C[0].fill_bytes(0xff);  // NaN: an element the variant leaves out cannot pass
        ops::matmul(v, A[0].device_address(), B[0].device_address(), C[0].device_address(), p, &s, sc);
        s.synchronize();
        const std::vector<bfloat16> c = C[0].to_host();
        double worst = 0, mag = 0;
        for (size_t i = 0; i < c.size(); ++i) {
          mag = std::max(mag, double(std::abs(float(ref[i]))));
          const double d = std::abs(double(float(c[i])) - double(float(ref[i])));
          worst = std::isnan(d) ? 1e30 : std::max(worst, d);
        }
        char buf[64];
        std::snprintf(buf, sizeof buf, "diff %.1e", worst / std::max(mag, 1e-30));
        diff = buf;
      }
      const double tf = flop / ms / 1e9;
      const ops::MatmulConfig cfg{static_cast<uint32_t>(&v - ops::matmul_variants().data()), in, out, p.a, p.b};
      const jit::Resources res = ops::matmul_family().get(cfg).resources();
      std::string regs = std::to_string(res.registers) + " regs";
      if (res.spill_stores) regs += " SPILLS " + std::to_string(res.spill_stores) + " B";
      std::printf("%-9s %5u x %5u x %5u  %-32s %8.2f TFLOP/s  %7.3f ms  %-8s %-14s %s\n", dtype.c_str(), sh.m, sh.n, sh.k,
                  v.name, tf, ms, regs.c_str(), sass_op(ops::matmul_family().get(cfg)).c_str(), diff.c_str());
      if (tf > best) {
        best = tf;
        best_name = v.name;
      }
    }
    std::printf("%-9s %5u x %5u x %5u  best %s: %.0f%% of the faster cuBLASLt\n\n", dtype.c_str(), sh.m, sh.n, sh.k,
                best_name.c_str(), lt_best > 0 ? 100.0 * best / lt_best : 0.0);
    std::fflush(stdout);
    summary.push_back({dtype, std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k), best_name, best,
                       lt_best});
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, skinny = false;
  std::string loop_stats_arch;
  std::vector<std::string> dtypes;
  std::vector<Shape> only_shapes;
  bool all_b_col = false;  // --b-col: B column-major (K-major) in every shape
  const char* usage =
      "usage: matmul [--quick | --skinny] [--dtype f32|tf32|f16|bf16|e4m3|e5m2]... [--shape MxNxK]...\n"
      "              [--variant TEXT] [--b-col] [--epilogue ACT [--fast-epilogue]] | --loop-stats [ARCH]\n"
      "  TFLOP/s of every matmul variant beside cuBLAS at the same precision (needs a GPU).\n"
      "  --quick  1024^3, 4096^3 and 16x4096x4096 only (under a minute on an H100)\n"
      "  --skinny 1, 4, 8 and 16 x 4096 x 4096 only (the GEMV shapes), B row- and column-major\n"
      "  --dtype  one input type (repeatable; default all four: f32 on SIMT, tf32, f16, bf16\n"
      "           on tensor cores, each with its own output type: f32, f32, f16, bf16);\n"
      "           e4m3 / e5m2: FP8 in, bf16 out, beside cuBLASLt (f32 compute, scales)\n"
      "  --shape  only this shape (repeatable), e.g. 4096x4096x128\n"
      "  --variant  only the variants whose name contains TEXT (cuBLAS still runs)\n"
      "  --b-col  B column-major (K-major) instead of row-major, for kaio and cuBLAS\n"
      "  --epilogue ACT  kaio's rows with the fused epilogue C = ACT(A * B + bias): relu, silu,\n"
      "           gelu, gelu_tanh, or none (the bias alone); cuBLAS without one\n"
      "  --fast-epilogue  the activation with PTX's .approx division, exp and tanh\n"
      "  --loop-stats  no GPU needed: the k-loop's PTX instruction counts and the registers of\n"
      "           every declared kernel for ARCH (default sm_90)\n";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") quick = true;
    else if (arg == "--skinny") skinny = true;
    else if (arg == "--dtype" && i + 1 < argc) dtypes.push_back(argv[++i]);
    else if (arg == "--variant" && i + 1 < argc) only_variant = argv[++i];
    else if (arg == "--b-col") all_b_col = true;
    else if (arg == "--fast-epilogue") fast_epilogue = true;
    else if (arg == "--epilogue" && i + 1 < argc) {
      epilogue = argv[++i];
      const std::vector<std::string> acts = {"none", "relu", "silu", "gelu", "gelu_tanh"};
      if (std::find(acts.begin(), acts.end(), epilogue) == acts.end()) {
        std::fprintf(stderr, "matmul: --epilogue '%s' is not one of none, relu, silu, gelu, gelu_tanh\n", epilogue.c_str());
        return 2;
      }
    }
    else if (arg == "--shape" && i + 1 < argc) {
      Shape sh{};
      char tail = 0;
      if (std::sscanf(argv[++i], "%ux%ux%u%c", &sh.m, &sh.n, &sh.k, &tail) != 3 || !sh.m || !sh.n || !sh.k) {
        std::fprintf(stderr, "matmul: --shape '%s' is not MxNxK (three positive integers)\n", argv[i]);
        return 2;
      }
      only_shapes.push_back(sh);
    }
    else if (arg == "--loop-stats") loop_stats_arch = i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "sm_90";
    else if (arg == "--help" || arg == "-h") {
      std::printf("%s", usage);
      return 0;
    } else {
      std::fprintf(stderr, "matmul: unknown argument '%s'\n%s", arg.c_str(), usage);
      return 2;
    }
  }
  for (const std::string& d : dtypes)
    if (d != "f32" && d != "tf32" && d != "f16" && d != "bf16" && d != "e4m3" && d != "e5m2") {
      std::fprintf(stderr, "matmul: --dtype '%s' is not one of f32, tf32, f16, bf16, e4m3, e5m2\n", d.c_str());
      return 2;
    }
  if (!loop_stats_arch.empty()) return print_loop_stats(loop_stats_arch);
  if (dtypes.empty()) dtypes = {"f32", "tf32", "f16", "bf16"};
  if (jit::interpret_mode()) {
    std::fprintf(stderr, "matmul: a benchmark needs a GPU (unset KAIO_INTERPRET)\n");
    return 1;
  }
  std::vector<Shape> shapes = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
                               {1, 4096, 4096},    {4, 4096, 4096},     {8, 4096, 4096},    {16, 4096, 4096},
                               {128, 11008, 4096}, {4096, 4096, 128},   {1000, 1000, 1000}};
  if (quick) shapes = {{1024, 1024, 1024}, {4096, 4096, 4096}, {16, 4096, 4096}};
  if (skinny) {  // B row-major, then column-major (a PyTorch Linear weight)
    shapes = {{1, 4096, 4096}, {4, 4096, 4096}, {8, 4096, 4096}, {16, 4096, 4096}};
    for (size_t i = 0, n = shapes.size(); i < n; ++i) shapes.push_back({shapes[i].m, shapes[i].n, shapes[i].k, true});
  }
  if (!only_shapes.empty()) shapes = only_shapes;
  if (all_b_col)
    for (Shape& sh : shapes) sh.b_col = true;
  jit::Stream s;
  Cublas cublas;
  const bool have_cublas = cublas.load(s.handle());
  if (!have_cublas) std::printf("cuBLAS not found: its column stays 0\n");
  const std::string arch = jit::detail::backend().default_arch();
  {  // every declared kernel (of --variant) compiled up front, in parallel (the rows below then only load them)
    const auto start = std::chrono::steady_clock::now();
    jit::Family<ops::MatmulConfig>& f = ops::matmul_family();
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < std::max(2u, std::thread::hardware_concurrency()); ++w)
      pool.emplace_back([&] {
        for (size_t i; (i = next++) < f.config_count();) {
          if (!only_variant.empty() && f.config_name(i).find(only_variant) == std::string::npos) continue;
          try {
            (void)jit::compile(f.declared_kernel(i));
          } catch (const std::exception& e) {
            std::printf("%s: %s\n", f.config_name(i).c_str(), e.what());
          }
        }
      });
    for (std::thread& t : pool) t.join();
    std::printf("%zu matmul kernels compiled or loaded from the cache in %.1f s\n", f.config_count(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("%-6s %-21s %-32s %15s\n", "dtype", "m x n x k", "variant", "throughput");
  bench::CublasLtFp8 lt;  // opened for the first FP8 dtype; released before the stream
  int have_lt = -1;
  for (const std::string& d : dtypes) {
    if (d == "f32") bench_dtype<float, float>(shapes, have_cublas ? &cublas : nullptr, s, arch);
    if (d == "tf32") bench_dtype<float, float>(shapes, have_cublas ? &cublas : nullptr, s, arch, true);
    if (d == "f16") bench_dtype<half, half>(shapes, have_cublas ? &cublas : nullptr, s, arch);
    if (d == "bf16") bench_dtype<bfloat16, bfloat16>(shapes, have_cublas ? &cublas : nullptr, s, arch);
    if (d == "e4m3" || d == "e5m2") {
      if (have_lt < 0 && !(have_lt = lt.load())) std::printf("cuBLASLt: %s; its rows are left out\n", lt.why().c_str());
      // FP8 shapes: the cubes, the skinny ones (m >= 16: 16-byte rows), 1000 x 1000 x 1008 (k: whole 16-byte rows)
      std::vector<Shape> f8 = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
                               {16, 4096, 4096},   {128, 11008, 4096}, {4096, 4096, 128},  {1000, 1000, 1008}};
      if (quick) f8 = {{1024, 1024, 1024}, {4096, 4096, 4096}, {16, 4096, 4096}};
      if (d == "e4m3") bench_fp8<fp8_e4m3>(f8, have_lt ? &lt : nullptr, s, arch);
      else bench_fp8<fp8_e5m2>(f8, have_lt ? &lt : nullptr, s, arch);
    }
  }
  std::printf("\nsummary (%s)\n| dtype | shape | best variant | TFLOP/s | cuBLAS | ratio |\n|---|---|---|---|---|---|\n",
              arch.c_str());
  for (const Row& r : summary)
    std::printf("| %s | %s | %s | %.1f | %.1f | %.0f%% |\n", r.dtype.c_str(), r.shape.c_str(), r.best.c_str(), r.tflops,
                r.cublas, r.cublas > 0 ? 100.0 * r.tflops / r.cublas : 0.0);
  return 0;
}
