// Builder: the warp-level tensor-core and asynchronous-copy ops of sm_80 - mma.sync on
// register arrays, ldmatrix, cp.async and its groups. Shapes and fragment types come from
// the descriptors in mma_layout.h; every misuse is a UsageError naming the op and the
// argument, before the verifier re-checks the whole kernel.
#include "kaio/ir/builder.h"

namespace kaio::ir {

RegArray RegArray::slice(size_t first, size_t n) const {
  if (n == 0 || first > n_ || n > n_ - first)
    b_->fail("array", "slice [" + std::to_string(first) + ", " + std::to_string(first + n) +
                          ") is outside the register array of " + std::to_string(n_) + " values");
  return RegArray(b_, first_ + static_cast<uint32_t>(first), static_cast<uint32_t>(n), type_);
}

namespace {

// A fragment register of an mma of this shape may have this type.
bool fragment_type_ok(const MmaShape& s, Type t) {
  if (t.ptr) return false;
  if (t.elem == s.frag) return true;
  return s.kind == MmaKind::TF32 && t.elem == Scalar::F32;  // tf32 operands: f32 values or their bits
}

std::string fragment_types(const MmaShape& s) {
  std::string t = scalar_name(s.frag);
  return s.kind == MmaKind::TF32 ? t + " or f32" : t;
}

}  // namespace

void KernelBuilder::mma_sync(MmaKind kind, const RegArray& acc, const std::vector<Value>& a,
                             const std::vector<Value>& b) {
  ensure_open("mma_sync");
  if (static_cast<int>(kind) >= static_cast<int>(std::size(kMmaShapes))) fail("mma_sync", "unknown mma kind");
  const MmaShape& s = mma_shape(kind);
  if (acc.size() != static_cast<size_t>(s.c.regs) || !(acc.type() == Type::scalar(s.acc)))
    fail("mma_sync", std::string("acc: ") + s.name + " accumulates into " + std::to_string(s.c.regs) + " " +
                         scalar_name(s.acc) + " registers (a register array or a slice of one); got " +
                         std::to_string(acc.size()) + " values of " + acc.type().str());
  auto operand = [&](const char* which, const std::vector<Value>& v, const FragLayout& f) {
    if (v.size() != static_cast<size_t>(f.regs))
      fail("mma_sync", std::string(which) + ": " + s.name + " takes " + std::to_string(f.regs) +
                           " fragment registers per lane, got " + std::to_string(v.size()));
    for (size_t r = 0; r < v.size(); ++r) {
      check(v[r], "mma_sync");
      if (!fragment_type_ok(s, v[r].type()))
        fail("mma_sync", std::string(which) + "[" + std::to_string(r) + "]: " + s.name + " fragment registers are " +
                             fragment_types(s) + ", got " + v[r].type().str());
    }
  };
  operand("a", a, s.a);
  operand("b", b, s.b);
  Inst inst;
  inst.op = Op::MmaSync;
  inst.attr.mma = kind;
  inst.args.reserve(acc.size() + a.size() + b.size());
  for (uint32_t k = 0; k < acc.size(); ++k) inst.args.push_back(acc.first_id() + k);
  for (const Value& v : a) inst.args.push_back(v.id());
  for (const Value& v : b) inst.args.push_back(v.id());
  current()->insts.push_back(std::move(inst));
}

std::vector<Value> KernelBuilder::ldmatrix(Value ptr, const AnyOperand& index, int num, bool trans) {
  check(ptr, "ldmatrix");
  Type pt = ptr.type();
  if (!pt.is_shared_ptr()) fail("ldmatrix", "ptr: ldmatrix reads shared memory, got " + pt.str());
  if (num != 1 && num != 2 && num != 4) fail("ldmatrix", "num: loads 1, 2 or 4 matrices, got " + std::to_string(num));
  const int es = scalar_bytes(pt.elem);
  if (pt.elem == Scalar::Pred || es > 4) fail("ldmatrix", "ptr: elements of 1, 2 or 4 bytes, got " + pt.str());
  if (trans && es != 2)
    fail("ldmatrix", std::string("trans: transposes 16-bit elements; ") + scalar_name(pt.elem) +
                         " would be split into halves");
  Value i = index_operand(index);
  Type rt = Type::scalar(pt.elem == Scalar::F16 ? Scalar::F16x2 : pt.elem == Scalar::BF16 ? Scalar::BF16x2 : Scalar::U32);
  Inst inst;
  inst.op = Op::Ldmatrix;
  inst.type = rt;
  inst.args = {ptr.id(), i.id()};
  inst.attr.trans = trans;
  inst.nresults = static_cast<uint32_t>(num);
  std::vector<Value> out;
  for (int k = 0; k < num; ++k) {
    uint32_t id = new_value(rt, false);
    if (k == 0) inst.result = id;
    out.emplace_back(this, id, rt);
  }
  current()->insts.push_back(std::move(inst));
  return out;
}

void KernelBuilder::cp_async(Value dst, const AnyOperand& dst_index, Value src, const AnyOperand& src_index,
                             uint32_t bytes, CacheHint hint, Value src_bytes) {
  check(dst, "cp_async");
  check(src, "cp_async");
  Type dt = dst.type(), st = src.type();
  if (!dt.is_shared_ptr() || dt.is_const) fail("cp_async", "dst: a mutable shared-memory pointer, got " + dt.str());
  if (!st.ptr || st.space != Space::Global) fail("cp_async", "src: a global-memory pointer, got " + st.str());
  if (dt.elem != st.elem) fail("cp_async", "dst and src hold different types: " + dt.str() + " and " + st.str());
  if (bytes != 4 && bytes != 8 && bytes != 16) fail("cp_async", "bytes: 4, 8 or 16, got " + std::to_string(bytes));
  if (bytes % scalar_bytes(dt.elem)) fail("cp_async", "bytes: " + std::to_string(bytes) + " is not a whole number of " + scalar_name(dt.elem));
  if (hint != CacheHint::Default && hint != CacheHint::Global)
    fail("cp_async", "hint: CacheHint::Default (.ca) or CacheHint::Global (.cg)");
  if (hint == CacheHint::Global && bytes != 16) fail("cp_async", "hint: .cg copies 16 bytes, got " + std::to_string(bytes));
  Value di = index_operand(dst_index);
  Value si = index_operand(src_index);
  Inst inst;
  inst.op = Op::CpAsync;
  inst.args = {dst.id(), di.id(), src.id(), si.id()};
  if (src_bytes.valid()) {
    check(src_bytes, "cp_async");
    if (!(src_bytes.type() == Type::scalar(Scalar::U32)))
      fail("cp_async", "src_bytes: the bytes to read are a u32, got " + src_bytes.type().str());
    inst.args.push_back(src_bytes.id());
  }
  inst.attr.count = bytes;
  inst.attr.hint = hint;
  current()->insts.push_back(std::move(inst));
}

void KernelBuilder::cp_async_commit_group() {
  ensure_open("cp_async_commit_group");
  emit(Op::CpAsyncCommit, Type{}, {}, {}, false);
}

void KernelBuilder::cp_async_wait_group(uint32_t pending) {
  ensure_open("cp_async_wait_group");
  if (pending > 15) fail("cp_async_wait_group", "pending: at most 15 groups may stay in flight, got " + std::to_string(pending));
  Attrs a;
  a.count = pending;
  emit(Op::CpAsyncWait, Type{}, {}, a, false);
}

}  // namespace kaio::ir
