// Builder: what tensor-core and warp-specialised kernels need beyond the SIMT language:
// register arrays, shared-memory addresses, by-value parameters, named barriers,
// setmaxnreg, the async-proxy fence and mbarriers.
#include "kaio/ir/builder.h"

namespace kaio::ir {

namespace {
bool power_of_two(uint32_t x) { return x && !(x & (x - 1)); }
}  // namespace

// ---------------- register arrays ----------------

RegArray KernelBuilder::array(Type t, uint32_t n, Value init) {
  check(init, "array");
  if (t.ptr) fail("array", "register arrays hold scalars, not pointers");
  if (n == 0 || n > 1024) fail("array", "a register array holds 1..1024 values, asked for " + std::to_string(n));
  if (!(init.type() == t)) fail("array", "initial value of type " + init.type().str() + " for an array of " + t.str());
  Inst inst;
  inst.op = Op::VarDecl;
  inst.type = t;
  inst.args = {init.id()};
  inst.nresults = n;
  inst.result = new_value(t, true);
  for (uint32_t k = 1; k < n; ++k) new_value(t, true);
  RegArray a(this, inst.result, n, t);
  current()->insts.push_back(std::move(inst));
  return a;
}

Var RegArray::operator[](size_t i) const {
  if (i >= n_)
    b_->fail("array", "index " + std::to_string(i) + " is outside the register array of " + std::to_string(n_) + " values");
  return Var(b_, first_ + static_cast<uint32_t>(i), type_);
}

std::vector<Var> RegArray::vars() const {
  std::vector<Var> out;
  out.reserve(n_);
  for (uint32_t k = 0; k < n_; ++k) out.emplace_back(b_, first_ + k, type_);
  return out;
}

// ---------------- addresses and by-value parameters ----------------

Value KernelBuilder::shared_addr(Value ptr, const AnyOperand& index) {
  check(ptr, "shared_addr");
  if (!ptr.type().is_shared_ptr()) fail("shared_addr", "takes a shared-memory pointer, got " + ptr.type().str());
  Value i = index_operand(index);
  return emit(Op::SharedAddr, Type::scalar(Scalar::U32), {ptr, i});
}

Value KernelBuilder::param_bytes(const std::string& pname, Scalar elem, uint32_t count, uint32_t align) {
  ensure_open("param_bytes");
  if (elem == Scalar::Pred) fail("param_bytes", "parameter '" + pname + "': use u8 elements, not pred");
  uint64_t bytes = uint64_t(count) * scalar_bytes(elem);
  if (count == 0 || bytes > 4096)
    fail("param_bytes", "parameter '" + pname + "': a by-value parameter holds 1..4096 bytes, asked for " + std::to_string(bytes));
  if (!power_of_two(align) || align < static_cast<uint32_t>(scalar_bytes(elem)) || align > 128)
    fail("param_bytes", "parameter '" + pname + "': the alignment must be a power of two from the element size to 128, got " +
                            std::to_string(align));
  Value v = param(pname, Type::pointer(elem, true, Space::Param));
  Param& p = data().params.back();
  p.bytes = static_cast<uint32_t>(bytes);
  p.align = align;
  return v;
}

// ---------------- warp roles ----------------

// bar.sync / bar.arrive on named barrier `id` for `threads` threads (whole warps).
void KernelBuilder::named_barrier(Op op, uint32_t id, uint32_t threads) {
  const char* name = op_name(op);
  ensure_open(name);
  if (id > 15) fail(name, "barrier ids are 0..15, got " + std::to_string(id));
  if (threads == 0 || threads % 32 || threads > 1024)
    fail(name, "a named barrier counts whole warps: 32..1024 threads in steps of 32, got " + std::to_string(threads));
  Attrs a;
  a.id = static_cast<uint8_t>(id);
  a.threads = static_cast<uint16_t>(threads);
  emit(op, Type{}, {}, a, false);
}

void KernelBuilder::barrier(uint32_t id, uint32_t threads) { named_barrier(Op::Barrier, id, threads); }
void KernelBuilder::barrier_arrive(uint32_t id, uint32_t threads) { named_barrier(Op::BarrierArrive, id, threads); }
void KernelBuilder::barrier_unaligned(uint32_t id, uint32_t threads) { named_barrier(Op::BarrierUnaligned, id, threads); }

void KernelBuilder::fence_proxy_async() {
  ensure_open("fence_proxy_async");
  emit(Op::FenceProxyAsync, Type{}, {}, {}, false);
}

void KernelBuilder::grid_dependency_wait() {
  ensure_open("grid_dependency_wait");
  emit(Op::GridDepWait, Type{}, {}, {}, false);
}

void KernelBuilder::launch_dependents() {
  ensure_open("launch_dependents");
  emit(Op::LaunchDependents, Type{}, {}, {}, false);
}

void KernelBuilder::setmaxnreg(uint32_t regs, bool increase) {
  ensure_open("setmaxnreg");
  if (regs < 24 || regs > 256 || regs % 8)
    fail("setmaxnreg", "the register count must be a multiple of 8 in 24..256, got " + std::to_string(regs));
  Attrs a;
  a.regs = static_cast<uint16_t>(regs);
  a.increase = increase;
  emit(Op::SetMaxNReg, Type{}, {}, a, false);
}

// ---------------- mbarriers ----------------

void KernelBuilder::check_mbarrier(const char* op, Value bar) {
  check(bar, op);
  Type t = bar.type();
  if (!t.is_shared_ptr() || t.elem != Scalar::U64)
    fail(op, std::string("an mbarrier is a u64 in shared memory (b.shared<uint64_t>(n)); got ") + t.str());
}

void KernelBuilder::mbarrier_op(Op op, Value bar, const AnyOperand& index, const AnyOperand* count) {
  const char* name = op_name(op);
  check_mbarrier(name, bar);
  Value i = index_operand(index);
  if (!count) {
    emit(op, Type{}, {bar, i}, {}, false);
    return;
  }
  Value c = resolve_literal(*count, Type::scalar(Scalar::U32), name);
  if (!(c.type() == Type::scalar(Scalar::U32))) fail(name, "the count must be u32, got " + c.type().str());
  emit(op, Type{}, {bar, i, c}, {}, false);
}

Value KernelBuilder::mbarrier_try_wait(Value bar, const AnyOperand& index, const AnyOperand& parity) {
  check_mbarrier("mbarrier_try_wait", bar);
  Value i = index_operand(index);
  Value p = resolve_literal(parity, Type::scalar(Scalar::U32), "mbarrier_try_wait");
  if (!p.type().is_int()) fail("mbarrier_try_wait", "the phase parity must be an integer (0 or 1), got " + p.type().str());
  return emit(Op::MbarTryWait, Type::scalar(Scalar::Pred), {bar, i, p});
}

void KernelBuilder::mbarrier_wait(Value bar, const AnyOperand& index, const AnyOperand& parity) {
  Value i = index_operand(index);
  Value p = resolve_literal(parity, Type::scalar(Scalar::U32), "mbarrier_wait");
  while_([&] { return !mbarrier_try_wait(bar, make_operand(i), make_operand(p)); }, [] {});
}

}  // namespace kaio::ir

namespace kaio::ir {

// ---------------- warpgroup MMA ----------------

void KernelBuilder::wgmma_fence() {
  ensure_open("wgmma_fence");
  emit(Op::WgmmaFence, Type{}, {}, {}, false);
}

void KernelBuilder::wgmma_commit_group() {
  ensure_open("wgmma_commit_group");
  emit(Op::WgmmaCommit, Type{}, {}, {}, false);
}

void KernelBuilder::wgmma_wait_group(uint32_t pending) {
  ensure_open("wgmma_wait_group");
  if (pending > 7) fail("wgmma_wait_group", "at most 7 groups may stay pending, asked for " + std::to_string(pending));
  Attrs a;
  a.count = pending;
  emit(Op::WgmmaWait, Type{}, {}, a, false);
}

}  // namespace kaio::ir
