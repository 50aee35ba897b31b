// One forward attention case (shape, options, layout, kernel) run against the float64
// reference of attention_support.h, output and logsumexp poisoned first.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kaio/ops/attention.h"
#include "../support.h"
#include "attention_support.h"

namespace kaio::test::attn {

enum class Layout { Bshd, Bhsd, FusedQkv };

struct Case {
  uint32_t batch = 1, sq = 7, sk = 7, hq = 2, hkv = 1, d = 64;
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0;
  bool alibi = false;
  Layout layout = Layout::Bshd;
  std::vector<int32_t> q_lens, k_lens;  // varlen when set
  kaio::ops::AttentionKernel kernel = kaio::ops::AttentionKernel::Auto;
  const char* variant = nullptr;  // a row of the tile table by name (AttentionOptions::variant)
};

inline std::string describe(const Case& c) {
  std::string s = "B" + std::to_string(c.batch) + " Sq " + std::to_string(c.sq) + " Sk " + std::to_string(c.sk) + " H " +
                  std::to_string(c.hq) + ":" + std::to_string(c.hkv) + " D " + std::to_string(c.d);
  if (c.causal) s += " causal";
  if (c.wl >= 0 || c.wr >= 0) s += " window " + std::to_string(c.wl) + "," + std::to_string(c.wr);
  if (c.softcap > 0) s += " softcap";
  if (c.alibi) s += " alibi";
  if (c.layout == Layout::Bhsd) s += " bhsd";
  if (c.layout == Layout::FusedQkv) s += " fused qkv";
  if (!c.q_lens.empty()) s += " varlen";
  if (c.kernel == kaio::ops::AttentionKernel::Rows) s += " (rows kernel)";
  if (c.kernel == kaio::ops::AttentionKernel::Mma) s += " (mma kernel)";
  if (c.kernel == kaio::ops::AttentionKernel::Wgmma) s += " (wgmma kernel)";
  if (c.kernel == kaio::ops::AttentionKernel::Tuned) s += " (tuned)";
  if (c.variant) s += std::string(" (") + c.variant + ")";
  return s;
}

template <class T>
void run_case(const Case& c) {
  INFO(describe(c) << " " << test::ops::type_name<T>());
  const bool varlen = !c.q_lens.empty();
  const uint32_t B = varlen ? uint32_t(c.q_lens.size()) : c.batch, D = c.d;
  std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
  for (uint32_t b = 0; b < B && varlen; ++b) cu_q[b + 1] = cu_q[b] + c.q_lens[b], cu_k[b + 1] = cu_k[b] + c.k_lens[b];
  // Rows along the sequence axis: varlen packs the sequences into one batch entry.
  const uint32_t nb = varlen ? 1 : B, Sq = varlen ? uint32_t(cu_q[B]) : c.sq, Sk = varlen ? uint32_t(cu_k[B]) : c.sk;
  auto strides = [&](uint32_t S, uint32_t H) -> std::array<uint64_t, 3> {
    if (c.layout == Layout::Bhsd) return {uint64_t(H) * S * D, D, uint64_t(S) * D};
    return {uint64_t(S) * H * D, uint64_t(H) * D, D};
  };
  Tensor<T> q, k, v;
  if (c.layout == Layout::FusedQkv) {  // one (B, S, Hq + 2 Hkv, D) buffer, q, k and v slices of it
    const uint64_t row = uint64_t(c.hq + 2 * c.hkv) * D;
    Tensor<T> all = random_tensor<T>(nb * uint64_t(Sq) * row, Sq * row, row, D);
    q = Tensor<T>{all.host, jit::DeviceBuffer<T>(0), all.t};
    k = Tensor<T>{all.host, jit::DeviceBuffer<T>(0), all.t};
    v = Tensor<T>{all.host, jit::DeviceBuffer<T>(0), all.t};
    k.t.address += uint64_t(c.hq) * D * sizeof(T);
    v.t.address += uint64_t(c.hq + c.hkv) * D * sizeof(T);
    q.dev = std::move(all.dev);  // keeps the buffer alive
  } else {
    auto [qb, qs, qh] = strides(Sq, c.hq);
    auto [kb, ks, kh] = strides(Sk, c.hkv);
    q = random_tensor<T>(nb * uint64_t(Sq) * c.hq * D, qb, qs, qh);
    k = random_tensor<T>(nb * uint64_t(Sk) * c.hkv * D, kb, ks, kh);
    v = random_tensor<T>(nb * uint64_t(Sk) * c.hkv * D, kb, ks, kh);
  }
  auto [ob, os, oh] = strides(Sq, c.hq);
  Tensor<T> o = poisoned_tensor<T>(nb * uint64_t(Sq) * c.hq * D, ob, os, oh);
  jit::DeviceBuffer<float> lse(uint64_t(nb) * c.hq * Sq);
  lse.fill_bytes(0xFF);
  std::vector<float> slopes(c.hq);
  for (uint32_t h = 0; h < c.hq; ++h) slopes[h] = std::exp2(-8.0f * float(h + 1) / float(c.hq));
  jit::DeviceBuffer<float> slopes_dev(slopes);
  jit::DeviceBuffer<int32_t> cu_q_dev(cu_q), cu_k_dev(cu_k);

  kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = varlen ? uint32_t(*std::max_element(c.q_lens.begin(), c.q_lens.end())) : Sq,
                                  .seqlen_k = varlen ? uint32_t(*std::max_element(c.k_lens.begin(), c.k_lens.end())) : Sk,
                                  .heads_q = c.hq, .heads_kv = c.hkv, .head_dim = D};
  kaio::ops::AttentionOptions opt{.causal = c.causal, .window_left = c.wl, .window_right = c.wr, .softcap = c.softcap,
                                  .alibi_slopes = c.alibi ? slopes_dev.device_address() : 0, .lse = lse.device_address(),
                                  .kernel = c.kernel, .variant = c.variant};
  if (varlen) {
    opt.cu_seqlens_q = cu_q_dev.device_address();
    opt.cu_seqlens_k = cu_k_dev.device_address();
    opt.total_q = Sq;
    opt.total_k = Sk;
  }
  kaio::ops::attention(q.t, k.t, v.t, o.t, shape, opt);
  o.host = o.dev.to_host();
  const std::vector<float> lse_host = lse.to_host();

  auto off = [&](const kaio::ops::AttentionTensor& t, bool is_q) {
    return [&t, &cu_q, &cu_k, varlen, is_q](uint32_t b, uint32_t i, uint32_t h) {
      const uint64_t start = varlen ? uint64_t(is_q ? cu_q[b] : cu_k[b]) : 0;
      return (varlen ? 0 : b * t.batch_stride) + (start + i) * t.seq_stride + h * t.head_stride;
    };
  };
  // Offsets relative to each tensor's own host copy: the fused layout's slices add their start.
  const uint64_t k_start = c.layout == Layout::FusedQkv ? uint64_t(c.hq) * D : 0;
  const uint64_t v_start = c.layout == Layout::FusedQkv ? uint64_t(c.hq + c.hkv) * D : 0;
  auto q_off = off(q.t, true), o_off = off(o.t, true), k_raw = off(k.t, false), v_raw = off(v.t, false);
  RefProblem p{B, c.hq, c.hkv, D, 1.0 / std::sqrt(double(D)), c.wl, c.causal ? 0 : c.wr, c.softcap, c.alibi ? &slopes : nullptr,
               [&](uint32_t b) { return varlen ? uint32_t(c.q_lens[b]) : Sq; },
               [&](uint32_t b) { return varlen ? uint32_t(c.k_lens[b]) : Sk; }, q_off,
               [&](uint32_t b, uint32_t j, uint32_t h) { return k_start + k_raw(b, j, h); },
               [&](uint32_t b, uint32_t j, uint32_t h) { return v_start + v_raw(b, j, h); }};
  auto lse_index = [&](uint32_t b, uint32_t i, uint32_t h) -> uint64_t {
    if (varlen) return uint64_t(h) * Sq + cu_q[b] + i;
    return (uint64_t(b) * c.hq + h) * Sq + i;
  };
  CHECK(compare(p, q, k, v, o.host, o_off, &lse_host, lse_index) == 0);
}


}  // namespace kaio::test::attn
