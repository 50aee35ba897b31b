// Internal to codegen: the state of one PTX emission, shared by the per-family emitters.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/kernel.h"

namespace kaio::codegen {

// Register pools, one per PTX register class.
enum class RegClass : uint8_t { Pred, B16, H16, B32, B64, F32, F64, kCount };

RegClass reg_class(ir::Scalar s);
// The PTX type suffix used for arithmetic on a scalar (8-bit integers live in 16-bit
// registers, so they compute as s16/u16; f16/bf16 storage moves as b16).
const char* arith_type(ir::Scalar s);
// The PTX type suffix for memory and parameter access ("s8", "f32", "b16", ...).
const char* mem_type(ir::Scalar s);
// The one place immediates are formatted: 0f3F800000, 0d..., decimal integers, 0x3C00.
std::string fmt_imm(ir::Type t, uint64_t bits);
std::string fmt_f32(float f);

struct Emitter {
  const ir::Kernel::Data& k;
  const Target& target;
  std::vector<std::string> regs;  // value id -> register
  std::array<int, static_cast<size_t>(RegClass::kCount)> counts{};
  std::string body;
  std::string shared_decls;      // static shared arrays, declared in the entry
  uint64_t static_shared = 0;    // bytes, for the target's limit
  uint32_t dynamic_shared = 0;   // .extern .shared declared at module scope with this alignment (0: none)
  int labels = 0;
  // value id -> its bits where it is a constant (Op::Const): an integer division by one is
  // lowered to shifts or a multiply-high (codegen/div_magic.h).
  std::vector<std::optional<uint64_t>> consts;

  Emitter(const ir::Kernel::Data& kd, const Target& t) : k(kd), target(t), regs(kd.values.size()), consts(kd.values.size()) {}

  std::string fresh(RegClass c);            // a new register of a class
  const std::string& reg(uint32_t value);   // the register of a value (allocated on first use)
  ir::Type type(uint32_t value) const { return k.values[value].type; }
  std::string label() { return "$L__kaio_" + std::to_string(labels++); }
  void ins(std::string_view text);          // one instruction line ("add.s32 %r1, %r2, %r3")
  void place(const std::string& label);     // "$L:"
  [[noreturn]] void unsupported(const ir::Inst& i, const std::string& what) const;
  // An op that reached a family emitter without a case for it: a table/emitter mismatch.
  [[noreturn]] void no_emitter(const ir::Inst& i) const;

  // f16/bf16 <-> f32 helpers (exact widening; rn narrowing).
  std::string widen_to_f32(uint32_t value);
  void narrow_from_f32(const std::string& f32reg, ir::Scalar to, const std::string& dst, const char* rnd = "rn");
  // Keeps 8-bit integers normalized (sign- or zero-extended) in their 16-bit registers.
  void normalize(ir::Scalar s, const std::string& reg);

  int sm() const;  // 80, 90, ...
  void block(const ir::Block& b);
  void inst(const ir::Inst& i);
};

// One emitter per instruction family (OpDef::family); ptx.cpp dispatches through a table.
void emit_arith(Emitter& e, const ir::Inst& i);    // neg not abs add..shr, compare, select, fma
void emit_math(Emitter& e, const ir::Inst& i);     // sqrt rsqrt exp log tanh sin cos
void emit_convert(Emitter& e, const ir::Inst& i);  // cast
void emit_memory(Emitter& e, const ir::Inst& i);   // param, loads, stores, shared arrays and addresses, atomics
void emit_control(Emitter& e, const ir::Inst& i);  // const, sreg, vars, if, for, while, return, comment
void emit_parallel(Emitter& e, const ir::Inst& i); // barriers, fences, setmaxnreg, shfl, vote, mbarriers
void emit_packed(Emitter& e, const ir::Inst& i);   // pack, unpack
void emit_tensor(Emitter& e, const ir::Inst& i);   // mma.sync, ldmatrix, cp.async and its groups

}  // namespace kaio::codegen
