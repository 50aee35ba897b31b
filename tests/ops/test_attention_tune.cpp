// Tuning the attention forward's tile shape (AttentionKernel::Tuned) in the interpreter with
// a fake timer: the row the timer makes fastest wins and is stored under the bucket's key; a
// later call of the bucket (another shape in it too) times nothing; KAIO_TUNE=off takes
// Auto's row untimed; tuned, forced and untunable (f32) calls match float64; a bad
// `variant` is a UsageError naming the op and the argument.
#include <catch2/catch.hpp>

#include <map>

#include "kaio/cache/store.h"
#include "kaio/jit/device.h"
#include "kaio/ops/attention.h"
#include "kaio/ops/attention_kernels.h"
#include "kaio/ops/attention_tune.h"
#include "kaio/tuner/once.h"
#include "../support.h"
#include "tune_support.h"
#include "attention_case.h"

using namespace kaio;
using namespace kaio::test::attn;
using Catch::Matchers::Contains;
using kaio::test::ScopedEnv;
using kaio::test::UnboundedTuneBudget;
using kaio::test::TempDir;
using kaio::test::tune::FakeTimer;
using kaio::test::tune::TimerGuard;
namespace tn = kaio::tuner;

namespace {

// Scratch tensors of a dense (B, S, H, D) f16 problem, for choose_attention's arguments.
struct Problem {
  ops::AttentionShape shape;
  jit::DeviceBuffer<half> q, k, v, o;
  explicit Problem(ops::AttentionShape s)
      : shape(s), q(size_t(s.batch) * s.seqlen_q * s.heads_q * s.head_dim), k(size_t(s.batch) * s.seqlen_k * s.heads_kv * s.head_dim),
        v(k.size()), o(q.size()) {}
  ops::AttentionTensor t(const jit::DeviceBuffer<half>& b, uint32_t seq, uint32_t heads) const {
    return ops::bshd(b.device_address(), ir::Scalar::F16, seq, heads, shape.head_dim);
  }
  tn::AttentionChoice choose(const ops::AttentionOptions& opt) const {
    return tn::choose_attention(t(q, shape.seqlen_q, shape.heads_q), t(k, shape.seqlen_k, shape.heads_kv),
                                t(v, shape.seqlen_k, shape.heads_kv), t(o, shape.seqlen_q, shape.heads_q), shape, opt);
  }
  std::string key(const ops::AttentionOptions& opt) const {
    return tn::attention_key(t(q, shape.seqlen_q, shape.heads_q), t(k, shape.seqlen_k, shape.heads_kv),
                             t(v, shape.seqlen_k, shape.heads_kv), t(o, shape.seqlen_q, shape.heads_q), shape, opt);
  }
};

// The row Auto takes for these small D 64 problems: the wgmma kernel on an sm_90 device,
// else the 64-row mma tile (2 or 4 heads of <= 128 rows are fewer blocks than SMs).
std::string auto_row() {
  return !jit::interpret_mode() && jit::device_info().sm == 90 ? "fa3_d64_n192" : "fa2_d64_m64";
}

// A test's own cache folder and KAIO_TUNE, with the process's choices and counters cleared.
struct FreshTuning {
  TempDir dir;
  ScopedEnv cache{"KAIO_CACHE_DIR", dir.str()};
  ScopedEnv tune;
  UnboundedTuneBudget budget;  // the tests' timers are fake
  explicit FreshTuning(const char* mode) : tune("KAIO_TUNE", mode) {
    tn::attention_tune_reset();
    tn::reset_stats();
  }
};

}  // namespace

TEST_CASE("attention Tuned: the fastest row is stored per bucket; the next call times nothing", "[gpu][ops][attention][tuner]") {
  FreshTuning fresh("on");
  std::map<std::string, uint32_t> calls;
  // D 64, 4 heads x 70 rows: Auto's row (the check's reference) is auto_row(); the timer
  // makes fa2_d64 the fastest (rows it gives no time take 10 ms).
  Problem p({.batch = 1, .seqlen_q = 70, .seqlen_k = 70, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const ops::AttentionOptions causal{.causal = true};
  {
    TimerGuard g(FakeTimer{{{"fa2_d64", 1.0}, {"fa2_d64_m64", 2.0}}, &calls});
    const tn::AttentionChoice ch = p.choose(causal);
    REQUIRE(ch.variant);
    CHECK(std::string(ch.variant->name) == "fa2_d64");
    CHECK(ch.source == tn::AttentionChoice::Tuned);
    REQUIRE(ch.record.candidates.size() == (auto_row() == "fa3_d64_n192" ? 5u : 2u));  // + fa3_d64_m192, fa3_d64 on sm_90
    CHECK(ch.record.candidates[0].name == auto_row());  // Auto's row first: the reference
    CHECK(tn::stats().tunings == 1);
    CHECK(calls["fa2_d64"] >= 10);
    CHECK(calls["fa2_d64_m64"] >= 10);
    // The tuned call itself, against float64 (the process remembers the bucket's row).
    run_case<half>({.sq = 70, .sk = 70, .hq = 4, .hkv = 2, .causal = true, .kernel = ops::AttentionKernel::Tuned});
    CHECK(tn::stats().memory_hits >= 1);
  }
  const std::string key = p.key(causal);
  // The bucket names the machine: the interpreter, or the device by name.
  const std::string machine = jit::interpret_mode() ? "interpreter" : "|" + jit::device_info().name + "|";
  CHECK_THAT(key, Contains("attention|f16|") && Contains(machine) && Contains("|d64|sq128|sk128|bh4|g2|causal|align7"));
  const auto rec = kaio::test::tune::stored_record(fresh.dir.path(), key);
  REQUIRE(rec);
  CHECK(rec->op == "attention");
  CHECK(rec->winner == "fa2_d64");
  CHECK(rec->table_hash == tn::attention_table_hash());

  // A fresh process state, a timer that now prefers the other row, another shape of the
  // same bucket: the stored record answers, nothing is timed.
  tn::attention_tune_reset();
  tn::reset_stats();
  calls.clear();
  TimerGuard g(FakeTimer{{{"fa2_d64", 2.0}, {"fa2_d64_m64", 1.0}}, &calls});
  Problem p2({.batch = 1, .seqlen_q = 100, .seqlen_k = 127, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const tn::AttentionChoice again = p2.choose(causal);
  REQUIRE(again.variant);
  CHECK(std::string(again.variant->name) == "fa2_d64");
  CHECK(again.source == tn::AttentionChoice::Stored);
  CHECK(tn::stats().tunings == 0);
  CHECK(tn::stats().timed_runs == 0);
  CHECK(calls.empty());
  // Not causal is another bucket: tuned on its own.
  CHECK(std::string(p2.choose({}).variant->name) == "fa2_d64_m64");
  CHECK(tn::stats().tunings == 1);
}

TEST_CASE("attention Tuned: KAIO_TUNE=off takes Auto's row untimed; f32 has nothing to tune", "[gpu][ops][attention][tuner]") {
  FreshTuning fresh("off");
  std::map<std::string, uint32_t> calls;
  TimerGuard g(FakeTimer{{{"fa2_d64", 1.0}, {"fa2_d64_m64", 2.0}}, &calls});
  Problem p({.batch = 1, .seqlen_q = 70, .seqlen_k = 70, .heads_q = 4, .heads_kv = 2, .head_dim = 64});
  const tn::AttentionChoice ch = p.choose({});
  REQUIRE(ch.variant);
  CHECK(ch.variant->name == auto_row());
  CHECK(ch.source == tn::AttentionChoice::Untuned);
  CHECK(calls.empty());
  CHECK(tn::stats().untuned == 1);
  run_case<half>({.sq = 70, .sk = 70, .hq = 4, .hkv = 2, .kernel = ops::AttentionKernel::Tuned});
  // f32: no tensor-core row; Tuned runs the rows kernel, as Auto does.
  ScopedEnv on("KAIO_TUNE", "on");
  run_case<float>({.sq = 7, .sk = 9, .hq = 2, .hkv = 1, .causal = true, .kernel = ops::AttentionKernel::Tuned});
  CHECK(calls.empty());
  // varlen is not tuned: Tuned runs it as Auto.
  run_case<half>({.hq = 2, .hkv = 1, .causal = true, .q_lens = {5, 1, 9}, .k_lens = {5, 7, 9}, .kernel = ops::AttentionKernel::Tuned});
  CHECK(calls.empty());
}

TEST_CASE("attention variant: a row forced by name; a bad name is a UsageError naming it", "[gpu][ops][attention]") {
  for (const char* row : {"fa2_d64", "fa2_d64_m64"}) run_case<kaio::bfloat16>({.sq = 65, .sk = 30, .hq = 4, .hkv = 1, .variant = row});
  run_case<half>({.sq = 7, .sk = 130, .hq = 2, .hkv = 1, .d = 128, .causal = true, .variant = "fa2_d128_m64"});
  jit::DeviceBuffer<half> buf(64 * 8 * 128);
  const auto t = ops::bshd(buf.device_address(), ir::Scalar::F16, 8, 2, 64);
  const ops::AttentionShape s{.batch = 1, .seqlen_q = 8, .seqlen_k = 8, .heads_q = 2, .heads_kv = 2, .head_dim = 64};
  auto fails = [&](const char* variant, const char* what) {
    INFO(variant);
    try {
      ops::attention(t, t, t, t, s, {.variant = variant});
      FAIL("expected a UsageError");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Contains("attention: argument 'variant'") && Contains(what));
    }
  };
  fails("fa2_d65", "no row named 'fa2_d65'");
  fails("fa2_d128", "is for head_dim 128, not 64");
  if (jit::interpret_mode()) fails("fa3_d64", "fa3_d64 does not apply: the interpreter does not model wgmma");
  const auto f32 = ops::bshd(buf.device_address(), ir::Scalar::F32, 8, 2, 64);
  try {
    ops::attention(f32, f32, f32, f32, s, {.variant = "fa2_d64"});
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Contains("argument 'variant'") && Contains("it takes f16 or bf16"));
  }
}
