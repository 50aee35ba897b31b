// ops::attention_backward against a float64 reference gradient (S, P, dP, dS recomputed in
// float64): odd lengths (Sq, Sk in 1, 7, 65), head dims 64 and 128, causal (bottom-right
// aligned) and not, GQA 8:2, windows, softcap, ALiBi, (B, S, H, D) and (B, H, S, D) strides,
// varlen with three sequences; gradients poisoned before each run; the deterministic mode
// bit for bit across two runs. The reference itself is checked against finite differences
// of the float64 forward. Bad arguments: a UsageError naming the op and the argument.
// [gpu]: a device, or KAIO_INTERPRET=1 (small shapes); [large] shapes on a device only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kaio/jit/device.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/catalog.h"
#include "../support.h"
#include "attention_backward_case.h"

using namespace kaio;
using namespace kaio::test::attn_bwd;
using Catch::Matchers::Contains;
namespace ref = kaio::test::attn_bwd;

// The reference gradient against central differences of the float64 loss sum(do * o), on
// a tiny case with every modifier (GQA 2:1, a causal window, softcap, ALiBi, two entries of
// different lengths): every element of q, k and v perturbed.
TEST_CASE("attention backward reference matches finite differences", "[ops][attention]") {
  ref::Problem p{.hq = 2, .hkv = 1, .d = 4, .scale = 0.9, .wl = 2, .wr = 0, .softcap = 0.7, .alibi = {0.3, 0.1}, .sq = {3, 2},
                 .sk = {5, 2}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  auto fill = [&](size_t n) {
    std::vector<double> x(n);
    for (double& y : x) y = u(rng);
    return x;
  };
  std::vector<double> q = fill(uint64_t(p.rows_q()) * p.hq * p.d), k = fill(uint64_t(p.rows_k()) * p.hkv * p.d);
  std::vector<double> v = fill(k.size()), dout = fill(q.size());
  const ref::Grads g = ref::backward(p, q, k, v, dout);
  const double h = 1e-6;
  auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* what) {
    double worst = 0, largest = 0;
    for (size_t n = 0; n < x.size(); ++n) {
      const double keep = x[n];
      x[n] = keep + h;
      const double up = ref::loss(p, q, k, v, dout);
      x[n] = keep - h;
      const double down = ref::loss(p, q, k, v, dout);
      x[n] = keep;
      worst = std::max(worst, std::fabs((up - down) / (2 * h) - grad[n]));
      largest = std::max(largest, std::fabs(grad[n]));
    }
    INFO(what << ": largest gradient " << largest << ", worst difference " << worst);
    CHECK(largest > 0.05);  // the case has gradients to compare
    CHECK(worst < 1e-7);
  };
  check(q, g.dq, "dq");
  check(k, g.dk, "dk");
  check(v, g.dv, "dv");
}

TEMPLATE_TEST_CASE("attention backward matches float64 at odd lengths, causal and not", "[gpu][ops][attention]", float,
                   kaio::half, kaio::bfloat16) {
  for (uint32_t sq : {1u, 7u, 65u})
    for (uint32_t sk : {1u, 7u, 65u})
      for (bool causal : {false, true})
        for (auto kernel : {kaio::ops::AttentionKernel::Mma, kaio::ops::AttentionKernel::Rows}) {
          if (kernel == kaio::ops::AttentionKernel::Mma && std::is_same_v<TestType, float>) continue;  // f32: rows only
          check_case<TestType>(Case{.sq = sq, .sk = sk, .hq = 1, .hkv = 1, .causal = causal, .kernel = kernel});
        }
}

// Each case on the tensor-core kernels and the rows kernels.
TEMPLATE_TEST_CASE("attention backward: GQA, head dims, layouts, modifiers, varlen", "[gpu][ops][attention]", kaio::half,
                   kaio::bfloat16) {
  using K = kaio::ops::AttentionKernel;
  for (K kernel : {K::Mma, K::Rows}) {
    auto with = [&](Case c) {
      c.kernel = kernel;
      return c;
    };
    check_case<TestType>(with({.sq = 65, .sk = 65, .hq = 8, .hkv = 2, .d = 64, .causal = true}));
    check_case<TestType>(with({.batch = 2, .sq = 7, .sk = 65, .hq = 4, .hkv = 1, .d = 128, .bhsd = true}));
    check_case<TestType>(with({.sq = 65, .sk = 7, .hq = 2, .hkv = 2, .d = 128, .causal = true}));  // early rows see no key
    check_case<TestType>(with({.sq = 65, .sk = 65, .d = 64, .wl = 16, .wr = 3}));
    check_case<TestType>(with({.sq = 33, .sk = 65, .hq = 4, .hkv = 2, .d = 64, .causal = true, .softcap = 0.3f, .scale = 0.5f}));
    check_case<TestType>(with({.sq = 33, .sk = 65, .hq = 4, .hkv = 2, .d = 64, .alibi = true}));
    check_case<TestType>(with({.hq = 4, .hkv = 2, .d = 64, .causal = true, .q_lens = {1, 40, 17}, .k_lens = {30, 40, 65}}));
  }
}

// Head dims 64, 96, 128 on both tensor-core paths; 256 runs on the rows kernels.
TEST_CASE("attention backward: every head dim", "[gpu][ops][attention]") {
  for (uint32_t d : {64u, 96u, 128u, 256u})
    for (bool det : {false, true}) check_case<kaio::bfloat16>(Case{.sq = 17, .sk = 40, .d = d, .causal = true, .deterministic = det});
}

TEST_CASE("attention backward: deterministic gradients are bit-identical across runs", "[gpu][ops][attention]") {
  check_case<kaio::half>(Case{.sq = 65, .sk = 65, .hq = 8, .hkv = 2, .d = 64, .causal = true, .deterministic = true}, 2);
  check_case<kaio::bfloat16>(
      Case{.hq = 4, .hkv = 1, .d = 128, .softcap = 0.5f, .q_lens = {7, 65, 1}, .k_lens = {65, 7, 1}, .deterministic = true}, 2);
}

namespace {
bool wgmma_device() { return !jit::interpret_mode() && jit::device_info().sm == 90; }
}  // namespace

// The Hopper kernels: lengths across the 64-row tiles' edges, causal and not, GQA 8:2 and MQA,
// (B, H, S, D) strides, Sq > Sk (early rows see no key), several tiles and stages, windows,
// ALiBi and softcap.
TEMPLATE_TEST_CASE("attention backward: the wgmma kernels at odd lengths, causal and not, GQA, layouts",
                   "[gpu][ops][attention][wgmma]", kaio::half, kaio::bfloat16) {
  if (!wgmma_device()) return;  // sm_90 only; the interpreter does not model wgmma and TMA
  const auto W = kaio::ops::AttentionKernel::Wgmma;
  for (uint32_t sq : {1u, 7u, 65u, 130u})
    for (uint32_t sk : {1u, 7u, 65u, 130u})
      for (uint32_t d : {64u, 128u})
        for (bool causal : {false, true}) check_case<TestType>(Case{.sq = sq, .sk = sk, .hq = 8, .hkv = 2, .d = d, .causal = causal, .kernel = W});
  check_case<TestType>(Case{.batch = 2, .sq = 130, .sk = 65, .hq = 2, .hkv = 1, .d = 128, .causal = true, .bhsd = true, .kernel = W});
  check_case<TestType>(Case{.batch = 2, .sq = 65, .sk = 200, .hq = 4, .hkv = 4, .d = 64, .scale = 0.3f, .bhsd = true, .kernel = W});
  check_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 1, .d = 128, .causal = true, .kernel = W}, 2);  // bit for bit
  check_case<TestType>(Case{.sq = 520, .sk = 300, .hq = 2, .hkv = 2, .d = 64, .causal = true, .kernel = W});
  // Windows (both sides, and causal with a left window) and ALiBi, across several tiles.
  check_case<TestType>(Case{.sq = 130, .sk = 130, .hq = 4, .hkv = 2, .d = 64, .wl = 16, .wr = 3, .kernel = W});
  check_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 2, .d = 128, .causal = true, .wl = 100, .kernel = W});
  check_case<TestType>(Case{.sq = 65, .sk = 130, .hq = 4, .hkv = 2, .d = 128, .alibi = true, .kernel = W});
  check_case<TestType>(Case{.sq = 130, .sk = 65, .hq = 8, .hkv = 2, .d = 64, .causal = true, .alibi = true, .kernel = W});
  check_case<TestType>(Case{.sq = 200, .sk = 200, .hq = 2, .hkv = 1, .d = 128, .wl = 64, .wr = 0, .alibi = true, .kernel = W}, 2);
  // Varlen (the varlen configs): three sequences of unequal lengths (one of a single token),
  // causal and not, a window with ALiBi, GQA, (B, H, S, D), bit for bit.
  for (uint32_t d : {64u, 128u}) {
    check_case<TestType>(Case{.hq = 4, .hkv = 2, .d = d, .causal = true, .q_lens = {129, 3, 1}, .k_lens = {129, 70, 200}, .kernel = W});
    check_case<TestType>(Case{.hq = 2, .hkv = 1, .d = d, .q_lens = {7, 300, 65}, .k_lens = {65, 130, 7}, .kernel = W});
    check_case<TestType>(Case{.hq = 8, .hkv = 2, .d = d, .wl = 30, .wr = 5, .alibi = true, .bhsd = true, .q_lens = {200, 1, 64},
                              .k_lens = {260, 33, 64}, .kernel = W}, 2);
  }
  // Softcap (the softcap configs): alone, with a window and ALiBi, GQA, (B, H, S, D), a scale.
  for (uint32_t d : {64u, 128u}) {
    check_case<TestType>(Case{.sq = 130, .sk = 130, .hq = 4, .hkv = 2, .d = d, .causal = true, .softcap = 0.5f, .kernel = W});
    check_case<TestType>(Case{.sq = 65, .sk = 200, .hq = 8, .hkv = 2, .d = d, .softcap = 2.0f, .kernel = W});
    check_case<TestType>(Case{.batch = 2, .sq = 300, .sk = 520, .hq = 2, .hkv = 1, .d = d, .wl = 100, .wr = 20, .softcap = 5.0f,
                              .scale = 0.3f, .alibi = true, .bhsd = true, .kernel = W}, 2);  // bit for bit
  }
}

TEMPLATE_TEST_CASE("attention backward at long sequences on a device", "[gpu][ops][attention][large]", kaio::half,
                   kaio::bfloat16) {
  if (jit::interpret_mode()) return;
  check_case<TestType>(Case{.sq = 1024, .sk = 1024, .hq = 4, .hkv = 1, .d = 128, .causal = true});
  check_case<TestType>(Case{.sq = 513, .sk = 1031, .hq = 2, .hkv = 2, .d = 64, .wl = 256, .wr = 0, .deterministic = true}, 2);
  check_case<TestType>(Case{.hq = 8, .hkv = 2, .d = 128, .causal = true, .q_lens = {1000, 1, 300}, .k_lens = {1000, 513, 900}});
}

// B4 H16 S4096 D128 on a device: the deterministic mode twice and the default once, all
// three bit for bit (the default sums in a fixed order too), and the gradients on two
// (batch, head) slices against the float64 reference (a
// slice of MHA is a problem of its own: its dk and dv come from its query head alone).
template <class T>
void check_large(uint32_t B, uint32_t H, uint32_t S, uint32_t D, bool causal) {
  INFO("B" << B << " H" << H << " S" << S << " D" << D << (causal ? " causal " : " ") << kaio::test::ops::type_name<T>());
  const uint64_t n = uint64_t(B) * S * H * D;
  Tensor<T> q = random_tensor<T>(n, uint64_t(S) * H * D, uint64_t(H) * D, D), k = random_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D);
  Tensor<T> v = random_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D), dout = random_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D);
  Tensor<T> o = poisoned_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D);
  jit::DeviceBuffer<float> lse(uint64_t(B) * H * S);
  const kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = S, .seqlen_k = S, .heads_q = H, .heads_kv = H, .head_dim = D};
  kaio::ops::attention(q.t, k.t, v.t, o.t, shape, {.causal = causal, .lse = lse.device_address()});
  std::vector<T> grads[3][3];  // deterministic, deterministic again, default
  for (int run = 0; run < 3; ++run) {
    Tensor<T> dq = poisoned_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D), dk = poisoned_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D);
    Tensor<T> dv = poisoned_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, D);
    kaio::ops::attention_backward(q.t, k.t, v.t, o.t, dout.t, lse.device_address(), {dq.t, dk.t, dv.t}, shape,
                                  {.causal = causal, .deterministic = run < 2});
    grads[run][0] = dq.dev.to_host(), grads[run][1] = dk.dev.to_host(), grads[run][2] = dv.dev.to_host();
  }
  for (int g = 0; g < 3; ++g) {
    CHECK(std::memcmp(grads[0][g].data(), grads[1][g].data(), n * sizeof(T)) == 0);
    CHECK(std::memcmp(grads[0][g].data(), grads[2][g].data(), n * sizeof(T)) == 0);
  }
  for (auto [b, h] : {std::pair{0u, 0u}, std::pair{B - 1, H - 1}}) {
    INFO("slice b " << b << " h " << h);
    ref::Problem p{.hq = 1, .hkv = 1, .d = D, .scale = 1.0 / std::sqrt(double(D)), .wr = causal ? 0 : -1, .sq = {S}, .sk = {S}};
    auto slice = [&](const std::vector<T>& x) {
      std::vector<double> out(uint64_t(S) * D);
      for (uint32_t i = 0; i < S; ++i)
        for (uint32_t e = 0; e < D; ++e) out[uint64_t(i) * D + e] = kaio::test::ops::as_double(x[((uint64_t(b) * S + i) * H + h) * D + e]);
      return out;
    };
    auto slice_t = [&](const std::vector<T>& x) {
      std::vector<T> out(uint64_t(S) * D);
      for (uint32_t i = 0; i < S; ++i)
        for (uint32_t e = 0; e < D; ++e) out[uint64_t(i) * D + e] = x[((uint64_t(b) * S + i) * H + h) * D + e];
      return out;
    };
    const ref::Grads r = ref::backward(p, slice(q.host), slice(k.host), slice(v.host), slice(dout.host));
    CHECK(compare("dq", slice_t(grads[0][0]), r.dq, r.dq_abs, D) == 0);
    CHECK(compare("dk", slice_t(grads[0][1]), r.dk, r.dk_abs, D) == 0);
    CHECK(compare("dv", slice_t(grads[0][2]), r.dv, r.dv_abs, D) == 0);
  }
}

TEST_CASE("attention backward at B4 H16 S4096 D128 on a device: deterministic bit for bit, slices against float64",
          "[gpu][ops][attention][large]") {
  if (jit::interpret_mode()) return;
  check_large<kaio::bfloat16>(4, 16, 4096, 128, false);
  check_large<kaio::half>(4, 16, 4096, 128, true);
}

TEST_CASE("attention_backward rejects bad arguments before launching, naming op and argument", "[gpu][ops][attention]") {
  jit::DeviceBuffer<kaio::half> buf(4096);
  jit::DeviceBuffer<float> fbuf(4096);
  const uint64_t lse = fbuf.device_address();
  auto t = kaio::ops::bshd(buf.device_address(), ir::Scalar::F16, 4, 2, 64);
  const kaio::ops::AttentionGradients g{t, t, t};
  const kaio::ops::AttentionShape s{.batch = 1, .seqlen_q = 4, .seqlen_k = 4, .heads_q = 2, .heads_kv = 1, .head_dim = 64};
  auto expect = [](auto f, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == "attention_backward");
    CHECK_THAT(e.what(), Contains(text));
  };
  auto with = [&](auto edit) {
    kaio::ops::AttentionShape x = s;
    edit(x);
    return x;
  };
  namespace o = kaio::ops;
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, with([](auto& x) { x.head_dim = 80; })); }, "head_dim 80 is not supported");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, with([](auto& x) { x.heads_q = 3, x.heads_kv = 2; })); },
         "heads_q 3 is not a multiple of heads_kv 2");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, with([](auto& x) { x.seqlen_k = 0; })); }, "'seqlen_k'");
  auto f32 = kaio::ops::bshd(fbuf.device_address(), ir::Scalar::F32, 4, 2, 64);
  expect([&] { o::attention_backward(t, t, t, t, f32, lse, g, s); }, "'dout': dout is f32, q is f16");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, {t, f32, t}, s); }, "'dk': dk is f32");
  auto null = t;
  null.address = 0;
  expect([&] { o::attention_backward(t, t, t, t, t, lse, {t, t, null}, s); }, "'dv': dv is a null pointer");
  expect([&] { o::attention_backward(t, t, t, null, t, lse, g, s); }, "'o': o is a null pointer");
  expect([&] { o::attention_backward(t, t, t, t, t, 0, g, s); }, "'lse': lse is a null pointer");
  expect([&] { o::attention_backward(t, t, t, t, t, lse + 2, g, s); }, "'lse': lse is not aligned");
  auto odd = t;
  odd.address += 1;
  expect([&] { o::attention_backward(t, t, odd, t, t, lse, g, s); }, "'v': v is not aligned");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, s, {.window_right = -3}); }, "'window_right'");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, s, {.softcap = -1.0f}); }, "'softcap'");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, s, {.cu_seqlens_k = lse}); }, "'cu_seqlens_q'");
  expect([&] { o::attention_backward(t, t, t, t, t, lse, g, s, {.cu_seqlens_q = lse, .cu_seqlens_k = lse}); }, "'total_q'");
  const auto mma = kaio::ops::AttentionKernel::Mma;
  expect([&] { o::attention_backward(f32, f32, f32, f32, f32, lse, {f32, f32, f32}, s, {.kernel = mma}); },
         "'kernel': the mma.sync kernels do not apply: it takes f16 or bf16");
  auto d256 = kaio::ops::bshd(buf.device_address(), ir::Scalar::F16, 1, 2, 256);
  expect([&] { o::attention_backward(d256, d256, d256, d256, d256, lse, {d256, d256, d256}, with([](auto& x) { x.head_dim = 256, x.seqlen_q = x.seqlen_k = 1; }), {.kernel = mma}); },
         "no tile shape for head_dim 256");
  // Varlen runs on the mma.sync kernels (as does everything off an sm_90 device): asking for
  // the wgmma kernels then is an error that says why.
  expect([&] {
    o::attention_backward(t, t, t, t, t, lse, g, s,
                          {.cu_seqlens_q = lse, .cu_seqlens_k = lse, .total_q = 4, .kernel = kaio::ops::AttentionKernel::Wgmma});
  }, "'kernel': the wgmma kernels do not apply: ");
  auto odd_stride = t;
  odd_stride.seq_stride = 132;
  expect([&] { o::attention_backward(t, t, t, t, odd_stride, lse, g, s, {.kernel = mma}); }, "multiples of 8 elements");
}

// Every declared backward kernel is in the catalog (so kaio-precompile and the sm_80 / sm_90
// assembly test of tests/codegen see them); the f16 d128 ones of each part also assemble for
// sm_90a (f16 and bf16 differ only in the mma type, the head dims only in trip counts; the
// sm_90a compiles of the big tensor-core kernels take seconds each).
TEST_CASE("every declared attention backward kernel is in the catalog and assembles for sm_90a", "[ops][attention][nvjitlink]") {
  std::vector<std::string> names;
  for (const ir::Kernel& k : kaio::ops::catalog()) names.push_back(k.name());
  auto& rows = kaio::ops::attention_backward_rows_family();
  auto& mma = kaio::ops::attention_backward_mma_family();
  auto& wgmma = kaio::ops::attention_backward_wgmma_family();
  CHECK(rows.config_count() == 36);  // {f16, bf16, f32} x {64, 96, 128, 256} x {dot, dq, dkv}
  CHECK(mma.config_count() == 24);    // {f16, bf16} x the six mma rows {d64, d96, d128} x {2, 3 stages} x {dq, dkv}
  // {f16, bf16} x (d64: {2, 3, 4 stages} x {dq, dkv}; d128: dq 1 or 2, dkv 2), each also with softcap (dq d128: 2
  // stages) and varlen
  CHECK(wgmma.config_count() == 52);
  for (jit::FamilyBase* f : {static_cast<jit::FamilyBase*>(&rows), static_cast<jit::FamilyBase*>(&mma),
                             static_cast<jit::FamilyBase*>(&wgmma)})
    for (size_t i = 0; i < f->config_count(); ++i) {
      const ir::Kernel k = f->declared_kernel(i);
      CHECK(std::find(names.begin(), names.end(), k.name()) != names.end());
      if (k.name().find("_f16_") == std::string::npos || k.name().find("_d128_") == std::string::npos) continue;
      INFO(k.name() << " for sm_90a");
      CHECK_NOTHROW(jit::compile(k, {.arch = "sm_90a", .use_cache = false}));
    }
  CHECK(rows.configs()[1].str() == "attention_bwd_rows(f16, d64, dq, 4 warps)");
  CHECK(mma.configs()[1].str() == "attention_bwd_mma(f16, d64, dkv, 64x64, 2 stages)");
  const std::vector<std::string> wn = wgmma.config_names();
  for (const char* n : {"attention_bwd_wgmma(f16, d128, dkv, 2 stages)", "attention_bwd_wgmma(f16, d128, dkv, 2 stages, softcap)",
                        "attention_bwd_wgmma(f16, d128, dq, 2 stages, softcap)", "attention_bwd_wgmma(bf16, d64, dq, 3 stages, varlen)"})
    CHECK(std::find(wn.begin(), wn.end(), n) != wn.end());
}

// The full cross of lengths (tile edges included), masks, head sharing, head dims and paths:
// on a device every run; in the interpreter (minutes) only with KAIO_ATTENTION_SWEEP=1.
TEMPLATE_TEST_CASE("attention backward sweep: every length pair, mask, head sharing, head dim and path",
                   "[gpu][ops][attention][sweep]", kaio::half, kaio::bfloat16) {
  if (jit::interpret_mode() && !std::getenv("KAIO_ATTENTION_SWEEP")) return;
  using K = kaio::ops::AttentionKernel;
  for (uint32_t sq : {1u, 7u, 65u, 130u})
    for (uint32_t sk : {1u, 7u, 65u, 130u})
      for (uint32_t d : {64u, 96u, 128u})
        for (auto [hq, hkv] : {std::pair{8u, 2u}, std::pair{4u, 1u}})
          for (bool causal : {false, true})
            for (K kernel : {K::Mma, K::Rows})
              check_case<TestType>(Case{.sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d, .causal = causal, .wl = causal ? 33 : -1,
                                        .softcap = sq == sk ? 0.5f : 0.0f, .kernel = kernel});
}
