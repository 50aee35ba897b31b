// Builder: shared memory, synchronization, warp-level ops, atomics, vector memory access
// and kernel attributes.
#include <cmath>
#include <cstdint>

#include "kaio/ir/builder.h"

namespace kaio::ir {

namespace {
bool power_of_two(uint32_t x) { return x && !(x & (x - 1)); }
}  // namespace

// ---------------- shared memory and synchronization ----------------

Value KernelBuilder::shared(Scalar elem, uint32_t count, uint32_t align) {
  ensure_open("shared");
  if (!power_of_two(align) || align < 16 || align > 4096)
    fail("shared", "the alignment of a shared array must be a power of two from 16 to 4096 bytes, got " + std::to_string(align));
  if (elem == Scalar::Pred) fail("shared", "shared arrays of pred are not supported; use u8");
  if (count == 0) fail("shared", "a shared array needs at least one element");
  uint64_t bytes = uint64_t(count) * scalar_bytes(elem);
  if (bytes > (uint64_t(1) << 20)) fail("shared", "shared array of " + std::to_string(bytes) + " bytes is larger than any GPU's shared memory");
  Attrs a;
  a.count = count;
  a.align = static_cast<uint16_t>(align);
  return emit(Op::SharedAlloc, Type::pointer(elem, false, Space::Shared), {}, a);
}

Value KernelBuilder::dynamic_shared(Scalar elem, uint32_t align) {
  ensure_open("dynamic_shared");
  if (!power_of_two(align) || align < 16 || align > 4096)
    fail("dynamic_shared", "the alignment must be a power of two from 16 to 4096 bytes, got " + std::to_string(align));
  if (elem == Scalar::Pred) fail("dynamic_shared", "shared arrays of pred are not supported; use u8");
  Attrs a;
  a.align = static_cast<uint16_t>(align);
  return emit(Op::DynamicShared, Type::pointer(elem, false, Space::Shared), {}, a);
}

void KernelBuilder::barrier() {
  ensure_open("barrier");
  emit(Op::Barrier, Type{}, {}, {}, false);
}

void KernelBuilder::fence(FenceScope scope) {
  ensure_open("fence");
  Attrs a;
  a.scope = scope;
  emit(Op::Fence, Type{}, {}, a, false);
}

// ---------------- warp level ----------------

Value KernelBuilder::lane_id() {
  ensure_open("lane_id");
  Attrs a;
  a.sreg = SpecialReg::LaneId;
  return emit(Op::SReg, Type::scalar(Scalar::U32), {}, a);
}

Value KernelBuilder::linear_tid() {
  Value tx = thread_idx_x(), ty = thread_idx_y(), tz = thread_idx_z();
  Value nx = block_dim_x(), ny = block_dim_y();
  Value yz = tz * ny + ty;
  return yz * nx + tx;
}

Value KernelBuilder::warps_in_block() {
  Value nx = block_dim_x(), ny = block_dim_y(), nz = block_dim_z();
  Value xy = nx * ny;
  Value nthreads = xy * nz;
  return (nthreads + 31u) >> 5u;
}

// The warp's index in the block (linear thread index / 32): one op, so that the divergence
// analysis knows it is the same for every thread of a warp.
Value KernelBuilder::warp_id() {
  ensure_open("warp_id");
  return emit(Op::WarpIndex, Type::scalar(Scalar::U32), {});
}

Value KernelBuilder::shfl(ShflMode mode, Value v, const AnyOperand& lane, uint32_t width, uint32_t mask) {
  check(v, "shfl");
  Type t = v.type();
  if (t.ptr || t.is_pred())
    fail("shfl", "shuffles move integer or floating-point values, not " + t.str() + (t.is_pred() ? "; use vote/ballot" : ""));
  if (!power_of_two(width) || width > 32) fail("shfl", "width must be a power of two <= 32, got " + std::to_string(width));
  if (mask == 0) fail("shfl", "the member mask names no lane");
  Value l = resolve_literal(lane, Type::scalar(Scalar::U32), "shfl");
  if (!(l.type() == Type::scalar(Scalar::U32)))
    fail("shfl", "the lane / delta operand must be u32, got " + l.type().str());
  Attrs a;
  a.shfl = mode;
  a.mask = mask;
  a.width = static_cast<uint8_t>(width);
  return emit(Op::Shfl, t, {v, l}, a);
}

Value KernelBuilder::vote(VoteMode mode, Value p, uint32_t mask) {
  check(p, "vote");
  if (!p.type().is_pred()) fail("vote", "votes take a pred (a comparison), got " + p.type().str());
  if (mask == 0) fail("vote", "the member mask names no lane");
  Type rt = mode == VoteMode::Ballot ? Type::scalar(Scalar::U32) : Type::scalar(Scalar::Pred);
  Attrs a;
  a.vote = mode;
  a.mask = mask;
  return emit(Op::Vote, rt, {p}, a);
}

namespace {
const char* reduce_name(Op op) { return op == Op::Add ? "sum" : op == Op::Max ? "max" : "min"; }
}  // namespace

Value KernelBuilder::warp_reduce(Op op, Value v) {
  check(v, "warp_reduce");
  Type t = v.type();
  if (t.elem == Scalar::F16 || t.elem == Scalar::BF16) {
    v = cast(v, Type::scalar(Scalar::F32), Rounding::Default);  // accumulate in f32
    t = v.type();
  }
  if (t.ptr || !(t.elem == Scalar::S32 || t.elem == Scalar::U32 || t.elem == Scalar::F32))
    fail("warp_reduce", std::string("warp_reduce_") + reduce_name(op) + " supports s32, u32, f32, f16, bf16; got " + t.str());
  // Butterfly: after 5 xor steps every lane holds the result.
  Value acc = v;
  for (uint32_t d = 16; d >= 1; d /= 2) {
    Value other = shfl(ShflMode::Xor, acc, AnyOperand{false, {}, Literal{Literal::UInt, 0, d, 0}}, 32, 0xffffffffu);
    acc = binary(op, AnyOperand{true, acc, {}}, AnyOperand{true, other, {}});
  }
  return acc;
}

Value KernelBuilder::warp_reduce_sum(Value v) { return warp_reduce(Op::Add, v); }
Value KernelBuilder::warp_reduce_max(Value v) { return warp_reduce(Op::Max, v); }
Value KernelBuilder::warp_reduce_min(Value v) { return warp_reduce(Op::Min, v); }

Value KernelBuilder::block_reduce(Op op, Value v) {
  // Each warp reduces; lane 0 of each warp writes its partial to shared memory; after a
  // barrier every warp reduces the partials (at most 32), so every thread has the result.
  Value w = warp_reduce(op, v);
  Type t = w.type();
  Value partials = shared(t.elem, 32);
  Value lane = lane_id();
  Value wid = warp_id();
  if_(lane == 0u, [&] { store(partials, wid, AnyOperand{true, w, {}}); });
  barrier();
  Value nwarps = warps_in_block();
  // Lanes past the warp count read the identity of the operation.
  Literal ident = op == Op::Add ? Literal{Literal::Int, 0, 0, 0}
                  : t.elem == Scalar::F32 ? Literal{Literal::Float, 0, 0, op == Op::Max ? -INFINITY : INFINITY}
                  : t.elem == Scalar::S32 ? Literal{Literal::Int, op == Op::Max ? INT32_MIN : INT32_MAX, 0, 0}
                                          : Literal{Literal::UInt, 0, op == Op::Max ? 0u : 0xffffffffu, 0};
  Var part = var(t, constant(t, ident, "block_reduce"));
  if_(lane < nwarps, [&] {
    Value p = load(partials, lane);
    part = p;
  });
  Value r = warp_reduce(op, part.get());
  barrier();  // the partials may be reused by a following block_reduce
  return r;
}

Value KernelBuilder::block_reduce_sum(Value v) { return block_reduce(Op::Add, v); }
Value KernelBuilder::block_reduce_max(Value v) { return block_reduce(Op::Max, v); }
Value KernelBuilder::block_reduce_min(Value v) { return block_reduce(Op::Min, v); }

Value KernelBuilder::block_scan_inclusive(Value v) {
  check(v, "block_scan");
  Type t = v.type();
  if (t.ptr || !(t.elem == Scalar::S32 || t.elem == Scalar::U32 || t.elem == Scalar::F32))
    fail("block_scan", "block scans support s32, u32, f32; got " + t.str());
  Value lane = lane_id();
  Value wid = warp_id();
  // Warp-level inclusive scan with shfl.up.
  Var x = var(t, v);
  for (uint32_t d = 1; d < 32; d *= 2) {
    Value cur = x.get();
    Value up = shfl(ShflMode::Up, cur, AnyOperand{false, {}, Literal{Literal::UInt, 0, d, 0}}, 32, 0xffffffffu);
    if_(lane >= d, [&] { x = cur + up; });
  }
  Value warp_incl = x.get();
  // Warp totals to shared memory; warp 0 scans them; every warp adds its offset.
  Value totals = shared(t.elem, 32);
  if_(lane == 31u, [&] { store(totals, wid, AnyOperand{true, warp_incl, {}}); });
  barrier();
  Value nwarps = warps_in_block();
  if_(wid == 0u, [&] {
    Var tot = var(t, constant(t, Literal{Literal::Int, 0, 0, 0}, "block_scan"));
    // Only the totals of warps 0 .. nwarps-2 are needed (as offsets of the warps after
    // them); a partial last warp never stored its total, so it must not be read.
    Value last = nwarps - 1u;
    if_(lane < last, [&] {
      Value p = load(totals, lane);
      tot = p;
    });
    for (uint32_t d = 1; d < 32; d *= 2) {
      Value cur = tot.get();
      Value up = shfl(ShflMode::Up, cur, AnyOperand{false, {}, Literal{Literal::UInt, 0, d, 0}}, 32, 0xffffffffu);
      if_(lane >= d, [&] { tot = cur + up; });
    }
    if_(lane < nwarps, [&] { store(totals, lane, AnyOperand{true, tot.get(), {}}); });
  });
  barrier();
  Var offset = var(t, constant(t, Literal{Literal::Int, 0, 0, 0}, "block_scan"));
  if_(wid > 0u, [&] {
    Value prev = wid - 1u;
    Value o = load(totals, prev);
    offset = o;
  });
  Value result = warp_incl + offset.get();
  barrier();  // the totals may be reused by a following scan
  return result;
}

Value KernelBuilder::block_scan_exclusive(Value v) {
  Value incl = block_scan_inclusive(v);
  return incl - v;
}

// ---------------- atomics ----------------

Value KernelBuilder::atomic(AtomicOp op, Value ptr, Value index, const AnyOperand& v) {
  static const char* names[] = {"atomic_add", "atomic_min", "atomic_max", "atomic_exch"};
  const char* name = names[static_cast<int>(op)];
  check(ptr, name);
  check(index, name);
  Type pt = ptr.type();
  if (!pt.ptr) fail(name, "atomics need a pointer, got " + pt.str());
  if (pt.is_const) fail(name, "atomics write: the pointer must not point to const");
  Scalar e = pt.elem;
  bool ok = e == Scalar::S32 || e == Scalar::U32 || e == Scalar::U64 || e == Scalar::F32;
  if (op == AtomicOp::Add) ok = ok || e == Scalar::F64 || e == Scalar::S64 || e == Scalar::F16x2 || e == Scalar::BF16x2;
  if ((op == AtomicOp::Min || op == AtomicOp::Max) && e == Scalar::F32) ok = false;
  if (op == AtomicOp::Exch) ok = ok || e == Scalar::S64 || e == Scalar::F64;
  if (!ok)
    fail(name, std::string(name) + " is not available on " + scalar_name(e) +
                   (e == Scalar::F32 ? " (use atomic_cas for f32 min/max)" : ""));
  Type et = Type::scalar(e);
  if (v.is_value) {
    check(v.value, name);
    if (!(v.value.type() == et)) fail(name, "value of type " + v.value.type().str() + " for " + pt.str());
  }
  Value val = resolve_literal(v, et, name);
  Attrs a;
  a.atomic = op;
  return emit(Op::AtomicRmw, et, {ptr, index, val}, a);
}

Value KernelBuilder::atomic_cas(Value ptr, Value index, const AnyOperand& cmp, const AnyOperand& v) {
  check(ptr, "atomic_cas");
  check(index, "atomic_cas");
  Type pt = ptr.type();
  if (!pt.ptr || pt.is_const) fail("atomic_cas", "atomic_cas needs a pointer to non-const memory, got " + pt.str());
  int bits = scalar_bits(pt.elem);
  if (bits != 32 && bits != 64) fail("atomic_cas", "atomic_cas works on 32- and 64-bit elements, not " + std::string(scalar_name(pt.elem)));
  Type et = Type::scalar(pt.elem);
  for (const AnyOperand* x : {&cmp, &v})
    if (x->is_value && !(x->value.type() == et)) fail("atomic_cas", "operand of type " + x->value.type().str() + " for " + pt.str());
  Value c = resolve_literal(cmp, et, "atomic_cas"), val = resolve_literal(v, et, "atomic_cas");
  return emit(Op::AtomicCas, et, {ptr, index, c, val});
}

// ---------------- vector access ----------------

std::vector<Value> KernelBuilder::load_vec(Value ptr, Value index, int width, CacheHint hint) {
  check(ptr, "load_vec");
  check(index, "load_vec");
  Type pt = ptr.type();
  if (!pt.ptr) fail("load_vec", "indexing needs a pointer, got " + pt.str());
  if (width != 2 && width != 4) fail("load_vec", "vector width must be 2 or 4, got " + std::to_string(width));
  if (width * scalar_bytes(pt.elem) > 16) fail("load_vec", "a vector access moves at most 16 bytes");
  uint64_t c;
  if (const_value(index.id(), c) && c % width)
    fail("load_vec", "index " + std::to_string(c) + " is not a multiple of the vector width " + std::to_string(width) +
                         ": the access would be misaligned");
  if (hint == CacheHint::ReadOnly && !pt.is_const) fail("load_vec", "read-only (.nc) loads need a pointer to const");
  Type et = Type::scalar(pt.elem);
  Inst& inst = append(Op::LoadVec, et);
  inst.args.push_back(ptr.id());
  inst.args.push_back(index.id());
  inst.attr.hint = hint;
  inst.nresults = static_cast<uint32_t>(width);
  std::vector<Value> out;
  out.reserve(width);
  for (int k = 0; k < width; ++k) {
    uint32_t id = new_value(et, false);
    if (k == 0) inst.result = id;
    out.emplace_back(this, id, et);
  }
  return out;
}

void KernelBuilder::store_vec(Value ptr, Value index, const std::vector<Value>& values, CacheHint hint) {
  check(ptr, "store_vec");
  check(index, "store_vec");
  Type pt = ptr.type();
  int width = static_cast<int>(values.size());
  if (!pt.ptr || pt.is_const) fail("store_vec", "store_vec needs a pointer to non-const memory, got " + pt.str());
  if (width != 2 && width != 4) fail("store_vec", "vector width must be 2 or 4, got " + std::to_string(width));
  if (width * scalar_bytes(pt.elem) > 16) fail("store_vec", "a vector access moves at most 16 bytes");
  uint64_t c;
  if (const_value(index.id(), c) && c % width)
    fail("store_vec", "index " + std::to_string(c) + " is not a multiple of the vector width " + std::to_string(width) +
                          ": the access would be misaligned");
  Type et = Type::scalar(pt.elem);
  for (const Value& v : values) {  // all checks before the instruction is appended
    check(v, "store_vec");
    if (!(v.type() == et)) fail("store_vec", "storing a " + v.type().str() + " value into " + pt.str());
  }
  Inst& inst = append(Op::StoreVec, et);
  inst.args.reserve(2 + values.size());
  inst.args.push_back(ptr.id());
  inst.args.push_back(index.id());
  for (const Value& v : values) inst.args.push_back(v.id());
  inst.attr.hint = hint;
  inst.nresults = 0;
}

// ---------------- kernel attributes ----------------

void KernelBuilder::launch_bounds(uint32_t max_threads, uint32_t min_blocks) {
  ensure_open("launch_bounds");
  if (max_threads == 0 || max_threads > 1024) fail("launch_bounds", "max threads per block must be 1..1024");
  data().max_threads = max_threads;
  data().min_blocks = min_blocks;
}

void KernelBuilder::max_registers(uint32_t regs) {
  ensure_open("max_registers");
  if (regs < 24 || regs > 255) fail("max_registers", "the register cap must be 24..255, got " + std::to_string(regs));
  data().max_registers = regs;
}

void KernelBuilder::fast_math(bool on) {
  ensure_open("fast_math");
  data().fast_math = on;
}

void KernelBuilder::comment(const std::string& text) {
  ensure_open("comment");
  if (text.find('\n') != std::string::npos) fail("comment", "a comment is one line");
  data().comments.push_back(text);
  Attrs a;
  a.index = static_cast<uint32_t>(data().comments.size() - 1);
  emit(Op::Comment, Type{}, {}, a, false);
}

}  // namespace kaio::ir
