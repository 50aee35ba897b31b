// Internal to the C ABI: launching a plan on a framework's own tensor objects through the
// DLPack exchange table (kaio_plan_launch_objects, capi/exchange.cpp).
//
// A plan is made for one set of dtypes, shapes, strides and devices. A caller that reads
// those itself (Python reading torch's fields) finds the plan in its own cache and vouches
// for the objects once ("learn"): the plan then keeps the metadata exactly as the
// producer's table reports it, and every later launch on objects compares the objects'
// metadata with it, word by word, instead of the caller reading the fields again. A
// mismatch launches nothing and says so (KAIO_MISMATCH), so the caller falls back to its
// own lookup.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kaio::capi {

class ObjectSignature {
 public:
  // True once learned: the words below are then fixed for the plan's life.
  bool known() const { return known_.load(std::memory_order_acquire); }
  const std::vector<int64_t>& words() const { return words_; }
  // The first learner's words win (a second learner brings the same words: the caller's key
  // guarantees it); returns false if words differs from what is known.
  bool learn(const std::vector<int64_t>& words) {
    std::lock_guard<std::mutex> hold(learning_);
    if (known_.load(std::memory_order_relaxed)) return words == words_;
    words_ = words;
    known_.store(true, std::memory_order_release);
    return true;
  }

 private:
  std::atomic<bool> known_{false};
  std::mutex learning_;
  std::vector<int64_t> words_;
};

}  // namespace kaio::capi
