// attention: ops::attention and ops::attention_decode on the device.
//   Table 1 (forward): TFLOP/s = 4 B Hq Sq Sk D (halved when causal) / the median time of
//     one call, per kernel (wgmma: the Hopper kernel, "refused" where it does not apply;
//     mma: the mma.sync kernel; rows: the warp-per-row fallback, at the shorter shapes only).
//   Table 2 (decode): one new token per sequence against caches of 32768 tokens (every
//     sequence full), contiguous and paged (pages of 64): us per call and KV GB/s = the K and
//     V bytes read once / the time.
// Layout (B, S, H, D), bf16 and f16. Timing: jit::Event around each call after 3 warm-up
// calls, median of --rounds (20). --csv FILE writes the rows for bench/attention_torch.py
// (PyTorch's SDPA on the same shapes). Without a GPU (KAIO_INTERPRET=1) it runs tiny
// shapes as a smoke test.
// Usage: attention [--rounds N] [--csv FILE] [--only SUBSTRING]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/attention.h"

using namespace kaio;

namespace {

struct Options {
  int rounds = 20;
  std::string csv, only;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double ms_per_call(int rounds, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> r;
  for (int round = 0; round < rounds; ++round) {
    jit::Event start, stop;
    start.record(nullptr);
    f();
    stop.record(nullptr);
    r.push_back(jit::elapsed_ms(start, stop));
  }
  return median(r);
}

struct Fwd {
  uint32_t b, hq, hkv, s, d;
  bool causal;
};

struct Dec {
  uint32_t b, hq, hkv, len, d, page;  // page 0: contiguous
};

const char* dname(ir::Scalar s) { return s == ir::Scalar::BF16 ? "bf16" : "f16"; }

template <class T>
void forward(const Options& o, const Fwd& f, ops::AttentionKernel kernel, FILE* csv) {
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const uint64_t n = uint64_t(f.b) * f.s * f.hq * f.d, nkv = uint64_t(f.b) * f.s * f.hkv * f.d;
  DeviceBuffer<T> q(n), k(nkv), v(nkv), out(n);
  for (DeviceBuffer<T>* x : {&q, &k, &v}) x->fill_bytes(0x3c);  // small finite values in both dtypes
  const ops::AttentionShape sh{.batch = f.b, .seqlen_q = f.s, .seqlen_k = f.s, .heads_q = f.hq, .heads_kv = f.hkv, .head_dim = f.d};
  auto call = [&] {
    ops::attention(ops::bshd(q.device_address(), dt, f.s, f.hq, f.d), ops::bshd(k.device_address(), dt, f.s, f.hkv, f.d),
                   ops::bshd(v.device_address(), dt, f.s, f.hkv, f.d), ops::bshd(out.device_address(), dt, f.s, f.hq, f.d), sh,
                   {.causal = f.causal, .kernel = kernel});
  };
  const char* kname = kernel == ops::AttentionKernel::Rows ? "rows" : kernel == ops::AttentionKernel::Wgmma ? "wgmma" : "mma";
  try {
    call();
  } catch (const UsageError& e) {  // the wgmma kernel off Hopper, or a head dim it has no tile for
    std::printf("%-5s %-5s B%-2u H%2u:%-2u S%-6u D%-4u %-7s refused: %s\n", kname, dname(dt), f.b, f.hq, f.hkv, f.s, f.d,
                f.causal ? "causal" : "full", e.what());
    return;
  }
  const double ms = ms_per_call(o.rounds, call);
  const double flops = 4.0 * f.b * f.hq * double(f.s) * f.s * f.d * (f.causal ? 0.5 : 1.0);
  std::printf("%-5s %-5s B%-2u H%2u:%-2u S%-6u D%-4u %-7s %10.3f ms %8.1f TFLOP/s\n", kname, dname(dt), f.b, f.hq, f.hkv, f.s, f.d,
              f.causal ? "causal" : "full", ms, flops / ms / 1e9);
  if (csv)
    std::fprintf(csv, "forward,%s,%s,%u,%u,%u,%u,%u,%d,0,%.6f,%.3f\n", kname, dname(dt), f.b, f.hq, f.hkv, f.s, f.d, f.causal ? 1 : 0,
                 ms, flops / ms / 1e9);
}

template <class T>
void decode(const Options& o, const Dec& c, FILE* csv) {
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const uint64_t tok = uint64_t(c.hkv) * c.d, kv = uint64_t(c.b) * c.len * tok;
  DeviceBuffer<T> k(kv), v(kv), q(uint64_t(c.b) * c.hq * c.d), out(uint64_t(c.b) * c.hq * c.d);
  for (DeviceBuffer<T>* x : {&k, &v, &q}) x->fill_bytes(0x3c);
  DeviceBuffer<int32_t> lens(std::vector<int32_t>(c.b, int32_t(c.len)));
  ops::KvCache cache{.k = {k.device_address(), dt, uint64_t(c.len) * tok, tok, c.d},
                     .v = {v.device_address(), dt, uint64_t(c.len) * tok, tok, c.d},
                     .seqlens = lens.device_address(), .capacity = c.len};
  std::vector<int32_t> table;
  if (c.page) {
    cache.max_pages = c.len / c.page;
    for (uint32_t p = 0; p < c.b * cache.max_pages; ++p) table.push_back(int32_t((p * 7919u) % (c.b * cache.max_pages)));
    cache.k.batch_stride = cache.v.batch_stride = uint64_t(c.page) * tok;
    cache.page_size = c.page;
    cache.capacity = c.b * cache.max_pages;
  }
  DeviceBuffer<int32_t> table_dev(table.empty() ? std::vector<int32_t>{0} : table);
  if (c.page) cache.block_table = table_dev.device_address();
  const ops::AttentionShape sh{.batch = c.b, .seqlen_q = 1, .seqlen_k = c.len, .heads_q = c.hq, .heads_kv = c.hkv, .head_dim = c.d};
  auto call = [&] {
    ops::attention_decode(ops::bshd(q.device_address(), dt, 1, c.hq, c.d), cache, ops::bshd(out.device_address(), dt, 1, c.hq, c.d), sh);
  };
  const double ms = ms_per_call(o.rounds, call);
  const double bytes = 2.0 * kv * sizeof(T);
  std::printf("decode %-5s B%-3u H%2u:%-2u len %-6u D%-4u %-10s %10.1f us %8.1f GB/s\n", dname(dt), c.b, c.hq, c.hkv, c.len, c.d,
              c.page ? ("page " + std::to_string(c.page)).c_str() : "contiguous", ms * 1e3, bytes / ms / 1e6);
  if (csv)
    std::fprintf(csv, "decode,rows,%s,%u,%u,%u,%u,%u,0,%u,%.6f,%.3f\n", dname(dt), c.b, c.hq, c.hkv, c.len, c.d, c.page, ms,
                 bytes / ms / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::puts("usage: attention [--rounds N] [--csv FILE] [--only SUBSTRING]\n"
                "  forward TFLOP/s and decode us / KV GB/s of ops::attention and ops::attention_decode;\n"
                "  --csv FILE: rows for bench/attention_torch.py --kaio FILE; --only: cases whose name contains it");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "attention: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--rounds") o.rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--csv") o.csv = argv[++i];
    else if (a == "--only") o.only = argv[++i];
    else {
      std::fprintf(stderr, "attention: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  const bool tiny = jit::interpret_mode();
  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (csv) std::fprintf(csv, "kind,kernel,dtype,b,hq,hkv,s,d,causal,page,ms,rate\n");
  std::vector<Fwd> fwd = tiny ? std::vector<Fwd>{{1, 2, 1, 64, 64, true}}
                              : std::vector<Fwd>{{4, 16, 16, 4096, 128, false}, {4, 16, 16, 4096, 128, true},
                                                 {1, 32, 32, 16384, 128, false}, {1, 32, 32, 16384, 128, true},
                                                 {4, 16, 16, 4096, 64, false},  {4, 16, 16, 4096, 64, true},
                                                 {4, 32, 8, 4096, 128, true},   {2, 16, 16, 8192, 128, true},
                                                 {4, 8, 8, 2048, 256, false},   {4, 8, 8, 2048, 256, true},
                                                 {4, 16, 16, 4096, 96, true}};
  std::vector<Dec> dec = tiny ? std::vector<Dec>{{1, 2, 1, 300, 64, 0}, {1, 2, 1, 320, 64, 16}}
                              : std::vector<Dec>{{1, 32, 8, 32768, 128, 0},  {1, 32, 8, 32768, 128, 64}, {8, 32, 8, 32768, 128, 0},
                                                 {8, 32, 8, 32768, 128, 64}, {32, 32, 8, 32768, 128, 0}, {32, 32, 8, 32768, 128, 64},
                                                 {64, 32, 8, 4096, 128, 16}};
  auto wanted = [&](const std::string& name) { return o.only.empty() || name.find(o.only) != std::string::npos; };
  std::puts("forward (B, S, H, D), TFLOP/s = 4 B H S^2 D (halved when causal) / time");
  for (const Fwd& f : fwd) {
    if (!wanted("forward")) break;
    for (ops::AttentionKernel kernel : {ops::AttentionKernel::Wgmma, ops::AttentionKernel::Mma}) {
      forward<bfloat16>(o, f, kernel, csv);
      forward<half>(o, f, kernel, csv);
    }
  }
  // The fallback at a shorter length (it is tens of times slower).
  if (wanted("forward")) forward<bfloat16>(o, tiny ? fwd[0] : Fwd{1, 16, 16, 1024, 128, true}, ops::AttentionKernel::Rows, csv);
  std::puts("decode, one token per sequence; KV GB/s = K and V bytes / time");
  for (const Dec& c : dec) {
    if (!wanted("decode")) break;
    decode<bfloat16>(o, c, csv);
  }
  if (csv) std::fclose(csv);
  return 0;
}
