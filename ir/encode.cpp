// Canonical binary encoding of a kernel, the input of its hash. It holds everything
// that changes the generated code and nothing else: no pointers, no parameter or spec
// names (PTX uses positional parameter names), values by creation number.
#include "kaio/ir/kernel.h"

namespace kaio::ir {

namespace {

struct Encoder {
  std::string out;

  void u8(uint8_t x) { out.push_back(static_cast<char>(x)); }
  void u32(uint32_t x) { out.append(reinterpret_cast<const char*>(&x), 4); }
  void u64(uint64_t x) { out.append(reinterpret_cast<const char*>(&x), 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out += s;
  }
  void type(Type t) {
    u8(static_cast<uint8_t>(t.elem));
    u8(static_cast<uint8_t>(t.ptr ? 1 : 0) | static_cast<uint8_t>(t.is_const ? 2 : 0) |
       static_cast<uint8_t>(static_cast<uint8_t>(t.space) << 2));
  }
  // The attributes the op's table entry lists, in Attr bit order.
  void attrs(const Inst& i) {
    const uint32_t m = i.def().attrs;
    const Attrs& a = i.attr;
    if (m & Attr::Bits) u64(a.bits);
    if (m & Attr::Index) u32(a.index);
    if (m & Attr::Sreg) u8(static_cast<uint8_t>(a.sreg));
    if (m & Attr::Rounding) u8(static_cast<uint8_t>(a.rounding));
    if (m & Attr::Saturate) u8(a.saturate);
    if (m & Attr::High) u8(a.high);
    if (m & Attr::Hint) u8(static_cast<uint8_t>(a.hint));
    if (m & Attr::Count) u32(a.count);
    if (m & Attr::Align) u32(a.align);
    if (m & Attr::Atomic) u8(static_cast<uint8_t>(a.atomic));
    if (m & Attr::Id) u32(a.id);
    if (m & Attr::Threads) u32(a.threads);
    if (m & Attr::Scope) u8(static_cast<uint8_t>(a.scope));
    if (m & Attr::Regs) u32(a.regs);
    if (m & Attr::Increase) u8(a.increase);
    if (m & Attr::Shfl) u8(static_cast<uint8_t>(a.shfl));
    if (m & Attr::Width) u32(a.width);
    if (m & Attr::Mask) u32(a.mask);
    if (m & Attr::Vote) u8(static_cast<uint8_t>(a.vote));
    if (m & Attr::HasElse) u8(a.has_else);
    if (m & Attr::Cond) u32(a.cond);
    if (m & Attr::Shape) u32(a.shape);
    if (m & Attr::Elem) u8(static_cast<uint8_t>(a.elem));
    if (m & Attr::Mma) u8(static_cast<uint8_t>(a.mma));
    if (m & Attr::Trans) u8(a.trans);
  }

  void block(const Block& b) {
    uint32_t n = 0;
    for (const Inst& i : b.insts) n += i.op != Op::Comment;
    u32(n);
    for (const Inst& i : b.insts) {
      if (i.op == Op::Comment) continue;  // comments change no code
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
  e.out.reserve(64 + k.values.size() * 24);
  e.out = "kaio-ir\x02";
  e.str(k.name);  // the entry symbol: it is in the PTX
  e.u32(k.max_threads);
  e.u32(k.min_blocks);
  e.u8(k.fast_math ? 1 : 0);
  e.u32(static_cast<uint32_t>(k.params.size()));
  for (const Param& p : k.params) {
    e.type(p.type);
    e.u32(p.bytes);
    e.u32(p.align);
  }
  e.u32(static_cast<uint32_t>(k.specs.size()));
  for (const SpecConstant& s : k.specs) {  // the shape, as values
    e.type(s.type);
    e.u64(s.bits);
  }
  e.u32(static_cast<uint32_t>(k.values.size()));
  for (const ValueInfo& v : k.values) {
    e.type(v.type);
    e.u8(v.is_var ? 1 : 0);
  }
  e.block(k.body);
  return std::move(e.out);
}

}  // namespace kaio::ir
