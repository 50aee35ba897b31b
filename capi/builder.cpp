// The C ABI over ir::KernelBuilder: values and variables are numbered per builder; ops are
// named as in the op table; control flow bodies are the caller's callbacks.
#include <cstring>
#include <map>
#include <string>

#include "kaio/capi/internal.h"
#include "kaio/capi/map_handle.h"
#include "kaio/ir/op_table.h"

namespace kaio::capi {

namespace {

using ir::KernelBuilder;
using ir::Value;

const char* kOp = "KernelBuilder";

Value value(kaio_builder* h, uint32_t id) {
  if (id >= h->values.size())
    throw UsageError(h->b->name(), kOp, "value id " + std::to_string(id) + " does not belong to this builder");
  return h->values[id];
}

KernelBuilder::AnyOperand operand(kaio_builder* h, const kaio_operand& o) {
  KernelBuilder::AnyOperand a{false, {}, {}};
  switch (o.kind) {
    case KAIO_OPERAND_VALUE: a.is_value = true; a.value = value(h, o.value); break;
    case KAIO_OPERAND_BOOL: a.lit = ir::Literal{ir::Literal::Bool, o.i ? 1 : 0, o.i ? 1u : 0u, o.i ? 1.0 : 0.0}; break;
    case KAIO_OPERAND_INT: a.lit = ir::Literal{ir::Literal::Int, o.i, 0, 0}; break;
    case KAIO_OPERAND_UINT: a.lit = ir::Literal{ir::Literal::UInt, 0, o.u, 0}; break;
    case KAIO_OPERAND_FLOAT: a.lit = ir::Literal{ir::Literal::Float, 0, 0, o.f}; break;
    default: throw UsageError(h->b->name(), kOp, "operand kind " + std::to_string(o.kind) + " is unknown");
  }
  return a;
}

ir::Literal literal(kaio_builder* h, const kaio_operand& o) {
  KernelBuilder::AnyOperand a = operand(h, o);
  if (a.is_value) throw UsageError(h->b->name(), kOp, "expected a host literal, got a kernel value");
  return a.lit;
}

ir::Op op_named(kaio_builder* h, const char* name, ir::OpRule r1, ir::OpRule r2) {
  static const std::map<std::string, ir::Op> ops = [] {
    std::map<std::string, ir::Op> m;
    for (int i = 0; i < ir::kOpCount; ++i) {
      const ir::OpDef& d = ir::op_def(static_cast<ir::Op>(i));
      m[d.name] = d.op;
    }
    return m;
  }();
  auto it = ops.find(name ? name : "");
  if (it == ops.end() || (ir::op_def(it->second).rule != r1 && ir::op_def(it->second).rule != r2))
    throw UsageError(h->b->name(), kOp, std::string("no ") + (r1 == ir::OpRule::Unary ? "unary" : "binary") +
                                            " op named '" + (name ? name : "") + "'");
  return it->second;
}

template <class F>
int with(kaio_builder* h, uint32_t* out, F&& f) {
  return guard([&] {
    if (!h) throw UsageError("", kOp, "null builder");
    Value v = f();
    if (out) *out = h->add(v);
  });
}

template <class F>
int run(kaio_builder* h, F&& f) {
  return guard([&] {
    if (!h) throw UsageError("", kOp, "null builder");
    f();
  });
}

ir::CacheHint hint_of(kaio_builder* h, const char* s) {
  std::string v = s ? s : "";
  if (v.empty() || v == "default") return ir::CacheHint::Default;
  if (v == "readonly") return ir::CacheHint::ReadOnly;
  if (v == "streaming") return ir::CacheHint::Streaming;
  if (v == "global") return ir::CacheHint::Global;
  if (v == "lastuse") return ir::CacheHint::LastUse;
  throw UsageError(h->b->name(), "load", "unknown cache hint '" + v + "'");
}

}  // namespace

}  // namespace kaio::capi

struct kaio_kernel {
  kaio::ir::Kernel k;
  std::string name, text;
};

using namespace kaio;
using capi::operand;
using capi::value;

extern "C" {

int kaio_builder_new(const char* name, kaio_builder** out) {
  return capi::guard([&] {
    auto h = std::make_unique<kaio_builder>();
    h->owned = std::make_unique<ir::KernelBuilder>(name ? name : "");
    h->b = h->owned.get();
    *out = h.release();
  });
}

void kaio_builder_free(kaio_builder* b) { delete b; }

int kaio_builder_value_type(kaio_builder* h, uint32_t v, char* buf, size_t cap) {
  return capi::run(h, [&] {
    std::string s = value(h, v).type().str();
    if (cap) {
      size_t n = std::min(cap - 1, s.size());
      std::memcpy(buf, s.data(), n);
      buf[n] = 0;
    }
  });
}

int kaio_builder_param(kaio_builder* h, const char* name, const char* type, uint32_t* out) {
  return capi::with(h, out, [&] { return h->b->param(name ? name : "", capi::parse_type("param", type)); });
}

int kaio_builder_spec(kaio_builder* h, const char* name, const char* type, kaio_operand v, uint32_t* out) {
  return capi::with(h, out,
                    [&] { return h->b->spec(name ? name : "", capi::parse_type("spec", type), capi::literal(h, v)); });
}

int kaio_builder_constant(kaio_builder* h, const char* type, kaio_operand v, uint32_t* out) {
  return capi::with(h, out, [&] { return h->b->constant(capi::parse_type("constant", type), capi::literal(h, v), "const"); });
}

int kaio_builder_special(kaio_builder* h, const char* which, uint32_t* out) {
  return capi::with(h, out, [&]() -> ir::Value {
    std::string w = which ? which : "";
    ir::KernelBuilder& b = *h->b;
    using Fn = ir::Value (ir::KernelBuilder::*)();
    static const std::map<std::string, Fn> fns = {
        {"thread_idx_x", &ir::KernelBuilder::thread_idx_x}, {"thread_idx_y", &ir::KernelBuilder::thread_idx_y},
        {"thread_idx_z", &ir::KernelBuilder::thread_idx_z}, {"block_idx_x", &ir::KernelBuilder::block_idx_x},
        {"block_idx_y", &ir::KernelBuilder::block_idx_y},   {"block_idx_z", &ir::KernelBuilder::block_idx_z},
        {"block_dim_x", &ir::KernelBuilder::block_dim_x},   {"block_dim_y", &ir::KernelBuilder::block_dim_y},
        {"block_dim_z", &ir::KernelBuilder::block_dim_z},   {"grid_dim_x", &ir::KernelBuilder::grid_dim_x},
        {"grid_dim_y", &ir::KernelBuilder::grid_dim_y},     {"grid_dim_z", &ir::KernelBuilder::grid_dim_z},
        {"global_id_x", &ir::KernelBuilder::global_id_x},   {"global_id_y", &ir::KernelBuilder::global_id_y},
        {"global_id_z", &ir::KernelBuilder::global_id_z},   {"lane_id", &ir::KernelBuilder::lane_id},
        {"warp_id", &ir::KernelBuilder::warp_id}};
    auto it = fns.find(w);
    if (it == fns.end()) throw UsageError(b.name(), "special", "no special register named '" + w + "'");
    return (b.*(it->second))();
  });
}

int kaio_builder_unary(kaio_builder* h, const char* op, uint32_t a, uint32_t* out) {
  return capi::with(h, out, [&] {
    return h->b->unary(capi::op_named(h, op, ir::OpRule::Unary, ir::OpRule::Classify), value(h, a));
  });
}

int kaio_builder_binary(kaio_builder* h, const char* op, kaio_operand x, kaio_operand y, uint32_t* out) {
  return capi::with(h, out, [&] {
    return h->b->binary(capi::op_named(h, op, ir::OpRule::Binary, ir::OpRule::Compare), operand(h, x), operand(h, y));
  });
}

int kaio_builder_select(kaio_builder* h, uint32_t cond, kaio_operand x, kaio_operand y, uint32_t* out) {
  return capi::with(h, out, [&] { return h->b->select(value(h, cond), operand(h, x), operand(h, y)); });
}

int kaio_builder_fma(kaio_builder* h, kaio_operand x, kaio_operand y, kaio_operand z, uint32_t* out) {
  return capi::with(h, out, [&] { return h->b->fma(operand(h, x), operand(h, y), operand(h, z)); });
}

int kaio_builder_cast(kaio_builder* h, uint32_t v, const char* type, const char* rounding, int saturate, uint32_t* out) {
  return capi::with(h, out, [&] {
    std::string r = rounding ? rounding : "";
    ir::Rounding rd = r == "rn"   ? ir::Rounding::Rn
                      : r == "rz" ? ir::Rounding::Rz
                      : r == "rm" ? ir::Rounding::Rm
                      : r == "rp" ? ir::Rounding::Rp
                                  : ir::Rounding::Default;
    if (!r.empty() && r != "default" && rd == ir::Rounding::Default)
      throw UsageError(h->b->name(), "cast", "unknown rounding '" + r + "' (rn, rz, rm, rp)");
    ir::Type t = capi::parse_type("cast", type);
    return saturate ? h->b->cast_sat(value(h, v), t, rd) : h->b->cast(value(h, v), t, rd);
  });
}

int kaio_builder_load(kaio_builder* h, uint32_t ptr, kaio_operand index, const char* hint, uint32_t* out) {
  return capi::with(h, out, [&] {
    ir::Value i = h->b->index_operand(operand(h, index));
    return h->b->load(value(h, ptr), i, capi::hint_of(h, hint));
  });
}

int kaio_builder_store(kaio_builder* h, uint32_t ptr, kaio_operand index, kaio_operand v, const char* hint) {
  return capi::run(h, [&] {
    ir::Value i = h->b->index_operand(operand(h, index));
    h->b->store(value(h, ptr), i, operand(h, v), capi::hint_of(h, hint));
  });
}

int kaio_builder_atomic(kaio_builder* h, const char* op, uint32_t ptr, kaio_operand index, kaio_operand cmp,
                        kaio_operand v, uint32_t* out) {
  return capi::with(h, out, [&] {
    std::string o = op ? op : "";
    ir::Value i = h->b->index_operand(operand(h, index));
    if (o == "cas") return h->b->atomic_cas(value(h, ptr), i, operand(h, cmp), operand(h, v));
    ir::AtomicOp a = o == "add"   ? ir::AtomicOp::Add
                     : o == "min" ? ir::AtomicOp::Min
                     : o == "max" ? ir::AtomicOp::Max
                     : o == "exch" ? ir::AtomicOp::Exch
                                   : throw UsageError(h->b->name(), "atomic", "unknown atomic op '" + o + "'");
    return h->b->atomic(a, value(h, ptr), i, operand(h, v));
  });
}

int kaio_builder_shfl(kaio_builder* h, const char* mode, uint32_t v, kaio_operand lane, uint32_t width, uint32_t mask,
                      uint32_t* out) {
  return capi::with(h, out, [&] {
    std::string m = mode ? mode : "";
    ir::ShflMode s = m == "up"     ? ir::ShflMode::Up
                     : m == "down" ? ir::ShflMode::Down
                     : m == "xor"  ? ir::ShflMode::Xor
                     : m == "idx"  ? ir::ShflMode::Idx
                                   : throw UsageError(h->b->name(), "shfl", "unknown shuffle mode '" + m + "'");
    return h->b->shfl(s, value(h, v), operand(h, lane), width, mask);
  });
}

int kaio_builder_vote(kaio_builder* h, const char* mode, uint32_t p, uint32_t mask, uint32_t* out) {
  return capi::with(h, out, [&] {
    std::string m = mode ? mode : "";
    ir::VoteMode s = m == "all"      ? ir::VoteMode::All
                     : m == "any"    ? ir::VoteMode::Any
                     : m == "ballot" ? ir::VoteMode::Ballot
                                     : throw UsageError(h->b->name(), "vote", "unknown vote mode '" + m + "'");
    return h->b->vote(s, value(h, p), mask);
  });
}

int kaio_builder_reduce(kaio_builder* h, const char* which, uint32_t v, uint32_t* out) {
  return capi::with(h, out, [&] {
    std::string w = which ? which : "";
    ir::KernelBuilder& b = *h->b;
    ir::Value x = value(h, v);
    if (w == "warp_sum") return b.warp_reduce_sum(x);
    if (w == "warp_max") return b.warp_reduce_max(x);
    if (w == "warp_min") return b.warp_reduce_min(x);
    if (w == "block_sum") return b.block_reduce_sum(x);
    if (w == "block_max") return b.block_reduce_max(x);
    if (w == "block_min") return b.block_reduce_min(x);
    if (w == "block_scan_inclusive") return b.block_scan_inclusive(x);
    if (w == "block_scan_exclusive") return b.block_scan_exclusive(x);
    throw UsageError(b.name(), "reduce", "unknown reduction '" + w + "'");
  });
}

int kaio_builder_shared(kaio_builder* h, const char* elem, uint32_t count, uint32_t align, uint32_t* out) {
  return capi::with(h, out, [&] {
    ir::Type t = capi::parse_type("shared", elem);
    if (t.ptr) throw UsageError(h->b->name(), "shared", "the element type must be a scalar");
    return count ? h->b->shared(t.elem, count, align ? align : 16) : h->b->dynamic_shared(t.elem, align ? align : 16);
  });
}

int kaio_builder_barrier(kaio_builder* h) {
  return capi::run(h, [&] { h->b->barrier(); });
}

int kaio_builder_var(kaio_builder* h, const char* type, kaio_operand init, uint32_t* var_out) {
  return capi::run(h, [&] {
    ir::Type t = capi::parse_type("var", type);
    ir::KernelBuilder::AnyOperand o = operand(h, init);
    ir::Value v = o.is_value ? o.value : h->b->constant(t, o.lit, "var");
    h->vars.push_back(h->b->var(t, v));
    *var_out = static_cast<uint32_t>(h->vars.size() - 1);
  });
}

static ir::Var& var_of(kaio_builder* h, uint32_t id) {
  if (id >= h->vars.size()) throw UsageError(h->b->name(), "var", "variable id " + std::to_string(id) + " does not belong to this builder");
  return h->vars[id];
}

int kaio_builder_var_get(kaio_builder* h, uint32_t var, uint32_t* out) {
  return capi::with(h, out, [&] { return var_of(h, var).get(); });
}

int kaio_builder_var_set(kaio_builder* h, uint32_t var, kaio_operand v) {
  return capi::run(h, [&] { h->b->var_write(var_of(h, var), operand(h, v)); });
}

int kaio_builder_if(kaio_builder* h, uint32_t cond, kaio_block_fn then_fn, void* then_user, uint32_t* chain) {
  return capi::run(h, [&] {
    if (!then_fn) throw UsageError(h->b->name(), "if_", "no body");
    ir::IfChain c = h->b->if_(value(h, cond), [&] {
      if (then_fn(then_user)) throw capi::CallbackFailed{};
    });
    h->chains.push_back(c);
    if (chain) *chain = static_cast<uint32_t>(h->chains.size() - 1);
  });
}

int kaio_builder_else(kaio_builder* h, uint32_t chain, kaio_block_fn else_fn, void* else_user) {
  return capi::run(h, [&] {
    if (!else_fn) throw UsageError(h->b->name(), "else_", "no body");
    if (chain >= h->chains.size()) throw UsageError(h->b->name(), "else_", "unknown if chain");
    h->chains[chain].else_([&] {
      if (else_fn(else_user)) throw capi::CallbackFailed{};
    });
  });
}

int kaio_builder_for(kaio_builder* h, kaio_operand lo, kaio_operand hi, kaio_operand step, kaio_loop_fn body, void* user) {
  return capi::run(h, [&] {
    if (!body) throw UsageError(h->b->name(), "for_", "no body");
    auto fn = [&](ir::Value i) {
      if (body(user, h->add(i))) throw capi::CallbackFailed{};
    };
    // for_ takes typed operands; route each through a value or literal.
    auto v = [&](const kaio_operand& o) { return operand(h, o); };
    ir::KernelBuilder::AnyOperand a = v(lo), b = v(hi), s = v(step);
    auto lit_or_value = [&](const ir::KernelBuilder::AnyOperand& x, auto&& k) {
      if (x.is_value) return k(x.value);
      switch (x.lit.kind) {
        case ir::Literal::Int: return k(x.lit.i);
        case ir::Literal::UInt: return k(x.lit.u);
        default: throw UsageError(h->b->name(), "for_", "loop bounds must be integers");
      }
    };
    lit_or_value(a, [&](auto l) {
      lit_or_value(b, [&](auto u) {
        lit_or_value(s, [&](auto st) { h->b->for_(l, u, st, fn); });
      });
    });
  });
}

int kaio_builder_while(kaio_builder* h, kaio_cond_fn cond, void* cond_user, kaio_block_fn body, void* body_user) {
  return capi::run(h, [&] {
    if (!cond || !body) throw UsageError(h->b->name(), "while_", "no condition or body");
    h->b->while_(
        [&] {
          uint32_t c = 0;
          if (cond(cond_user, &c)) throw capi::CallbackFailed{};
          return value(h, c);
        },
        [&] {
          if (body(body_user)) throw capi::CallbackFailed{};
        });
  });
}

int kaio_builder_return(kaio_builder* h) {
  return capi::run(h, [&] { h->b->return_(); });
}

int kaio_builder_launch_bounds(kaio_builder* h, uint32_t max_threads, uint32_t min_blocks) {
  return capi::run(h, [&] { h->b->launch_bounds(max_threads, min_blocks); });
}

int kaio_builder_fast_math(kaio_builder* h, int on) {
  return capi::run(h, [&] { h->b->fast_math(on != 0); });
}

int kaio_builder_max_registers(kaio_builder* h, uint32_t regs) {
  return capi::run(h, [&] { h->b->max_registers(regs); });
}

int kaio_builder_comment(kaio_builder* h, const char* text) {
  return capi::run(h, [&] { h->b->comment(text ? text : ""); });
}

int kaio_builder_build(kaio_builder* h, kaio_kernel** out) {
  return capi::run(h, [&] {
    if (!h->owned) throw UsageError(h->b->name(), "build", "a map's body builder is built by the map");
    auto k = std::make_unique<kaio_kernel>();
    k->k = h->b->build();
    k->name = k->k.name();
    *out = k.release();
  });
}

void kaio_kernel_free(kaio_kernel* k) { delete k; }

const char* kaio_kernel_str(const kaio_kernel* k, const char* what) {
  if (!k) return "";
  std::string w = what ? what : "";
  if (w == "ir") {
    auto* m = const_cast<kaio_kernel*>(k);
    if (m->text.empty()) m->text = k->k.print();
    return m->text.c_str();
  }
  return k->name.c_str();
}

}  // extern "C"

// Shared with compile.cpp.
namespace kaio::capi {
const ir::Kernel& kernel_of(const kaio_kernel* k) {
  if (!k) throw UsageError("", "compile", "null kernel");
  return k->k;
}
}  // namespace kaio::capi
