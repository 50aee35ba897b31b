// quant_matmul (GGUF weights x f32 / f16 / bf16 activations) against a host reference
// that decodes the weights exactly and quantises the activations as the pre-pass does:
// the integer dot products are exact, so the result differs from the reference only by
// the f32 arithmetic of the scales and the sums, bounded below. Outputs poisoned first.
// [gpu]: a device, or KAIO_INTERPRET=1 (small shapes; the large ones on a device only).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/linker.h"
#include "kaio/jit/resources.h"
#include "kaio/kaio.h"
#include "kaio/ops/quant_matvec.h"
#include "kaio/quant/blocks.h"
#include "kaio/quant/gguf.h"
#include "../quant/gguf_writer.h"
#include "../support.h"
#include "ops_support.h"
#include "../link_memo.h"

using namespace kaio;
using quant::GgmlType;

namespace {

template <class T>
constexpr double unit_round() {
  if constexpr (std::is_same_v<T, float>) return 0;
  else if constexpr (std::is_same_v<T, kaio::half>) return 1.0 / 2048;
  else return 1.0 / 256;
}

// The quantisation, on the host: per 32 values d = max|x| / 127 and q = rint(x * (127 /
// max|x|)), in f32.
void quantise_activations(const std::vector<float>& x, std::vector<int>& q, std::vector<float>& d) {
  q.assign(x.size(), 0);
  d.assign(x.size() / 32, 0);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float inv = 127.0f / amax;
    d[b] = amax / 127.0f;
    for (size_t i = 0; i < 32; ++i)
      q[32 * b + i] = amax > 0 ? int(std::fmin(std::fmax(std::nearbyint(x[32 * b + i] * inv), -127.0f), 127.0f)) : 0;
  }
}

struct RefValue {
  double value, magnitude;  // the exact result of the kernel's formula; the sum of |terms|
};

// Row `row` of the weights against activation row r, unit by unit as the kernel goes.
RefValue reference(uint32_t fmt, const uint8_t* wrow, const int* q, const float* d, size_t k) {
  double sum = 0, mag = 0;
  for (size_t u = 0; u < k / 32; ++u) {
    const int* a = q + 32 * u;
    const double da = d[u];
    if (fmt == uint32_t(GgmlType::Q8_0)) {
      quant::BlockQ8_0 b;
      std::memcpy(&b, wrow + 34 * u, sizeof b);
      long s = 0;
      for (int e = 0; e < 32; ++e) s += long(quant::q8_0_value(b, e)) * a[e];
      const double t = double(float(kaio::half::from_bits(b.d))) * da * double(s);
      sum += t, mag += std::fabs(t);
    } else if (fmt == uint32_t(GgmlType::Q4_K)) {
      quant::BlockQ4K b;
      std::memcpy(&b, wrow + 144 * (u / 8), sizeof b);
      const int j = int(u % 8);
      long s = 0, as = 0;
      for (int e = 0; e < 32; ++e) s += long(quant::q4k_value(b, 32 * j + e)) * a[e], as += a[e];
      const quant::ScaleMin sm = quant::q4k_scale_min(b.scales, j);
      const double t1 = da * double(float(kaio::half::from_bits(b.d))) * sm.scale * double(s);
      const double t2 = da * double(float(kaio::half::from_bits(b.dmin))) * sm.min * double(as);
      sum += t1 - t2, mag += std::fabs(t1) + std::fabs(t2);
    } else {
      quant::BlockQ6K b;
      std::memcpy(&b, wrow + 210 * (u / 8), sizeof b);
      const int j = int(u % 8);
      long s = 0;
      for (int e = 0; e < 32; ++e) s += long(b.scales[(32 * j + e) / 16]) * quant::q6k_value(b, 32 * j + e) * a[e];
      const double t = double(float(kaio::half::from_bits(b.d))) * da * double(s);
      sum += t, mag += std::fabs(t);
    }
  }
  return {sum, mag};
}

template <class T, class O>
void check(uint32_t fmt, size_t m, size_t n, size_t k, uint32_t warps, size_t sample_rows = 0) {
  INFO(quant::type_name(fmt) << " m " << m << " n " << n << " k " << k << " warps/row " << warps << " x "
                             << ir::scalar_name(ir::ScalarOf<T>::value) << " y "
                             << ir::scalar_name(ir::ScalarOf<O>::value));
  std::mt19937 rng(uint32_t(fmt * 1000 + m * 31 + n + warps));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(n * k);
  for (auto& v : wf) v = nd(rng) * 0.05f;
  const std::string wq = quant::quantize(fmt, wf.data(), wf.size());
  const size_t row_bytes = wq.size() / n;
  std::vector<T> x(m * k);
  std::vector<float> xf(m * k);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = T(nd(rng) * (1 + float(i % 7)));
    xf[i] = float(x[i]);
  }
  jit::DeviceBuffer<uint8_t> w(std::vector<uint8_t>(wq.begin(), wq.end()));
  jit::DeviceBuffer<T> xd(x);
  jit::DeviceBuffer<uint8_t> ws(ops::quant_matmul_workspace(m, k));
  jit::DeviceBuffer<O> y(m * n);
  y.fill_bytes(0xFF);  // NaN: a value never written shows
  ops::quant_matmul<T, O>(y, w, fmt, xd, m, n, k, ws, nullptr, warps);
  const std::vector<O> got = y.to_host();
  std::vector<int> q;
  std::vector<float> d;
  quantise_activations(xf, q, d);
  const size_t units = k / 32;
  const size_t step = sample_rows ? std::max<size_t>(1, n / sample_rows) : 1;
  double worst = 0, act_worst = 0;
  std::vector<float> wrow(k);
  for (size_t r = 0; r < m; ++r)
    for (size_t row = 0; row < n; row += (row + step < n ? step : (row + 1 < n ? n - 1 - row : 1))) {
      const RefValue ref = reference(fmt, reinterpret_cast<const uint8_t*>(wq.data()) + row * row_bytes,
                                     q.data() + r * k, d.data() + r * units, k);
      const double v = double(float(got[r * n + row]));
      // f32: each unit's product rounds a few times and the sums add (units + 32) more.
      const double bound = double(units + 40) * std::ldexp(1.0, -24) * ref.magnitude +
                           unit_round<O>() * std::fabs(ref.value) + 1e-30;
      INFO("row " << row << " of activation " << r << ": got " << v << ", reference " << ref.value << ", bound "
                  << bound);
      REQUIRE(std::isfinite(v));
      REQUIRE(std::fabs(v - ref.value) <= bound);
      if (ref.magnitude > 0) worst = std::max(worst, std::fabs(v - ref.value) / ref.magnitude);
      // Against the decoded weights times the activations before their quantisation: each
      // activation moves by at most d / 2 of its block, so the result by sum |w| d / 2.
      quant::dequantize(fmt, wq.data() + row * row_bytes, wrow.data(), k);
      double exact = 0, act_bound = 0, wx = 0;
      for (size_t u = 0; u < units; ++u)
        for (size_t e = 32 * u; e < 32 * u + 32; ++e) {
          exact += double(wrow[e]) * xf[r * k + e];
          wx += std::fabs(double(wrow[e]) * xf[r * k + e]);
          act_bound += std::fabs(double(wrow[e])) * d[r * units + u] / 2;
        }
      REQUIRE(std::fabs(v - exact) <= act_bound + bound);
      if (wx > 0) act_worst = std::max(act_worst, std::fabs(v - exact) / wx);
    }
  WARN(quant::type_name(fmt) << " m " << m << " n " << n << " k " << k << " -> " << ir::scalar_name(ir::ScalarOf<O>::value)
                             << ": worst |error| / sum |terms| = " << worst
                             << "; against unquantised activations, worst |error| / sum |w x| = " << act_worst);
}

const uint32_t kFormats[] = {uint32_t(GgmlType::Q8_0), uint32_t(GgmlType::Q4_K), uint32_t(GgmlType::Q6_K)};

}  // namespace

TEST_CASE("quant_matmul: q8_0, q4_K, q6_K against the exact reference at small shapes", "[gpu][ops][quant]") {
  for (uint32_t fmt : kFormats) {
    for (size_t m : {1, 3, 16}) check<float, float>(fmt, m, 33, 512, 1);
    check<float, float>(fmt, 5, 9, 512, 8);  // a block per row; rows past n, activation rows past m
    // k of 5 super-blocks (q6_K blocks alternate 4-byte alignment, and odd rows start at
    // 2 mod 4): the fused form (one activation row, warps_per_row 0) from each input
    // dtype, and the pre-pass form with a warp and a block per row.
    CHECK(ops::detail::quant_matvec_fused_fits(fmt, ir::Scalar::BF16, 5, 1280));  // these take the fused form
    CHECK(ops::detail::quant_matvec_fused_fits(fmt, ir::Scalar::F32, 7, 1280) == (fmt != uint32_t(GgmlType::Q6_K)));
    check<float, float>(fmt, 1, 7, 1280, 0);
    check<kaio::bfloat16, float>(fmt, 1, 5, 1280, 0);
    check<kaio::half, float>(fmt, 1, 9, 1280, 0);
    check<kaio::bfloat16, kaio::bfloat16>(fmt, 1, 3, 256, 0);  // fewer tasks than lanes
    for (uint32_t warps : {1u, 8u}) check<kaio::bfloat16, float>(fmt, 1, 5, 1280, warps);
    check<kaio::half, kaio::half>(fmt, 1, 17, 256, 0);
    check<kaio::bfloat16, kaio::bfloat16>(fmt, 2, 17, 256, 0);
  }
  check<float, float>(uint32_t(GgmlType::Q8_0), 17, 3, 96, 1);  // two activation passes; k of 3 q8_0 blocks
}

// The tensor-core form (quant_matmul_mma.cpp) is quant_matmul's choice from two activation
// rows up: each format from each input dtype into each output dtype, at odd m (one n8
// tile, two, and past 16: a second block row), n not a multiple of the block's 16 rows,
// and k of one and of five super-blocks (q6_K: odd rows start at 2 mod 4, blocks
// alternate). The dp4a form the same shapes took before stays reachable (warps_per_row).
TEST_CASE("quant_matmul: the tensor-core form, every format and dtype, against the exact reference", "[gpu][ops][quant][mma]") {
  CHECK_FALSE(ops::detail::quant_matmul_mma_picked(12, 1, 33, 1280));  // m = 1 keeps its forms
  const uint32_t q8_0 = uint32_t(GgmlType::Q8_0);
  CHECK_FALSE(ops::detail::quant_matmul_mma_picked(q8_0, 4, 33, 1280));  // q8_0 at m <= 4: dp4a, measured faster
  for (uint32_t fmt : kFormats) {
    for (size_t m : {2, 5, 16, 20}) {
      CHECK(ops::detail::quant_matmul_mma_picked(fmt, m, 33, 1280) == (fmt != q8_0 || m > 4));
      check<float, float>(fmt, m, 33, 1280, 0);
    }
    check<kaio::half, float>(fmt, 3, 7, 256, 0);  // fewer rows than one block's 16
    check<kaio::bfloat16, float>(fmt, 9, 40, 256, 0);
    check<float, kaio::half>(fmt, 16, 17, 256, 0);
    check<kaio::half, kaio::half>(fmt, 6, 19, 512, 0);
    check<kaio::bfloat16, kaio::bfloat16>(fmt, 11, 21, 1280, 0);
    check<float, kaio::bfloat16>(fmt, 2, 16, 256, 0);
  }
  // q8_0 tasks are 4 blocks: k of 9 blocks (a task with 3 past the row's end) and of 3
  // (fewer tasks than warps); odd rows start at 2 mod 4.
  check<float, float>(uint32_t(GgmlType::Q8_0), 5, 19, 288, 0);
  check<kaio::bfloat16, kaio::half>(uint32_t(GgmlType::Q8_0), 16, 9, 96, 0);
  CHECK(ops::quant_matmul_mma_family().loaded_count() > 0);
}

// The 32-row form (16 warps, two m16 tiles per warp, tasks of 64 elements; q4_K at m <= 8
// of 128) and the 16-row form, each forced, at odd shapes: n not a multiple of 32 (and
// below 32), m from 2 to 20 (one or two n8 tiles, a second block row), q8_0 k of 3 and 9
// blocks (a task half past the row's end, fewer tasks than warps). The launch counters
// show which form ran: q6_K has no 32-row form and keeps 16.
TEST_CASE("quant_matmul: the tensor-core form with 16 and 32 weight rows per block, forced", "[gpu][ops][quant][mma]") {
  struct Unforce {
    ~Unforce() {
      ops::detail::force_quant_matmul_mma_rows(0);
      ops::detail::force_quant_matmul_mma(false);
    }
  } unforce;
  const uint32_t q8_0 = uint32_t(GgmlType::Q8_0), q4_k = uint32_t(GgmlType::Q4_K), q6_k = uint32_t(GgmlType::Q6_K);
  // By shape: 32 rows for q8_0 and for q4_K at m <= 8, never for q6_K.
  CHECK(ops::detail::quant_matmul_mma_rows(q8_0, 16, 4096, 4096) == 32);
  CHECK(ops::detail::quant_matmul_mma_rows(q4_k, 8, 4096, 4096) == 32);
  CHECK(ops::detail::quant_matmul_mma_rows(q4_k, 16, 4096, 4096) == 32);
  CHECK(ops::detail::quant_matmul_mma_rows(q6_k, 8, 4096, 4096) == 16);
  CHECK(ops::detail::quant_matmul_mma_rows(q8_0, 16, 4096, 32) == 16);  // 32 rows take two q8_0 blocks per task
  CHECK_THROWS_AS(ops::detail::force_quant_matmul_mma_rows(24), UsageError);
  for (uint32_t rows : {16u, 32u}) {
    ops::detail::force_quant_matmul_mma_rows(rows);
    for (uint32_t fmt : kFormats) {
      const uint32_t ran = fmt == q6_k ? 16 : rows;
      CHECK(ops::detail::quant_matmul_mma_rows(fmt, 16, 33, 32) == (fmt == q4_k ? rows : 16));
      INFO("rows " << rows << " " << quant::type_name(fmt));
      CHECK(ops::detail::quant_matmul_mma_rows(fmt, 16, 33, 256) == ran);
      const uint64_t before = ops::detail::quant_matmul_mma_launches(ran);
      const uint64_t other = ops::detail::quant_matmul_mma_launches(48 - ran);
      for (size_t m : {2, 8, 16, 20}) check<float, float>(fmt, m, 33, 1280, 0);
      check<kaio::half, float>(fmt, 3, 7, 256, 0);   // fewer rows than one m16 tile
      check<kaio::bfloat16, float>(fmt, 9, 47, 256, 0);
      check<float, kaio::half>(fmt, 16, 70, 512, 0);  // three blocks of 32, the last 6 rows
      check<kaio::half, kaio::half>(fmt, 6, 95, 1280, 0);
      check<kaio::bfloat16, kaio::bfloat16>(fmt, 13, 31, 256, 0);
      check<float, kaio::bfloat16>(fmt, 5, 64, 768, 0);
      size_t calls = fmt == q8_0 ? 8 : 10;  // q8_0 at m = 2, 3: the dp4a form
      if (fmt == q8_0) {
        check<float, float>(fmt, 5, 19, 288, 0);
        check<kaio::bfloat16, kaio::half>(fmt, 16, 9, 96, 0);
        check<kaio::half, kaio::bfloat16>(fmt, 11, 45, 96, 0);
        check<float, float>(fmt, 20, 50, 288, 0);
        check<kaio::half, float>(fmt, 9, 40, 64, 0);  // one task of two blocks
        check<float, float>(fmt, 7, 33, 32, 0);       // one block: the 16-row form
        calls += rows == 16 ? 6 : 5;
      }
      CHECK(ops::detail::quant_matmul_mma_launches(ran) - before == calls);
      CHECK(ops::detail::quant_matmul_mma_launches(48 - ran) - other == (fmt == q8_0 && rows == 32 ? 1u : 0u));  // k = 32
    }
  }
  // q8_0 at m <= 4, forced onto the tensor cores (the bench's --mma-rows rows).
  ops::detail::force_quant_matmul_mma(true);
  CHECK(ops::detail::quant_matmul_mma_picked(q8_0, 4, 33, 1280));
  CHECK_FALSE(ops::detail::quant_matmul_mma_picked(q8_0, 1, 33, 1280));
  for (uint32_t rows : {16u, 32u}) {
    ops::detail::force_quant_matmul_mma_rows(rows);
    const uint64_t before = ops::detail::quant_matmul_mma_launches(rows);
    for (size_t m : {2, 3, 4}) check<kaio::bfloat16, float>(q8_0, m, 45, 288, 0);
    CHECK(ops::detail::quant_matmul_mma_launches(rows) - before == 3);
  }
}

TEST_CASE("quant_matmul: a GGUF file's tensors, from the reader's spans", "[gpu][ops][quant][gguf]") {
  // A file with a q6_K and a q8_0 weight (dims [K, N]); each tensor's span goes to the
  // device as it is and is multiplied by two activation rows.
  const size_t k = 512, n = 7, m = 2;
  std::vector<float> wf(n * k);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = 0.01f * float(int(i * 37 % 101) - 50);
  test::GgufWriter gw;
  gw.kv_string("general.architecture", "kaio-test");
  gw.tensor("w.q6_K", {k, n}, uint32_t(GgmlType::Q6_K), quant::quantize(14, wf.data(), wf.size()));
  gw.tensor("w.q8_0", {k, n}, uint32_t(GgmlType::Q8_0), quant::quantize(8, wf.data(), wf.size()));
  const std::string image = gw.bytes();
  const quant::GgufFile f = quant::GgufFile::parse({reinterpret_cast<const uint8_t*>(image.data()), image.size()}, "mem.gguf");
  std::vector<float> x(m * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * float(i));
  std::vector<int> q;
  std::vector<float> d;
  quantise_activations(x, q, d);
  jit::DeviceBuffer<float> xd(x), y(m * n);
  jit::DeviceBuffer<uint8_t> ws(ops::quant_matmul_workspace(m, k));
  for (const quant::GgufTensor& t : f.tensors()) {
    INFO(t.name);
    const std::span<const uint8_t> bytes = f.data(t);
    jit::DeviceBuffer<uint8_t> w(std::vector<uint8_t>(bytes.begin(), bytes.end()));
    y.fill_bytes(0xFF);
    ops::quant_matmul<float, float>(y, w, t.type, xd, m, t.dims[1], t.dims[0], ws);
    const std::vector<float> got = y.to_host();
    for (size_t r = 0; r < m; ++r)
      for (size_t row = 0; row < n; ++row) {
        const RefValue ref = reference(t.type, bytes.data() + row * (bytes.size() / n), q.data() + r * k, d.data() + r * k / 32, k);
        REQUIRE(std::fabs(double(got[r * n + row]) - ref.value) <= double(k / 32 + 40) * std::ldexp(ref.magnitude, -24));
      }
  }
}

TEST_CASE("quant_matmul: the decode shapes on the device (sampled rows)", "[gpu][ops][quant][large]") {
  if (!test::ops::on_device()) {
    WARN("interpreted: the large quant_matmul shapes run on a device only (skipped)");
    return;
  }
  const std::pair<size_t, size_t> shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 14336}};
  for (uint32_t fmt : kFormats)
    for (const auto& [n, k] : shapes)
      for (size_t m : {1, 16}) check<kaio::bfloat16, float>(fmt, m, n, k, 0, 64);
}

TEST_CASE("quant_matmul: bad arguments are UsageErrors naming the op and the argument", "[ops][quant]") {
  const uint64_t w = 0x10000, x = 0x20000, y = 0x30000, ws = 0x40000;
  auto err = [](auto f) { return std::string(test::usage_error_of(f).what()); };
  using ops::quant_matmul;
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 2, x, 1, 8, 256, ws); }),
             Catch::Contains("quant_matmul") && Catch::Contains("'format'") && Catch::Contains("q4_0"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 12, x, 1, 8, 100, ws); }),
             Catch::Contains("'k'") && Catch::Contains("q4_K block"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 8, x, 1, 8, 48, ws); }), Catch::Contains("'k'"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, uint64_t(0), 14, x, 1, 8, 256, ws); }), Catch::Contains("'w'"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 14, uint64_t(0), 1, 8, 256, ws); }), Catch::Contains("'x'"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(uint64_t(0), w, 14, x, 1, 8, 256, ws); }), Catch::Contains("'y'"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w + 4, 12, x, 1, 8, 256, ws); }),
             Catch::Contains("'w'") && Catch::Contains("16-byte"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 14, x, 1, 8, 256, {ws, 100}); }),
             Catch::Contains("'workspace'"));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 14, x, 0, 8, 256, ws); }), Catch::Contains("'m'"));
  // The fused form holds a row's q8 form in 48 KiB of shared memory: k up to 32768.
  CHECK_THAT(err([&] {
               ops::detail::launch_quant_matvec_fused({12, ir::Scalar::BF16, ir::Scalar::F32}, w, x, y, 8, 65536,
                                                      65536 / 256 * 144, nullptr);
             }),
             Catch::Contains("'k'") && Catch::Contains("fused"));
  CHECK_FALSE(ops::detail::quant_matvec_fused_fits(12, ir::Scalar::BF16, 8, 65536));
  CHECK_THAT(err([&] { quant_matmul<float, float>(y, w, 8, x, 1, 8, 256, ws, nullptr, 3); }),
             Catch::Contains("'warps_per_row'"));
  CHECK_THROWS_AS(ops::build_quant_matvec({99, ir::Scalar::F32, 1, 1}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_act({ir::Scalar::S32}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_matmul_mma({2, ir::Scalar::F32, 2}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_matmul_mma({12, ir::Scalar::S32, 2}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_matmul_mma({12, ir::Scalar::F32, 3}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_matmul_mma({12, ir::Scalar::F32, 2, 24}), UsageError);
  CHECK_THROWS_AS(ops::build_quant_matmul_mma({14, ir::Scalar::F32, 1, 32}), UsageError);  // no 32-row q6_K
}

TEST_CASE("quant_matmul: every declared kernel assembles for sm_80, sm_90 and sm_90a without spills", "[ops][quant]") {
  std::vector<ir::Kernel> kernels;
  for (const auto& c : ops::quant_matvec_family().configs()) kernels.push_back(ops::build_quant_matvec(c));
  for (const auto& c : ops::quant_act_family().configs()) kernels.push_back(ops::build_quant_act(c));
  for (const auto& c : ops::quant_matvec_fused_family().configs()) kernels.push_back(ops::build_quant_matvec_fused(c));
  for (const auto& c : ops::quant_matmul_mma_family().configs()) kernels.push_back(ops::build_quant_matmul_mma(c));
  for (const ir::Kernel& k : kernels)
    for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
      INFO(k.name() << " " << arch);
      const std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
      if (k.name().find("matvec") != std::string::npos) CHECK(ptx.find("dp4a.s32.s32") != std::string::npos);
      if (k.name().find("matmul_mma") != std::string::npos)
        CHECK(ptx.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos);
      const jit::LinkResult r = test::link_ptx(ptx, arch, k.name());
      const jit::Resources res = jit::parse_resources(r.info_log, 0);
      CHECK(res.local_bytes == 0);
      CHECK(res.spill_stores == 0);
    }
}
