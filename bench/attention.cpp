// attention: ops::attention and ops::attention_decode on the device.
//   Table 1 (forward): TFLOP/s = 4 B Hq Sq Sk D (halved when causal) / the median time of
//     one call, per kernel (wgmma: the Hopper kernel, "refused" where it does not apply;
//     mma: the mma.sync kernel; rows: the warp-per-row fallback, at the shorter shapes only).
//   Table 2 (decode): one new token per sequence, Hq 32, Hkv 8, D 128, B 1 / 8 / 64 against
//     caches of 1024, 8192 and 32768 tokens (every sequence full), contiguous and paged
//     (pages of 16 and 256 in a shuffled pool): us per call and KV GB/s = the K and V bytes
//     read once / the time, beside the GB/s of a device-to-device copy of 1 GB in the same
//     run (cuMemcpyDtoDAsync; its read + write bytes / time). Caches smaller than four
//     times L2 are rotated among copies so that each call reads from memory; decode times
//     are the median of --rounds rounds of 10 back-to-back calls.
// Layout (B, S, H, D), bf16 and f16. Timing: jit::Event around each call after 3 warm-up
// calls, median of --rounds (20). --csv FILE writes the rows for bench/attention_torch.py
// (PyTorch's SDPA on the same shapes). Without a GPU (KAIO_INTERPRET=1) it runs tiny
// shapes as a smoke test.
// --backward: ops::attention_backward instead (bench/attention_backward.h).
// Usage: attention [--rounds N] [--csv FILE] [--only SUBSTRING] [--splits N] [--decode-kernel auto|mma|rows]
//                  [--decode-rows LABEL] [--decode-shape BxLxPAGE]... [--decode-config BNxSTAGESxWARPS]...
//                  [--sync-each] [--wgmma-only] [--persistent [--filled-groups]] [--backward]
// --decode-config: the decode table once per tensor-core config (bn keys per chunk, ring
// stages, warps) instead of the table's rows (ops::detail::set_decode_override); the CSV
// names each row's config in its kernel column.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "timing.h"
#include "attention_backward.h"
#include "random_fill.h"

using namespace kaio;

namespace {

struct Options {
  int rounds = 20;
  std::string csv, only, decode_rows;  // decode_rows: a substring of the row label, e.g. "B64 L1024 page 256"
  bool sync_each = false;              // synchronise after every decode call (to find which call faults)
  std::vector<std::array<uint32_t, 3>> decode_shapes;  // --decode-shape BxLxPAGE: these decode rows instead
  std::vector<std::array<uint32_t, 3>> decode_configs;  // --decode-config BNxSTAGESxWARPS: a sweep
  uint32_t splits = 0;  // decode: 0 automatic
  ops::AttentionKernel decode_kernel = ops::AttentionKernel::Auto;
  bool backward = false;
  bool wgmma_only = false;  // --wgmma-only: the forward table's Hopper kernel rows only
  float softcap = 0.0f;     // --softcap CAP: the forward rows with that cap
  bool alibi = false;       // --alibi: the forward rows with ALiBi slopes (2^(-8 (h + 1) / Hq))
  std::vector<std::string> variants;  // --variant NAME: forward rows also with that tile-table row
  bool persistent = false;  // --persistent: the Hopper rows also on the kernel's persistent form, alternated twice
  bool filled_groups = false;  // --filled-groups: with --persistent, also the persistent form with item groups filled to four blocks' worth
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
  bool heads_major = false;           // contiguous as (B, Hkv, L, D), each head's keys in one run
};

const char* dname(ir::Scalar s) { return s == ir::Scalar::BF16 ? "bf16" : "f16"; }

template <class T>
// form: the wgmma kernel's grid (0) or persistent form (1; 2: with item groups filled to four blocks' worth)
// forced for this row; -1 the policy.
void forward(const Options& o, const Fwd& f, ops::AttentionKernel kernel, FILE* csv, const char* variant = nullptr,
             int form = -1) {
  const ops::detail::AttentionWgmmaForm forced(form < 0 ? -1 : form > 0 ? 1 : 0, form != 2);
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const uint64_t n = uint64_t(f.b) * f.s * f.hq * f.d, nkv = uint64_t(f.b) * f.s * f.hkv * f.d;
  DeviceBuffer<T> q(n), k(nkv), v(nkv), out(n);
  uint32_t seed = 1;
  for (DeviceBuffer<T>* x : {&q, &k, &v}) bench::fill_randn(*x, seed++);
  const ops::AttentionShape sh{.batch = f.b, .seqlen_q = f.s, .seqlen_k = f.s, .heads_q = f.hq, .heads_kv = f.hkv, .head_dim = f.d};
  std::vector<float> slopes(f.hq);
  for (uint32_t h = 0; h < f.hq; ++h) slopes[h] = std::exp2(-8.0f * float(h + 1) / float(f.hq));
  DeviceBuffer<float> slopes_dev(slopes);
  auto call = [&] {
    ops::attention(ops::bshd(q.device_address(), dt, f.s, f.hq, f.d), ops::bshd(k.device_address(), dt, f.s, f.hkv, f.d),
                   ops::bshd(v.device_address(), dt, f.s, f.hkv, f.d), ops::bshd(out.device_address(), dt, f.s, f.hq, f.d), sh,
                   {.causal = f.causal, .softcap = o.softcap, .alibi_slopes = o.alibi ? slopes_dev.device_address() : 0,
                    .kernel = kernel, .variant = variant});
  };
  const char* kname = variant                                 ? variant
                      : form == 2                             ? "persist_fill"
                      : form == 1                             ? "persist"
                      : form == 0                             ? "grid"
                      : kernel == ops::AttentionKernel::Rows  ? "rows"
                      : kernel == ops::AttentionKernel::Wgmma ? "wgmma"
                      : kernel == ops::AttentionKernel::Tuned ? "tuned"
                                                              : "mma";
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
  if (csv && !variant)
    std::fprintf(csv, "forward,%s,%s,%u,%u,%u,%u,%u,%d,0,%.6f,%.3f\n", kname, dname(dt), f.b, f.hq, f.hkv, f.s, f.d, f.causal ? 1 : 0,
                 ms, flops / ms / 1e9);
}

// GB/s of a device-to-device copy that reads bytes / 2 and writes bytes / 2 (0: no device).
double copy_gbps(const jit::Stream& s, size_t bytes, int rounds) {
  if (jit::interpret_mode() || !bench::copy_fn()) return 0;
  const size_t half = bytes / 2;
  DeviceBuffer<uint8_t> src(half), dst(half);
  src.fill_bytes(1);
  const double ms = bench::ms_per_call(s, rounds, 1, [&] {
    jit::driver::check(bench::copy_fn()(dst.device_address(), src.device_address(), half, static_cast<CUstream>(s.handle())),
                       "cuMemcpyDtoDAsync");
  });
  return double(bytes) / (ms * 1e6);
}

std::string dec_label(const Dec& c) {
  return "B" + std::to_string(c.b) + " L" + std::to_string(c.len) + " " +
         (c.page ? "page " + std::to_string(c.page) : c.heads_major ? "heads-major" : "contiguous");
}

template <class T>
void decode(const Options& o, const Dec& c, double copy, FILE* csv, const std::string& config = "auto") {
  if (!o.decode_rows.empty() && dec_label(c).find(o.decode_rows) == std::string::npos) return;
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const uint64_t tok = uint64_t(c.hkv) * c.d, kv = uint64_t(c.b) * c.len * tok;
  // Copies of the cache (and its table) to rotate through, so that the K and V bytes come
  // from memory, not from L2.
  const uint64_t l2 = std::max<uint64_t>(jit::device_info().l2_bytes, 1u << 20);
  const uint32_t copies = jit::interpret_mode() ? 1 : uint32_t(std::min<uint64_t>(64, (4 * l2 + 2 * kv * sizeof(T) - 1) / (2 * kv * sizeof(T))));
  DeviceBuffer<T> k(kv * copies), v(kv * copies), q(uint64_t(c.b) * c.hq * c.d), out(uint64_t(c.b) * c.hq * c.d);
  uint32_t seed = 1;
  for (DeviceBuffer<T>* x : {&k, &v, &q}) bench::fill_randn(*x, seed++);
  DeviceBuffer<int32_t> lens(std::vector<int32_t>(c.b, int32_t(c.len)));
  const uint32_t pages = c.page ? c.len / c.page : 0, pool = c.b * pages;
  std::vector<int32_t> table;
  for (uint32_t p = 0; p < pool; ++p) table.push_back(int32_t((uint64_t(p) * 7919u) % pool));  // a shuffled pool (7919 is prime)
  DeviceBuffer<int32_t> table_dev(table.empty() ? std::vector<int32_t>{0} : table);
  std::vector<ops::KvCache> caches;
  for (uint32_t i = 0; i < copies; ++i) {
    const uint64_t at = i * kv * sizeof(T);
    // (B, L, Hkv, D): a token's heads side by side; heads-major (B, Hkv, L, D), as SDPA takes it.
    const uint64_t seq_stride = c.heads_major ? c.d : tok, head_stride = c.heads_major ? uint64_t(c.len) * c.d : c.d;
    ops::KvCache cache{.k = {k.device_address() + at, dt, uint64_t(c.len) * tok, seq_stride, head_stride},
                       .v = {v.device_address() + at, dt, uint64_t(c.len) * tok, seq_stride, head_stride},
                       .seqlens = lens.device_address(), .capacity = c.len};
    if (c.page) {
      cache.max_pages = pages;
      cache.k.batch_stride = cache.v.batch_stride = uint64_t(c.page) * tok;
      cache.page_size = c.page;
      cache.capacity = pool;
      cache.block_table = table_dev.device_address();
    }
    caches.push_back(cache);
  }
  const ops::AttentionShape sh{.batch = c.b, .seqlen_q = 1, .seqlen_k = c.len, .heads_q = c.hq, .heads_kv = c.hkv, .head_dim = c.d};
  jit::Stream s;
  uint32_t next = 0;
  auto call = [&] {
    ops::attention_decode(ops::bshd(q.device_address(), dt, 1, c.hq, c.d), caches[next++ % copies],
                          ops::bshd(out.device_address(), dt, 1, c.hq, c.d), sh, {.splits = o.splits, .kernel = o.decode_kernel}, &s);
    if (!o.sync_each) return;
    try {
      s.synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "decode %s %s: call %u failed: %s\n", dname(dt), dec_label(c).c_str(), next, e.what());
      throw;
    }
  };
  const double ms = bench::ms_per_call(s, o.rounds, 10, call);
  const double bytes = 2.0 * kv * sizeof(T), gbps = bytes / ms / 1e6;
  std::printf("decode %-5s B%-3u H%2u:%-2u len %-6u D%-4u %-11s %-10s %10.1f us %8.1f GB/s %6.1f%% of copy\n", dname(dt), c.b,
              c.hq, c.hkv, c.len, c.d, c.page ? ("page " + std::to_string(c.page)).c_str() : c.heads_major ? "heads-major" : "contiguous", config.c_str(),
              ms * 1e3, gbps, copy > 0 ? 100 * gbps / copy : 0.0);
  if (csv)
    std::fprintf(csv, "decode,%s,%s,%u,%u,%u,%u,%u,0,%u,%.6f,%.3f\n", (config + (c.heads_major ? "/heads" : "")).c_str(), dname(dt), c.b,
                 c.hq, c.hkv, c.len, c.d, c.page, ms,
                 gbps);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows printed before a fault stay printed
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::puts("usage: attention [--rounds N] [--csv FILE] [--only SUBSTRING] [--splits N] [--decode-kernel auto|mma|rows] [--decode-rows LABEL] [--decode-shape BxLxPAGE]... [--decode-config BNxSTAGESxWARPS]... [--sync-each] [--wgmma-only] [--softcap CAP] [--alibi] [--variant NAME]... [--persistent [--filled-groups]] [--backward]\n"
                "  forward TFLOP/s and decode us / KV GB/s of ops::attention and ops::attention_decode;\n"
                "  --csv FILE: rows for bench/attention_torch.py --kaio FILE; --only: cases whose name contains it\n"
                "  (forward, decode); --splits: the decode key splits (0: chosen from the shape); --decode-kernel:\n"
                "  force the tensor-core decode kernel or the rows kernel; --decode-rows: only the decode rows whose\n"
                "  label (e.g. \"B64 L1024 page 256\") contains it; --decode-shape BxLxPAGE: that decode row (Hq 32, Hkv 8,\n"
                "  D 128; PAGE 0 contiguous; repeatable) instead of the table; --decode-config BNxSTAGESxWARPS: the decode\n"
                "  rows (bf16) once per tensor-core config (repeatable); --sync-each: synchronise after every decode call;\n"
                "  --wgmma-only: the forward rows of the Hopper kernel only; --softcap CAP, --alibi: the forward rows with\n"
                "  that softcap (the backward rows too) and with ALiBi slopes 2^(-8 (h + 1) / Hq); --variant NAME: each forward row of its head\n"
                "  dim also with that row of the tile table (bf16; e.g. fa3_d128_s3; repeatable; with --backward a row of\n"
                "  the backward's table, e.g. bwd_fa3_d128_dq2); --persistent: the Hopper kernel's forward rows also on its\n"
                "  persistent form (one block an SM over query tiles, heads and batches), alternated with the grid twice\n"
                "  (--filled-groups: also with the causal items' groups filled to four blocks' worth, the last the rest);\n"
                "  --backward: ops::attention_backward TFLOP/s (2.5x the forward's FLOPs), deterministic (--only: the rows\n"
                "  whose label, e.g. \"B4 H16 S4096 D64 causal\", contains it): the default\n"
                "  path, the mma.sync kernels and the tuner's row for each bucket (its choice and margin printed)");
      return 0;
    }
    const std::pair<const char*, bool*> switches[] = {{"--backward", &o.backward},     {"--wgmma-only", &o.wgmma_only},
                                                      {"--alibi", &o.alibi},           {"--sync-each", &o.sync_each},
                                                      {"--persistent", &o.persistent}, {"--filled-groups", &o.filled_groups}};
    bool is_switch = false;
    for (const auto& [name, flag] : switches)
      if (a == name) *flag = is_switch = true;
    if (is_switch) continue;
    if (a == "--softcap" && i + 1 < argc) {
      o.softcap = std::strtof(argv[++i], nullptr);
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "attention: %s needs a value (see --help)\n", a.c_str());
      return 2;
    }
    if (a == "--rounds") o.rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--csv") o.csv = argv[++i];
    else if (a == "--only") o.only = argv[++i];
    else if (a == "--variant") o.variants.push_back(argv[++i]);
    else if (a == "--decode-rows") o.decode_rows = argv[++i];
    else if (a == "--decode-shape") {
      std::array<uint32_t, 3> d{};
      if (std::sscanf(argv[++i], "%ux%ux%u", &d[0], &d[1], &d[2]) != 3 || !d[0] || !d[1]) {
        std::fprintf(stderr, "attention: --decode-shape takes BxLxPAGE (PAGE 0: contiguous), not %s\n", argv[i]);
        return 2;
      }
      o.decode_shapes.push_back(d);
    }
    else if (a == "--decode-config") {
      unsigned bn = 0, st = 0, w = 0;
      if (std::sscanf(argv[++i], "%ux%ux%u", &bn, &st, &w) != 3) {
        std::fprintf(stderr, "attention: --decode-config takes BNxSTAGESxWARPS, not %s\n", argv[i]);
        return 2;
      }
      o.decode_configs.push_back({bn, st, w});
    } else if (a == "--splits") o.splits = uint32_t(std::max(0, std::atoi(argv[++i])));
    else if (a == "--decode-kernel") {
      const std::string k = argv[++i];
      if (k == "mma") o.decode_kernel = ops::AttentionKernel::Mma;
      else if (k == "rows") o.decode_kernel = ops::AttentionKernel::Rows;
      else if (k != "auto") {
        std::fprintf(stderr, "attention: --decode-kernel takes auto, mma or rows, not %s\n", k.c_str());
        return 2;
      }
    }
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
  std::vector<Dec> dec = tiny ? std::vector<Dec>{{1, 2, 1, 300, 64, 0}, {1, 2, 1, 300, 64, 0, true}, {1, 2, 1, 320, 64, 16}} : std::vector<Dec>{};
  for (const auto& d : o.decode_shapes) dec.push_back({d[0], 32, 8, d[1], 128, d[2]});
  if (!tiny && o.decode_shapes.empty())
    for (uint32_t b : {1u, 8u, 64u})
      for (uint32_t len : {1024u, 8192u, 32768u})
        for (uint32_t page : {0u, 16u, 256u}) {
          dec.push_back({b, 32, 8, len, 128, page});
          if (page == 0) dec.push_back({b, 32, 8, len, 128, 0, true});
        }
  auto wanted = [&](const std::string& name) { return o.only.empty() || name.find(o.only) != std::string::npos; };
  if (o.backward) {
    std::puts("backward (B, S, H, D), TFLOP/s = 2.5 x 4 B H S^2 D (halved when causal) / time");
    for (const bench_attention::Bwd& f : bench_attention::backward_rows(tiny)) {
      if (!wanted("B" + std::to_string(f.b) + " H" + std::to_string(f.hq) + " S" + std::to_string(f.s) + " D" + std::to_string(f.d) +
                  (f.causal ? " causal" : " full")))
        continue;
      bench_attention::backward<bfloat16>(f, o.rounds, ms_per_call<std::function<void()>>, csv, o.variants, o.softcap);
      bench_attention::backward<half>(f, o.rounds, ms_per_call<std::function<void()>>, csv, o.variants, o.softcap);
    }
    if (csv) std::fclose(csv);
    return 0;
  }
  std::puts("forward (B, S, H, D), TFLOP/s = 4 B H S^2 D (halved when causal) / time");
  for (const Fwd& f : fwd) {
    if (!wanted("forward")) break;
    // Tuned: the tuner's row for the bucket (its first call times the candidates, outside the timing).
    for (ops::AttentionKernel kernel : {ops::AttentionKernel::Wgmma, ops::AttentionKernel::Mma, ops::AttentionKernel::Tuned}) {
      if (o.wgmma_only && kernel != ops::AttentionKernel::Wgmma) continue;
      if (o.persistent && kernel == ops::AttentionKernel::Wgmma) {  // the grid of tiles and the persistent form, alternated
        for (int r = 0; r < 2; ++r) {  // the csv: the first round's
          forward<bfloat16>(o, f, kernel, r ? nullptr : csv, nullptr, 0);
          forward<bfloat16>(o, f, kernel, r ? nullptr : csv, nullptr, 1);
          if (o.filled_groups) forward<bfloat16>(o, f, kernel, r ? nullptr : csv, nullptr, 2);
          forward<half>(o, f, kernel, r ? nullptr : csv, nullptr, 0);
          forward<half>(o, f, kernel, r ? nullptr : csv, nullptr, 1);
          if (o.filled_groups) forward<half>(o, f, kernel, r ? nullptr : csv, nullptr, 2);
        }
        continue;
      }
      forward<bfloat16>(o, f, kernel, csv);
      forward<half>(o, f, kernel, csv);
    }
    for (const std::string& name : o.variants) {  // rows of other head dims are refused, quietly
      const ops::AttentionVariant* row = nullptr;
      for (const ops::AttentionVariant& r : ops::attention_variants())
        if (name == r.name) row = &r;
      if (row && row->head_dim == f.d) forward<bfloat16>(o, f, ops::AttentionKernel::Auto, csv, row->name);
    }
  }
  // The fallback at a shorter length (it is tens of times slower).
  if (wanted("forward") && !o.wgmma_only) forward<bfloat16>(o, tiny ? fwd[0] : Fwd{1, 16, 16, 1024, 128, true}, ops::AttentionKernel::Rows, csv);
  if (wanted("decode")) {
    const double copy = copy_gbps(jit::Stream(), size_t(1) << 30, o.rounds);
    std::printf("decode, one token per sequence; KV GB/s = K and V bytes / time; copy (1 GB, same run) %.1f GB/s\n", copy);
    if (csv) std::fprintf(csv, "copy,driver,u8,0,0,0,0,0,0,0,0,%.3f\n", copy);
    if (o.decode_configs.empty())
      for (const Dec& c : dec) {
        decode<bfloat16>(o, c, copy, csv);
        decode<half>(o, c, copy, csv);
      }
    for (const auto& [bn, stages, warps] : o.decode_configs) {
      ops::AttentionDecodeConfig cfg;
      cfg.bn = bn, cfg.stages = stages, cfg.warps = warps;
      ops::detail::set_decode_override(&cfg);
      const std::string name = "n" + std::to_string(bn) + "s" + std::to_string(stages) + "w" + std::to_string(warps);
      for (const Dec& c : dec) {
        try {
          decode<bfloat16>(o, c, copy, csv, name);
        } catch (const UsageError& e) {
          std::printf("decode %s: %s\n", name.c_str(), e.what());
          break;
        }
      }
      ops::detail::set_decode_override(nullptr);
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}
