// Warp-level tensor cores and asynchronous copies in the IR: the fragment descriptors, the
// interpreter's mma.sync / ldmatrix / cp.async against float64 and the hardware layouts,
// the race detector on cp.async, builder and verifier misuse, printer and hash.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/kaio.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;
using ir::MmaKind;
using ir::Scalar;

namespace {

constexpr MmaKind kKinds[] = {MmaKind::F16, MmaKind::BF16, MmaKind::TF32, MmaKind::S8};

// The lane's fragment of operand P (row-major, leading dimension ld), packed as mma wants.
std::vector<ir::Value> fragment(ir::KernelBuilder& b, const ir::MmaShape& s, const ir::FragLayout& f, ir::Value P,
                                uint32_t ld) {
  ir::Value lane = b.lane_id();
  std::vector<ir::Value> regs;
  for (int r = 0; r < f.regs; ++r) {
    std::vector<ir::Value> x;
    for (int e = 0; e < f.per_reg; ++e) {
      ir::Value i = ir::frag_row(f, lane, r, e) * ld + ir::frag_col(f, lane, r, e);
      x.push_back(P[i]);
    }
    if (s.kind == MmaKind::F16 || s.kind == MmaKind::BF16) {
      regs.push_back(ir::pack2(x[0], x[1]));
    } else if (s.kind == MmaKind::TF32) {
      regs.push_back(x[0]);
    } else {  // four s8 in a b32, the first in the low byte
      ir::Value w = ir::cast<uint32_t>(x[0]) & 0xffu;
      for (int e = 1; e < 4; ++e) w = w | ((ir::cast<uint32_t>(x[e]) & 0xffu) << uint32_t(8 * e));
      regs.push_back(w);
    }
  }
  return regs;
}

// One warp: D = A (M x K) * B (K x N) + C, fragments loaded straight from global memory
// through the layout descriptors, C into the accumulator registers, D stored through them.
ir::Kernel direct_mma(MmaKind kind) {
  const ir::MmaShape& s = ir::mma_shape(kind);
  ir::KernelBuilder b("direct_mma_" + std::to_string(static_cast<int>(kind)));
  auto A = b.param("a", ir::Type::pointer(s.in, true));
  auto B = b.param("b", ir::Type::pointer(s.in, true));
  auto C = b.param("c", ir::Type::pointer(s.acc, true));
  auto D = b.param("d", ir::Type::pointer(s.acc, false));
  ir::Value lane = b.lane_id();
  auto acc = b.array(ir::Type::scalar(s.acc), 4, b.constant(ir::Type::scalar(s.acc), ir::Literal{ir::Literal::Int, 0, 0, 0}, "c"));
  for (int r = 0; r < 4; ++r) acc[r] = C[ir::frag_row(s.c, lane, r) * uint32_t(s.n) + ir::frag_col(s.c, lane, r)];
  b.mma_sync(kind, acc, fragment(b, s, s.a, A, s.k), fragment(b, s, s.b, B, s.n));
  for (int r = 0; r < 4; ++r) D[ir::frag_row(s.c, lane, r) * uint32_t(s.n) + ir::frag_col(s.c, lane, r)] = acc[r];
  return b.build();
}

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
  std::mt19937 rng(std::random_device{}());
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
