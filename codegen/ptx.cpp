#include "kaio/codegen/ptx.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kaio/codegen/emitter.h"
#include "kaio/ir/error.h"

namespace kaio::codegen {

using ir::Scalar;
using ir::Type;

ArchInfo parse_arch(const std::string& arch) {
  ArchInfo a;
  auto bad = [&] {
    throw UsageError("", "target", "unknown target arch '" + arch + "'; expected sm_NN with an optional a/f suffix, e.g. sm_90");
  };
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) bad();
  size_t i = 3;
  while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') a.sm = a.sm * 10 + (arch[i++] - '0');
  if (i == 3 || a.sm < 50 || a.sm > 200) bad();
  if (i < arch.size()) {
    if (i + 1 != arch.size() || (arch[i] != 'a' && arch[i] != 'f')) bad();
    a.suffix = arch[i];
  }
  if (a.sm < 80) throw UsageError("", "target", "arch '" + arch + "' is older than sm_80, the oldest kaio supports");
  return a;
}

std::pair<int, int> ptx_isa_for_toolkit(int cuda_major, int cuda_minor) {
  if (cuda_major >= 13) return {9, cuda_minor};
  if (cuda_major == 12) {
    static const int minor_map[] = {0, 1, 2, 3, 4, 5, 5, 6, 7, 8};  // 12.0 .. 12.9
    return {8, minor_map[cuda_minor < 10 ? cuda_minor : 9]};
  }
  if (cuda_major == 11) return {7, cuda_minor};
  throw UsageError("", "target", "toolkit " + std::to_string(cuda_major) + "." + std::to_string(cuda_minor) + " is too old");
}

std::pair<int, int> min_ptx_isa_for_arch(const ArchInfo& a) {
  if (a.suffix == 'f') return {8, 8};
  if (a.sm >= 120) return {8, 7};
  if (a.sm >= 100) return {8, 6};
  if (a.sm >= 90) return a.suffix == 'a' ? std::pair{8, 0} : std::pair{7, 8};
  if (a.sm >= 89) return {7, 8};
  if (a.sm >= 87) return {7, 4};
  if (a.sm >= 86) return {7, 1};
  return {7, 0};
}

void validate_target(const Target& t) {
  ArchInfo a = parse_arch(t.arch);
  auto need = min_ptx_isa_for_arch(a);
  if (std::pair{t.ptx_major, t.ptx_minor} < need)
    throw UsageError("", "target", "PTX ISA " + std::to_string(t.ptx_major) + "." + std::to_string(t.ptx_minor) +
                                       " is too old for " + t.arch);
}

// ---------------- shared helpers ----------------

RegClass reg_class(Scalar s) {
  switch (s) {
    case Scalar::Pred: return RegClass::Pred;
    case Scalar::S8: case Scalar::U8: case Scalar::S16: case Scalar::U16: return RegClass::B16;
    case Scalar::E4M3: case Scalar::E5M2: return RegClass::B16;  // the code in the low byte, the high byte 0
    case Scalar::F16: case Scalar::BF16: return RegClass::H16;
    case Scalar::S32: case Scalar::U32: case Scalar::F16x2: case Scalar::BF16x2: return RegClass::B32;
    case Scalar::S64: case Scalar::U64: return RegClass::B64;
    case Scalar::F32: return RegClass::F32;
    case Scalar::F64: return RegClass::F64;
  }
  return RegClass::B32;
}

const char* arith_type(Scalar s) {
  switch (s) {
    case Scalar::Pred: return "pred";
    case Scalar::S8: case Scalar::S16: return "s16";
    case Scalar::U8: case Scalar::U16: return "u16";
    case Scalar::S32: return "s32";
    case Scalar::U32: return "u32";
    case Scalar::S64: return "s64";
    case Scalar::U64: return "u64";
    case Scalar::F16: return "f16";
    case Scalar::BF16: return "bf16";
    case Scalar::F32: return "f32";
    case Scalar::F64: return "f64";
    case Scalar::F16x2: return "f16x2";
    case Scalar::BF16x2: return "bf16x2";
    case Scalar::E4M3: case Scalar::E5M2: return "b16";  // moved, never computed on
  }
  return "?";
}

const char* mem_type(Scalar s) {
  switch (s) {
    case Scalar::Pred: return "u8";
    case Scalar::S8: return "s8";
    case Scalar::U8: return "u8";
    case Scalar::E4M3: case Scalar::E5M2: return "u8";  // zero-extended into its 16-bit register
    case Scalar::F16: case Scalar::BF16: return "b16";
    case Scalar::F16x2: case Scalar::BF16x2: return "b32";
    default: return arith_type(s);
  }
}

std::string fmt_f32(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0f%08X", detail::f32_bits(f));
  return buf;
}

std::string fmt_imm(Type t, uint64_t bits) {
  char buf[32];
  switch (t.elem) {
    case Scalar::Pred: return bits ? "1" : "0";
    case Scalar::S8: return std::to_string(static_cast<int8_t>(bits));
    case Scalar::S16: return std::to_string(static_cast<int16_t>(bits));
    case Scalar::S32: return std::to_string(static_cast<int32_t>(bits));
    case Scalar::S64: return std::to_string(static_cast<int64_t>(bits));
    case Scalar::U8: case Scalar::U16: case Scalar::U32: return std::to_string(bits);
    case Scalar::U64: return std::to_string(bits);
    case Scalar::F16: case Scalar::BF16:
      std::snprintf(buf, sizeof buf, "0x%04X", static_cast<unsigned>(bits & 0xffff));
      return buf;
    case Scalar::E4M3: case Scalar::E5M2:
      std::snprintf(buf, sizeof buf, "0x%04X", static_cast<unsigned>(bits & 0xff));
      return buf;
    case Scalar::F16x2: case Scalar::BF16x2:
      std::snprintf(buf, sizeof buf, "0x%08X", static_cast<unsigned>(bits & 0xffffffffu));
      return buf;
    case Scalar::F32:
      std::snprintf(buf, sizeof buf, "0f%08X", static_cast<unsigned>(bits));
      return buf;
    case Scalar::F64:
      std::snprintf(buf, sizeof buf, "0d%016llX", static_cast<unsigned long long>(bits));
      return buf;
  }
  return "0";
}

// ---------------- Emitter ----------------

namespace {
const char* const kRegPrefix[] = {"%p", "%rs", "%h", "%r", "%rd", "%f", "%fd"};
const char* const kRegDecl[] = {".pred", ".b16", ".b16", ".b32", ".b64", ".f32", ".f64"};
}  // namespace

std::string Emitter::fresh(RegClass c) {
  int n = counts[static_cast<size_t>(c)]++;
  return kRegPrefix[static_cast<size_t>(c)] + std::to_string(n);
}

const std::string& Emitter::reg(uint32_t value) {
  std::string& r = regs[value];
  if (r.empty()) {
    const ir::Type& t = k.values[value].type;
    // Global pointers are 64-bit addresses; shared pointers are 32-bit shared-window offsets.
    r = fresh(t.ptr ? (t.space == ir::Space::Shared ? RegClass::B32 : RegClass::B64) : reg_class(t.elem));
  }
  return r;
}

int Emitter::sm() const { return parse_arch(target.arch).sm; }

void Emitter::ins(std::string_view text) {
  body += '\t';
  body += text;
  body += ";\n";
}

void Emitter::place(const std::string& l) { body += l + ":\n"; }

void Emitter::unsupported(const ir::Inst& i, const std::string& what) const {
  throw UsageError(k.name, ir::op_name(i.op), what + " is not supported on " + target.arch);
}

std::string Emitter::widen_to_f32(uint32_t value) {
  Scalar s = type(value).elem;
  const std::string& src = reg(value);
  if (s == Scalar::F32) return src;
  std::string f = fresh(RegClass::F32);
  if (s == Scalar::F16) {
    ins("cvt.f32.f16 " + f + ", " + src);
  } else {  // bf16: the f32 with the same top 16 bits; exact, and valid on every target
    std::string r = fresh(RegClass::B32);
    ins("cvt.u32.u16 " + r + ", " + src);
    ins("shl.b32 " + r + ", " + r + ", 16");
    ins("mov.b32 " + f + ", " + r);
  }
  return f;
}

void Emitter::narrow_from_f32(const std::string& f32reg, Scalar to, const std::string& dst, const char* rnd) {
  ins(std::string("cvt.") + rnd + "." + (to == Scalar::F16 ? "f16" : "bf16") + ".f32 " + dst + ", " + f32reg);
}

void Emitter::normalize(Scalar s, const std::string& r) {
  if (s == Scalar::S8) ins("cvt.s16.s8 " + r + ", " + r);
  if (s == Scalar::U8) ins("cvt.u16.u8 " + r + ", " + r);
}

void Emitter::block(const ir::Block& b) {
  for (const ir::Inst& i : b.insts) inst(i);
}

void Emitter::no_emitter(const ir::Inst& i) const {
  KAIO_ASSERT(false, std::string("op '") + ir::op_name(i.op) + "' reached the codegen family of its table entry, which has no case for it (kernel " + k.name + ")");
  std::abort();
}

void emit_packed(Emitter& e, const ir::Inst& i) {
  using ir::Op;
  switch (i.op) {
    case Op::Pack:
      return e.ins("mov.b32 " + e.reg(i.result) + ", {" + e.reg(i.args[0]) + ", " + e.reg(i.args[1]) + "}");
    case Op::Bitcast:
      return e.ins("mov.b32 " + e.reg(i.result) + ", " + e.reg(i.args[0]));
    case Op::Unpack: {
      std::string other = e.fresh(RegClass::H16);
      const std::string& d = e.reg(i.result);
      return e.ins("mov.b32 {" + (i.attr.high ? other : d) + ", " + (i.attr.high ? d : other) + "}, " + e.reg(i.args[0]));
    }
    default:
      e.no_emitter(i);
  }
}

namespace {
using EmitFn = void (*)(Emitter&, const ir::Inst&);
// Indexed by ir::Family; the static_assert keeps it in step with the enum.
constexpr EmitFn kFamilyEmitters[] = {emit_arith, emit_math, emit_convert, emit_packed,
                                      emit_memory, emit_parallel, emit_control, emit_tensor};
static_assert(sizeof(kFamilyEmitters) / sizeof(kFamilyEmitters[0]) == static_cast<size_t>(ir::Family::kCount));
}  // namespace

void Emitter::inst(const ir::Inst& i) {
  using ir::Op;
  if (target.annotate && i.op != Op::Comment) body += "\t// " + ir::print_inst(k, i) + "\n";
  const ir::OpDef& d = i.def();
  if (sm() < d.min_sm)
    throw UsageError(k.name, d.name, std::string(d.name) + " needs sm_" + std::to_string(d.min_sm) + " or newer; the target is " + target.arch);
  kFamilyEmitters[static_cast<size_t>(d.family)](*this, i);
}

// ---------------- entry ----------------

std::string emit_ptx(const ir::Kernel& kernel, const Target& t) {
  validate_target(t);
  Emitter e(kernel.data(), t);
  e.block(kernel.body());

  std::string out;
  out.reserve(e.body.size() + 1024);
  out += "//\n// Generated by kaio codegen v" + std::to_string(kCodegenVersion) + "\n//\n\n";
  out += ".version " + std::to_string(t.ptx_major) + "." + std::to_string(t.ptx_minor) + "\n";
  out += ".target " + t.arch + "\n";
  out += ".address_size 64\n\n";
  if (e.static_shared > kStaticSharedLimit)
    throw UsageError(kernel.name(), "shared",
                     "static shared memory of " + std::to_string(e.static_shared) + " bytes exceeds the " +
                         std::to_string(kStaticSharedLimit) + "-byte limit of " + t.arch +
                         "; use b.dynamic_shared<T>() and LaunchConfig::shared_bytes for more");
  if (e.dynamic_shared)
    out += ".extern .shared .align " + std::to_string(e.dynamic_shared) + " .b8 kaio_dynamic_smem[];\n\n";
  out += ".visible .entry " + kernel.name() + "(";
  const auto& params = kernel.params();
  for (size_t p = 0; p < params.size(); ++p) {
    out += p ? ",\n" : "\n";
    const Type& pt = params[p].type;
    const std::string pname = kernel.name() + "_param_" + std::to_string(p);
    if (params[p].bytes) {  // by value: .param .align A .b8 name[N]
      out += "\t.param .align " + std::to_string(params[p].align) + " .b8 " + pname + "[" +
             std::to_string(params[p].bytes) + "]";
      continue;
    }
    out += "\t.param .";
    out += pt.ptr ? "u64" : mem_type(pt.elem);
    out += " " + pname;
  }
  out += params.empty() ? ")\n" : "\n)\n";
  const ir::Kernel::Data& kd = kernel.data();
  if (kd.max_threads) out += ".maxntid " + std::to_string(kd.max_threads) + ", 1, 1\n";
  if (kd.min_blocks) out += ".minnctapersm " + std::to_string(kd.min_blocks) + "\n";
  if (kd.max_registers) out += ".maxnreg " + std::to_string(kd.max_registers) + "\n";
  out += "{\n";
  out += e.shared_decls;
  for (size_t c = 0; c < static_cast<size_t>(RegClass::kCount); ++c) {
    if (e.counts[c] == 0) continue;
    out += "\t.reg ";
    out += kRegDecl[c];
    out += " ";
    out += kRegPrefix[c];
    out += "<" + std::to_string(e.counts[c]) + ">;\n";
  }
  out += "\n";
  out += e.body;
  out += "\tret;\n}\n";
  return out;
}

}  // namespace kaio::codegen
