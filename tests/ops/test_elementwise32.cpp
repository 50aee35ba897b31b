// The f32 forms of gelu and gelu_tanh (ops/math32.h) against float64, as the largest error
// in f32 ulps: every 16384th bit pattern of f32 (each binade of both signs, infinities and
// NaNs) and a dense sweep of [-14, 14], through the four ops that use them (the gated ones
// with random gates). [gpu]: the device, or the interpreter (KAIO_INTERPRET=1), which
// computes ex2 and rcp exactly and rounds to f32 and flushes around the ftz forms as the
// hardware does. The bounds: x >= -2, the measured maxima (ops/math32.h, <= 8.7 ulp) plus 2 ulp
// for each of the device's .approx steps; x < -2, the exponent's own rounding (three
// roundings of a half exponent |h| <= 90, each <= |h| 2^-24, doubled by the squaring: 2^-16.2
// relative, <= 220 ulp), the device's steps on top. Run with -s to see the maxima.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "activation_ref.h"
#include "ops_support.h"

using namespace kaio;
using namespace kaio::test::ops;

namespace {

// f32's spacing at |v| (subnormal spacing below the normal range).
double ulp32(double v) {
  int e = v == 0 ? -126 : std::ilogb(v);
  return std::ldexp(1.0, std::max(e, -126) - 23);
}

struct Result {
  double core = 0, tail = 0, core_at = 0, tail_at = 0;  // x >= -2, x < -2
  size_t wrong_special = 0;
};

Result sweep(const std::string& op) {
  std::vector<float> hx;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 16384) hx.push_back(std::bit_cast<float>(uint32_t(bits + 977)));
  for (int i = 0; i <= 1 << 17; ++i) hx.push_back(-14.0f + 28.0f * float(i) / float(1 << 17));
  const size_t n = hx.size();
  const bool gated = op.find("_gate") != std::string::npos;
  std::vector<float> hg = random_vec<float>(n, -4, 4);
  std::vector<float> got = run_act(op, hx, hg);
  Result r;
  for (size_t i = 0; i < n; ++i) {
    const double xv = hx[i], gv = gated ? double(hg[i]) : 1.0, ref = act_d(op, xv) * gv, y = got[i];
    if (!std::isfinite(xv)) {  // NaN stays NaN; +-inf gives what the float64 formula gives
      const bool ok = std::isnan(ref) ? std::isnan(y) : y == ref;
      if (!ok && r.wrong_special++ < 5) UNSCOPED_INFO(op << "(" << xv << ") = " << y << ", expected " << ref);
      continue;
    }
    if (std::fabs(ref) > std::numeric_limits<float>::max()) {  // a gate times a huge x: inf of the right sign
      const bool ok = std::isinf(y) && std::signbit(y) == std::signbit(ref);
      if (!ok && r.wrong_special++ < 5) UNSCOPED_INFO(op << "(" << xv << ") = " << y << ", expected " << ref);
      continue;
    }
    const double e = std::isnan(y) ? std::numeric_limits<double>::infinity() : std::fabs(y - ref) / ulp32(std::fabs(ref));
    double& worst = xv >= -2 ? r.core : r.tail;
    if (e > worst) {
      worst = e;
      (xv >= -2 ? r.core_at : r.tail_at) = xv;
    }
  }
  return r;
}

}  // namespace

TEST_CASE("f32 gelu and gelu_tanh against float64: at most 12 ulp for x >= -2, 256 below", "[gpu][ops][elementwise]") {
  for (const std::string op : {"gelu", "gelu_tanh", "gelu_gate", "gelu_gate_tanh"}) {
    Result r = sweep(op);
    INFO(op << ": max error " << r.core << " ulp at x = " << r.core_at << " (x >= -2), " << r.tail << " ulp at x = "
            << r.tail_at << " (x < -2)");
    CHECK(r.wrong_special == 0);
    CHECK(r.core <= 12);
    CHECK(r.tail <= 256);
  }
}
