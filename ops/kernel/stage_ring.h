// Stage rings: how a producer hands shared-memory stages to consumers and gets them back.
//
// MbarrierRing (Hopper style): S stages, each with a "full" mbarrier (the producer's
// arrival, with the transaction bytes of its TMA loads) and an "empty" one (every consumer
// warp's arrival, in every CTA of a cluster). Both sides count k-steps with a running
// `step`; stage = step % S and the lap's parity is (step / S) & 1. The producer waits for
// the previous lap's release (parity ^ 1: a fresh ring passes at once), the consumers for
// this lap's fill.
//
//   kernel::MbarrierRing ring(b, bars, first, S, /*arrivals*/ consumers * 4, cluster);
//   b.if_(tid == 0u, [&] { ring.init(); });                   // then a block / cluster barrier
//   // producer:  auto t = ring.slot(step); ring.acquire(t); ring.expect(t, bytes); tma_load(..., bars, ring.full(t))
//   // consumer:  auto t = ring.slot(step); ring.wait(t); ... mma ...; ring.release(stage, lane)
//
// CpAsyncRing (Ampere style): S stages filled by cp.async groups; per thread, wait_group
// (S - 2) then a block barrier publishes the oldest stage; the load and read positions run
// round the ring one step apart (pipeline() runs the whole prologue / steady state).
//
// Mbarrier indices are into a u64 shared array `bars`; full[s] = first + s, empty[s] =
// first + S + s.
#pragma once

#include <cstdint>
#include <functional>

#include "kaio/ir/builder.h"

namespace kaio::ops::kernel {

class MbarrierRing {
 public:
  MbarrierRing(ir::KernelBuilder& b, ir::Value bars, uint32_t first, uint32_t stages, uint32_t consumer_arrivals,
               uint32_t cluster = 1)
      : b_(b), bars_(bars), first_(first), S_(stages), arrivals_(consumer_arrivals), cluster_(cluster) {
    while ((1u << shift_) < S_) ++shift_;
  }

  uint32_t stages() const { return S_; }
  ir::Value bars() const { return bars_; }
  // mbarrier slots the ring uses (full and empty per stage).
  uint32_t barrier_count() const { return 2 * S_; }

  // One thread: initialise every barrier and make them visible to the TMA unit (and to the
  // cluster's peers). The caller then syncs the block (or the cluster).
  void init() const {
    for (uint32_t s = 0; s < S_; ++s) {
      b_.mbarrier_init(bars_, first_ + s, 1u);                      // the producer's expect_tx arrival
      b_.mbarrier_init(bars_, first_ + S_ + s, arrivals_ * cluster_);  // each consumer warp, in each CTA
    }
    if (cluster_ > 1) b_.fence_mbarrier_init();
    b_.fence_proxy_async();
  }

  struct Slot {
    ir::Value step, stage;
  };
  Slot slot(ir::Value step) const { return {step, stage_of(step)}; }
  // The stage of any step (step % S), e.g. the one before a slot's: stage_of(step + S - 1).
  ir::Value stage_of(ir::Value step) const { return pow2() ? step & (S_ - 1) : step % S_; }

  // Producer: wait until the consumers freed the slot's stage (the previous lap).
  void acquire(const Slot& t) const { b_.mbarrier_wait(bars_, first_ + S_ + t.stage, (lap(t) & 1u) ^ 1u); }
  // Producer: the slot's loads will bring `bytes` (the full barrier completes on them).
  void expect(const Slot& t, uint32_t bytes) const {
    b_.mbarrier_arrive_expect_tx(bars_, first_ + t.stage, b_.constant<uint32_t>(bytes));
  }
  // Producer threads that wrote the stage themselves (no TMA): the one arrival that fills it.
  void arrive(const Slot& t) const { b_.mbarrier_arrive(bars_, first_ + t.stage); }
  // The full barrier of the slot's stage (what a TMA load completes).
  ir::Value full(const Slot& t) const { return first_ + t.stage; }
  // Consumer: wait until the slot's stage is filled.
  void wait(const Slot& t) const { b_.mbarrier_wait(bars_, first_ + t.stage, lap(t) & 1u); }
  // Consumer warp: hand `stage` back (lane 0 arrives, on this CTA's and every peer's barrier:
  // their multicasts write here too).
  void release(ir::Value stage, ir::Value lane) const {
    b_.if_(lane == 0u, [&] {
      if (cluster_ == 1) b_.mbarrier_arrive(bars_, first_ + S_ + stage);
      else
        for (uint32_t r = 0; r < cluster_; ++r) b_.mbarrier_arrive_cluster(bars_, first_ + S_ + stage, b_.constant<uint32_t>(r));
    });
  }

 private:
  ir::KernelBuilder& b_;
  ir::Value bars_;
  // step / S and step % S as a shift and a mask where S is a power of two: ptxas expands a
  // u32 division by a constant into the generic reciprocal sequence (about 15 instructions
  // with a MUFU.RCP) at every wait of every k-step. (A shift in the code generator for every
  // power-of-two divisor made ptxas hoist unrolled loops' addresses out of their loop and
  // spill: tests/ir/test_compute_core.cpp, the SIMT matmul; bench/NOTES.md.)
  bool pow2() const { return (S_ & (S_ - 1)) == 0; }
  ir::Value lap(const Slot& t) const { return pow2() ? t.step >> shift_ : t.step / S_; }

  uint32_t first_, S_, arrivals_, cluster_, shift_ = 0;
};

class CpAsyncRing {
 public:
  // `zero`: a u32 0 of the kernel (the ring positions wrap to it).
  CpAsyncRing(ir::KernelBuilder& b, uint32_t stages, ir::Value zero)
      : b_(b), S_(stages), zero_(zero), load_(b.var<uint32_t>(0u)), read_(b.var<uint32_t>(0u)) {}

  uint32_t stages() const { return S_; }
  ir::Value load_stage() const { return load_; }  // the stage the next loads fill
  ir::Value read_stage() const { return read_; }  // the stage the consumers read now

  // After a step's cp.async copies: close the group and move the load position on.
  void commit() {
    b_.cp_async_commit_group();
    load_ = ir::select(ir::Value(load_) == S_ - 1, zero_, ir::Value(load_) + 1u);
  }
  // The oldest stage in flight has landed for every thread (then it may be read).
  void wait() {
    b_.cp_async_wait_group(S_ - 2);
    b_.barrier();
  }
  // The consumers are done with the read stage.
  void advance() { read_ = ir::select(ir::Value(read_) == S_ - 1, zero_, ir::Value(read_) + 1u); }
  // No copy outlives the kernel's use of shared memory.
  void drain() { b_.cp_async_wait_group(0); }

  // The whole pipeline over `steps` k-steps: load(t) issues step t's copies into
  // load_stage() (t may run past steps: those loads must be empty), compute(t) reads
  // read_stage().
  //   for t < S - 1: load(t); commit
  //   for t < steps: wait; load(t + S - 1); commit; compute(t); advance
  void pipeline(ir::Value steps, const std::function<void(ir::Value)>& load, const std::function<void(ir::Value)>& compute) {
    for (uint32_t t = 0; t + 1 < S_; ++t) {
      load(b_.constant<uint32_t>(t));
      commit();
    }
    b_.for_(0u, steps, [&](ir::Value t) {
      wait();
      load(t + (S_ - 1));
      commit();
      compute(t);
      advance();
    });
    drain();
  }

 private:
  ir::KernelBuilder& b_;
  uint32_t S_;
  ir::Value zero_;
  ir::Var load_, read_;
};

// A ring of S stages that each thread fills and reads alone: its cp.async copies go into its
// own slots and only it reads them, so a step waits for this thread's oldest group and no
// barrier (the W4A16 streaming kernel: S - 1 steps in flight without holding registers).
//   for t < S - 1: load(stage t, t)
//   for each step t < steps: wait; step(stage, t, refill), where the step calls refill() once
//   it has read its stage: the stage read one step earlier is loaded then, with step t + S - 1
//   wait for every copy (the slots may be reused after a barrier)
// load(stage, t) issues step t's copies (none for t past the last) and closes its group.
// The loop takes S steps a trip, the step emitted once per stage, so the stage every callback
// sees is a constant and a slot's shared address is a register plus an immediate (a running
// stage index cost a multiply and an add per slot and a select per step); steps past the end
// of a trip are skipped.
class ThreadRing {
 public:
  using Load = std::function<void(ir::Value stage, ir::Value t)>;
  using Step = std::function<void(ir::Value stage, ir::Value t, const std::function<void()>& refill)>;
  ThreadRing(ir::KernelBuilder& b, uint32_t stages) : b_(b), S_(stages) {}

  void pipeline(ir::Value steps, const Load& load, const Step& step) {
    for (uint32_t p = 0; p + 1 < S_; ++p) load(b_.constant<uint32_t>(p), b_.constant<uint32_t>(p));
    // Step j of a trip reads stage j and refills stage j - 1 (mod S); the one after it runs
    // only where it exists (each is nested in the one before: a skipped step skips the rest).
    b_.for_(0u, steps, S_, [&](ir::Value first) {
      std::function<void(uint32_t)> at = [&](uint32_t j) {
        b_.cp_async_wait_group(S_ - 2);
        ir::Value t = j ? first + j : first;
        step(b_.constant<uint32_t>(j), t, [&] { load(b_.constant<uint32_t>((j + S_ - 1) % S_), t + (S_ - 1)); });
        if (j + 1 < S_) b_.if_(first + (j + 1) < steps, [&] { at(j + 1); });
      };
      at(0);
    });
    b_.cp_async_wait_group(0);
  }

 private:
  ir::KernelBuilder& b_;
  uint32_t S_;
};

}  // namespace kaio::ops::kernel
