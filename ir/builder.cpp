#include "kaio/ir/builder.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace kaio::ir {

struct KernelBuilder::State {
  std::unique_ptr<Kernel::Data> k;
  std::vector<Block*> blocks;       // insertion points; back() is current
  std::vector<uint32_t> scopes;     // open scopes, innermost last
  std::vector<uint8_t> scope_open;  // by scope id (bytes: read on every operand check)
  bool built = false;
  std::string name;
};

namespace {

std::string vname(const Kernel::Data& k, uint32_t id) {
  std::string s = "%" + std::to_string(id);
  const std::string& name = k.value_name(id);
  if (!name.empty()) s += " ('" + name + "')";
  return s;
}

// Spare top-level buffers, one set per thread. A builder starts from the capacity the last
// one on this thread left, and build() copies the kernel out at its exact size: growing
// fresh vectors would move every instruction at each doubling and fault in new pages,
// which was most of the cost of building a large kernel. Buffers above the bound are
// dropped, so a thread keeps at most ~0.5 MB.
struct Spare {
  static constexpr size_t kMaxInsts = 4096, kMaxValues = 8192;
  std::vector<Inst> insts;
  std::vector<ValueInfo> values;
};
thread_local Spare t_spare;

template <class T>
std::vector<T> take_spare(std::vector<T>& spare, size_t min_capacity) {
  std::vector<T> v = std::move(spare);
  spare = {};
  v.clear();
  v.reserve(min_capacity);
  return v;
}

// Moves `v` into an exactly sized vector and keeps its buffer as the thread's spare. A
// buffer too large to keep stays with the kernel as it is (no copy).
template <class T>
std::vector<T> exact_copy(std::vector<T>& v, std::vector<T>& spare, size_t max_spare) {
  if (v.capacity() > max_spare) return std::move(v);
  std::vector<T> out;
  out.reserve(v.size());
  std::move(v.begin(), v.end(), std::back_inserter(out));
  v.clear();
  if (v.capacity() > spare.capacity()) spare = std::move(v);
  return out;
}

}  // namespace

KernelBuilder::KernelBuilder(std::string name) : s_(std::make_unique<State>()) {
  if (name.empty()) throw UsageError("", "KernelBuilder", "a kernel needs a non-empty name");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) throw UsageError(name, "KernelBuilder", "kernel names may hold only letters, digits and '_'");
  }
  if (name[0] >= '0' && name[0] <= '9') throw UsageError(name, "KernelBuilder", "a kernel name may not start with a digit");
  s_->k = std::make_unique<Kernel::Data>();
  s_->k->values = take_spare(t_spare.values, 256);  // most kernels fit: no reallocation while building
  s_->k->body.insts = take_spare(t_spare.insts, 128);
  s_->name = name;
  s_->k->name = std::move(name);
  s_->scope_open.push_back(true);
  s_->scopes.push_back(0);
  s_->blocks.push_back(&s_->k->body);
}

KernelBuilder::~KernelBuilder() = default;

const std::string& KernelBuilder::name() const { return s_->name; }

void KernelBuilder::fail(const char* op, const std::string& msg) const { throw UsageError(name(), op, msg); }

void KernelBuilder::ensure_open(const char* op) const {
  if (s_->built) fail(op, "the kernel was already built; make a new KernelBuilder");
}

Block* KernelBuilder::current() { return s_->blocks.back(); }
Kernel::Data& KernelBuilder::data() { return *s_->k; }

bool KernelBuilder::fast_math_on() const { return s_->k->fast_math; }

uint32_t KernelBuilder::new_value(Type t, bool is_var) {
  auto& vals = s_->k->values;
  vals.push_back(ValueInfo{t, s_->scopes.back(), is_var});
  return static_cast<uint32_t>(vals.size() - 1);
}

Inst& KernelBuilder::append(Op op, Type t) {
  Inst& inst = current()->insts.emplace_back();
  inst.op = op;
  inst.type = t;
  return inst;
}

void KernelBuilder::check(const Value& v, const char* op) const {
  // One test on the hot path (every operand of every op); the message is built out of line.
  if (s_->built) [[unlikely]]
    bad_value(v, op);
  const auto& vals = s_->k->values;
  if (!v.valid() || v.builder() != this || v.id() >= vals.size() || vals[v.id()].is_var ||
      !s_->scope_open[vals[v.id()].scope]) [[unlikely]]
    bad_value(v, op);
}

void KernelBuilder::bad_value(const Value& v, const char* op) const {
  ensure_open(op);
  if (!v.valid()) fail(op, "an empty (default-constructed) Value was used");
  if (v.builder() != this) fail(op, "a value of another kernel builder was used");
  const auto& vals = s_->k->values;
  if (v.id() >= vals.size() || vals[v.id()].is_var) fail(op, "invalid value handle");
  fail(op, "value " + vname(*s_->k, v.id()) + " is used outside the scope that defines it "
           "(it was made inside an if_/for_/while_ body that has ended); hold it in a b.var instead");
}

Value KernelBuilder::emit(Op op, Type t, std::initializer_list<Value> args, const Attrs& attr, bool result) {
  Inst& inst = append(op, t);
  inst.attr = attr;
  inst.args.reserve(args.size());
  for (const Value& a : args) inst.args.push_back(a.id());
  if (op == Op::If) inst.regions.resize(2);
  if (op == Op::For) inst.regions.resize(1);
  if (op == Op::While) inst.regions.resize(2);
  if (result) inst.result = new_value(t, false);
  return result ? Value(this, inst.result, t) : Value();
}

void KernelBuilder::push_region(Block* blk) {
  uint32_t id = static_cast<uint32_t>(s_->scope_open.size());
  s_->scope_open.push_back(true);
  s_->scopes.push_back(id);
  s_->blocks.push_back(blk);
}

void KernelBuilder::pop_region() {
  s_->scope_open[s_->scopes.back()] = false;
  s_->scopes.pop_back();
  s_->blocks.pop_back();
}

namespace {
// Restores the insertion point even when a body throws.
struct RegionGuard {
  std::function<void()> pop;
  ~RegionGuard() { pop(); }
};
}  // namespace

// ---------------- leaves ----------------

Value KernelBuilder::param(const std::string& pname, Type t) {
  ensure_open("param");
  if (s_->blocks.size() != 1) fail("param", "parameter '" + pname + "' must be declared at the top level, not inside a body");
  if (t.ptr && t.elem == Scalar::Pred) fail("param", "parameter '" + pname + "': pointers to pred are not supported; use u8");
  for (const Param& p : s_->k->params)
    if (p.name == pname && !pname.empty()) fail("param", "parameter name '" + pname + "' is used twice");
  uint64_t index = s_->k->params.size();
  s_->k->params.push_back(Param{pname, t});
  Attrs a;
  a.index = static_cast<uint32_t>(index);
  Value v = emit(Op::Param, t, {}, a);
  s_->k->value_names.emplace_back(v.id(), pname);
  return v;
}

namespace {
uint64_t literal_bits(const KernelBuilder& b, Type t, const Literal& lit, const char* op) {
  if (t.ptr) b.fail(op, "a literal cannot become a pointer");
  auto describe = [&] {
    switch (lit.kind) {
      case Literal::Float: return std::to_string(lit.f);
      case Literal::Int: return std::to_string(lit.i);
      case Literal::UInt: return std::to_string(lit.u);
      default: return std::string(lit.i ? "true" : "false");
    }
  };
  if (t.elem == Scalar::Pred) {
    if (lit.kind == Literal::Float) b.fail(op, "a floating-point literal cannot become a pred");
    int64_t v = lit.kind == Literal::UInt ? static_cast<int64_t>(lit.u) : lit.i;
    if (v != 0 && v != 1) b.fail(op, "literal " + describe() + " is not a pred (0/1)");
    return static_cast<uint64_t>(v);
  }
  if (t.is_int()) {
    if (lit.kind == Literal::Float)
      b.fail(op, "floating-point literal " + describe() + " meets an integer value of type " + t.str() +
                     "; use an integer literal or ir::cast");
    int bits = scalar_bits(t.elem);
    bool neg = lit.kind == Literal::Int && lit.i < 0;
    if (t.is_signed()) {
      int64_t lo = bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits - 1));
      int64_t hi = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits - 1)) - 1;
      if (lit.kind == Literal::UInt ? lit.u > uint64_t(hi) : (lit.i < lo || lit.i > hi))
        b.fail(op, "literal " + describe() + " does not fit in " + t.str());
    } else {
      uint64_t hi = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
      if (neg || (lit.kind == Literal::UInt ? lit.u > hi : uint64_t(lit.i) > hi))
        b.fail(op, "literal " + describe() + " does not fit in " + t.str());
    }
    uint64_t raw = lit.kind == Literal::UInt ? lit.u : static_cast<uint64_t>(lit.i);
    return bits == 64 ? raw : raw & ((uint64_t(1) << bits) - 1);
  }
  double d = lit.kind == Literal::Float ? lit.f
             : lit.kind == Literal::UInt ? static_cast<double>(lit.u)
                                         : static_cast<double>(lit.i);
  switch (t.elem) {
    case Scalar::F64: {
      uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    case Scalar::F32: return detail::f32_bits(static_cast<float>(d));
    case Scalar::F16: return kaio::half(static_cast<float>(d)).bits;
    case Scalar::BF16: return kaio::bfloat16(static_cast<float>(d)).bits;
    case Scalar::F16x2: {  // a literal meets a packed value in both halves
      uint64_t h = kaio::half(static_cast<float>(d)).bits;
      return h | (h << 16);
    }
    case Scalar::BF16x2: {
      uint64_t h = kaio::bfloat16(static_cast<float>(d)).bits;
      return h | (h << 16);
    }
    // fp8 literals round once from the double, as the host types do (e4m3 saturates,
    // e5m2 overflows to infinity).
    case Scalar::E4M3: return kaio::detail::f64_to_fp8_bits(d, false, true);
    case Scalar::E5M2: return kaio::detail::f64_to_fp8_bits(d, true, false);
    default: b.fail(op, "unsupported literal type " + t.str());
  }
}
}  // namespace

Value KernelBuilder::constant(Type t, Literal v, const char* op) {
  ensure_open(op);
  Attrs a;
  a.bits = literal_bits(*this, t, v, op);
  Value c = emit(Op::Const, t, {}, a);
  s_->k->values[c.id()].is_const = true;
  s_->k->values[c.id()].bits = a.bits;
  return c;
}

Value KernelBuilder::spec(const std::string& sname, Type t, Literal v) {
  ensure_open("spec");
  for (const auto& s : s_->k->specs)
    if (s.name == sname) fail("spec", "specialization constant '" + sname + "' is declared twice");
  if (t.ptr) fail("spec", "specialization constant '" + sname + "' must be a scalar");
  Value c = constant(t, v, "spec");
  s_->k->value_names.emplace_back(c.id(), sname);
  s_->k->specs.push_back(SpecConstant{sname, t, current()->insts.back().attr.bits, c.id()});
  return c;
}

Value KernelBuilder::sreg(SpecialReg r) {
  ensure_open("sreg");
  Attrs a;
  a.sreg = r;
  return emit(Op::SReg, Type::scalar(Scalar::U32), {}, a);
}

Value KernelBuilder::thread_idx_x() { return sreg(SpecialReg::TidX); }
Value KernelBuilder::thread_idx_y() { return sreg(SpecialReg::TidY); }
Value KernelBuilder::thread_idx_z() { return sreg(SpecialReg::TidZ); }
Value KernelBuilder::block_dim_x() { return sreg(SpecialReg::NtidX); }
Value KernelBuilder::block_dim_y() { return sreg(SpecialReg::NtidY); }
Value KernelBuilder::block_dim_z() { return sreg(SpecialReg::NtidZ); }
Value KernelBuilder::block_idx_x() { return sreg(SpecialReg::CtaidX); }
Value KernelBuilder::block_idx_y() { return sreg(SpecialReg::CtaidY); }
Value KernelBuilder::block_idx_z() { return sreg(SpecialReg::CtaidZ); }
Value KernelBuilder::grid_dim_x() { return sreg(SpecialReg::NctaidX); }
Value KernelBuilder::grid_dim_y() { return sreg(SpecialReg::NctaidY); }
Value KernelBuilder::grid_dim_z() { return sreg(SpecialReg::NctaidZ); }
// Each operand is made in its own statement: C++ leaves the evaluation order of operator
// operands open, and the IR (hence the key) must not depend on the host compiler.
Value KernelBuilder::global_id_x() {
  Value c = block_idx_x(), d = block_dim_x(), t = thread_idx_x();
  return c * d + t;
}
Value KernelBuilder::global_id_y() {
  Value c = block_idx_y(), d = block_dim_y(), t = thread_idx_y();
  return c * d + t;
}
Value KernelBuilder::global_id_z() {
  Value c = block_idx_z(), d = block_dim_z(), t = thread_idx_z();
  return c * d + t;
}

// A constant index value, if the builder made it with Op::Const (the value table records
// constants, so this is O(1) and building stays linear in the kernel's size).
bool KernelBuilder::const_value(uint32_t id, uint64_t& out) const {
  const ValueInfo& v = s_->k->values[id];
  if (!v.is_const) return false;
  out = v.bits;
  return true;
}

// ---------------- typing helpers ----------------

Value KernelBuilder::resolve_literal(const AnyOperand& x, Type want, const char* op) {
  if (x.is_value) {
    check(x.value, op);
    return x.value;
  }
  return constant(want, x.lit, op);
}

Type KernelBuilder::unify(const char* op, const AnyOperand& a, const AnyOperand& b) {
  if (a.is_value) check(a.value, op);
  if (b.is_value) check(b.value, op);
  if (a.is_value && b.is_value && !(a.value.type() == b.value.type()))
    fail(op, "operands have different types: " + a.value.type().str() + " and " + b.value.type().str() +
                 "; convert one with ir::cast<T>()");
  if (a.is_value) return a.value.type();
  if (b.is_value) return b.value.type();
  fail(op, "at least one operand must be a kernel value");
}

// ---------------- arithmetic ----------------

void KernelBuilder::require_types(const OpDef& d, Type t) const {
  if (d.types == 0 || (type_class(t) & d.types)) return;
  std::string hint;
  if (t.elem == Scalar::F64 && (d.types & TC::F32)) hint = "; cast to f32";
  else if (t.is_int() && (d.types & TC::F32)) hint = "; use ir::cast<float>()";
  else if (t.is_packed()) hint = "; unpack the halves first";
  else if (t.is_pred() && (d.types & TC::Int)) hint = "; use && || !";
  else if (t.is_fp8()) hint = "; " + t.str() + " is a storage type: convert it first (ir::cast<float>(x))";
  fail(d.name, std::string(d.name) + " is defined on " + describe_classes(d.types) + ", not " + t.str() + hint);
}

Value KernelBuilder::unary(Op op, Value a) {
  const OpDef& d = op_def(op);
  check(a, d.name);
  Type t = a.type();
  if (t.ptr) fail(d.name, "cannot apply " + std::string(d.name) + " to a pointer");
  require_types(d, t);
  return emit(op, d.rule == OpRule::Classify ? Type::scalar(Scalar::Pred) : t, {a});
}

Value KernelBuilder::binary(Op op, const AnyOperand& a, const AnyOperand& b) {
  const char* name = op_name(op);
  ensure_open(name);
  Type t = unify(name, a, b);
  if (t.ptr) fail(name, "pointer arithmetic is not supported; index the pointer instead: p[i]");
  const OpDef& d = op_def(op);
  bool cmp = d.rule == OpRule::Compare;
  require_types(d, t);
  Value va = resolve_literal(a, t, name);
  Value vb = resolve_literal(b, t, name);
  return emit(op, cmp ? Type::scalar(Scalar::Pred) : t, {va, vb});
}

Value KernelBuilder::select(Value c, const AnyOperand& a, const AnyOperand& b) {
  check(c, "select");
  if (!c.type().is_pred()) fail("select", "the condition must be pred, got " + c.type().str());
  Type t = unify("select", a, b);
  Value va = resolve_literal(a, t, "select");
  Value vb = resolve_literal(b, t, "select");
  return emit(Op::Select, t, {c, va, vb});
}

Value KernelBuilder::fma(const AnyOperand& a, const AnyOperand& b, const AnyOperand& c) {
  ensure_open("fma");
  Type t{};
  bool have = false;
  for (const AnyOperand* x : {&a, &b, &c}) {
    if (!x->is_value) continue;
    check(x->value, "fma");
    if (have && !(x->value.type() == t))
      fail("fma", "operands have different types: " + t.str() + " and " + x->value.type().str());
    t = x->value.type();
    have = true;
  }
  if (!have) fail("fma", "at least one operand must be a kernel value");
  require_types(op_def(Op::Fma), t);
  Value va = resolve_literal(a, t, "fma"), vb = resolve_literal(b, t, "fma"), vc = resolve_literal(c, t, "fma");
  return emit(Op::Fma, t, {va, vb, vc});
}

Value KernelBuilder::dp4a(Value a, Value b, Value c) {
  ensure_open("dp4a");
  const Type s32 = Type::scalar(Scalar::S32);
  for (Value* x : {&a, &b, &c}) {
    check(*x, "dp4a");
    if (!(x->type() == s32)) fail("dp4a", "operands must be s32 (four s8 in a, four s8 in b, the sum in c), not " + x->type().str());
  }
  return emit(Op::Dp4a, s32, {a, b, c});
}

Value KernelBuilder::cast(Value v, Type to, Rounding r) {
  check(v, "cast");
  Type from = v.type();
  if (from.ptr || to.ptr) fail("cast", "pointers cannot be cast (" + from.str() + " -> " + to.str() + ")");
  if ((from.is_packed() || to.is_packed()) && !(from == to))
    fail("cast", "packed pairs convert through ir::pack2 / ir::unpack_lo / ir::unpack_hi, not cast (" + from.str() +
                     " -> " + to.str() + ")");
  if (from == to) return v;
  if (from.is_fp8() || to.is_fp8()) {
    // fp8 is a storage type: it converts from and to the float types (and the other fp8
    // format) only. Widening is exact; narrowing to fp8 is cvt.rn.satfinite, the one form
    // PTX has: to nearest even, saturating to the largest finite value.
    const Type other = from.is_fp8() ? to : from;
    if (!other.is_float() && !other.is_fp8())
      fail("cast", "e4m3 and e5m2 convert to and from f16, bf16, f32 and f64 only, not " + from.str() + " -> " + to.str() +
                       "; convert integers through f32");
    if (to.is_fp8() && r != Rounding::Default && r != Rounding::Rn)
      fail("cast", "conversion to " + to.str() + " rounds to nearest even only (cvt.rn.satfinite), not " + rounding_name(r));
    if (!to.is_fp8() && r != Rounding::Default)
      fail("cast", "conversion " + from.str() + " -> " + to.str() + " is exact; no rounding mode applies");
    Attrs at;
    at.rounding = to.is_fp8() ? Rounding::Rn : Rounding::Default;
    return emit(Op::Cast, to, {v}, at);
  }
  bool ff = from.is_float(), tf = to.is_float();
  auto no_rounding = [&] {
    if (r != Rounding::Default)
      fail("cast", "conversion " + from.str() + " -> " + to.str() + " is exact; no rounding mode applies");
    return Rounding::Default;
  };
  Rounding eff = Rounding::Default;
  if (from.is_pred() || to.is_pred()) {
    eff = no_rounding();
  } else if (ff && tf) {
    bool narrowing = scalar_bits(to.elem) < scalar_bits(from.elem) ||
                     (from.elem == Scalar::F16 && to.elem == Scalar::BF16) ||
                     (from.elem == Scalar::BF16 && to.elem == Scalar::F16);
    if (!narrowing) {
      eff = no_rounding();
    } else {
      eff = r == Rounding::Default ? Rounding::Rn : r;
      bool half_target = to.elem == Scalar::F16 || to.elem == Scalar::BF16;
      if (half_target && eff != Rounding::Rn && eff != Rounding::Rz)
        fail("cast", std::string("conversion to ") + to.str() + " supports rounding rn or rz, not " + rounding_name(eff));
    }
  } else if (ff && !tf) {
    eff = r == Rounding::Default ? Rounding::Rz : r;  // C semantics: truncate
  } else if (!ff && tf) {
    eff = r == Rounding::Default ? Rounding::Rn : r;
  } else {
    eff = no_rounding();
  }
  Attrs at;
  at.rounding = eff;
  return emit(Op::Cast, to, {v}, at);
}

Value KernelBuilder::cast_sat(Value v, Type to, Rounding r) {
  check(v, "cast_sat");
  if (v.type().is_pred() || to.is_pred() || v.type().ptr || to.ptr)
    fail("cast_sat", "saturating conversions are between numeric types, not " + v.type().str() + " -> " + to.str());
  if (v.type().is_fp8() || to.is_fp8())
    fail("cast_sat", "no saturating conversion involves " + std::string(v.type().is_fp8() ? v.type().str() : to.str()) +
                         " (conversions to fp8 always saturate to its finite range); use ir::cast");
  if (v.type() == to && !to.is_float()) return v;  // an integer is already in its own range
  // cast() emits nothing for identical types, so a same-type float clamp is emitted here.
  Value c = v.type() == to ? emit(Op::Cast, to, {v}) : cast(v, to, r);
  current()->insts.back().attr.saturate = true;  // the Cast just emitted
  return c;
}

Value KernelBuilder::pack(Value lo, Value hi) {
  check(lo, "pack");
  check(hi, "pack");
  if (!(lo.type() == hi.type()) || (lo.type().elem != Scalar::F16 && lo.type().elem != Scalar::BF16) || lo.type().ptr)
    fail("pack", "pack2 takes two f16 or two bf16 values, got " + lo.type().str() + " and " + hi.type().str());
  Scalar pe = lo.type().elem == Scalar::F16 ? Scalar::F16x2 : Scalar::BF16x2;
  return emit(Op::Pack, Type::scalar(pe), {lo, hi});
}

Value KernelBuilder::bitcast(Value v, Scalar to) {
  check(v, "bitcast");
  if (!v.type().is_bitcast_word() || !Type::scalar(to).is_bitcast_word())
    fail("bitcast", std::string("bitcast reinterprets u32, f32, f16x2 and bf16x2, not ") + v.type().str() + " -> " + scalar_name(to));
  if (v.type().elem == to) return v;
  return emit(Op::Bitcast, Type::scalar(to), {v});
}

Value KernelBuilder::unpack(Value pair, int half) {
  check(pair, "unpack");
  if (!pair.type().is_packed()) fail("unpack", "unpack takes an f16x2 or bf16x2 value, got " + pair.type().str());
  Scalar e = pair.type().elem == Scalar::F16x2 ? Scalar::F16 : Scalar::BF16;
  Attrs a;
  a.high = half != 0;
  return emit(Op::Unpack, Type::scalar(e), {pair}, a);
}

// ---------------- memory ----------------

Value KernelBuilder::index_operand(const AnyOperand& idx) {
  ensure_open("index");
  if (idx.is_value) {
    check(idx.value, "index");
    if (!idx.value.type().is_int()) fail("index", "an index must be an integer, got " + idx.value.type().str());
    return idx.value;
  }
  const Literal& l = idx.lit;
  if (l.kind == Literal::Float || l.kind == Literal::Bool) fail("index", "an index literal must be an integer");
  if (l.kind == Literal::Int && l.i < 0) fail("index", "negative index literal " + std::to_string(l.i));
  uint64_t u = l.kind == Literal::UInt ? l.u : static_cast<uint64_t>(l.i);
  if (u <= 0xffffffffu) return constant(Type::scalar(Scalar::U32), l, "index");
  return constant(Type::scalar(Scalar::U64), l, "index");
}

Value KernelBuilder::load(Value ptr, Value index, CacheHint hint) {
  check(ptr, "load");
  check(index, "load");
  if (!ptr.type().ptr) fail("load", "indexing needs a pointer, got " + ptr.type().str());
  if (hint != CacheHint::Default && ptr.type().is_shared_ptr()) fail("load", "cache hints apply to global memory only");
  if (hint == CacheHint::ReadOnly && !ptr.type().is_const)
    fail("load", "read-only (.nc) loads need a pointer to const: the kernel must not write that memory");
  Attrs a;
  a.hint = hint;
  return emit(Op::Load, Type::scalar(ptr.type().elem), {ptr, index}, a);
}

void KernelBuilder::store(Value ptr, Value index, const AnyOperand& v, CacheHint hint) {
  check(ptr, "store");
  check(index, "store");
  Type pt = ptr.type();
  if (!pt.ptr) fail("store", "indexing needs a pointer, got " + pt.str());
  if (pt.is_const)
    fail("store", "cannot store through " + vname(*s_->k, ptr.id()) + ", a pointer to const " +
                      std::string(scalar_name(pt.elem)));
  Type et = Type::scalar(pt.elem);
  if (v.is_value) {
    check(v.value, "store");
    if (!(v.value.type() == et))
      fail("store", "storing a " + v.value.type().str() + " value into " + pt.str() + " " +
                        vname(*s_->k, ptr.id()) + "; convert it with ir::cast<T>()");
  }
  if (hint == CacheHint::ReadOnly || hint == CacheHint::LastUse) fail("store", "this cache hint applies to loads only");
  if (hint != CacheHint::Default && pt.is_shared_ptr()) fail("store", "cache hints apply to global memory only");
  Value val = resolve_literal(v, et, "store");
  Attrs a;
  a.hint = hint;
  emit(Op::Store, et, {ptr, index, val}, a, false);
}

// ---------------- variables ----------------

Var KernelBuilder::var(Type t, Value init) {
  check(init, "var");
  if (t.ptr) fail("var", "variables hold scalars, not pointers");
  if (!(init.type() == t)) fail("var", "initial value of type " + init.type().str() + " for a variable of type " + t.str());
  Inst& inst = append(Op::VarDecl, t);
  inst.args.push_back(init.id());
  inst.result = new_value(t, true);
  return Var(this, inst.result, t);
}

Value KernelBuilder::var_read(const Var& v) {
  ensure_open("var_read");
  if (v.builder() != this) fail("var_read", "a variable of another kernel builder was used");
  const ValueInfo& info = s_->k->values[v.id()];
  if (!s_->scope_open[info.scope]) fail("var_read", "variable %" + std::to_string(v.id()) + " is used outside the scope that declares it");
  Inst& inst = append(Op::VarRead, v.type());
  inst.args.push_back(v.id());
  inst.result = new_value(v.type(), false);
  return Value(this, inst.result, v.type());
}

void KernelBuilder::var_write(const Var& v, const AnyOperand& val) {
  ensure_open("var_write");
  if (v.builder() != this) fail("var_write", "a variable of another kernel builder was used");
  const ValueInfo& info = s_->k->values[v.id()];
  if (!s_->scope_open[info.scope]) fail("var_write", "variable %" + std::to_string(v.id()) + " is used outside the scope that declares it");
  if (val.is_value) {
    check(val.value, "var_write");
    if (!(val.value.type() == v.type()))
      fail("var_write", "assigning a " + val.value.type().str() + " value to a variable of type " + v.type().str());
  }
  Value x = resolve_literal(val, v.type(), "var_write");
  Inst& inst = append(Op::VarWrite, v.type());
  inst.args.push_back(v.id());
  inst.args.push_back(x.id());
}

Value Var::get() const { return b_->var_read(*this); }
Var& Var::operator=(const Var& v) {
  b_->var_write(*this, KernelBuilder::make_operand(v.get()));
  return *this;
}

Ref::Ref(Value ptr, Value index) : ptr_(ptr), index_(index) {
  KernelBuilder* b = ptr.builder();
  b->check(ptr, "index");
  if (!ptr.type().ptr) b->fail("index", "only pointers can be indexed, got " + ptr.type().str());
  if (ptr.type().is_const) loaded_ = b->load(ptr, index);
}

Value Ref::load() const {
  if (!loaded_.valid()) loaded_ = ptr_.builder()->load(ptr_, index_);
  return loaded_;
}

const Ref& Ref::operator=(const Ref& v) const {
  Value x = v.load();
  ptr_.builder()->store(ptr_, index_, KernelBuilder::make_operand(x));
  loaded_ = Value();
  return *this;
}

// ---------------- control flow ----------------

IfChain KernelBuilder::if_(const Value& cond, const std::function<void()>& then) {
  check(cond, "if_");
  if (!cond.type().is_pred()) fail("if_", "the condition must be pred (a comparison), got " + cond.type().str());
  Block* parent = current();
  emit(Op::If, Type{}, {cond}, {}, false);
  size_t index = parent->insts.size() - 1;
  push_region(&parent->insts.back().regions[0]);
  {
    RegionGuard g{[this] { pop_region(); }};
    then();
  }
  return IfChain(this, parent, index);
}

void IfChain::else_(const std::function<void()>& body) {
  b_->ensure_open("else_");
  if (b_->current() != block_ || block_->insts.size() != index_ + 1)
    b_->fail("else_", "else_ must directly follow its if_");
  Inst& inst = block_->insts[index_];
  if (inst.attr.has_else) b_->fail("else_", "this if_ already has an else_");
  inst.attr.has_else = true;
  b_->push_region(&inst.regions[1]);
  RegionGuard g{[this] { b_->pop_region(); }};
  body();
}

void KernelBuilder::for_impl(AnyOperand lo, AnyOperand hi, AnyOperand step,
                             const std::function<void(Value)>& body) {
  ensure_open("for_");
  // All literals: unsigned literals (0u) give u32, any other s32.
  bool all_unsigned = true;
  for (const AnyOperand* x : {&lo, &hi, &step})
    if (!x->is_value && x->lit.kind != Literal::UInt) all_unsigned = false;
  Type t = Type::scalar(all_unsigned ? Scalar::U32 : Scalar::S32);
  bool have = false;
  for (const AnyOperand* x : {&lo, &hi, &step}) {
    if (!x->is_value) continue;
    check(x->value, "for_");
    if (have && !(x->value.type() == t))
      fail("for_", "bounds and step have different types: " + t.str() + " and " + x->value.type().str());
    t = x->value.type();
    have = true;
  }
  if (!t.is_int()) fail("for_", "loop bounds must be integers, got " + t.str());
  if (!step.is_value && ((step.lit.kind == Literal::Int && step.lit.i <= 0) ||
                         (step.lit.kind == Literal::UInt && step.lit.u == 0)))
    fail("for_", "the step must be positive");
  Value vlo = resolve_literal(lo, t, "for_"), vhi = resolve_literal(hi, t, "for_"),
        vstep = resolve_literal(step, t, "for_");
  Block* parent = current();
  emit(Op::For, t, {vlo, vhi, vstep}, {}, false);
  Inst& inst = parent->insts.back();
  push_region(&inst.regions[0]);
  RegionGuard g{[this] { pop_region(); }};
  inst.result = new_value(t, false);
  body(Value(this, inst.result, t));
}

void KernelBuilder::while_(const std::function<Value()>& cond, const std::function<void()>& body) {
  ensure_open("while_");
  Block* parent = current();
  emit(Op::While, Type{}, {}, {}, false);
  size_t index = parent->insts.size() - 1;
  {
    push_region(&parent->insts[index].regions[0]);
    RegionGuard g{[this] { pop_region(); }};
    Value c = cond();
    check(c, "while_");
    if (!c.type().is_pred()) fail("while_", "the condition must be pred, got " + c.type().str());
    parent->insts[index].attr.cond = c.id();
  }
  push_region(&parent->insts[index].regions[1]);
  RegionGuard g{[this] { pop_region(); }};
  body();
}

void KernelBuilder::return_() {
  ensure_open("return_");
  emit(Op::Return, Type{}, {}, {}, false);
}

Kernel KernelBuilder::build() {
  ensure_open("build");
  if (s_->blocks.size() != 1) fail("build", "build() called inside a body");
  const VerifyResult vr = verify(*s_->k);
  s_->k->arch_specific = vr.arch_specific;
  s_->k->reallocates_registers = vr.setmaxnreg;
  s_->k->canonical = encode(*s_->k);
  s_->k->hash = hash_bytes(s_->k->canonical.data(), s_->k->canonical.size());
  s_->k->body.insts = exact_copy(s_->k->body.insts, t_spare.insts, Spare::kMaxInsts);
  s_->k->values = exact_copy(s_->k->values, t_spare.values, Spare::kMaxValues);
  s_->built = true;
  std::shared_ptr<const Kernel::Data> d(std::move(s_->k));
  return Kernel(std::move(d));
}

}  // namespace kaio::ir
