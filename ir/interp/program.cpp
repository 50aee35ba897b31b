// Interpreter: the compiler from the IR tree to the flat program (impl.h describes it) and
// the per-kernel cache of compiled programs.
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp {

using namespace impl;

namespace {


struct Compiler {
  const Kernel::Data& k;
  Program& P;
  std::vector<std::vector<uint32_t>> fix;  // per open region: instructions whose target is its join
  uint32_t depth = 0;

  uint32_t emit(const PInst& p) {
    P.code.push_back(p);
    return static_cast<uint32_t>(P.code.size() - 1);
  }
  void patch(const std::vector<uint32_t>& list, uint32_t to) {
    for (uint32_t i : list) P.code[i].target = to;
  }
  PInst control(Kind kind, const Inst& i) {
    PInst p;
    p.kind = kind;
    p.depth = static_cast<uint8_t>(depth);
    p.src = &i;
    return p;
  }
  PInst exec(ExecFn fn, const Inst& i, uint32_t dst, uint32_t a = 0, uint32_t b = 0, uint32_t c = 0) {
    PInst p;
    p.fn = fn;
    p.dst = dst;
    p.a = a;
    p.b = b;
    p.c = c;
    p.src = &i;
    return p;
  }
  [[noreturn]] void unsupported(const Inst& i) {
    throw UsageError(k.name, op_name(i.op), "not supported by the interpreter yet");
  }
  static uint32_t arg(const Inst& i, size_t n) { return i.args.size() > n && i.args[n] != kNoValue ? i.args[n] : 0; }

  // Compiles a nested region; returns the instructions to patch to its join.
  std::vector<uint32_t> region(const Block& b) {
    fix.emplace_back();
    ++depth;
    if (depth >= 255) throw UsageError(k.name, "interpret", "control flow nested deeper than 254 levels");
    P.frames = std::max(P.frames, depth + 1);
    block(b);
    --depth;
    std::vector<uint32_t> out = std::move(fix.back());
    fix.pop_back();
    return out;
  }

  void block(const Block& b) {
    for (const Inst& i : b.insts) inst(i);
  }

  void inst(const Inst& i) {
    switch (i.op) {
      // ---- leaves: filled into the register file, not executed ----
      case Op::Param:
        P.params.push_back({i.result, i.attr.index, i.type});
        return;
      case Op::Const:
        P.consts.push_back({i.result, normalize(i.type, i.attr.bits)});
        return;
      case Op::SReg:
        P.sregs.push_back({i.result, i.attr.sreg});
        return;
      case Op::WarpIndex:
        P.warp_index_slots.push_back(i.result);
        return;
      // ---- shared memory: pointers are fixed offsets of the block's window ----
      case Op::SharedAlloc: {
        uint64_t bytes = uint64_t(i.attr.count) * static_cast<uint64_t>(scalar_bytes(i.type.elem));
        uint64_t off = (uint64_t(P.static_shared) + i.attr.align - 1) / i.attr.align * i.attr.align;
        if (off + bytes > (uint64_t(1) << 24)) throw UsageError(k.name, op_name(i.op), "static shared memory larger than any GPU's");
        P.shared_arrays.push_back({i.result, static_cast<uint32_t>(off), static_cast<uint32_t>(bytes), i.type.elem});
        P.static_shared = static_cast<uint32_t>((off + bytes + 15) / 16 * 16);
        return;
      }
      case Op::DynamicShared:
        P.dynamic_slots.push_back(i.result);
        P.dynamic_align = std::max(P.dynamic_align, uint32_t{i.attr.align});
        return;
      // ---- no effect in the interpreter ----
      case Op::Comment:
      case Op::Fence:  // one host thread runs a block in program order; global atomics are seq-consistent enough
      case Op::FenceProxyAsync:  // no asynchronous proxy in the interpreter
      case Op::SetMaxNReg:       // registers are not a limited resource here
      case Op::GridDepWait:      // launches run one after another here
      case Op::LaunchDependents:
        return;
      case Op::Barrier: case Op::BarrierArrive: case Op::BarrierUnaligned: {
        PInst b = control(Kind::Barrier, i);
        b.a = i.attr.id;
        b.b = i.attr.threads;
        b.c = i.op == Op::BarrierArrive;
        if (b.a >= kNamedBarriers) throw UsageError(k.name, op_name(i.op), "barrier id " + std::to_string(b.a) + " is not in 0..15");
        emit(b);
        return;
      }
      // ---- variables ----
      case Op::VarDecl:  // a variable, or each element of a register array
        for (uint32_t r = 0; r < i.nresults; ++r) emit(exec(copy_masked_fn(), i, i.result + r, arg(i, 0)));
        return;
      case Op::VarRead:
        emit(exec(copy_all_fn(), i, i.result, arg(i, 0)));
        return;
      case Op::VarWrite:
        emit(exec(copy_masked_fn(), i, arg(i, 0), arg(i, 1)));
        return;
      // ---- structured control flow ----
      case Op::If: {
        PInst pif = control(Kind::If, i);
        pif.a = arg(i, 0);
        uint32_t at_if = emit(pif);
        std::vector<uint32_t> then_fix = region(i.regions[0]);
        bool has_else = i.attr.has_else && i.regions.size() > 1 && !i.regions[1].insts.empty();
        if (has_else) {
          uint32_t at_else = emit(control(Kind::Else, i));
          patch(then_fix, at_else);
          P.code[at_if].target = at_else;
          std::vector<uint32_t> else_fix = region(i.regions[1]);
          uint32_t at_join = emit(control(Kind::Join, i));
          patch(else_fix, at_join);
          P.code[at_else].target = at_join;
          fix.back().push_back(at_join);
        } else {
          uint32_t at_join = emit(control(Kind::Join, i));
          patch(then_fix, at_join);
          P.code[at_if].target = at_join;
          fix.back().push_back(at_join);
        }
        return;
      }
      case Op::For: {
        // Enter; iv = lo (active lanes); head: t = iv < hi; Test t; body; iv += step; Jump head; Join
        Scalar s = i.type.elem;
        emit(control(Kind::Enter, i));
        emit(exec(copy_masked_fn(), i, i.result, arg(i, 0)));
        uint32_t t = P.nslots++;
        uint32_t head = emit(exec(less_fn(s), i, t, i.result, arg(i, 1)));
        PInst test = control(Kind::Test, i);
        test.a = t;
        uint32_t at_test = emit(test);
        std::vector<uint32_t> body_fix = region(i.regions[0]);
        emit(exec(add_fn(s), i, i.result, i.result, arg(i, 2)));
        PInst jump = control(Kind::Jump, i);
        jump.target = head;
        emit(jump);
        uint32_t at_join = emit(control(Kind::Join, i));
        patch(body_fix, at_join);
        P.code[at_test].target = at_join;
        fix.back().push_back(at_join);
        return;
      }
      case Op::While: {
        // Enter; head: cond block; Test c; body; Jump head; Join
        emit(control(Kind::Enter, i));
        uint32_t head = static_cast<uint32_t>(P.code.size());
        std::vector<uint32_t> cond_fix = region(i.regions[0]);
        PInst test = control(Kind::Test, i);
        test.a = i.attr.cond;
        uint32_t at_test = emit(test);
        std::vector<uint32_t> body_fix = region(i.regions[1]);
        PInst jump = control(Kind::Jump, i);
        jump.target = head;
        emit(jump);
        uint32_t at_join = emit(control(Kind::Join, i));
        patch(cond_fix, at_join);
        patch(body_fix, at_join);
        P.code[at_test].target = at_join;
        fix.back().push_back(at_join);
        return;
      }
      case Op::Return:
        fix.back().push_back(emit(control(Kind::Return, i)));
        return;
      default:  // every other op runs through its family's executor
        if (i.def().family != Family::Control) return simple(i, pick(k, i));
        break;
    }
    KAIO_ASSERT(false, std::string("op '") + op_name(i.op) + "' has no interpreter case in its family (kernel " + k.name + ")");
  }

  // The executor of an op, from the picker of its family (OpDef::family).
  static ExecFn pick(const Kernel::Data& k, const Inst& i) {
    using Picker = ExecFn (*)(const Kernel::Data&, const Inst&);
    static constexpr Picker kPickers[] = {pick_arith, pick_math, pick_convert, pick_packed,
                                          pick_memory, pick_parallel, nullptr /* control: compiled here */,
                                          pick_tensor};
    static_assert(sizeof(kPickers) / sizeof(kPickers[0]) == static_cast<size_t>(Family::kCount));
    Picker p = kPickers[static_cast<size_t>(i.def().family)];
    return p ? p(k, i) : nullptr;
  }

  void simple(const Inst& i, ExecFn fn) {
    if (!fn) unsupported(i);
    uint32_t dst = i.result == kNoValue ? 0 : i.result;
    emit(exec(fn, i, dst, arg(i, 0), arg(i, 1), arg(i, 2)));
  }
};

std::shared_ptr<const Program> compile_program(const Kernel& kernel) {
  auto P = std::make_shared<Program>();
  P->kernel = kernel;
  const Kernel::Data& k = kernel.data();
  P->nslots = static_cast<uint32_t>(k.values.size());
  Compiler c{k, *P, {}, 0};
  c.fix.emplace_back();
  c.block(k.body);
  PInst end;
  end.kind = Kind::End;
  uint32_t at_end = c.emit(end);
  c.patch(c.fix.back(), at_end);
  return P;
}

struct HashOf {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull)); }
};

// Compiled programs by kernel hash, bounded like jit's kernel cache: approximate LRU (a
// hit stores a tick); an insert past the cap drops the least recently used eighth in one
// pass. A run holds its own reference, so eviction never pulls a program from under it.
struct ProgramCache {
  struct Entry {
    std::shared_ptr<const Program> program;
    uint64_t used = 0;
  };
  std::mutex m;
  std::unordered_map<Hash128, Entry, HashOf> map;
  size_t capacity = kDefaultProgramCacheCapacity;
  uint64_t tick = 0;

  void evict_locked() {
    if (capacity == 0 || map.size() <= capacity) return;
    const size_t target = capacity - capacity / 8;
    std::vector<std::pair<uint64_t, Hash128>> ages;
    ages.reserve(map.size());
    for (const auto& [h, e] : map) ages.emplace_back(e.used, h);
    const size_t drop = map.size() - target;
    std::nth_element(ages.begin(), ages.begin() + static_cast<std::ptrdiff_t>(drop), ages.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < drop; ++i) map.erase(ages[i].second);
  }
};

ProgramCache& programs() {
  static ProgramCache* c = new ProgramCache;  // never destroyed: runs may outlive statics
  return *c;
}

}  // namespace

namespace impl {

std::shared_ptr<const Program> program_for(const Kernel& k) {
  ProgramCache& c = programs();
  {
    std::lock_guard g(c.m);
    auto it = c.map.find(k.hash());
    if (it != c.map.end()) {
      it->second.used = ++c.tick;
      return it->second.program;
    }
  }
  std::shared_ptr<const Program> p = compile_program(k);  // throws for unsupported ops
  std::lock_guard g(c.m);
  auto [it, inserted] = c.map.emplace(k.hash(), ProgramCache::Entry{std::move(p), 0});
  it->second.used = ++c.tick;
  std::shared_ptr<const Program> out = it->second.program;
  if (inserted) c.evict_locked();
  return out;
}

}  // namespace impl

void set_program_cache_capacity(size_t n) {
  ProgramCache& c = programs();
  std::lock_guard g(c.m);
  c.capacity = n;
  c.evict_locked();
}

size_t program_cache_size() {
  ProgramCache& c = programs();
  std::lock_guard g(c.m);
  return c.map.size();
}

}  // namespace kaio::ir::interp
