// The warp-specialised kernel skeleton (Hopper): warpgroup 0 produces (one thread issues
// TMA loads into a stage ring), warpgroups 1..C consume (wgmma from the stages, then the
// epilogue). Consumers either share each tile (each owns some of its rows) or, in ping-pong
// order, take alternate tiles so that one's epilogue runs under the other's MMAs.
//
//   kernel::WarpSpecialized ws(b, consumers);
//   ws.run(warp, [&] { /* producer warpgroup */ }, [&](ir::Value wg) { /* consumer wg */ });
//
// Named barriers: 1 and 2 order the two ping-pong consumers; 3.. are one per consumer
// warpgroup (its 128 threads), for epilogue steps that only that warpgroup shares.
// setmaxnreg (producer_regs / consumer_regs) moves registers from the producer to the
// consumers. Off by default: with it, run() also declares .maxnreg (the count a warp starts
// with), and the kernel is loaded from its PTX, compiled by the driver as a whole program
// (jit/backend_device.cpp), since nvJitLink's separate compile ignores setmaxnreg.
#pragma once

#include <cstdint>
#include <functional>

#include "kaio/ir/builder.h"

namespace kaio::ops::kernel {

class WarpSpecialized {
 public:
  static constexpr uint32_t kWarpgroup = 128;
  static constexpr uint32_t kFirstConsumerBarrier = 3;

  WarpSpecialized(ir::KernelBuilder& b, uint32_t consumers) : b_(b), consumers_(consumers) {}

  static uint32_t threads(uint32_t consumers) { return kWarpgroup * (consumers + 1); }
  uint32_t consumers() const { return consumers_; }
  // Registers per thread after setmaxnreg (0: leave them as ptxas assigns).
  uint32_t producer_regs = 0, consumer_regs = 0;

  // Warps 0-3 run `producer`, the others `consumer` with their consumer index wg. With
  // producer_regs / consumer_regs set, the kernel also declares the count every warp starts
  // with (.maxnreg: the SM's 65,536 over the block, 168 at 384 threads), which setmaxnreg
  // moves from; without it a whole-program ptxas sizes the kernel by its smallest branch.
  void run(ir::Value warp, const std::function<void()>& producer, const std::function<void(ir::Value wg)>& consumer) const {
    if (producer_regs || consumer_regs) b_.max_registers(65536 / threads(consumers_) / 8 * 8);
    b_.if_(warp < 4u, [&] {
      if (producer_regs) b_.setmaxnreg(producer_regs, false);
      producer();
    }).else_([&] {
      ir::Value wg = warp / 4u - 1u;
      if (consumer_regs) b_.setmaxnreg(consumer_regs, true);
      consumer(wg);
    });
  }

  // A barrier of consumer wg's 128 threads only (named barrier ids are immediates).
  void consumer_sync(ir::Value wg) const {
    for (uint32_t q = 0; q < consumers_; ++q) b_.if_(wg == q, [&] { b_.barrier(kFirstConsumerBarrier + q, kWarpgroup); });
  }

  // Ping-pong order: consumer wg starts the MMAs of its item w once its partner has issued
  // those of the item before (consumer 0's first item, `first`, waits for nobody). Without
  // it a consumer could wait on a stage's full barrier two phases ahead, which parity
  // cannot tell apart.
  void pingpong_wait(ir::Value wg, ir::Value w, ir::Value first) const {
    b_.if_(wg == 0u, [&] { b_.if_(w != first, [&] { b_.barrier(2, 2 * kWarpgroup); }); }).else_([&] {
      b_.barrier(1, 2 * kWarpgroup);
    });
  }
  // ... and lets the partner's next item start (when there is one).
  void pingpong_pass(ir::Value wg) const {
    b_.if_(wg == 0u, [&] { b_.barrier_arrive(1, 2 * kWarpgroup); }).else_([&] { b_.barrier_arrive(2, 2 * kWarpgroup); });
  }

 private:
  ir::KernelBuilder& b_;
  uint32_t consumers_;
};

}  // namespace kaio::ops::kernel
