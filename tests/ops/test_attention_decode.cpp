// ops::attention_decode against a float64 reference, logsumexp included: cache lengths 1,
// 17 and 300 in one batch, 1 and 4 new tokens, GQA 8:2, contiguous and paged caches (pages
// of 16 in a shuffled pool, unused block-table entries -1 so that a stray read faults), no
// split, forced splits (the combine kernel) and the automatic choice. The bad arguments,
// and the debug validation of the device arrays. The tensor-core kernel forced at every
// shape it takes (rows of 1, 2 and 4 m16 tiles, pages of 16, 32 and 128, head dims 96,
// 128, 256, every score modifier), its assembly and SASS. [large]: caches of 1000 and 32768
// tokens on a device, contiguous and paged (16, 64, 256), through the tensor-core kernel.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "../ir/mma_kernels.h"
#include "../support.h"
#include "attention_support.h"
#include "../link_memo.h"

using namespace kaio;
using namespace kaio::test::attn;
using Catch::Matchers::Contains;

namespace {

struct DecodeCase {
  std::vector<int32_t> lens;
  uint32_t nq = 1, hq = 8, hkv = 2, d = 64;
  uint32_t page = 0;    // 0: contiguous
  uint32_t splits = 0;  // 0: automatic
  int wl = -1;
  float softcap = 0;
  kaio::ops::AttentionKernel kernel = kaio::ops::AttentionKernel::Auto;
  bool alibi = false;
  // Pages past the ones in use: 0 makes the pool end where the K and V allocations end, so
  // that a copy past a page's end (zero bytes or not) faults on a device.
  uint32_t spare_pages = 2;
};

template <class T>
void run_decode(const DecodeCase& c) {
  const uint32_t B = uint32_t(c.lens.size()), D = c.d;
  const uint32_t max_len = uint32_t(*std::max_element(c.lens.begin(), c.lens.end()));
  INFO("lens " << c.lens.size() << " max " << max_len << " nq " << c.nq << " H " << c.hq << ":" << c.hkv << " D " << D
               << " page " << c.page << " splits " << c.splits << " window " << c.wl << " softcap " << c.softcap << " kernel "
               << int(c.kernel) << " alibi " << c.alibi);
  const uint64_t tok = uint64_t(c.hkv) * D;  // elements per cached token
  kaio::ops::KvCache cache;
  std::vector<int32_t> table;
  uint32_t pool = 0, cap = max_len + 3;
  if (c.page) {
    cache.max_pages = (max_len + c.page - 1) / c.page;
    for (int32_t l : c.lens) pool += (uint32_t(l) + c.page - 1) / c.page;
    pool += c.spare_pages;  // pages nobody uses
    std::vector<int32_t> order(pool);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), kaio::test::ops::rng());
    table.assign(size_t(B) * cache.max_pages, -1);
    size_t next = 0;
    for (uint32_t b = 0; b < B; ++b)
      for (uint32_t p = 0; p < (uint32_t(c.lens[b]) + c.page - 1) / c.page; ++p) table[b * cache.max_pages + p] = order[next++];
  }
  const uint64_t kv_elems = c.page ? uint64_t(pool) * c.page * tok : uint64_t(B) * cap * tok;
  const uint64_t kv_bs = c.page ? uint64_t(c.page) * tok : uint64_t(cap) * tok;
  Tensor<T> k = random_tensor<T>(kv_elems, kv_bs, tok, D), v = random_tensor<T>(kv_elems, kv_bs, tok, D);
  Tensor<T> q = random_tensor<T>(uint64_t(B) * c.nq * c.hq * D, uint64_t(c.nq) * c.hq * D, uint64_t(c.hq) * D, D);
  Tensor<T> o = poisoned_tensor<T>(q.host.size(), q.t.batch_stride, q.t.seq_stride, q.t.head_stride);
  jit::DeviceBuffer<float> lse(uint64_t(B) * c.hq * c.nq);
  lse.fill_bytes(0xFF);
  jit::DeviceBuffer<int32_t> lens_dev(c.lens), table_dev(table.empty() ? std::vector<int32_t>{0} : table);
  cache.k = k.t;
  cache.v = v.t;
  cache.seqlens = lens_dev.device_address();
  if (c.page) {
    cache.block_table = table_dev.device_address();
    cache.page_size = c.page;
    cache.capacity = pool;
  } else {
    cache.capacity = cap;
  }
  const kaio::ops::AttentionShape shape{.batch = B, .seqlen_q = c.nq, .seqlen_k = max_len, .heads_q = c.hq, .heads_kv = c.hkv,
                                        .head_dim = D};
  std::vector<float> slopes;
  for (uint32_t h = 0; h < c.hq; ++h) slopes.push_back(0.05f * float(h + 1));
  jit::DeviceBuffer<float> slopes_dev(slopes);
  kaio::ops::attention_decode(q.t, cache, o.t, shape,
                              {.window_left = c.wl, .softcap = c.softcap, .alibi_slopes = c.alibi ? slopes_dev.device_address() : 0,
                               .lse = lse.device_address(), .splits = c.splits, .kernel = c.kernel, .validate = true});
  o.host = o.dev.to_host();
  const std::vector<float> lse_host = lse.to_host();
  auto kv_off = [&](uint32_t b, uint32_t j, uint32_t h) -> uint64_t {
    if (!c.page) return b * kv_bs + j * tok + h * D;
    return uint64_t(table[b * cache.max_pages + j / c.page]) * kv_bs + (j % c.page) * tok + h * D;
  };
  auto q_off = [&](uint32_t b, uint32_t i, uint32_t h) { return b * q.t.batch_stride + i * q.t.seq_stride + h * q.t.head_stride; };
  RefProblem p{B, c.hq, c.hkv, D, 1.0 / std::sqrt(double(D)), c.wl, 0, c.softcap, c.alibi ? &slopes : nullptr,
               [&](uint32_t) { return c.nq; }, [&](uint32_t b) { return uint32_t(c.lens[b]); }, q_off, kv_off, kv_off};
  auto lse_index = [&](uint32_t b, uint32_t i, uint32_t h) { return (uint64_t(b) * c.hq + h) * c.nq + i; };
  CHECK(compare(p, q, k, v, o.host, q_off, &lse_host, lse_index) == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("attention_decode matches float64 on the rows kernel: lengths 1, 17, 300, contiguous and paged, split and not",
                   "[gpu][ops][attention][decode]", kaio::half, kaio::bfloat16) {
  const auto rows = kaio::ops::AttentionKernel::Rows;  // the fallback (Auto takes the tensor-core kernel here)
  for (uint32_t page : {0u, 16u})
    for (uint32_t splits : {1u, 5u}) run_decode<TestType>({.lens = {1, 17, 300}, .nq = 1, .page = page, .splits = splits, .kernel = rows});
  run_decode<TestType>({.lens = {17, 300, 1}, .nq = 4, .page = 16, .splits = 0});
}

// The tensor-core decode kernel, forced: cache lengths 1, 17, 300 (a chunk's edge, several
// chunks), contiguous and paged (pages of 16, 128: a chunk over several pages, several
// chunks in a page), one and several new tokens (rows filling one, two and four m16
// tiles, and two row blocks), GQA 8:2, 8:1 and MQA, no split, forced and automatic splits.
TEMPLATE_TEST_CASE("attention_decode tensor-core kernel matches float64", "[gpu][ops][attention][decode][decode_mma]", kaio::half,
                   kaio::bfloat16) {
  const auto mma = kaio::ops::AttentionKernel::Mma;
  for (uint32_t page : {0u, 16u, 128u})
    for (uint32_t splits : {1u, 0u}) run_decode<TestType>({.lens = {1, 17, 300}, .nq = 1, .page = page, .splits = splits, .kernel = mma});
  run_decode<TestType>({.lens = {17, 300, 1}, .nq = 4, .page = 16, .splits = 3, .kernel = mma});
  run_decode<TestType>({.lens = {300, 9}, .nq = 7, .hq = 4, .hkv = 1, .d = 128, .page = 32, .splits = 1, .kernel = mma});
  run_decode<TestType>({.lens = {40, 300}, .nq = 16, .hq = 8, .hkv = 2, .page = 0, .splits = 2, .kernel = mma});
  run_decode<TestType>({.lens = {20, 70}, .nq = 9, .hq = 8, .hkv = 1, .page = 16, .splits = 1, .kernel = mma});  // 72 rows: two row blocks
  // The pool ends where the K and V allocations end: no copy may point past a page, not even
  // one of zero bytes (the hardware still translates its address).
  for (uint32_t splits : {1u, 3u})
    run_decode<TestType>({.lens = {1024, 1024}, .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = 256, .splits = splits, .kernel = mma,
                          .spare_pages = 0});
}

// Every score modifier the decode options have, on the tensor-core kernel, and the head
// dims whose copies are uneven (96: idle columns; 256: two warps, runs of 16 keys).
TEST_CASE("attention_decode tensor-core kernel: window, softcap, ALiBi, head dims 96 and 256", "[gpu][ops][attention][decode][decode_mma]") {
  const auto mma = kaio::ops::AttentionKernel::Mma;
  run_decode<kaio::half>({.lens = {40, 5}, .nq = 3, .hq = 4, .hkv = 1, .d = 128, .page = 32, .splits = 3, .wl = 20, .softcap = 3.0f,
                          .kernel = mma, .alibi = true});
  run_decode<kaio::bfloat16>({.lens = {33, 1}, .nq = 2, .hq = 2, .hkv = 1, .d = 96, .page = 16, .splits = 1, .kernel = mma});
  run_decode<kaio::half>({.lens = {40, 9}, .nq = 1, .hq = 4, .hkv = 2, .d = 256, .page = 0, .splits = 2, .kernel = mma});
}

// The long-cache row (128-key chunks, 8 warps), forced at lengths the interpreter can take:
// a chunk's edge, several chunks, pages of 16 (eight a chunk) and 256, splits, the modifiers.
TEST_CASE("attention_decode tensor-core kernel: the long-cache row at odd lengths", "[gpu][ops][attention][decode][decode_mma]") {
  const auto mma = kaio::ops::AttentionKernel::Mma;
  const kaio::ops::AttentionDecodeVariant* row = kaio::ops::attention_decode_pick(128, 4, 1u << 20);
  REQUIRE(row);
  REQUIRE(row->min_keys > 0);
  kaio::ops::AttentionDecodeConfig cfg;
  cfg.bn = row->bn, cfg.stages = row->stages, cfg.warps = row->warps;
  kaio::ops::detail::set_decode_override(&cfg);
  struct Reset {
    ~Reset() { kaio::ops::detail::set_decode_override(nullptr); }
  } reset;
  for (uint32_t page : {0u, 16u})
    run_decode<kaio::bfloat16>({.lens = {1, 129, 300}, .nq = 1, .hq = 8, .hkv = 2, .d = 128, .page = page, .splits = page ? 0u : 2u,
                                .kernel = mma});
  run_decode<kaio::half>({.lens = {200, 7}, .nq = 3, .hq = 4, .hkv = 1, .d = 128, .page = 256, .splits = 1, .wl = 50, .softcap = 3.0f,
                          .kernel = mma, .alibi = true, .spare_pages = 0});
}

TEST_CASE("attention_decode picks a row by head dim, query rows and cache length", "[ops][attention][decode]") {
  using kaio::ops::attention_decode_pick;
  const auto* short_row = attention_decode_pick(128, 4, 1024);
  const auto* long_row = attention_decode_pick(128, 4, 32768);
  REQUIRE(short_row);
  REQUIRE(long_row);
  CHECK(short_row->min_keys == 0);
  CHECK(long_row->min_keys > 0);
  CHECK(long_row->min_keys <= 8192);  // the bench's long rows take it
  CHECK(attention_decode_pick(128, 4, long_row->min_keys) == long_row);
  CHECK(attention_decode_pick(128, 4, long_row->min_keys - 1) == short_row);
  CHECK(attention_decode_pick(128, 40, 32768)->mt == 4);  // more rows: the four-tile row, whatever the length
  CHECK(attention_decode_pick(64, 4, 32768)->min_keys == 0);
  CHECK(attention_decode_pick(80, 4, 1024) == nullptr);
  // A device whose shared memory the long row does not fit (sm_80's 163 KB) gets the short row;
  // one that fits neither, none.
  const uint32_t long_bytes = kaio::ops::attention_decode_config(kaio::ir::Scalar::BF16, *long_row).shared_bytes();
  const uint32_t short_bytes = kaio::ops::attention_decode_config(kaio::ir::Scalar::BF16, *short_row).shared_bytes();
  REQUIRE(short_bytes < long_bytes);
  CHECK(attention_decode_pick(128, 4, 32768, long_bytes) == long_row);
  CHECK(attention_decode_pick(128, 4, 32768, long_bytes - 1) == short_row);
  CHECK(attention_decode_pick(128, 4, 32768, 163 * 1024) == short_row);
  CHECK(attention_decode_pick(128, 4, 32768, short_bytes - 1) == nullptr);
}

TEST_CASE("attention_decode: f32, MQA, window, softcap, head dim 128", "[gpu][ops][attention][decode]") {
  run_decode<float>({.lens = {40, 5}, .nq = 3, .hq = 4, .hkv = 1, .d = 128, .page = 32, .splits = 3, .wl = 20, .softcap = 3.0f});
}

TEMPLATE_TEST_CASE("attention_decode at 32768-token caches on a device", "[gpu][ops][attention][decode][large]", kaio::half,
                   kaio::bfloat16) {
  if (jit::interpret_mode()) return;
  const auto mma = kaio::ops::AttentionKernel::Mma;  // the tensor-core kernel (what Auto picks here)
  for (uint32_t page : {0u, 16u, 64u, 256u}) {
    run_decode<TestType>({.lens = {32768, 1000, 32767, 17}, .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = page, .kernel = mma});
    run_decode<TestType>({.lens = {32768}, .nq = 4, .hq = 32, .hkv = 8, .d = 128, .page = page, .kernel = mma});
  }
  // Auto: 64 rows of a paged cache (four m16 tiles a block)
  run_decode<TestType>({.lens = {1000, 32768}, .nq = 16, .hq = 32, .hkv = 8, .d = 128, .page = 64});
  run_decode<TestType>({.lens = {32768, 1000}, .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = 0, .splits = 1, .kernel = mma});
}

// The bench's paged rows through the tensor-core kernel: 64 full sequences of 1024 keys in
// pages of 256 (unsplit: 512 blocks fill the GPU), and 16 new tokens x 4 query heads per KV
// head (4 m16 tiles a block) over pages of 64.
TEMPLATE_TEST_CASE("attention_decode: the tensor-core kernel on paged caches at bench shapes", "[gpu][ops][attention][decode][large]",
                   kaio::half, kaio::bfloat16) {
  if (jit::interpret_mode()) return;
  const auto mma = kaio::ops::AttentionKernel::Mma;
  run_decode<TestType>({.lens = std::vector<int32_t>(64, 1024), .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = 256, .splits = 1, .kernel = mma});
  run_decode<TestType>({.lens = std::vector<int32_t>(64, 1024), .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = 256, .kernel = mma});
  run_decode<TestType>({.lens = {1000, 4096}, .nq = 16, .hq = 32, .hkv = 8, .d = 128, .page = 64, .kernel = mma});
}

// 64 x 1024 keys in pages of 256 with a pool that ends where the K and V allocations end (no
// copy may point past a page, not even one of zero bytes).
TEST_CASE("attention_decode: the tensor-core kernel on 64 x 1024 keys in pages of 256 with no spare pages", "[gpu][ops][attention][decode][large]") {
  if (jit::interpret_mode()) return;
  run_decode<kaio::bfloat16>({.lens = std::vector<int32_t>(64, 1024), .nq = 1, .hq = 32, .hkv = 8, .d = 128, .page = 256,
                              .kernel = kaio::ops::AttentionKernel::Mma, .spare_pages = 0});
}

TEST_CASE("attention_decode rejects bad arguments before launching, naming op and argument", "[gpu][ops][attention][decode]") {
  jit::DeviceBuffer<kaio::half> buf(64 * 16 * 64);
  jit::DeviceBuffer<int32_t> lens(std::vector<int32_t>{20, 70}), table(std::vector<int32_t>{0, 1, 2, 3, 4, 9});
  const uint64_t a = buf.device_address();
  auto q = kaio::ops::bshd(a, ir::Scalar::F16, 1, 2, 64);
  kaio::ops::KvCache paged{.k = kaio::ops::bshd(a, ir::Scalar::F16, 16, 1, 64), .v = kaio::ops::bshd(a, ir::Scalar::F16, 16, 1, 64),
                           .seqlens = lens.device_address(), .block_table = table.device_address(), .max_pages = 3,
                           .page_size = 16, .capacity = 8};
  const kaio::ops::AttentionShape s{.batch = 2, .seqlen_q = 1, .seqlen_k = 48, .heads_q = 2, .heads_kv = 1, .head_dim = 64};
  auto expect = [](auto f, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == "attention_decode");
    CHECK_THAT(e.what(), Contains(text));
  };
  auto bad = paged;
  bad.page_size = 24;
  expect([&] { kaio::ops::attention_decode(q, bad, q, s); }, "page_size 24 is not a power of two");
  bad = paged;
  bad.seqlens = 0;
  expect([&] { kaio::ops::attention_decode(q, bad, q, s); }, "'cache.seqlens'");
  auto long_k = s;
  long_k.seqlen_k = 49;
  expect([&] { kaio::ops::attention_decode(q, paged, q, long_k); }, "seqlen_k 49 is larger than the cache");
  auto many = s;
  many.seqlen_q = 17;
  expect([&] { kaio::ops::attention_decode(q, paged, q, many); }, "more than 16 tokens");
  jit::DeviceBuffer<float> fbuf(64 * 16 * 64);
  auto qf = kaio::ops::bshd(fbuf.device_address(), ir::Scalar::F32, 1, 2, 64);
  kaio::ops::KvCache paged_f32 = paged;
  paged_f32.k = paged_f32.v = kaio::ops::bshd(fbuf.device_address(), ir::Scalar::F32, 16, 1, 64);
  expect([&] { kaio::ops::attention_decode(qf, paged_f32, qf, s, {.kernel = kaio::ops::AttentionKernel::Mma}); },
         "'kernel': the tensor-core decode kernel does not apply: it takes f16 or bf16");
  auto odd = paged;
  odd.k.seq_stride = 68;
  expect([&] { kaio::ops::attention_decode(q, odd, q, s, {.kernel = kaio::ops::AttentionKernel::Mma}); }, "multiples of 8 elements");
  // The device arrays, checked in the debug mode: seqlens[1] = 70 > 48, then a page outside the pool.
  expect([&] { kaio::ops::attention_decode(q, paged, q, s, {.validate = true}); }, "seqlens[1] = 70");
  lens.upload({20, 40});
  expect([&] { kaio::ops::attention_decode(q, paged, q, s, {.validate = true}); }, "block_table[1, 2] = 9 is outside the pool");
  lens.upload({20, 30});
  jit::DeviceBuffer<kaio::half> qb(2 * 2 * 64), ob(2 * 2 * 64);
  qb.fill_bytes(0);
  auto q2 = kaio::ops::bshd(qb.device_address(), ir::Scalar::F16, 1, 2, 64), o2 = kaio::ops::bshd(ob.device_address(), ir::Scalar::F16, 1, 2, 64);
  CHECK_NOTHROW(kaio::ops::attention_decode(q2, paged, o2, s, {.validate = true}));
}

// Every decode kernel for sm_90, as a Hopper device builds it (not arch-specific; the
// catalog test assembles the same PTX for sm_80 and sm_90, and its nvJitLink result is
// reused here: tests/link_memo.h), one dtype per variant row (f16 and bf16 differ only in
// the mma type): mma.sync and 16-byte cp.async in the PTX, no local memory, and, where
// cuobjdump is available, HMMA and no LDL / STL in the SASS.
TEST_CASE("attention_decode kernels assemble for sm_90: HMMA, no local memory", "[ops][attention][decode][nvjitlink]") {
  auto& f = kaio::ops::attention_decode_family();
  size_t n = 0;
  for (size_t i = 0; i < f.config_count(); ++i) {
    const ir::Kernel k = f.declared_kernel(i);
    if (k.name().find("_bf16_") == std::string::npos) continue;
    INFO(k.name());
    const std::string ptx = codegen::emit_ptx(k, {"sm_90", 9, 0});
    CHECK_THAT(ptx, Contains("mma.sync.aligned.m16n8k16"));
    CHECK_THAT(ptx, Contains("cp.async.cg.shared.global"));
    CHECK_THAT(ptx, Contains("ldmatrix.sync.aligned.m8n8.x4.trans"));
    const jit::LinkResult r = test::link_ptx(ptx, "sm_90", k.name());
    const jit::Resources res = jit::parse_resources(r.info_log, 0);
    CHECK(res.local_bytes == 0);
    CHECK(res.spill_stores == 0);
    const std::string sass = test::sass_of(r.cubin);
    ++n;
    if (sass.empty()) continue;
    CHECK_THAT(sass, Contains("HMMA"));
    CHECK_THAT(sass, Contains("LDGSTS"));
    CHECK(sass.find("LDL") == std::string::npos);
    CHECK(sass.find("STL") == std::string::npos);
  }
  CHECK(n == kaio::ops::attention_decode_variants().size());
  if (test::cuobjdump_path().empty()) WARN("cuobjdump not found (set KAIO_CUOBJDUMP): the SASS (HMMA) is not checked");
}
