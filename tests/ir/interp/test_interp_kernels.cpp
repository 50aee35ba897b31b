// The CPU interpreter on whole kernels: the catalog and test kernels, divergent control
// flow, partial and 3D blocks, the out-of-bounds diagnostic, argument checks, host threads.
#include <catch2/catch.hpp>

#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "interp_support.h"

using namespace kaio;
using namespace kaio::test::interp;
using Catch::Matchers::Contains;
using kaio::test::usage_error_of;

// ---------------- the test kernels ----------------

TEST_CASE("interp: the catalog kernels against float64", "[interp]") {
  constexpr double eps = 1.0 / (1 << 23);
  SECTION("saxpy") {
    const uint32_t n = 5000;
    auto xd = random_doubles(n, -4, 4), yd = random_doubles(n, -4, 4);
    std::vector<float> x(xd.begin(), xd.end()), y(yd.begin(), yd.end()), y0 = y;
    float a = 1.75f;
    ir::interpret(ops::saxpy_kernel(), shape_for(n, 256), a, x, y, n);
    for (uint32_t i = 0; i < n; ++i) {
      double r = double(a) * x[i] + y0[i];
      CHECK(std::fabs(y[i] - r) <= eps * (std::fabs(double(a) * x[i]) + std::fabs(y0[i])));
    }
  }
  SECTION("silu gate") {
    const uint32_t n = 3000;
    auto xd = random_doubles(n, -20, 20), gd = random_doubles(n, -4, 4);
    std::vector<float> x(xd.begin(), xd.end()), g(gd.begin(), gd.end()), out(n, NAN);
    ir::interpret(ops::silu_gate_kernel(), shape_for(n, 128), x, g, out, n);
    for (uint32_t i = 0; i < n; ++i) {
      double r = double(x[i]) / (1 + std::exp(-double(x[i]))) * g[i];
      CHECK(std::fabs(out[i] - r) <= 6 * eps * std::fabs(r) + 1e-37);
    }
  }
  SECTION("axpby 2D with padding") {
    const uint32_t rows = 37, cols = 45, ld = 48;
    auto ad = random_doubles(rows * ld, -4, 4), bd = random_doubles(rows * ld, -4, 4);
    std::vector<float> a(ad.begin(), ad.end()), b(bd.begin(), bd.end()), c(rows * ld);
    poison(c);
    std::vector<float> c0 = c;
    float alpha = 0.75f;
    ir::interpret(ops::axpby_2d_kernel(), {.grid = {(cols + 15) / 16, (rows + 7) / 8}, .block = {16, 8}}, a, b, c, alpha,
                  rows, cols, ld);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t col = 0; col < ld; ++col) {
        size_t i = size_t(r) * ld + col;
        if (col >= cols) {
          CHECK(raw_bits(c[i]) == raw_bits(c0[i]));
          continue;
        }
        CHECK(c[i] == std::fma(alpha, b[i], a[i]));
      }
  }
  SECTION("row sums (a loop)") {
    const uint32_t rows = 300, cols = 41;
    auto md = random_doubles(size_t(rows) * cols, -4, 4);
    std::vector<float> m(md.begin(), md.end()), sums(rows, NAN);
    ir::interpret(ops::row_sum_kernel(), shape_for(rows, 32), m, sums, rows, cols);
    for (uint32_t r = 0; r < rows; ++r) {
      double s = 0, sa = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        s += m[size_t(r) * cols + c];
        sa += std::fabs(m[size_t(r) * cols + c]);
      }
      CHECK(std::fabs(sums[r] - s) <= cols * eps * sa);
    }
  }
}

TEST_CASE("interp: the control kernel (loops, while, if/else, early return, 3D) exactly", "[interp]") {
  ir::Kernel k = test::control_kernel();
  const uint32_t gx = 3, gy = 2, gz = 2, bx = 8, by = 4, bz = 3, total = gx * gy * gz * bx * by * bz;
  for (int32_t n : {0, 1, 23, 100}) {
    for (bool flag : {true, false}) {
      std::vector<int32_t> out(total, -7);
      ir::interpret(k, {.grid = {gx, gy, gz}, .block = {bx, by, bz}}, out, n, flag);
      int32_t acc = 0;
      for (int32_t i = 0; i < n; i += 3) acc += (i % 2 == 0) ? i : -1;
      int32_t w = 1;
      while (w < n) w *= 2;
      std::vector<int32_t> want(total, -7);
      if (flag)
        for (uint32_t x = 0; x < gx * bx; ++x)
          for (uint32_t y = 0; y < gy * by; ++y)
            for (uint32_t z = 0; z < gz * bz; ++z) want[x + y * gx + z * gx * gy] = acc + w;
      CHECK(out == want);
    }
  }
}

namespace {

// The all_ops chain for an integer type on the host (PTX semantics).
template <class T>
T all_ops_ref(T x, T y) {
  using R = IntRef<T>;
  auto sat = [](double v) -> T {  // rzi, saturating (integer inputs: never NaN)
    if (std::isnan(v)) return 0;
    v = std::trunc(v);
    if (v <= double(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= std::ldexp(1.0, std::numeric_limits<T>::digits)) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  };
  T acc = x;
  acc = R::add(acc, y);
  acc = R::sub(acc, y);
  acc = R::mul(acc, y);
  acc = R::div(acc, 1);
  acc = std::min(acc, y);
  acc = std::max(acc, y);
  acc = R::rem(acc, 1);
  acc = T(T(acc & y) | T(acc ^ y));
  acc = T(~acc);
  acc = R::shr(R::shl(acc, 1), 1);
  if (std::is_signed_v<T>) {
    acc = R::sub(0, acc);
    acc = acc < 0 ? R::sub(0, acc) : acc;
  }
  T a0 = acc;
  bool cs[] = {a0 < y, a0 <= y, a0 > y, a0 >= y, a0 == y, a0 != y};
  for (bool c : cs) acc = c ? acc : y;
  bool p = ((acc < y) && !(x == y)) || (x > y);
  acc = (p == (y > x)) ? acc : x;
  acc = (p ? p : x < y) ? acc : y;
  acc = R::add(acc, T(int8_t(acc)));
  acc = R::add(acc, T(int16_t(acc)));
  acc = R::add(acc, T(int32_t(acc)));
  acc = R::add(acc, T(int64_t(acc)));
  acc = R::add(acc, T(uint8_t(acc)));
  acc = R::add(acc, T(uint16_t(acc)));
  acc = R::add(acc, T(uint32_t(acc)));
  acc = R::add(acc, T(uint64_t(acc)));
  acc = R::add(acc, sat(double(float(kaio::half(float(acc))))));
  acc = R::add(acc, sat(double(float(kaio::bfloat16(float(acc))))));
  acc = R::add(acc, sat(double(float(acc))));
  acc = R::add(acc, sat(double(acc)));
  acc = R::add(acc, T(acc != 0 ? 1 : 0));
  return acc;
}

template <class T>
void check_all_ops_int(Scalar s) {
  INFO(ir::scalar_name(s));
  const uint32_t n = 700;
  auto in = random_ints<T>(n + 1);
  std::vector<T> out(n);
  poison(out);
  ir::interpret(test::all_ops_kernel(s), shape_for(n, 96), in, out, n);
  size_t bad = 0;
  for (uint32_t i = 0; i < n; ++i) {
    T want = all_ops_ref<T>(in[i], in[i + 1]);
    if (out[i] != want && bad++ < 3) UNSCOPED_INFO("i=" << i << " got " << int64_t(out[i]) << " want " << int64_t(want));
  }
  CHECK(bad == 0);
}

// Float all_ops kernels: the same run on 1 and on 4 host threads, and with the block split
// differently, gives the same bits (lanes and warps are independent), and every output is
// written.
template <class T>
void check_all_ops_float(Scalar s) {
  INFO(ir::scalar_name(s));
  const uint32_t n = 500;
  auto in = random_floats_of<T>(n + 1, -3, 3);
  std::vector<T> a(n), b(n);
  poison(a);
  poison(b);
  std::vector<T> a0 = a;
  ir::Kernel k = test::all_ops_kernel(s);
  ir::interp::HostArg args1[] = {ir::interp::host_arg(in), ir::interp::host_arg(a), ir::interp::host_arg(n)};
  ir::interp::interpret_packed(k, shape_for(n, 32), args1, 3, {.threads = 1});
  ir::interp::HostArg args2[] = {ir::interp::host_arg(in), ir::interp::host_arg(b), ir::interp::host_arg(n)};
  ir::interp::interpret_packed(k, shape_for(n, 96), args2, 3, {.threads = 4});
  size_t differ = 0, unwritten = 0;
  for (uint32_t i = 0; i < n; ++i) {
    differ += raw_bits(a[i]) != raw_bits(b[i]);
    unwritten += raw_bits(a[i]) == raw_bits(a0[i]);
  }
  CHECK(differ == 0);
  CHECK(unwritten == 0);
}

}  // namespace

TEST_CASE("interp: the all_ops kernels (every op, every conversion)", "[interp]") {
  check_all_ops_int<int8_t>(Scalar::S8);
  check_all_ops_int<int16_t>(Scalar::S16);
  check_all_ops_int<int32_t>(Scalar::S32);
  check_all_ops_int<int64_t>(Scalar::S64);
  check_all_ops_int<uint8_t>(Scalar::U8);
  check_all_ops_int<uint16_t>(Scalar::U16);
  check_all_ops_int<uint32_t>(Scalar::U32);
  check_all_ops_int<uint64_t>(Scalar::U64);
  check_all_ops_float<kaio::half>(Scalar::F16);
  check_all_ops_float<kaio::bfloat16>(Scalar::BF16);
  check_all_ops_float<float>(Scalar::F32);
  check_all_ops_float<double>(Scalar::F64);
}

// ---------------- divergence ----------------

TEST_CASE("interp: divergent if/else, lane-dependent loops, early return, while", "[interp]") {
  ir::KernelBuilder b("diverge");
  auto out = b.param<int32_t*>("out");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i >= n, [&] { b.return_(); });
  Value t = ir::cast<int32_t>(i);
  auto acc = b.var<int32_t>(0);
  // if/else per lane, nested
  b.if_(t % 2 == 0, [&] {
    acc += 1000;
    b.if_(t % 4 == 0, [&] { acc += 10; }).else_([&] { acc += 20; });
  }).else_([&] {
    acc -= 1000;
    b.if_(t % 3 == 0, [&] { b.return_(); });  // these lanes stop here: out[i] stays poisoned
  });
  // a loop with a lane-dependent trip count and an early return inside
  b.for_(0, t % 7, [&](Value k) {
    acc += k;
    b.if_(t == 41, [&] { b.return_(); });
  });
  // while with a lane-dependent condition
  auto w = b.var<int32_t>(1);
  b.while_([&] { return w < t; }, [&] { w = w * 3; });
  out[i] = acc + w;
  ir::Kernel k = b.build();

  const uint32_t count = 200;
  std::vector<int32_t> o(256, -7);
  ir::interpret(k, {.grid = {4}, .block = {64}}, o, count);
  for (int32_t t = 0; t < 256; ++t) {
    INFO("thread " << t);
    int32_t want;
    if (uint32_t(t) >= count) {
      want = -7;
    } else if (t % 2 != 0 && t % 3 == 0) {
      want = -7;
    } else if (t == 41 && t % 7 > 0) {
      want = -7;
    } else {
      int32_t acc = t % 2 == 0 ? 1000 + (t % 4 == 0 ? 10 : 20) : -1000;
      for (int32_t q = 0; q < t % 7; ++q) acc += q;
      int32_t w = 1;
      while (w < t) w *= 3;
      want = acc + w;
    }
    CHECK(o[t] == want);
  }
}

TEST_CASE("interp: a block that is not a multiple of 32 threads, and a 3D block", "[interp]") {
  ir::KernelBuilder b("ids");
  auto out = b.param<uint32_t*>("out");
  auto x = b.global_id_x();
  auto y = b.global_id_y();
  auto z = b.global_id_z();
  Value w = b.grid_dim_x() * b.block_dim_x();
  Value h = b.grid_dim_y() * b.block_dim_y();
  Value idx = (z * h + y) * w + x;
  out[idx] = idx;
  ir::Kernel k = b.build();
  const uint32_t bx = 5, by = 3, bz = 7, gx = 2, gy = 3, gz = 2;
  size_t total = size_t(bx) * by * bz * gx * gy * gz;
  std::vector<uint32_t> o(total, 0xdeadbeef);
  ir::interpret(k, {.grid = {gx, gy, gz}, .block = {bx, by, bz}}, o);
  for (size_t i = 0; i < total; ++i) CHECK(o[i] == i);
}

// ---------------- diagnostics ----------------

TEST_CASE("interp: an out-of-bounds access names kernel, op, block, thread and index", "[interp]") {
  ir::KernelBuilder b("oob");
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value xi = x[i];
    y[i] = xi;
  });
  ir::Kernel k = b.build();
  std::vector<float> xs(100, 1.0f), ys(90, 0.0f);
  try {
    // n = 91 but y holds 90: thread 26 of block 2 (global 90) stores past the end.
    ir::interpret(k, {.grid = {4}, .block = {32}}, xs, ys, 91u);
    FAIL("expected UsageError");
  } catch (const UsageError& e) {
    CHECK(e.kernel() == "oob");
    CHECK(e.op() == "store");
    CHECK_THAT(e.what(), Contains("block (2, 0, 0), thread (26, 0, 0)"));
    CHECK_THAT(e.what(), Contains("index 90"));
    CHECK_THAT(e.what(), Contains("'y'"));
    CHECK_THAT(e.what(), Contains("90 elements"));
  }
  // a load before the start, through a signed index
  ir::KernelBuilder b2("oob_neg");
  auto p = b2.param<const int32_t*>("p");
  auto q = b2.param<int32_t*>("q");
  auto t = ir::cast<int32_t>(b2.thread_idx_x());
  Value v = p[t - 3];
  q[t] = v;
  ir::Kernel k2 = b2.build();
  std::vector<int32_t> ps(8, 1), qs(8, 0);
  try {
    ir::interpret(k2, {.grid = {1}, .block = {8}}, ps, qs);
    FAIL("expected UsageError");
  } catch (const UsageError& e) {
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("thread (0, 0, 0)"));
    CHECK_THAT(e.what(), Contains("index -3"));
    CHECK_THAT(e.what(), Contains("before the start"));
  }
  // a pointer that is in no known allocation
  ir::interp::HostArg args[] = {
      ir::interp::HostArg{ir::interp::HostArg::Buffer, Scalar::F32, false, 0, 0x1000, 400},
      ir::interp::host_arg(ys), ir::interp::host_arg(1u)};
  args[0].bytes = 0;  // not registered
  try {
    ir::interp::interpret_packed(k, {.grid = {1}, .block = {32}}, args, 3);
    FAIL("expected UsageError");
  } catch (const UsageError& e) {
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("not inside any allocation"));
    CHECK_THAT(e.what(), Contains("0x1000"));
  }
}

TEST_CASE("interp: argument and shape checks", "[interp]") {
  ir::Kernel k = ops::saxpy_kernel();
  std::vector<float> x(4), y(4);
  const std::vector<float>& cy = y;
  CHECK_THROWS_WITH(ir::interpret(k, {.grid = {1}, .block = {4}}, 1.0f, x, y), Contains("expected 4 arguments"));
  CHECK_THROWS_WITH(ir::interpret(k, {.grid = {1}, .block = {4}}, 1.0f, x, cy, 4u), Contains("non-const"));
  CHECK_THROWS_WITH(ir::interpret(k, {.grid = {1}, .block = {4}}, 1.0, x, y, 4u), Contains("a double"));
  CHECK_THROWS_WITH(ir::interpret(k, {.grid = {1}, .block = {2048}}, 1.0f, x, y, 4u), Contains("block"));
  CHECK_THROWS_WITH(ir::interpret(k, {.grid = {0}, .block = {4}}, 1.0f, x, y, 4u), Contains("grid"));
}

TEST_CASE("interp: many blocks on several host threads", "[interp]") {
  const uint32_t n = 100000;
  std::vector<float> x(n), y(n), y1, y4;
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = float(i % 1000) * 0.5f;
    y[i] = float(i % 77);
  }
  y1 = y;
  y4 = y;
  ir::interp::HostArg a1[] = {ir::interp::host_arg(2.0f), ir::interp::host_arg(x), ir::interp::host_arg(y1), ir::interp::host_arg(n)};
  ir::interp::HostArg a4[] = {ir::interp::host_arg(2.0f), ir::interp::host_arg(x), ir::interp::host_arg(y4), ir::interp::host_arg(n)};
  auto s1 = ir::interp::interpret_packed(ops::saxpy_kernel(), shape_for(n, 128), a1, 4, {.threads = 1});
  auto s4 = ir::interp::interpret_packed(ops::saxpy_kernel(), shape_for(n, 128), a4, 4, {.threads = 4});
  CHECK(y1 == y4);
  CHECK(s4.threads == 4);
  CHECK(s1.thread_instructions == s4.thread_instructions);
  CHECK(s1.thread_instructions >= uint64_t(n) * 5);
  for (uint32_t i = 0; i < n; ++i) REQUIRE(y1[i] == 2.0f * x[i] + y[i]);
}


// ---------------- the program cache ----------------

TEST_CASE("interp: the program cache stays within its bound; evicted programs are rebuilt", "[interp]") {
  // Kernels that differ in a constant: each has its own hash, so its own program.
  auto add_k = [](uint32_t k) {
    ir::KernelBuilder b("interp_cache_add");
    auto x = b.param<uint32_t*>("x");
    auto i = b.thread_idx_x();
    ir::Value xi = x[i];
    x[i] = xi + b.constant(k);
    return b.build();
  };
  ir::interp::set_program_cache_capacity(8);
  std::vector<uint32_t> x(32);
  const ir::Kernel first = add_k(1000);
  for (uint32_t k = 0; k < 40; ++k) {
    std::fill(x.begin(), x.end(), 7u);
    ir::interpret(add_k(k), {.grid = {1}, .block = {32}}, x);
    CHECK(x[31] == 7 + k);  // a program evicted and rebuilt still runs the right kernel
    std::fill(x.begin(), x.end(), 1u);
    ir::interpret(first, {.grid = {1}, .block = {32}}, x);  // kept warm: most recently used
    CHECK(x[0] == 1001);
    CHECK(ir::interp::program_cache_size() <= 8);
  }
  ir::interp::set_program_cache_capacity(ir::interp::kDefaultProgramCacheCapacity);
}
