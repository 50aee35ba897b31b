// Canonical binary encoding of a kernel, the input of its hash. It holds everything
// that changes the generated code and nothing else: no pointers, no parameter or spec
// names (PTX uses positional parameter names), values by creation number.
#include <algorithm>
#include <bit>
#include <cstring>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

// The most bytes an instruction writes besides its operands: op, nresults, type, result,
// operand count, every attribute, region count.
constexpr size_t kInstFixed = 1 + 4 + 2 + 4 + 4 + 128 + 1;

// Writes into a string sized ahead (room() before each instruction), with no per-field
// capacity checks: encoding runs on every kernel build.
struct Encoder {
  std::string out;
  size_t pos = 0;

  void room(size_t n) {
    if (pos + n > out.size()) out.resize(std::max(out.size() * 2, pos + n));
  }
  void raw(const void* p, size_t n) {
    std::memcpy(out.data() + pos, p, n);
    pos += n;
  }
  void u8(uint8_t x) { out[pos++] = static_cast<char>(x); }
  void u32(uint32_t x) { raw(&x, 4); }
  void u64(uint64_t x) { raw(&x, 8); }
  void str(const std::string& s) {
    room(4 + s.size());
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void type(Type t) {
    u8(static_cast<uint8_t>(t.elem));
    u8(static_cast<uint8_t>(t.ptr ? 1 : 0) | static_cast<uint8_t>(t.is_const ? 2 : 0) |
       static_cast<uint8_t>(static_cast<uint8_t>(t.space) << 2));
  }
  // The attributes the op's table entry lists, in Attr bit order (set bits only: most
  // ops have none or one).
  void attrs(const Inst& i) {
    const Attrs& a = i.attr;
    for (uint32_t m = i.def().attrs; m; m &= m - 1) {
      switch (std::countr_zero(m)) {
        case std::countr_zero(uint32_t{Attr::Bits}): u64(a.bits); break;
        case std::countr_zero(uint32_t{Attr::Index}): u32(a.index); break;
        case std::countr_zero(uint32_t{Attr::Sreg}): u8(static_cast<uint8_t>(a.sreg)); break;
        case std::countr_zero(uint32_t{Attr::Rounding}): u8(static_cast<uint8_t>(a.rounding)); break;
        case std::countr_zero(uint32_t{Attr::Saturate}): u8(a.saturate); break;
        case std::countr_zero(uint32_t{Attr::High}): u8(a.high); break;
        case std::countr_zero(uint32_t{Attr::Hint}): u8(static_cast<uint8_t>(a.hint)); break;
        case std::countr_zero(uint32_t{Attr::Count}): u32(a.count); break;
        case std::countr_zero(uint32_t{Attr::Align}): u32(a.align); break;
        case std::countr_zero(uint32_t{Attr::Atomic}): u8(static_cast<uint8_t>(a.atomic)); break;
        case std::countr_zero(uint32_t{Attr::Id}): u32(a.id); break;
        case std::countr_zero(uint32_t{Attr::Threads}): u32(a.threads); break;
        case std::countr_zero(uint32_t{Attr::Scope}): u8(static_cast<uint8_t>(a.scope)); break;
        case std::countr_zero(uint32_t{Attr::Regs}): u32(a.regs); break;
        case std::countr_zero(uint32_t{Attr::Increase}): u8(a.increase); break;
        case std::countr_zero(uint32_t{Attr::Shfl}): u8(static_cast<uint8_t>(a.shfl)); break;
        case std::countr_zero(uint32_t{Attr::Width}): u32(a.width); break;
        case std::countr_zero(uint32_t{Attr::Mask}): u32(a.mask); break;
        case std::countr_zero(uint32_t{Attr::Vote}): u8(static_cast<uint8_t>(a.vote)); break;
        case std::countr_zero(uint32_t{Attr::HasElse}): u8(a.has_else); break;
        case std::countr_zero(uint32_t{Attr::Cond}): u32(a.cond); break;
        case std::countr_zero(uint32_t{Attr::Shape}): u32(a.shape); break;
        case std::countr_zero(uint32_t{Attr::Elem}): u8(static_cast<uint8_t>(a.elem)); break;
        case std::countr_zero(uint32_t{Attr::Mma}): u8(static_cast<uint8_t>(a.mma)); break;
        case std::countr_zero(uint32_t{Attr::Trans}): u8(a.trans); break;
        case std::countr_zero(uint32_t{Attr::ElemB}): u8(static_cast<uint8_t>(a.elem_b)); break;
        default: KAIO_ASSERT(false, "an attribute bit without an encoding");
      }
    }
  }

  void block(const Block& b) {
    uint32_t n = 0;
    for (const Inst& i : b.insts) n += i.op != Op::Comment;
    room(4);
    u32(n);
    for (const Inst& i : b.insts) {
      if (i.op == Op::Comment) continue;  // comments change no code
      room(kInstFixed + 4 * i.args.size());
      u8(static_cast<uint8_t>(i.op));
      u32(i.nresults);
      type(i.type);
      u32(i.result);
      u32(static_cast<uint32_t>(i.args.size()));
      for (uint32_t a : i.args) u32(a);
      attrs(i);
      u8(static_cast<uint8_t>(i.regions.size()));
      for (const Block& r : i.regions) block(r);
    }
  }
};

}  // namespace

std::string encode(const Kernel::Data& k) {
  Encoder e;
  e.out.resize(256 + k.params.size() * 16 + k.specs.size() * 16 + k.values.size() * 24);
  static constexpr char kMagic[] = "kaio-ir\x02";
  e.raw(kMagic, sizeof(kMagic) - 1);
  e.str(k.name);  // the entry symbol: it is in the PTX
  e.room(64);
  e.u32(k.max_threads);
  e.u32(k.min_blocks);
  e.u32(k.max_registers);
  e.u8(k.fast_math ? 1 : 0);
  e.u32(static_cast<uint32_t>(k.params.size()));
  for (const Param& p : k.params) {
    e.room(16);
    e.type(p.type);
    e.u32(p.bytes);
    e.u32(p.align);
  }
  e.room(4);
  e.u32(static_cast<uint32_t>(k.specs.size()));
  for (const SpecConstant& s : k.specs) {  // the shape, as values
    e.room(16);
    e.type(s.type);
    e.u64(s.bits);
  }
  e.room(4 + 3 * k.values.size());
  e.u32(static_cast<uint32_t>(k.values.size()));
  for (const ValueInfo& v : k.values) {
    e.type(v.type);
    e.u8(v.is_var ? 1 : 0);
  }
  e.block(k.body);
  e.out.resize(e.pos);
  return std::move(e.out);
}

}  // namespace kaio::ir
