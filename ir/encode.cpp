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
    u8(static_cast<uint8_t>(t.ptr ? 1 : 0) | static_cast<uint8_t>(t.is_const ? 2 : 0));
  }
  void block(const Block& b) {
    uint32_t n = 0;
    for (const Inst& i : b.insts) n += i.op != Op::Comment;
    u32(n);
    for (const Inst& i : b.insts) {
      if (i.op == Op::Comment) continue;  // comments change no code
      u8(static_cast<uint8_t>(i.op));
      u8(i.nresults);
      type(i.type);
      u32(i.result);
      u8(i.nargs);
      for (int a = 0; a < i.nargs; ++a) u32(i.args[a]);
      u64(i.imm);
      u8(static_cast<uint8_t>(i.regions.size()));
      for (const Block& r : i.regions) block(r);
    }
  }
};

}  // namespace

std::string encode(const Kernel::Data& k) {
  Encoder e;
  e.out = "kaio-ir\x01";
  e.str(k.name);  // the entry symbol: it is in the PTX
  e.u32(k.max_threads);
  e.u32(k.min_blocks);
  e.u8(k.fast_math ? 1 : 0);
  e.u32(static_cast<uint32_t>(k.params.size()));
  for (const Param& p : k.params) e.type(p.type);
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
