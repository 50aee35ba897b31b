// The fluent kernel builder. Handles (Value, Ref, Var) point back into the builder;
// operators on them append instructions at the builder's insertion point.
//
//   ir::KernelBuilder b("saxpy");
//   auto a = b.param<float>("a");
//   auto x = b.param<const float*>("x");
//   auto y = b.param<float*>("y");
//   auto n = b.param<uint32_t>("n");
//   auto i = b.global_id_x();
//   b.if_(i < n, [&] { y[i] = a * x[i] + y[i]; });
//   ir::Kernel k = b.build();
//
// Every misuse (mixed types without a cast, a store through a const pointer, a value used
// outside the scope that defines it, ...) throws kaio::UsageError naming kernel and op.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

class KernelBuilder;
class Ref;
class Var;

// An immutable SSA value of the kernel under construction.
class Value {
 public:
  Value() = default;
  Value(KernelBuilder* b, uint32_t id, Type t) : b_(b), id_(id), type_(t) {}
  KernelBuilder* builder() const { return b_; }
  uint32_t id() const { return id_; }
  Type type() const { return type_; }
  bool valid() const { return b_ != nullptr; }

  // Element of a global pointer: p[i] reads, p[i] = v writes.
  template <class I>
  Ref operator[](const I& index) const;

 private:
  KernelBuilder* b_ = nullptr;
  uint32_t id_ = kNoValue;
  Type type_{};
};

// A host literal (1.0f, 3, true) before it takes the type of the value it meets.
struct Literal {
  enum Kind : uint8_t { Bool, Int, UInt, Float } kind;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
};

template <class T>
concept ExprHandle = std::same_as<std::remove_cvref_t<T>, Value> ||
                     std::same_as<std::remove_cvref_t<T>, Ref> ||
                     std::same_as<std::remove_cvref_t<T>, Var>;
template <class T>
concept LiteralLike = std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::half> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::bfloat16>;
template <class T>
concept Operand = ExprHandle<T> || LiteralLike<T>;

// p[i]: for a pointer to const the element is loaded where the expression stands; for a
// mutable pointer it is loaded at its first read (so `out[i] = v` emits only a store).
class Ref {
 public:
  Ref(Value ptr, Value index);
  Value load() const;
  operator Value() const { return load(); }
  template <Operand T>
  const Ref& operator=(const T& v) const;
  const Ref& operator=(const Ref& v) const;  // out[i] = in[i] stores, never rebinds
  Ref(const Ref&) = default;
  template <Operand T> const Ref& operator+=(const T& v) const;
  template <Operand T> const Ref& operator-=(const T& v) const;
  template <Operand T> const Ref& operator*=(const T& v) const;

  Value ptr() const { return ptr_; }
  Value index() const { return index_; }

 private:
  Value ptr_, index_;
  mutable Value loaded_;
};

// A mutable variable: `auto acc = b.var<float>(0.0f); acc += x[i];`. Reading it yields the
// value it holds at that point of the program.
class Var {
 public:
  Var(KernelBuilder* b, uint32_t id, Type t) : b_(b), id_(id), type_(t) {}
  Var(const Var&) = default;
  Value get() const;
  operator Value() const { return get(); }
  template <Operand T> Var& operator=(const T& v);
  Var& operator=(const Var& v);  // assigns the value, never rebinds
  template <Operand T> Var& operator+=(const T& v);
  template <Operand T> Var& operator-=(const T& v);
  template <Operand T> Var& operator*=(const T& v);
  template <Operand T> Var& operator/=(const T& v);
  Type type() const { return type_; }
  uint32_t id() const { return id_; }
  KernelBuilder* builder() const { return b_; }

 private:
  KernelBuilder* b_;
  uint32_t id_;
  Type type_;
};

class IfChain {
 public:
  IfChain(KernelBuilder* b, Block* block, size_t index) : b_(b), block_(block), index_(index) {}
  void else_(const std::function<void()>& body);

 private:
  KernelBuilder* b_;
  Block* block_;
  size_t index_;
};

template <class T>
Literal make_literal(const T& v) {
  using D = std::remove_cvref_t<T>;
  if constexpr (std::same_as<D, bool>) return Literal{Literal::Bool, v ? 1 : 0, v ? 1u : 0u, v ? 1.0 : 0.0};
  else if constexpr (std::same_as<D, kaio::half> || std::same_as<D, kaio::bfloat16>)
    return Literal{Literal::Float, 0, 0, static_cast<double>(static_cast<float>(v))};
  else if constexpr (std::is_floating_point_v<D>) return Literal{Literal::Float, 0, 0, static_cast<double>(v)};
  else if constexpr (std::is_signed_v<D>) return Literal{Literal::Int, static_cast<int64_t>(v), 0, 0};
  else return Literal{Literal::UInt, 0, static_cast<uint64_t>(v), 0};
}

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  const std::string& name() const;

  // Parameters, in launch order.
  Value param(const std::string& name, Type t);
  template <class T>
  Value param(const std::string& name) { return param(name, type_of<T>()); }

  // A specialization constant: a named compile-time value (a "shape") that enters the key.
  template <HostScalar T>
  Value spec(const std::string& name, T v) { return spec(name, type_of<T>(), make_literal(v)); }
  Value spec(const std::string& name, Type t, Literal v);

  template <HostScalar T>
  Value constant(T v) { return constant(type_of<T>(), make_literal(v), "const"); }
  Value constant(Type t, Literal v, const char* op);

  Value thread_idx_x(), thread_idx_y(), thread_idx_z();
  Value block_idx_x(), block_idx_y(), block_idx_z();
  Value block_dim_x(), block_dim_y(), block_dim_z();
  Value grid_dim_x(), grid_dim_y(), grid_dim_z();
  Value global_id_x(), global_id_y(), global_id_z();  // ctaid * ntid + tid, u32

  template <HostScalar T, Operand I>
  Var var(const I& init) { return var(type_of<T>(), lift(init, type_of<T>(), "var")); }
  Var var(Type t, Value init);

  IfChain if_(const Value& cond, const std::function<void()>& then);
  // Half-open counting loop: for (i = lo; i < hi; i += step). Operands share one integer
  // type (literals take it from the others; all literals give s32).
  template <Operand L, Operand H, Operand S>
  void for_(const L& lo, const H& hi, const S& step, const std::function<void(Value)>& body) {
    for_impl(make_operand(lo), make_operand(hi), make_operand(step), body);
  }
  template <Operand L, Operand H>
  void for_(const L& lo, const H& hi, const std::function<void(Value)>& body) {
    for_impl(make_operand(lo), make_operand(hi), make_operand(1), body);
  }
  void while_(const std::function<Value()>& cond, const std::function<void()>& body);
  void return_();

  // Verifies and seals the kernel; the builder cannot be used afterwards.
  Kernel build();

  // ---- used by the handles and operators; not needed by kernel authors ----
  struct AnyOperand {
    bool is_value;
    Value value;
    Literal lit;
  };
  template <Operand T>
  static AnyOperand make_operand(const T& v) {
    if constexpr (ExprHandle<T>) return AnyOperand{true, to_value(v), {}};
    else return AnyOperand{false, {}, make_literal(v)};
  }
  static Value to_value(const Value& v) { return v; }
  static Value to_value(const Ref& r) { return r.load(); }
  static Value to_value(const Var& v) { return v.get(); }
  template <Operand T>
  Value lift(const T& v, Type want, const char* op) {
    if constexpr (ExprHandle<T>) return to_value(v);
    else return constant(want, make_literal(v), op);
  }

  Value unary(Op op, Value a);
  Value binary(Op op, const AnyOperand& a, const AnyOperand& b);
  Value select(Value c, const AnyOperand& a, const AnyOperand& b);
  Value fma(const AnyOperand& a, const AnyOperand& b, const AnyOperand& c);
  Value cast(Value v, Type to, Rounding r);
  Value load(Value ptr, Value index);
  void store(Value ptr, Value index, const AnyOperand& v);
  Value var_read(const Var& v);
  void var_write(const Var& v, const AnyOperand& val);
  Value index_operand(const AnyOperand& idx);
  void check(const Value& v, const char* op) const;
  [[noreturn]] void fail(const char* op, const std::string& msg) const;

 private:
  void for_impl(AnyOperand lo, AnyOperand hi, AnyOperand step, const std::function<void(Value)>& body);
  Value sreg(SpecialReg r);
  Value emit(Op op, Type t, std::initializer_list<Value> args, uint64_t imm = 0, bool result = true);
  uint32_t new_value(Type t, bool is_var, std::string name = {});
  Block* current();
  void push_region(Block* blk);
  void pop_region();
  void ensure_open(const char* op) const;
  Value resolve_literal(const AnyOperand& x, Type want, const char* op);
  Type unify(const char* op, const AnyOperand& a, const AnyOperand& b);

  friend class IfChain;
  struct State;
  std::unique_ptr<State> s_;
};

// ---------------- operators ----------------
#define KAIO_BINOP(sym, OPC)                                                        \
  template <Operand A, Operand B>                                                   \
    requires(ExprHandle<A> || ExprHandle<B>)                                        \
  Value operator sym(const A& a, const B& b) {                                      \
    auto x = KernelBuilder::make_operand(a);                                        \
    auto y = KernelBuilder::make_operand(b);                                        \
    KernelBuilder* kb = x.is_value ? x.value.builder() : y.value.builder();         \
    return kb->binary(Op::OPC, x, y);                                               \
  }
KAIO_BINOP(+, Add)
KAIO_BINOP(-, Sub)
KAIO_BINOP(*, Mul)
KAIO_BINOP(/, Div)
KAIO_BINOP(%, Rem)
KAIO_BINOP(&, And)
KAIO_BINOP(|, Or)
KAIO_BINOP(^, Xor)
KAIO_BINOP(<<, Shl)
KAIO_BINOP(>>, Shr)
KAIO_BINOP(==, Eq)
KAIO_BINOP(!=, Ne)
KAIO_BINOP(<, Lt)
KAIO_BINOP(<=, Le)
KAIO_BINOP(>, Gt)
KAIO_BINOP(>=, Ge)
KAIO_BINOP(&&, And)
KAIO_BINOP(||, Or)
#undef KAIO_BINOP

template <ExprHandle A>
Value operator-(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Neg, v);
}
template <ExprHandle A>
Value operator!(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Not, v);
}
template <ExprHandle A>
Value operator~(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Not, v);
}

#define KAIO_UNARY_FN(fname, OPC)                 \
  template <ExprHandle A>                         \
  Value fname(const A& a) {                       \
    Value v = KernelBuilder::to_value(a);         \
    return v.builder()->unary(Op::OPC, v);        \
  }
KAIO_UNARY_FN(abs, Abs)
KAIO_UNARY_FN(sqrt, Sqrt)
KAIO_UNARY_FN(rsqrt, Rsqrt)
KAIO_UNARY_FN(exp, Exp)
KAIO_UNARY_FN(log, Log)
KAIO_UNARY_FN(tanh, Tanh)
KAIO_UNARY_FN(sin, Sin)
KAIO_UNARY_FN(cos, Cos)
#undef KAIO_UNARY_FN

template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value min(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::Min, x, y);
}
template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value max(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::Max, x, y);
}
// a * b + c with a single rounding.
template <Operand A, Operand B, Operand C>
Value fma(const A& a, const B& b, const C& c) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b),
       z = KernelBuilder::make_operand(c);
  KernelBuilder* kb = x.is_value ? x.value.builder() : y.is_value ? y.value.builder() : z.value.builder();
  if (!kb) throw UsageError("", "fma", "at least one operand must be a kernel value");
  return kb->fma(x, y, z);
}
template <ExprHandle C, Operand A, Operand B>
Value select(const C& cond, const A& a, const B& b) {
  Value c = KernelBuilder::to_value(cond);
  return c.builder()->select(c, KernelBuilder::make_operand(a), KernelBuilder::make_operand(b));
}
// Conversion with explicit rounding. Defaults: float->int truncates (rzi), int->float and
// narrowing float conversions round to nearest even (rn).
template <HostScalar T, ExprHandle A>
Value cast(const A& a, Rounding r = Rounding::Default) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->cast(v, type_of<T>(), r);
}
template <ExprHandle A>
Value cast(const A& a, Type to, Rounding r = Rounding::Default) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->cast(v, to, r);
}

// ---------------- handle templates ----------------
template <class I>
Ref Value::operator[](const I& index) const {
  static_assert(Operand<I>, "kaio: index must be a kernel value or an integer literal");
  if (!b_) throw UsageError("", "index", "indexing an empty Value");
  return Ref(*this, b_->index_operand(KernelBuilder::make_operand(index)));
}

template <Operand T>
const Ref& Ref::operator=(const T& v) const {
  ptr_.builder()->store(ptr_, index_, KernelBuilder::make_operand(v));
  loaded_ = Value();
  return *this;
}
template <Operand T>
const Ref& Ref::operator+=(const T& v) const { return *this = load() + v; }
template <Operand T>
const Ref& Ref::operator-=(const T& v) const { return *this = load() - v; }
template <Operand T>
const Ref& Ref::operator*=(const T& v) const { return *this = load() * v; }

template <Operand T>
Var& Var::operator=(const T& v) {
  b_->var_write(*this, KernelBuilder::make_operand(v));
  return *this;
}
template <Operand T> Var& Var::operator+=(const T& v) { return *this = get() + v; }
template <Operand T> Var& Var::operator-=(const T& v) { return *this = get() - v; }
template <Operand T> Var& Var::operator*=(const T& v) { return *this = get() * v; }
template <Operand T> Var& Var::operator/=(const T& v) { return *this = get() / v; }

}  // namespace kaio::ir
