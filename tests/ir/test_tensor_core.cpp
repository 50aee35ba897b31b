// Warp-level tensor cores and asynchronous copies in the IR: the fragment descriptors, the
// interpreter's mma.sync / ldmatrix / cp.async against float64 and the hardware layouts,
// the race detector on cp.async, builder and verifier misuse, printer and hash.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/kaio.h"
#include "../support.h"
#include "mma_kernels.h"

using namespace kaio;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;
using ir::MmaKind;
using ir::Scalar;
using kaio::test::direct_mma;

namespace {

constexpr MmaKind kKinds[] = {MmaKind::F16, MmaKind::BF16, MmaKind::TF32, MmaKind::S8};

float tf32(float x) {  // the nearest tf32 value (10 mantissa bits), so that no input bit is ignored
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}

template <class T>
void run_direct(MmaKind kind, std::mt19937& rng) {
  const ir::MmaShape& s = ir::mma_shape(kind);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int> i8(-128, 127);
  std::vector<T> a(s.m * s.k), bm(s.k * s.n);
  std::vector<double> ad(a.size()), bd(bm.size());
  auto fill = [&](std::vector<T>& v, std::vector<double>& d) {
    for (size_t k = 0; k < v.size(); ++k) {
      if constexpr (std::is_same_v<T, int8_t>) v[k] = static_cast<int8_t>(i8(rng));
      else if constexpr (std::is_same_v<T, float>) v[k] = tf32(u(rng));
      else v[k] = T(u(rng));
      d[k] = static_cast<double>(static_cast<float>(v[k]));
    }
  };
  fill(a, ad);
  fill(bm, bd);
  using Acc = std::conditional_t<std::is_same_v<T, int8_t>, int32_t, float>;
  std::vector<Acc> c(s.m * s.n), d(s.m * s.n);
  for (auto& x : c) x = std::is_same_v<T, int8_t> ? Acc(i8(rng) * 1000) : Acc(u(rng));
  for (auto& x : d) x = std::is_same_v<T, int8_t> ? Acc(0x7eadbeef) : Acc(std::nanf(""));  // poisoned
  ir::interpret(direct_mma(kind), {.grid = {1}, .block = {32}}, a, bm, c, d);
  for (int i = 0; i < s.m; ++i)
    for (int j = 0; j < s.n; ++j) {
      double ref = c[i * s.n + j], mag = std::abs(ref);
      for (int k = 0; k < s.k; ++k) {
        ref += ad[i * s.k + k] * bd[k * s.n + j];
        mag += std::abs(ad[i * s.k + k] * bd[k * s.n + j]);
      }
      INFO(s.name << " D[" << i << "][" << j << "]");
      if constexpr (std::is_same_v<T, int8_t>) REQUIRE(d[i * s.n + j] == static_cast<int32_t>(ref));
      else REQUIRE(std::abs(d[i * s.n + j] - ref) <= 0x1p-22 * mag);  // f32: a few ulp of the terms' magnitude
    }
}

}  // namespace

TEST_CASE("mma layouts: every fragment descriptor covers its matrix exactly once", "[ir][tensor][layout]") {
  for (MmaKind kind : kKinds) {
    const ir::MmaShape& s = ir::mma_shape(kind);
    INFO(s.name);
    struct Op { const ir::FragLayout& f; int rows, cols; };
    for (const Op& op : {Op{s.a, s.m, s.k}, Op{s.b, s.k, s.n}, Op{s.c, s.m, s.n}}) {
      std::set<std::pair<int, int>> seen;
      for (int l = 0; l < 32; ++l)
        for (int r = 0; r < op.f.regs; ++r)
          for (int e = 0; e < op.f.per_reg; ++e) {
            int row = op.f.row_of(l, r, e), col = op.f.col_of(l, r, e);
            REQUIRE(row >= 0);
            REQUIRE(row < op.rows);
            REQUIRE(col >= 0);
            REQUIRE(col < op.cols);
            seen.insert({row, col});
          }
      CHECK(seen.size() == static_cast<size_t>(op.rows * op.cols));
      CHECK(op.f.regs * op.f.per_reg * 32 == op.rows * op.cols);
    }
  }
  // spot checks against the PTX ISA's formulas (lane 6: groupID 1, threadID_in_group 2)
  const ir::MmaShape& h = ir::mma_shape(MmaKind::F16);
  CHECK((h.a.row_of(6, 3, 1) == 9 && h.a.col_of(6, 3, 1) == 13));  // a7: row g+8, col 2t+1+8
  CHECK((h.b.row_of(6, 1, 0) == 12 && h.b.col_of(6, 1, 0) == 1));  // b2: row 2t+8, col g
  CHECK((h.c.row_of(6, 2) == 9 && h.c.col_of(6, 2) == 4));         // c2: row g+8, col 2t
  const ir::MmaShape& t = ir::mma_shape(MmaKind::TF32);
  CHECK((t.a.row_of(6, 1) == 9 && t.a.col_of(6, 1) == 2));          // a1: row g+8, col t
  CHECK((t.a.row_of(6, 2) == 1 && t.a.col_of(6, 2) == 6));          // a2: row g, col t+4
  const ir::MmaShape& q = ir::mma_shape(MmaKind::S8);
  CHECK((q.a.row_of(6, 2, 3) == 1 && q.a.col_of(6, 2, 3) == 27));  // a11: row g, col 4t+3+16
  CHECK((q.b.row_of(6, 1, 2) == 26 && q.b.col_of(6, 1, 2) == 1));  // b6: row 4t+2+16, col g
}

TEST_CASE("mma_sync in the interpreter: every shape against float64", "[ir][tensor][interp]") {
  std::mt19937 rng(::kaio::test::case_seed());
  for (int round = 0; round < 3; ++round) {
    run_direct<half>(MmaKind::F16, rng);
    run_direct<bfloat16>(MmaKind::BF16, rng);
    run_direct<float>(MmaKind::TF32, rng);
    run_direct<int8_t>(MmaKind::S8, rng);
  }
}

TEST_CASE("mma_sync: tf32 ignores the low 13 bits; s8 accumulates with 32-bit wraparound", "[ir][tensor][interp]") {
  std::vector<float> a(16 * 8, 0.0f), b(8 * 8, 0.0f), c(16 * 8, 0.0f), d(16 * 8);
  a[0] = 1.0f + 0x1p-12f;  // below tf32's precision: read as 1.0
  b[0] = 3.0f;
  ir::interpret(direct_mma(MmaKind::TF32), {.grid = {1}, .block = {32}}, a, b, c, d);
  CHECK(d[0] == 3.0f);
  std::vector<int8_t> qa(16 * 32, 0), qb(32 * 8, 0);
  std::vector<int32_t> qc(16 * 8, 0), qd(16 * 8);
  qa[0] = -128;
  qb[0] = -128;
  qc[0] = INT32_MAX;
  ir::interpret(direct_mma(MmaKind::S8), {.grid = {1}, .block = {32}}, qa, qb, qc, qd);
  CHECK(qd[0] == static_cast<int32_t>(uint32_t(INT32_MAX) + 16384u));
}

TEST_CASE("ldmatrix: x4 gives the m16n8k16 A fragment, x2.trans the B fragment", "[ir][tensor][interp]") {
  // A 16x16 and B 16x8 f16 tiles in shared memory; the classic addressing: lane l gives
  // A row l % 16 at column 8 (l / 16), and B row l % 16. Each lane stores its registers.
  ir::KernelBuilder b("ldm_frag");
  auto ga = b.param<const uint16_t*>("a");  // f16 bit patterns: ldmatrix gives u32 registers
  auto gb = b.param<const uint16_t*>("b");
  auto out = b.param<uint32_t*>("out");
  auto sa = b.shared<uint16_t>(256);
  auto sb = b.shared<uint16_t>(128);
  auto lane = b.lane_id();
  for (uint32_t k = 0; k < 8; ++k) {
    sa[lane * 8u + k] = ga[lane * 8u + k];
    b.if_(lane < 16u, [&] { sb[lane * 8u + k] = gb[lane * 8u + k]; });
  }
  b.barrier();
  auto fa = b.ldmatrix(sa, (lane % 16u) * 16u + (lane / 16u) * 8u, 4);
  auto fb = b.ldmatrix(sb, (lane % 16u) * 8u, 2, true);
  for (uint32_t r = 0; r < 4; ++r) out[lane * 6u + r] = fa[r];
  for (uint32_t r = 0; r < 2; ++r) out[lane * 6u + 4u + r] = fb[r];
  ir::Kernel k = b.build();
  std::vector<uint16_t> a(256), bb(128);
  for (int i = 0; i < 256; ++i) a[i] = half(float(i)).bits;  // A[r][c] = 16 r + c: exact in f16
  for (int i = 0; i < 128; ++i) bb[i] = half(float(1000 + i)).bits;
  std::vector<uint32_t> got(32 * 6, 0xdeadbeefu);
  ir::interpret(k, {.grid = {1}, .block = {32}}, a, bb, got);
  const ir::MmaShape& s = ir::mma_shape(MmaKind::F16);
  for (int l = 0; l < 32; ++l) {
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < 2; ++e) {
        INFO("A lane " << l << " reg " << r << " elem " << e);
        uint16_t want = a[s.a.row_of(l, r, e) * 16 + s.a.col_of(l, r, e)];
        CHECK(uint16_t(got[l * 6 + r] >> (16 * e)) == want);
      }
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < 2; ++e) {
        INFO("B lane " << l << " reg " << r << " elem " << e);
        uint16_t want = bb[s.b.row_of(l, r, e) * 8 + s.b.col_of(l, r, e)];
        CHECK(uint16_t(got[l * 6 + 4 + r] >> (16 * e)) == want);
      }
  }
}

namespace {

// Each lane copies `per` floats (bytes = 4 per) of src into a shared tile with cp.async;
// lanes >= n_valid read nothing (zero-fill). After the wait (and a barrier) lane l reads
// the chunk of lane (l + shift) % 32. `mode` breaks the protocol on purpose.
enum class CpMode { Ok, ReadBeforeWait, NoBarrier, WaitOneOfTwo };
ir::Kernel cp_kernel(uint32_t bytes, CpMode mode) {
  ir::KernelBuilder b("cp_kernel");
  auto src = b.param<const float*>("src");
  auto out = b.param<float*>("out");
  auto n_valid = b.param<uint32_t>("n_valid");
  auto shift = b.param<uint32_t>("shift");
  const uint32_t per = bytes / 4;
  auto tile = b.shared<float>(32 * per * 2);
  auto lane = b.lane_id();
  ir::Value nb = ir::select(lane < n_valid, b.constant<uint32_t>(bytes), b.constant<uint32_t>(0u));
  b.cp_async(tile, lane * per, src, lane * per, bytes, bytes == 16 ? ir::CacheHint::Global : ir::CacheHint::Default, nb);
  b.cp_async_commit_group();
  if (mode == CpMode::WaitOneOfTwo) {  // a second group, then wait for all but one: the first is done
    b.cp_async(tile, (lane + 32u) * per, src, lane * per, bytes);
    b.cp_async_commit_group();
    b.cp_async_wait_group(1);
    b.barrier();
    ir::Value v = tile[((lane + shift) % 32u) * per];    // first group: complete
    ir::Value w = tile[((lane + shift) % 32u + 32u) * per];  // second group: maybe still in flight
    out[lane] = v + w;
    return b.build();
  }
  if (mode == CpMode::ReadBeforeWait) {
    ir::Value early = tile[lane * per];
    out[lane] = early;
  }
  b.cp_async_wait_group(0);
  if (mode != CpMode::NoBarrier) b.barrier();
  for (uint32_t k = 0; k < per; ++k) {
    ir::Value v = tile[((lane + shift) % 32u) * per + k];
    out[lane * per + k] = v;
  }
  return b.build();
}

}  // namespace

TEST_CASE("cp_async in the interpreter: sizes, zero-fill, groups, and the race detector", "[ir][tensor][interp]") {
  std::mt19937 rng(::kaio::test::case_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (uint32_t bytes : {4u, 8u, 16u}) {
    const uint32_t per = bytes / 4;
    INFO(bytes << " bytes");
    std::vector<float> src(32 * per), out(32 * per, std::nanf(""));
    for (float& x : src) x = u(rng);
    const uint32_t n_valid = 21, shift = 5;
    ir::interpret(cp_kernel(bytes, CpMode::Ok), {.grid = {1}, .block = {32}}, src, out, n_valid, shift);
    for (uint32_t l = 0; l < 32; ++l)
      for (uint32_t k = 0; k < per; ++k) {
        uint32_t from = (l + shift) % 32;
        CHECK(out[l * per + k] == (from < n_valid ? src[from * per + k] : 0.0f));  // zero-filled past n_valid
      }
  }
  std::vector<float> src(32 * 4), out(32 * 4);
  {  // the copy's own thread reads before its wait
    UsageError e = usage_error_of([&] {
      ir::interpret(cp_kernel(16, CpMode::ReadBeforeWait), {.grid = {1}, .block = {32}}, src, out, 32u, 0u);
    });
    CHECK_THAT(e.what(), Contains("still being written by a cp.async") && Contains("cp_async_wait_group"));
  }
  {  // waited, but another lane's bytes are read without a barrier
    UsageError e = usage_error_of([&] {
      ir::interpret(cp_kernel(16, CpMode::NoBarrier), {.grid = {1}, .block = {32}}, src, out, 32u, 1u);
    });
    CHECK_THAT(e.what(), Contains("race on shared memory"));
  }
  {  // wait_group(1) leaves the newer group in flight
    UsageError e = usage_error_of([&] {
      ir::interpret(cp_kernel(16, CpMode::WaitOneOfTwo), {.grid = {1}, .block = {32}}, src, out, 32u, 0u);
    });
    CHECK_THAT(e.what(), Contains("still being written by a cp.async"));
  }
  {  // the reads past src_bytes never happen; a source out of bounds with a full size does
    std::vector<float> small(31 * 4);
    ir::interpret(cp_kernel(16, CpMode::Ok), {.grid = {1}, .block = {32}}, small, out, 31u, 0u);
    UsageError e = usage_error_of([&] {
      ir::interpret(cp_kernel(16, CpMode::Ok), {.grid = {1}, .block = {32}}, small, out, 32u, 0u);
    });
    CHECK_THAT(e.what(), Contains("out-of-bounds cp_async") && Contains("src_bytes = 0"));
  }
}

TEST_CASE("tensor ops: misuse is a UsageError naming the op and the argument", "[ir][tensor][builder][verifier]") {
  ir::KernelBuilder b("tensor_misuse");
  auto g = b.param<const half*>("g");
  auto gf = b.param<float*>("gf");
  auto sh = b.shared<half>(256);
  auto sf = b.shared<float>(64);
  auto lane = b.lane_id();
  auto acc = b.array<float>(4, 0.0f);
  auto acc8 = b.array<float>(8, 0.0f);
  auto iacc = b.array<int32_t>(4, 0);
  auto hacc = b.array<half>(4, half(0.0f));
  ir::Value h2 = ir::pack2(sh[0u], sh[1u]);
  ir::Value u = lane;
  std::vector<ir::Value> a4(4, h2), b2(2, h2);
  auto msg = [](auto f) { UsageError e = usage_error_of(f); return std::make_pair(e.op(), std::string(e.what())); };
  auto [op1, m1] = msg([&] { b.mma_sync(MmaKind::F16, acc8, a4, b2); });
  CHECK(op1 == "mma_sync");
  CHECK_THAT(m1, Contains("acc:") && Contains("4 f32 registers") && Contains("got 8 values"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::F16, hacc, a4, b2); }).second, Contains("acc:"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::S8, acc, {u, u, u, u}, {u, u}); }).second, Contains("4 s32 registers"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::F16, acc, {h2, h2, h2}, b2); }).second,
             Contains("a: m16n8k16.f16 takes 4 fragment registers per lane, got 3"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::F16, acc, a4, {h2}); }).second, Contains("b: m16n8k16.f16 takes 2"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::BF16, acc, a4, b2); }).second,
             Contains("a[0]: m16n8k16.bf16 fragment registers are bf16x2, got f16x2"));
  CHECK_THAT(msg([&] { b.mma_sync(MmaKind::S8, iacc, a4, b2); }).second, Contains("fragment registers are u32"));
  CHECK_THAT(msg([&] { (void)b.ldmatrix(g, 0u, 4); }).second, Contains("ptr: ldmatrix reads shared memory"));
  CHECK_THAT(msg([&] { (void)b.ldmatrix(sh, 0u, 3); }).second, Contains("num: loads 1, 2 or 4 matrices, got 3"));
  CHECK_THAT(msg([&] { (void)b.ldmatrix(sf, 0u, 4, true); }).second, Contains("trans: transposes 16-bit elements"));
  CHECK_THAT(msg([&] { b.cp_async(sh, 0u, g, 0u, 12); }).second, Contains("bytes: 4, 8 or 16, got 12"));
  CHECK_THAT(msg([&] { b.cp_async(sh, 0u, g, 0u, 8, ir::CacheHint::Global); }).second, Contains(".cg copies 16 bytes"));
  CHECK_THAT(msg([&] { b.cp_async(sf, 0u, gf, 0u, 16, ir::CacheHint::ReadOnly); }).second, Contains("hint:"));
  CHECK_THAT(msg([&] { b.cp_async(sf, 0u, g, 0u, 16); }).second, Contains("different types"));
  CHECK_THAT(msg([&] { b.cp_async(sh, 0u, sh, 0u, 16); }).second, Contains("src: a global-memory pointer"));
  CHECK_THAT(msg([&] { b.cp_async(sf, 0u, gf, 0u, 16, ir::CacheHint::Default, b.constant<int32_t>(4)); }).second,
             Contains("src_bytes: the bytes to read are a u32"));
  CHECK_THAT(msg([&] { b.cp_async_wait_group(16); }).second, Contains("at most 15 groups"));
  CHECK_THAT(msg([&] { (void)acc.slice(2, 4); }).second, Contains("slice [2, 6) is outside"));
  // the right forms build, and print
  b.mma_sync(MmaKind::F16, acc8.slice(4, 4), a4, b2);
  std::vector<ir::Value> fr = b.ldmatrix(sh, lane * 8u, 2, true);
  CHECK(fr[0].type() == ir::Type::scalar(Scalar::F16x2));
  CHECK(b.ldmatrix(sf, lane * 4u, 1)[0].type() == ir::Type::scalar(Scalar::U32));
  b.cp_async(sf, lane * 4u, gf, lane * 4u, 16, ir::CacheHint::Global);
  b.cp_async_commit_group();
  b.cp_async_wait_group(0);
  std::string text = b.build().print();
  CHECK_THAT(text, Contains("mma_sync m16n8k16.f16 %"));
  CHECK_THAT(text, Contains("= ldmatrix.trans %"));
  CHECK_THAT(text, Contains("cp_async.cg 16 %"));
  CHECK_THAT(text, Contains("cp_async_wait_group 0"));
}

TEST_CASE("tensor ops: whole warps only, sm_80 and newer, the shape and .trans in the key", "[ir][tensor][verifier]") {
  {  // mma_sync / ldmatrix under a lane-dependent condition: rejected by the divergence check
    ir::KernelBuilder b("mma_lane");
    auto sh = b.shared<half>(256);
    auto acc = b.array<float>(4, 0.0f);
    b.if_(b.lane_id() < 16u, [&] {
      auto f = b.ldmatrix(sh, 0u, 4);
      b.mma_sync(MmaKind::F16, acc, f, {f[0], f[1]});
    });
    UsageError e = usage_error_of([&] { b.build(); });
    CHECK(e.op() == "ldmatrix");
    CHECK_THAT(e.what(), Contains("needs whole warps"));
  }
  {  // a partial warp in the interpreter: the GPU leaves it undefined
    ir::KernelBuilder b("mma_partial");
    auto out = b.param<float*>("out");
    auto acc = b.array<float>(4, 1.0f);
    auto z = ir::pack2(b.constant(half(0.0f)), b.constant(half(0.0f)));
    b.mma_sync(MmaKind::F16, acc, {z, z, z, z}, {z, z});
    out[b.thread_idx_x()] = acc[0];
    ir::Kernel k = b.build();
    std::vector<float> host(48);
    UsageError e = usage_error_of([&] { ir::interpret(k, {.grid = {1}, .block = {48}}, host); });
    CHECK_THAT(e.what(), Contains("whole warp") && Contains("lane 16"));
  }
  ir::Kernel k16 = direct_mma(MmaKind::F16);
  CHECK(usage_error_of([&] { (void)codegen::emit_ptx(k16, {"sm_75", 9, 0}); }).op() == "target");
  CHECK_THAT(usage_error_of([&] { (void)codegen::emit_ptx(k16, {"sm_75", 9, 0}); }).what(), Contains("older than sm_80"));
  for (const ir::OpDef* d : {&ir::op_def(ir::Op::MmaSync), &ir::op_def(ir::Op::Ldmatrix), &ir::op_def(ir::Op::CpAsync),
                             &ir::op_def(ir::Op::CpAsyncCommit), &ir::op_def(ir::Op::CpAsyncWait)}) {
    CHECK(d->min_sm == 80);
    CHECK(d->family == ir::Family::Tensor);
  }
  // the shape and .trans change the canonical encoding, hence the key
  CHECK_FALSE(direct_mma(MmaKind::F16).hash() == direct_mma(MmaKind::BF16).hash());
  CHECK(direct_mma(MmaKind::F16).hash() == k16.hash());
  auto ldm = [](bool trans) {
    ir::KernelBuilder b("ldm_key");
    auto out = b.param<uint32_t*>("out");
    auto sh = b.shared<uint16_t>(128);
    sh[b.lane_id()] = b.constant<uint16_t>(1);
    b.barrier();
    out[b.lane_id()] = b.ldmatrix(sh, 0u, 1, trans)[0];
    return b.build();
  };
  CHECK_FALSE(ldm(false).hash() == ldm(true).hash());
}

TEST_CASE("shared layouts: padded and swizzled indices, on the host and in a kernel", "[ir][tensor][layout]") {
  const ir::SmemLayout pad = ir::SmemLayout::padded(32, 8);
  CHECK(pad.index(3, 5) == 3 * 40 + 5);
  CHECK(pad.elements(16) == 640);
  for (uint32_t sw : {32u, 64u, 128u}) {
    const ir::SmemLayout s = ir::SmemLayout::swizzled(64, Scalar::F16, sw);  // 128-byte rows
    INFO("swizzle " << sw);
    std::set<uint32_t> seen;
    for (uint32_t r = 0; r < 16; ++r)
      for (uint32_t c = 0; c < 64; ++c) {
        uint32_t i = s.index(r, c);
        REQUIRE(i < s.elements(16));
        CHECK(i / 8 == s.index(r, c - c % 8) / 8);  // 16-byte chunks stay whole
        CHECK(i % 8 == c % 8);
        seen.insert(i);
      }
    CHECK(seen.size() == 16 * 64);  // a permutation
  }
  const ir::SmemLayout s128 = ir::SmemLayout::swizzled(64, Scalar::F16);
  CHECK(s128.index(0, 8) == 8);        // row 0: unchanged
  CHECK(s128.index(1, 0) == 64 + 8);   // row 1: chunk 0 -> chunk 1
  CHECK(s128.index(3, 16) == 3 * 64 + 8);  // row 3: chunk 2 -> chunk 1
  CHECK(usage_error_of([] { (void)ir::SmemLayout::swizzled(4, Scalar::F16); }).op() == "smem_layout");
  CHECK(usage_error_of([] { (void)ir::SmemLayout::swizzled(64, Scalar::F16, 256); }).op() == "smem_layout");
  CHECK(usage_error_of([] { (void)ir::SmemLayout::swizzled(8, Scalar::F16).elements(3); }).op() == "smem_layout");
  // the kernel-side index computes the same as the host's, for every layout
  for (const ir::SmemLayout& lay : {pad, s128, ir::SmemLayout::swizzled(16, Scalar::F32, 64),
                                    ir::SmemLayout::swizzled(32, Scalar::S8, 32), ir::SmemLayout::line_swizzled(128, Scalar::F16),
                                    ir::SmemLayout::line_swizzled(64, Scalar::F32), ir::SmemLayout::line_swizzled(512, Scalar::S8)}) {
    ir::KernelBuilder b("layout_index");
    auto out = b.param<uint32_t*>("out");
    auto t = b.thread_idx_x();
    auto r = t / lay.cols(), c = t % lay.cols();
    out[t] = lay.index(r, c);
    std::vector<uint32_t> got(std::min(16u, 1024u / lay.cols()) * lay.cols());  // a block of at most 1024 threads
    ir::interpret(b.build(), {.grid = {1}, .block = {static_cast<uint32_t>(got.size())}}, got);
    for (uint32_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == lay.index(i / lay.cols(), i % lay.cols()));
  }
}

TEST_CASE("shared layouts: line-swizzled rows keep lines whole and 8-row reads conflict-free", "[ir][tensor][layout]") {
  // 128-byte rows: the same as the 128-byte swizzle
  const ir::SmemLayout l64 = ir::SmemLayout::line_swizzled(64, Scalar::F16), s128 = ir::SmemLayout::swizzled(64, Scalar::F16);
  for (uint32_t r = 0; r < 16; ++r)
    for (uint32_t c = 0; c < 64; ++c) REQUIRE(l64.index(r, c) == s128.index(r, c));
  for (uint32_t cols : {128u, 256u}) {  // 256- and 512-byte rows of f16
    const ir::SmemLayout s = ir::SmemLayout::line_swizzled(cols, Scalar::F16);
    INFO("cols " << cols);
    std::set<uint32_t> seen;
    for (uint32_t r = 0; r < 16; ++r)
      for (uint32_t c = 0; c < cols; ++c) {
        uint32_t i = s.index(r, c);
        REQUIRE(i < s.elements(16));
        CHECK(i / 64 == (r * cols + c) / 64);  // a 128-byte line of the row stays in its own line
        CHECK(i % 8 == c % 8);                 // 16-byte chunks stay whole
        seen.insert(i);
      }
    CHECK(seen.size() == 16 * cols);  // a permutation
    // an ldmatrix of 8 rows at one chunk column: the 8 chunks in 8 different 16-byte bank
    // groups (the 128-byte swizzle of the line number repeats its key every 128 / row bytes)
    for (uint32_t c = 0; c < cols; c += 8) {
      std::set<uint32_t> groups;
      for (uint32_t r = 0; r < 8; ++r) groups.insert((s.index(r, c) * 2 / 16) % 8);
      CHECK(groups.size() == 8);
    }
    std::set<uint32_t> line_keyed;
    const ir::SmemLayout w = ir::SmemLayout::swizzled(cols, Scalar::F16);
    for (uint32_t r = 0; r < 8; ++r) line_keyed.insert((w.index(r, 0) * 2 / 16) % 8);
    CHECK(line_keyed.size() < 8);  // what the line-swizzled kind is for
  }
  CHECK(usage_error_of([] { (void)ir::SmemLayout::line_swizzled(96, Scalar::F16); }).op() == "smem_layout");
  CHECK(usage_error_of([] { (void)ir::SmemLayout::line_swizzled(0, Scalar::F32); }).op() == "smem_layout");
  // xor_key: index(row, col) == row * row_stride + (col ^ xor_key(row)), in a kernel, for every
  // element size
  for (const ir::SmemLayout& lay : {ir::SmemLayout::line_swizzled(128, Scalar::F16), ir::SmemLayout::line_swizzled(64, Scalar::F32),
                                    ir::SmemLayout::line_swizzled(256, Scalar::S8)}) {
    ir::KernelBuilder b("layout_xor_key");
    auto out = b.param<uint32_t*>("out");
    auto t = b.thread_idx_x();
    auto r = t / lay.cols(), c = t % lay.cols();
    out[t] = r * lay.row_stride() + (c ^ lay.xor_key(r));
    std::vector<uint32_t> got(1024 / lay.cols() * lay.cols());
    ir::interpret(b.build(), {.grid = {1}, .block = {static_cast<uint32_t>(got.size())}}, got);
    for (uint32_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == lay.index(i / lay.cols(), i % lay.cols()));
  }
  CHECK(usage_error_of([] {
          ir::KernelBuilder b("no_key");
          (void)ir::SmemLayout::swizzled(64, Scalar::F16).xor_key(b.thread_idx_x());
        }).op() == "smem_layout");
}

TEST_CASE("tensor ops: the verifier re-checks kernels the builder did not make", "[ir][tensor][verifier]") {
  // Start from a valid kernel and break one instruction at a time, as a buggy pass would.
  ir::Kernel k = direct_mma(MmaKind::F16);
  auto broken = [&](const std::function<void(ir::Inst&)>& edit) {
    ir::Kernel::Data d = k.data();
    std::function<bool(ir::Block&)> walk = [&](ir::Block& b) {
      for (ir::Inst& i : b.insts) {
        if (i.op == ir::Op::MmaSync) {
          edit(i);
          return true;
        }
        for (ir::Block& r : i.regions)
          if (walk(r)) return true;
      }
      return false;
    };
    REQUIRE(walk(d.body));
    return usage_error_of([&] { ir::verify(d); });
  };
  UsageError e1 = broken([](ir::Inst& i) { i.attr.mma = MmaKind::BF16; });  // f16x2 fragments for a bf16 mma
  CHECK(e1.op() == "mma_sync");
  CHECK_THAT(e1.what(), Contains("verifier:") && Contains("m16n8k16.bf16 fragment registers are bf16x2, got f16x2"));
  UsageError e2 = broken([](ir::Inst& i) { i.attr.mma = MmaKind::S8; });  // f32 accumulators for s8
  CHECK_THAT(e2.what(), Contains("accumulates into s32 variables"));
  UsageError e3 = broken([](ir::Inst& i) {  // a fragment register missing
    ir::Operands a;
    for (size_t n = 0; n + 1 < i.args.size(); ++n) a.push_back(i.args[n]);
    i.args = a;
  });
  CHECK_THAT(e3.what(), Contains("takes 10 operands, has 9"));
  UsageError e4 = broken([](ir::Inst& i) {  // an SSA value where an accumulator variable belongs
    ir::Operands a;
    a.push_back(i.args[6]);
    for (size_t n = 1; n < i.args.size(); ++n) a.push_back(i.args[n]);
    i.args = a;
  });
  CHECK_THAT(e4.what(), Contains("is not a variable"));
}
