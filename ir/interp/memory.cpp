// Interpreter: global memory. p[i] is the address p + i * sizeof(elem) computed in 64 bits
// (the index sign- or zero-extended by its type), as the codegen does. Every access of an
// active lane is checked against the allocation its pointer points into: a pointer outside
// every allocation known to the launch, or an element outside the pointer's allocation,
// stops the launch with a UsageError naming the kernel, the op, the block and thread, the
// index and the address. Vector accesses (load_vec / store_vec) must also be aligned to
// their size (width * element size), as on the GPU.
//
// Shared memory (Type::space == Shared): a pointer is an offset in the block's window and
// p[i] is (u32)(p + i * sizeof(elem)), as the codegen's mad.lo.u32. Each access is checked
// against its shared array (out of bounds), then against the per-byte shadow: a load of a
// byte no thread of this block has stored, or a race (another thread stored the byte since
// the last barrier, or - for a store - another thread loaded or stored it) stops the launch
// with a UsageError naming the kernel, the op, the block and thread(s), the index and the
// shared address. Atomics are not races: they check bounds and initialization (exch may
// initialize) and mark the bytes initialized.
//
// Atomics on global memory are real host atomics (blocks run on several host threads);
// on shared memory one host thread runs the block, so they are plain read-modify-writes.
#include <cinttypes>
#include <atomic>
#include <cstdio>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp::impl {

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string value_desc(const Kernel::Data& k, uint32_t id) {
  std::string s = "%" + std::to_string(id);
  if (!k.value_name(id).empty()) s += " ('" + k.value_name(id) + "')";
  return s;
}

[[noreturn]] void out_of_bounds(Warp& w, const PInst& p, int lane, uint64_t ptr, uint64_t index_slot, uint64_t addr,
                                uint64_t esize, const LRegion* rg, bool store_to_readonly = false) {
  const Kernel::Data& k = *w.L->k;
  const Inst& i = *p.src;
  Type pt = k.values[i.args[0]].type;
  Type it = k.values[i.args[1]].type;
  std::string idx = it.is_signed() ? std::to_string(static_cast<int64_t>(index_slot)) : std::to_string(index_slot);
  std::string what = std::string(op_name(i.op)) + " " + value_desc(k, i.args[0]) + "[" + idx +
                     "] (" + pt.str() + "; pointer " + hex(ptr) + ", element address " + hex(addr) + ")";
  std::string msg;
  if (!rg) {
    msg = "out-of-bounds " + what + ": the pointer is not inside any allocation known to the interpreter";
  } else if (store_to_readonly) {
    msg = what + ": the allocation is read-only (a const host buffer)";
  } else {
    uint64_t elems = (rg->end - rg->base) / esize;
    int64_t rel = static_cast<int64_t>(addr - rg->base);
    std::string pos = rel < 0 ? "before the start" : "past the end";
    msg = "out-of-bounds " + what + ": index " + idx + " is " + pos + " of its allocation of " + std::to_string(elems) +
          " elements (" + std::to_string(rg->end - rg->base) + " bytes at " + hex(rg->base) + ")";
  }
  w.fail(p, lane, msg);
}

template <Scalar S>
constexpr uint64_t elem_size() {
  if constexpr (S == Scalar::Pred) return 1;
  else if constexpr (is_half_scalar(S)) return 2;
  else return sizeof(typename V<S>::C);
}

template <Scalar S>
inline uint64_t checked_address(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, bool store) {
  constexpr uint64_t es = elem_size<S>();
  uint64_t addr = ptr + index * es;  // wraps like mul.wide / mul.lo + add
  const LRegion* rg = w.region_of(ptr);
  if (!rg || addr < rg->base || addr > rg->end - es || rg->end - rg->base < es) out_of_bounds(w, p, l, ptr, index, addr, es, rg);
  if (store && !rg->writable) out_of_bounds(w, p, l, ptr, index, addr, es, rg, true);
  return addr;
}

template <Scalar S>
inline uint64_t read_elem(uint64_t addr) {
  using T = V<S>;
  if constexpr (S == Scalar::Pred) {
    uint8_t b;
    std::memcpy(&b, reinterpret_cast<const void*>(addr), 1);
    return b != 0;
  } else if constexpr (is_half_scalar(S)) {
    uint16_t h;
    std::memcpy(&h, reinterpret_cast<const void*>(addr), 2);
    return h;
  } else {
    typename T::C v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
    return T::put(v);
  }
}

template <Scalar S>
inline void write_elem(uint64_t addr, uint64_t x) {
  using T = V<S>;
  if constexpr (S == Scalar::Pred) {
    uint8_t b = x & 1;
    std::memcpy(reinterpret_cast<void*>(addr), &b, 1);
  } else if constexpr (is_half_scalar(S)) {
    uint16_t h = static_cast<uint16_t>(x);
    std::memcpy(reinterpret_cast<void*>(addr), &h, 2);
  } else {
    typename T::C v = T::get(x);
    std::memcpy(reinterpret_cast<void*>(addr), &v, sizeof v);
  }
}


template <Scalar S>
inline uint64_t checked_span(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, bool store, uint64_t width) {
  constexpr uint64_t es = elem_size<S>();
  const uint64_t span = es * width;
  uint64_t addr = ptr + index * es;
  const LRegion* rg = w.region_of(ptr);
  if (!rg || addr < rg->base || rg->end - rg->base < span || addr > rg->end - span)
    out_of_bounds(w, p, l, ptr, index, addr, es, rg);
  if (store && !rg->writable) out_of_bounds(w, p, l, ptr, index, addr, es, rg, true);
  return addr;
}

[[noreturn]] void misaligned(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint64_t addr, uint64_t span,
                             bool shared) {
  const Kernel::Data& k = *w.L->k;
  const Inst& i = *p.src;
  Type pt = k.values[i.args[0]].type;
  Type it = k.values[i.args[1]].type;
  std::string idx = it.is_signed() ? std::to_string(static_cast<int64_t>(index)) : std::to_string(index);
  w.fail(p, l,
         std::string("misaligned ") + op_name(i.op) + " " + value_desc(k, i.args[0]) + "[" + idx + "] (" + pt.str() +
             "; pointer " + hex(ptr) + ", " + (shared ? "shared address " : "element address ") + hex(addr) +
             "): " + (i.op == Op::LoadVec || i.op == Op::StoreVec ? "a vector access of " : "an access of ") +
             std::to_string(span) + " bytes needs an address aligned to " + std::to_string(span) + " bytes" +
             (i.op == Op::LoadVec || i.op == Op::StoreVec
                  ? " (use load_vec_checked when the index may not be a multiple of the width)"
                  : ""));
}

// ---------------- shared memory ----------------

std::string shared_array_desc(const Kernel::Data& k, const SharedRegion& r) {
  if (r.value == kNoValue) return "the dynamic shared memory (" + std::to_string(r.bytes) + " bytes)";
  return "shared array " + value_desc(k, r.value) + " (" + std::to_string(r.bytes / scalar_bytes(r.elem)) + " x " +
         scalar_name(r.elem) + ")";
}

const SharedRegion* shared_region_of(const BlockCtx& B, uint64_t ptr) {
  for (const SharedRegion& r : B.regions)
    if (ptr >= r.offset && (ptr < uint64_t(r.offset) + r.bytes || ptr == r.offset)) return &r;
  return nullptr;
}

std::string thread_desc(const Warp& w, uint32_t linear) {
  const Extent& b = w.L->shape.block;
  auto s = [](uint64_t v) { return std::to_string(v); };
  return "thread (" + s(linear % b.x) + ", " + s((linear / b.x) % b.y) + ", " + s(linear / (b.x * b.y)) + ")";
}

// "load %4[7] (ptr<shared f32>; shared address 0x1c)"
std::string shared_access(const Warp& w, const PInst& p, uint64_t index, uint32_t addr) {
  const Kernel::Data& k = *w.L->k;
  const Inst& i = *p.src;
  Type pt = k.values[i.args[0]].type;
  Type it = k.values[i.args[1]].type;
  std::string idx = it.is_signed() ? std::to_string(static_cast<int64_t>(index)) : std::to_string(index);
  return std::string(op_name(i.op)) + " " + value_desc(k, i.args[0]) + "[" + idx + "] (" + pt.str() +
         "; shared address " + hex(addr) + ")";
}

[[noreturn]] void shared_oob(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint32_t addr, uint32_t es,
                             const SharedRegion* r) {
  const Kernel::Data& k = *w.L->k;
  std::string what = shared_access(w, p, index, addr);
  if (!r) w.fail(p, l, "out-of-bounds shared " + what + ": the pointer " + hex(ptr) + " is not a shared array of this launch");
  Type it = k.values[p.src->args[1]].type;
  std::string idx = it.is_signed() ? std::to_string(static_cast<int64_t>(index)) : std::to_string(index);
  std::string pos = addr < r->offset ? "before the start" : "past the end";
  w.fail(p, l,
         "out-of-bounds shared " + what + ": index " + idx + " is " + pos + " of " + shared_array_desc(k, *r) + ", " +
             std::to_string(r->bytes / es) + " elements (" + std::to_string(r->bytes) + " bytes at shared offset " +
             hex(r->offset) + ")");
}

// The byte offset of ptr[index .. index + width) in the shared window, bounds-checked.
template <Scalar S>
inline uint32_t shared_address(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint32_t width = 1) {
  constexpr uint32_t es = static_cast<uint32_t>(elem_size<S>());
  uint32_t addr = static_cast<uint32_t>(ptr) + static_cast<uint32_t>(index) * es;  // mad.lo.u32
  const SharedRegion* r = shared_region_of(*w.B, ptr);
  if (!r || addr < r->offset || uint64_t(addr) + uint64_t(es) * width > uint64_t(r->offset) + r->bytes)
    shared_oob(w, p, l, ptr, index, addr, es, r);
  return addr;
}

[[noreturn]] void shared_uninit(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t byte) {
  w.fail(p, l,
         "read of uninitialized shared memory: " + shared_access(w, p, index, addr) + ": no thread of this block has " +
             "stored byte " + hex(byte) + " yet");
}

[[noreturn]] void shared_race(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t byte,
                              bool other_stored, uint16_t other) {
  std::string who = other == kManyReaders ? "several other threads" : thread_desc(w, other);
  w.fail(p, l,
         "race on shared memory: " + shared_access(w, p, index, addr) + " and " + (other_stored ? "a store" : "a load") +
             " by " + who + " touch shared byte " + hex(byte) + " with no barrier between them");
}

[[noreturn]] void shared_async_busy(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t byte) {
  w.fail(p, l,
         "shared memory still being written by a cp.async: " + shared_access(w, p, index, addr) + " touches byte " +
             hex(byte) + " before the cp_async_wait_group that covers the copy (and, for another thread's copy, a "
             "barrier after it)");
}

inline void check_async_busy(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t n) {
  const BlockCtx& B = *w.B;
  if (B.async_inflight == 0) return;
  for (uint32_t k = 0; k < n; ++k)
    if (B.async_busy[addr + k]) shared_async_busy(w, p, l, index, addr, addr + k);
}

inline void shadow_read(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t n) {
  BlockCtx& B = *w.B;
  check_async_busy(w, p, l, index, addr, n);
  const uint16_t me = static_cast<uint16_t>(w.index * kLanes + l);
  ShadowByte* s = B.shadow.data() + addr;
  for (uint32_t k = 0; k < n; ++k) {
    ShadowByte& b = s[k];
    if (b.init != B.gen) shared_uninit(w, p, l, index, addr, addr + k);
    if (b.wep == B.epoch && b.writer != me) shared_race(w, p, l, index, addr, addr + k, true, b.writer);
    if (b.rep != B.epoch) {
      b.rep = B.epoch;
      b.reader = me;
    } else if (b.reader != me) {
      b.reader = kManyReaders;
    }
  }
}

inline void shadow_write(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t n) {
  BlockCtx& B = *w.B;
  check_async_busy(w, p, l, index, addr, n);
  const uint16_t me = static_cast<uint16_t>(w.index * kLanes + l);
  ShadowByte* s = B.shadow.data() + addr;
  for (uint32_t k = 0; k < n; ++k) {
    ShadowByte& b = s[k];
    if (b.wep == B.epoch && b.writer != me) shared_race(w, p, l, index, addr, addr + k, true, b.writer);
    if (b.rep == B.epoch && b.reader != me) shared_race(w, p, l, index, addr, addr + k, false, b.reader);
    b.init = B.gen;
    b.wep = B.epoch;
    b.writer = me;
  }
}

}  // namespace

uint32_t shared_span(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint32_t es, uint32_t n,
                     uint32_t align, ShadowUse use) {
  uint32_t addr = static_cast<uint32_t>(ptr) + static_cast<uint32_t>(index) * es;  // mad.lo.u32
  const SharedRegion* r = shared_region_of(*w.B, ptr);
  if (!r || addr < r->offset || uint64_t(addr) + n > uint64_t(r->offset) + r->bytes) shared_oob(w, p, l, ptr, index, addr, es, r);
  if (addr % align) misaligned(w, p, l, ptr, index, addr, align, true);
  if (use == ShadowUse::Store) shadow_write(w, p, l, index, addr, n);
  else shadow_read(w, p, l, index, addr, n);
  return addr;
}

namespace {

// ---------------- executors ----------------

template <Scalar S>
void load_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  for_active(w.active, [&](int l) { d[l] = read_elem<S>(checked_address<S>(w, p, l, P[l], I[l], false)); });
}

template <Scalar S>
void store_fn(Warp& w, const PInst& p) {
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const uint64_t* X = w.slot(p.c);
  for_active(w.active, [&](int l) { write_elem<S>(checked_address<S>(w, p, l, P[l], I[l], true), X[l]); });
}

template <Scalar S>
void shared_load_fn(Warp& w, const PInst& p) {
  constexpr uint32_t es = static_cast<uint32_t>(elem_size<S>());
  uint64_t* d = w.slot(p.dst);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  uint8_t* base = w.B->shared.data();
  for_active(w.active, [&](int l) {
    uint32_t addr = shared_address<S>(w, p, l, P[l], I[l]);
    shadow_read(w, p, l, I[l], addr, es);
    d[l] = read_elem<S>(reinterpret_cast<uint64_t>(base + addr));
  });
}

template <Scalar S>
void shared_store_fn(Warp& w, const PInst& p) {
  constexpr uint32_t es = static_cast<uint32_t>(elem_size<S>());
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const uint64_t* X = w.slot(p.c);
  uint8_t* base = w.B->shared.data();
  for_active(w.active, [&](int l) {
    uint32_t addr = shared_address<S>(w, p, l, P[l], I[l]);
    shadow_write(w, p, l, I[l], addr, es);
    write_elem<S>(reinterpret_cast<uint64_t>(base + addr), X[l]);
  });
}

// Host address of a vector access of `width` elements at ptr[index]: bounds, alignment
// (the access size) and, in shared memory, the initialized/race shadow.
template <Scalar S, bool Shared, bool Store>
uint64_t vec_address(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, uint32_t width) {
  constexpr uint64_t es = elem_size<S>();
  if constexpr (Shared) {
    uint32_t a = shared_address<S>(w, p, l, ptr, index, width);
    if (a % (es * width)) misaligned(w, p, l, ptr, index, a, es * width, true);
    if constexpr (Store) shadow_write(w, p, l, index, a, static_cast<uint32_t>(es * width));
    else shadow_read(w, p, l, index, a, static_cast<uint32_t>(es * width));
    return reinterpret_cast<uint64_t>(w.B->shared.data() + a);
  } else {
    uint64_t addr = checked_span<S>(w, p, l, ptr, index, Store, width);
    if (addr % (es * width)) misaligned(w, p, l, ptr, index, addr, es * width, false);
    return addr;
  }
}

// Vectors: results in dst .. dst + width - 1; stored values in the IR's args[2 ..].
template <Scalar S, bool Shared>
void load_vec_fn(Warp& w, const PInst& p) {
  constexpr uint64_t es = elem_size<S>();
  const uint32_t width = p.src->nresults;
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  for_active(w.active, [&](int l) {
    uint64_t addr = vec_address<S, Shared, false>(w, p, l, P[l], I[l], width);
    for (uint32_t k = 0; k < width; ++k) w.slot(p.dst + k)[l] = read_elem<S>(addr + k * es);
  });
}

template <Scalar S, bool Shared>
void store_vec_fn(Warp& w, const PInst& p) {
  constexpr uint64_t es = elem_size<S>();
  const uint32_t width = static_cast<uint32_t>(p.src->args.size() - 2);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const auto& args = p.src->args;
  for_active(w.active, [&](int l) {
    uint64_t addr = vec_address<S, Shared, true>(w, p, l, P[l], I[l], width);
    for (uint32_t k = 0; k < width; ++k) write_elem<S>(addr + k * es, w.slot(args[2 + k])[l]);
  });
}

// ---------------- atomics ----------------

template <Scalar S>
using Bits = std::conditional_t<elem_size<S>() == 8, uint64_t, uint32_t>;

// The new value of an atomic read-modify-write: old op v (slot representation in, bits out).
template <Scalar S>
inline Bits<S> rmw(AtomicOp op, Bits<S> old_bits, uint64_t v) {
  using T = V<S>;
  using C = typename T::C;
  C old;
  std::memcpy(&old, &old_bits, sizeof old);
  C x = T::get(v);
  C r = x;
  switch (op) {
    case AtomicOp::Add:
      if constexpr (std::is_floating_point_v<C>) r = old + x;
      else r = static_cast<C>(static_cast<Bits<S>>(old) + static_cast<Bits<S>>(x));
      break;
    case AtomicOp::Min: r = x < old ? x : old; break;
    case AtomicOp::Max: r = old < x ? x : old; break;
    case AtomicOp::Exch: r = x; break;
  }
  Bits<S> out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

template <Scalar S>
inline uint64_t bits_to_slot(Bits<S> b) {
  typename V<S>::C c;
  std::memcpy(&c, &b, sizeof c);
  return V<S>::put(c);
}
template <Scalar S>
inline Bits<S> slot_to_bits(uint64_t x) {
  typename V<S>::C c = V<S>::get(x);
  Bits<S> b;
  std::memcpy(&b, &c, sizeof b);
  return b;
}

// Shared atomics: bounds, initialization (an exch may initialize), then mark initialized.
inline void shadow_atomic(Warp& w, const PInst& p, int l, uint64_t index, uint32_t addr, uint32_t n, bool needs_init) {
  BlockCtx& B = *w.B;
  ShadowByte* s = B.shadow.data() + addr;
  for (uint32_t k = 0; k < n; ++k) {
    if (needs_init && s[k].init != B.gen) shared_uninit(w, p, l, index, addr, addr + k);
    s[k].init = B.gen;
  }
}

template <Scalar S, bool Shared>
void atomic_fn(Warp& w, const PInst& p) {
  using B = Bits<S>;
  constexpr uint32_t es = sizeof(B);
  const AtomicOp op = p.src->attr.atomic;
  uint64_t* d = w.slot(p.dst);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const uint64_t* X = w.slot(p.c);
  for_active(w.active, [&](int l) {
    if constexpr (Shared) {
      uint32_t a = shared_address<S>(w, p, l, P[l], I[l]);
      shadow_atomic(w, p, l, I[l], a, es, op != AtomicOp::Exch);
      B old;
      std::memcpy(&old, w.B->shared.data() + a, es);
      B nw = rmw<S>(op, old, X[l]);
      std::memcpy(w.B->shared.data() + a, &nw, es);
      d[l] = bits_to_slot<S>(old);
    } else {
      uint64_t addr = checked_address<S>(w, p, l, P[l], I[l], true);
      std::atomic_ref<B> ref(*reinterpret_cast<B*>(addr));
      B old = ref.load(std::memory_order_relaxed);
      if (op == AtomicOp::Exch) {
        old = ref.exchange(slot_to_bits<S>(X[l]), std::memory_order_relaxed);
      } else if constexpr (std::is_integral_v<typename V<S>::C>) {
        if (op == AtomicOp::Add) {
          old = ref.fetch_add(slot_to_bits<S>(X[l]), std::memory_order_relaxed);
        } else {
          while (!ref.compare_exchange_weak(old, rmw<S>(op, old, X[l]), std::memory_order_relaxed)) {
          }
        }
      } else {
        while (!ref.compare_exchange_weak(old, rmw<S>(op, old, X[l]), std::memory_order_relaxed)) {
        }
      }
      d[l] = bits_to_slot<S>(old);
    }
  });
}

// f16x2 / bf16x2 atomic add: each half added in f32 and rounded once.
template <bool BF, bool Shared>
void packed_atomic_add(Warp& w, const PInst& p) {
  auto add = [](uint32_t old, uint64_t x) -> uint32_t {
    auto get = [](uint32_t h) {
      return BF ? kaio::detail::bits_f32(h << 16) : kaio::detail::f16_bits_to_f32(static_cast<uint16_t>(h));
    };
    auto put = [](float f) -> uint32_t { return BF ? kaio::bfloat16(f).bits : kaio::half(f).bits; };
    uint32_t lo = put(get(old & 0xffff) + get(static_cast<uint32_t>(x) & 0xffff));
    uint32_t hi = put(get(old >> 16) + get(static_cast<uint32_t>(x >> 16) & 0xffff));
    return lo | (hi << 16);
  };
  uint64_t* d = w.slot(p.dst);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const uint64_t* X = w.slot(p.c);
  for_active(w.active, [&](int l) {
    uint32_t old;
    if constexpr (Shared) {
      uint32_t a = shared_address<Scalar::U32>(w, p, l, P[l], I[l]);
      shadow_atomic(w, p, l, I[l], a, 4, true);
      std::memcpy(&old, w.B->shared.data() + a, 4);
      uint32_t nw = add(old, X[l]);
      std::memcpy(w.B->shared.data() + a, &nw, 4);
    } else {
      uint64_t addr = checked_address<Scalar::U32>(w, p, l, P[l], I[l], true);
      std::atomic_ref<uint32_t> ref(*reinterpret_cast<uint32_t*>(addr));
      old = ref.load(std::memory_order_relaxed);
      while (!ref.compare_exchange_weak(old, add(old, X[l]), std::memory_order_relaxed)) {
      }
    }
    d[l] = old;
  });
}

// args: ptr, index, compare, value (the value's slot is the IR's args[3]).
template <Scalar S, bool Shared>
void cas_fn(Warp& w, const PInst& p) {
  using B = Bits<S>;
  constexpr uint32_t es = sizeof(B);
  uint64_t* d = w.slot(p.dst);
  const uint64_t* P = w.slot(p.a);
  const uint64_t* I = w.slot(p.b);
  const uint64_t* C = w.slot(p.c);
  const uint64_t* X = w.slot(p.src->args[3]);
  for_active(w.active, [&](int l) {
    B cmp = slot_to_bits<S>(C[l]), nv = slot_to_bits<S>(X[l]);
    if constexpr (Shared) {
      uint32_t a = shared_address<S>(w, p, l, P[l], I[l]);
      shadow_atomic(w, p, l, I[l], a, es, true);
      B old;
      std::memcpy(&old, w.B->shared.data() + a, es);
      if (old == cmp) std::memcpy(w.B->shared.data() + a, &nv, es);
      d[l] = bits_to_slot<S>(old);
    } else {
      uint64_t addr = checked_address<S>(w, p, l, P[l], I[l], true);
      std::atomic_ref<B> ref(*reinterpret_cast<B*>(addr));
      B expected = cmp;
      ref.compare_exchange_strong(expected, nv, std::memory_order_relaxed);
      d[l] = bits_to_slot<S>(expected);
    }
  });
}

}  // namespace

ExecFn packed_atomic_add_fn(bool bf, bool shared) {
  return bf ? (shared ? &packed_atomic_add<true, true> : &packed_atomic_add<true, false>)
            : (shared ? &packed_atomic_add<false, true> : &packed_atomic_add<false, false>);
}

namespace {

// ---- mbarriers ----
// The interpreter's model of the 8-byte mbarrier object (its layout on the GPU is opaque):
// bits 0..19 pending arrivals, 20..39 the expected count, 40..62 pending transaction bytes,
// bit 63 the phase. A phase completes when no arrival and no transaction byte is pending;
// its completion orders every shared access before it with every access after it (the
// race detector's epoch advances), as the acquire/release semantics of the wait do.
namespace mbar {
constexpr uint64_t kCount = (uint64_t(1) << 20) - 1;
constexpr uint64_t kTx = (uint64_t(1) << 23) - 1;
inline uint64_t pending(uint64_t s) { return s & kCount; }
inline uint64_t expected(uint64_t s) { return (s >> 20) & kCount; }
inline uint64_t tx(uint64_t s) { return (s >> 40) & kTx; }
inline uint64_t phase(uint64_t s) { return s >> 63; }
inline uint64_t make(uint64_t pend, uint64_t exp, uint64_t t, uint64_t ph) { return pend | exp << 20 | t << 40 | ph << 63; }
}  // namespace mbar

uint64_t* mbar_word(Warp& w, const PInst& p, int l, uint64_t ptr, uint64_t index, bool needs_init) {
  uint32_t a = shared_address<Scalar::U64>(w, p, l, ptr, index);
  shadow_atomic(w, p, l, index, a, 8, needs_init);
  return reinterpret_cast<uint64_t*>(w.B->shared.data() + a);  // 8-aligned: shared arrays are 16-aligned
}

void mbar_arrive(Warp& w, uint64_t* word, uint64_t tx_bytes) {
  uint64_t s = *word;
  uint64_t t = mbar::tx(s) + tx_bytes, pend = mbar::pending(s);
  if (pend > 0) --pend;
  if (pend == 0 && t == 0) {  // the phase completes
    s = mbar::make(mbar::expected(s), mbar::expected(s), 0, mbar::phase(s) ^ 1);
    ++w.B->epoch;
  } else {
    s = mbar::make(pend, mbar::expected(s), t & mbar::kTx, mbar::phase(s));
  }
  *word = s;
  ++w.B->events;
}

void mbar_init_fn(Warp& w, const PInst& p) {
  const uint64_t *P = w.slot(p.a), *I = w.slot(p.b), *C = w.slot(p.c);
  for_active(w.active, [&](int l) {
    uint64_t n = C[l] & 0xffffffffu;
    if (n == 0 || n > mbar::kCount) w.fail(p, l, "mbarrier_init count " + std::to_string(n) + " is not in 1..1048575");
    *mbar_word(w, p, l, P[l], I[l], false) = mbar::make(n, n, 0, 0);
    ++w.B->events;
  });
}

template <bool Tx>
void mbar_arrive_fn(Warp& w, const PInst& p) {
  const uint64_t *P = w.slot(p.a), *I = w.slot(p.b);
  for_active(w.active, [&](int l) {
    uint64_t* word = mbar_word(w, p, l, P[l], I[l], true);
    if (mbar::pending(*word) == 0) w.fail(p, l, "mbarrier arrival with no arrival pending in this phase (more arrivals than its count)");
    mbar_arrive(w, word, Tx ? (w.slot(p.c)[l] & 0xffffffffu) : 0);
  });
}

void mbar_try_wait_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t *P = w.slot(p.a), *I = w.slot(p.b), *Q = w.slot(p.c);
  bool all = true;
  for_active(w.active, [&](int l) {
    uint64_t* word = mbar_word(w, p, l, P[l], I[l], true);
    d[l] = mbar::phase(*word) != (Q[l] & 1);  // the phase with this parity has completed
    all = all && d[l];
  });
  if (!all) w.yielded = true;  // spinning: let the warps that will complete the phase run
}

void shared_addr_fn(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t *P = w.slot(p.a), *I = w.slot(p.b);
  const uint64_t es = static_cast<uint64_t>(scalar_bytes(w.L->k->values[p.src->args[0]].type.elem));
  for (int l = 0; l < kLanes; ++l) d[l] = static_cast<uint32_t>(P[l] + I[l] * es);  // mad.lo.u32
}

}  // namespace

ExecFn pick_mbarrier(const Kernel::Data&, const Inst& i) {
  switch (i.op) {
    case Op::MbarInit: return &mbar_init_fn;
    case Op::MbarArrive: return &mbar_arrive_fn<false>;
    case Op::MbarExpectTx: return &mbar_arrive_fn<true>;
    case Op::MbarTryWait: return &mbar_try_wait_fn;
    default: return nullptr;
  }
}

ExecFn pick_memory(const Kernel::Data& k, const Inst& i) {
  if (i.args.size() < 2) return nullptr;
  if (i.op == Op::SharedAddr) return &shared_addr_fn;
  Type pt = k.values[i.args[0]].type;
  if (!pt.ptr) return nullptr;
  const bool sh = pt.space == Space::Shared;
  switch (i.op) {
    case Op::Load:
      return with_scalar(pt.elem, [&]<Scalar S>() -> ExecFn { return sh ? &shared_load_fn<S> : &load_fn<S>; });
    case Op::Store:
      return with_scalar(pt.elem, [&]<Scalar S>() -> ExecFn { return sh ? &shared_store_fn<S> : &store_fn<S>; });
    case Op::LoadVec:
      return with_scalar(pt.elem, [&]<Scalar S>() -> ExecFn {
        return sh ? &load_vec_fn<S, true> : &load_vec_fn<S, false>;
      });
    case Op::StoreVec:
      return with_scalar(pt.elem, [&]<Scalar S>() -> ExecFn {
        return sh ? &store_vec_fn<S, true> : &store_vec_fn<S, false>;
      });
    case Op::AtomicRmw: case Op::AtomicCas: {
      int bytes = scalar_bytes(pt.elem);
      if (bytes != 4 && bytes != 8) return nullptr;
      bool cas = i.op == Op::AtomicCas;
      bool packed = pt.elem == Scalar::F16x2 || pt.elem == Scalar::BF16x2;
      if (packed && !cas && i.attr.atomic == AtomicOp::Add)
        return packed_atomic_add_fn(pt.elem == Scalar::BF16x2, sh);
      switch (packed ? Scalar::U32 : pt.elem) {
#define KAIO_ATOMIC_PICK(S)                                                                                  \
  case Scalar::S:                                                                                            \
    return cas ? (sh ? &cas_fn<Scalar::S, true> : &cas_fn<Scalar::S, false>)                                 \
               : (sh ? &atomic_fn<Scalar::S, true> : &atomic_fn<Scalar::S, false>);
        KAIO_ATOMIC_PICK(S32)
        KAIO_ATOMIC_PICK(U32)
        KAIO_ATOMIC_PICK(S64)
        KAIO_ATOMIC_PICK(U64)
        KAIO_ATOMIC_PICK(F32)
        KAIO_ATOMIC_PICK(F64)
#undef KAIO_ATOMIC_PICK
        default: return nullptr;
      }
    }
    default: return nullptr;
  }
}

}  // namespace kaio::ir::interp::impl
