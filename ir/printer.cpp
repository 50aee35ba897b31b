// Canonical text form of a kernel: one instruction per line, values by number,
// nested blocks indented by two spaces. Tests compare against inline expected strings.
#include <cstdio>
#include <cstring>

#include "kaio/ir/kernel.h"

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

const char* hint_suffix(uint64_t imm) {
  switch (static_cast<CacheHint>(imm & 0xff)) {
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

  void inst(const Inst& i, int d) {
    std::string ty = " : " + i.type.str();
    switch (i.op) {
      case Op::Param:
        return;  // shown in the signature
      case Op::Const: {
        std::string s = v(i.result) + " = const " + format_constant(i.type, i.imm) + ty;
        const std::string& nm = k.values[i.result].name;
        if (!nm.empty()) s += "  ; spec " + nm;
        return line(d, s);
      }
      case Op::SReg:
        return line(d, v(i.result) + " = sreg " + sreg_name(static_cast<SpecialReg>(i.imm)) + ty);
      case Op::Cast:
        return line(d, v(i.result) + " = cast." + rounding_name(static_cast<Rounding>(i.imm & 0xff)) +
                           ((i.imm & kCastSaturate) ? ".sat " : " ") + v(i.args[0]) + ty);
      case Op::Load:
        return line(d, v(i.result) + " = load" + hint_suffix(i.imm) + " " + v(i.args[0]) + "[" + v(i.args[1]) + "]" + ty);
      case Op::Store:
        return line(d, "store" + std::string(hint_suffix(i.imm)) + " " + v(i.args[0]) + "[" + v(i.args[1]) + "], " +
                           v(i.args[2]) + ty);
      case Op::LoadVec: {
        std::string s;
        for (int r = 0; r < i.nresults; ++r) s += (r ? ", " : "") + v(i.result + r);
        return line(d, s + " = load_vec" + hint_suffix(i.imm) + " " + v(i.args[0]) + "[" + v(i.args[1]) + "]" + ty);
      }
      case Op::StoreVec: {
        std::string s = "store_vec" + std::string(hint_suffix(i.imm)) + " " + v(i.args[0]) + "[" + v(i.args[1]) + "]";
        for (int a = 2; a < i.nargs; ++a) s += ", " + v(i.args[a]);
        return line(d, s + ty);
      }
      case Op::SharedAlloc:
        return line(d, v(i.result) + " = shared " + std::to_string(i.imm) + ty);
      case Op::DynamicShared:
        return line(d, v(i.result) + " = dynamic_shared" + ty);
      case Op::AtomicRmw: {
        static const char* n[] = {"add", "min", "max", "exch"};
        return line(d, v(i.result) + " = atomic." + n[i.imm] + " " + v(i.args[0]) + "[" + v(i.args[1]) + "], " +
                           v(i.args[2]) + ty);
      }
      case Op::AtomicCas:
        return line(d, v(i.result) + " = atomic_cas " + v(i.args[0]) + "[" + v(i.args[1]) + "], " + v(i.args[2]) +
                           ", " + v(i.args[3]) + ty);
      case Op::Barrier:
        return line(d, "barrier");
      case Op::Fence: {
        static const char* n[] = {"cta", "gpu", "sys"};
        return line(d, std::string("fence.") + n[i.imm]);
      }
      case Op::Shfl: {
        static const char* n[] = {"up", "down", "xor", "idx"};
        return line(d, v(i.result) + " = shfl." + n[i.imm & 0xff] + " " + v(i.args[0]) + ", " + v(i.args[1]) +
                           " width " + std::to_string(i.imm >> 40) + " mask " + hex32((i.imm >> 8) & 0xffffffffu) + ty);
      }
      case Op::Vote: {
        static const char* n[] = {"all", "any", "ballot"};
        return line(d, v(i.result) + " = vote." + n[i.imm & 0xff] + " " + v(i.args[0]) + " mask " + hex32(i.imm >> 8) + ty);
      }
      case Op::Comment:
        return line(d, "; " + k.comments[i.imm]);
      case Op::Unpack:
        return line(d, v(i.result) + (i.imm ? " = unpack.hi " : " = unpack.lo ") + v(i.args[0]) + ty);
      case Op::VarDecl:
        return line(d, v(i.result) + " = var " + v(i.args[0]) + ty);
      case Op::VarRead:
        return line(d, v(i.result) + " = read " + v(i.args[0]) + ty);
      case Op::VarWrite:
        return line(d, "write " + v(i.args[0]) + ", " + v(i.args[1]) + ty);
      case Op::If:
        line(d, "if " + v(i.args[0]) + " {");
        block(i.regions[0], d + 1);
        if (i.imm) {
          line(d, "} else {");
          block(i.regions[1], d + 1);
        }
        return line(d, "}");
      case Op::For:
        line(d, "for " + v(i.result) + " = " + v(i.args[0]) + " to " + v(i.args[1]) + " step " +
                    v(i.args[2]) + ty + " {");
        block(i.regions[0], d + 1);
        return line(d, "}");
      case Op::While:
        line(d, "while {");
        block(i.regions[0], d + 1);
        line(d, "} test " + v(static_cast<uint32_t>(i.imm)) + " do {");
        block(i.regions[1], d + 1);
        return line(d, "}");
      case Op::Return:
        return line(d, "return");
      default: {
        std::string s = v(i.result) + " = " + op_name(i.op);
        for (int a = 0; a < i.nargs; ++a) s += (a ? ", " : " ") + v(i.args[a]);
        return line(d, s + ty);
      }
    }
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
    p.out += Printer::v(i.result) + ": " + i.type.str() + " " + k.params[i.imm].name;
  }
  p.out += ") {\n";
  if (k.max_threads) p.out += "  .launch_bounds " + std::to_string(k.max_threads) + ", " + std::to_string(k.min_blocks) + "\n";
  if (k.fast_math) p.out += "  .fast_math\n";
  p.block(k.body, 1);
  p.out += "}\n";
  return p.out;
}

}  // namespace kaio::ir
