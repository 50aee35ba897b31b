// [gpu]: the example kernels on the device at n = 1, 17, 1023, 2^24, outputs poisoned
// (0xFF bytes = NaN) before each run, fresh random inputs, compared with float64.
// With KAIO_INTERPRET=1 they run in the CPU interpreter at n = 1, 17, 1023, 2^16.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ir/interp/interp.h"
#include "kaio/ops/reduction.h"
#include "../kernels.h"
#include "../support.h"

using namespace kaio;

namespace {

std::mt19937& rng() {
  return ::kaio::test::rng();
}

std::vector<float> random_floats(size_t n, float lo = -4.f, float hi = 4.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

// The problem sizes: the largest is 2^24 on a device, 2^16 in the interpreter.
std::vector<uint32_t> sizes() {
  if (jit::interpret_mode()) return {1, 17, 1023, 1u << 16};
  return {1, 17, 1023, 1u << 24};
}
uint32_t largest() { return sizes().back(); }

// Counts elements outside |out - ref| <= bound(i); NaN (an unwritten element) always fails.
template <class Ref, class Bound>
size_t count_bad(const std::vector<float>& out, Ref ref, Bound bound) {
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    double r = ref(i);
    if (!(std::fabs(double(out[i]) - r) <= bound(i, r))) {
      if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << out[i] << ", expected " << r);
      ++bad;
    }
  }
  return bad;
}

constexpr double kEps = 1.0 / (1 << 23);  // f32 unit roundoff * 2

}  // namespace

TEST_CASE("saxpy on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel());
  for (uint32_t n : sizes()) {
    INFO("n = " << n);
    auto x = random_floats(n), y = random_floats(n);
    float a = std::uniform_real_distribution<float>(-2.f, 2.f)(rng());
    DeviceBuffer<float> dx(x), dy(n);
    dy.fill_bytes(0xFF);  // poison, then the real input
    dy.upload(y);
    ck.launch({.grid = {(n + 255) / 256}, .block = {256}}, a, dx, dy, n);
    std::vector<float> out = dy.to_host();
    // mul + add (ptxas may fuse them): at most 2 roundings of magnitude <= |a x| + |y|.
    CHECK(count_bad(out, [&](size_t i) { return double(a) * x[i] + double(y[i]); },
                    [&](size_t i, double) { return 2 * kEps * (std::fabs(double(a) * x[i]) + std::fabs(y[i])); }) == 0);
  }
}

TEST_CASE("fused silu-gate on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::silu_gate_kernel());
  for (uint32_t n : sizes()) {
    INFO("n = " << n);
    auto x = random_floats(n, -20.f, 20.f), g = random_floats(n);
    DeviceBuffer<float> dx(x), dg(g), dout(n);
    dout.fill_bytes(0xFF);
    ck.launch({.grid = {(n + 255) / 256}, .block = {256}}, dx, dg, dout, n);
    std::vector<float> out = dout.to_host();
    // exp within 4 ulp, then add, div, mul: relative error <= 8 ulp of f32.
    CHECK(count_bad(out, [&](size_t i) { double xi = x[i]; return xi / (1.0 + std::exp(-xi)) * g[i]; },
                    [&](size_t, double r) { return 8 * kEps * std::fabs(r) + 1e-37; }) == 0);
  }
}

TEST_CASE("a loop kernel (row sums) on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::row_sum_kernel());
  for (uint32_t rows : sizes()) {
    uint32_t cols = rows == largest() ? 3 : 37;
    INFO("rows = " << rows << ", cols = " << cols);
    auto m = random_floats(size_t(rows) * cols);
    DeviceBuffer<float> dm(m), dsum(rows);
    dsum.fill_bytes(0xFF);
    ck.launch({.grid = {(rows + 127) / 128}, .block = {128}}, dm, dsum, rows, cols);
    std::vector<float> out = dsum.to_host();
    auto ref = [&](size_t r) {
      double s = 0;
      for (uint32_t c = 0; c < cols; ++c) s += m[r * cols + c];
      return s;
    };
    // Sequential f32 sum: |error| <= cols * eps * sum |m|.
    auto bound = [&](size_t r, double) {
      double s = 0;
      for (uint32_t c = 0; c < cols; ++c) s += std::fabs(m[r * cols + c]);
      return cols * kEps * s;
    };
    CHECK(count_bad(out, ref, bound) == 0);
  }
}

TEST_CASE("a 2D kernel on the device", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::axpby_2d_kernel());
  struct Shape { uint32_t rows, cols; };
  uint32_t big = jit::interpret_mode() ? 512 : 4096;
  for (Shape s : {Shape{1, 1}, Shape{17, 1}, Shape{1023, 17}, Shape{big, big}}) {
    uint32_t ld = s.cols + 3;  // padded rows: the padding must stay untouched
    INFO("rows = " << s.rows << ", cols = " << s.cols);
    size_t total = size_t(s.rows) * ld;
    auto a = random_floats(total), b = random_floats(total);
    float alpha = 0.75f;
    DeviceBuffer<float> da(a), db(b), dc(total);
    dc.fill_bytes(0xFF);
    ck.launch({.grid = {(s.cols + 31) / 32, (s.rows + 7) / 8}, .block = {32, 8}}, da, db, dc, alpha, s.rows, s.cols, ld);
    std::vector<float> out = dc.to_host();
    size_t bad = 0, pad_touched = 0;
    for (size_t r = 0; r < s.rows; ++r)
      for (size_t c = 0; c < ld; ++c) {
        size_t i = r * ld + c;
        if (c >= s.cols) {
          uint32_t bits;
          std::memcpy(&bits, &out[i], 4);
          pad_touched += bits != 0xFFFFFFFFu;
          continue;
        }
        double ref = double(alpha) * b[i] + a[i];
        bad += !(std::fabs(out[i] - ref) <= kEps * std::fabs(ref) + 1e-37);  // one rounding (fma)
      }
    CHECK(bad == 0);
    CHECK(pad_touched == 0);
  }
}

TEST_CASE("a fresh process launching from a disk hit gives the same results", "[gpu][cache]") {
  test::TempDir dir;
  std::string cmd = "KAIO_CACHE_DIR=" + dir.str() + " " + test::child_exe() + " --arch " +
                    std::string(jit::compile(ops::saxpy_kernel()).arch()) + " --launch 100003";
  test::CommandResult cold = test::run_command(cmd);
  test::CommandResult warm = test::run_command(cmd);
  REQUIRE(cold.status == 0);
  REQUIRE(warm.status == 0);
  std::string key = cold.out.substr(0, 32);
  CHECK(cold.out.substr(32, 3) == " 0\n");
  CHECK(warm.out.substr(0, 35) == key + " 1\n");
  // Same seed, same kernel: the outputs match to the bit (the child prints their error).
  CHECK(cold.out.substr(35) == warm.out.substr(35));
  double err = std::stod(warm.out.substr(warm.out.find("max_rel_err") + 12));
  CHECK(err < 1e-5);
}

TEST_CASE("a kernel compiled for another SM is refused at launch", "[gpu]") {
  const std::string native = jit::compile(ops::saxpy_kernel()).arch();
  const std::string other = native == "sm_80" ? "sm_90" : "sm_80";
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel(), {.arch = other, .use_cache = false});
  DeviceBuffer<float> x(std::vector<float>{1, 2, 3, 4}), y(std::vector<float>{1, 1, 1, 1});
  if (jit::interpret_mode()) {
    // The interpreter runs the IR, whatever SM the kernel was compiled for.
    ck.launch({.grid = {1}, .block = {4}}, 2.0f, x, y, 4u);
    CHECK(y.to_host() == std::vector<float>{3, 5, 7, 9});
  } else {
    CHECK_THROWS_AS(ck.launch({.grid = {1}, .block = {4}}, 1.0f, x, y, 4u), UsageError);
  }
}

TEST_CASE("launches on a stream", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel());
  const uint32_t n = 4099;
  auto x = random_floats(n), y = random_floats(n);
  DeviceBuffer<float> dx(x), dy(y);
  Stream s;
  ck.launch({.grid = {(n + 127) / 128}, .block = {128}, .stream = &s}, 3.0f, dx, dy, n);
  s.synchronize();
  std::vector<float> out = dy.to_host();
  CHECK(count_bad(out, [&](size_t i) { return 3.0 * x[i] + double(y[i]); },
                  [&](size_t i, double) { return 2 * kEps * (std::fabs(3.0 * x[i]) + std::fabs(y[i])); }) == 0);
}

// An upload is done when it returns: a kernel launched straight after it on a kaio stream
// (non-blocking: it does not wait for the default stream) reads the uploaded bytes, not
// what recycled memory held before. cuMemcpyHtoD from pageable memory returns once the
// bytes are staged; without the wait behind it, a block table uploaded into memory a
// previous buffer had filled was read as that buffer's bytes.
TEST_CASE("an upload is seen by the next launch on a kaio stream", "[gpu]") {
  jit::CompiledKernel ck = jit::compile(ops::saxpy_kernel());
  const uint32_t n = 32768;
  Stream s;
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    { DeviceBuffer<float> old(n); old.fill_bytes(0x7f); }  // freed: the next allocation may reuse it
    const std::vector<float> x(n, 1.0f), y = random_floats(n);
    DeviceBuffer<float> dx(x), dy(y);
    ck.launch({.grid = {(n + 127) / 128}, .block = {128}, .stream = &s}, 2.0f, dx, dy, n);
    s.synchronize();
    std::vector<float> out = dy.to_host();
    CHECK(count_bad(out, [&](size_t i) { return 2.0 + double(y[i]); }, [&](size_t i, double) { return 2 * kEps * (2.0 + std::fabs(y[i])); }) == 0);
  }
}

// ---------------- the interpreter against the device ----------------

namespace {

constexpr size_t kExactOps = 10 + 4 * 6 + 4;  // see exact_ops_kernel

// Float ops whose results are correctly rounded on both sides, each stored on its own (no
// approximate math, no mul feeding an add that ptxas could fuse): the interpreter and the
// device must agree to the bit (NaNs as NaNs).
ir::Kernel exact_ops_kernel(ir::Scalar s) {
  using namespace ir;
  Type t = Type::scalar(s);
  KernelBuilder b(std::string("exact_ops_") + scalar_name(s));
  auto in = b.param("in", Type::pointer(s, true));
  auto out = b.param("out", Type::pointer(s, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = in[i];
    Value y = in[i + 1u];
    std::vector<Value> r = {x + y, x - y, x * y, x / y, ir::min(x, y), ir::max(x, y), ir::sqrt(ir::abs(x)),
                            ir::fma(x, y, x), -x, ir::select(x < y, x, y)};
    for (Rounding rr : {Rounding::Rn, Rounding::Rz, Rounding::Rm, Rounding::Rp}) {
      for (Scalar u : {Scalar::S8, Scalar::U16, Scalar::S32, Scalar::U32, Scalar::S64, Scalar::U64}) {
        Value c = ir::cast(x, Type::scalar(u), rr);
        r.push_back(ir::cast(c, t, rr));
      }
    }
    for (Scalar u : {Scalar::F16, Scalar::BF16, Scalar::F32, Scalar::F64, Scalar::Pred}) {
      if (u == s) continue;
      Value c = ir::cast(x, Type::scalar(u));
      r.push_back(ir::cast(c, t));
    }
    Value i64 = ir::cast<uint64_t>(i);
    for (size_t j = 0; j < r.size(); ++j) out[i64 * uint64_t(kExactOps) + uint64_t(j)] = r[j];
  });
  return b.build();
}

template <class T>
uint64_t bits_of(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}
template <class T>
bool is_nan_bits(T v) {
  uint64_t u = bits_of(v);
  if constexpr (std::is_same_v<T, kaio::half>) return (u & 0x7fff) > 0x7c00;
  else if constexpr (std::is_same_v<T, kaio::bfloat16>) return (u & 0x7fff) > 0x7f80;
  else if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

template <class T>
std::vector<T> random_values(size_t n) {
  std::vector<T> v(n);
  if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<int64_t> small(-300, 300);
    std::uniform_int_distribution<uint64_t> any;
    for (size_t i = 0; i < n; ++i) v[i] = i % 2 ? static_cast<T>(small(rng())) : static_cast<T>(any(rng()));
  } else {
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.5f, 2.5f, 1e30f, -1e-30f, 65504.0f, INFINITY, -INFINITY, NAN};
    std::uniform_real_distribution<double> d(-300.0, 300.0);
    for (size_t i = 0; i < n; ++i) {
      float f = i % 7 == 3 ? specials[(i / 7) % std::size(specials)] : static_cast<float>(d(rng()));
      if constexpr (std::is_same_v<T, double>) v[i] = i % 7 == 3 ? double(f) : d(rng());
      else v[i] = T(f);
    }
  }
  return v;
}

// Runs k(in, out, n) on the device and in the interpreter; returns the count of outputs that
// differ in their bits (NaNs compare equal).
template <class T>
size_t disagreements(const ir::Kernel& k, uint32_t n, size_t out_per_thread) {
  std::vector<T> in = random_values<T>(n + 1);
  size_t out_n = size_t(n) * out_per_thread;
  jit::CompiledKernel ck = jit::compile(k);
  DeviceBuffer<T> din(in), dout(out_n);
  dout.fill_bytes(0xFF);
  ck.launch({.grid = {(n + 127) / 128}, .block = {128}}, din, dout, n);
  std::vector<T> gpu = dout.to_host();
  std::vector<T> cpu(out_n);
  std::memset(static_cast<void*>(cpu.data()), 0xFF, out_n * sizeof(T));
  ir::interpret(k, {.grid = {(n + 127) / 128}, .block = {128}}, in, cpu, n);
  size_t bad = 0;
  for (size_t i = 0; i < out_n; ++i) {
    bool same = bits_of(gpu[i]) == bits_of(cpu[i]) || (is_nan_bits(gpu[i]) && is_nan_bits(cpu[i]));
    if (!same) {
      if (bad < 5)
        UNSCOPED_INFO(k.name() << " element " << i << " (input " << i / out_per_thread << "): device bits 0x" << std::hex
                               << bits_of(gpu[i]) << ", interpreter 0x" << bits_of(cpu[i]) << std::dec);
      ++bad;
    }
  }
  return bad;
}

}  // namespace

// Needs a real device on the other side: the interpreted CI run excludes [agreement].
TEST_CASE("the interpreter agrees with the device", "[gpu][agreement]") {
  INFO("this test compares the interpreter with a GPU; it cannot run with KAIO_INTERPRET=1");
  REQUIRE_FALSE(jit::interpret_mode());
  const uint32_t n = 4099;
  SECTION("integer ops, conversions and control flow: to the bit") {
    using S = ir::Scalar;
    CHECK(disagreements<int8_t>(test::all_ops_kernel(S::S8), n, 1) == 0);
    CHECK(disagreements<int16_t>(test::all_ops_kernel(S::S16), n, 1) == 0);
    CHECK(disagreements<int32_t>(test::all_ops_kernel(S::S32), n, 1) == 0);
    CHECK(disagreements<int64_t>(test::all_ops_kernel(S::S64), n, 1) == 0);
    CHECK(disagreements<uint8_t>(test::all_ops_kernel(S::U8), n, 1) == 0);
    CHECK(disagreements<uint16_t>(test::all_ops_kernel(S::U16), n, 1) == 0);
    CHECK(disagreements<uint32_t>(test::all_ops_kernel(S::U32), n, 1) == 0);
    CHECK(disagreements<uint64_t>(test::all_ops_kernel(S::U64), n, 1) == 0);

    ir::Kernel k = test::control_kernel();
    jit::CompiledKernel ck = jit::compile(k);
    const uint32_t gx = 3, gy = 2, gz = 2, bx = 8, by = 4, bz = 2, total = gx * gy * gz * bx * by * bz;
    DeviceBuffer<int32_t> dout(total);
    dout.fill_bytes(0xFF);
    ck.launch({.grid = {gx, gy, gz}, .block = {bx, by, bz}}, dout, 23, true);
    std::vector<int32_t> cpu(total, -1);  // the device buffer's poison: slots no thread writes match
    ir::interpret(k, {.grid = {gx, gy, gz}, .block = {bx, by, bz}}, cpu, 23, true);
    CHECK(dout.to_host() == cpu);
  }
  SECTION("correctly rounded float ops and conversions: to the bit") {
    CHECK(disagreements<kaio::half>(exact_ops_kernel(ir::Scalar::F16), n, kExactOps) == 0);
    CHECK(disagreements<kaio::bfloat16>(exact_ops_kernel(ir::Scalar::BF16), n, kExactOps) == 0);
    CHECK(disagreements<float>(exact_ops_kernel(ir::Scalar::F32), n, kExactOps) == 0);
    CHECK(disagreements<double>(exact_ops_kernel(ir::Scalar::F64), n, kExactOps) == 0);
  }
  SECTION("the example kernels, within their error bounds") {
    auto x = random_floats(n), y = random_floats(n);
    float a = 1.25f;
    jit::CompiledKernel sx = jit::compile(ops::saxpy_kernel());
    DeviceBuffer<float> dx(x), dy(y);
    sx.launch({.grid = {(n + 255) / 256}, .block = {256}}, a, dx, dy, n);
    std::vector<float> gpu = dy.to_host(), cpu = y;
    ir::interpret(ops::saxpy_kernel(), {.grid = {(n + 255) / 256}, .block = {256}}, a, x, cpu, n);
    CHECK(count_bad(gpu, [&](size_t i) { return double(cpu[i]); },
                    [&](size_t i, double) { return 2 * kEps * (std::fabs(double(a) * x[i]) + std::fabs(y[i])); }) == 0);

    auto g = random_floats(n), xs = random_floats(n, -20.f, 20.f);
    jit::CompiledKernel sg = jit::compile(ops::silu_gate_kernel());
    DeviceBuffer<float> dxs(xs), dg(g), dout(n);
    sg.launch({.grid = {(n + 255) / 256}, .block = {256}}, dxs, dg, dout, n);
    std::vector<float> gpu2 = dout.to_host(), cpu2(n, NAN);
    ir::interpret(ops::silu_gate_kernel(), {.grid = {(n + 255) / 256}, .block = {256}}, xs, g, cpu2, n);
    CHECK(count_bad(gpu2, [&](size_t i) { return double(cpu2[i]); },
                    [&](size_t, double r) { return 16 * kEps * std::fabs(r) + 1e-37; }) == 0);

    const uint32_t rows = 999, cols = 37;
    auto m = random_floats(size_t(rows) * cols);
    jit::CompiledKernel rs = jit::compile(ops::row_sum_kernel());
    DeviceBuffer<float> dm(m), dsum(rows);
    rs.launch({.grid = {(rows + 127) / 128}, .block = {128}}, dm, dsum, rows, cols);
    std::vector<float> cpu3(rows, NAN);
    ir::interpret(ops::row_sum_kernel(), {.grid = {(rows + 127) / 128}, .block = {128}}, m, cpu3, rows, cols);
    CHECK(dsum.to_host() == cpu3);  // the same sequence of f32 adds
  }
}
