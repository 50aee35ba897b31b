// The fluent kernel builder. Handles (Value, Ref, Var) point back into the builder;
// operators on them append instructions at the builder's insertion point.
//
//   ir::KernelBuilder b("saxpy");
//   auto a = b.param<float>("a");
//   auto x = b.param<const float*>("x");
//   auto y = b.param<float*>("y");
//   auto n = b.param<uint32_t>("n");
//   auto i = b.global_id_x();
//   b.if_(i < n, [&] { y[i] = a * x[i] + y[i]; });
//   ir::Kernel k = b.build();
//
// Every misuse (mixed types without a cast, a store through a const pointer, a value used
// outside the scope that defines it, ...) throws kaio::UsageError naming kernel and op.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kaio/ir/error.h"
#include "kaio/ir/kernel.h"
#include "kaio/ir/mma_layout.h"

namespace kaio::ir {

class KernelBuilder;
class Ref;
class Var;

// An immutable SSA value of the kernel under construction.
class Value {
 public:
  Value() = default;
  Value(KernelBuilder* b, uint32_t id, Type t) : b_(b), id_(id), type_(t) {}
  KernelBuilder* builder() const { return b_; }
  uint32_t id() const { return id_; }
  Type type() const { return type_; }
  bool valid() const { return b_ != nullptr; }

  // Element of a global pointer: p[i] reads, p[i] = v writes.
  template <class I>
  Ref operator[](const I& index) const;

 private:
  KernelBuilder* b_ = nullptr;
  uint32_t id_ = kNoValue;
  Type type_{};
};

// A host literal (1.0f, 3, true) before it takes the type of the value it meets.
struct Literal {
  enum Kind : uint8_t { Bool, Int, UInt, Float } kind;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
};

template <class T>
concept ExprHandle = std::same_as<std::remove_cvref_t<T>, Value> ||
                     std::same_as<std::remove_cvref_t<T>, Ref> ||
                     std::same_as<std::remove_cvref_t<T>, Var>;
template <class T>
concept LiteralLike = std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::half> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::bfloat16> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::fp8_e4m3> ||
                      std::same_as<std::remove_cvref_t<T>, kaio::fp8_e5m2>;
template <class T>
concept Operand = ExprHandle<T> || LiteralLike<T>;

// p[i]: for a pointer to const the element is loaded where the expression stands; for a
// mutable pointer it is loaded at its first read (so `out[i] = v` emits only a store).
class Ref {
 public:
  Ref(Value ptr, Value index);
  Value load() const;
  operator Value() const { return load(); }
  template <Operand T>
  const Ref& operator=(const T& v) const;
  const Ref& operator=(const Ref& v) const;  // out[i] = in[i] stores, never rebinds
  Ref(const Ref&) = default;
  template <Operand T> const Ref& operator+=(const T& v) const;
  template <Operand T> const Ref& operator-=(const T& v) const;
  template <Operand T> const Ref& operator*=(const T& v) const;

  Value ptr() const { return ptr_; }
  Value index() const { return index_; }

 private:
  Value ptr_, index_;
  mutable Value loaded_;
};

// A mutable variable: `auto acc = b.var<float>(0.0f); acc += x[i];`. Reading it yields the
// value it holds at that point of the program.
class Var {
 public:
  Var(KernelBuilder* b, uint32_t id, Type t) : b_(b), id_(id), type_(t) {}
  Var(const Var&) = default;
  Value get() const;
  operator Value() const { return get(); }
  template <Operand T> Var& operator=(const T& v);
  Var& operator=(const Var& v);  // assigns the value, never rebinds
  template <Operand T> Var& operator+=(const T& v);
  template <Operand T> Var& operator-=(const T& v);
  template <Operand T> Var& operator*=(const T& v);
  template <Operand T> Var& operator/=(const T& v);
  Type type() const { return type_; }
  uint32_t id() const { return id_; }
  KernelBuilder* builder() const { return b_; }

 private:
  KernelBuilder* b_;
  uint32_t id_;
  Type type_;
};

// N registers of one type, indexed with C++ (compile-time) indices: acc[3] is a Var. The
// building block for fragments, accumulator tiles and unrolled pipelines; it lives in
// registers (no index is ever computed at run time, so nothing goes to local memory).
//   auto acc = b.array<float>(128, 0.0f);
//   for (int k = 0; k < 128; ++k) acc[k] = ir::fma(a, x, acc[k]);
class RegArray {
 public:
  RegArray(KernelBuilder* b, uint32_t first, uint32_t n, Type t) : b_(b), first_(first), n_(n), type_(t) {}
  Var operator[](size_t i) const;  // UsageError when i >= size()
  size_t size() const { return n_; }
  Type type() const { return type_; }
  uint32_t first_id() const { return first_; }
  std::vector<Var> vars() const;
  // The n registers from `first` on, as an array of their own (the same registers): one
  // mma tile's accumulators inside a larger accumulator array, acc.slice(4 * t, 4).
  RegArray slice(size_t first, size_t n) const;  // UsageError when it does not fit

 private:
  KernelBuilder* b_;
  uint32_t first_, n_;
  Type type_;
};

class IfChain {
 public:
  IfChain(KernelBuilder* b, Block* block, size_t index) : b_(b), block_(block), index_(index) {}
  void else_(const std::function<void()>& body);

 private:
  KernelBuilder* b_;
  Block* block_;
  size_t index_;
};

template <class T>
Literal make_literal(const T& v) {
  using D = std::remove_cvref_t<T>;
  if constexpr (std::same_as<D, bool>) return Literal{Literal::Bool, v ? 1 : 0, v ? 1u : 0u, v ? 1.0 : 0.0};
  else if constexpr (std::same_as<D, kaio::half> || std::same_as<D, kaio::bfloat16> || std::same_as<D, kaio::fp8_e4m3> ||
                     std::same_as<D, kaio::fp8_e5m2>)
    return Literal{Literal::Float, 0, 0, static_cast<double>(static_cast<float>(v))};  // exact
  else if constexpr (std::is_floating_point_v<D>) return Literal{Literal::Float, 0, 0, static_cast<double>(v)};
  else if constexpr (std::is_signed_v<D>) return Literal{Literal::Int, static_cast<int64_t>(v), 0, 0};
  else return Literal{Literal::UInt, 0, static_cast<uint64_t>(v), 0};
}

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  const std::string& name() const;

  // An operand before typing: a kernel value or a host literal.
  struct AnyOperand {
    bool is_value;
    Value value;
    Literal lit;
  };

  // Parameters, in launch order.
  Value param(const std::string& name, Type t);
  template <class T>
  Value param(const std::string& name) { return param(name, type_of<T>()); }

  // A specialization constant: a named compile-time value (a "shape") that enters the key.
  template <HostScalar T>
  Value spec(const std::string& name, T v) { return spec(name, type_of<T>(), make_literal(v)); }
  Value spec(const std::string& name, Type t, Literal v);

  template <HostScalar T>
  Value constant(T v) { return constant(type_of<T>(), make_literal(v), "const"); }
  Value constant(Type t, Literal v, const char* op);

  Value thread_idx_x(), thread_idx_y(), thread_idx_z();
  Value block_idx_x(), block_idx_y(), block_idx_z();
  Value block_dim_x(), block_dim_y(), block_dim_z();
  Value grid_dim_x(), grid_dim_y(), grid_dim_z();
  Value global_id_x(), global_id_y(), global_id_z();  // ctaid * ntid + tid, u32

  template <HostScalar T, Operand I>
  Var var(const I& init) { return var(type_of<T>(), lift(init, type_of<T>(), "var")); }
  Var var(Type t, Value init);
  // A register array of n values, each starting as `init`.
  template <HostScalar T, Operand I>
  RegArray array(uint32_t n, const I& init) { return array(type_of<T>(), n, lift(init, type_of<T>(), "array")); }
  RegArray array(Type t, uint32_t n, Value init);

  // A by-value parameter of count elements (count * sizeof(T) bytes, `align`-aligned), e.g.
  // a 128-byte TMA tensor map: `.param .align 64 .b8 p[128]`. The host passes the bytes
  // (jit::ParamBytes); in the kernel it is a read-only pointer (p[i] loads an element).
  template <HostScalar T>
  Value param_bytes(const std::string& name, uint32_t count, uint32_t align) {
    return param_bytes(name, ScalarOf<T>::value, count, align);
  }
  Value param_bytes(const std::string& name, Scalar elem, uint32_t count, uint32_t align);

  IfChain if_(const Value& cond, const std::function<void()>& then);
  // Half-open counting loop: for (i = lo; i < hi; i += step). Operands share one integer
  // type (literals take it from the others; all literals give s32).
  template <Operand L, Operand H, Operand S>
  void for_(const L& lo, const H& hi, const S& step, const std::function<void(Value)>& body) {
    for_impl(make_operand(lo), make_operand(hi), make_operand(step), body);
  }
  template <Operand L, Operand H>
  void for_(const L& lo, const H& hi, const std::function<void(Value)>& body) {
    for_impl(make_operand(lo), make_operand(hi), make_operand(1), body);
  }
  void while_(const std::function<Value()>& cond, const std::function<void()>& body);
  void return_();

  // ---- shared memory and synchronization ----
  // A static shared array of `count` elements (16-byte aligned). Several may be declared.
  // `align`: the array's byte alignment (16; 128 or 1024 for swizzled tensor-core tiles).
  template <HostScalar T>
  Value shared(uint32_t count, uint32_t align = 16) { return shared(ScalarOf<T>::value, count, align); }
  Value shared(Scalar elem, uint32_t count, uint32_t align = 16);
  // The dynamic shared memory, sized by LaunchConfig::shared_bytes.
  template <HostScalar T>
  Value dynamic_shared(uint32_t align = 16) { return dynamic_shared(ScalarOf<T>::value, align); }
  Value dynamic_shared(Scalar elem, uint32_t align = 16);
  void barrier();                                  // every thread of the block waits here
  // Named barrier `id` (1..15; 0 is the block's) for `threads` threads (whole warps):
  // bar.sync id, threads. It may sit under a warp-role branch (a condition on warp_id()).
  void barrier(uint32_t id, uint32_t threads);
  void barrier_arrive(uint32_t id, uint32_t threads);  // bar.arrive: count this warp, do not wait
  // As barrier(id, threads), for warps that reach it from different instructions (copies of
  // it in an unrolled loop, warps at different steps): barrier.sync id, threads, without
  // .aligned (bar.sync promises that every thread runs the same instruction).
  void barrier_unaligned(uint32_t id, uint32_t threads);
  // Orders this thread's generic-proxy shared-memory writes before later async-proxy
  // accesses (TMA, wgmma): fence.proxy.async.shared::cta (sm_90).
  void fence_proxy_async();
  // Programmatic dependent launch (LaunchConfig::overlap_previous, sm_90+): a kernel launched
  // to overlap the previous one in its stream calls grid_dependency_wait() before it reads
  // anything that kernel writes (it returns once that kernel has completed and its writes
  // are visible); the previous kernel may call launch_dependents() to let the next one start
  // early. On sm_80 targets both are nothing (kernels in a stream never overlap there).
  void grid_dependency_wait();
  void launch_dependents();
  // setmaxnreg.inc / .dec for the executing warpgroup (sm_90a): producer warpgroups give
  // registers to consumer warpgroups.
  void setmaxnreg(uint32_t regs, bool increase);
  // The shared-window address (u32) of ptr[index], for descriptors and mbarriers.
  template <Operand I>
  Value shared_addr(Value ptr, const I& index) { return shared_addr(ptr, make_operand(index)); }
  Value shared_addr(Value ptr, const AnyOperand& index);
  // mbarriers: a u64 in shared memory (b.shared<uint64_t>(n)), addressed as bar[index].
  template <Operand I, Operand C>
  void mbarrier_init(Value bar, const I& index, const C& count) {
    AnyOperand c = make_operand(count);
    mbarrier_op(Op::MbarInit, bar, make_operand(index), &c);
  }
  template <Operand I>
  void mbarrier_arrive(Value bar, const I& index) { mbarrier_op(Op::MbarArrive, bar, make_operand(index), nullptr); }
  // Arrives and announces `bytes` of asynchronous (TMA) transfers for this phase (sm_90).
  template <Operand I, Operand C>
  void mbarrier_arrive_expect_tx(Value bar, const I& index, const C& bytes) {
    AnyOperand c = make_operand(bytes);
    mbarrier_op(Op::MbarExpectTx, bar, make_operand(index), &c);
  }
  // True once the phase with this parity (0 or 1) has completed.
  template <Operand I, Operand P>
  Value mbarrier_try_wait(Value bar, const I& index, const P& parity) {
    return mbarrier_try_wait(bar, make_operand(index), make_operand(parity));
  }
  Value mbarrier_try_wait(Value bar, const AnyOperand& index, const AnyOperand& parity);
  // Spins on mbarrier_try_wait until the phase has completed.
  template <Operand I, Operand P>
  void mbarrier_wait(Value bar, const I& index, const P& parity) {
    mbarrier_wait(bar, make_operand(index), make_operand(parity));
  }
  void mbarrier_wait(Value bar, const AnyOperand& index, const AnyOperand& parity);
  // Warpgroup MMA (sm_90a): acc (N/2 f32 registers) += A (64xK) * B (KxN), A and B in
  // shared memory described by u64 matrix descriptors (wgmma_descriptor). `in` f16 or bf16
  // (K = 16; each operand K-major, or MN-major when a_mn_major / b_mn_major) or f32 as tf32
  // (K = 8, both K-major) or e4m3 / e5m2 (K = 32, both K-major: the transposing forms
  // take 16-bit elements only), or s8 / u8 (K = 32, K-major, into an s32 register array;
  // N 8, 16, 24 or a multiple of 16). Asynchronous: acc may not be touched until
  // wgmma_wait_group covers the committed group.
  void wgmma_fence();
  void wgmma(const RegArray& acc, Value desc_a, Value desc_b, Scalar in, bool a_mn_major = false, bool b_mn_major = false);
  // 8-bit A and B of different formats (e4m3 x e5m2, e5m2 x e4m3, s8 x u8, u8 x s8); K-major operands.
  void wgmma(const RegArray& acc, Value desc_a, Value desc_b, Scalar a_type, Scalar b_type);
  // A from registers (f16 / bf16): a_frag is this thread's 4 f16x2 (bf16x2) registers of
  // the 64 x 16 A slice, in the m16n8k16 A-fragment layout of mma.sync per warp (warp w of
  // the warpgroup holds rows 16w..16w + 15), so an accumulator converted to 16 bits in
  // registers feeds the next MMA (attention's P V). B from shared memory as above. The
  // registers must not change until the group is waited for (values are never rewritten).
  void wgmma(const RegArray& acc, const std::vector<Value>& a_frag, Value desc_b, Scalar in, bool b_mn_major = false);
  // The wgmma matrix descriptor (u64) of the operand tile that starts at ptr[index] in
  // shared memory: start address, leading and stride byte offsets (multiples of 16 below
  // 256 KiB) and the swizzle mode the tile was written with (TMA's swizzle of the same
  // width). A swizzled tile must start on its swizzle's repeat (1024 bytes for 128-byte
  // swizzling): the dynamic shared array must be declared with that alignment.
  template <Operand I>
  Value wgmma_descriptor(Value ptr, const I& index, WgmmaSwizzle swizzle, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    return wgmma_descriptor(ptr, make_operand(index), swizzle, lbo_bytes, sbo_bytes);
  }
  Value wgmma_descriptor(Value ptr, const AnyOperand& index, WgmmaSwizzle swizzle, uint32_t lbo_bytes, uint32_t sbo_bytes);

  // ---- the tensor memory accelerator (sm_90) ----
  // A 128-byte, 64-aligned by-value parameter holding a CUtensorMap (jit::TensorMap).
  Value tensor_map_param(const std::string& name);
  // cp.async.bulk.tensor: the box at `coords` (innermost first, s32 or u32, one per
  // dimension of the map, 1..5) of the tensor `map` describes is copied into shared memory
  // at dst[dst_index] (128-byte aligned), and its bytes complete the transaction count of
  // mbarrier bar[bar_index] (announce them with mbarrier_arrive_expect_tx). Elements outside
  // the tensor arrive as zeros. Issued by one thread.
  // With a cta_mask (u16), the box is multicast: it lands at the same shared offset in every
  // CTA of the cluster whose bit is set, and completes the mbarrier at bar[bar_index] in each.
  template <Operand DI, Operand BI>
  void tma_load(Value dst, const DI& dst_index, Value map, const std::vector<Value>& coords, Value bar, const BI& bar_index,
                Value cta_mask = Value()) {
    tma_load(dst, make_operand(dst_index), map, coords, bar, make_operand(bar_index), cta_mask);
  }
  void tma_load(Value dst, const AnyOperand& dst_index, Value map, const std::vector<Value>& coords, Value bar,
                const AnyOperand& bar_index, Value cta_mask);
  // The TMA store (cp.async.bulk.tensor ... global.shared::cta): the box at `coords` of
  // `map` is written from shared memory at src[src_index] (128-byte aligned, in the map's
  // swizzled layout); elements outside the tensor are not written. Issued by one thread,
  // asynchronously: the shared source must not change until bulk_wait_group(n, true) says
  // it has been read. Shared memory written by the threads needs fence_proxy_async() (and a
  // barrier) before the issuing thread stores it.
  template <Operand SI>
  void tma_store(Value map, const std::vector<Value>& coords, Value src, const SI& src_index) {
    tma_store(map, coords, src, make_operand(src_index));
  }
  void tma_store(Value map, const std::vector<Value>& coords, Value src, const AnyOperand& src_index);
  // cp.async.bulk.commit_group: closes this thread's group of TMA stores issued since the
  // last commit. bulk_wait_group: waits until at most `pending` of its groups are in flight;
  // read_only: only until their shared sources have been read (.read), not their writes done.
  void bulk_commit_group();
  void bulk_wait_group(uint32_t pending, bool read_only);

  // ---- thread-block clusters (sm_90; launched with LaunchConfig::cluster) ----
  // Every thread of every CTA of the cluster arrives and waits (barrier.cluster, release /
  // acquire): e.g. after mbarrier_init, before peers signal them, and before exit while
  // peers may still reach this CTA's shared memory.
  void cluster_sync();
  // Orders this thread's mbarrier_init before cluster peers (and their TMA multicasts) use
  // the barriers: fence.mbarrier_init.release.cluster (then cluster_sync).
  void fence_mbarrier_init();
  // Arrives on the mbarrier at bar[index] in the shared memory of the cluster's CTA of rank
  // cta_rank (u32; mapa + mbarrier.arrive.shared::cluster). The arrive releases at CTA scope:
  // it signals "done with this buffer" and publishes none of this thread's writes to the peer
  // (one that must see them needs a cluster-scope fence first).
  template <Operand I, Operand R>
  void mbarrier_arrive_cluster(Value bar, const I& index, const R& cta_rank) {
    AnyOperand r = make_operand(cta_rank);
    mbarrier_op(Op::MbarArriveCluster, bar, make_operand(index), &r);
  }
  void wgmma_commit_group();
  void wgmma_wait_group(uint32_t pending);
  void fence(FenceScope scope = FenceScope::Gpu);  // orders this thread's memory accesses

  // ---- warp-level tensor cores and asynchronous copies (sm_80; ir/mma_layout.h) ----
  // acc += A * B for one mma.sync shape, executed by the whole warp: acc is a register
  // array of 4 accumulators (f32; s32 for s8), read and written in place; a holds the 4
  // and b the 2 fragment registers of this lane (f16x2 / bf16x2 for f16 / bf16, u32 for
  // s8 - four bytes - and for tf32, which also takes f32), laid out as mma_shape(kind) says.
  void mma_sync(MmaKind kind, const RegArray& acc, const std::vector<Value>& a, const std::vector<Value>& b);
  // ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16: num (1, 2, 4) 8x8 matrices of
  // 16-bit elements from shared memory, executed by the whole warp; each lane passes the
  // address of one matrix row, ptr[index] (16-byte aligned; lanes 8j..8j+7 give the rows of
  // matrix j). Returns num 32-bit registers per lane (f16x2 / bf16x2 for f16 / bf16
  // pointers, u32 otherwise; 8- and 32-bit elements load as pairs of 16-bit halves, without
  // .trans). Layout: LdmatrixLayout in mma_layout.h.
  template <Operand I>
  std::vector<Value> ldmatrix(Value ptr, const I& index, int num, bool trans = false) {
    return ldmatrix(ptr, make_operand(index), num, trans);
  }
  std::vector<Value> ldmatrix(Value ptr, const AnyOperand& index, int num, bool trans);
  // cp.async.{ca|cg}.shared.global: copies `bytes` (4, 8 or 16; .cg: 16) from src[src_index]
  // (global) to dst[dst_index] (shared) asynchronously. With src_bytes (a u32 value, 0..bytes)
  // only that many bytes are read and the rest is zero-filled: src_bytes = 0 reads nothing
  // (out-of-bounds tiles). hint: CacheHint::Default (.ca, L1 and L2) or Global (.cg, L2 only).
  // The copy belongs to this thread's open group: cp_async_commit_group() closes it, and
  // cp_async_wait_group(n) waits until at most n of this thread's groups are in flight; only
  // then may this thread read the bytes (other threads: after a barrier as well).
  template <Operand DI, Operand SI>
  void cp_async(Value dst, const DI& dst_index, Value src, const SI& src_index, uint32_t bytes,
                CacheHint hint = CacheHint::Default, Value src_bytes = Value()) {
    cp_async(dst, make_operand(dst_index), src, make_operand(src_index), bytes, hint, src_bytes);
  }
  void cp_async(Value dst, const AnyOperand& dst_index, Value src, const AnyOperand& src_index, uint32_t bytes,
                CacheHint hint, Value src_bytes);
  void cp_async_commit_group();
  void cp_async_wait_group(uint32_t pending);

  // ---- warp level ----
  Value lane_id();  // 0..31
  Value warp_id();  // linear thread index / 32
  // Reductions over a warp or the whole block; every participating thread gets the result.
  // s32, u32, f32 (f16/bf16 accumulate in f32 and return f32). Block forms must be reached
  // by every thread of the block (they contain barriers).
  Value warp_reduce_sum(Value v), warp_reduce_max(Value v), warp_reduce_min(Value v);
  Value block_reduce_sum(Value v), block_reduce_max(Value v), block_reduce_min(Value v);
  // Block-wide prefix sums in linear thread order.
  Value block_scan_inclusive(Value v), block_scan_exclusive(Value v);

  // ---- kernel attributes ----
  // .maxntid / .minnctapersm: the compiler may use more registers per thread.
  void launch_bounds(uint32_t max_threads_per_block, uint32_t min_blocks_per_sm = 0);
  // .maxnreg: at most `regs` registers per thread (24..255), so that more threads fit on an
  // SM; ptxas spills what does not fit. Part of the IR, so part of the cache key.
  void max_registers(uint32_t regs);
  // Selects .approx forms (div, sqrt, rcp, exp, log, sin, cos, tanh) for this kernel.
  void fast_math(bool on = true);
  bool fast_math_on() const;
  // A comment in the PTX (not part of the cache key).
  void comment(const std::string& text);

  // Verifies and seals the kernel; the builder cannot be used afterwards.
  Kernel build();

  // ---- used by the handles and operators; not needed by kernel authors ----
  template <Operand T>
  static AnyOperand make_operand(const T& v) {
    if constexpr (ExprHandle<T>) return AnyOperand{true, to_value(v), {}};
    else return AnyOperand{false, {}, make_literal(v)};
  }
  static Value to_value(const Value& v) { return v; }
  static Value to_value(const Ref& r) { return r.load(); }
  static Value to_value(const Var& v) { return v.get(); }
  template <Operand T>
  Value lift(const T& v, Type want, const char* op) {
    if constexpr (ExprHandle<T>) return to_value(v);
    else return constant(want, make_literal(v), op);
  }

  Value unary(Op op, Value a);
  Value binary(Op op, const AnyOperand& a, const AnyOperand& b);
  Value select(Value c, const AnyOperand& a, const AnyOperand& b);
  Value fma(const AnyOperand& a, const AnyOperand& b, const AnyOperand& c);
  Value dp4a(Value a, Value b, Value c);
  Value cast(Value v, Type to, Rounding r);
  Value load(Value ptr, Value index, CacheHint hint = CacheHint::Default);
  void store(Value ptr, Value index, const AnyOperand& v, CacheHint hint = CacheHint::Default);
  std::vector<Value> load_vec(Value ptr, Value index, int width, CacheHint hint);
  void store_vec(Value ptr, Value index, const std::vector<Value>& values, CacheHint hint);
  Value atomic(AtomicOp op, Value ptr, Value index, const AnyOperand& v);
  Value atomic_cas(Value ptr, Value index, const AnyOperand& cmp, const AnyOperand& v);
  Value shfl(ShflMode mode, Value v, const AnyOperand& lane, uint32_t width, uint32_t mask);
  Value vote(VoteMode mode, Value p, uint32_t mask);
  Value cast_sat(Value v, Type to, Rounding r);
  Value pack(Value lo, Value hi);
  Value unpack(Value pair, int half);
  // The same 32 bits as another type: u32 <-> f16x2 / bf16x2 (bit tricks on packed halves).
  Value bitcast(Value v, Scalar to);

  Value var_read(const Var& v);
  void var_write(const Var& v, const AnyOperand& val);
  Value index_operand(const AnyOperand& idx);
  void check(const Value& v, const char* op) const;
  [[noreturn, gnu::cold, gnu::noinline]] void bad_value(const Value& v, const char* op) const;
  [[noreturn]] void fail(const char* op, const std::string& msg) const;

 private:
  void for_impl(AnyOperand lo, AnyOperand hi, AnyOperand step, const std::function<void(Value)>& body);
  Value sreg(SpecialReg r);
  Value emit(Op op, Type t, std::initializer_list<Value> args, const Attrs& attr = {}, bool result = true);
  void require_types(const OpDef& d, Type t) const;
  bool const_value(uint32_t id, uint64_t& out) const;
  void check_mbarrier(const char* op, Value bar);
  bool is_tensor_map(Value map);  // a tensor_map_param: 128 bytes by value, 64-byte aligned
  void wgmma_form(const RegArray& acc, Value desc_a, Value desc_b, Scalar in, Scalar in_b, bool a_mn_major, bool b_mn_major);
  void named_barrier(Op op, uint32_t id, uint32_t threads);
  void mbarrier_op(Op op, Value bar, const AnyOperand& index, const AnyOperand* count);
  Value warp_reduce(Op op, Value v);
  Value block_reduce(Op op, Value v);
  Value linear_tid();
  Value warps_in_block();
  Kernel::Data& data();
  uint32_t new_value(Type t, bool is_var);
  // A new instruction at the insertion point, built in place (no temporary to move).
  Inst& append(Op op, Type t);
  Block* current();
  void push_region(Block* blk);
  void pop_region();
  void ensure_open(const char* op) const;
  Value resolve_literal(const AnyOperand& x, Type want, const char* op);
  Type unify(const char* op, const AnyOperand& a, const AnyOperand& b);

  friend class IfChain;
  friend class RegArray;
  struct State;
  std::unique_ptr<State> s_;
};

// ---------------- operators ----------------
#define KAIO_BINOP(sym, OPC)                                                        \
  template <Operand A, Operand B>                                                   \
    requires(ExprHandle<A> || ExprHandle<B>)                                        \
  Value operator sym(const A& a, const B& b) {                                      \
    auto x = KernelBuilder::make_operand(a);                                        \
    auto y = KernelBuilder::make_operand(b);                                        \
    KernelBuilder* kb = x.is_value ? x.value.builder() : y.value.builder();         \
    return kb->binary(Op::OPC, x, y);                                               \
  }
KAIO_BINOP(+, Add)
KAIO_BINOP(-, Sub)
KAIO_BINOP(*, Mul)
KAIO_BINOP(/, Div)
KAIO_BINOP(%, Rem)
KAIO_BINOP(&, And)
KAIO_BINOP(|, Or)
KAIO_BINOP(^, Xor)
KAIO_BINOP(<<, Shl)
KAIO_BINOP(>>, Shr)
KAIO_BINOP(==, Eq)
KAIO_BINOP(!=, Ne)
KAIO_BINOP(<, Lt)
KAIO_BINOP(<=, Le)
KAIO_BINOP(>, Gt)
KAIO_BINOP(>=, Ge)
KAIO_BINOP(&&, And)
KAIO_BINOP(||, Or)
#undef KAIO_BINOP

template <ExprHandle A>
Value operator-(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Neg, v);
}
template <ExprHandle A>
Value operator!(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Not, v);
}
template <ExprHandle A>
Value operator~(const A& a) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->unary(Op::Not, v);
}

#define KAIO_UNARY_FN(fname, OPC)                 \
  template <ExprHandle A>                         \
  Value fname(const A& a) {                       \
    Value v = KernelBuilder::to_value(a);         \
    return v.builder()->unary(Op::OPC, v);        \
  }
KAIO_UNARY_FN(abs, Abs)
KAIO_UNARY_FN(sqrt, Sqrt)
KAIO_UNARY_FN(rsqrt, Rsqrt)
KAIO_UNARY_FN(exp, Exp)
KAIO_UNARY_FN(log, Log)
KAIO_UNARY_FN(tanh, Tanh)
KAIO_UNARY_FN(sin, Sin)
KAIO_UNARY_FN(cos, Cos)
KAIO_UNARY_FN(rcp, Rcp)
KAIO_UNARY_FN(exp2, Exp2)
KAIO_UNARY_FN(log2, Log2)
KAIO_UNARY_FN(erf, Erf)
KAIO_UNARY_FN(floor, Floor)
KAIO_UNARY_FN(ceil, Ceil)
KAIO_UNARY_FN(round, Round)  // half away from zero, as C's round()
KAIO_UNARY_FN(trunc, Trunc)
KAIO_UNARY_FN(rint, Rint)    // half to even
KAIO_UNARY_FN(isnan, IsNan)
KAIO_UNARY_FN(isinf, IsInf)
// Flush-to-zero approximations, whatever fast_math says: rcp_ftz is rcp.approx.ftz.f32
// (<= 1 ulp), exp2_ftz ex2.approx.ftz.f32 (<= 2 ulp); an f32-subnormal operand
// counts as a zero of its sign and a subnormal result becomes one (rcp_ftz(x) = +-inf for
// |x| < 2^-126 and +-0 for |x| > 2^126; exp2_ftz(x) = 0 for x < -126). ptxas emits each as the
// MUFU op alone, without the range fix-ups around the non-flushing forms. f16/bf16 operands
// compute in f32 (a bf16 subnormal is an f32 subnormal, so it is flushed too).
KAIO_UNARY_FN(rcp_ftz, RcpFtz)
KAIO_UNARY_FN(exp2_ftz, Exp2Ftz)
#undef KAIO_UNARY_FN

template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value pow(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::Pow, x, y);
}
// |a| with the sign of b.
template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value copysign(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::CopySign, x, y);
}

// ---- memory with hints, vectors ----
template <Operand I>
Value load(const Value& p, const I& index, CacheHint hint) {
  return p.builder()->load(p, p.builder()->index_operand(KernelBuilder::make_operand(index)), hint);
}
template <Operand I, Operand V>
void store(const Value& p, const I& index, const V& v, CacheHint hint) {
  p.builder()->store(p, p.builder()->index_operand(KernelBuilder::make_operand(index)), KernelBuilder::make_operand(v), hint);
}
// width (2 or 4) consecutive elements from p[index] in one access of up to 16 bytes. The
// address must be aligned to the access: a constant index that is not a multiple of the
// width is rejected when building; at run time a misaligned address faults. Use
// load_vec_checked when alignment is not known.
template <Operand I>
std::vector<Value> load_vec(const Value& p, const I& index, int width, CacheHint hint = CacheHint::Default) {
  return p.builder()->load_vec(p, p.builder()->index_operand(KernelBuilder::make_operand(index)), width, hint);
}
template <Operand I>
void store_vec(const Value& p, const I& index, const std::vector<Value>& values, CacheHint hint = CacheHint::Default) {
  p.builder()->store_vec(p, p.builder()->index_operand(KernelBuilder::make_operand(index)), values, hint);
}

// As load_vec, for indices of unknown alignment (the base pointer must be aligned to the
// vector size, as device allocations are): one vector access when the index is a multiple
// of the width, scalar loads otherwise.
template <Operand I>
std::vector<Value> load_vec_checked(const Value& p, const I& index, int width) {
  KernelBuilder* b = p.builder();
  Value i = b->index_operand(KernelBuilder::make_operand(index));
  Type et = Type::scalar(p.type().elem);
  std::vector<Var> vars;
  for (int k = 0; k < width; ++k) vars.push_back(b->var(et, b->constant(et, Literal{Literal::Int, 0, 0, 0}, "load_vec")));
  Value aligned = (i % width) == 0;
  b->if_(aligned, [&] {
    std::vector<Value> v = b->load_vec(p, i, width, CacheHint::Default);
    for (int k = 0; k < width; ++k) vars[k] = v[k];
  }).else_([&] {
    for (int k = 0; k < width; ++k) {
      Value ik = i + k;
      vars[k] = b->load(p, ik);
    }
  });
  std::vector<Value> out;
  for (auto& v : vars) out.push_back(v.get());
  return out;
}

// Packs two f16 (bf16) values into an f16x2 (bf16x2); unpack_lo/hi take them apart.
template <ExprHandle A, ExprHandle B>
Value pack2(const A& lo, const B& hi) {
  Value l = KernelBuilder::to_value(lo);
  return l.builder()->pack(l, KernelBuilder::to_value(hi));
}
template <ExprHandle A>
Value unpack_lo(const A& pair) {
  Value p = KernelBuilder::to_value(pair);
  return p.builder()->unpack(p, 0);
}
template <ExprHandle A>
Value unpack_hi(const A& pair) {
  Value p = KernelBuilder::to_value(pair);
  return p.builder()->unpack(p, 1);
}

// The 32 bits of a u32, f16x2 or bf16x2 value read as another of these types (no conversion):
// e.g. ir::bitcast((w & 0x000f000fu) | 0x64006400u, Scalar::F16x2) is the f16 pair 1024 + w.
template <ExprHandle A>
Value bitcast(const A& v, Scalar to) {
  Value x = KernelBuilder::to_value(v);
  return x.builder()->bitcast(x, to);
}

// Converts with saturation: integer targets clamp to their range, float targets to [0, 1].
template <HostScalar T, ExprHandle A>
Value cast_sat(const A& a, Rounding r = Rounding::Default) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->cast_sat(v, type_of<T>(), r);
}

template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value min(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::Min, x, y);
}
template <Operand A, Operand B>
  requires(ExprHandle<A> || ExprHandle<B>)
Value max(const A& a, const B& b) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b);
  return (x.is_value ? x.value.builder() : y.value.builder())->binary(Op::Max, x, y);
}
// a * b + c with a single rounding.
template <Operand A, Operand B, Operand C>
Value fma(const A& a, const B& b, const C& c) {
  auto x = KernelBuilder::make_operand(a), y = KernelBuilder::make_operand(b),
       z = KernelBuilder::make_operand(c);
  KernelBuilder* kb = x.is_value ? x.value.builder() : y.is_value ? y.value.builder() : z.value.builder();
  if (!kb) throw UsageError("", "fma", "at least one operand must be a kernel value");
  return kb->fma(x, y, z);
}
// Four-way byte dot product with accumulate (PTX dp4a.s32.s32): a and b each hold four
// s8 values in their bytes; the result is c + a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3,
// wrapping at 32 bits. a, b and c are s32 (a pointer cast or ir::bitcast gives them).
inline Value dp4a(Value a, Value b, Value c) {
  if (!a.builder()) throw UsageError("", "dp4a", "operands must be kernel values");
  return a.builder()->dp4a(a, b, c);
}
template <ExprHandle C, Operand A, Operand B>
Value select(const C& cond, const A& a, const B& b) {
  Value c = KernelBuilder::to_value(cond);
  return c.builder()->select(c, KernelBuilder::make_operand(a), KernelBuilder::make_operand(b));
}
// Conversion with explicit rounding. Defaults: float->int truncates (rzi), int->float and
// narrowing float conversions round to nearest even (rn).
template <HostScalar T, ExprHandle A>
Value cast(const A& a, Rounding r = Rounding::Default) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->cast(v, type_of<T>(), r);
}
template <ExprHandle A>
Value cast(const A& a, Type to, Rounding r = Rounding::Default) {
  Value v = KernelBuilder::to_value(a);
  return v.builder()->cast(v, to, r);
}

// ---------------- handle templates ----------------
template <class I>
Ref Value::operator[](const I& index) const {
  static_assert(Operand<I>, "kaio: index must be a kernel value or an integer literal");
  if (!b_) throw UsageError("", "index", "indexing an empty Value");
  return Ref(*this, b_->index_operand(KernelBuilder::make_operand(index)));
}

template <Operand T>
const Ref& Ref::operator=(const T& v) const {
  ptr_.builder()->store(ptr_, index_, KernelBuilder::make_operand(v));
  loaded_ = Value();
  return *this;
}
template <Operand T>
const Ref& Ref::operator+=(const T& v) const { return *this = load() + v; }
template <Operand T>
const Ref& Ref::operator-=(const T& v) const { return *this = load() - v; }
template <Operand T>
const Ref& Ref::operator*=(const T& v) const { return *this = load() * v; }

template <Operand T>
Var& Var::operator=(const T& v) {
  b_->var_write(*this, KernelBuilder::make_operand(v));
  return *this;
}
template <Operand T> Var& Var::operator+=(const T& v) { return *this = get() + v; }
template <Operand T> Var& Var::operator-=(const T& v) { return *this = get() - v; }
template <Operand T> Var& Var::operator*=(const T& v) { return *this = get() * v; }
template <Operand T> Var& Var::operator/=(const T& v) { return *this = get() / v; }

}  // namespace kaio::ir

#include "kaio/ir/builder_warp.h"  // shuffles, votes, atomics: after the builder they use
