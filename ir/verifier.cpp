// Structural verifier. The builder already rejects misuse as it happens; this pass
// re-checks the whole tree (values defined before use and visible in scope, operand
// counts and types by each op's rule from the op table, control-flow shapes) so that no
// malformed kernel reaches codegen. Then: the barrier divergence check (divergence.cpp)
// and the asynchronous-register rule (async_regs.cpp).
#include <string>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::ir {

namespace {

struct Verifier {
  const Kernel::Data& k;
  std::vector<uint8_t> visible;
  bool any_sync = false;   // a barrier or warpgroup instruction: the divergence check applies
  bool any_async = false;  // an asynchronous op: the async-register rule applies
  bool arch_specific = false;  // an sm_90a-only instruction (wgmma, setmaxnreg)
  bool setmaxnreg = false;     // moves registers between warpgroups

  // The failure paths are out of line and cold, so that the checks on the hot path (every
  // operand of every instruction) inline to a few compares.
  [[noreturn, gnu::cold, gnu::noinline]] void fail(const Inst& i, const std::string& msg) {
    throw UsageError(k.name, op_name(i.op), "verifier: " + msg);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_use(const Inst& i, uint32_t id, bool want_var) {
    if (id >= k.values.size()) fail(i, "operand %" + std::to_string(id) + " does not exist");
    if (!visible[id]) fail(i, "operand %" + std::to_string(id) + " is not visible here (used outside its scope or before it is defined)");
    fail(i, "operand %" + std::to_string(id) + (want_var ? " is not a variable" : " is a variable; read it first"));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_define(const Inst& i, uint32_t id) {
    if (id >= k.values.size()) fail(i, "result %" + std::to_string(id) + " does not exist");
    if (visible[id]) fail(i, "value %" + std::to_string(id) + " is defined twice");
    fail(i, "result type does not match the value table");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_types(const Inst& i, Type a, Type b) {
    fail(i, "operand types differ: " + a.str() + " and " + b.str());
  }
  [[noreturn, gnu::cold, gnu::noinline]] void bad_arity(const Inst& i, size_t lo, size_t hi) {
    fail(i, "takes " + std::to_string(lo) + (hi != lo ? ".." + std::to_string(hi) : "") + " operands, has " +
                std::to_string(i.args.size()));
  }

  Type use(const Inst& i, uint32_t id, bool want_var = false) {
    if (id >= k.values.size() || !visible[id] || k.values[id].is_var != want_var) bad_use(i, id, want_var);
    return k.values[id].type;
  }
  Type arg(const Inst& i, size_t n) { return use(i, i.args[n]); }

  void define(const Inst& i, uint32_t id, std::vector<uint32_t>& scope) {
    if (id >= k.values.size() || visible[id] || !(k.values[id].type == i.type)) bad_define(i, id);
    visible[id] = 1;
    scope.push_back(id);
  }

  void block(const Block& b) {
    std::vector<uint32_t> scope;
    for (const Inst& i : b.insts) inst(i, scope);
    for (uint32_t id : scope) visible[id] = 0;
  }

  void same(const Inst& i, Type a, Type b) {
    if (!(a == b)) bad_types(i, a, b);
  }
  void arity(const Inst& i, size_t lo, size_t hi) {
    if (i.args.size() < lo || i.args.size() > hi) bad_arity(i, lo, hi);
  }
  void results(const Inst& i, bool want) {
    if ((i.result != kNoValue) != want) fail(i, want ? "must define a result" : "defines no result");
  }
  void classes(const Inst& i, const OpDef& d, Type t) {
    if (d.types && !(type_class(t) & d.types))
      fail(i, "not defined on " + t.str() + (t.is_fp8() ? " (a storage type: convert it first)" : ""));
  }
  Type pointer(const Inst& i, bool mutable_) {
    Type p = arg(i, 0);
    if (!p.ptr || !arg(i, 1).is_int()) fail(i, "needs a pointer and an integer index");
    if (mutable_ && p.is_const) fail(i, "writes through a pointer to const");
    return p;
  }

  void inst(const Inst& i, std::vector<uint32_t>& scope) {
    const OpDef& d = i.def();
    const bool has_result = i.result != kNoValue;
    any_sync |= d.has(Effect::Collective) || d.has(Effect::WarpCollective);
    any_async |= d.has(Effect::AsyncIssue);
    arch_specific |= is_arch_specific(i.op);
    setmaxnreg |= i.op == Op::SetMaxNReg;
    if (has_result && i.nresults == 0) fail(i, "a result with no values");
    switch (d.rule) {
      case OpRule::Leaf:
        arity(i, 0, 0);
        results(i, true);
        if (i.op == Op::Param && (i.attr.index >= k.params.size() || !(k.params[i.attr.index].type == i.type)))
          fail(i, "parameter mismatch");
        break;
      case OpRule::NoOperands:
        arity(i, 0, 0);
        results(i, false);
        break;
      case OpRule::Unary:
        arity(i, 1, 1);
        same(i, arg(i, 0), i.type);
        classes(i, d, i.type);
        break;
      case OpRule::Binary:
        arity(i, 2, 2);
        same(i, arg(i, 0), arg(i, 1));
        same(i, arg(i, 0), i.type);
        classes(i, d, i.type);
        break;
      case OpRule::Ternary:
        arity(i, 3, 3);
        for (size_t a = 0; a < 3; ++a) same(i, arg(i, a), i.type);
        classes(i, d, i.type);
        break;
      case OpRule::Compare:
        arity(i, 2, 2);
        same(i, arg(i, 0), arg(i, 1));
        classes(i, d, arg(i, 0));
        if (!i.type.is_pred()) fail(i, "a comparison gives a pred");
        break;
      case OpRule::Classify:
        arity(i, 1, 1);
        classes(i, d, arg(i, 0));
        if (!i.type.is_pred()) fail(i, "a classification gives a pred");
        break;
      case OpRule::Select:
        arity(i, 3, 3);
        if (!arg(i, 0).is_pred()) fail(i, "the condition must be pred");
        same(i, arg(i, 1), i.type);
        same(i, arg(i, 2), i.type);
        break;
      case OpRule::Convert: {
        arity(i, 1, 1);
        const Type from = arg(i, 0);
        if (from.ptr || i.type.ptr) fail(i, "converts scalars only");
        if (i.op == Op::Bitcast) {
          if (!from.is_bitcast_word() || !i.type.is_bitcast_word())
            fail(i, "bitcast reinterprets u32, f32, f16x2 and bf16x2 only");
          break;
        }
        if ((from.is_fp8() || i.type.is_fp8()) &&
            (!(from.is_float() || from.is_fp8()) || !(i.type.is_float() || i.type.is_fp8()) || i.attr.saturate))
          fail(i, "e4m3 and e5m2 convert to and from the float types only, without saturation");
        break;
      }
      case OpRule::Pack:
        arity(i, 2, 2);
        same(i, arg(i, 0), arg(i, 1));
        if (!i.type.is_packed()) fail(i, "pack gives a packed pair");
        break;
      case OpRule::Unpack:
        arity(i, 1, 1);
        if (!arg(i, 0).is_packed()) fail(i, "unpack takes a packed pair");
        break;
      case OpRule::Load: {
        arity(i, 2, 2);
        Type p = pointer(i, false);
        same(i, Type::scalar(p.elem), i.type);
        if (i.op == Op::LoadVec ? (i.nresults != 2 && i.nresults != 4) : i.nresults != 1)
          fail(i, "vector width must be 2 or 4");
        break;
      }
      case OpRule::Store: {
        arity(i, 3, i.op == Op::StoreVec ? 6 : 3);
        Type p = pointer(i, true);
        for (size_t a = 2; a < i.args.size(); ++a) same(i, Type::scalar(p.elem), arg(i, a));
        if (i.op == Op::StoreVec && i.args.size() != 4 && i.args.size() != 6) fail(i, "vector width must be 2 or 4");
        break;
      }
      case OpRule::Atomic: {
        arity(i, 3, i.op == Op::AtomicCas ? 4 : 3);
        Type p = pointer(i, true);
        for (size_t a = 2; a < i.args.size(); ++a) same(i, Type::scalar(p.elem), arg(i, a));
        same(i, Type::scalar(p.elem), i.type);
        break;
      }
      case OpRule::Address: {
        arity(i, 2, 2);
        Type p = pointer(i, false);
        if (!p.is_shared_ptr()) fail(i, "takes a shared-memory pointer");
        if (!(i.type == Type::scalar(Scalar::U32))) fail(i, "a shared address is u32");
        break;
      }
      case OpRule::Mbarrier: {
        arity(i, 2, 3);
        Type p = pointer(i, i.op != Op::MbarTryWait);
        if (!p.is_shared_ptr() || p.elem != Scalar::U64) fail(i, "an mbarrier is a u64 in shared memory");
        if (i.op == Op::MbarTryWait) {
          if (i.args.size() != 3 || !arg(i, 2).is_int() || !i.type.is_pred())
            fail(i, "mbarrier_try_wait takes a phase parity and gives a pred");
        } else if (i.op == Op::MbarInit || i.op == Op::MbarExpectTx || i.op == Op::MbarArriveCluster) {
          if (i.args.size() != 3 || !(arg(i, 2) == Type::scalar(Scalar::U32))) fail(i, "needs a u32 count (or CTA rank)");
        } else if (i.args.size() != 2) {
          fail(i, "takes the mbarrier only");
        }
        results(i, i.op == Op::MbarTryWait);
        break;
      }
      case OpRule::Mma: {
        // m64nNkK: N/2 accumulator registers per thread, f32 (s32 for s8 / u8 operands)
        size_t nacc = i.attr.shape / 2;
        const bool a_regs = (i.attr.trans & kWgmmaARegs) != 0;  // A: 4 f16x2 / bf16x2 registers, then B's descriptor
        const size_t nops = a_regs ? 5 : 2;
        arity(i, nacc + nops, nacc + nops);
        const Scalar ea = i.attr.elem, eb = i.attr.elem_b;
        const bool fp8 = (ea == Scalar::E4M3 || ea == Scalar::E5M2) && (eb == Scalar::E4M3 || eb == Scalar::E5M2);
        const bool int8 = (ea == Scalar::S8 || ea == Scalar::U8) && (eb == Scalar::S8 || eb == Scalar::U8);
        const Scalar acc = int8 ? Scalar::S32 : Scalar::F32;
        for (size_t a = 0; a < nacc; ++a)
          if (!(use(i, i.args[a], true) == Type::scalar(acc)))
            fail(i, int8 ? "the accumulator is s32 variables" : "the accumulator is f32 variables");
        for (size_t a = nacc; a < nacc + nops; ++a) {
          const bool frag = a_regs && a < nacc + 4;
          const Scalar want = !frag ? Scalar::U64 : ea == Scalar::BF16 ? Scalar::BF16x2 : Scalar::F16x2;
          if (!(arg(i, a) == Type::scalar(want)))
            fail(i, frag ? "A fragment registers are f16x2 / bf16x2 of the input type" : "the A and B descriptors are u64");
        }
        if (a_regs && ((ea != Scalar::F16 && ea != Scalar::BF16) || (i.attr.trans & 1)))
          fail(i, "A from registers is f16 or bf16, with no A major");
        if (ea != Scalar::F16 && ea != Scalar::BF16 && ea != Scalar::F32 && !fp8 && !int8)
          fail(i, "A and B are f16, bf16, f32 (tf32), e4m3, e5m2, s8 or u8");
        if (ea != eb && !fp8 && !int8) fail(i, "A and B have one type, except e4m3 with e5m2 and s8 with u8");
        if (i.attr.trans > (kWgmmaARegs | 3) || (ea == Scalar::F32 && i.attr.trans)) fail(i, "tf32 operands are K-major only");
        if ((fp8 || int8) && i.attr.trans) fail(i, "8-bit (e4m3, e5m2, s8, u8) operands are K-major only");
        if (int8 && (i.attr.shape > 24 ? i.attr.shape % 16 : i.attr.shape % 8))
          fail(i, "s8 / u8 forms take N 8, 16, 24 or a multiple of 16");
        results(i, false);
        break;
      }
      case OpRule::MmaSync: {
        // accumulators (variables, in and out), then the A and B fragment registers
        if (static_cast<size_t>(i.attr.mma) >= std::size(kMmaShapes)) fail(i, "unknown mma kind");
        const MmaShape& s = mma_shape(i.attr.mma);
        const size_t nc = s.c.regs, na = s.a.regs, nb = s.b.regs;
        arity(i, nc + na + nb, nc + na + nb);
        for (size_t a = 0; a < nc; ++a)
          if (!(use(i, i.args[a], true) == Type::scalar(s.acc)))
            fail(i, std::string(s.name) + " accumulates into " + scalar_name(s.acc) + " variables");
        for (size_t a = nc; a < nc + na + nb; ++a) {
          Type t = arg(i, a);
          if (t.ptr || !(t.elem == s.frag || (s.kind == MmaKind::TF32 && t.elem == Scalar::F32)))
            fail(i, std::string(s.name) + " fragment registers are " + scalar_name(s.frag) + ", got " + t.str());
        }
        results(i, false);
        break;
      }
      case OpRule::Ldmatrix: {
        arity(i, 2, 2);
        Type p = pointer(i, false);
        if (!p.is_shared_ptr()) fail(i, "ldmatrix reads shared memory");
        if (i.nresults != 1 && i.nresults != 2 && i.nresults != 4) fail(i, "loads 1, 2 or 4 matrices");
        if (scalar_bytes(p.elem) > 4 || p.elem == Scalar::Pred || (i.attr.trans && scalar_bytes(p.elem) != 2))
          fail(i, "unsupported element type " + p.str());
        Scalar want = p.elem == Scalar::F16 ? Scalar::F16x2 : p.elem == Scalar::BF16 ? Scalar::BF16x2 : Scalar::U32;
        if (!(i.type == Type::scalar(want))) fail(i, "the fragment registers are " + std::string(scalar_name(want)));
        break;
      }
      case OpRule::CpAsync: {
        arity(i, 4, 5);
        Type d = pointer(i, true);
        Type s = arg(i, 2);
        if (!d.is_shared_ptr()) fail(i, "copies into shared memory");
        if (!s.ptr || s.space != Space::Global || s.elem != d.elem || !arg(i, 3).is_int())
          fail(i, "copies from a global pointer of the same element type, with an integer index");
        if (i.args.size() == 5 && !(arg(i, 4) == Type::scalar(Scalar::U32))) fail(i, "the source byte count is u32");
        const uint32_t n = i.attr.count;
        if ((n != 4 && n != 8 && n != 16) || n % scalar_bytes(d.elem) || (i.attr.hint == CacheHint::Global && n != 16) ||
            (i.attr.hint != CacheHint::Default && i.attr.hint != CacheHint::Global))
          fail(i, "copies 4, 8 or 16 bytes (.cg: 16)");
        results(i, false);
        break;
      }
      case OpRule::TmaLoad: {
        const size_t rank = i.attr.count;
        if (rank < 1 || rank > 5) fail(i, "a tensor has 1 to 5 dimensions");
        arity(i, 5 + rank, 6 + rank);
        if (i.args.size() == 6 + rank && !(arg(i, 5 + rank) == Type::scalar(Scalar::U16)))
          fail(i, "the multicast CTA mask is u16");
        Type d = pointer(i, true);
        if (!d.is_shared_ptr()) fail(i, "copies into shared memory");
        if (!arg(i, 1).is_int()) fail(i, "the destination index is an integer");
        Type m = arg(i, 2);
        if (!m.ptr || m.space != Space::Param || m.elem != Scalar::U8) fail(i, "reads a tensor map parameter, got " + m.str());
        Type bar = arg(i, 3);
        if (!bar.is_shared_ptr() || bar.elem != Scalar::U64 || !arg(i, 4).is_int())
          fail(i, "completes an mbarrier: a u64 in shared memory");
        for (size_t a = 5; a < 5 + rank; ++a) {
          Type c = arg(i, a);
          if (!c.is_int() || scalar_bytes(c.elem) != 4) fail(i, "coordinates are s32 or u32");
        }
        results(i, false);
        break;
      }
      case OpRule::TmaStore: {
        const size_t rank = i.attr.count;
        if (rank < 1 || rank > 5) fail(i, "a tensor has 1 to 5 dimensions");
        arity(i, 3 + rank, 3 + rank);
        Type m = arg(i, 0);
        if (!m.ptr || m.space != Space::Param || m.elem != Scalar::U8) fail(i, "writes through a tensor map parameter, got " + m.str());
        for (size_t a = 1; a <= rank; ++a) {
          Type c = arg(i, a);
          if (!c.is_int() || scalar_bytes(c.elem) != 4) fail(i, "coordinates are s32 or u32");
        }
        Type s = arg(i, 1 + rank);
        if (!s.is_shared_ptr()) fail(i, "copies from shared memory");
        if (!arg(i, 2 + rank).is_int()) fail(i, "the source index is an integer");
        results(i, false);
        break;
      }
      case OpRule::Shfl:
        arity(i, 2, 2);
        same(i, arg(i, 0), i.type);
        if (i.type.is_pred() || i.type.ptr) fail(i, "shfl on an unsupported type " + i.type.str());
        break;
      case OpRule::Vote:
        arity(i, 1, 1);
        if (!arg(i, 0).is_pred()) fail(i, "vote needs a pred");
        break;
      case OpRule::VarDecl:
        arity(i, 1, 1);
        same(i, arg(i, 0), i.type);
        break;
      case OpRule::VarRead:
        arity(i, 1, 1);
        same(i, use(i, i.args[0], true), i.type);
        break;
      case OpRule::VarWrite:
        arity(i, 2, 2);
        same(i, use(i, i.args[0], true), arg(i, 1));
        break;
      case OpRule::If:
        arity(i, 1, 1);
        if (!arg(i, 0).is_pred()) fail(i, "if condition must be pred");
        if (i.regions.size() != 2) fail(i, "if needs two regions");
        block(i.regions[0]);
        block(i.regions[1]);
        return;
      case OpRule::For: {
        arity(i, 3, 3);
        for (size_t a = 0; a < 3; ++a) same(i, arg(i, a), i.type);
        if (!i.type.is_int()) fail(i, "for bounds must be integers");
        if (i.regions.size() != 1) fail(i, "for needs one region");
        // The induction value belongs to the body.
        std::vector<uint32_t> inner;
        define(i, i.result, inner);
        block(i.regions[0]);
        for (uint32_t id : inner) visible[id] = 0;
        return;
      }
      case OpRule::While: {
        arity(i, 0, 0);
        if (i.regions.size() != 2) fail(i, "while needs two regions");
        std::vector<uint32_t> cond_scope;
        for (const Inst& c : i.regions[0].insts) inst(c, cond_scope);
        uint32_t c = i.attr.cond;
        if (c >= k.values.size() || !visible[c] || !k.values[c].type.is_pred())
          fail(i, "while condition must be a pred visible at the end of the condition block");
        for (uint32_t id : cond_scope) visible[id] = 0;
        block(i.regions[1]);
        return;
      }
    }
    if (!i.regions.empty()) fail(i, "has regions but is no control-flow op");
    if (has_result)
      for (uint32_t r = 0; r < i.nresults; ++r) define(i, i.result + r, scope);
  }
};

}  // namespace

void check_barriers(const Kernel::Data& k);     // divergence.cpp
void check_async_regs(const Kernel::Data& k);   // async_regs.cpp

VerifyResult verify(const Kernel::Data& k) {
  // .maxnreg: ptxas needs room for its own temporaries, and a thread has at most 255
  if (k.max_registers && (k.max_registers < 24 || k.max_registers > 255))
    throw UsageError(k.name, "max_registers", "verifier: the register cap must be 24..255, got " + std::to_string(k.max_registers));
  Verifier v{k, std::vector<uint8_t>(k.values.size(), 0)};
  v.block(k.body);
  // Both passes only reject at barriers / async ops: a kernel without them skips them.
  if (v.any_sync) check_barriers(k);
  if (v.any_async) check_async_regs(k);
  return {v.arch_specific, v.setmaxnreg};
}

}  // namespace kaio::ir
