// Row and whole-array reductions: every op in f32, f16 and bf16 at 1x1, 3x17, 67x1025 and
// rows long enough for each team size, dense, strided (row stride not a multiple of the
// vector) and misaligned (one element off), against float64; outputs poisoned first;
// argmax ties and NaN; the whole-array reduction bit-identical across runs; bad input is a
// UsageError naming the op and the argument; the non-declared kernel variants assemble for
// sm_80 and sm_90. [gpu]: a device or KAIO_INTERPRET=1 (8192x8192 and decode shapes on a
// device only).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/ops/reduction.h"
#include "ops_support.h"
#include "../link_memo.h"

using namespace kaio;
using namespace kaio::test::ops;
using ops::Reduce;

namespace {

struct Shape {
  uint32_t rows, cols;
  uint64_t ld;
  size_t offset;
};

// Sum error: each thread adds at most cols / 32 + 16 elements in sequence, then a tree of
// at most 10 levels; each addition errs by at most u times the magnitude summed so far.
double sum_tol(uint32_t cols, double mag) { return (cols / 32.0 + 32) * kU32 * mag; }

template <class T>
size_t check_rows(Reduce op, const Shape& s) {
  const size_t span = size_t(s.rows - 1) * s.ld + s.cols;
  Slice<T> x(span, s.offset);
  std::vector<T> hx = random_vec<T>(span, -4, 4);
  x.upload(hx);
  size_t bad = 0;
  if (op == Reduce::ArgMax) {
    Slice<int64_t> out(s.rows, 0);
    out.poison();
    ops::argmax_rows<T>(out.address(), x.address(), s.rows, s.cols, s.ld);
    std::vector<int64_t> got = out.download();
    for (uint32_t r = 0; r < s.rows; ++r) {
      int64_t best = 0;
      for (uint32_t c = 1; c < s.cols; ++c)  // the first maximum (bf16 and f16 data have many ties)
        if (as_double(hx[r * s.ld + c]) > as_double(hx[r * s.ld + best])) best = c;
      if (got[r] != best) {
        if (bad < 5) UNSCOPED_INFO("row " << r << ": got " << got[r] << ", expected " << best);
        ++bad;
      }
    }
    CHECK(out.guards_intact());
    return bad;
  }
  Slice<float> out(s.rows, 0);
  out.poison();
  ops::reduce_rows<T>(op, out.address(), x.address(), s.rows, s.cols, s.ld);
  std::vector<float> got = out.download();
  for (uint32_t r = 0; r < s.rows; ++r) {
    double sum = 0, mag = 0, mx = -INFINITY, mn = INFINITY;
    for (uint32_t c = 0; c < s.cols; ++c) {
      double v = as_double(hx[r * s.ld + c]);
      sum += v;
      mag += std::fabs(v);
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    double ref = op == Reduce::Sum ? sum : op == Reduce::Mean ? sum / s.cols : op == Reduce::Max ? mx : mn;
    // max/min are exact; mean is the sum's error / cols plus one division.
    double tol = op == Reduce::Sum ? sum_tol(s.cols, mag)
                 : op == Reduce::Mean ? sum_tol(s.cols, mag) / s.cols + 2 * kU32 * std::fabs(ref)
                                      : 0.0;
    if (!(std::fabs(double(got[r]) - ref) <= tol)) {
      if (bad < 5) UNSCOPED_INFO("row " << r << ": got " << got[r] << ", expected " << ref << " +- " << tol);
      ++bad;
    }
  }
  CHECK(out.guards_intact());
  return bad;
}

const Reduce kRowOps[] = {Reduce::Sum, Reduce::Max, Reduce::Min, Reduce::Mean, Reduce::ArgMax};

}  // namespace

TEMPLATE_TEST_CASE("row reductions against float64: edge shapes, every team size, strided and misaligned rows",
                   "[gpu][ops][reduction]", float, kaio::half, kaio::bfloat16) {
  using T = TestType;
  const std::vector<Shape> shapes = {
      {1, 1, 1, 0},        {3, 17, 17, 0},        {67, 1025, 1025, 0},  // warp per row / block of 128
      {3, 17, 20, 1},      {67, 1025, 1027, 0},   {5, 1000, 1000, 1},   // strided; misaligned
      {4, 4099, 4104, 0},  {3, 9001, 9001, 0},    {2, 20000, 20000, 1},  // blocks of 128, 256, 1024
      {40, 64, 64, 0},     {3, 8192, 8192, 0},    {2, 16000, 16000, 0},  // several warps per block; 256
  };
  for (Reduce op : kRowOps)
    for (const Shape& s : shapes) {
      INFO(ops::reduce_name(op) << " " << type_name<T>() << " " << s.rows << "x" << s.cols << " ld " << s.ld
                                << " offset " << s.offset);
      CHECK(check_rows<T>(op, s) == 0);
    }
}

TEST_CASE("row reductions: the strategy follows the row length and the alignment", "[ops][reduction]") {
  const uint64_t a = 0x10000;
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 100, 1024, 1024, a).team == 32);
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 100, 4096, 4096, a).team == 128);
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 100, 8192, 8192, a).team == 256);
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 1, 100000, 100000, a).team == 1024);
  CHECK(ops::row_reduce_config(ir::Scalar::BF16, Reduce::Sum, 100, 8192, 8192, a).team == 128);  // 1024 vectors
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 100, 1024, 1025, a).team == 128);  // 1024 single loads
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 8, 64, 64, a).vec == 4);
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 8, 64, 66, a).vec == 2);   // rows 8 bytes apart
  CHECK(ops::row_reduce_config(ir::Scalar::F32, Reduce::Sum, 8, 64, 64, a + 4).vec == 1);
  CHECK(ops::row_reduce_config(ir::Scalar::BF16, Reduce::Max, 8, 64, 64, a).vec == 8);
  CHECK(ops::row_reduce_config(ir::Scalar::BF16, Reduce::Max, 8, 64, 68, a).vec == 4);
  ops::ReduceAllConfig c = ops::reduce_all_config(ir::Scalar::F32, Reduce::Sum, a);
  CHECK(c.vec == 4);
  CHECK(ops::reduce_all_blocks(c, 1) == 1);
  CHECK(ops::reduce_all_blocks(c, 256 * 8 * 4) == 1);
  CHECK(ops::reduce_all_blocks(c, 256 * 8 * 4 + 1) == 2);
  CHECK(ops::reduce_all_blocks(c, size_t(1) << 32) == ops::kReduceMaxBlocks);
}

TEMPLATE_TEST_CASE("argmax_rows: ties give the first index, NaN counts as the largest", "[gpu][ops][reduction]", float,
                   kaio::bfloat16) {
  using T = TestType;
  const uint32_t cols = 300;
  std::vector<T> h(3 * cols, T(1.0f));
  h[0 * cols + 7] = T(2.0f);
  h[0 * cols + 200] = T(2.0f);  // tie: 7 wins
  h[1 * cols + 250] = T(std::numeric_limits<float>::quiet_NaN());
  h[1 * cols + 299] = T(std::numeric_limits<float>::quiet_NaN());
  h[1 * cols + 5] = T(3.0f);  // NaN beats 3
  for (uint32_t c = 0; c < cols; ++c) h[2 * cols + c] = T(-std::numeric_limits<float>::infinity());  // all -inf: 0
  DeviceBuffer<T> x(h);
  DeviceBuffer<int64_t> out(3);
  out.fill_bytes(0xFF);
  ops::argmax_rows<T>(out, x, 3, cols);
  CHECK(out.to_host() == std::vector<int64_t>{7, 250, 0});
  // Later calls of the config are family hits: no builder runs.
  const uint64_t builds = ops::reduce_rows_family().builds();
  for (int i = 0; i < 3; ++i) ops::argmax_rows<T>(out, x, 3, cols);
  CHECK(ops::reduce_rows_family().builds() == builds);
}

TEMPLATE_TEST_CASE("argmax_rows on long rows: the winner, ties, NaN and inf in later chunks of a thread",
                   "[gpu][ops][reduction]", float, kaio::half, kaio::bfloat16) {
  // 16384 columns: every thread walks several unrolled chunks, most of which cannot change
  // the result; the special values sit in chunks after the first.
  using T = TestType;
  const uint32_t cols = 16384, rows = 7;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<T> h(size_t(rows) * cols, T(1.0f));
  h[0 * cols + 9000] = T(2.0f);
  h[0 * cols + 12000] = T(2.0f);  // tie: 9000
  h[1 * cols + 100] = T(3.0f);
  h[1 * cols + 15000] = T(nan);
  h[1 * cols + 16000] = T(nan);  // NaN beats 3: 15000
  for (uint32_t c = 0; c < cols; ++c) h[2 * cols + c] = T(-inf);  // all -inf: 0
  h[3 * cols + 6000] = T(inf);
  h[3 * cols + 5000] = T(inf);  // inf, twice: 5000
  for (uint32_t c = 0; c < cols; ++c) h[4 * cols + c] = T(-1.0f);
  h[4 * cols + 3] = T(-0.0f);
  h[4 * cols + 10000] = T(0.0f);  // -0 == +0: 3
  for (uint32_t c = 0; c < cols; ++c) h[5 * cols + c] = T(float(c % 1000) / 1000);
  h[5 * cols + 16383] = T(1.5f);  // the last element
  h[6 * cols + 4101] = T(2.0f);
  h[6 * cols + 4098] = T(2.0f);
  h[6 * cols + 4097] = T(2.0f);  // a tie inside one 16-byte vector (one chunk): 4097
  DeviceBuffer<T> x(h);
  DeviceBuffer<int64_t> out(rows);
  out.fill_bytes(0xFF);
  ops::argmax_rows<T>(out, x, rows, cols);
  CHECK(out.to_host() == std::vector<int64_t>{9000, 15000, 0, 5000, 3, 16383, 4097});
}

TEMPLATE_TEST_CASE("whole-array reductions against float64, bit-identical across runs", "[gpu][ops][reduction]", float,
                   kaio::half, kaio::bfloat16) {
  using T = TestType;
  std::vector<size_t> sizes = {1, 3 * 17, 67 * 1025, 200003};
  if (on_device()) sizes.push_back(size_t(8192) * 8192 + 3);
  for (size_t n : sizes)
    for (size_t offset : {size_t(0), size_t(1)})
      for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Min}) {
        INFO(ops::reduce_name(op) << " " << type_name<T>() << " n = " << n << " offset = " << offset);
        Slice<T> x(n, offset);
        std::vector<T> hx = random_vec<T>(n, -4, 4);
        x.upload(hx);
        double sum = 0, mag = 0, mx = -INFINITY, mn = INFINITY;
        for (const T& v : hx) {
          double d = as_double(v);
          sum += d;
          mag += std::fabs(d);
          mx = std::max(mx, d);
          mn = std::min(mn, d);
        }
        // Each thread adds at most n / 256 + 16 elements in sequence (at least 256 threads
        // share the array), then two trees of at most 11 levels.
        double tol = op == Reduce::Sum ? (n / 256.0 + 48) * kU32 * mag : 0.0;
        double ref = op == Reduce::Sum ? sum : op == Reduce::Max ? mx : mn;
        float first = 0;
        for (int run = 0; run < 2; ++run) {
          Slice<float> out(1, 0);
          out.poison();
          ops::reduce<T>(op, out.address(), x.address(), n);
          float got = out.download()[0];
          CHECK(std::fabs(double(got) - ref) <= tol);
          CHECK(out.guards_intact());
          if (run == 0) first = got;
          else CHECK(std::memcmp(&first, &got, sizeof got) == 0);  // deterministic
        }
      }
}

TEST_CASE("reductions at 8192x8192 and the decode shapes (device only)", "[gpu][ops][reduction][large]") {
  if (!on_device()) {
    WARN("interpreted: the large shapes run on a device only (skipped)");
    return;
  }
  for (Shape s : {Shape{8192, 8192, 8192, 0}, Shape{1, 4096, 4096, 0}, Shape{16, 4096, 4096, 0},
                  Shape{128, 4096, 4096, 0}})
    for (Reduce op : kRowOps) {
      INFO(ops::reduce_name(op) << " " << s.rows << "x" << s.cols);
      CHECK(check_rows<float>(op, s) == 0);
      CHECK(check_rows<kaio::bfloat16>(op, s) == 0);
    }
}

TEST_CASE("reductions: bad input is a UsageError naming the op and the argument, before any build",
          "[ops][reduction]") {
  const uint64_t x = 0x10000, out = 0x20000;  // never dereferenced: every call fails its checks
  const uint64_t null = 0;
  const uint64_t builds = ops::reduce_rows_family().builds() + ops::reduce_all_family().builds();
  auto e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Sum, out, null, 4, 8); });
  CHECK(e.op() == "reduce_rows");
  CHECK_THAT(e.what(), Catch::Contains("'x'") && Catch::Contains("null"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Sum, null, x, 4, 8); });
  CHECK_THAT(e.what(), Catch::Contains("'out'"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Sum, out, x, 0, 8); });
  CHECK_THAT(e.what(), Catch::Contains("'rows'"));
  e = test::usage_error_of([&] { ops::reduce_rows<kaio::half>(Reduce::Max, out, x, 4, 0); });
  CHECK_THAT(e.what(), Catch::Contains("'cols'"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Mean, out, x, 4, 8, 7); });
  CHECK_THAT(e.what(), Catch::Contains("'ld'") && Catch::Contains("smaller than the row"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Sum, out, ops::In<float>(x, 30), 4, 8); });
  CHECK_THAT(e.what(), Catch::Contains("'x' holds 30 elements") && Catch::Contains("needs 32"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::Sum, ops::Out<float>(out, 3), x, 4, 8); });
  CHECK_THAT(e.what(), Catch::Contains("'out' holds 3"));
  e = test::usage_error_of([&] { ops::reduce_rows<float>(Reduce::ArgMax, out, x, 4, 8); });
  CHECK_THAT(e.what(), Catch::Contains("'op'") && Catch::Contains("argmax_rows"));
  e = test::usage_error_of([&] { ops::argmax_rows<kaio::bfloat16>(out + 4, x, 4, 8); });  // int64 out, 4-byte aligned
  CHECK(e.op() == "argmax_rows");
  CHECK_THAT(e.what(), Catch::Contains("'out'") && Catch::Contains("not aligned"));
  e = test::usage_error_of([&] { ops::reduce<float>(Reduce::Mean, out, x, 10); });
  CHECK(e.op() == "reduce");
  CHECK_THAT(e.what(), Catch::Contains("'op'"));
  e = test::usage_error_of([&] { ops::reduce<float>(Reduce::Sum, out, x, 0); });
  CHECK_THAT(e.what(), Catch::Contains("'n'"));
  e = test::usage_error_of([&] { ops::reduce<float>(Reduce::Sum, out, ops::In<float>(x, 9), 10); });
  CHECK_THAT(e.what(), Catch::Contains("'x' holds 9"));
  CHECK(ops::reduce_rows_family().builds() + ops::reduce_all_family().builds() == builds);
}

TEST_CASE("reduction kernels outside the declared table assemble for sm_80 and sm_90", "[ops][reduction][nvjitlink]") {
  // The declared table (16-byte vectors) is assembled with the whole catalog; here the
  // narrower vectors a misaligned or strided call uses.
  std::vector<ir::Kernel> ks;
  for (ir::Scalar d : {ir::Scalar::F32, ir::Scalar::F16, ir::Scalar::BF16}) {
    for (Reduce op : kRowOps) ks.push_back(ops::build_reduce_rows({d, op, op == Reduce::Sum ? 32u : 256u, 1}));
    ks.push_back(ops::build_reduce_rows({d, Reduce::ArgMax, 32, 2}));
    for (Reduce op : {Reduce::Sum, Reduce::Max, Reduce::Min}) ks.push_back(ops::build_reduce_all({d, op, 1}));
  }
  ks.push_back(ops::build_reduce_rows({ir::Scalar::BF16, Reduce::Mean, 1024, 4}));
  for (const ir::Kernel& k : ks)
    for (const char* arch : {"sm_80", "sm_90"}) {
      INFO(k.name() << " for " << arch);
      jit::LinkResult r = test::link_ptx(codegen::emit_ptx(k, {arch, 9, 0}), arch, k.name());
      CHECK(r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    }
}
