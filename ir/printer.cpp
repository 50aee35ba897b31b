// Canonical text form of a kernel: one instruction per line, values by number,
// nested blocks indented by two spaces. Tests compare against inline expected strings.
#include <cstdio>
#include <cstring>

#include "kaio/ir/kernel.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::ir {

std::string format_constant(Type t, uint64_t bits) {
  char buf[64];
  switch (t.elem) {
    case Scalar::Pred: return bits ? "true" : "false";
    case Scalar::S8: return std::to_string(static_cast<int8_t>(bits));
    case Scalar::S16: return std::to_string(static_cast<int16_t>(bits));
    case Scalar::S32: return std::to_string(static_cast<int32_t>(bits));
    case Scalar::S64: return std::to_string(static_cast<int64_t>(bits));
    case Scalar::U8: case Scalar::U16: case Scalar::U32: case Scalar::U64: return std::to_string(bits);
    case Scalar::F16:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(float(kaio::half::from_bits(uint16_t(bits)))));
      return buf;
    case Scalar::BF16:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(float(kaio::bfloat16::from_bits(uint16_t(bits)))));
      return buf;
    case Scalar::F32:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(detail::bits_f32(uint32_t(bits))));
      return buf;
    case Scalar::E4M3: case Scalar::E5M2:
      std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(detail::fp8_bits_to_f32(uint8_t(bits), t.elem == Scalar::E5M2)));
      return buf;
    case Scalar::F16x2:
      return "(" + format_constant(Type::scalar(Scalar::F16), bits & 0xffff) + ", " +
             format_constant(Type::scalar(Scalar::F16), (bits >> 16) & 0xffff) + ")";
    case Scalar::BF16x2:
      return "(" + format_constant(Type::scalar(Scalar::BF16), bits & 0xffff) + ", " +
             format_constant(Type::scalar(Scalar::BF16), (bits >> 16) & 0xffff) + ")";
    case Scalar::F64: {
      double d;
      std::memcpy(&d, &bits, 8);
      std::snprintf(buf, sizeof buf, "%.17g", d);
      return buf;
    }
  }
  return "?";
}

namespace {

const char* hint_suffix(CacheHint h) {
  switch (h) {
    case CacheHint::ReadOnly: return ".nc";
    case CacheHint::Streaming: return ".cs";
    case CacheHint::Global: return ".cg";
    case CacheHint::LastUse: return ".lu";
    default: return "";
  }
}

std::string hex32(uint64_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(x));
  return buf;
}

// The generic form, read from the op table:
//   [results =] name[.suffixes] [leading words] operands [trailing words] : type
// Suffixes, leading and trailing words come from the op's attributes; ops with a pointer
// and an index (memory ops) print them as p[i].
struct Printer {
  const Kernel::Data& k;
  std::string out;

  static std::string v(uint32_t id) { return "%" + std::to_string(id); }

  void line(int depth, const std::string& s) {
    out.append(static_cast<size_t>(depth) * 2, ' ');
    out += s;
    out += '\n';
  }

  void block(const Block& b, int depth) {
    for (const Inst& i : b.insts) inst(i, depth);
  }

  static std::string suffixes(const Inst& i) {
    static const char* atomics[] = {"add", "min", "max", "exch"};
    static const char* scopes[] = {"cta", "gpu", "sys"};
    static const char* shfls[] = {"up", "down", "xor", "idx"};
    static const char* votes[] = {"all", "any", "ballot"};
    const uint32_t m = i.def().attrs;
    const Attrs& a = i.attr;
    std::string s;
    if (m & Attr::Rounding) s += std::string(".") + rounding_name(a.rounding);
    if ((m & Attr::Saturate) && a.saturate) s += ".sat";
    if (m & Attr::High) s += a.high ? ".hi" : ".lo";
    if (m & Attr::Hint) s += hint_suffix(a.hint);
    if (m & Attr::Atomic) s += std::string(".") + atomics[static_cast<int>(a.atomic)];
    if (m & Attr::Scope) s += std::string(".") + scopes[static_cast<int>(a.scope)];
    if (m & Attr::Increase) s += a.increase ? ".inc" : ".dec";
    if (m & Attr::Shfl) s += std::string(".") + shfls[static_cast<int>(a.shfl)];
    if (m & Attr::Vote) s += std::string(".") + votes[static_cast<int>(a.vote)];
    if ((m & Attr::Trans) && a.trans) {
      if (!(m & Attr::Shape)) s += ".trans";  // ldmatrix
      else s += std::string((a.trans & 1) ? ".a_mn" : "") + ((a.trans & 2) ? ".b_mn" : "") + ((a.trans & kWgmmaARegs) ? ".a_reg" : "");  // wgmma operand majors / A in registers
    }
    return s;
  }

  std::string leading(const Inst& i) const {
    const uint32_t m = i.def().attrs;
    const Attrs& a = i.attr;
    std::string s;
    if (m & Attr::Bits) s += " " + format_constant(i.type, a.bits);
    if (m & Attr::Sreg) s += std::string(" ") + sreg_name(a.sreg);
    if (m & Attr::Count) s += " " + std::to_string(a.count);
    if (m & Attr::Shape) s += " m64n" + std::to_string(a.shape) + "k" + std::to_string(32 / scalar_bytes(a.elem));
    if (m & Attr::Elem) s += std::string(" ") + scalar_name(a.elem);
    if ((m & Attr::ElemB) && a.elem_b != a.elem) s += std::string(" ") + scalar_name(a.elem_b);
    if (m & Attr::Mma) s += std::string(" ") + mma_shape(a.mma).name;
    return s;
  }

  static std::string trailing(const Inst& i) {
    const uint32_t m = i.def().attrs;
    const Attrs& a = i.attr;
    std::string s;
    if ((m & Attr::Align) && a.align != 16) s += " align " + std::to_string(a.align);
    if ((m & Attr::Id) && a.id != 0) s += " id " + std::to_string(a.id);
    if ((m & Attr::Threads) && a.threads != 0) s += " threads " + std::to_string(a.threads);
    if (m & Attr::Regs) s += " " + std::to_string(a.regs);
    if (m & Attr::Width) s += " width " + std::to_string(a.width);
    if (m & Attr::Mask) s += " mask " + hex32(a.mask);
    return s;
  }

  void inst(const Inst& i, int d) {
    const OpDef& def = i.def();
    switch (i.op) {
      case Op::Param:
        return;  // shown in the signature
      case Op::Comment:
        return line(d, "; " + k.comments[i.attr.index]);
      case Op::If:
        line(d, "if " + v(i.args[0]) + " {");
        block(i.regions[0], d + 1);
        if (i.attr.has_else) {
          line(d, "} else {");
          block(i.regions[1], d + 1);
        }
        return line(d, "}");
      case Op::For:
        line(d, "for " + v(i.result) + " = " + v(i.args[0]) + " to " + v(i.args[1]) + " step " + v(i.args[2]) +
                    " : " + i.type.str() + " {");
        block(i.regions[0], d + 1);
        return line(d, "}");
      case Op::While:
        line(d, "while {");
        block(i.regions[0], d + 1);
        line(d, "} test " + v(i.attr.cond) + " do {");
        block(i.regions[1], d + 1);
        return line(d, "}");
      default:
        break;
    }
    std::string s;
    if (i.result != kNoValue) {
      for (uint32_t r = 0; r < i.nresults && r < 4; ++r) s += (r ? ", " : "") + v(i.result + r);
      if (i.nresults > 4) s += " .. " + v(i.result + i.nresults - 1);
      s += " = ";
    }
    s += def.name + suffixes(i) + leading(i);
    bool indexed = def.rule == OpRule::Load || def.rule == OpRule::Store || def.rule == OpRule::Atomic ||
                   def.rule == OpRule::Address || def.rule == OpRule::Mbarrier || def.rule == OpRule::Ldmatrix ||
                   def.rule == OpRule::CpAsync;
    for (size_t a = 0; a < i.args.size(); ++a) {
      if (indexed && (a == 1 || (a == 3 && def.rule == OpRule::CpAsync))) {  // p[i]
        s += "[" + v(i.args[a]) + "]";
        continue;
      }
      s += (a == 0 ? " " : ", ") + v(i.args[a]);
    }
    s += trailing(i);
    if (i.type.ptr || i.result != kNoValue || def.rule == OpRule::Store || def.rule == OpRule::VarWrite)
      s += " : " + i.type.str();
    const std::string& nm = i.result != kNoValue ? k.value_name(i.result) : std::string();
    if (i.op == Op::Const && !nm.empty()) s += "  ; spec " + nm;
    line(d, s);
  }
};

}  // namespace

std::string print_inst(const Kernel::Data& k, const Inst& i) {
  Printer p{k, {}};
  if (i.op == Op::If) return "if %" + std::to_string(i.args[0]);
  if (i.op == Op::For) return "for %" + std::to_string(i.result);
  if (i.op == Op::While) return "while";
  p.inst(i, 0);
  if (!p.out.empty() && p.out.back() == '\n') p.out.pop_back();
  return p.out;
}

std::string print(const Kernel::Data& k) {
  Printer p{k, {}};
  p.out = "kernel " + k.name + "(";
  // Params are the Param instructions of the top-level block, in order.
  bool first = true;
  for (const Inst& i : k.body.insts) {
    if (i.op != Op::Param) continue;
    if (!first) p.out += ", ";
    first = false;
    const Param& pr = k.params[i.attr.index];
    p.out += Printer::v(i.result) + ": " + i.type.str() + " " + pr.name;
    if (pr.bytes) p.out += " [" + std::to_string(pr.bytes) + " bytes, align " + std::to_string(pr.align) + "]";
  }
  p.out += ") {\n";
  if (k.max_threads) p.out += "  .launch_bounds " + std::to_string(k.max_threads) + ", " + std::to_string(k.min_blocks) + "\n";
  if (k.max_registers) p.out += "  .max_registers " + std::to_string(k.max_registers) + "\n";
  if (k.fast_math) p.out += "  .fast_math\n";
  p.block(k.body, 1);
  p.out += "}\n";
  return p.out;
}

}  // namespace kaio::ir
