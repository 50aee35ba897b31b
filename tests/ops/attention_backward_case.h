// One attention backward case (shape, options, layout, kernel or tile-table row) run on the
// device or the interpreter, gradients poisoned before each run and compared with the
// float64 reference gradient of attention_backward_reference.h; runs after the first are
// compared with it bit for bit.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/ops/attention.h"
#include "kaio/ops/attention_backward.h"
#include "../support.h"
#include "attention_backward_reference.h"
#include "attention_support.h"

namespace kaio::test::attn_bwd {

using kaio::test::attn::poisoned_tensor;
using kaio::test::attn::random_tensor;
using kaio::test::attn::Tensor;

struct Case {
  uint32_t batch = 1, sq = 7, sk = 7, hq = 2, hkv = 1, d = 64;
  bool causal = false;
  int wl = -1, wr = -1;
  float softcap = 0, scale = 0;
  bool alibi = false, bhsd = false;
  std::vector<uint32_t> q_lens, k_lens;  // varlen when set
  kaio::ops::AttentionKernel kernel = kaio::ops::AttentionKernel::Auto;
  bool deterministic = false;
  const char* variant = nullptr;  // a row of the backward's tile table by name
};

inline std::string describe(const Case& c) {
  std::string s = "B" + std::to_string(c.batch) + " Sq " + std::to_string(c.sq) + " Sk " + std::to_string(c.sk) + " H " +
                  std::to_string(c.hq) + ":" + std::to_string(c.hkv) + " D " + std::to_string(c.d);
  if (c.causal) s += " causal";
  if (c.wl >= 0 || c.wr >= 0) s += " window " + std::to_string(c.wl) + "," + std::to_string(c.wr);
  if (c.softcap > 0) s += " softcap " + std::to_string(c.softcap);
  if (c.scale > 0) s += " scale " + std::to_string(c.scale);
  if (c.alibi) s += " alibi";
  if (c.bhsd) s += " bhsd";
  if (!c.q_lens.empty()) s += " varlen";
  if (c.kernel == kaio::ops::AttentionKernel::Rows) s += " (rows kernels)";
  if (c.kernel == kaio::ops::AttentionKernel::Mma) s += " (mma kernels)";
  if (c.deterministic) s += " deterministic";
  if (c.variant) s += std::string(" (") + c.variant + ")";
  return s;
}

// The device's gradients of one case, with what the reference needs.
template <class T>
struct Run {
  Problem p;
  std::vector<double> q, k, v, dout;  // dense (rows, H, D) copies of the inputs
  std::vector<T> dq, dk, dv;          // the device's gradients, dense (rows, H, D)
};

template <class T>
Run<T> run_case(const Case& c, int runs = 1) {
  const bool varlen = !c.q_lens.empty();
  const uint32_t B = varlen ? uint32_t(c.q_lens.size()) : c.batch, D = c.d;
  Run<T> r;
  r.p.hq = c.hq, r.p.hkv = c.hkv, r.p.d = D;
  r.p.scale = c.scale > 0 ? double(c.scale) : 1.0 / std::sqrt(double(D));
  r.p.wl = c.wl, r.p.wr = c.causal ? 0 : c.wr, r.p.softcap = c.softcap;
  r.p.sq = varlen ? c.q_lens : std::vector<uint32_t>(B, c.sq);
  r.p.sk = varlen ? c.k_lens : std::vector<uint32_t>(B, c.sk);
  std::vector<int32_t> cu_q(B + 1, 0), cu_k(B + 1, 0);
  for (uint32_t b = 0; b < B; ++b) cu_q[b + 1] = cu_q[b] + int32_t(r.p.sq[b]), cu_k[b + 1] = cu_k[b] + int32_t(r.p.sk[b]);
  // Varlen packs the sequences into one batch entry along the sequence axis.
  const uint32_t nb = varlen ? 1 : B, Sq = varlen ? uint32_t(cu_q[B]) : c.sq, Sk = varlen ? uint32_t(cu_k[B]) : c.sk;
  auto strides = [&](uint32_t S, uint32_t H) -> std::array<uint64_t, 3> {
    if (c.bhsd) return {uint64_t(H) * S * D, D, uint64_t(S) * D};
    return {uint64_t(S) * H * D, uint64_t(H) * D, D};
  };
  auto [qb, qs, qh] = strides(Sq, c.hq);
  auto [kb, ks, kh] = strides(Sk, c.hkv);
  const uint64_t nq = nb * uint64_t(Sq) * c.hq * D, nk = nb * uint64_t(Sk) * c.hkv * D;
  Tensor<T> q = random_tensor<T>(nq, qb, qs, qh), k = random_tensor<T>(nk, kb, ks, kh), v = random_tensor<T>(nk, kb, ks, kh);
  Tensor<T> dout = random_tensor<T>(nq, qb, qs, qh), o = poisoned_tensor<T>(nq, qb, qs, qh);
  jit::DeviceBuffer<float> lse(uint64_t(nb) * c.hq * Sq);
  lse.fill_bytes(0xFF);
  std::vector<float> slopes(c.hq);
  for (uint32_t h = 0; h < c.hq; ++h) slopes[h] = std::exp2(-8.0f * float(h + 1) / float(c.hq));
  if (c.alibi) r.p.alibi.assign(slopes.begin(), slopes.end());
  jit::DeviceBuffer<float> slopes_dev(slopes);
  jit::DeviceBuffer<int32_t> cu_q_dev(cu_q), cu_k_dev(cu_k);

  kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = *std::max_element(r.p.sq.begin(), r.p.sq.end()),
                                  .seqlen_k = *std::max_element(r.p.sk.begin(), r.p.sk.end()), .heads_q = c.hq,
                                  .heads_kv = c.hkv, .head_dim = D};
  kaio::ops::AttentionOptions fo{.scale = c.scale, .causal = c.causal, .window_left = c.wl, .window_right = c.wr,
                                 .softcap = c.softcap, .alibi_slopes = c.alibi ? slopes_dev.device_address() : 0,
                                 .lse = lse.device_address()};
  kaio::ops::AttentionBackwardOptions bo{.scale = c.scale, .causal = c.causal, .window_left = c.wl, .window_right = c.wr,
                                         .softcap = c.softcap, .alibi_slopes = fo.alibi_slopes, .deterministic = c.deterministic,
                                         .kernel = c.kernel, .variant = c.variant};
  if (varlen) {
    fo.cu_seqlens_q = bo.cu_seqlens_q = cu_q_dev.device_address();
    fo.cu_seqlens_k = bo.cu_seqlens_k = cu_k_dev.device_address();
    fo.total_q = bo.total_q = Sq;
    fo.total_k = bo.total_k = Sk;
  }
  kaio::ops::attention(q.t, k.t, v.t, o.t, shape, fo);

  // Dense copies for the reference: entry b's row i is at (b * S + i) (non-varlen) or at
  // cu[b] + i (varlen), both equal to the reference's q_start(b) + i.
  auto dense = [&](const Tensor<T>& t, uint32_t S, uint32_t H, std::vector<double>& out) {
    out.assign(uint64_t(nb) * S * H * D, 0.0);
    for (uint32_t b = 0; b < nb; ++b)
      for (uint32_t i = 0; i < S; ++i)
        for (uint32_t h = 0; h < H; ++h)
          for (uint32_t e = 0; e < D; ++e)
            out[((uint64_t(b) * S + i) * H + h) * D + e] = t.at(b * t.t.batch_stride + i * t.t.seq_stride + h * t.t.head_stride + e);
  };
  dense(q, Sq, c.hq, r.q);
  dense(k, Sk, c.hkv, r.k);
  dense(v, Sk, c.hkv, r.v);
  dense(dout, Sq, c.hq, r.dout);
  for (int run = 0; run < runs; ++run) {
    Tensor<T> dq = poisoned_tensor<T>(nq, qb, qs, qh), dk = poisoned_tensor<T>(nk, kb, ks, kh), dv = poisoned_tensor<T>(nk, kb, ks, kh);
    kaio::ops::attention_backward(q.t, k.t, v.t, o.t, dout.t, lse.device_address(), {dq.t, dk.t, dv.t}, shape, bo);
    auto to_dense = [&](Tensor<T>& t, uint32_t S, uint32_t H) {
      t.host = t.dev.to_host();
      std::vector<T> out(uint64_t(nb) * S * H * D);
      for (uint32_t b = 0; b < nb; ++b)
        for (uint32_t i = 0; i < S; ++i)
          for (uint32_t h = 0; h < H; ++h)
            for (uint32_t e = 0; e < D; ++e)
              out[((uint64_t(b) * S + i) * H + h) * D + e] = t.host[b * t.t.batch_stride + i * t.t.seq_stride + h * t.t.head_stride + e];
      return out;
    };
    std::vector<T> gq = to_dense(dq, Sq, c.hq), gk = to_dense(dk, Sk, c.hkv), gv = to_dense(dv, Sk, c.hkv);
    if (run == 0) {
      r.dq = std::move(gq), r.dk = std::move(gk), r.dv = std::move(gv);
      continue;
    }
    INFO("run " << run << " against run 0");
    CHECK(std::memcmp(gq.data(), r.dq.data(), gq.size() * sizeof(T)) == 0);
    CHECK(std::memcmp(gk.data(), r.dk.data(), gk.size() * sizeof(T)) == 0);
    CHECK(std::memcmp(gv.data(), r.dv.data(), gv.size() * sizeof(T)) == 0);
  }
  return r;
}

// Elements of `got` off the reference by more than: the dtype's rounding of the result,
// plus, relative to the magnitudes summed into it, the f32 work (2e-6 x D, as the forward's
// tests) and 3 units of the dtype (D = rowsum(do * o) from the forward's rounded o).
template <class T>
inline size_t compare(const char* what, const std::vector<T>& got, const std::vector<double>& want, const std::vector<double>& mag,
               uint32_t d) {
  const double u = kaio::test::ops::unit<T>(), f32 = 2e-6 * d;
  size_t bad = 0;
  for (size_t n = 0; n < want.size(); ++n) {
    const double g = kaio::test::ops::as_double(got[n]);
    if (!(std::fabs(g - want[n]) <= 1e-6 + 2 * u * std::fabs(want[n]) + (f32 + 3 * u) * mag[n]) && bad++ < 4)
      UNSCOPED_INFO(what << "[" << n << "] (row " << n / d << ", e " << n % d << "): got " << g << " want " << want[n]
                         << " (magnitude " << mag[n] << ")");
  }
  return bad;
}

template <class T>
inline void check_case(const Case& c, int runs = 1) {
  INFO(describe(c) << " " << kaio::test::ops::type_name<T>());
  const Run<T> r = run_case<T>(c, runs);
  const Grads g = backward(r.p, r.q, r.k, r.v, r.dout);
  CHECK(compare("dq", r.dq, g.dq, g.dq_abs, c.d) == 0);
  CHECK(compare("dk", r.dk, g.dk, g.dk_abs, c.d) == 0);
  CHECK(compare("dv", r.dv, g.dv, g.dv_abs, c.d) == 0);
}

}  // namespace kaio::test::attn_bwd
