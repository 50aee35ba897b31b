// The q8_0, q4_K and q6_K block formats: scale unpacking and decoding against values
// worked out by hand from ggml's layout, and quantise -> decode round trips.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/half.h"
#include "kaio/quant/blocks.h"

using namespace kaio::quant;

TEST_CASE("q4_K: the 6-bit scales and mins unpack as ggml packs them", "[quant]") {
  BlockQ4K b{};
  const uint8_t s[12] = {0x7F, 0x05, 0x8A, 0xC1, 0x12, 0x6A, 0x00, 0xFF, 0x9C, 0x3E, 0x01, 0xF0};
  std::memcpy(b.scales, s, 12);
  // By hand: j < 4 from the low 6 bits of bytes j (scale) and j + 4 (min); j >= 4 from the
  // nibbles of byte j + 4 and the top 2 bits of bytes j - 4 (scale) and j (min).
  const int scale[8] = {63, 5, 10, 1, 28, 14, 33, 48};
  const int min[8] = {18, 42, 0, 63, 9, 19, 0, 63};
  for (int j = 0; j < 8; ++j) {
    INFO("sub-block " << j);
    const ScaleMin sm = q4k_scale_min(b.scales, j);
    CHECK(int(sm.scale) == scale[j]);
    CHECK(int(sm.min) == min[j]);
  }
  // d = 1, dmin = 0.5; every qs byte 0x21: low nibbles 1, high nibbles 2.
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memset(b.qs, 0x21, sizeof b.qs);
  std::vector<float> y(256);
  dequantize(uint32_t(GgmlType::Q4_K), &b, y.data(), 256);
  CHECK(y[0] == 63 * 1 - 0.5f * 18);     // sub-block 0, low nibble
  CHECK(y[32] == 5 * 2 - 0.5f * 42);     // sub-block 1: the high nibbles of bytes 0..31
  CHECK(y[100] == 1 * 2 - 0.5f * 63);    // sub-block 3, chunk 1, high nibble
  CHECK(y[200] == 33 * 1 - 0.0f);        // sub-block 6, chunk 3, low nibble
  CHECK(y[255] == 48 * 2 - 0.5f * 63);   // sub-block 7
}

TEST_CASE("q4_K: packing a scale and min unpacks to the same pair for every value and sub-block", "[quant]") {
  for (int j = 0; j < 8; ++j)
    for (int sc = 0; sc < 64; ++sc)
      for (int m = 0; m < 64; m += 7) {
        uint8_t s[12];
        std::memset(s, 0xA5, 12);  // the other sub-blocks' bits must survive
        BlockQ4K ref{};
        std::memcpy(ref.scales, s, 12);
        q4k_pack_scale_min(s, j, {uint8_t(sc), uint8_t(m)});
        const ScaleMin got = q4k_scale_min(s, j);
        REQUIRE(int(got.scale) == sc);
        REQUIRE(int(got.min) == m);
        for (int o = 0; o < 8; ++o)
          if (o != j) {
            const ScaleMin a = q4k_scale_min(s, o), b = q4k_scale_min(ref.scales, o);
            REQUIRE((a.scale == b.scale && a.min == b.min));
          }
      }
}

TEST_CASE("q6_K: values and scales decode from ql, qh and the s8 scales as ggml lays them out", "[quant]") {
  BlockQ6K b{};
  for (int i = 0; i < 128; ++i) b.ql[i] = uint8_t(i);
  std::memset(b.qh, 0xE4, sizeof b.qh);  // quarters 0..3 take high bits 0, 1, 2, 3
  b.qh[40] = 0x00;                       // half 1, lane 8: high bits 0 in every quarter
  const int8_t sc[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 0, 10, 11, -12, 13, 14};
  std::memcpy(b.scales, sc, 16);
  b.d = 0x3800;  // 0.5
  // By hand, element e: half n = e / 128, quarter q = e % 128 / 32, lane l = e % 32.
  CHECK(q6k_value(b, 5) == 5 - 32);            // ql[5] low nibble, high bits 0
  CHECK(q6k_value(b, 40) == (8 | 16) - 32);    // ql[40] = 0x28 low nibble, high bits 1
  CHECK(q6k_value(b, 100) == (2 | 48) - 32);   // ql[36] = 0x24 high nibble, high bits 3
  CHECK(q6k_value(b, 150) == 6 - 32);          // ql[86] = 0x56 low nibble, high bits 0
  CHECK(q6k_value(b, 200) == 4 - 32);          // ql[72] = 0x48 high nibble, qh[40] = 0
  CHECK(q6k_value(b, 255) == (7 | 48) - 32);   // ql[127] = 0x7F high nibble, high bits 3
  std::vector<float> y(256);
  dequantize(uint32_t(GgmlType::Q6_K), &b, y.data(), 256);
  CHECK(y[5] == 0.5f * 1 * -27);
  CHECK(y[40] == 0.5f * 3 * -8);
  CHECK(y[100] == 0.5f * 7 * 18);
  CHECK(y[150] == 0.5f * -128 * -26);
  CHECK(y[200] == 0.5f * 11 * -28);
  CHECK(y[255] == 0.5f * 14 * 23);
}

TEST_CASE("q8_0: d times the s8 values", "[quant]") {
  BlockQ8_0 b{};
  b.d = 0x3400;  // 0.25
  for (int i = 0; i < 32; ++i) b.qs[i] = int8_t(i * 8 - 124);
  std::vector<float> y(32);
  dequantize(uint32_t(GgmlType::Q8_0), &b, y.data(), 32);
  for (int i = 0; i < 32; ++i) CHECK(y[i] == 0.25f * float(i * 8 - 124));
}

TEST_CASE("quantisers: decode close to their input, relative to each block's range", "[quant]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t n = 4096;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * (1 + float(rng() % 4));
  // Bound on the RMS error over the RMS of x: 8, 6 and 4 bits of a block's range.
  const struct {
    GgmlType t;
    double bound;
  } cases[] = {{GgmlType::Q8_0, 0.01}, {GgmlType::Q6_K, 0.04}, {GgmlType::Q4_K, 0.15},
               {GgmlType::F16, 1e-3}, {GgmlType::BF16, 8e-3}, {GgmlType::F32, 0}};
  for (const auto& c : cases) {
    INFO(type_name(uint32_t(c.t)));
    const std::string q = quantize(uint32_t(c.t), x.data(), n);
    REQUIRE(q.size() == n / type_info(uint32_t(c.t))->block * type_info(uint32_t(c.t))->bytes);
    std::vector<float> y(n);
    dequantize(uint32_t(c.t), q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (size_t i = 0; i < n; ++i) err += double(y[i] - x[i]) * (y[i] - x[i]), ref += double(x[i]) * x[i];
    CHECK(std::sqrt(err / ref) <= c.bound);
  }
  // An all-zero block decodes to zeros (no division by a zero scale).
  std::vector<float> z(256, 0.0f), y(256, 1.0f);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    const std::string q = quantize(uint32_t(t), z.data(), 256);
    dequantize(uint32_t(t), q.data(), y.data(), 256);
    for (float v : y) REQUIRE(v == 0.0f);
  }
}

TEST_CASE("block formats: unknown types and partial blocks are UsageErrors", "[quant]") {
  std::vector<float> x(256), y(256);
  CHECK_THROWS_AS(quantize(uint32_t(GgmlType::Q4_0), x.data(), 256), kaio::UsageError);
  CHECK_THROWS_AS(dequantize(99, x.data(), y.data(), 256), kaio::UsageError);
  CHECK_THROWS_AS(dequantize(uint32_t(GgmlType::Q4_K), x.data(), y.data(), 100), kaio::UsageError);
  CHECK(type_name(12) == "q4_K");
  CHECK(type_name(77) == "type 77");
  CHECK(type_info(14)->bytes == 210);
}
