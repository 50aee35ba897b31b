// rope against a float64 reference: NeoX and GPT-J, cos/sin from theta or from tables (f32
// and the data's dtype), position offsets, partial rotary dims, every dtype, aligned,
// misaligned and strided rows; outputs poisoned first and pads checked untouched.
// [gpu]: a device, or KAIO_INTERPRET=1.
#include <catch2/catch.hpp>

#include <cmath>

#include "kaio/ops/rope.h"
#include "../support.h"
#include "row_support.h"

using namespace kaio;
using namespace kaio::test::rows;
using Catch::Matchers::Contains;

namespace {

struct Shape {
  uint32_t tokens, heads, head_dim, rot;
  uint64_t stride, offset;
  const char* what;
};

// Tolerances, with s = |x0| + |x1| of the pair: tables: the f32 arithmetic, 1e-6 * s;
// theta: cos/sin within 2^-20 plus the f32 angle (frequency from exp2 of an f32 exponent,
// times the position: 2e-6 relative), so s * (2e-6 + 2e-6 * angle); both plus the dtype's
// rounding unit<T>() * |y| (and tiny<T>() for f16 subnormals).
template <class T>
void check_rope(const Shape& sh, ops::RopeStyle style, int table /* 0 theta, 1 f32, 2 T */, uint32_t pos0, bool in_place) {
  Layout l{sh.tokens, sh.heads * sh.head_dim, sh.stride, sh.offset, sh.what};
  INFO(str(l) << " heads " << sh.heads << " head_dim " << sh.head_dim << " rot " << sh.rot << " style "
               << (style == ops::RopeStyle::NeoX ? "neox" : "gptj") << " table " << table << " offset " << pos0
               << (in_place ? " in place" : ""));
  Mat<T> x = random_mat<T>(l, -3, 3);
  std::vector<T> x0 = x.host;
  Mat<T> y = in_place ? Mat<T>{l, {}, DeviceBuffer<T>(0)} : poisoned_mat<T>(l);
  const double theta = 10000.0;
  const uint32_t half = sh.rot / 2, positions = pos0 + sh.tokens + 2;
  auto angle = [&](uint32_t pos, uint32_t i) { return pos * std::pow(theta, -2.0 * i / sh.rot); };
  // Table rows padded by 4 (16-byte rows for even halves: vector table loads) or by 3 on
  // strided shapes (scalar table loads).
  Layout tl{positions, half ? half : 1, (half ? half : 1) + (sh.stride ? 3 : 4), 0, "table"};
  Mat<float> cf = random_mat<float>(tl, 0, 1), sf = random_mat<float>(tl, 0, 1);
  Mat<T> ct = random_mat<T>(tl, 0, 1), st = random_mat<T>(tl, 0, 1);
  for (uint32_t p = 0; p < positions; ++p)
    for (uint32_t i = 0; i < half; ++i) {
      cf.host[tl.at(p, i)] = float(std::cos(angle(p, i)));
      sf.host[tl.at(p, i)] = float(std::sin(angle(p, i)));
      ct.host[tl.at(p, i)] = T(float(std::cos(angle(p, i))));
      st.host[tl.at(p, i)] = T(float(std::sin(angle(p, i))));
    }
  cf.dev.upload(cf.host);
  sf.dev.upload(sf.host);
  ct.dev.upload(ct.host);
  st.dev.upload(st.host);
  ops::Rope r{.style = style, .heads = sh.heads, .head_dim = sh.head_dim, .rotary_dim = sh.rot,
              .theta = float(theta), .position_offset = pos0};
  ops::RowTensor out = in_place ? x.view() : y.view();
  if (table == 0) ops::rope(x.view(), out, r);
  else if (table == 1) ops::rope(x.view(), out, cf.view(), sf.view(), r);
  else ops::rope(x.view(), out, ct.view(), st.view(), r);
  Mat<T>& got = in_place ? x : y;
  if (in_place) got.host = got.dev.to_host();
  else CHECK(fetch(got) == 0);
  size_t bad = 0;
  for (uint32_t t = 0; t < sh.tokens; ++t) {
    const uint32_t pos = pos0 + t;
    for (uint32_t h = 0; h < sh.heads; ++h) {
      auto in = [&](uint32_t e) { return to_d(x0[l.at(t, h * sh.head_dim + e)]); };
      auto out_at = [&](uint32_t e) { return got.at(t, h * sh.head_dim + e); };
      for (uint32_t i = 0; i < half; ++i) {
        uint32_t e0 = style == ops::RopeStyle::NeoX ? i : 2 * i, e1 = style == ops::RopeStyle::NeoX ? i + half : 2 * i + 1;
        double c = std::cos(angle(pos, i)), s = std::sin(angle(pos, i)), err_cs = 1e-6;
        if (table == 1) c = cf.at(pos, i), s = sf.at(pos, i);
        if (table == 2) c = ct.at(pos, i), s = st.at(pos, i);
        if (table == 0) err_cs = 2e-6 + 2e-6 * angle(pos, i);
        double a = in(e0), b = in(e1);
        double r0 = a * c - b * s, r1 = b * c + a * s;
        double base = (std::fabs(a) + std::fabs(b)) * err_cs + tiny<T>();
        bool ok0 = std::fabs(out_at(e0) - r0) <= base + unit<T>() * std::fabs(r0);
        bool ok1 = std::fabs(out_at(e1) - r1) <= base + unit<T>() * std::fabs(r1);
        if (!(ok0 && ok1) && bad++ < 3)
          UNSCOPED_INFO("token " << t << " head " << h << " pair " << i << ": got " << out_at(e0) << ", " << out_at(e1)
                                 << " want " << r0 << ", " << r1);
      }
      for (uint32_t e = sh.rot; e < sh.head_dim; ++e)  // copied exactly
        if (!(out_at(e) == in(e)) && bad++ < 3) UNSCOPED_INFO("token " << t << " head " << h << " copy " << e);
    }
  }
  CHECK(bad == 0);
}

const Shape kShapes[] = {
    {1, 1, 2, 2, 0, 0, "1x2"},
    {3, 1, 17, 16, 0, 0, "3x17, rot 16"},
    {67, 5, 205, 204, 0, 0, "67x1025"},
    {4, 3, 34, 34, 0, 0, "cols % 4 != 0"},
    {9, 4, 64, 64, 0, 0, "aligned"},
    {5, 2, 64, 64, 0, 1, "misaligned"},
    {6, 4, 64, 64, 264, 0, "strided"},
    {5, 2, 64, 32, 136, 0, "partial rotary, strided"},
};

}  // namespace

TEMPLATE_TEST_CASE("rope matches float64: styles, tables, offsets, layouts", "[gpu][ops][rows]", float, kaio::half,
                   kaio::bfloat16) {
  for (const Shape& sh : kShapes)
    for (auto style : {ops::RopeStyle::NeoX, ops::RopeStyle::GptJ})
      for (int table : {0, 1, 2}) check_rope<TestType>(sh, style, table, table == 0 ? 7 : 1000, false);
  for (auto style : {ops::RopeStyle::NeoX, ops::RopeStyle::GptJ}) {
    check_rope<TestType>(kShapes[4], style, 0, 3, true);
    check_rope<TestType>(kShapes[7], style, 1, 0, true);
  }
}

TEMPLATE_TEST_CASE("rope at the decode shapes and a long prefill on a device", "[gpu][ops][rows][large]", float,
                   kaio::half, kaio::bfloat16) {
  if (jit::interpret_mode()) return;
  // q of a fused qkv buffer, 32 heads of 128; theta and aligned f32 tables.
  for (uint32_t tokens : {1u, 16u, 128u, 8192u}) {
    Shape sh{tokens, 32, 128, 128, 3 * 32 * 128, 0, "decode"};
    check_rope<TestType>(sh, ops::RopeStyle::NeoX, 1, 4000, false);
    check_rope<TestType>(sh, ops::RopeStyle::GptJ, 0, 100, false);
  }
  Shape dense{8192, 64, 128, 128, 0, 0, "8192x8192"};
  check_rope<TestType>(dense, ops::RopeStyle::NeoX, 1, 0, false);
}

TEST_CASE("rope rejects bad arguments before launching, naming op and argument", "[gpu][ops][rows]") {
  DeviceBuffer<float> a(256), b(256), tab(64);
  auto x = ops::as_rows(a, 2, 128), y = ops::as_rows(b, 2, 128);
  auto expect = [](auto f, const char* text) {
    auto e = test::usage_error_of(f);
    CHECK(e.op() == "rope");
    CHECK_THAT(e.what(), Contains(text));
  };
  expect([&] { ops::rope(x, y, ops::Rope{.heads = 3, .head_dim = 64}); }, "heads x head_dim = 192");
  expect([&] { ops::rope(x, y, ops::Rope{.heads = 2, .head_dim = 64, .rotary_dim = 63}); }, "rotary_dim 63 must be even");
  expect([&] { ops::rope(x, y, ops::Rope{.heads = 2, .head_dim = 64, .theta = -1}); }, "theta must be positive");
  expect([&] { ops::rope(x, y, ops::as_rows(tab, 2, 32), ops::as_rows(tab, 2, 32), ops::Rope{.heads = 2, .head_dim = 64, .position_offset = 1}); },
         "cos has 2 positions, position_offset + rows = 3");
  expect([&] { ops::rope(x, y, ops::as_rows(tab, 4, 16), ops::as_rows(tab, 4, 16), ops::Rope{.heads = 2, .head_dim = 64}); },
         "cos has 16 columns, rotary_dim / 2 = 32");
  expect([&] { ops::rope(x, ops::as_rows(uint64_t(0), ir::Scalar::F32, 2, 128), ops::Rope{.heads = 2, .head_dim = 64}); },
         "y is a null pointer");
}
