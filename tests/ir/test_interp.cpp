// The CPU interpreter: every op against an exact or float64 reference on random inputs
// (outputs poisoned first), every test kernel, divergent control flow, the out-of-bounds
// diagnostic, host threads. No GPU needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "kaio/ir/interp.h"
#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"
#include "kaio/ops/reduction.h"
#include "../kernels.h"

using namespace kaio;
using Catch::Matchers::Contains;
using ir::Scalar;
using ir::Type;
using ir::Value;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r(20261122);
  return r;
}

template <class T>
std::vector<T> random_ints(size_t n) {
  std::vector<T> v(n);
  std::uniform_int_distribution<uint64_t> any;
  std::uniform_int_distribution<int> small(-70, 70);
  for (size_t i = 0; i < n; ++i) v[i] = (i % 3 == 0) ? static_cast<T>(small(rng())) : static_cast<T>(any(rng()));
  return v;
}

std::vector<double> random_doubles(size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

template <class T>
void poison(std::vector<T>& v) {
  std::memset(static_cast<void*>(v.data()), 0xA5, v.size() * sizeof(T));
}

ir::LaunchShape shape_for(size_t n, uint32_t block = 64) {
  return ir::LaunchShape{{(n + block - 1) / block}, {block}};
}

// out[i] = f(a[i], b[i]) for i < n; `f` builds the expression.
ir::Kernel binary_kernel(const std::string& name, Scalar in, Scalar out, const std::function<Value(Value, Value)>& f) {
  ir::KernelBuilder b(name);
  auto a = b.param("a", Type::pointer(in, true));
  auto bb = b.param("b", Type::pointer(in, true));
  auto o = b.param("out", Type::pointer(out, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = a[i];
    Value y = bb[i];
    o[i] = f(x, y);
  });
  return b.build();
}

ir::Kernel unary_kernel(const std::string& name, Scalar in, Scalar out, const std::function<Value(Value)>& f) {
  ir::KernelBuilder b(name);
  auto a = b.param("a", Type::pointer(in, true));
  auto o = b.param("out", Type::pointer(out, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    Value x = a[i];
    o[i] = f(x);
  });
  return b.build();
}

// ---- exact integer reference (PTX semantics: wrap, clamped shifts) ----
template <class T>
struct IntRef {
  using W = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
  static constexpr unsigned regw = sizeof(T) <= 2 ? 16 : sizeof(T) * 8;
  static T add(T a, T b) { return T(W(a) + W(b)); }
  static T sub(T a, T b) { return T(W(a) - W(b)); }
  static T mul(T a, T b) { return T(W(a) * W(b)); }
  static T div(T a, T b) {
    if (b == 0) return T(~W(0));
    if (std::is_signed_v<T> && b == T(-1)) return T(W(0) - W(a));
    return T(a / b);
  }
  static T rem(T a, T b) {
    if (b == 0) return a;
    if (std::is_signed_v<T> && b == T(-1)) return 0;
    return T(a % b);
  }
  static uint64_t amount(T b) {
    uint64_t raw = std::is_signed_v<T> ? uint64_t(int64_t(b)) : uint64_t(b);
    return regw == 16 ? (raw & 0xffff) : (raw & 0xffffffffu);
  }
  static T shl(T a, T b) {
    uint64_t n = amount(b);
    return n >= regw ? T(0) : T(uint64_t(a) << n);
  }
  static T shr(T a, T b) {
    uint64_t n = amount(b);
    if constexpr (std::is_signed_v<T>) return n >= regw ? T(a < 0 ? -1 : 0) : T(int64_t(a) >> n);
    else return n >= regw ? T(0) : T(uint64_t(a) >> n);
  }
};

template <class T>
void check_int_binary(Scalar s) {
  const size_t n = 1000;
  auto a = random_ints<T>(n), b = random_ints<T>(n);
  for (size_t i = 0; i < n; i += 10) b[i] = static_cast<T>(i % 20 == 0 ? 0 : -1);  // div/rem edge cases
  for (size_t i = 5; i < n; i += 10) a[i] = std::numeric_limits<T>::min();
  using R = IntRef<T>;
  struct Case {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<T(T, T)> ref;
  };
  std::vector<Case> cases = {
      {"add", [](Value x, Value y) { return x + y; }, R::add},
      {"sub", [](Value x, Value y) { return x - y; }, R::sub},
      {"mul", [](Value x, Value y) { return x * y; }, R::mul},
      {"div", [](Value x, Value y) { return x / y; }, R::div},
      {"rem", [](Value x, Value y) { return x % y; }, R::rem},
      {"min", [](Value x, Value y) { return ir::min(x, y); }, [](T x, T y) { return std::min(x, y); }},
      {"max", [](Value x, Value y) { return ir::max(x, y); }, [](T x, T y) { return std::max(x, y); }},
      {"and", [](Value x, Value y) { return x & y; }, [](T x, T y) { return T(x & y); }},
      {"or", [](Value x, Value y) { return x | y; }, [](T x, T y) { return T(x | y); }},
      {"xor", [](Value x, Value y) { return x ^ y; }, [](T x, T y) { return T(x ^ y); }},
      {"shl", [](Value x, Value y) { return x << y; }, R::shl},
      {"shr", [](Value x, Value y) { return x >> y; }, R::shr},
      {"not", [](Value x, Value) { return ~x; }, [](T x, T) { return T(~x); }},
  };
  if (std::is_signed_v<T>) {
    cases.push_back({"neg", [](Value x, Value) { return -x; }, [](T x, T) { return R::sub(0, x); }});
    cases.push_back({"abs", [](Value x, Value) { return ir::abs(x); }, [](T x, T) { return x < 0 ? R::sub(0, x) : x; }});
  }
  for (const Case& c : cases) {
    INFO(ir::scalar_name(s) << " " << c.name);
    ir::Kernel k = binary_kernel(std::string("int_") + c.name, s, s, c.f);
    std::vector<T> out(n);
    poison(out);
    ir::interpret(k, shape_for(n), a, b, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      T want = c.ref(a[i], b[i]);
      if (out[i] != want) {
        if (bad++ < 3) UNSCOPED_INFO("i=" << i << " a=" << int64_t(a[i]) << " b=" << int64_t(b[i]) << " got " << int64_t(out[i]) << " want " << int64_t(want));
      }
    }
    CHECK(bad == 0);
  }
  // comparisons
  struct Cmp {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<bool(T, T)> ref;
  };
  std::vector<Cmp> cmps = {{"lt", [](Value x, Value y) { return x < y; }, [](T x, T y) { return x < y; }},
                           {"le", [](Value x, Value y) { return x <= y; }, [](T x, T y) { return x <= y; }},
                           {"gt", [](Value x, Value y) { return x > y; }, [](T x, T y) { return x > y; }},
                           {"ge", [](Value x, Value y) { return x >= y; }, [](T x, T y) { return x >= y; }},
                           {"eq", [](Value x, Value y) { return x == y; }, [](T x, T y) { return x == y; }},
                           {"ne", [](Value x, Value y) { return x != y; }, [](T x, T y) { return x != y; }}};
  for (size_t i = 0; i < n; i += 4) b[i] = a[i];
  for (const Cmp& c : cmps) {
    INFO(ir::scalar_name(s) << " " << c.name);
    ir::Kernel k = binary_kernel(std::string("cmp_") + c.name, s, Scalar::U8,
                                 [&](Value x, Value y) { return ir::cast<uint8_t>(c.f(x, y)); });
    std::vector<uint8_t> out(n, 0xA5);
    ir::interpret(k, shape_for(n), a, b, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += out[i] != (c.ref(a[i], b[i]) ? 1 : 0);
    CHECK(bad == 0);
  }
}

// ---- float references: exact in double, rounded once ----
template <class T>
double to_d(T v) {
  if constexpr (std::is_same_v<T, kaio::half> || std::is_same_v<T, kaio::bfloat16>) return double(float(v));
  else return double(v);
}
template <class T>
T from_d(double d) {  // round to nearest even (double rounding through f32 is innocuous for + - * / sqrt)
  if constexpr (std::is_same_v<T, kaio::half> || std::is_same_v<T, kaio::bfloat16>) return T(float(d));
  else return static_cast<T>(d);
}
template <class T>
bool same_value(T a, T b) {
  double x = to_d(a), y = to_d(b);
  if (std::isnan(x) && std::isnan(y)) return true;
  return x == y && std::signbit(x) == std::signbit(y);
}

template <class T>
std::vector<T> random_floats_of(size_t n, double lo, double hi) {
  auto d = random_doubles(n, lo, hi);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from_d<T>(d[i]);
  const double specials[] = {0.0, -0.0, 1.0, -1.0, INFINITY, -INFINITY, NAN, 1e-6, -3.0};
  for (size_t i = 0; i < std::size(specials) && i * 37 < n; ++i) v[i * 37] = from_d<T>(specials[i]);
  return v;
}

template <class T>
void check_float_ops(Scalar s) {
  const size_t n = 1000;
  auto a = random_floats_of<T>(n, -100, 100), b = random_floats_of<T>(n, -100, 100);
  for (size_t i = 1; i < n; i += 53) b[i] = a[i];
  struct Case {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<double(double, double)> ref;
  };
  auto fmin_ref = [](double x, double y) { return std::isnan(x) ? y : std::isnan(y) ? x : (x == y ? (std::signbit(x) ? x : y) : std::min(x, y)); };
  auto fmax_ref = [](double x, double y) { return std::isnan(x) ? y : std::isnan(y) ? x : (x == y ? (std::signbit(x) ? y : x) : std::max(x, y)); };
  std::vector<Case> cases = {
      {"add", [](Value x, Value y) { return x + y; }, [](double x, double y) { return x + y; }},
      {"sub", [](Value x, Value y) { return x - y; }, [](double x, double y) { return x - y; }},
      {"mul", [](Value x, Value y) { return x * y; }, [](double x, double y) { return x * y; }},
      {"div", [](Value x, Value y) { return x / y; }, [](double x, double y) { return x / y; }},
      {"min", [](Value x, Value y) { return ir::min(x, y); }, fmin_ref},
      {"max", [](Value x, Value y) { return ir::max(x, y); }, fmax_ref},
      {"neg", [](Value x, Value) { return -x; }, [](double x, double) { return -x; }},
      {"abs", [](Value x, Value) { return ir::abs(x); }, [](double x, double) { return std::fabs(x); }},
      {"sqrt", [](Value x, Value) { return ir::sqrt(x); }, [](double x, double) { return std::sqrt(x); }},
      {"select", [](Value x, Value y) { return ir::select(x < y, x, y); }, [](double x, double y) { return x < y ? x : y; }},
  };
  for (const Case& c : cases) {
    INFO(ir::scalar_name(s) << " " << c.name);
    ir::Kernel k = binary_kernel(std::string("flt_") + c.name, s, s, c.f);
    std::vector<T> out(n);
    poison(out);
    ir::interpret(k, shape_for(n), a, b, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double r = c.ref(to_d(a[i]), to_d(b[i]));
      T want = from_d<T>(r);  // f64: the host's double op is the reference
      if (!same_value(out[i], want)) {
        if (bad++ < 3) UNSCOPED_INFO("i=" << i << " a=" << to_d(a[i]) << " b=" << to_d(b[i]) << " got " << to_d(out[i]) << " want " << to_d(want));
      }
    }
    CHECK(bad == 0);
  }
  // comparisons (NaN: only != is true)
  struct Cmp {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<bool(double, double)> ref;
  };
  std::vector<Cmp> cmps = {{"lt", [](Value x, Value y) { return x < y; }, [](double x, double y) { return x < y; }},
                           {"le", [](Value x, Value y) { return x <= y; }, [](double x, double y) { return x <= y; }},
                           {"gt", [](Value x, Value y) { return x > y; }, [](double x, double y) { return x > y; }},
                           {"ge", [](Value x, Value y) { return x >= y; }, [](double x, double y) { return x >= y; }},
                           {"eq", [](Value x, Value y) { return x == y; }, [](double x, double y) { return x == y; }},
                           {"ne", [](Value x, Value y) { return x != y; }, [](double x, double y) { return x != y; }}};
  for (const Cmp& c : cmps) {
    INFO(ir::scalar_name(s) << " " << c.name);
    ir::Kernel k = binary_kernel(std::string("fcmp_") + c.name, s, Scalar::U8,
                                 [&](Value x, Value y) { return ir::cast<uint8_t>(c.f(x, y)); });
    std::vector<uint8_t> out(n, 0xA5);
    ir::interpret(k, shape_for(n), a, b, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += out[i] != (c.ref(to_d(a[i]), to_d(b[i])) ? 1 : 0);
    CHECK(bad == 0);
  }
}

template <class T>
uint64_t raw_bits(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

}  // namespace

// ---------------- ops ----------------

TEST_CASE("interp: integer ops on every integer type, exact (wrap, clamped shifts)", "[interp]") {
  check_int_binary<int8_t>(Scalar::S8);
  check_int_binary<int16_t>(Scalar::S16);
  check_int_binary<int32_t>(Scalar::S32);
  check_int_binary<int64_t>(Scalar::S64);
  check_int_binary<uint8_t>(Scalar::U8);
  check_int_binary<uint16_t>(Scalar::U16);
  check_int_binary<uint32_t>(Scalar::U32);
  check_int_binary<uint64_t>(Scalar::U64);
}

TEST_CASE("interp: float ops correctly rounded on f16, bf16, f32, f64", "[interp]") {
  check_float_ops<kaio::half>(Scalar::F16);
  check_float_ops<kaio::bfloat16>(Scalar::BF16);
  check_float_ops<float>(Scalar::F32);
  check_float_ops<double>(Scalar::F64);
}

TEST_CASE("interp: fma rounds once, also on f16", "[interp]") {
  ir::KernelBuilder b("fma_h");
  auto a = b.param<const kaio::half*>("a");
  auto o = b.param<kaio::half*>("o");
  auto i = b.global_id_x();
  Value x = a[i * 3u];
  Value y = a[i * 3u + 1u];
  Value z = a[i * 3u + 2u];
  o[i] = ir::fma(x, y, z);
  ir::Kernel k = b.build();
  auto p2 = [](int e) { return std::ldexp(1.0f, e); };
  // (2^-11 + 2^-21) * (1 - 2^-10) + (1 + 2^-10) = 1 + 2^-10 + 2^-11 - 2^-31: just below the
  // tie, so 1 + 2^-10. Rounding through f32 first would make it a tie and give 1 + 2^-9.
  std::vector<float> triples = {p2(-11) + p2(-21), 1 - p2(-10), 1 + p2(-10), 3, 5, 7, -2.5f, 4, 0.125f};
  std::vector<float> expect = {1 + p2(-10), 22, -9.875f};
  std::vector<kaio::half> in;
  for (float f : triples) {
    in.push_back(kaio::half(f));
    REQUIRE(float(in.back()) == f);
  }
  std::vector<kaio::half> out(expect.size());
  ir::interpret(k, {.grid = {1}, .block = {uint32_t(expect.size())}}, in, out);
  for (size_t t = 0; t < expect.size(); ++t) CHECK(float(out[t]) == expect[t]);
}

TEST_CASE("interp: math within its bounds (f32 rounded from double)", "[interp]") {
  const size_t n = 2000;
  auto xs = random_doubles(n, -30, 30);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(xs[i]);
  struct Case {
    const char* name;
    std::function<Value(Value)> f;
    std::function<double(double)> ref;
    bool positive;
  };
  std::vector<Case> cases = {
      {"sqrt", [](Value v) { return ir::sqrt(v); }, [](double v) { return std::sqrt(v); }, true},
      {"rsqrt", [](Value v) { return ir::rsqrt(v); }, [](double v) { return 1 / std::sqrt(v); }, true},
      {"exp", [](Value v) { return ir::exp(v); }, [](double v) { return std::exp(v); }, false},
      {"log", [](Value v) { return ir::log(v); }, [](double v) { return std::log(v); }, true},
      {"tanh", [](Value v) { return ir::tanh(v); }, [](double v) { return std::tanh(v); }, false},
      {"sin", [](Value v) { return ir::sin(v); }, [](double v) { return std::sin(v); }, false},
      {"cos", [](Value v) { return ir::cos(v); }, [](double v) { return std::cos(v); }, false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::vector<float> in = x;
    if (c.positive)
      for (float& v : in) v = std::fabs(v) + 1e-3f;
    ir::Kernel k = unary_kernel(std::string("m_") + c.name, Scalar::F32, Scalar::F32, c.f);
    std::vector<float> out(n, NAN);
    ir::interpret(k, shape_for(n), in, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double r = c.ref(double(in[i]));
      double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(r), 1e-30)) - 23);
      bool sqrt_exact = std::string(c.name) == "sqrt";
      double bound = sqrt_exact ? 0.5 * ulp : ulp;  // sqrt correctly rounded; others <= 1 ulp
      if (!(std::fabs(double(out[i]) - r) <= bound)) {
        if (bad++ < 3) UNSCOPED_INFO(c.name << "(" << in[i] << ") = " << out[i] << ", want " << r);
      }
    }
    CHECK(bad == 0);
  }
  // f16 math rounds the f32 result once more; f64 sqrt is correctly rounded.
  ir::Kernel kh = unary_kernel("m_exp_h", Scalar::F16, Scalar::F16, [](Value v) { return ir::exp(v); });
  std::vector<kaio::half> hin, hout(200);
  for (int i = 0; i < 200; ++i) hin.push_back(kaio::half(float(i - 100) / 20.0f));
  ir::interpret(kh, shape_for(200), hin, hout, 200u);
  for (int i = 0; i < 200; ++i) CHECK(std::fabs(float(hout[i]) - std::exp(float(hin[i]))) <= std::exp(float(hin[i])) * 1e-3f);
  ir::Kernel kd = unary_kernel("m_sqrt_d", Scalar::F64, Scalar::F64, [](Value v) { return ir::sqrt(v); });
  std::vector<double> din = random_doubles(100, 0, 1e6), dout(100);
  ir::interpret(kd, shape_for(100), din, dout, 100u);
  for (int i = 0; i < 100; ++i) CHECK(dout[i] == std::sqrt(din[i]));
}

TEST_CASE("interp: float -> integer casts saturate, NaN as the device, each rounding", "[interp]") {
  std::vector<float> in = {1.5f, -1.5f, 2.5f, -2.5f, 0.49f, 1e10f, -1e10f, NAN, INFINITY, -INFINITY, 300.7f, -0.0f};
  const size_t n = in.size();
  struct R {
    ir::Rounding r;
    double (*f)(double);
  };
  for (R r : {R{ir::Rounding::Rz, std::trunc}, R{ir::Rounding::Rn, std::nearbyint}, R{ir::Rounding::Rm, std::floor},
              R{ir::Rounding::Rp, std::ceil}}) {
    auto check = [&]<class I>(Scalar s) {
      INFO(ir::scalar_name(s) << " rounding " << ir::rounding_name(r.r));
      ir::Kernel k = unary_kernel("f2i", Scalar::F32, s, [&](Value v) { return ir::cast(v, Type::scalar(s), r.r); });
      std::vector<I> out(n);
      poison(out);
      ir::interpret(k, shape_for(n), in, out, uint32_t(n));
      for (size_t i = 0; i < n; ++i) {
        double v = in[i];
        I want;
        if (std::isnan(v)) want = sizeof(I) == 8 ? static_cast<I>(uint64_t(1) << 63) : I(0);  // from f32, as the device
        else {
          double rv = r.f(v);
          if (rv <= double(std::numeric_limits<I>::min())) want = std::numeric_limits<I>::min();
          else if (rv >= std::ldexp(1.0, std::numeric_limits<I>::digits)) want = std::numeric_limits<I>::max();
          else want = static_cast<I>(rv);
        }
        CHECK(int64_t(out[i]) == int64_t(want));
      }
    };
    check.template operator()<int8_t>(Scalar::S8);
    check.template operator()<uint8_t>(Scalar::U8);
    check.template operator()<int16_t>(Scalar::S16);
    check.template operator()<int32_t>(Scalar::S32);
    check.template operator()<uint32_t>(Scalar::U32);
    check.template operator()<int64_t>(Scalar::S64);
  }
}

TEST_CASE("interp: conversions between floats and from integers round by their mode", "[interp]") {
  // f32 -> f16 / bf16, rn and rz
  std::vector<float> f = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -12), -1.0f - 3 * std::ldexp(1.0f, -12),
                          70000.0f, -70000.0f, 1e-8f, 3.14159f, NAN};
  const size_t n = f.size();
  for (ir::Rounding r : {ir::Rounding::Rn, ir::Rounding::Rz}) {
    ir::Kernel kh = unary_kernel("f2h", Scalar::F32, Scalar::F16, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F16), r); });
    ir::Kernel kb = unary_kernel("f2b", Scalar::F32, Scalar::BF16, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::BF16), r); });
    std::vector<kaio::half> h(n);
    std::vector<kaio::bfloat16> bf(n);
    ir::interpret(kh, shape_for(n), f, h, uint32_t(n));
    ir::interpret(kb, shape_for(n), f, bf, uint32_t(n));
    for (size_t i = 0; i < n; ++i) {
      INFO("x = " << f[i] << " rounding " << ir::rounding_name(r));
      if (std::isnan(f[i])) {
        CHECK(std::isnan(float(h[i])));
        CHECK(std::isnan(float(bf[i])));
        continue;
      }
      if (r == ir::Rounding::Rn) {
        CHECK(h[i].bits == kaio::half(f[i]).bits);
        CHECK(bf[i].bits == kaio::bfloat16(f[i]).bits);
      } else {
        // rz: the largest magnitude not above |x|, finite
        CHECK(std::fabs(float(h[i])) <= std::fabs(f[i]));
        CHECK(std::isfinite(float(h[i])));
        kaio::half up = kaio::half::from_bits(uint16_t(h[i].bits + 1));
        CHECK((std::fabs(float(up)) > std::fabs(f[i]) || (h[i].bits & 0x7fff) == 0x7bff));
        CHECK(bf[i].bits == uint16_t(kaio::detail::f32_bits(f[i]) >> 16));
      }
    }
  }
  // f64 -> f32 with rm / rp brackets the value; s64 -> f32 rn is nearest
  std::vector<double> d = {0.1, -0.1, 1.0 / 3, 1e300, -1e-300, 16777217.0};
  for (ir::Rounding r : {ir::Rounding::Rm, ir::Rounding::Rp, ir::Rounding::Rz, ir::Rounding::Rn}) {
    ir::Kernel k = unary_kernel("d2f", Scalar::F64, Scalar::F32, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F32), r); });
    std::vector<float> out(d.size());
    ir::interpret(k, shape_for(d.size()), d, out, uint32_t(d.size()));
    for (size_t i = 0; i < d.size(); ++i) {
      INFO("x = " << d[i] << " rounding " << ir::rounding_name(r));
      if (r == ir::Rounding::Rm) CHECK(double(out[i]) <= d[i]);
      if (r == ir::Rounding::Rp) CHECK(double(out[i]) >= d[i]);
      if (r == ir::Rounding::Rz) CHECK(std::fabs(double(out[i])) <= std::fabs(d[i]));
      if (r == ir::Rounding::Rn) CHECK(out[i] == static_cast<float>(d[i]));
      float next = std::nextafter(out[i], r == ir::Rounding::Rm ? INFINITY : -INFINITY);
      if (r == ir::Rounding::Rm) CHECK((double(next) > d[i] || std::isinf(next)));
      if (r == ir::Rounding::Rp) CHECK((double(next) < d[i] || std::isinf(next)));
    }
  }
  std::vector<int64_t> big = {(int64_t(1) << 40) + 1, -((int64_t(1) << 53) + 1), std::numeric_limits<int64_t>::max(), 7};
  for (ir::Rounding r : {ir::Rounding::Rm, ir::Rounding::Rp}) {
    ir::Kernel k = unary_kernel("l2f", Scalar::S64, Scalar::F32, [&](Value v) { return ir::cast(v, Type::scalar(Scalar::F32), r); });
    std::vector<float> out(big.size());
    ir::interpret(k, shape_for(big.size()), big, out, uint32_t(big.size()));
    for (size_t i = 0; i < big.size(); ++i) {
      long double x = (long double)big[i];
      if (r == ir::Rounding::Rm) CHECK((long double)out[i] <= x);
      else CHECK((long double)out[i] >= x);
      CHECK(std::fabs((long double)out[i] - x) <= std::fabs(x) * std::ldexp(1.0L, -23));
    }
  }
  // integer <-> integer and pred
  std::vector<int16_t> s16 = {-1, 300, -129, 127, 0};
  ir::Kernel k8 = unary_kernel("s16tou8", Scalar::S16, Scalar::U8, [](Value v) { return ir::cast<uint8_t>(v); });
  ir::Kernel k64 = unary_kernel("s16tou64", Scalar::S16, Scalar::U64, [](Value v) { return ir::cast<uint64_t>(v); });
  ir::Kernel kp = unary_kernel("s16top", Scalar::S16, Scalar::F32, [](Value v) { return ir::cast<float>(ir::cast<bool>(v)); });
  std::vector<uint8_t> o8(5);
  std::vector<uint64_t> o64(5);
  std::vector<float> op(5);
  ir::interpret(k8, shape_for(5), s16, o8, 5u);
  ir::interpret(k64, shape_for(5), s16, o64, 5u);
  ir::interpret(kp, shape_for(5), s16, op, 5u);
  CHECK(o8 == std::vector<uint8_t>{255, 44, 127, 127, 0});
  CHECK(o64 == std::vector<uint64_t>{~uint64_t(0), 300, uint64_t(-129), 127, 0});
  CHECK(op == std::vector<float>{1, 1, 1, 1, 0});
}

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

// ---------------- the parallel language: shared memory, barriers, warp ops, atomics ----------------

namespace {

template <class F>
UsageError expect_usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e;
  }
  FAIL("expected UsageError");
  return UsageError("", "", "");
}

}  // namespace

TEST_CASE("interp: shuffles (every mode, width, type) and votes against a host model", "[interp][lang]") {
  ir::KernelBuilder b("warp_model");
  auto in = b.param<const int32_t*>("in");
  auto in64 = b.param<const double*>("in64");
  auto in16 = b.param<const kaio::half*>("in16");
  auto out = b.param<int32_t*>("out");  // 10 per thread
  auto o64 = b.param<double*>("o64");
  auto o16 = b.param<kaio::half*>("o16");
  Value t = b.global_id_x(), lane = b.lane_id();
  Value xv = in[t];
  Value o = t * 10u;
  out[o] = ir::shfl_up(xv, 1u);
  out[o + 1u] = ir::shfl_up(xv, 3u, 8);
  out[o + 2u] = ir::shfl_down(xv, 2u);
  out[o + 3u] = ir::shfl_down(xv, 5u, 16);
  out[o + 4u] = ir::shfl_xor(xv, 13u);
  out[o + 5u] = ir::shfl_xor(xv, 3u, 4);
  out[o + 6u] = ir::shfl_idx(xv, (lane * 5u + 3u) & 31u);
  out[o + 7u] = ir::shfl_idx(xv, lane + 2u, 8);  // lane arg beyond the segment: modulo width
  out[o + 8u] = ir::cast<int32_t>(ir::ballot(xv > 0));
  Value one = b.constant(1), zero = b.constant(0);
  out[o + 9u] = ir::select(ir::vote_all(xv > -90), one, zero) + ir::select(ir::vote_any(xv > 95), one, zero) * 2;
  Value yv = in64[t];
  o64[t] = ir::shfl_xor(yv, 1u);
  Value hv = in16[t];
  o16[t] = ir::shfl_down(hv, 1u);
  ir::Kernel k = b.build();
  const uint32_t n = 128;
  std::vector<int32_t> x(n), got(n * 10);
  std::vector<double> y(n), g64(n);
  std::vector<kaio::half> h(n), g16(n);
  std::uniform_int_distribution<int> d(-100, 100);
  for (uint32_t i = 0; i < n; ++i) {
    x[i] = d(rng());
    y[i] = double(x[i]) * 1e10 + 0.25;
    h[i] = kaio::half(float(x[i]) / 8);
  }
  poison(got);
  poison(g64);
  ir::interpret(k, {.grid = {2}, .block = {64}}, x, y, h, got, g64, g16);
  for (uint32_t t = 0; t < n; ++t) {
    uint32_t w = t & ~31u, l = t & 31u;
    auto at = [&](uint32_t lane) { return x[w + lane]; };
    auto seg = [&](uint32_t width) { return l & ~(width - 1); };
    int32_t e[10] = {l >= 1 ? at(l - 1) : at(l),
                     (l % 8) >= 3 ? at(l - 3) : at(l),
                     l + 2 < 32 ? at(l + 2) : at(l),
                     (l % 16) + 5 < 16 ? at(l + 5) : at(l),
                     at(l ^ 13),
                     at(l ^ 3),
                     at((l * 5 + 3) & 31),
                     at(seg(8) + ((l + 2) & 7)),
                     0,
                     0};
    uint32_t ballot = 0;
    bool all = true, any = false;
    for (uint32_t k2 = 0; k2 < 32; ++k2) {
      ballot |= (at(k2) > 0 ? 1u : 0u) << k2;
      all = all && at(k2) > -90;
      any = any || at(k2) > 95;
    }
    e[8] = int32_t(ballot);
    e[9] = (all ? 1 : 0) + (any ? 2 : 0);
    for (int k2 = 0; k2 < 10; ++k2) {
      INFO("thread " << t << " output " << k2);
      CHECK(got[t * 10 + k2] == e[k2]);
    }
    CHECK(g64[t] == y[w + (l ^ 1)]);
    CHECK(g16[t].bits == h[l + 1 < 32 ? t + 1 : t].bits);
  }
  // votes count only the active lanes
  ir::KernelBuilder b2("vote_divergent");
  auto out2 = b2.param<uint32_t*>("out");
  Value l2 = b2.lane_id();
  b2.if_(l2 < 10u, [&] { out2[l2] = ir::ballot(l2 > 3u); });
  ir::Kernel k2 = b2.build();
  std::vector<uint32_t> o2(32, 7);
  ir::interpret(k2, {.grid = {1}, .block = {32}}, o2);
  for (uint32_t i = 0; i < 10; ++i) CHECK(o2[i] == 0x3f0u);
}

TEST_CASE("interp: block reductions and scans from the builder, barriers between warps", "[interp][lang]") {
  for (int op = 0; op < 3; ++op) {
    ir::KernelBuilder b("block_red_" + std::to_string(op));
    auto in = b.param<const float*>("in");
    auto iin = b.param<const int32_t*>("iin");
    auto out = b.param<float*>("out");
    auto iout = b.param<int32_t*>("iout");
    Value t = b.global_id_x(), blk = b.block_idx_x();
    Value x = in[t];
    Value xi = iin[t];
    Value r = op == 0 ? b.block_reduce_sum(x) : op == 1 ? b.block_reduce_max(x) : b.block_reduce_min(x);
    Value ri = op == 0 ? b.block_reduce_sum(xi) : op == 1 ? b.block_reduce_max(xi) : b.block_reduce_min(xi);
    b.if_(b.thread_idx_x() == 0u, [&] {
      out[blk] = r;
      iout[blk] = ri;
    });
    ir::Kernel k = b.build();
    for (uint32_t threads : {32u, 96u, 256u, 1024u}) {
      INFO("op " << op << " threads " << threads);
      const uint32_t blocks = 3, n = blocks * threads;
      std::vector<float> x(n);
      std::vector<int32_t> xi(n);
      auto ds = random_doubles(n, -1, 1);
      for (uint32_t i = 0; i < n; ++i) {
        x[i] = float(ds[i]);
        xi[i] = int32_t(ds[i] * 1000);
      }
      std::vector<float> out(blocks);
      std::vector<int32_t> iout(blocks);
      poison(out);
      poison(iout);
      ir::interpret(k, {.grid = {blocks}, .block = {threads}}, x, xi, out, iout);
      for (uint32_t bi = 0; bi < blocks; ++bi) {
        double ref = op == 0 ? 0 : op == 1 ? -INFINITY : INFINITY, mag = 0;
        int64_t iref = op == 0 ? 0 : op == 1 ? INT32_MIN : INT32_MAX;
        for (uint32_t i = bi * threads; i < (bi + 1) * threads; ++i) {
          ref = op == 0 ? ref + x[i] : op == 1 ? std::max(ref, double(x[i])) : std::min(ref, double(x[i]));
          iref = op == 0 ? iref + xi[i] : op == 1 ? std::max<int64_t>(iref, xi[i]) : std::min<int64_t>(iref, xi[i]);
          mag += std::fabs(x[i]);
        }
        CHECK(std::fabs(out[bi] - ref) <= (op == 0 ? 20 * 1.2e-7 * mag : 0));
        CHECK(iout[bi] == iref);
      }
    }
  }
  // scans (blocks of whole warps: see the report on block_scan with a partial last warp)
  ir::KernelBuilder b("block_scans");
  auto in = b.param<const int32_t*>("in");
  auto incl = b.param<int32_t*>("incl");
  auto excl = b.param<int32_t*>("excl");
  Value t = b.global_id_x();
  Value x = in[t];
  Value i = b.block_scan_inclusive(x);
  Value e = b.block_scan_exclusive(x);
  incl[t] = i;
  excl[t] = e;
  ir::Kernel k = b.build();
  for (uint32_t threads : {32u, 128u, 1024u}) {
    const uint32_t blocks = 3, n = blocks * threads;
    std::vector<int32_t> xs(n), gi(n), ge(n);
    for (uint32_t j = 0; j < n; ++j) xs[j] = int32_t(rng()() % 101) - 50;
    poison(gi);
    poison(ge);
    auto st = ir::interpret(k, {.grid = {blocks}, .block = {threads}}, xs, gi, ge);
    CHECK(st.thread_instructions > 0);
    size_t bad = 0;
    for (uint32_t bi = 0; bi < blocks; ++bi) {
      int32_t run = 0;
      for (uint32_t j = bi * threads; j < (bi + 1) * threads; ++j) {
        bad += ge[j] != run;
        run += xs[j];
        bad += gi[j] != run;
      }
    }
    INFO("threads " << threads);
    CHECK(bad == 0);
  }
}

TEST_CASE("interp: shared-memory transpose with barriers, dynamic shared memory", "[interp][lang]") {
  ir::KernelBuilder b("transpose_i");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto rows = b.param<uint32_t>("rows");
  auto cols = b.param<uint32_t>("cols");
  auto pad = b.shared<uint8_t>(3);  // a second array: the tile starts 16-byte aligned after it
  auto tile = b.shared<float>(32 * 33);
  (void)pad;
  Value tx = b.thread_idx_x(), ty = b.thread_idx_y();
  Value bx = b.block_idx_x(), by = b.block_idx_y();
  Value c = bx * 32u + tx, r0 = by * 32u;
  b.for_(0u, 32u, 8u, [&](Value kk) {
    Value r = r0 + ty + kk;
    b.if_(r < rows && c < cols, [&] {
      Value v = in[r * cols + c];
      tile[(ty + kk) * 33u + tx] = v;
    });
  });
  b.barrier();
  Value oc = by * 32u + tx, or0 = bx * 32u;
  b.for_(0u, 32u, 8u, [&](Value kk) {
    Value orow = or0 + ty + kk;
    b.if_(orow < cols && oc < rows, [&] {
      Value v = tile[tx * 33u + ty + kk];
      out[orow * rows + oc] = v;
    });
  });
  ir::Kernel k = b.build();
  const uint32_t R = 77, C = 45;
  std::vector<float> x(R * C), o(R * C);
  for (uint32_t j = 0; j < R * C; ++j) x[j] = float(j) * 0.5f;
  poison(o);
  ir::interpret(k, {.grid = {(C + 31) / 32, (R + 31) / 32}, .block = {32, 8}}, x, o, R, C);
  size_t bad = 0;
  for (uint32_t r = 0; r < R; ++r)
    for (uint32_t cc = 0; cc < C; ++cc) bad += o[cc * R + r] != x[r * C + cc];
  CHECK(bad == 0);

  // dynamic shared memory: reverse through it, sized by the launch
  ir::KernelBuilder b2("reverse_dyn");
  auto in2 = b2.param<const int32_t*>("in");
  auto out2 = b2.param<int32_t*>("out");
  auto cnt = b2.param<uint32_t>("count");
  auto dyn = b2.dynamic_shared<int32_t>();
  Value tid = b2.thread_idx_x(), nt = b2.block_dim_x();
  b2.for_(tid, cnt, nt, [&](Value kk) { dyn[kk] = in2[kk]; });
  b2.barrier();
  b2.for_(tid, cnt, nt, [&](Value kk) {
    Value rev = cnt - 1u - kk;
    out2[kk] = dyn[rev];
  });
  ir::Kernel k2 = b2.build();
  const uint32_t count = 20000;
  std::vector<int32_t> xi(count), oi(count);
  for (uint32_t j = 0; j < count; ++j) xi[j] = int32_t(j * 7);
  ir::interpret(k2, {.grid = {2}, .block = {96}, .shared_bytes = count * 4}, xi, oi, count);
  for (uint32_t j = 0; j < count; ++j) REQUIRE(oi[j] == xi[count - 1 - j]);
  // too small a dynamic size is an out-of-bounds shared access
  auto e = expect_usage_error([&] {
    ir::interpret(k2, {.grid = {1}, .block = {32}, .shared_bytes = 64}, xi, oi, count);
  });
  CHECK_THAT(e.what(), Contains("dynamic shared memory (64 bytes)"));
  CHECK_THAT(e.what(), Contains("index 16"));
}

TEST_CASE("interp: histogram with shared and global atomics; every atomic op", "[interp][lang]") {
  ir::KernelBuilder b("histo_i");
  auto in = b.param<const uint32_t*>("in");
  auto hist = b.param<uint32_t*>("hist");
  auto n = b.param<uint32_t>("n");
  auto local = b.shared<uint32_t>(256);
  Value tid = b.thread_idx_x(), nt = b.block_dim_x();
  b.for_(tid, 256u, nt, [&](Value kk) { local[kk] = 0u; });
  b.barrier();
  Value stride = b.grid_dim_x() * nt;
  b.for_(b.global_id_x(), n, stride, [&](Value i) {
    Value v = in[i];
    (void)ir::atomic_add(local, v & 255u, 1u);
  });
  b.barrier();
  b.for_(tid, 256u, nt, [&](Value kk) {
    Value c = local[kk];
    b.if_(c > 0u, [&] { (void)ir::atomic_add(hist, kk, c); });
  });
  ir::Kernel k = b.build();
  const uint32_t N = 30011;
  std::vector<uint32_t> x(N), ref(256, 0), h(256, 0);
  for (auto& v : x) v = uint32_t(rng()());
  for (uint32_t v : x) ref[v & 255]++;
  ir::interp::HostArg args[] = {ir::interp::host_arg(x), ir::interp::host_arg(h), ir::interp::host_arg(N)};
  ir::interp::interpret_packed(k, {.grid = {16}, .block = {128}}, args, 3, {.threads = 4});
  CHECK(h == ref);

  // add returns the old value (unique tickets), min/max/exch/cas, f32 and f64 add
  ir::KernelBuilder b2("atomics_i");
  auto ctr = b2.param<uint32_t*>("ctr");       // [0] ticket counter
  auto tickets = b2.param<uint32_t*>("tickets");
  auto mm = b2.param<int32_t*>("mm");          // [0] min, [1] max, [2] exch target, [3] cas
  auto fs = b2.param<float*>("fs");
  auto ds = b2.param<double*>("ds");
  auto smem = b2.shared<int32_t>(4);
  Value g = b2.global_id_x(), t2 = b2.thread_idx_x();
  Value gi = ir::cast<int32_t>(g);
  tickets[g] = ir::atomic_add(ctr, 0u, 1u);
  (void)ir::atomic_min(mm, 0u, gi - 1000);
  (void)ir::atomic_max(mm, 1u, gi * 3);
  (void)ir::atomic_exch(mm, 2u, gi);
  (void)ir::atomic_cas(mm, 3u, 0, gi + 1);  // exactly one thread wins
  (void)ir::atomic_add(fs, 0u, 0.5f);
  (void)ir::atomic_add(ds, 0u, 0.25);
  b2.if_(t2 == 0u, [&] { smem[0u] = 100; });
  b2.barrier();
  Value old = ir::atomic_max(smem, 0u, ir::cast<int32_t>(t2));
  (void)old;
  b2.barrier();
  b2.if_(t2 == 0u, [&] {
    Value v = smem[0u];
    (void)ir::atomic_add(mm, 4u, v);
  });
  ir::Kernel k2 = b2.build();
  const uint32_t T = 1024;
  std::vector<uint32_t> c(1, 0), tk(T);
  std::vector<int32_t> m = {INT32_MAX, INT32_MIN, -1, 0, 0};
  std::vector<float> f(1, 0.0f);
  std::vector<double> dd(1, 0.0);
  ir::interp::HostArg a2[] = {ir::interp::host_arg(c), ir::interp::host_arg(tk), ir::interp::host_arg(m),
                              ir::interp::host_arg(f), ir::interp::host_arg(dd)};
  ir::interp::interpret_packed(k2, {.grid = {8}, .block = {128}}, a2, 5, {.threads = 4});
  CHECK(c[0] == T);
  std::vector<uint32_t> sorted = tk;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < T; ++i) REQUIRE(sorted[i] == i);
  CHECK(m[0] == -1000);
  CHECK(m[1] == int32_t(T - 1) * 3);
  CHECK((m[2] >= 0 && m[2] < int32_t(T)));
  CHECK((m[3] >= 1 && m[3] <= int32_t(T)));
  CHECK(m[4] == 8 * 127);  // each block: max(100, 0..127) = 127
  CHECK(f[0] == 0.5f * T);
  CHECK(dd[0] == 0.25 * T);
}

TEST_CASE("interp: load_vec / store_vec, and a misaligned vector access", "[interp][lang]") {
  ir::KernelBuilder b("vec_i");
  auto in = b.param<const float*>("in");
  auto out = b.param<float*>("out");
  auto hin = b.param<const kaio::half*>("hin");
  auto hout = b.param<kaio::half*>("hout");
  auto off = b.param<uint32_t>("off");
  auto n4 = b.param<uint32_t>("n4");
  auto sm = b.shared<float>(512);
  Value i = b.global_id_x(), t = b.thread_idx_x();
  b.if_(i < n4, [&] {
    Value base = i * 4u;
    auto v = ir::load_vec(in, base + off, 4);
    ir::store_vec(sm, t * 4u, {v[3], v[2], v[1], v[0]});
    auto w = ir::load_vec(sm, t * 4u, 4);
    ir::store_vec(out, base, w);
    auto hv = ir::load_vec(hin, i * 2u, 2);
    ir::store_vec(hout, i * 2u, {hv[1], hv[0]});
  });
  ir::Kernel k = b.build();
  const uint32_t N4 = 300;
  std::vector<float> x(N4 * 4 + 8), o(N4 * 4);
  std::vector<kaio::half> hx(N4 * 2), ho(N4 * 2);
  for (size_t j = 0; j < x.size(); ++j) x[j] = float(j) + 0.5f;
  for (size_t j = 0; j < hx.size(); ++j) hx[j] = kaio::half(float(j));
  poison(o);
  ir::interpret(k, {.grid = {(N4 + 127) / 128}, .block = {128}}, x, o, hx, ho, 4u, N4);
  for (uint32_t j = 0; j < N4 * 4; ++j) REQUIRE(o[j] == x[(j & ~3u) + 3 - (j & 3) + 4]);
  for (uint32_t j = 0; j < N4 * 2; ++j) REQUIRE(ho[j].bits == hx[j ^ 1].bits);
  auto e = expect_usage_error([&] { ir::interpret(k, {.grid = {1}, .block = {32}}, x, o, hx, ho, 2u, 8u); });
  CHECK(e.kernel() == "vec_i");
  CHECK(e.op() == "load_vec");
  CHECK_THAT(e.what(), Contains("misaligned"));
  CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (0, 0, 0)"));
  CHECK_THAT(e.what(), Contains("[2]"));
  CHECK_THAT(e.what(), Contains("16 bytes"));
}

TEST_CASE("interp: the new math, casts with saturation, launch bounds", "[interp][lang]") {
  const size_t n = 3000;
  auto xs = random_doubles(n, -12, 12);
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = float(xs[i]);
    y[i] = float(xs[(i * 7 + 3) % n]) / 3.0f;
  }
  x[0] = 2.5f; x[1] = -2.5f; x[2] = 0.5f; x[3] = -0.0f; x[4] = 3.5f;  // ties
  y[5] = 3.0f; x[5] = -2.0f;   // pow(-2, 3) = -8
  y[6] = 2.0f; x[6] = -2.0f;   // pow(-2, 2) = 4
  y[7] = 0.0f; x[7] = NAN;     // pow(NaN, 0) = 1
  y[8] = 0.5f; x[8] = -4.0f;   // NaN
  x[9] = INFINITY; x[10] = -INFINITY; x[11] = NAN;
  struct Case {
    const char* name;
    std::function<Value(Value, Value)> f;
    std::function<double(float, float)> ref;
    double ulps;  // 0: exact
  };
  auto powref = [](float a, float bb) -> double {
    if (bb == 0) return 1;
    if (a < 0) {
      if (std::trunc(bb) != bb) return NAN;
      double r = std::pow(double(-a), double(bb));
      return std::fmod(bb, 2.0f) != 0 ? -r : r;
    }
    return std::pow(double(a), double(bb));
  };
  std::vector<Case> cases = {
      {"rcp", [](Value a, Value) { return ir::rcp(a); }, [](float a, float) { return 1.0 / a; }, 0.5},
      {"exp2", [](Value a, Value) { return ir::exp2(a); }, [](float a, float) { return std::exp2(double(a)); }, 1},
      {"log2", [](Value a, Value) { return ir::log2(ir::abs(a)); }, [](float a, float) { return std::log2(std::fabs(double(a))); }, 1},
      {"erf", [](Value a, Value) { return ir::erf(a * 0.25f); }, [](float a, float) { return std::erf(double(a * 0.25f)); }, 1},
      {"floor", [](Value a, Value) { return ir::floor(a); }, [](float a, float) { return std::floor(a); }, 0},
      {"ceil", [](Value a, Value) { return ir::ceil(a); }, [](float a, float) { return std::ceil(a); }, 0},
      {"round", [](Value a, Value) { return ir::round(a); }, [](float a, float) { return std::round(a); }, 0},
      {"trunc", [](Value a, Value) { return ir::trunc(a); }, [](float a, float) { return std::trunc(a); }, 0},
      {"rint", [](Value a, Value) { return ir::rint(a); }, [](float a, float) { return std::nearbyint(a); }, 0},
      {"pow", [](Value a, Value bb) { return ir::pow(a, bb); }, powref, 1},
      {"copysign", [](Value a, Value bb) { return ir::copysign(a, bb); }, [](float a, float bb) { return std::copysign(a, bb); }, 0},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    ir::Kernel k = binary_kernel(std::string("nm_") + c.name, Scalar::F32, Scalar::F32, c.f);
    std::vector<float> out(n);
    poison(out);
    ir::interpret(k, shape_for(n), x, y, out, uint32_t(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      double r = c.ref(x[i], y[i]);
      double g = out[i];
      bool ok;
      if (std::isnan(r)) ok = std::isnan(g);
      else if (std::isinf(r) || c.ulps == 0) ok = g == r && std::signbit(g) == std::signbit(r);
      else ok = std::fabs(g - r) <= c.ulps * std::ldexp(1.0, std::ilogb(std::max(std::fabs(r), 1e-37)) - 23);
      if (!ok && bad++ < 3) UNSCOPED_INFO(c.name << "(" << x[i] << ", " << y[i] << ") = " << g << ", want " << r);
    }
    CHECK(bad == 0);
  }
  CHECK(std::signbit(-0.0f));
  // isnan / isinf, f64 rounding, f16 copysign
  ir::KernelBuilder b("classes");
  auto xin = b.param<const float*>("x");
  auto dxin = b.param<const double*>("dx");
  auto o = b.param<uint32_t*>("o");
  auto od = b.param<double*>("od");
  auto nn = b.param<uint32_t>("n");
  Value i = b.global_id_x();
  b.if_(i < nn, [&] {
    Value v = xin[i];
    Value dv = dxin[i];
    Value one = b.constant(1u), zero = b.constant(0u);
    o[i] = ir::select(ir::isnan(v), one, zero) + ir::select(ir::isinf(v), one, zero) * 2u +
           ir::select(ir::isnan(dv), one, zero) * 4u;
    od[i * 3u] = ir::round(dv);
    od[i * 3u + 1u] = ir::rint(dv);
    od[i * 3u + 2u] = ir::rcp(dv);
  });
  ir::Kernel kc = b.build();
  std::vector<double> dx(n);
  for (size_t j = 0; j < n; ++j) dx[j] = j % 5 == 0 ? NAN : xs[j] * 1e3 + (j % 2 ? 0.5 : 0.0);
  std::vector<uint32_t> oc(n);
  std::vector<double> odv(3 * n);
  ir::interpret(kc, shape_for(n), x, dx, oc, odv, uint32_t(n));
  for (size_t j = 0; j < n; ++j) {
    uint32_t e = (std::isnan(x[j]) ? 1 : 0) + (std::isinf(x[j]) ? 2 : 0) + (std::isnan(dx[j]) ? 4 : 0);
    REQUIRE(oc[j] == e);
    if (std::isnan(dx[j])) continue;
    REQUIRE(odv[3 * j] == std::round(dx[j]));
    REQUIRE(odv[3 * j + 1] == std::nearbyint(dx[j]));
    REQUIRE(odv[3 * j + 2] == 1.0 / dx[j]);
  }
  // saturating casts: integers clamp to the range, float targets to [0, 1] with NaN -> 0
  ir::KernelBuilder bs("sat");
  auto si = bs.param<const int32_t*>("si");
  auto sf = bs.param<const float*>("sf");
  auto ou8 = bs.param<uint8_t*>("u8");
  auto os16 = bs.param<int16_t*>("s16");
  auto of = bs.param<float*>("f");
  auto oh = bs.param<kaio::half*>("h");
  auto sn = bs.param<uint32_t>("n");
  Value j = bs.global_id_x();
  bs.if_(j < sn, [&] {
    Value a = si[j];
    Value fv = sf[j];
    ou8[j] = ir::cast_sat<uint8_t>(a);
    os16[j] = ir::cast_sat<int16_t>(a);
    of[j] = ir::cast_sat<float>(fv);
    oh[j] = ir::cast_sat<kaio::half>(fv);
  });
  ir::Kernel ks = bs.build();
  std::vector<int32_t> iv = {-5, 0, 77, 255, 256, 40000, -40000, INT32_MIN, INT32_MAX};
  std::vector<float> fv = {-1.0f, 0.25f, 1.0f, 1.5f, NAN, -0.0f, 0.999f, INFINITY, 1e-3f};
  std::vector<uint8_t> u8(9);
  std::vector<int16_t> s16(9);
  std::vector<float> fo(9);
  std::vector<kaio::half> ho(9);
  ir::interpret(ks, shape_for(9), iv, fv, u8, s16, fo, ho, 9u);
  for (size_t q = 0; q < 9; ++q) {
    CHECK(u8[q] == std::clamp<int64_t>(iv[q], 0, 255));
    CHECK(s16[q] == std::clamp<int64_t>(iv[q], INT16_MIN, INT16_MAX));
    float ref = std::isnan(fv[q]) ? 0.0f : std::clamp(fv[q], 0.0f, 1.0f);
    CHECK(fo[q] == ref);
    CHECK(float(ho[q]) == float(kaio::half(ref)));
  }
  // launch bounds: more threads than max_threads is refused, as by the GPU
  ir::KernelBuilder bl("bounded");
  auto lo = bl.param<uint32_t*>("o");
  bl.launch_bounds(64);
  bl.fast_math();
  bl.comment("comments and fences do nothing here");
  bl.fence();
  lo[bl.global_id_x()] = bl.lane_id();
  ir::Kernel kl = bl.build();
  std::vector<uint32_t> lv(128);
  ir::interpret(kl, {.grid = {2}, .block = {64}}, lv);
  for (uint32_t q = 0; q < 128; ++q) CHECK(lv[q] == q % 32);
  auto e = expect_usage_error([&] { ir::interpret(kl, {.grid = {1}, .block = {128}}, lv); });
  CHECK(e.kernel() == "bounded");
  CHECK_THAT(e.what(), Contains("launch bounds"));
}

TEST_CASE("interp: shared-memory diagnostics (out of bounds, uninitialized, races)", "[interp][lang]") {
  // out of bounds: thread 20 of block 1 stores tile[40] of a 40-element array
  {
    ir::KernelBuilder b("smem_oob");
    auto o = b.param<float*>("o");
    auto tile = b.shared<float>(40);
    Value t = b.thread_idx_x();
    tile[t * 2u] = 1.0f;
    b.barrier();
    Value v = tile[0u];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<float> out(64);
    ir::interpret(k, {.grid = {2}, .block = {20}}, out);  // fine
    auto e = expect_usage_error([&] { ir::interpret(k, {.grid = {2}, .block = {32}}, out); });
    CHECK(e.kernel() == "smem_oob");
    CHECK(e.op() == "store");
    CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (20, 0, 0)"));
    CHECK_THAT(e.what(), Contains("out-of-bounds shared"));
    CHECK_THAT(e.what(), Contains("index 40"));
    CHECK_THAT(e.what(), Contains("40 x f32"));
    CHECK_THAT(e.what(), Contains("shared address 0xa0"));
  }
  // uninitialized: thread 5 reads an element nobody stored
  {
    ir::KernelBuilder b("smem_uninit");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(64);
    Value t = b.thread_idx_x();
    b.if_(t != 5u, [&] { s[t] = 1; });
    b.barrier();
    Value v = s[t];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = expect_usage_error([&] { ir::interpret(k, {.grid = {3, 2}, .block = {64}}, out); });
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("uninitialized shared memory"));
    CHECK_THAT(e.what(), Contains("thread (5, 0, 0)"));
    CHECK_THAT(e.what(), Contains("[5]"));
    CHECK_THAT(e.what(), Contains("0x14"));
  }
  // a read-after-write race between warps (no barrier): thread 32 reads what thread 0 wrote
  {
    ir::KernelBuilder b("smem_race");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(64);
    Value t = b.thread_idx_x();
    b.if_(t < 32u, [&] { s[t] = ir::cast<int32_t>(t); });
    Value v = s[t & 31u];
    o[t] = v;
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = expect_usage_error([&] { ir::interpret(k, {.grid = {1}, .block = {64}}, out); });
    CHECK(e.kernel() == "smem_race");
    CHECK(e.op() == "load");
    CHECK_THAT(e.what(), Contains("race on shared memory"));
    CHECK_THAT(e.what(), Contains("block (0, 0, 0), thread (32, 0, 0)"));  // warp 1 reads s[0] of thread 0
    CHECK_THAT(e.what(), Contains("a store by thread (0, 0, 0)"));
    CHECK_THAT(e.what(), Contains("[0]"));
    CHECK_THAT(e.what(), Contains("shared byte 0x0"));
    // with a barrier between, the same exchange is fine
    ir::KernelBuilder b2("smem_norace");
    auto o2 = b2.param<int32_t*>("o");
    auto s2 = b2.shared<int32_t>(64);
    Value t2 = b2.thread_idx_x();
    s2[t2] = ir::cast<int32_t>(t2);
    b2.barrier();
    Value v2 = s2[(t2 + 32u) & 63u];
    o2[t2] = v2;
    ir::Kernel k2 = b2.build();
    ir::interpret(k2, {.grid = {1}, .block = {64}}, out);
    for (int q = 0; q < 64; ++q) CHECK(out[q] == (q + 32) % 64);
  }
  // write-after-read and write-write races; atomics are not races
  {
    ir::KernelBuilder b("smem_war");
    auto o = b.param<int32_t*>("o");
    auto s = b.shared<int32_t>(8);
    Value t = b.thread_idx_x();
    b.if_(t < 8u, [&] { s[t] = 0; });
    b.barrier();
    (void)ir::atomic_add(s, 0u, 1);  // every thread: fine
    b.barrier();
    Value v = s[0u];
    o[t] = v;
    b.if_(t == 40u, [&] { s[0u] = 5; });  // thread 40 overwrites what all just read
    ir::Kernel k = b.build();
    std::vector<int32_t> out(64);
    auto e = expect_usage_error([&] { ir::interpret(k, {.grid = {1}, .block = {64}}, out); });
    CHECK(e.op() == "store");
    CHECK_THAT(e.what(), Contains("thread (40, 0, 0)"));
    CHECK_THAT(e.what(), Contains("a load by several other threads"));
    ir::KernelBuilder b2("smem_ww");
    auto s2 = b2.shared<int32_t>(8);
    auto o2 = b2.param<int32_t*>("o");
    Value t2 = b2.thread_idx_x();
    s2[t2 & 1u] = 1;
    b2.barrier();
    Value v2 = s2[0u];
    o2[t2] = v2;
    ir::Kernel kw = b2.build();
    auto e2 = expect_usage_error([&] { ir::interpret(kw, {.grid = {1}, .block = {4}}, out); });
    CHECK(e2.op() == "store");
    CHECK_THAT(e2.what(), Contains("thread (2, 0, 0)"));
    CHECK_THAT(e2.what(), Contains("a store by thread (0, 0, 0)"));
  }
}
