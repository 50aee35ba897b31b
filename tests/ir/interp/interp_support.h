// Helpers shared by the interpreter tests: random inputs, poisoning, one-op kernels and
// the exact / float64 references they are checked against.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "kaio/ir/interp/interp.h"
#include "kaio/kaio.h"
#include "../../kernels.h"
#include "../../support.h"

namespace kaio::test::interp {

using ir::Scalar;
using ir::Type;
using ir::Value;


inline std::mt19937_64& rng() {
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

inline std::vector<double> random_doubles(size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng());
  return v;
}

template <class T>
void poison(std::vector<T>& v) {
  std::memset(static_cast<void*>(v.data()), 0xA5, v.size() * sizeof(T));
}

inline ir::LaunchShape shape_for(size_t n, uint32_t block = 64) {
  return ir::LaunchShape{{(n + block - 1) / block}, {block}};
}

// out[i] = f(a[i], b[i]) for i < n; `f` builds the expression.
inline ir::Kernel binary_kernel(const std::string& name, Scalar in, Scalar out, const std::function<Value(Value, Value)>& f) {
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

inline ir::Kernel unary_kernel(const std::string& name, Scalar in, Scalar out, const std::function<Value(Value)>& f) {
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

}  // namespace kaio::test::interp
