// Tuning the attention backward's tile table (AttentionKernel::Tuned) with a fake timer: the
// row the timer makes fastest wins and is stored under the bucket's key; a later call of the
// bucket (another shape in it too) times nothing; KAIO_TUNE=off takes Auto's row untimed;
// tuned and forced rows match the float64 reference gradient; f32 and varlen run as Auto; a
// bad `variant` is a UsageError naming the op and the argument.
#include <catch2/catch.hpp>

#include <map>

#include "kaio/cache/store.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention_backward.h"
#include "kaio/ops/attention_backward_kernels.h"
#include "kaio/ops/attention_backward_tune.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/tuner/once.h"
#include "../support.h"
#include "tune_support.h"
#include "attention_backward_case.h"

using namespace kaio;
using namespace kaio::test::attn_bwd;
using Catch::Matchers::Contains;
using kaio::test::ScopedEnv;
using kaio::test::UnboundedTuneBudget;
using kaio::test::TempDir;
using kaio::test::tune::FakeTimer;
using kaio::test::tune::TimerGuard;
namespace tn = kaio::tuner;

namespace {

bool wgmma_device() { return !jit::interpret_mode() && jit::device_info().sm == 90; }

// The row Auto takes at D 64: the wgmma kernels on an sm_90 device, else mma.sync.
std::string auto_row() { return wgmma_device() ? "bwd_fa3_d64" : "bwd_mma_d64"; }

// Tensors of a dense (B, S, H, D) f16 problem, for choose_attention_backward's arguments.
struct TuneProblem {
  ops::AttentionShape shape;
  jit::DeviceBuffer<half> q, k;
  explicit TuneProblem(ops::AttentionShape s)
      : shape(s), q(size_t(s.batch) * s.seqlen_q * s.heads_q * s.head_dim), k(size_t(s.batch) * s.seqlen_k * s.heads_kv * s.head_dim) {}
  ops::AttentionTensor tq() const { return ops::bshd(q.device_address(), ir::Scalar::F16, shape.seqlen_q, shape.heads_q, shape.head_dim); }
  ops::AttentionTensor tk() const { return ops::bshd(k.device_address(), ir::Scalar::F16, shape.seqlen_k, shape.heads_kv, shape.head_dim); }
  tn::AttentionBackwardChoice choose(const ops::AttentionBackwardOptions& opt) const {
    return tn::choose_attention_backward(tq(), tk(), tk(), tq(), tq(), {tq(), tk(), tk()}, shape, opt);
  }
  std::string key(const ops::AttentionBackwardOptions& opt) const {
    return tn::attention_backward_key(tq(), tk(), tk(), tq(), {tq(), tk(), tk()}, shape, opt);
  }
};

// A test's own cache folder and KAIO_TUNE, with the process's choices and counters cleared.
struct FreshTuning {
  TempDir dir;
  ScopedEnv cache{"KAIO_CACHE_DIR", dir.str()};
  ScopedEnv tune;
  UnboundedTuneBudget budget;  // the tests' timers are fake
  explicit FreshTuning(const char* mode) : tune("KAIO_TUNE", mode) {
    tn::attention_backward_tune_reset();
    tn::reset_stats();
  }
};

}  // namespace

TEST_CASE("attention_backward Tuned: the fastest row is stored per bucket; the next call times nothing",
          "[gpu][ops][attention][tuner]") {
  FreshTuning fresh("on");
  std::map<std::string, uint32_t> calls;
  // D 64, 4 query heads on 2 KV heads, 70 rows: Auto's row (the check's reference) first;
  // the timer makes the mma.sync row with three stages the fastest.
  TuneProblem p({.batch = 1, .seqlen_q = 70, .seqlen_k = 70, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const ops::AttentionBackwardOptions causal{.causal = true};
  {
    TimerGuard g(FakeTimer{{{"bwd_mma_d64_s3", 1.0}, {"bwd_mma_d64", 2.0}}, &calls});
    const tn::AttentionBackwardChoice ch = p.choose(causal);
    REQUIRE(ch.variant);
    CHECK(std::string(ch.variant->name) == "bwd_mma_d64_s3");
    CHECK(ch.source == tn::AttentionBackwardChoice::Tuned);
    REQUIRE(ch.record.candidates.size() == (wgmma_device() ? 5u : 2u));  // wgmma: stages 3, 2, 4; mma: stages 2, 3
    CHECK(ch.record.candidates[0].name == auto_row());
    for (const tn::CandidateResult& r : ch.record.candidates) CHECK(r.status == "ok");  // every row's gradients agree
    CHECK(tn::stats().tunings == 1);
    CHECK(calls["bwd_mma_d64_s3"] >= 10);
    CHECK(calls["bwd_mma_d64"] >= 10);
    // The tuned call itself, against float64 (the process remembers the bucket's row).
    check_case<half>({.sq = 70, .sk = 70, .hq = 4, .hkv = 2, .causal = true, .kernel = ops::AttentionKernel::Tuned});
    CHECK(tn::stats().memory_hits >= 1);
  }
  const std::string key = p.key(causal);
  const std::string machine = jit::interpret_mode() ? "interpreter" : "|" + jit::device_info().name + "|";
  CHECK_THAT(key, Contains("attention_backward|f16|") && Contains(machine) && Contains("|d64|sq128|sk128|bh4|g2|causal|align7"));
  const auto rec = kaio::test::tune::stored_record(fresh.dir.path(), key);
  REQUIRE(rec);
  CHECK(rec->op == "attention_backward");
  CHECK(rec->winner == "bwd_mma_d64_s3");
  CHECK(rec->table_hash == tn::attention_backward_table_hash());

  // A fresh process state, a timer that now prefers the other row, another shape of the
  // same bucket: the stored record answers, nothing is timed.
  tn::attention_backward_tune_reset();
  tn::reset_stats();
  calls.clear();
  TimerGuard g(FakeTimer{{{"bwd_mma_d64_s3", 2.0}, {"bwd_mma_d64", 1.0}}, &calls});
  TuneProblem p2({.batch = 1, .seqlen_q = 100, .seqlen_k = 127, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const tn::AttentionBackwardChoice again = p2.choose(causal);
  REQUIRE(again.variant);
  CHECK(std::string(again.variant->name) == "bwd_mma_d64_s3");
  CHECK(again.source == tn::AttentionBackwardChoice::Stored);
  CHECK(tn::stats().tunings == 0);
  CHECK(calls.empty());
  // Not causal is another bucket: tuned on its own.
  CHECK(std::string(p2.choose({}).variant->name) == "bwd_mma_d64");
  CHECK(tn::stats().tunings == 1);
}

TEST_CASE("attention_backward Tuned: KAIO_TUNE=off takes Auto's row untimed; f32 and varlen run as Auto",
          "[gpu][ops][attention][tuner]") {
  FreshTuning fresh("off");
  std::map<std::string, uint32_t> calls;
  TimerGuard g(FakeTimer{{{"bwd_mma_d64_s3", 1.0}}, &calls});
  TuneProblem p({.batch = 1, .seqlen_q = 70, .seqlen_k = 70, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const tn::AttentionBackwardChoice ch = p.choose({});
  REQUIRE(ch.variant);
  CHECK(ch.variant->name == auto_row());
  CHECK(ch.source == tn::AttentionBackwardChoice::Untuned);
  CHECK(tn::stats().untuned == 1);
  check_case<half>({.sq = 70, .sk = 70, .hq = 4, .hkv = 2, .kernel = ops::AttentionKernel::Tuned});
  ScopedEnv on("KAIO_TUNE", "on");
  // f32: no tensor-core row; Tuned runs the rows kernels, as Auto does.
  check_case<float>({.sq = 7, .sk = 9, .hq = 2, .hkv = 1, .causal = true, .kernel = ops::AttentionKernel::Tuned});
  // varlen is not tuned: Tuned runs it as Auto.
  check_case<half>({.hq = 2, .hkv = 1, .causal = true, .q_lens = {5, 1, 9}, .k_lens = {5, 7, 9}, .kernel = ops::AttentionKernel::Tuned});
  CHECK(calls.empty());
}

TEST_CASE("attention_backward variant: every row forced by name matches float64; a bad name is a UsageError naming it",
          "[gpu][ops][attention]") {
  for (const ops::AttentionBackwardVariant& row : ops::attention_backward_variants()) {
    if (row.engine == ops::AttentionEngine::Wgmma && !wgmma_device()) continue;
    check_case<half>({.sq = 65, .sk = 30, .hq = 4, .hkv = 1, .d = row.head_dim, .causal = true, .variant = row.name});
    check_case<kaio::bfloat16>({.sq = 7, .sk = 130, .hq = 2, .hkv = 2, .d = row.head_dim, .variant = row.name});
  }
  jit::DeviceBuffer<half> buf(64 * 8 * 128);
  jit::DeviceBuffer<float> lse(64);
  const auto t = ops::bshd(buf.device_address(), ir::Scalar::F16, 8, 2, 64);
  const ops::AttentionShape s{.batch = 1, .seqlen_q = 8, .seqlen_k = 8, .heads_q = 2, .heads_kv = 2, .head_dim = 64};
  auto fails = [&](const ops::AttentionTensor& x, const char* variant, const char* what) {
    INFO(variant);
    try {
      ops::attention_backward(x, x, x, x, x, lse.device_address(), {x, x, x}, s, {.variant = variant});
      FAIL("expected a UsageError");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Contains("attention_backward: argument 'variant'") && Contains(what));
    }
  };
  fails(t, "bwd_mma_d65", "no row named 'bwd_mma_d65'");
  fails(t, "bwd_mma_d128", "is for head_dim 128, not 64");
  if (jit::interpret_mode()) fails(t, "bwd_fa3_d64", "bwd_fa3_d64 does not apply: the interpreter does not model wgmma");
  fails(ops::bshd(buf.device_address(), ir::Scalar::F32, 8, 2, 64), "bwd_mma_d64", "it takes f16 or bf16");
}
