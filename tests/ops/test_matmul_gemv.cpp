// The GEMV matmul engine (m <= BM): every row in the interpreter at small odd shapes
// (1x1x1, 1x33x65, 3x129x70, 8x257x1000) for every layout and input/output type against
// float64, with A read as vectors and element by element, alpha/beta, batches with gaps,
// split-K, and rows of other shapes than the table's; every row, input type and layout
// assembled for sm_90 (row/row for sm_80) without local memory; can_implement's refusals; [gpu]: ops::matmul at 1x4096x4096, 4x11008x4096 and edge shapes (small odd
// ones in the interpreter). C is poisoned (NaN) wherever beta == 0, random otherwise; the
// elements between C's rows and batches must come back untouched, bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_engine.h"
#include "../support.h"
#include "matmul_support.h"
#include "../link_memo.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ops::MatLayout;
using ops::MatmulProblem;

namespace {

using test::matmul::as_double;
using test::matmul::at;
using test::matmul::random_vec;

std::vector<const ops::MatmulVariant*> gemv_variants() { return test::matmul::rows_of(ops::MatmulEngine::Gemv); }
using test::matmul::index_of;
uint32_t round_up(uint32_t x, uint32_t a) { return (x + a - 1) / a * a; }

template <class T>
bool same_bits(T x, T y) { return std::memcmp(&x, &y, sizeof(T)) == 0; }

// C against float64: |C - ref| <= tol_terms * sum |terms| + tol_out * |ref| (f32 sums of
// exact products: one rounding per k step; f16 / bf16 output: one more rounding).
template <class In, class Out>
void check(const MatmulProblem& p, const std::vector<In>& a, const std::vector<In>& b, const std::vector<Out>& c0,
           const std::vector<Out>& c) {
  const double terms = (p.k + 2 + (p.split_k > 1 ? 2 * p.split_k + 1 : 0)) * 0x1p-23;
  const double out = std::is_same_v<Out, half> ? 0x1p-11 : std::is_same_v<Out, bfloat16> ? 0x1p-8 : 0;
  const double tiny = std::is_same_v<Out, half> ? 0x1p-25 : 1e-30;  // f16 subnormals
  for (uint32_t z = 0; z < p.batch; ++z)
    for (uint32_t i = 0; i < p.m; ++i)
      for (uint32_t j = 0; j < p.n; ++j) {
        const auto [ref, mag] = test::matmul::reference_at(p, a, b, c0, z, i, j, p.alpha);
        const size_t ci = z * p.stride_c + size_t(i) * p.ldc + j;
        INFO("batch " << z << " C[" << i << "][" << j << "] = " << as_double(c[ci]) << ", float64 " << ref);
        REQUIRE(std::abs(as_double(c[ci]) - ref) <= terms * mag + out * std::abs(ref) + tiny);
      }
  for (size_t i = 0; i < c.size(); ++i) {  // between the rows and batches: untouched
    const size_t z = i / p.stride_c, rem = i % p.stride_c, row = rem / p.ldc, col = rem % p.ldc;
    if (z >= p.batch || row >= p.m || col >= p.n) REQUIRE(same_bits(c[i], c0[i]));
  }
}

// C before the run: random where beta reads it, else NaN (a skipped element cannot pass).
template <class Out>
std::vector<Out> initial_c(const MatmulProblem& p) {
  std::vector<Out> c = random_vec<Out>(p.stride_c * p.batch);
  if (p.beta == 0.0f) std::memset(static_cast<void*>(c.data()), 0xFF, c.size() * sizeof(Out));
  return c;
}

// A host buffer as the f16x2 / bf16x2 view the 16-byte loads of 16-bit inputs use.
template <class In>
ir::interp::HostArg pairs_of(const std::vector<In>& v) {
  const ir::Scalar s = std::is_same_v<In, bfloat16> ? ir::Scalar::BF16x2 : ir::Scalar::F16x2;
  return {ir::interp::HostArg::Buffer, s, false, 0, reinterpret_cast<uint64_t>(v.data()), v.size() * sizeof(In)};
}

// One problem: through the interpreter directly (launch = false: the kernel and its launch
// shape, no jit) or through ops::matmul on device buffers (the device, or KAIO_INTERPRET=1).
template <class In, class Out>
void run(const ops::MatmulVariant& v, const MatmulProblem& q, bool launch) {
  const MatmulProblem p = ops::matmul_resolved(q);
  INFO(v.name << " " << p.m << "x" << p.n << "x" << p.k << " " << ir::scalar_name(p.in) << " -> " << ir::scalar_name(p.out)
               << " layouts " << (p.a == MatLayout::RowMajor ? "row/" : "col/") << (p.b == MatLayout::RowMajor ? "row" : "col")
               << " lda " << p.lda << " ldb " << p.ldb << " batch " << p.batch << " split " << p.split_k << " alpha "
               << p.alpha << " beta " << p.beta);
  REQUIRE(v.can_implement(p, 80));
  // the matrices sized by their strides; A's and B's last batch up to their last element
  const std::vector<In> a = random_vec<In>(p.stride_a * p.batch), b = random_vec<In>(p.stride_b * p.batch);
  const std::vector<Out> c0 = initial_c<Out>(p);
  std::vector<Out> c = c0;
  if (!launch) {
    using ir::interp::host_arg;
    const ops::MatmulConfig cfg{index_of(v), p.in, p.out, p.a, p.b};
    if (p.split_k > 1) {  // as ops::matmul does: C = beta * C, then the blocks add into it
      if constexpr (std::is_same_v<Out, float>)
        ir::interpret(ops::matmul_scale_kernel(), {.grid = {(p.n + 255) / 256, p.m, p.batch}, .block = {256}}, c, p.m, p.n,
                      p.ldc, p.stride_c, p.beta);
    }
    const jit::LaunchConfig lc = ops::matmul_launch_config(v, p, nullptr);
    std::vector<ir::interp::HostArg> args = {
        host_arg(a),      host_arg(b),       host_arg(c),          host_arg(p.m),        host_arg(p.n),
        host_arg(p.k),    host_arg(p.lda),   host_arg(p.ldb),      host_arg(p.ldc),      host_arg(p.alpha),
        host_arg(p.beta), host_arg(p.stride_a), host_arg(p.stride_b), host_arg(p.stride_c), host_arg(p.split_k),
        host_arg(ops::matmul_k_chunk(p))};
    if constexpr (!std::is_same_v<In, float>) {
      args.push_back(pairs_of(a));
      args.push_back(pairs_of(b));
    }
    // the engine's builder (matmul_kernel gives the same kernel for a row of the table; this
    // also takes rows that are not in it)
    ir::interp::interpret_packed(ops::detail::engine(v.engine).build(v, cfg), {.grid = lc.grid, .block = lc.block}, args.data(),
                                 args.size());
  } else {
    DeviceBuffer<In> da(a), db(b);
    DeviceBuffer<Out> dc(c0);
    ops::matmul(v, da.device_address(), db.device_address(), dc.device_address(), q);
    c = dc.to_host();
  }
  check(p, a, b, c0, c);
}

struct Shape { uint32_t m, n, k; };
constexpr Shape kOdd[] = {{1, 1, 1}, {1, 33, 65}, {3, 129, 70}, {8, 257, 1000}};

// Every shape the row serves (m <= BM) in every layout: packed leading dimensions (B's
// padded to whole 16-byte vectors; A's odd, read element by element unless k is a multiple
// of the vector), then A's padded to vectors with alpha/beta and two batches with gaps,
// then split-K for f32 output.
template <class In, class Out>
void run_shapes(const ops::MatmulVariant& v, std::span<const Shape> shapes, bool launch) {
  const ir::Scalar in = ir::ScalarOf<In>::value, out = ir::ScalarOf<Out>::value;
  const uint32_t vec = 16 / sizeof(In);
  for (const Shape& s : shapes) {
    if (s.m > v.bm) continue;
    for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
      for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
        MatmulProblem p{.m = s.m, .n = s.n, .k = s.k, .in = in, .out = out, .a = la, .b = lb};
        p.ldb = round_up(lb == MatLayout::RowMajor ? s.n : s.k, vec);
        run<In, Out>(v, p, launch);
        p.lda = round_up(la == MatLayout::RowMajor ? s.k : s.m, vec) + vec;
        p.ldb += vec;
        p.ldc = s.n + 3;
        p.batch = 2;
        p.stride_a = uint64_t(p.lda) * (la == MatLayout::RowMajor ? s.m : s.k) + vec;
        p.stride_b = uint64_t(p.ldb) * (lb == MatLayout::RowMajor ? s.k : s.n) + 2 * vec;
        p.stride_c = uint64_t(p.ldc) * s.m + 5;
        p.alpha = -1.5f;
        p.beta = 0.75f;
        run<In, Out>(v, p, launch);
        if (!std::is_same_v<Out, float> || s.k < 64) continue;
        p.split_k = 3;  // chunks of 64 (k = 70: the second short, the third empty)
        run<In, Out>(v, p, launch);
      }
  }
}

template <class In, class Out>
void run_all(std::span<const Shape> shapes, bool launch) {
  for (const ops::MatmulVariant* v : gemv_variants()) run_shapes<In, Out>(*v, shapes, launch);
}

}  // namespace

TEST_CASE("matmul gemv: every row in the interpreter at odd shapes, every layout and type, alpha/beta, batches, split-K", "[ops][matmul][gemv][interp]") {
  REQUIRE(gemv_variants().size() >= 3);
  run_all<float, float>(kOdd, false);
  run_all<half, float>(kOdd, false);
  run_all<bfloat16, float>(kOdd, false);
  run_all<half, half>(kOdd, false);
  run_all<bfloat16, bfloat16>(kOdd, false);
}

TEST_CASE("matmul gemv: the last block's columns past n and a k that fills no step", "[ops][matmul][gemv][interp]") {
  // n one past a block (row-major B: the last thread's vector crosses n; col-major: a warp's
  // columns past n), k below one step, rows of A past m in the block (m < BM)
  for (const ops::MatmulVariant* v : gemv_variants())
    for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
      MatmulProblem p{.m = std::max(1u, v->bm - 1), .n = v->lanes * 8 + 3, .k = 9, .in = ir::Scalar::BF16, .b = lb, .beta = 0.5f};
      p.ldb = round_up(lb == MatLayout::RowMajor ? p.n : p.k, 8);
      run<bfloat16, float>(*v, p, false);
      p.in = ir::Scalar::F32;
      run<float, float>(*v, p, false);
    }
}

TEST_CASE("matmul gemv: rows of other shapes (one warp, one thread per row, 32 columns a warp, 2-row steps) compute the same", "[ops][matmul][gemv][interp]") {
  // not in the table: the builder is general in BM, TM, TN and BK. 2-row steps read 16-bit A
  // as single pairs; TN = 32 leaves no k groups within a warp (no shuffles); TM = 1 no
  // shared-memory sum across warps
  static constexpr ops::MatmulVariant kRows[] = {
      {.name = "test_m2_w1_n1_k2", .engine = ops::MatmulEngine::Gemv, .bm = 2, .bk = 2, .warps = 1, .lanes = 1},
      {.name = "test_m3_w2_n32_k32", .engine = ops::MatmulEngine::Gemv, .bm = 3, .bk = 32, .warps = 2, .lanes = 32}};
  static constexpr Shape kShapes[] = {{2, 37, 75}, {3, 70, 300}};
  for (const ops::MatmulVariant& v : kRows) {
    run_shapes<float, float>(v, kShapes, false);
    run_shapes<half, float>(v, kShapes, false);
    run_shapes<bfloat16, bfloat16>(v, kShapes, false);
  }
}

TEST_CASE("matmul gemv: A read as vectors in one batch and element by element in another", "[ops][matmul][gemv][interp]") {
  // lda a multiple of the vector, A's batch stride odd: batch 0's rows start on vectors,
  // batch 1's do not (the check is per block)
  for (const ops::MatmulVariant* v : gemv_variants())
    for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
      MatmulProblem p{.m = v->bm, .n = 40, .k = 96, .in = ir::Scalar::F16, .b = lb, .lda = 104, .batch = 2};
      p.stride_a = uint64_t(p.lda) * p.m + 1;
      run<half, float>(*v, p, false);
      p.in = ir::Scalar::F32;
      run<float, float>(*v, p, false);
    }
}

TEST_CASE("matmul gemv: every kernel assembles for sm_80 and sm_90 with 16-byte loads and no local memory", "[ops][matmul][gemv][nvjitlink]") {
  // every row, input type and layout for sm_90 (the output type changes only the epilogue:
  // f32, f32 and bf16 here), row/row of each for sm_80 (bf16's conversions differ there)
  struct Types { ir::Scalar in, out; };
  for (const ops::MatmulVariant* v : gemv_variants())
    for (Types t : {Types{ir::Scalar::F32, ir::Scalar::F32}, Types{ir::Scalar::F16, ir::Scalar::F32},
                    Types{ir::Scalar::BF16, ir::Scalar::BF16}})
      for (MatLayout la : {MatLayout::RowMajor, MatLayout::ColMajor})
        for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor})
          for (const char* arch : {"sm_80", "sm_90"}) {
            const bool row_row = la == MatLayout::RowMajor && lb == MatLayout::RowMajor;
            if (std::string(arch) == "sm_80" && !row_row) continue;
            ir::Kernel k = ops::matmul_kernel({index_of(*v), t.in, t.out, la, lb});
            INFO(k.name() << " " << ir::scalar_name(t.in) << " -> " << ir::scalar_name(t.out) << " for " << arch);
            const std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
            CHECK(ptx.find(".local") == std::string::npos);
            CHECK_THAT(ptx, Contains(t.in == ir::Scalar::F32 ? "ld.global.nc.v4.f32" : "ld.global.nc.v4.b32"));
            const jit::LinkResult r = test::link_ptx(ptx, arch, k.name());
            const jit::Resources res = jit::parse_resources(r.info_log, 0);
            CHECK(res.local_bytes == 0);
            CHECK(res.spill_stores == 0);
            CHECK(res.registers > 0);
          }
}

TEST_CASE("matmul gemv: can_implement refuses what the engine cannot serve, and says why", "[ops][matmul][gemv]") {
  const ops::MatmulVariant& m1 = ops::matmul_variant("gemv_m1_w8_n4_k8");
  const ops::MatmulVariant& m8 = ops::matmul_variant("gemv_m8_w8_n4_k4");
  std::string why;
  CHECK(m1.can_implement({.m = 1, .n = 4096, .k = 4096}, 90));
  CHECK(m1.can_implement({.m = 1, .n = 4096, .k = 4096, .in = ir::Scalar::BF16, .out = ir::Scalar::BF16}, 80));
  CHECK_FALSE(m1.can_implement({.m = 2, .n = 4096, .k = 4096}, 90, &why));
  CHECK_THAT(why, Contains("gemv_m1_w8_n4_k8") && Contains("m <= 1 rows of A, got m = 2"));
  CHECK(m8.can_implement({.m = 8, .n = 64, .k = 64}, 90));
  CHECK_FALSE(m8.can_implement({.m = 9, .n = 64, .k = 64}, 90, &why));
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 33, .k = 64, .in = ir::Scalar::F16}, 90, &why));
  CHECK_THAT(why, Contains("ldb must be a multiple of 8 elements, got 33"));
  CHECK(m8.can_implement({.m = 4, .n = 33, .k = 64, .in = ir::Scalar::F16, .ldb = 40}, 90));
  CHECK(m8.can_implement({.m = 4, .n = 33, .k = 64, .in = ir::Scalar::F16, .b = MatLayout::ColMajor}, 90));  // ldb = k
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 32, .k = 64, .ptr_align = 8}, 90, &why));
  CHECK_THAT(why, Contains("16-byte aligned"));
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 32, .k = 64, .ldb = 32, .batch = 2, .stride_b = 2050}, 90, &why));
  CHECK_THAT(why, Contains("batch stride"));
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 32, .k = 64, .in = ir::Scalar::F16, .out = ir::Scalar::BF16}, 90, &why));
  CHECK_THAT(why, Contains("the output is f32 or the input type"));
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 32, .k = 64, .in = ir::Scalar::S8}, 90, &why));
  CHECK_THAT(why, Contains("f32, f16 or bf16 inputs"));
  CHECK_FALSE(m8.can_implement({.m = 4, .n = 32, .k = 64, .in = ir::Scalar::F16, .out = ir::Scalar::F16, .split_k = 2}, 90, &why));
  CHECK_THAT(why, Contains("split-K"));
}

TEST_CASE("matmul gemv: ops::matmul on the device at skinny and edge shapes", "[gpu][ops][matmul][gemv]") {
  if (jit::interpret_mode()) {  // the launch path, small
    static constexpr Shape kSmall[] = {{1, 33, 65}, {3, 129, 70}};
    run_all<float, float>(kSmall, true);
    run_all<half, half>(kSmall, true);
    run_all<bfloat16, float>(kSmall, true);
    return;
  }
  static constexpr Shape kEdges[] = {{1, 1, 1}, {1, 33, 65}, {3, 129, 70}, {8, 257, 1000}, {5, 4095, 4097}};
  run_all<float, float>(kEdges, true);
  run_all<half, float>(kEdges, true);
  run_all<half, half>(kEdges, true);
  run_all<bfloat16, bfloat16>(kEdges, true);
  for (const ops::MatmulVariant* v : gemv_variants())
    for (MatLayout lb : {MatLayout::RowMajor, MatLayout::ColMajor}) {
      for (Shape s : {Shape{1, 4096, 4096}, Shape{4, 11008, 4096}}) {
        if (s.m > v->bm) continue;
        MatmulProblem p{.m = s.m, .n = s.n, .k = s.k, .b = lb};
        run<float, float>(*v, p, true);
        p.in = p.out = ir::Scalar::BF16;
        run<bfloat16, bfloat16>(*v, p, true);
        p.in = ir::Scalar::F16, p.out = ir::Scalar::F32;
        run<half, float>(*v, p, true);
      }
    }
}
