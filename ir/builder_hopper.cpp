// Builder methods of the Hopper (sm_90 / sm_90a) matrix path: warpgroup MMA, its shared-
// memory matrix descriptors, and tensor-memory-accelerator loads.
#include <string>

#include "kaio/ir/builder.h"

namespace kaio::ir {

namespace {
bool is_int(Type t) { return !t.ptr && t.is_int(); }
}  // namespace

void KernelBuilder::wgmma(const RegArray& acc, Value desc_a, Value desc_b, Scalar in, bool a_mn_major, bool b_mn_major) {
  wgmma_form(acc, desc_a, desc_b, in, in, a_mn_major, b_mn_major);
}

void KernelBuilder::wgmma(const RegArray& acc, Value desc_a, Value desc_b, Scalar a_type, Scalar b_type) {
  wgmma_form(acc, desc_a, desc_b, a_type, b_type, false, false);
}

void KernelBuilder::wgmma_form(const RegArray& acc, Value desc_a, Value desc_b, Scalar in, Scalar in_b, bool a_mn_major,
                               bool b_mn_major) {
  ensure_open("wgmma");
  check(desc_a, "wgmma");
  check(desc_b, "wgmma");
  const uint32_t n = static_cast<uint32_t>(acc.size()) * 2;
  const bool fp8 = in == Scalar::E4M3 || in == Scalar::E5M2, int8 = in == Scalar::S8 || in == Scalar::U8;
  const std::string k = std::to_string(32 / scalar_bytes(in));
  if (int8) {  // integer forms: s32 accumulators; N 8, 16, 24, then multiples of 16 up to 256
    if (!(acc.type() == Type::scalar(Scalar::S32)) || n < 8 || n > 256 || (n > 24 ? n % 16 : n % 8))
      fail("wgmma", "s8 / u8 accumulate in an s32 register array of N/2 values for m64nNk32, N 8, 16, 24 or a "
                    "multiple of 16 up to 256; got " + std::to_string(acc.size()) + " values of " + acc.type().str());
    if (in_b != Scalar::S8 && in_b != Scalar::U8)
      fail("wgmma", std::string("an s8 / u8 A takes an s8 or u8 B, not ") + scalar_name(in_b));
    if (a_mn_major || b_mn_major)
      fail("wgmma", std::string(scalar_name(in)) + " operands are K-major only (the transposing forms take 16-bit elements)");
  } else {
    if (!(acc.type() == Type::scalar(Scalar::F32)) || n < 8 || n > 256 || n % 8)
      fail("wgmma", "the accumulator is an f32 register array of N/2 values for m64nNk" + k +
                        ", N in 8..256 in steps of 8; got " + std::to_string(acc.size()) + " values of " + acc.type().str());
    if (in != Scalar::F16 && in != Scalar::BF16 && in != Scalar::F32 && !fp8)
      fail("wgmma", std::string("A and B are f16, bf16, f32 (as tf32), e4m3, e5m2, s8 or u8, not ") + scalar_name(in));
    if (in_b != in && !(fp8 && (in_b == Scalar::E4M3 || in_b == Scalar::E5M2)))
      fail("wgmma", std::string("A and B have one type, except e4m3 with e5m2 and s8 with u8; got ") + scalar_name(in) +
                        " and " + scalar_name(in_b));
    if (in == Scalar::F32 && (a_mn_major || b_mn_major))
      fail("wgmma", "tf32 operands are K-major only (the transposing forms take 16-bit elements)");
    if (fp8 && (a_mn_major || b_mn_major))
      fail("wgmma", std::string(scalar_name(in)) + " operands are K-major only (the transposing forms take 16-bit elements)");
  }
  for (Value d : {desc_a, desc_b})
    if (!(d.type() == Type::scalar(Scalar::U64))) fail("wgmma", "matrix descriptors are u64, got " + d.type().str());
  Inst& inst = append(Op::WgmmaMma, Type{});
  inst.attr.shape = static_cast<uint16_t>(n);
  inst.attr.elem = in;
  inst.attr.elem_b = in_b;
  inst.attr.trans = static_cast<uint8_t>((a_mn_major ? 1 : 0) | (b_mn_major ? 2 : 0));
  for (uint32_t k = 0; k < acc.size(); ++k) inst.args.push_back(acc.first_id() + k);
  inst.args.push_back(desc_a.id());
  inst.args.push_back(desc_b.id());
}

void KernelBuilder::wgmma(const RegArray& acc, const std::vector<Value>& a_frag, Value desc_b, Scalar in, bool b_mn_major) {
  ensure_open("wgmma");
  check(desc_b, "wgmma");
  const uint32_t n = static_cast<uint32_t>(acc.size()) * 2;
  if (in != Scalar::F16 && in != Scalar::BF16)
    fail("wgmma", std::string("A from registers takes f16 or bf16, not ") + scalar_name(in));
  if (!(acc.type() == Type::scalar(Scalar::F32)) || n < 8 || n > 256 || n % 8)
    fail("wgmma", "the accumulator is an f32 register array of N/2 values for m64nNk16, N in 8..256 in steps of 8; got " +
                      std::to_string(acc.size()) + " values of " + acc.type().str());
  const Scalar pair = in == Scalar::BF16 ? Scalar::BF16x2 : Scalar::F16x2;
  if (a_frag.size() != 4) fail("wgmma", "A from registers is 4 registers per thread, got " + std::to_string(a_frag.size()));
  for (const Value& r : a_frag) {
    check(r, "wgmma");
    if (!(r.type() == Type::scalar(pair)))
      fail("wgmma", std::string("A fragment registers are ") + scalar_name(pair) + ", got " + r.type().str());
  }
  if (!(desc_b.type() == Type::scalar(Scalar::U64))) fail("wgmma", "matrix descriptors are u64, got " + desc_b.type().str());
  Inst& inst = append(Op::WgmmaMma, Type{});
  inst.attr.shape = static_cast<uint16_t>(n);
  inst.attr.elem = in;
  inst.attr.elem_b = in;
  inst.attr.trans = static_cast<uint8_t>(kWgmmaARegs | (b_mn_major ? 2 : 0));
  for (uint32_t k = 0; k < acc.size(); ++k) inst.args.push_back(acc.first_id() + k);
  for (const Value& r : a_frag) inst.args.push_back(r.id());
  inst.args.push_back(desc_b.id());
}

Value KernelBuilder::wgmma_descriptor(Value ptr, const AnyOperand& index, WgmmaSwizzle swizzle, uint32_t lbo_bytes,
                                      uint32_t sbo_bytes) {
  ensure_open("wgmma_descriptor");
  check(ptr, "wgmma_descriptor");
  if (!ptr.type().is_shared_ptr()) fail("wgmma_descriptor", "the operand tile is in shared memory, got " + ptr.type().str());
  for (uint32_t off : {lbo_bytes, sbo_bytes})
    if (off % 16 || off >= (1u << 18))
      fail("wgmma_descriptor", "leading and stride byte offsets are multiples of 16 below 256 KiB, got " + std::to_string(off));
  // bits 0-13: start address >> 4; 16-29: leading byte offset >> 4; 32-45: stride byte
  // offset >> 4; 49-51: base offset (0: swizzled tiles start on their repeat); 62-63: swizzle.
  const uint64_t fixed = (uint64_t(lbo_bytes >> 4) << 16) | (uint64_t(sbo_bytes >> 4) << 32) |
                         (uint64_t(static_cast<uint8_t>(swizzle)) << 62);
  Value addr = shared_addr(ptr, index);
  Value start = ir::cast<uint64_t>((addr & 0x3ffffu) >> 4u);
  return start | constant<uint64_t>(fixed);
}

Value KernelBuilder::tensor_map_param(const std::string& name) { return param_bytes(name, Scalar::U8, 128, 64); }

bool KernelBuilder::is_tensor_map(Value map) {
  const Type mt = map.type();
  if (!mt.ptr || mt.space != Space::Param) return false;
  for (const auto& [id, name] : data().value_names)
    if (id == map.id())
      for (const Param& p : data().params)
        if (p.name == name) return p.bytes == 128 && p.align >= 64;
  return false;
}

void KernelBuilder::tma_load(Value dst, const AnyOperand& dst_index, Value map, const std::vector<Value>& coords, Value bar,
                             const AnyOperand& bar_index, Value cta_mask) {
  ensure_open("tma_load");
  check(dst, "tma_load");
  check(map, "tma_load");
  check_mbarrier("tma_load", bar);
  Type dt = dst.type(), mt = map.type();
  if (!dt.is_shared_ptr() || dt.is_const) fail("tma_load", "dst: a mutable shared-memory pointer, got " + dt.str());
  if (!is_tensor_map(map))
    fail("tma_load", "map: a tensor map parameter (b.tensor_map_param(name)), got " + mt.str() +
                         (mt.space == Space::Param ? " that is not a 128-byte, 64-aligned parameter" : ""));
  if (coords.empty() || coords.size() > 5)
    fail("tma_load", "coords: one coordinate per tensor dimension, 1 to 5, got " + std::to_string(coords.size()));
  for (const Value& c : coords) {
    check(c, "tma_load");
    if (!is_int(c.type()) || scalar_bytes(c.type().elem) != 4)
      fail("tma_load", "coords are s32 or u32, got " + c.type().str());
  }
  if (cta_mask.valid()) {
    check(cta_mask, "tma_load");
    if (!(cta_mask.type() == Type::scalar(Scalar::U16))) fail("tma_load", "cta_mask: a u16 of cluster CTA bits, got " + cta_mask.type().str());
  }
  Value di = index_operand(dst_index);
  Value bi = index_operand(bar_index);
  Inst& inst = append(Op::TmaLoad, Type{});
  inst.attr.count = static_cast<uint32_t>(coords.size());
  inst.args = {dst.id(), di.id(), map.id(), bar.id(), bi.id()};
  for (const Value& c : coords) inst.args.push_back(c.id());
  if (cta_mask.valid()) inst.args.push_back(cta_mask.id());
}

void KernelBuilder::tma_store(Value map, const std::vector<Value>& coords, Value src, const AnyOperand& src_index) {
  ensure_open("tma_store");
  check(src, "tma_store");
  check(map, "tma_store");
  if (!src.type().is_shared_ptr()) fail("tma_store", "src: a shared-memory pointer, got " + src.type().str());
  if (!is_tensor_map(map))
    fail("tma_store", "map: a tensor map parameter (b.tensor_map_param(name)), got " + map.type().str() +
                          (map.type().space == Space::Param ? " that is not a 128-byte, 64-aligned parameter" : ""));
  if (coords.empty() || coords.size() > 5)
    fail("tma_store", "coords: one coordinate per tensor dimension, 1 to 5, got " + std::to_string(coords.size()));
  for (const Value& c : coords) {
    check(c, "tma_store");
    if (!is_int(c.type()) || scalar_bytes(c.type().elem) != 4)
      fail("tma_store", "coords are s32 or u32, got " + c.type().str());
  }
  Value si = index_operand(src_index);
  Inst& inst = append(Op::TmaStore, Type{});
  inst.attr.count = static_cast<uint32_t>(coords.size());
  inst.args = {map.id()};
  for (const Value& c : coords) inst.args.push_back(c.id());
  inst.args.push_back(src.id());
  inst.args.push_back(si.id());
}

void KernelBuilder::bulk_commit_group() {
  ensure_open("bulk_commit_group");
  emit(Op::BulkCommit, Type{}, {}, {}, false);
}

void KernelBuilder::bulk_wait_group(uint32_t pending, bool read_only) {
  ensure_open("bulk_wait_group");
  if (pending > 63) fail("bulk_wait_group", "pending: at most 63 groups may stay in flight, got " + std::to_string(pending));
  Attrs a;
  a.count = pending;
  a.scope = read_only ? FenceScope::Cta : FenceScope::Gpu;  // Cta: .read, the shared sources only
  emit(Op::BulkWait, Type{}, {}, a, false);
}

void KernelBuilder::cluster_sync() {
  ensure_open("cluster_sync");
  emit(Op::ClusterSync, Type{}, {}, {}, false);
}

void KernelBuilder::fence_mbarrier_init() {
  ensure_open("fence_mbarrier_init");
  emit(Op::FenceMbarInit, Type{}, {}, {}, false);
}

}  // namespace kaio::ir
