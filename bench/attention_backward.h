// bench/attention --backward: ops::attention_backward on the device.
//   TFLOP/s = 2.5 x the forward's 4 B Hq Sq Sk D (halved when causal) / the median time of
//   one backward call (the D pre-pass, the dq and the dk / dv kernels; the forward that
//   makes o and the logsumexp runs once, outside the timing). Each row runs the default
//   path (the wgmma kernels on an sm_90 device), the mma.sync kernels and the tuner's row
//   for the bucket (tuned on its first call, outside the timing; the choice and its margin
//   are printed), then any rows of the tile table named by --variant, all deterministic
//   (every path reduces in a fixed order, so the guarantee costs nothing).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_backward_tune.h"
#include "random_fill.h"

namespace kaio::bench_attention {

struct Bwd {
  uint32_t b, hq, hkv, s, d;
  bool causal;
};

inline std::vector<Bwd> backward_rows(bool tiny) {
  if (tiny) return {{1, 2, 1, 64, 64, true}};
  return {{4, 16, 16, 4096, 128, false}, {4, 16, 16, 4096, 128, true}, {1, 32, 32, 16384, 128, false},
          {1, 32, 32, 16384, 128, true}, {4, 16, 16, 4096, 64, false}, {4, 16, 16, 4096, 64, true}};
}

// ms_per_call(rounds, f): the median time of f (the bench's timing).
template <class T, class Timer>
void backward(const Bwd& f, int rounds, Timer&& ms_per_call, FILE* csv, const std::vector<std::string>& variants = {},
              float softcap = 0.0f) {
  const ir::Scalar dt = ir::ScalarOf<T>::value;
  const char* name = dt == ir::Scalar::BF16 ? "bf16" : "f16";
  const uint64_t n = uint64_t(f.b) * f.s * f.hq * f.d, nkv = uint64_t(f.b) * f.s * f.hkv * f.d;
  DeviceBuffer<T> q(n), k(nkv), v(nkv), o(n), dout(n), dq(n), dk(nkv), dv(nkv);
  DeviceBuffer<float> lse(uint64_t(f.b) * f.hq * f.s);
  uint32_t seed = 1;
  for (DeviceBuffer<T>* x : {&q, &k, &v, &dout}) bench::fill_randn(*x, seed++);  // as the peer's torch.randn
  auto t = [&](DeviceBuffer<T>& x, uint32_t h) { return ops::bshd(x.device_address(), dt, f.s, h, f.d); };
  const ops::AttentionShape sh{.batch = f.b, .seqlen_q = f.s, .seqlen_k = f.s, .heads_q = f.hq, .heads_kv = f.hkv, .head_dim = f.d};
  ops::attention(t(q, f.hq), t(k, f.hkv), t(v, f.hkv), t(o, f.hq), sh, {.causal = f.causal, .softcap = softcap, .lse = lse.device_address()});
  const double flops = 2.5 * 4.0 * f.b * f.hq * double(f.s) * f.s * f.d * (f.causal ? 0.5 : 1.0);
  const ops::AttentionGradients grads{t(dq, f.hq), t(dk, f.hkv), t(dv, f.hkv)};
  auto run = [&](const char* kind, ops::AttentionKernel kernel, const char* variant) {
    auto call = [&] {
      ops::attention_backward(t(q, f.hq), t(k, f.hkv), t(v, f.hkv), t(o, f.hq), t(dout, f.hq), lse.device_address(), grads, sh,
                              {.causal = f.causal, .softcap = softcap, .deterministic = true, .kernel = kernel, .variant = variant});
    };
    const double ms = ms_per_call(rounds, call);
    std::printf("bwd   %-5s B%-2u H%2u:%-2u S%-6u D%-4u %-7s %-18s %10.3f ms %8.1f TFLOP/s\n", name, f.b, f.hq, f.hkv, f.s, f.d,
                f.causal ? "causal" : "full", kind, ms, flops / ms / 1e9);
    if (csv)
      std::fprintf(csv, "backward,%s,%s,%u,%u,%u,%u,%u,%d,0,%.6f,%.3f\n", kind, name, f.b, f.hq, f.hkv, f.s, f.d, f.causal ? 1 : 0, ms,
                   flops / ms / 1e9);
  };
  // The default path (wgmma kernels on an sm_90 device) and the mma.sync kernels, both
  // deterministic (every path sums in a fixed order: the flag costs nothing).
  run("auto", ops::AttentionKernel::Auto, nullptr);
  run("mma", ops::AttentionKernel::Mma, nullptr);
  // The tuner's row: tuned here (or read from the cache), then timed like the others.
  const tuner::AttentionBackwardChoice ch = tuner::choose_attention_backward(
      t(q, f.hq), t(k, f.hkv), t(v, f.hkv), t(o, f.hq), t(dout, f.hq), grads, sh,
      {.causal = f.causal, .softcap = softcap, .kernel = ops::AttentionKernel::Tuned});
  if (ch.variant) {
    const auto margin = ch.record.runner_up_margin();
    std::printf("      tuned: %s (%s%s, runner-up %+.1f%%, %.1f s)\n", ch.variant->name,
                ch.source == tuner::AttentionBackwardChoice::Stored ? "stored" : ch.source == tuner::AttentionBackwardChoice::Tuned ? "tuned" : "untuned",
                ch.record.noisy ? ", noisy" : "", margin ? *margin * 100 : 0.0, ch.record.tune_seconds);
    for (const tuner::CandidateResult& r : ch.record.candidates)
      std::printf("        %-18s %s %.3f ms\n", r.name.c_str(), r.status.c_str(), r.median_ms);
    run("tuned", ops::AttentionKernel::Tuned, nullptr);
  }
  for (const std::string& v : variants) {  // rows of other head dims are refused, quietly
    const ops::AttentionBackwardVariant* row = ops::attention_backward_find(v.c_str());
    if (row && row->head_dim == f.d) run(row->name, ops::AttentionKernel::Auto, row->name);
  }
}

}  // namespace kaio::bench_attention
