// ops::attention against a float64 reference, logsumexp included: odd lengths
// (Sq, Sk in 1, 7, 65, 130), head dims 64 and 128, causal (bottom-right aligned) and not,
// GQA 8:2 and MQA, sliding windows, softcap, ALiBi, (B, S, H, D), (B, H, S, D) and fused
// QKV strides, varlen with three sequences; outputs poisoned before each run. The bad
// arguments: a UsageError naming the op and the argument before any launch.
// [gpu]: a device, or KAIO_INTERPRET=1 (small shapes); [large] shapes on a device only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <regex>
#include <string>

#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/catalog.h"
#include "kaio/codegen/ptx.h"
#include "kaio/jit/device.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/ops/rows.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "attention_case.h"
#include "attention_support.h"
#include "../link_memo.h"

using namespace kaio;
using namespace kaio::test::attn;
using Catch::Matchers::Contains;


TEMPLATE_TEST_CASE("attention matches float64 at odd lengths, causal and not", "[gpu][ops][attention]", float, kaio::half,
                   kaio::bfloat16) {
  for (uint32_t sq : {1u, 7u, 65u, 130u})
    for (uint32_t sk : {1u, 7u, 65u, 130u}) {
      if (sq * sk > 130 * 65) continue;  // 130 x 130 only in the GQA case: the interpreter is slow
      for (bool causal : {false, true})
        for (auto kernel : {kaio::ops::AttentionKernel::Auto, kaio::ops::AttentionKernel::Rows}) {
          if (kernel == kaio::ops::AttentionKernel::Rows && std::is_same_v<TestType, float>) continue;  // f32: rows anyway
          run_case<TestType>(Case{.sq = sq, .sk = sk, .hq = 1, .hkv = 1, .causal = causal, .kernel = kernel});
        }
    }
}

TEMPLATE_TEST_CASE("attention: GQA, MQA, head dims, layouts", "[gpu][ops][attention]", kaio::half, kaio::bfloat16) {
  run_case<TestType>(Case{.sq = 130, .sk = 130, .hq = 8, .hkv = 2, .d = 64, .causal = true});
  run_case<TestType>(Case{.batch = 2, .sq = 7, .sk = 65, .hq = 4, .hkv = 1, .d = 128});
  run_case<TestType>(Case{.sq = 65, .sk = 7, .hq = 2, .hkv = 2, .d = 128, .causal = true, .layout = Layout::Bhsd});
  run_case<TestType>(Case{.batch = 2, .sq = 33, .sk = 33, .hq = 4, .hkv = 2, .d = 64, .causal = true, .layout = Layout::FusedQkv});
}

// The 128-row blocks (8 warps) are picked when the grid fills the GPU: an SM count of 1
// makes every shape do so.
TEMPLATE_TEST_CASE("attention: 128-row blocks", "[gpu][ops][attention]", kaio::half, kaio::bfloat16) {
  struct SmCount {
    SmCount() { kaio::ops::detail::set_sm_count(1); }
    ~SmCount() { kaio::ops::detail::set_sm_count(0); }
  } one_sm;
  run_case<TestType>(Case{.sq = 130, .sk = 65, .hq = 2, .hkv = 1, .d = 64, .causal = true});
  run_case<TestType>(Case{.sq = 65, .sk = 130, .hq = 2, .hkv = 2, .d = 128, .wl = 40, .wr = 7});
  run_case<TestType>(Case{.hq = 2, .hkv = 1, .d = 96, .causal = true, .q_lens = {129, 3}, .k_lens = {129, 70}});
}

TEST_CASE("attention: the row block is picked by shape", "[ops][attention]") {
  auto bm = [](uint32_t d, uint32_t s, uint64_t hb) { return kaio::ops::attention_pick(d, s, hb, 132)->bm; };
  CHECK(bm(128, 4096, 64) == 128);  // 32 x 64 blocks of 128 rows fill 132 SMs
  CHECK(bm(128, 1024, 16) == 64);   // 8 x 16 = 128 blocks of 128 rows do not, 16 x 16 of 64 do
  CHECK(bm(128, 1024, 17) == 128);  // 8 x 17 = 136 do
  CHECK(bm(64, 130, 2) == 64);      // nothing fills the GPU: the smaller blocks
  CHECK(bm(256, 4096, 64) == 64);   // one row for head dim 256
  CHECK(kaio::ops::attention_pick(80, 64, 1, 132) == nullptr);
}

TEST_CASE("attention: windows, softcap, ALiBi, varlen", "[gpu][ops][attention]") {
  using T = kaio::half;
  run_case<T>(Case{.sq = 65, .sk = 130, .wl = 16, .wr = 3});
  run_case<T>(Case{.sq = 65, .sk = 65, .causal = true, .wl = 20});
  run_case<T>(Case{.sq = 40, .sk = 20, .wl = 0, .wr = 0});  // early rows see no key: o = 0, lse = -inf
  run_case<T>(Case{.sq = 65, .sk = 65, .causal = true, .softcap = 2.0f});
  run_case<T>(Case{.sq = 33, .sk = 65, .hq = 4, .hkv = 2, .alibi = true});
  run_case<T>(Case{.hq = 4, .hkv = 2, .causal = true, .q_lens = {1, 40, 17}, .k_lens = {30, 40, 70}});
  run_case<kaio::bfloat16>(Case{.hq = 2, .hkv = 1, .d = 128, .wl = 8, .softcap = 5.0f, .q_lens = {7, 1, 33}, .k_lens = {7, 65, 33}});
}

TEST_CASE("attention: every head dim", "[gpu][ops][attention]") {
  for (uint32_t d : {64u, 96u, 128u, 256u}) run_case<kaio::bfloat16>(Case{.sq = 17, .sk = 40, .d = d, .causal = true});
}

TEMPLATE_TEST_CASE("attention at long sequences on a device", "[gpu][ops][attention][large]", kaio::half, kaio::bfloat16) {
  if (jit::interpret_mode()) return;
  run_case<TestType>(Case{.batch = 1, .sq = 1024, .sk = 1024, .hq = 4, .hkv = 1, .d = 128, .causal = true});
  run_case<TestType>(Case{.batch = 1, .sq = 513, .sk = 2049, .hq = 2, .hkv = 2, .d = 64, .wl = 256, .wr = 0});
  run_case<TestType>(Case{.hq = 8, .hkv = 2, .d = 128, .causal = true, .q_lens = {1000, 1, 300}, .k_lens = {1000, 513, 900}});
}

TEST_CASE("attention rejects bad arguments before launching, naming op and argument", "[gpu][ops][attention]") {
  jit::DeviceBuffer<kaio::half> buf(4096);
  jit::DeviceBuffer<float> fbuf(4096);
  const uint64_t a = buf.device_address();
  auto t = kaio::ops::bshd(a, ir::Scalar::F16, 4, 2, 64);
  const kaio::ops::AttentionShape s{.batch = 1, .seqlen_q = 4, .seqlen_k = 4, .heads_q = 2, .heads_kv = 1, .head_dim = 64};
  auto expect = [](auto f, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == "attention");
    CHECK_THAT(e.what(), Contains(text));
  };
  auto with = [&](auto edit) {
    kaio::ops::AttentionShape x = s;
    edit(x);
    return x;
  };
  expect([&] { kaio::ops::attention(t, t, t, t, with([](auto& x) { x.head_dim = 80; })); }, "head_dim 80 is not supported");
  expect([&] { kaio::ops::attention(t, t, t, t, with([](auto& x) { x.heads_q = 3, x.heads_kv = 2; })); },
         "heads_q 3 is not a multiple of heads_kv 2");
  auto f32 = kaio::ops::bshd(fbuf.device_address(), ir::Scalar::F32, 4, 2, 64);
  expect([&] { kaio::ops::attention(t, f32, t, t, s); }, "'k': k is f32, q is f16");
  auto null = t;
  null.address = 0;
  expect([&] { kaio::ops::attention(t, t, t, null, s); }, "'o': o is a null pointer");
  auto odd = t;
  odd.address += 1;
  expect([&] { kaio::ops::attention(t, t, odd, t, s); }, "'v': v is not aligned");
  expect([&] { kaio::ops::attention(t, t, t, t, s, {.window_left = -2}); }, "'window_left'");
  expect([&] { kaio::ops::attention(t, t, t, t, s, {.softcap = -1.0f}); }, "'softcap'");
  expect([&] { kaio::ops::attention(t, t, t, t, s, {.cu_seqlens_q = fbuf.device_address()}); }, "'cu_seqlens_k'");
  expect([&] { kaio::ops::attention(t, t, t, t, with([](auto& x) { x.seqlen_k = 0; })); }, "seqlen_k = 0");
  expect([&] { kaio::ops::attention(f32, f32, f32, f32, s, {.kernel = kaio::ops::AttentionKernel::Mma}); },
         "'kernel': the mma.sync kernel does not apply: it takes f16 or bf16");
  auto odd_stride = t;
  odd_stride.seq_stride = 132;
  expect([&] { kaio::ops::attention(odd_stride, t, t, t, s, {.kernel = kaio::ops::AttentionKernel::Mma}); },
         "multiples of 8 elements");
}

// Every declared attention kernel (rows, combine, mma, decode) is assembled for sm_80 and
// sm_90 through ops::catalog() by tests/codegen/test_assemble.cpp; here the mma ones for
// sm_90a as well, one dtype per variant row (the rows and combine kernels use nothing an
// arch suffix changes; the decode ones: tests/ops/test_attention_decode.cpp).
TEST_CASE("every declared attention kernel is in the catalog; the mma ones assemble for sm_90a", "[ops][attention][nvjitlink]") {
  std::vector<std::string> names;
  for (const ir::Kernel& k : kaio::ops::catalog()) names.push_back(k.name());
  size_t n = 0;
  for (jit::FamilyBase* f : {static_cast<jit::FamilyBase*>(&kaio::ops::attention_rows_family()),
                             static_cast<jit::FamilyBase*>(&kaio::ops::attention_mma_family()),
                             static_cast<jit::FamilyBase*>(&kaio::ops::attention_combine_family()),
                             static_cast<jit::FamilyBase*>(&kaio::ops::attention_decode_family())})
    for (size_t i = 0; i < f->config_count(); ++i, ++n) {
      const ir::Kernel k = f->declared_kernel(i);
      CHECK(std::find(names.begin(), names.end(), k.name()) != names.end());
      // One dtype of each variant row: f16 and bf16 differ only in the mma type (both are
      // assembled for sm_80 and sm_90 through the catalog).
      if (f != &kaio::ops::attention_mma_family() || k.name().find("_bf16_") == std::string::npos) continue;
      INFO(k.name() << " for sm_90a");
      CHECK_NOTHROW(jit::compile(k, {.arch = "sm_90a", .use_cache = false}));
    }
  CHECK(n == 64);  // rows and combine: {f16, bf16, f32} x head dims {64, 96, 128, 256}; mma: {f16, bf16} x 7 rows; decode: x 13
  // Listed by config (what kaio-precompile and kaio-cache show).
  CHECK(kaio::ops::attention_rows_family().configs()[0].str() == "attention_rows(f16, d64, 4 warps)");
}

// The full cross of lengths, masks, head sharing, head dims and kernels: on a device every
// run; in the interpreter (minutes) only with KAIO_ATTENTION_SWEEP=1.
TEMPLATE_TEST_CASE("attention sweep: every length pair, mask, head sharing, head dim and kernel", "[gpu][ops][attention][sweep]",
                   kaio::half, kaio::bfloat16) {
  if (jit::interpret_mode() && !std::getenv("KAIO_ATTENTION_SWEEP")) return;
  for (uint32_t sq : {1u, 7u, 65u, 130u})
    for (uint32_t sk : {1u, 7u, 65u, 130u})
      for (uint32_t d : {64u, 128u})
        for (auto [hq, hkv] : {std::pair{8u, 2u}, std::pair{4u, 1u}})
          for (bool causal : {false, true})
            for (auto kernel : {kaio::ops::AttentionKernel::Mma, kaio::ops::AttentionKernel::Rows})
              run_case<TestType>(Case{.sq = sq, .sk = sk, .hq = hq, .hkv = hkv, .d = d, .causal = causal, .wl = causal ? 33 : -1,
                                      .kernel = kernel});
}

namespace {
// An sm_90a attention kernel assembles without local memory: TMA loads, P V with B MN-major,
// the f32 wgmma, registers moved where the config says, no spill, no serialised wgmma, and
// (where cuobjdump is found) HGMMA of S and of P V in the SASS.
void check_wgmma_attention_kernel(const ir::Kernel& k) {
  INFO(k.name());
  CHECK(k.arch_specific());
  const std::string ptx = codegen::emit_ptx(k, {"sm_90a", 9, 0});
  CHECK_THAT(ptx, Contains("cp.async.bulk.tensor.4d"));
  CHECK_THAT(ptx, Contains("setp.ne.b32") && Contains(", 1, 1, 1;"));  // P V: B MN-major (transposing form)
  CHECK(ptx.find("k16.f32." + std::string(k.name().find("bf16") != std::string::npos ? "bf16.bf16" : "f16.f16") + " {%f") !=
        std::string::npos);
  // nvJitLink's cubin: what runs, or for a kernel that moves registers (D 128 at 128 keys:
  // setmaxnreg, which nvJitLink ignores) the fallback, which must link; that kernel runs as
  // the driver compiles its PTX, a whole program, checked here with ptxas alike.
  jit::LinkResult r = test::link_ptx(ptx, "sm_90a", k.name());
  CHECK(!r.cubin.empty());
  CHECK(k.reallocates_registers() ==
        (k.name().find("d128_n128") != std::string::npos || k.name().find("d256_n64s2") != std::string::npos ||
         k.name().find("d64_n192") != std::string::npos || k.name().find("d64_m192_n128") != std::string::npos));
  // two consumers: 168 registers a thread, 240 after the move; three: 128, then 160
  const bool three = k.name().find("_m192_") != std::string::npos;
  if (k.reallocates_registers())
    CHECK_THAT(ptx, Contains(three ? ".maxnreg 128" : ".maxnreg 168") &&
                        Contains(three ? "setmaxnreg.inc.sync.aligned.u32 160;" : "setmaxnreg.inc.sync.aligned.u32 240;"));
  if (!test::as_loaded(k, ptx, r)) return;
  const jit::Resources res = jit::parse_resources(r.info_log, three ? 512 : 384);
  INFO(res.str());
  CHECK(res.local_bytes == 0);
  CHECK(res.spill_stores == 0);
  // ptxas serialises every wgmma (a wait after each) when registers run short or the
  // kernel calls a subroutine (e.g. IEEE division): its advisory must not appear.
  CHECK(r.info_log.find("serialized") == std::string::npos);
  // SASS, where cuobjdump is found: the MMAs are HGMMA (S = Q K^T and O += P V), no spills.
  const std::string sass = test::sass_of(r.cubin);
  if (sass.empty()) return;
  // S = Q K^T at BN keys (m64nBN), O += P V over the head elements a consumer keeps (m64nD,
  // half of D where the consumers split D 256: the d256_n64s3 configs).
  std::smatch nm;
  REQUIRE(std::regex_search(k.name(), nm, std::regex(R"(_d(\d+)(?:_m\d+)?_n(\d+)s(\d))")));
  const int d = std::stoi(nm[1]), bn = std::stoi(nm[2]);
  const int o = k.name().find("d256_n64s3") != std::string::npos ? d / 2 : d;
  CHECK_THAT(sass, Contains("HGMMA.64x" + std::to_string(bn) + "x16.F32") && Contains("HGMMA.64x" + std::to_string(o) + "x16.F32"));
  CHECK(sass.find("STL") == std::string::npos);
  CHECK(sass.find("LDL") == std::string::npos);
}
}  // namespace

// The wgmma kernel (sm_90a): every declared config assembles for sm_90a without spilling,
// P V takes A from registers; on an sm_90 device the same odd shapes as above, forced onto it.
TEST_CASE("attention: the wgmma kernels assemble for sm_90a without local memory", "[ops][attention][nvjitlink]") {
  jit::FamilyBase& f = kaio::ops::attention_wgmma_family();
  // {plain, windowed, softcap and ALiBi, varlen windowed, varlen with softcap and ALiBi} x {f16, bf16} x head dims
  // {64 (overlapped schedule), 64 at 192 keys (registers moved), 128 (registers moved), 256 (D split), 256 (128 rows,
  // registers moved)}; then the persistent forms of the first three (the next test)
  REQUIRE(f.config_count() == 60 + 36);
  for (size_t i = 0; i < 60; ++i) {
    check_wgmma_attention_kernel(f.declared_kernel(i));
  }
  if (test::cuobjdump_path().empty()) WARN("cuobjdump not found (set KAIO_CUOBJDUMP): the SASS (HGMMA) is not checked");
  CHECK(f.config_names()[0] == "attention_wgmma(f16, d64, 192x128, 2 stages)");
  CHECK(kaio::ops::attention_pick(64, 4096, 64, 132, kaio::ops::AttentionEngine::Wgmma)->bm == 192);
  CHECK(kaio::ops::attention_pick(128, 4096, 64, 132, kaio::ops::AttentionEngine::Wgmma)->bn == 128);
  CHECK(kaio::ops::attention_pick(256, 4096, 64, 132, kaio::ops::AttentionEngine::Wgmma)->bm == 128);
  CHECK(kaio::ops::attention_pick(256, 128, 8, 132, kaio::ops::AttentionEngine::Wgmma)->bm == 64);  // D split: more blocks
  CHECK(f.config_names()[4] == "attention_wgmma(f16, d256, 64x64, 3 stages)");
  CHECK(kaio::ops::attention_pick(96, 4096, 64, 132, kaio::ops::AttentionEngine::Wgmma) == nullptr);  // the mma kernel
}

// The persistent form (AttentionWgmmaConfig::persistent: one block an SM taking query tiles,
// heads and batches in turn): the family holds it for every plain, windowed and softcap /
// ALiBi config, and each assembles; varlen does not take it.
TEST_CASE("attention: the wgmma kernel's persistent form assembles for sm_90a without local memory", "[ops][attention][nvjitlink]") {
  const auto& f = kaio::ops::attention_wgmma_family();
  size_t n = 0;
  for (kaio::ops::AttentionWgmmaConfig c : f.configs()) {
    if (c.varlen) {  // no persistent form
      c.persistent = true;
      CHECK_THROWS_AS(f.kernel(c), kaio::UsageError);
      continue;
    }
    if (!c.persistent) continue;
    const ir::Kernel k = f.kernel(c);
    CHECK(k.name().ends_with("_persist"));
    check_wgmma_attention_kernel(k);
    ++n;
  }
  CHECK(n == 36);
}

namespace {
bool wgmma_device() { return !jit::interpret_mode() && jit::device_info().sm == 90; }
}  // namespace

TEMPLATE_TEST_CASE("attention: the wgmma kernel at odd lengths, causal and not, GQA, layouts", "[gpu][ops][attention][wgmma]",
                   kaio::half, kaio::bfloat16) {
  if (!wgmma_device()) return;  // sm_90 only; the interpreter does not model wgmma and TMA
  using kaio::ops::AttentionKernel;
  for (uint32_t sq : {1u, 7u, 65u, 130u})
    for (uint32_t sk : {1u, 7u, 65u, 130u})
      for (uint32_t d : {64u, 128u, 256u})
        for (bool causal : {false, true}) {
          run_case<TestType>(Case{.sq = sq, .sk = sk, .hq = 8, .hkv = 2, .d = d, .causal = causal, .kernel = AttentionKernel::Wgmma});
          run_case<TestType>(Case{.batch = 2, .sq = sq, .sk = sk, .hq = 2, .hkv = 1, .d = d, .causal = causal,
                                  .layout = Layout::Bhsd, .kernel = AttentionKernel::Wgmma});
        }
  // fused QKV: one buffer of rows of q, k and v heads (Sq = Sk, or a batch's k rows would run
  // into the next batch's, which no TMA map describes)
  run_case<TestType>(Case{.batch = 2, .sq = 257, .sk = 257, .hq = 4, .hkv = 2, .d = 64, .causal = true, .layout = Layout::FusedQkv,
                          .kernel = AttentionKernel::Wgmma});
  run_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 3, .hkv = 1, .d = 128, .causal = true, .kernel = AttentionKernel::Wgmma});
  run_case<TestType>(Case{.sq = 520, .sk = 300, .hq = 1, .hkv = 1, .d = 128, .causal = true, .kernel = AttentionKernel::Wgmma});
  // Sliding windows: both sides, causal with a left window, windows narrower and wider than a
  // tile, rows that see no key (Sq > Sk with a right window), across several tiles.
  for (uint32_t d : {64u, 128u, 256u}) {
    run_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 2, .d = d, .wl = 16, .wr = 3, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.sq = 520, .sk = 520, .hq = 2, .hkv = 1, .d = d, .causal = true, .wl = 200, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.batch = 2, .sq = 330, .sk = 130, .hq = 2, .hkv = 2, .d = d, .wl = 0, .wr = 0, .layout = Layout::Bhsd,
                            .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.sq = 7, .sk = 700, .hq = 2, .hkv = 1, .d = d, .wl = 150, .wr = 70, .kernel = AttentionKernel::Wgmma});
  }
  // Softcap and ALiBi (the mods configs), alone and together, with windows, GQA and both
  // layouts, across several tiles.
  for (uint32_t d : {64u, 128u, 256u}) {
    run_case<TestType>(Case{.sq = 130, .sk = 130, .hq = 4, .hkv = 2, .d = d, .causal = true, .softcap = 2.0f, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.sq = 65, .sk = 300, .hq = 4, .hkv = 1, .d = d, .alibi = true, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.batch = 2, .sq = 300, .sk = 520, .hq = 2, .hkv = 2, .d = d, .wl = 100, .wr = 20, .softcap = 5.0f,
                            .alibi = true, .layout = Layout::Bhsd, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.sq = 7, .sk = 65, .hq = 8, .hkv = 2, .d = d, .causal = true, .softcap = 0.5f, .alibi = true,
                            .kernel = AttentionKernel::Wgmma});
  }
  // Varlen (packed sequences, the varlen configs): three sequences of unequal lengths, one of
  // a single token, Sq > Sk and Sq < Sk, causal, a window, softcap and ALiBi, GQA, (B, H, S, D).
  for (uint32_t d : {64u, 128u, 256u}) {
    run_case<TestType>(Case{.hq = 4, .hkv = 2, .d = d, .causal = true, .q_lens = {129, 3, 1}, .k_lens = {129, 70, 200},
                            .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.hq = 2, .hkv = 1, .d = d, .q_lens = {7, 300, 65}, .k_lens = {65, 130, 7}, .kernel = AttentionKernel::Wgmma});
    run_case<TestType>(Case{.hq = 8, .hkv = 2, .d = d, .wl = 30, .wr = 5, .softcap = 3.0f, .alibi = true, .layout = Layout::Bhsd,
                            .q_lens = {200, 1, 64}, .k_lens = {260, 33, 64}, .kernel = AttentionKernel::Wgmma});
  }
  // D 256 (the consumers split D) past several tiles and stages, with the logsumexp.
  run_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 2, .d = 256, .causal = true, .kernel = AttentionKernel::Wgmma});
  run_case<TestType>(Case{.batch = 2, .sq = 200, .sk = 333, .hq = 2, .hkv = 2, .d = 256, .layout = Layout::Bhsd,
                          .kernel = AttentionKernel::Wgmma});
  // D 256 at 128 rows a block (each consumer keeps all of D in the registers the producer
  // hands over), forced by name: the table takes it only where its blocks fill the device.
  const char* m128 = "fa3_d256_m128";
  for (uint32_t sq : {1u, 65u, 130u})
    for (uint32_t sk : {7u, 130u})
      for (bool causal : {false, true})
        run_case<TestType>(Case{.sq = sq, .sk = sk, .hq = 4, .hkv = 2, .d = 256, .causal = causal, .kernel = AttentionKernel::Wgmma,
                                .variant = m128});
  run_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 2, .d = 256, .causal = true, .kernel = AttentionKernel::Wgmma,
                          .variant = m128});
  run_case<TestType>(Case{.batch = 2, .sq = 330, .sk = 130, .hq = 2, .hkv = 2, .d = 256, .wl = 20, .wr = 0, .layout = Layout::Bhsd,
                          .kernel = AttentionKernel::Wgmma, .variant = m128});
  run_case<TestType>(Case{.batch = 2, .sq = 300, .sk = 520, .hq = 2, .hkv = 2, .d = 256, .wl = 100, .wr = 20, .softcap = 5.0f,
                          .alibi = true, .layout = Layout::Bhsd, .kernel = AttentionKernel::Wgmma, .variant = m128});
  run_case<TestType>(Case{.hq = 8, .hkv = 2, .d = 256, .wl = 30, .wr = 5, .softcap = 3.0f, .alibi = true,
                          .q_lens = {200, 1, 64}, .k_lens = {260, 33, 64}, .kernel = AttentionKernel::Wgmma, .variant = m128});
  run_case<TestType>(Case{.hq = 4, .hkv = 2, .d = 256, .causal = true, .q_lens = {129, 3, 1}, .k_lens = {129, 70, 200},
                          .kernel = AttentionKernel::Wgmma, .variant = m128});
  // Rows of three consumers (192 rows a block), forced by name (Auto takes them only where
  // their blocks fill the device): rows that see no key (causal, Sq > Sk), several tiles, a
  // window, softcap, varlen.
  for (const kaio::ops::AttentionVariant& row : kaio::ops::attention_variants()) {
    if (row.engine != kaio::ops::AttentionEngine::Wgmma || row.bm != 192) continue;
    INFO(row.name);
    const uint32_t d = row.head_dim;
    for (uint32_t sq : {7u, 130u})
      for (bool causal : {false, true})
        run_case<TestType>(Case{.sq = sq, .sk = 65, .hq = 8, .hkv = 2, .d = d, .causal = causal, .kernel = AttentionKernel::Wgmma,
                                .variant = row.name});
    run_case<TestType>(Case{.sq = 300, .sk = 520, .hq = 4, .hkv = 2, .d = d, .causal = true, .kernel = AttentionKernel::Wgmma,
                            .variant = row.name});
    run_case<TestType>(Case{.batch = 2, .sq = 330, .sk = 130, .hq = 2, .hkv = 2, .d = d, .wl = 20, .wr = 0, .layout = Layout::Bhsd,
                            .kernel = AttentionKernel::Wgmma, .variant = row.name});
    run_case<TestType>(Case{.sq = 130, .sk = 130, .hq = 4, .hkv = 2, .d = d, .causal = true, .softcap = 2.0f,
                            .kernel = AttentionKernel::Wgmma, .variant = row.name});
    run_case<TestType>(Case{.hq = 4, .hkv = 2, .d = d, .causal = true, .q_lens = {129, 3, 1}, .k_lens = {129, 70, 200},
                            .kernel = AttentionKernel::Wgmma, .variant = row.name});
  }
}

namespace {
using WgmmaForm = kaio::ops::detail::AttentionWgmmaForm;  // 0 the grid of query tiles, 1 persistent

// The grid of query tiles and the persistent form on the same inputs. An item's arithmetic
// is the same in both (its tile, its key walk, the same instructions in the same order), so
// they agree to the last bit but for ptxas's choice of fused multiply-adds, which can move
// an output by one rounding of its 16 bits: that is the bound (and a logsumexp within 1e-5).
// Each output poisoned first (NaN): a row the persistent form skipped shows. With two_streams,
// also calls on two streams at once (the item counters are per stream). equal_groups false:
// the persistent form's groups filled to four blocks' worth (bench/attention --filled-groups).
template <class T>
void grid_and_persistent_agree(const Case& c, bool two_streams = false, bool equal_groups = true) {
  INFO(describe(c) << " " << test::ops::type_name<T>());
  const uint32_t B = c.batch, D = c.d;
  auto strides = [&](uint32_t S, uint32_t H) -> std::array<uint64_t, 3> {
    if (c.layout == Layout::Bhsd) return {uint64_t(H) * S * D, D, uint64_t(S) * D};
    return {uint64_t(S) * H * D, uint64_t(H) * D, D};
  };
  auto [qb, qs, qh] = strides(c.sq, c.hq);
  auto [kb, ks, kh] = strides(c.sk, c.hkv);
  const uint64_t n = uint64_t(B) * c.sq * c.hq * D;
  Tensor<T> q = random_tensor<T>(n, qb, qs, qh), k = random_tensor<T>(uint64_t(B) * c.sk * c.hkv * D, kb, ks, kh),
            v = random_tensor<T>(uint64_t(B) * c.sk * c.hkv * D, kb, ks, kh);
  std::vector<float> slopes(c.hq);
  for (uint32_t h = 0; h < c.hq; ++h) slopes[h] = std::exp2(-8.0f * float(h + 1) / float(c.hq));
  jit::DeviceBuffer<float> slopes_dev(slopes);
  const kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = c.sq, .seqlen_k = c.sk, .heads_q = c.hq, .heads_kv = c.hkv, .head_dim = D};
  std::vector<T> out[2];
  std::vector<float> lse[2];
  for (int form = 0; form < 2; ++form) {
    WgmmaForm forced(form, equal_groups);
    Tensor<T> o = poisoned_tensor<T>(n, qb, qs, qh);
    jit::DeviceBuffer<float> l(uint64_t(B) * c.hq * c.sq);
    l.fill_bytes(0xFF);
    kaio::ops::attention(q.t, k.t, v.t, o.t, shape,
                         {.causal = c.causal, .window_left = c.wl, .window_right = c.wr, .softcap = c.softcap,
                          .alibi_slopes = c.alibi ? slopes_dev.device_address() : 0, .lse = l.device_address(),
                          .kernel = kaio::ops::AttentionKernel::Wgmma});
    out[form] = o.dev.to_host();
    lse[form] = l.to_host();
  }
  size_t bad = 0, differ = 0;
  const double u = test::ops::unit<T>();
  auto compare = [&](const std::vector<T>& got, const char* what) {
    for (uint64_t e = 0; e < n; ++e) {
      const double a = as_double(got[e]), g = as_double(out[0][e]);
      differ += a != g;
      if (!(std::fabs(a - g) <= 2 * u * std::fabs(g) + 1e-30) && bad++ < 4) UNSCOPED_INFO("o[" << e << "]: " << what << " " << a << " grid " << g);
    }
  };
  compare(out[1], "persistent");
  for (size_t e = 0; e < lse[0].size(); ++e) {  // -inf (a row that sees no key) equal too
    const float a = lse[1][e], g = lse[0][e];
    if (!(a == g || std::fabs(a - g) <= 1e-5 * (1 + std::fabs(g))) && bad++ < 8) UNSCOPED_INFO("lse[" << e << "]: persistent " << a << " grid " << g);
  }
  if (two_streams) {  // each stream has its own item counter: calls on two at once, three each
    WgmmaForm forced(1, equal_groups);
    jit::Stream s1, s2;
    Tensor<T> o1 = poisoned_tensor<T>(n, qb, qs, qh), o2 = poisoned_tensor<T>(n, qb, qs, qh);
    const kaio::ops::AttentionOptions opt{.causal = c.causal, .window_left = c.wl, .window_right = c.wr,
                                          .kernel = kaio::ops::AttentionKernel::Wgmma};
    for (int i = 0; i < 3; ++i) {
      kaio::ops::attention(q.t, k.t, v.t, o1.t, shape, opt, &s1);
      kaio::ops::attention(q.t, k.t, v.t, o2.t, shape, opt, &s2);
    }
    s1.synchronize();
    s2.synchronize();
    compare(o1.dev.to_host(), "stream 1");
    compare(o2.dev.to_host(), "stream 2");
  }
  UNSCOPED_INFO(differ << " outputs not bit for bit the grid's");
  CHECK(bad == 0);
}
}  // namespace

// The persistent form forced: grids of more items (query tiles x heads x batches) than SMs,
// so that each block takes several in turn, of unequal key walks where causal; items whose
// rows see no key (a right window with Sq > Sk); windows, softcap and ALiBi; both layouts.
// Against the grid of tiles on the same inputs (the grid is checked against float64 above),
// and at small shapes, fewer items than SMs, against float64.
TEMPLATE_TEST_CASE("attention: the wgmma kernel's persistent form, several items a block", "[gpu][ops][attention][wgmma]",
                   kaio::half, kaio::bfloat16) {
  if (!wgmma_device()) return;  // sm_90 only; the interpreter does not model wgmma and TMA
  using kaio::ops::AttentionKernel;
  for (uint32_t d : {64u, 128u, 256u}) {
    for (bool causal : {false, true})
      // causal: 96 (head, batch) pairs in two item groups of 48 on 132 SMs (D 256: four of 24)
      grid_and_persistent_agree<TestType>(
          Case{.batch = causal ? 6u : 2u, .sq = 1030, .sk = 1030, .hq = 16, .hkv = 4, .d = d, .causal = causal}, causal);
    // groups filled to four blocks' worth: 59 pairs (D 64: 88; D 256: 28, 28, 28) and the rest
    grid_and_persistent_agree<TestType>(Case{.batch = 6, .sq = 1030, .sk = 1030, .hq = 16, .hkv = 4, .d = d, .causal = true}, false,
                                        false);
    grid_and_persistent_agree<TestType>(
        Case{.batch = 4, .sq = 600, .sk = 1100, .hq = 12, .hkv = 3, .d = d, .causal = true, .layout = Layout::Bhsd});
    grid_and_persistent_agree<TestType>(Case{.batch = 8, .sq = 330, .sk = 130, .hq = 8, .hkv = 8, .d = d, .wl = 0, .wr = 0});
    grid_and_persistent_agree<TestType>(
        Case{.batch = 6, .sq = 300, .sk = 520, .hq = 8, .hkv = 2, .d = d, .wl = 100, .wr = 20, .softcap = 5.0f, .alibi = true});
    WgmmaForm persistent(1);
    // several items a block against float64 (Sq > Sk: rows that see no key)
    run_case<TestType>(Case{.batch = 40, .sq = 130, .sk = 65, .hq = 4, .hkv = 2, .d = d, .causal = true, .kernel = AttentionKernel::Wgmma});
    for (uint32_t sq : {1u, 7u, 65u})  // fewer items than SMs: a block each
      run_case<TestType>(Case{.sq = sq, .sk = sq + 64, .hq = 8, .hkv = 2, .d = d, .causal = true, .kernel = AttentionKernel::Wgmma});
  }
}

TEST_CASE("attention: the wgmma kernel's persistent form where the items outnumber the SMs", "[ops][attention]") {
  using kaio::ops::attention_wgmma_persistent;
  using kaio::ops::AttentionWgmmaConfig;
  const AttentionWgmmaConfig d64{.head_dim = 64, .bm = 192}, d128{.head_dim = 128}, d256{.head_dim = 256},
      varlen{.head_dim = 128, .windowed = true, .varlen = true};
  // the policy: causal with more items than SMs; never varlen
  CHECK(attention_wgmma_persistent(d64, true, 133, 132));
  CHECK(attention_wgmma_persistent(d128, true, 133, 132));
  CHECK(attention_wgmma_persistent(d256, true, 133, 132));
  CHECK_FALSE(attention_wgmma_persistent(d128, true, 132, 132));
  CHECK_FALSE(attention_wgmma_persistent(d128, false, 1000, 132));
  CHECK_FALSE(attention_wgmma_persistent(d256, false, 1000, 132));
  CHECK_FALSE(attention_wgmma_persistent(varlen, true, 1000, 132));
  // forced either way (varlen never)
  kaio::ops::detail::set_attention_wgmma_persistent(1);
  CHECK(attention_wgmma_persistent(d256, false, 1, 132));
  CHECK_FALSE(attention_wgmma_persistent(varlen, true, 1000, 132));
  kaio::ops::detail::set_attention_wgmma_persistent(0);
  CHECK_FALSE(attention_wgmma_persistent(d128, true, 1000, 132));
  kaio::ops::detail::set_attention_wgmma_persistent(-1);
  CHECK(attention_wgmma_persistent(d128, true, 1000, 132));
  // Its items' groups: one (head, batch) pair where every walk is as long; else about four
  // blocks' worth of items, within the pairs and with the group's K and V in half the L2, in
  // groups of equal size.
  using kaio::ops::detail::attention_item_group;
  const uint64_t mb = 1 << 20;
  CHECK(attention_item_group(16, 32, 132, 2 * mb, 50 * mb, false) == 1);
  CHECK(attention_item_group(32, 64, 132, mb / 8, 50 * mb, true) == 16);  // ceil(4 x 132 / 32) = 17 makes 4 groups: 16 each
  CHECK(attention_item_group(16, 32, 132, 2 * mb, 50 * mb, true) == 11);  // 33 by the blocks, 12 by the L2: 3 groups
  CHECK(attention_item_group(16, 32, 132, 2 * mb, 60 * mb, true) == 11);  // 15 by the H200's L2: 11, 11 and 10, not 15, 15, 2
  CHECK(attention_item_group(128, 2, 132, mb, 50 * mb, true) == 2);       // all the pairs there are
  CHECK(attention_item_group(128, 32, 132, 64 * mb, 50 * mb, true) == 1);
  // filled to four blocks' worth (the groups measured before), forced for this thread
  {
    const kaio::ops::detail::AttentionWgmmaForm filled(-1, false);
    CHECK(attention_item_group(16, 32, 132, 2 * mb, 60 * mb, true) == 15);
    CHECK(attention_item_group(32, 64, 132, mb / 8, 50 * mb, true) == 17);
    CHECK(attention_item_group(16, 32, 132, 2 * mb, 50 * mb, true) == 12);
    CHECK(attention_item_group(16, 32, 132, 2 * mb, 60 * mb, false) == 1);
  }
  CHECK(attention_item_group(16, 32, 132, 2 * mb, 60 * mb, true) == 11);  // the default again after the scope
}

// Too long for the float64 reference in full: 64 sampled rows against it, every row
// against the mma kernel on the same inputs (itself checked against float64 above).
TEST_CASE("attention: the wgmma kernel at B4 H16 S4096 D128", "[gpu][ops][attention][wgmma][large]") {
  if (!wgmma_device()) return;
  using T = kaio::bfloat16;
  const uint32_t B = 4, H = 16, S = 4096, D = 128;
  const uint64_t n = uint64_t(B) * S * H * D;
  Tensor<T> q = random_tensor<T>(n, uint64_t(S) * H * D, H * D, D), k = random_tensor<T>(n, uint64_t(S) * H * D, H * D, D),
            v = random_tensor<T>(n, uint64_t(S) * H * D, H * D, D);
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "full"));
    const kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = S, .seqlen_k = S, .heads_q = H, .heads_kv = H, .head_dim = D};
    std::vector<T> out[2];
    std::vector<float> lse[2];
    const kaio::ops::AttentionKernel kernels[2] = {kaio::ops::AttentionKernel::Wgmma, kaio::ops::AttentionKernel::Mma};
    for (int r = 0; r < 2; ++r) {
      Tensor<T> o = poisoned_tensor<T>(n, q.t.batch_stride, q.t.seq_stride, q.t.head_stride);
      jit::DeviceBuffer<float> l(uint64_t(B) * H * S);
      l.fill_bytes(0xFF);
      kaio::ops::attention(q.t, k.t, v.t, o.t, shape, {.causal = causal, .lse = l.device_address(), .kernel = kernels[r]});
      out[r] = o.dev.to_host();
      lse[r] = l.to_host();
    }
    size_t bad = 0;
    const double u = test::ops::unit<T>();
    for (uint64_t e = 0; e < n; ++e) {
      const double a = as_double(out[0][e]), b = as_double(out[1][e]);
      if (!(std::fabs(a - b) <= u * (2 * std::fabs(b) + 1.2)) && bad++ < 4) UNSCOPED_INFO("o[" << e << "]: wgmma " << a << " mma " << b);
    }
    for (size_t e = 0; e < lse[0].size(); ++e)
      if (!(std::fabs(lse[0][e] - lse[1][e]) <= 1e-3 * (1 + std::fabs(lse[1][e]))) && bad++ < 8)
        UNSCOPED_INFO("lse[" << e << "]: wgmma " << lse[0][e] << " mma " << lse[1][e]);
    CHECK(bad == 0);
    // Sampled rows against float64.
    auto off = [&](uint32_t b, uint32_t i, uint32_t h) { return uint64_t(b) * S * H * D + uint64_t(i) * H * D + uint64_t(h) * D; };
    const RefProblem p{B, H, H, D, 1.0 / std::sqrt(double(D)), -1, causal ? 0 : -1, 0.0, nullptr, [&](uint32_t) { return S; },
                       [&](uint32_t) { return S; }, off, off, off};
    std::vector<double> ro, rabs;
    double rl = 0;
    size_t wrong = 0;
    for (uint32_t t = 0; t < 64; ++t) {
      const uint32_t b = t % B, h = (t * 7) % H, i = t < 4 ? t : (t * 2654435761u) % S;
      reference_row(p, q, k, v, b, i, h, ro, rabs, rl);
      for (uint32_t e = 0; e < D; ++e) {
        const double got = as_double(out[0][off(b, i, h) + e]);
        if (!(std::fabs(got - ro[e]) <= 2e-6 * D + 2 * u * std::fabs(ro[e]) + u * rabs[e]) && wrong++ < 4)
          UNSCOPED_INFO("row b " << b << " i " << i << " h " << h << " e " << e << ": got " << got << " want " << ro[e]);
      }
      const double gl = lse[0][(uint64_t(b) * H + h) * S + i];
      if (!(std::fabs(gl - rl) <= 2e-6 * D * (1 + std::fabs(rl))) && wrong++ < 8) UNSCOPED_INFO("lse row " << i << ": " << gl << " want " << rl);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("attention: what the wgmma kernel refuses goes to the mma kernel", "[gpu][ops][attention][wgmma]") {
  if (!wgmma_device()) return;
  using T = kaio::half;
  // Auto takes the mma kernel for these (the wgmma kernel would refuse them), and is right.
  run_case<T>(Case{.sq = 40, .sk = 40, .hq = 2, .hkv = 1, .d = 96, .causal = true});
  // ... and naming the wgmma kernel for them is a UsageError that says why.
  kaio::ops::AttentionShape s{.batch = 1, .seqlen_q = 8, .seqlen_k = 8, .heads_q = 1, .heads_kv = 1, .head_dim = 64};
  jit::DeviceBuffer<T> buf(8 * 64);
  const kaio::ops::AttentionTensor t = kaio::ops::bshd(buf.device_address(), ir::Scalar::F16, 8, 1, 64);
  jit::DeviceBuffer<int32_t> cu(std::vector<int32_t>{0, 8});
  CHECK_THROWS_WITH(kaio::ops::attention(t, t, t, t, s, {.cu_seqlens_q = cu.device_address(), .cu_seqlens_k = cu.device_address(),
                                                         .kernel = kaio::ops::AttentionKernel::Wgmma}),
                    Contains("wgmma kernel does not apply") && Contains("varlen needs total_q and total_k"));
}
