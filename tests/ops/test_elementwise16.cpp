// The activations' 16-bit forms (ops/math16.h), exhaustively: every one of the 65,536 f16
// and bf16 inputs through exp, silu, gelu, gelu_tanh and the gated forms, against float64,
// as the largest error in ulps of the output type. One launch of 65,536 elements per op and
// type. [gpu]: the device, or the interpreter (KAIO_INTERPRET=1), which computes exp2 and rcp
// exactly and rounds to f32 (within 2 f32 ulp of ex2.approx / rcp.approx), flushing around
// exp2_ftz / rcp_ftz as the hardware does: the bound checked is the device's. Run with -s to
// see the measured maxima.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/ops/elementwise.h"
#include "activation_ref.h"
#include "ops_support.h"

using namespace kaio;
using namespace kaio::test::ops;

namespace {

// Precision (significant bits) and smallest normal exponent of T.
template <class T>
constexpr int kBits = std::is_same_v<T, kaio::half> ? 11 : 8;
template <class T>
constexpr int kEmin = std::is_same_v<T, kaio::half> ? -14 : -126;

// The spacing of T at |v| (subnormal spacing below the normal range).
template <class T>
double ulp_of(double v) {
  int e = v == 0 ? kEmin<T> : std::ilogb(v);
  return std::ldexp(1.0, std::max(e, kEmin<T>) - (kBits<T> - 1));
}

template <class T>
double max_finite() {
  return std::is_same_v<T, kaio::half> ? 65504.0 : static_cast<double>(static_cast<float>(T::from_bits(0x7f7f)));
}

struct Result {
  double max_ulps = 0, at = 0;
  size_t wrong_special = 0;  // non-finite inputs or overflowing results handled wrongly
};

template <class T>
Result exhaustive(const std::string& op) {
  const size_t n = 65536;
  const bool gated = op.find("_gate") != std::string::npos;
  std::vector<T> hx(n), hg(n);
  std::vector<T> gates = random_vec<T>(n, -4, 4);
  for (size_t i = 0; i < n; ++i) {
    hx[i] = T::from_bits(static_cast<uint16_t>(i));
    hg[i] = gates[i];
  }
  std::vector<T> got = run_act(op, hx, hg);
  Result res;
  for (size_t i = 0; i < n; ++i) {
    const double xv = as_double(hx[i]), gv = gated ? as_double(hg[i]) : 1.0;
    const double ref = act_d(op, xv) * gv, y = as_double(got[i]);
    if (!std::isfinite(xv)) {  // NaN stays NaN; +-inf gives what the float64 formula gives
      bool ok = std::isnan(ref) ? std::isnan(y) : y == ref;
      if (!ok && res.wrong_special++ < 5) UNSCOPED_INFO(op << "(" << xv << ") = " << y << ", expected " << ref);
      continue;
    }
    if (std::fabs(ref) > max_finite<T>()) {  // overflows: max_finite or inf of the right sign
      bool ok = std::signbit(y) == std::signbit(ref) && std::fabs(y) >= max_finite<T>();
      if (!ok && res.wrong_special++ < 5) UNSCOPED_INFO(op << "(" << xv << ") = " << y << ", expected " << ref);
      continue;
    }
    double e = std::isnan(y) ? std::numeric_limits<double>::infinity() : std::fabs(y - ref) / ulp_of<T>(std::fabs(ref));
    if (e > res.max_ulps) {
      res.max_ulps = e;
      res.at = xv;
    }
  }
  return res;
}

}  // namespace

// The bound: half an ulp for the rounding to T, plus the measured f32 error (largest: gelu
// f16 0.5142 ulp, ops/math16.h) with room for the hardware's .approx steps (2^-22 relative).
TEMPLATE_TEST_CASE("16-bit activations over all 65,536 inputs: within 0.53 ulp of float64", "[gpu][ops][elementwise]",
                   kaio::half, kaio::bfloat16) {
  using T = TestType;
  for (const std::string op : {"exp", "silu", "gelu", "gelu_tanh", "silu_gate", "gelu_gate", "gelu_gate_tanh"}) {
    Result r = exhaustive<T>(op);
    INFO(op << " " << type_name<T>() << ": max error " << r.max_ulps << " ulp at x = " << r.at);
    CHECK(r.wrong_special == 0);
    CHECK(r.max_ulps <= 0.53);
  }
}

// silu, gelu, gelu_tanh and the gated forms: the MUFU ops only in their flush-to-zero forms for
// 16-bit data (no ptxas range fix-ups), and so are f32 gelu's (ops/math32.h); f32 silu and exp
// keep the non-flushing ones.
TEST_CASE("16-bit activations and f32 gelu use the flush-to-zero ex2 and rcp; f32 silu and exp do not", "[ops][elementwise]") {
  auto ptx = [](const char* op, ir::Scalar d, uint32_t inputs) {
    return codegen::emit_ptx(ops::elementwise_op(op).kernel({d, inputs, 0, d == ir::Scalar::F32 ? 4u : 8u, false}),
                             {"sm_90", 9, 0});
  };
  for (const char* op : {"silu", "gelu", "gelu_tanh", "silu_gate", "gelu_gate", "gelu_gate_tanh"}) {
    const uint32_t inputs = std::string(op).find("_gate") != std::string::npos ? 2 : 1;
    for (ir::Scalar d : {ir::Scalar::F16, ir::Scalar::BF16}) {
      INFO(op << " " << ir::scalar_name(d));
      const std::string p = ptx(op, d, inputs);
      CHECK_THAT(p, Catch::Contains("ex2.approx.ftz.f32"));
      CHECK_THAT(p, Catch::Contains("rcp.approx.ftz.f32"));
      CHECK_THAT(p, !Catch::Contains("ex2.approx.f32") && !Catch::Contains("rcp.approx.f32"));
    }
    INFO(op << " f32");  // silu's f32 form is the IR's math; the gelu forms are ops/math32.h's
    if (std::string(op).rfind("silu", 0) == 0) CHECK_THAT(ptx(op, ir::Scalar::F32, inputs), !Catch::Contains("approx.ftz"));
    else CHECK_THAT(ptx(op, ir::Scalar::F32, inputs), Catch::Contains("ex2.approx.ftz.f32") && !Catch::Contains("ex2.approx.f32"));
  }
  CHECK_THAT(ptx("exp", ir::Scalar::BF16, 1), Catch::Contains("ex2.approx.f32") && !Catch::Contains(".ftz"));
}
