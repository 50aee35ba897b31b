// Structural verifier. The builder already rejects misuse as it happens; this pass
// re-checks the whole tree (values defined before use and visible in scope, operand
// types, stores, control-flow shapes) so that no malformed kernel reaches codegen.
#include <string>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

struct Verifier {
  const Kernel::Data& k;
  std::vector<uint8_t> visible;

  [[noreturn]] void fail(const Inst& i, const std::string& msg) {
    throw UsageError(k.name, op_name(i.op), "verifier: " + msg);
  }

  Type use(const Inst& i, uint32_t id, bool want_var = false) {
    if (id >= k.values.size()) fail(i, "operand %" + std::to_string(id) + " does not exist");
    if (!visible[id]) fail(i, "operand %" + std::to_string(id) + " is not visible here (used outside its scope or before it is defined)");
    if (k.values[id].is_var != want_var)
      fail(i, "operand %" + std::to_string(id) + (want_var ? " is not a variable" : " is a variable; read it first"));
    return k.values[id].type;
  }

  void define(const Inst& i, uint32_t id, std::vector<uint32_t>& scope) {
    if (id >= k.values.size()) fail(i, "result %" + std::to_string(id) + " does not exist");
    if (visible[id]) fail(i, "value %" + std::to_string(id) + " is defined twice");
    if (!(k.values[id].type == i.type)) fail(i, "result type does not match the value table");
    visible[id] = 1;
    scope.push_back(id);
  }

  void block(const Block& b) {
    std::vector<uint32_t> scope;
    for (const Inst& i : b.insts) inst(i, scope);
    for (uint32_t id : scope) visible[id] = 0;
  }

  void same(const Inst& i, Type a, Type b) {
    if (!(a == b)) fail(i, "operand types differ: " + a.str() + " and " + b.str());
  }

  void inst(const Inst& i, std::vector<uint32_t>& scope) {
    switch (i.op) {
      case Op::Param:
        if (i.imm >= k.params.size() || !(k.params[i.imm].type == i.type)) fail(i, "parameter mismatch");
        break;
      case Op::Const: case Op::SReg: case Op::Return: case Op::SharedAlloc: case Op::DynamicShared:
      case Op::Barrier: case Op::Fence: case Op::Comment:
        break;
      case Op::Rcp: case Op::Exp2: case Op::Log2: case Op::Erf: case Op::Floor: case Op::Ceil: case Op::Round:
      case Op::Trunc: case Op::Rint:
        same(i, use(i, i.args[0]), i.type);
        break;
      case Op::IsNan: case Op::IsInf:
        if (!use(i, i.args[0]).is_float() || !i.type.is_pred()) fail(i, "isnan/isinf take a float and give a pred");
        break;
      case Op::LoadVec: {
        Type p = use(i, i.args[0]);
        if (!p.ptr || !use(i, i.args[1]).is_int()) fail(i, "load_vec needs a pointer and an integer index");
        same(i, Type::scalar(p.elem), i.type);
        if (i.nresults != 2 && i.nresults != 4) fail(i, "vector width must be 2 or 4");
        break;
      }
      case Op::StoreVec: {
        Type p = use(i, i.args[0]);
        if (!p.ptr || p.is_const || !use(i, i.args[1]).is_int()) fail(i, "store_vec needs a mutable pointer and an integer index");
        for (int a = 2; a < i.nargs; ++a) same(i, Type::scalar(p.elem), use(i, i.args[a]));
        break;
      }
      case Op::AtomicRmw: case Op::AtomicCas: {
        Type p = use(i, i.args[0]);
        if (!p.ptr || p.is_const || !use(i, i.args[1]).is_int()) fail(i, "atomics need a mutable pointer and an integer index");
        for (int a = 2; a < i.nargs; ++a) same(i, Type::scalar(p.elem), use(i, i.args[a]));
        same(i, Type::scalar(p.elem), i.type);
        break;
      }
      case Op::Shfl:
        same(i, use(i, i.args[0]), i.type);
        if (i.type.is_pred() || i.type.ptr) fail(i, "shfl on an unsupported type " + i.type.str());
        use(i, i.args[1]);
        break;
      case Op::Vote:
        if (!use(i, i.args[0]).is_pred()) fail(i, "vote needs a pred");
        break;
      case Op::Pack:
        same(i, use(i, i.args[0]), use(i, i.args[1]));
        if (!i.type.is_packed()) fail(i, "pack gives a packed pair");
        break;
      case Op::Unpack:
        if (!use(i, i.args[0]).is_packed()) fail(i, "unpack takes a packed pair");
        break;
      case Op::Neg: case Op::Not: case Op::Abs: case Op::Sqrt: case Op::Rsqrt: case Op::Exp:
      case Op::Log: case Op::Tanh: case Op::Sin: case Op::Cos:
        same(i, use(i, i.args[0]), i.type);
        break;
      case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
        same(i, use(i, i.args[0]), use(i, i.args[1]));
        if (!i.type.is_pred()) fail(i, "comparison result must be pred");
        break;
      case Op::Select:
        if (!use(i, i.args[0]).is_pred()) fail(i, "select condition must be pred");
        same(i, use(i, i.args[1]), i.type);
        same(i, use(i, i.args[2]), i.type);
        break;
      case Op::Fma:
        for (int a = 0; a < 3; ++a) same(i, use(i, i.args[a]), i.type);
        break;
      case Op::Cast:
        use(i, i.args[0]);
        break;
      case Op::Load: {
        Type p = use(i, i.args[0]);
        if (!p.ptr || !use(i, i.args[1]).is_int()) fail(i, "load needs a pointer and an integer index");
        same(i, Type::scalar(p.elem), i.type);
        break;
      }
      case Op::Store: {
        Type p = use(i, i.args[0]);
        if (!p.ptr || !use(i, i.args[1]).is_int()) fail(i, "store needs a pointer and an integer index");
        if (p.is_const) fail(i, "store through a pointer to const");
        same(i, Type::scalar(p.elem), use(i, i.args[2]));
        break;
      }
      case Op::VarDecl:
        same(i, use(i, i.args[0]), i.type);
        break;
      case Op::VarRead:
        same(i, use(i, i.args[0], true), i.type);
        break;
      case Op::VarWrite:
        same(i, use(i, i.args[0], true), use(i, i.args[1]));
        break;
      case Op::If:
        if (!use(i, i.args[0]).is_pred()) fail(i, "if condition must be pred");
        if (i.regions.size() != 2) fail(i, "if needs two regions");
        block(i.regions[0]);
        block(i.regions[1]);
        return;
      case Op::For: {
        for (int a = 0; a < 3; ++a) same(i, use(i, i.args[a]), i.type);
        if (!i.type.is_int()) fail(i, "for bounds must be integers");
        if (i.regions.size() != 1) fail(i, "for needs one region");
        // The induction value belongs to the body.
        std::vector<uint32_t> inner;
        define(i, i.result, inner);
        block(i.regions[0]);
        for (uint32_t id : inner) visible[id] = 0;
        return;
      }
      case Op::While: {
        if (i.regions.size() != 2) fail(i, "while needs two regions");
        std::vector<uint32_t> cond_scope;
        for (const Inst& c : i.regions[0].insts) inst(c, cond_scope);
        uint32_t c = static_cast<uint32_t>(i.imm);
        if (c >= k.values.size() || !visible[c] || !k.values[c].type.is_pred())
          fail(i, "while condition must be a pred visible at the end of the condition block");
        for (uint32_t id : cond_scope) visible[id] = 0;
        block(i.regions[1]);
        return;
      }
      default:  // binary arithmetic
        same(i, use(i, i.args[0]), use(i, i.args[1]));
        same(i, use(i, i.args[0]), i.type);
        break;
    }
    if (i.result != kNoValue)
      for (uint32_t r = 0; r < i.nresults; ++r) define(i, i.result + r, scope);
  }
};

}  // namespace

void check_barriers(const Kernel::Data& k);  // divergence.cpp

void verify(const Kernel::Data& k) {
  Verifier v{k, std::vector<uint8_t>(k.values.size(), 0)};
  v.block(k.body);
  check_barriers(k);
}

}  // namespace kaio::ir
