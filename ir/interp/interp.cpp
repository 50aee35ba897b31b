// Interpreter: the allocation registry, the warp loop (control flow), the block scheduler
// and the host-thread pool, and the entry points. The compiler from the IR tree to the flat
// program and its per-kernel cache are in program.cpp; impl.h describes the program.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "kaio/ir/interp/impl.h"

namespace kaio::ir::interp {

using namespace impl;

// ---------------- allocation registry ----------------

namespace {

struct Registry {
  std::shared_mutex m;
  std::map<uint64_t, uint64_t> allocs;  // base -> bytes
};

Registry& registry() {
  static Registry r;
  return r;
}

bool registry_find(uint64_t ptr, LRegion& out) {
  Registry& r = registry();
  std::shared_lock g(r.m);
  auto it = r.allocs.upper_bound(ptr);
  if (it == r.allocs.begin()) return false;
  --it;
  if (ptr >= it->first + it->second) return false;
  out = LRegion{it->first, it->first + it->second, true};
  return true;
}

}  // namespace

void register_allocation(uint64_t base, uint64_t bytes) {
  if (!bytes) return;
  Registry& r = registry();
  std::unique_lock g(r.m);
  r.allocs[base] = bytes;
}

void unregister_allocation(uint64_t base) {
  Registry& r = registry();
  std::unique_lock g(r.m);
  r.allocs.erase(base);
}

// ---------------- warp diagnostics ----------------

namespace impl {

std::string Warp::where(int lane) const {
  auto s = [](uint64_t v) { return std::to_string(v); };
  return "block (" + s(B->ctaid[0]) + ", " + s(B->ctaid[1]) + ", " + s(B->ctaid[2]) + "), thread (" +
         s(tid[0][lane]) + ", " + s(tid[1][lane]) + ", " + s(tid[2][lane]) + ")";
}

void Warp::fail(const PInst& p, int lane, const std::string& msg) const {
  throw UsageError(L->k->name, p.src ? op_name(p.src->op) : "interpret", "in " + where(lane) + ": " + msg);
}

}  // namespace impl

namespace {

// ---------------- execution ----------------

void copy_all(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  for (int l = 0; l < kLanes; ++l) d[l] = a[l];
}

void copy_masked(Warp& w, const PInst& p) {
  uint64_t* d = w.slot(p.dst);
  const uint64_t* a = w.slot(p.a);
  if (w.active == kFullMask) {
    for (int l = 0; l < kLanes; ++l) d[l] = a[l];
  } else {
    for_active(w.active, [&](int l) { d[l] = a[l]; });
  }
}

// Runs a warp until it ends (done) or reaches a barrier (not done; pc is past the barrier).
void run_warp(Warp& w, const Program& P) {
  const PInst* code = P.code.data();
  uint32_t pc = w.pc;
  uint64_t steps = 0, lanes = 0;
  for (;;) {
    const PInst& p = code[pc];
    ++steps;
    lanes += static_cast<uint64_t>(std::popcount(w.active));
    switch (p.kind) {
      case Kind::Exec:
        w.pc = pc;  // for messages
        p.fn(w, p);
        ++pc;
        if (w.yielded) {  // a failing mbarrier_try_wait: resume after it later
          w.pc = pc;
          w.steps += steps;
          w.lane_steps += lanes;
          return;
        }
        break;
      case Kind::If: {
        uint32_t m = w.mask_of(p.a) & w.active;
        w.saved[p.depth] = w.active;
        w.els[p.depth] = w.active & ~m;
        w.active = m;
        pc = m ? pc + 1 : p.target;
        break;
      }
      case Kind::Else:
        w.active = w.els[p.depth];
        pc = w.active ? pc + 1 : p.target;
        break;
      case Kind::Join:
        w.active = w.saved[p.depth] & ~w.returned;
        pc = w.active ? pc + 1 : p.target;
        break;
      case Kind::Enter:
        w.saved[p.depth] = w.active;
        ++pc;
        break;
      case Kind::Test:
        w.active &= w.mask_of(p.a);
        pc = w.active ? pc + 1 : p.target;
        break;
      case Kind::Jump:
        pc = p.target;
        break;
      case Kind::Return:
        w.returned |= w.active;
        w.active = 0;
        pc = p.target;
        break;
      case Kind::Barrier:
        if (p.b) w.B->bar_arrived[p.a] += kLanes;  // a named barrier counts whole warps
        if (p.c) {                                  // bar.arrive: counted, goes on
          ++pc;
          break;
        }
        // bar.sync: stop here; the block resumes the warp once the barrier completes
        w.bar = static_cast<int>(p.a);
        w.pc = pc + 1;
        w.steps += steps;
        w.lane_steps += lanes;
        return;
      case Kind::End:
        w.pc = pc;
        w.done = true;
        w.steps += steps;
        w.lane_steps += lanes;
        return;
    }
  }
}

// One host thread's state: the register files of a block's warps, reused block after block.
struct Runner {
  const LaunchCtx& L;
  const Program& P;
  uint32_t nthreads = 0, nwarps = 0;
  std::vector<uint64_t> regs;
  std::vector<uint32_t> frames;
  std::vector<Warp> warps;
  BlockCtx block;

  Runner(const LaunchCtx& l, std::span<const uint64_t> params) : L(l), P(*l.prog) {
    const Extent& b = L.shape.block;
    nthreads = static_cast<uint32_t>(b.x * b.y * b.z);
    nwarps = (nthreads + kLanes - 1) / kLanes;
    size_t per_warp = size_t(P.nslots) * kLanes;
    regs.assign(per_warp * nwarps, 0);
    frames.assign(size_t(P.frames) * 2 * nwarps, 0);
    warps.resize(nwarps);
    const uint32_t window = P.static_shared + L.shape.shared_bytes;
    block.shared.assign(window, 0);
    block.shadow.assign(window, ShadowByte{});
    for (const auto& a : P.shared_arrays) block.regions.push_back({a.offset, a.bytes, a.slot, a.elem});
    block.regions.push_back({P.dynamic_offset(), L.shape.shared_bytes, kNoValue, Scalar::U8});
    for (uint32_t wi = 0; wi < nwarps; ++wi) {
      Warp& w = warps[wi];
      w.R = regs.data() + per_warp * wi;
      w.saved = frames.data() + size_t(P.frames) * 2 * wi;
      w.els = w.saved + P.frames;
      w.index = wi;
      w.L = &L;
      w.B = &block;
      for (const auto& c : P.consts) std::fill_n(w.slot(c.slot), kLanes, c.bits);
      for (const auto& pi : P.params) std::fill_n(w.slot(pi.slot), kLanes, normalize(pi.type, params[pi.index]));
      for (const auto& a : P.shared_arrays) std::fill_n(w.slot(a.slot), kLanes, uint64_t(a.offset));
      for (uint32_t s : P.dynamic_slots) std::fill_n(w.slot(s), kLanes, uint64_t(P.dynamic_offset()));
      for (int l = 0; l < kLanes; ++l) {
        uint32_t t = wi * kLanes + l;
        w.tid[0][l] = static_cast<uint32_t>(t % b.x);
        w.tid[1][l] = static_cast<uint32_t>((t / b.x) % b.y);
        w.tid[2][l] = static_cast<uint32_t>(t / (b.x * b.y));
      }
    }
  }

  uint32_t sreg_value(const Warp& w, SpecialReg r, int lane) const {
    const LaunchShape& s = L.shape;
    switch (r) {
      case SpecialReg::TidX: return w.tid[0][lane];
      case SpecialReg::TidY: return w.tid[1][lane];
      case SpecialReg::TidZ: return w.tid[2][lane];
      case SpecialReg::NtidX: return static_cast<uint32_t>(s.block.x);
      case SpecialReg::NtidY: return static_cast<uint32_t>(s.block.y);
      case SpecialReg::NtidZ: return static_cast<uint32_t>(s.block.z);
      case SpecialReg::CtaidX: return block.ctaid[0];
      case SpecialReg::CtaidY: return block.ctaid[1];
      case SpecialReg::CtaidZ: return block.ctaid[2];
      case SpecialReg::NctaidX: return static_cast<uint32_t>(s.grid.x);
      case SpecialReg::NctaidY: return static_cast<uint32_t>(s.grid.y);
      case SpecialReg::NctaidZ: return static_cast<uint32_t>(s.grid.z);
      case SpecialReg::LaneId: return static_cast<uint32_t>(lane);
      default: return 0;
    }
  }

  // Resumes the warps of every barrier that has completed; true when one did.
  bool release_barriers() {
    bool any = false;
    for (uint32_t id = 0; id < kNamedBarriers; ++id) {
      uint32_t parked = 0, live = 0, want = 0;
      for (const Warp& w : warps) {
        if (w.done) continue;
        ++live;
        if (w.bar == static_cast<int>(id)) {
          ++parked;
          want = P.code[w.pc - 1].b;
        }
      }
      if (parked == 0) continue;
      bool complete = want ? block.bar_arrived[id] >= want : parked == live;
      if (!complete) continue;
      if (want) block.bar_arrived[id] -= want;
      for (Warp& w : warps)
        if (w.bar == static_cast<int>(id)) w.bar = -1;
      ++block.epoch;
      any = true;
    }
    return any;
  }

  [[noreturn]] void deadlock() const {
    std::string waits;
    for (const Warp& w : warps) {
      if (w.done) continue;
      waits += waits.empty() ? "" : "; ";
      waits += "warp " + std::to_string(w.index) +
               (w.bar >= 0 ? " waits at barrier " + std::to_string(w.bar) : " spins on an incomplete mbarrier phase");
    }
    throw UsageError(L.k->name, "interpret",
                     "deadlock in block (" + std::to_string(block.ctaid[0]) + ", " + std::to_string(block.ctaid[1]) + ", " +
                         std::to_string(block.ctaid[2]) + "): " + waits +
                         ", and nothing can complete them (the kernel would hang on the GPU)");
  }

  void run_block(uint64_t linear, uint64_t& steps, uint64_t& lane_steps) {
    const Extent& g = L.shape.grid;
    block.ctaid[0] = static_cast<uint32_t>(linear % g.x);
    block.ctaid[1] = static_cast<uint32_t>((linear / g.x) % g.y);
    block.ctaid[2] = static_cast<uint32_t>(linear / (g.x * g.y));
    if (block.epoch > 0xffff0000u) {  // epochs never repeat within a runner: restart the shadow
      std::fill(block.shadow.begin(), block.shadow.end(), ShadowByte{});
      block.epoch = 0;
    }
    block.gen = ++block.epoch;
    if (block.async_inflight) {  // copies of the last block never waited for: dropped
      std::fill(block.async_busy.begin(), block.async_busy.end(), uint8_t{0});
      block.async_inflight = 0;
    }
    for (uint32_t wi = 0; wi < nwarps; ++wi) {
      Warp& w = warps[wi];
      w.copies.clear();
      std::fill_n(w.async_groups, kLanes, 0u);
      uint32_t live = std::min<uint32_t>(kLanes, nthreads - wi * kLanes);
      w.active = live == kLanes ? kFullMask : ((1u << live) - 1);
      w.returned = 0;
      w.pc = 0;
      w.done = false;
      w.last = nullptr;
      w.steps = w.lane_steps = 0;
      for (const auto& sr : P.sregs) {
        uint64_t* d = w.slot(sr.slot);
        for (int l = 0; l < kLanes; ++l) d[l] = sreg_value(w, sr.reg, l);
      }
      for (uint32_t s : P.warp_index_slots) std::fill_n(w.slot(s), kLanes, uint64_t(wi));
    }
    // Each runnable warp runs until it reaches a barrier, spins on an incomplete mbarrier
    // phase, or ends. A barrier with a thread count completes once that many threads have
    // arrived; the block's barrier (no count) once every warp that has not ended waits at
    // it. A completed barrier advances the epoch and resumes its warps. Rounds in which no
    // warp gets further (all spin, no mbarrier changes, no barrier completes) mean the
    // kernel would hang on the GPU: that is reported, not looped on.
    std::fill(std::begin(block.bar_arrived), std::end(block.bar_arrived), 0u);
    for (Warp& w : warps) w.bar = -1;
    int idle_rounds = 0;
    for (;;) {
      bool live = false, progress = false;
      for (Warp& w : warps) {
        if (w.done) continue;
        live = true;
        if (w.bar >= 0) continue;
        uint64_t events = block.events;
        run_warp(w, P);
        if (!w.yielded || block.events != events) progress = true;
        w.yielded = false;
      }
      if (!live) break;
      progress |= release_barriers();
      if (progress) {
        idle_rounds = 0;
      } else if (++idle_rounds > 64) {
        deadlock();
      }
    }
    for (Warp& w : warps) {
      steps += w.steps;
      lane_steps += w.lane_steps;
    }
  }
};

unsigned env_threads() {
  const char* v = std::getenv("KAIO_INTERP_THREADS");
  if (v && *v) {
    long n = std::strtol(v, nullptr, 10);
    if (n > 0) return static_cast<unsigned>(std::min(n, 1024L));
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? h : 1;
}

constexpr uint64_t kMaxSharedPerBlock = 227 * 1024;  // sm_90 with the opt-in

void check_shape(const Kernel& k, const LaunchShape& s) {
  auto bad = [&](const char* what, const Extent& d, uint64_t max_x) {
    if (d.x == 0 || d.y == 0 || d.z == 0 || d.x > max_x || d.y > 65535 || d.z > 65535)
      throw UsageError(k.name(), "interpret",
                       std::string(what) + " (" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
                           std::to_string(d.z) + ") is out of range (each dimension >= 1; x <= " +
                           std::to_string(max_x) + ", y and z <= 65535)");
  };
  bad("grid", s.grid, 0x7fffffffu);
  bad("block", s.block, 1024);
  if (s.block.x * s.block.y * s.block.z > 1024)
    throw UsageError(k.name(), "interpret",
                     "a block holds at most 1024 threads, asked for " + std::to_string(s.block.x * s.block.y * s.block.z));
}

}  // namespace

namespace impl {
ExecFn copy_all_fn() { return &copy_all; }
ExecFn copy_masked_fn() { return &copy_masked; }
}  // namespace impl

unsigned default_threads() { return env_threads(); }

RunStats run(const Kernel& k, const LaunchShape& shape, std::span<const uint64_t> params, std::span<const Region> local,
             const RunOptions& options) {
  if (!k.valid()) throw UsageError("", "interpret", "an empty (default-constructed) Kernel");
  check_shape(k, shape);
  if (params.size() != k.params().size())
    throw UsageError(k.name(), "interpret",
                     "expected " + std::to_string(k.params().size()) + " arguments, got " + std::to_string(params.size()));
  std::shared_ptr<const Program> prog = program_for(k);
  const uint64_t block_threads = shape.block.x * shape.block.y * shape.block.z;
  if (k.data().max_threads && block_threads > k.data().max_threads)
    throw UsageError(k.name(), "launch",
                     "a block of " + std::to_string(block_threads) + " threads exceeds the kernel's launch bounds (" +
                         std::to_string(k.data().max_threads) + " threads); the GPU would refuse this launch");
  if (uint64_t(prog->static_shared) + shape.shared_bytes > kMaxSharedPerBlock)
    throw UsageError(k.name(), "launch",
                     "static (" + std::to_string(prog->static_shared) + " bytes) plus dynamic (" +
                         std::to_string(shape.shared_bytes) + " bytes) shared memory exceeds " +
                         std::to_string(kMaxSharedPerBlock) + " bytes, the most any GPU gives a block");

  LaunchCtx L;
  L.prog = prog.get();
  L.k = &k.data();
  L.shape = shape;
  // The allocations this launch may touch: those its pointer arguments point into.
  for (size_t i = 0; i < params.size(); ++i) {
    if (!k.params()[i].type.ptr) continue;
    uint64_t ptr = params[i];
    if (uint32_t bytes = k.params()[i].bytes) {  // by value: the caller's bytes, read-only
      if (ptr == 0) throw UsageError(k.name(), "interpret", "by-value parameter " + std::to_string(i) + " has no bytes");
      L.regions.push_back(LRegion{ptr, ptr + bytes, false});
      continue;
    }
    LRegion rg;
    bool found = false;
    for (const Region& r : local) {
      if (ptr >= r.base && ptr < r.base + r.bytes) {
        rg = LRegion{r.base, r.base + r.bytes, r.writable};
        found = true;
        break;
      }
    }
    if (!found) found = registry_find(ptr, rg);
    if (found) L.regions.push_back(rg);
  }

  const uint64_t nblocks = shape.grid.x * shape.grid.y * shape.grid.z;
  unsigned nthreads = options.threads ? options.threads : env_threads();
  nthreads = static_cast<unsigned>(std::min<uint64_t>(nthreads, nblocks));
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> total_steps{0}, total_lanes{0};
  // The error reported is the lowest-numbered failing block's, whichever worker meets its error
  // first: blocks are taken in increasing order, so every lower block is already running when one
  // fails, and no worker takes a block above it afterwards. The same launch gives the same message.
  std::mutex err_m;
  std::exception_ptr err;
  std::atomic<uint64_t> err_block{UINT64_MAX};

  auto worker = [&] {
    uint64_t steps = 0, lanes = 0;
    uint64_t b = 0;
    try {
      Runner r(L, params);
      for (;;) {
        b = next.fetch_add(1, std::memory_order_relaxed);
        if (b >= nblocks || b > err_block.load(std::memory_order_relaxed)) break;
        r.run_block(b, steps, lanes);
      }
    } catch (...) {
      std::lock_guard g(err_m);
      if (!err || b < err_block.load()) {
        err = std::current_exception();
        err_block = b;
      }
    }
    total_steps += steps;
    total_lanes += lanes;
  };

  std::vector<std::thread> pool;
  pool.reserve(nthreads > 0 ? nthreads - 1 : 0);
  try {
    for (unsigned t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  } catch (...) {
    // Could not start more threads: the ones running (and this one) do the work.
  }
  worker();
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);

  RunStats st;
  st.thread_instructions = total_lanes.load();
  st.warp_instructions = total_steps.load();
  st.blocks = nblocks;
  st.threads = nthreads;
  return st;
}

// ---------------- ir::interpret: host arguments ----------------

HostArg host_arg(double v) { return HostArg{HostArg::F64, {}, false, 0, std::bit_cast<uint64_t>(v), 0}; }

namespace {

std::string arg_desc(const HostArg& a) {
  switch (a.kind) {
    case HostArg::Buffer: return std::string(a.writable ? "a host buffer of " : "a const host buffer of ") + scalar_name(a.elem);
    case HostArg::Int: return "a signed integer (" + std::to_string(a.i) + ")";
    case HostArg::UInt: return "an unsigned integer (" + std::to_string(a.u) + ")";
    case HostArg::Bool: return "a bool";
    case HostArg::F32: return "a float";
    case HostArg::F64: return "a double";
    case HostArg::F16: return "a kaio::half";
    case HostArg::BF16: return "a kaio::bfloat16";
    case HostArg::Bytes: return std::to_string(a.bytes) + " bytes";
    case HostArg::Fp8: return std::string("a kaio::fp8_") + scalar_name(a.elem);
  }
  return "?";
}

bool pack(const HostArg& a, const Param& p, uint64_t& slot, std::string& why) {
  slot = 0;
  const Type& t = p.type;
  if (p.bytes) {
    if (a.kind != HostArg::Bytes || a.bytes != p.bytes) {
      why = "pass exactly " + std::to_string(p.bytes) + " bytes (a std::span<const std::byte>)";
      return false;
    }
    slot = a.u;
    return true;
  }
  if (a.kind == HostArg::Bytes) return false;
  if (t.ptr) {
    if (a.kind != HostArg::Buffer || a.elem != t.elem) return false;
    if (!t.is_const && !a.writable) {
      why = "the kernel stores through it; pass a non-const buffer";
      return false;
    }
    slot = a.u;
    return true;
  }
  switch (t.elem) {
    case Scalar::Pred: slot = a.u; return a.kind == HostArg::Bool;
    case Scalar::F32: slot = a.u; return a.kind == HostArg::F32;
    case Scalar::F64: slot = a.u; return a.kind == HostArg::F64;
    case Scalar::F16: slot = a.u; return a.kind == HostArg::F16;
    case Scalar::BF16: slot = a.u; return a.kind == HostArg::BF16;
    case Scalar::E4M3: case Scalar::E5M2: slot = a.u; return a.kind == HostArg::Fp8 && a.elem == t.elem;
    default: break;
  }
  if (a.kind != HostArg::Int && a.kind != HostArg::UInt) return false;
  int bits = scalar_bits(t.elem);
  bool neg = a.kind == HostArg::Int && a.i < 0;
  bool fits;
  if (t.is_signed()) {
    __int128 lo = -(__int128(1) << (bits - 1)), hi = (__int128(1) << (bits - 1)) - 1;
    __int128 v = a.kind == HostArg::Int ? __int128(a.i) : __int128(a.u);
    fits = v >= lo && v <= hi;
  } else {
    uint64_t hi = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
    fits = !neg && (a.kind == HostArg::UInt ? a.u : uint64_t(a.i)) <= hi;
  }
  if (!fits) {
    why = "its value does not fit in " + t.str();
    return false;
  }
  slot = a.kind == HostArg::UInt ? a.u : static_cast<uint64_t>(a.i);
  return true;
}

}  // namespace

RunStats interpret_packed(const Kernel& k, const LaunchShape& shape, const HostArg* args, size_t n,
                          const RunOptions& options) {
  if (!k.valid()) throw UsageError("", "interpret", "an empty (default-constructed) Kernel");
  const auto& ps = k.params();
  if (n != ps.size())
    throw UsageError(k.name(), "interpret", "expected " + std::to_string(ps.size()) + " arguments, got " + std::to_string(n));
  std::vector<uint64_t> slots(n);
  std::vector<Region> local;
  for (size_t i = 0; i < n; ++i) {
    std::string why;
    if (!pack(args[i], ps[i], slots[i], why))
      throw UsageError(k.name(), "interpret",
                       "argument " + std::to_string(i) + " ('" + ps[i].name + "') is " + arg_desc(args[i]) +
                           ", the kernel expects " + ps[i].type.str() + (why.empty() ? "" : "; " + why));
    if (args[i].kind == HostArg::Buffer && args[i].bytes) local.push_back(Region{args[i].u, args[i].bytes, args[i].writable});
  }
  return run(k, shape, slots, local, options);
}

}  // namespace kaio::ir::interp
