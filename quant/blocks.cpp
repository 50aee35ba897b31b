// The q8_0, q4_K and q6_K block formats: decoders and simple quantisers (see blocks.h).
#include "kaio/quant/blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kaio/ir/error.h"
#include "kaio/ir/half.h"

namespace kaio::quant {

namespace {

struct Row {
  uint32_t t;
  TypeInfo info;
};
// Storage sizes of ggml's types (block elements, block bytes).
constexpr Row kTypes[] = {
    {0, {"f32", 1, 4, true}},      {1, {"f16", 1, 2, true}},       {2, {"q4_0", 32, 18, false}},
    {3, {"q4_1", 32, 20, false}},  {6, {"q5_0", 32, 22, false}},   {7, {"q5_1", 32, 24, false}},
    {8, {"q8_0", 32, 34, true}},   {9, {"q8_1", 32, 36, false}},   {10, {"q2_K", 256, 84, false}},
    {11, {"q3_K", 256, 110, false}}, {12, {"q4_K", 256, 144, true}}, {13, {"q5_K", 256, 176, false}},
    {14, {"q6_K", 256, 210, true}}, {15, {"q8_K", 256, 292, false}}, {24, {"i8", 1, 1, false}},
    {25, {"i16", 1, 2, false}},    {26, {"i32", 1, 4, false}},     {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},    {30, {"bf16", 1, 2, true}},
};

float h2f(uint16_t h) { return kaio::detail::f16_bits_to_f32(h); }
uint16_t f2h(float f) { return half(f).bits; }

}  // namespace

std::optional<TypeInfo> type_info(uint32_t t) {
  for (const Row& r : kTypes)
    if (r.t == t) return r.info;
  return std::nullopt;
}

std::string type_name(uint32_t t) {
  if (auto i = type_info(t)) return i->name;
  return "type " + std::to_string(t);
}

ScaleMin q4k_scale_min(const uint8_t s[12], int j) {
  if (j < 4) return {uint8_t(s[j] & 63), uint8_t(s[j + 4] & 63)};
  return {uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4)), uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4))};
}

void q4k_pack_scale_min(uint8_t s[12], int j, ScaleMin sm) {
  if (j < 4) {
    s[j] = uint8_t((s[j] & 0xC0) | (sm.scale & 63));
    s[j + 4] = uint8_t((s[j + 4] & 0xC0) | (sm.min & 63));
    return;
  }
  s[j + 4] = uint8_t((sm.scale & 0xF) | ((sm.min & 0xF) << 4));
  s[j - 4] = uint8_t((s[j - 4] & 63) | ((sm.scale >> 4) << 6));
  s[j] = uint8_t((s[j] & 63) | ((sm.min >> 4) << 6));
}

int q8_0_value(const BlockQ8_0& b, int e) { return b.qs[e]; }

// Byte 32c + l of qs holds element 64c + l (low nibble) and 64c + 32 + l (high nibble).
int q4k_value(const BlockQ4K& b, int e) {
  const int c = e / 64, r = e % 64;
  const uint8_t byte = b.qs[32 * c + r % 32];
  return r < 32 ? byte & 0xF : byte >> 4;
}

// Each half n of 128 elements: quarter q (0..3), lane l (0..31). The low 4 bits are byte
// 64n + 32(q & 1) + l of ql (low nibble for q < 2, high for q >= 2); the high 2 bits are
// bits 2q, 2q + 1 of byte 32n + l of qh.
int q6k_value(const BlockQ6K& b, int e) {
  const int n = e / 128, q = (e % 128) / 32, l = e % 32;
  const uint8_t lo = b.ql[64 * n + 32 * (q & 1) + l];
  const int low = q < 2 ? lo & 0xF : lo >> 4;
  const int high = (b.qh[32 * n + l] >> (2 * q)) & 3;
  return (low | (high << 4)) - 32;
}

void dequantize(uint32_t t, const void* src, float* dst, size_t n, const char* op) {
  const auto info = type_info(t);
  if (!info || !info->computes)
    throw UsageError("", op, "tensor type " + type_name(t) + " is not supported (f32, f16, bf16, q8_0, q4_K, q6_K)");
  if (n % info->block)
    throw UsageError("", op, std::to_string(n) + " elements are not a multiple of the " + info->name + " block (" +
                                 std::to_string(info->block) + ")");
  const auto* bytes = static_cast<const uint8_t*>(src);
  const auto g = static_cast<GgmlType>(t);
  for (size_t i = 0; i < n / info->block; ++i) {
    const uint8_t* p = bytes + i * info->bytes;
    float* y = dst + i * info->block;
    if (g == GgmlType::F32) {
      std::memcpy(y, p, 4);
    } else if (g == GgmlType::F16 || g == GgmlType::BF16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      *y = g == GgmlType::F16 ? h2f(h) : kaio::detail::bits_f32(uint32_t(h) << 16);
    } else if (g == GgmlType::Q8_0) {
      BlockQ8_0 b;
      std::memcpy(&b, p, sizeof b);
      const float d = h2f(b.d);
      for (int e = 0; e < 32; ++e) y[e] = d * float(q8_0_value(b, e));
    } else if (g == GgmlType::Q4_K) {
      BlockQ4K b;
      std::memcpy(&b, p, sizeof b);
      const float d = h2f(b.d), dmin = h2f(b.dmin);
      for (int j = 0; j < 8; ++j) {
        const ScaleMin sm = q4k_scale_min(b.scales, j);
        const float s = d * float(sm.scale), m = dmin * float(sm.min);
        for (int e = 32 * j; e < 32 * j + 32; ++e) y[e] = s * float(q4k_value(b, e)) - m;
      }
    } else {  // q6_K
      BlockQ6K b;
      std::memcpy(&b, p, sizeof b);
      const float d = h2f(b.d);
      for (int e = 0; e < 256; ++e) y[e] = d * float(b.scales[e / 16]) * float(q6k_value(b, e));
    }
  }
}

void quantize_q8_0(const float* x, size_t n, BlockQ8_0* dst) {
  for (size_t i = 0; i < n / 32; ++i, x += 32) {
    float amax = 0;
    for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(x[e]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    dst[i].d = f2h(d);
    for (int e = 0; e < 32; ++e) dst[i].qs[e] = int8_t(std::clamp(std::lround(x[e] * id), -127L, 127L));
  }
}

// Per sub-block of 32: an affine map of [min(x, 0), max(x)] onto 0..15. The scales and
// the (negated) mins are then quantised to 6 bits against the largest of each, and the
// nibbles are chosen against the scales as the block will decode them.
void quantize_q4_K(const float* x, size_t n, BlockQ4K* dst) {
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    BlockQ4K& b = dst[i];
    std::memset(&b, 0, sizeof b);
    float scale[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;
      for (int e = 0; e < 32; ++e) lo = std::min(lo, x[32 * j + e]), hi = std::max(hi, x[32 * j + e]);
      scale[j] = (hi - lo) / 15.0f;
      mins[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, mins[j]);
    }
    b.d = f2h(max_scale / 63.0f);
    b.dmin = f2h(max_min / 63.0f);
    const float d = h2f(b.d), dmin = h2f(b.dmin);
    for (int j = 0; j < 8; ++j) {
      const long sc = d > 0 ? std::clamp(std::lround(scale[j] / d), 0L, 63L) : 0;
      const long m = dmin > 0 ? std::clamp(std::lround(mins[j] / dmin), 0L, 63L) : 0;
      q4k_pack_scale_min(b.scales, j, {uint8_t(sc), uint8_t(m)});
      const float s = d * float(sc), off = dmin * float(m);
      for (int e = 32 * j; e < 32 * j + 32; ++e) {
        const long q = s > 0 ? std::clamp(std::lround((x[e] + off) / s), 0L, 15L) : 0;
        const int c = e / 64, r = e % 64;
        b.qs[32 * c + r % 32] |= uint8_t(r < 32 ? q : q << 4);
      }
    }
  }
}

// Per sub-block of 16: a symmetric scale (max |x| / 31) quantised to s8 against the
// largest; the values against the decoded scales, -32..31.
void quantize_q6_K(const float* x, size_t n, BlockQ6K* dst) {
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    BlockQ6K& b = dst[i];
    std::memset(&b, 0, sizeof b);
    float scale[16], max_scale = 0;
    for (int j = 0; j < 16; ++j) {
      float amax = 0;
      for (int e = 0; e < 16; ++e) amax = std::max(amax, std::fabs(x[16 * j + e]));
      scale[j] = amax / 31.0f;
      max_scale = std::max(max_scale, scale[j]);
    }
    b.d = f2h(max_scale / 127.0f);
    const float d = h2f(b.d);
    for (int j = 0; j < 16; ++j) b.scales[j] = int8_t(d > 0 ? std::clamp(std::lround(scale[j] / d), -128L, 127L) : 0);
    for (int e = 0; e < 256; ++e) {
      const float s = d * float(b.scales[e / 16]);
      const long q = (s != 0 ? std::clamp(std::lround(x[e] / s), -32L, 31L) : 0) + 32;
      const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
      b.ql[64 * h + 32 * (quarter & 1) + l] |= uint8_t(quarter < 2 ? (q & 0xF) : (q & 0xF) << 4);
      b.qh[32 * h + l] |= uint8_t((q >> 4) << (2 * quarter));
    }
  }
}

std::string quantize(uint32_t t, const float* src, size_t n) {
  const auto info = type_info(t);
  if (!info || !info->computes) throw UsageError("", "quantize", "tensor type " + type_name(t) + " is not supported");
  if (n % info->block)
    throw UsageError("", "quantize", std::to_string(n) + " elements are not a multiple of the " + info->name + " block");
  std::string out(n / info->block * info->bytes, '\0');
  void* p = out.data();
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::Q8_0: quantize_q8_0(src, n, static_cast<BlockQ8_0*>(p)); break;
    case GgmlType::Q4_K: quantize_q4_K(src, n, static_cast<BlockQ4K*>(p)); break;
    case GgmlType::Q6_K: quantize_q6_K(src, n, static_cast<BlockQ6K*>(p)); break;
    case GgmlType::F32: std::memcpy(p, src, n * 4); break;
    case GgmlType::F16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f2h(src[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    default:  // bf16
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = bfloat16(src[i]).bits;
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
  }
  return out;
}

}  // namespace kaio::quant
