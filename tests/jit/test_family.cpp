// Kernel families (jit/family.h): the builder runs once per config, hits never build,
// concurrent first calls build once, failures are retried, the registry and precompile.
// Offline (explicit arch), no GPU needed.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kaio/kaio.h"
#include "kaio/ops/catalog.h"
#include "../support.h"

using namespace kaio;
using Catch::Matchers::Contains;

namespace {

struct ScaleCfg {
  ir::Scalar dtype = ir::Scalar::F32;
  uint32_t vec = 1;
  std::string tag;
  auto fields() const { return std::tie(dtype, vec, tag); }
};

// x[i] *= (vec + 1): each config gives a different kernel.
ir::Kernel build_scale(const std::string& name, const ScaleCfg& c) {
  ir::KernelBuilder b(name + "_" + ir::scalar_name(c.dtype) + "_v" + std::to_string(c.vec) + c.tag);
  auto x = b.param("x", ir::Type::pointer(c.dtype, false));
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    x[i] = xi * ir::cast(b.constant(float(c.vec + 1)), ir::Type::scalar(c.dtype));
  });
  return b.build();
}

const jit::CompileOptions kOffline{.arch = "sm_90", .use_cache = false};

}  // namespace

TEST_CASE("a family builds once per config; hits never run the builder", "[jit][family]") {
  jit::Family<ScaleCfg> fam("fam_hits", [](const ScaleCfg& c) { return build_scale("fam_hits", c); },
                            {{ir::Scalar::F32, 1, ""}, {ir::Scalar::F16, 4, ""}}, kOffline);
  CHECK(fam.builds() == 0);
  const jit::CompiledKernel& a = fam.get({ir::Scalar::F32, 1, ""});
  CHECK(fam.builds() == 1);
  CHECK(a.name() == "fam_hits_f32_v1");
  CHECK(a.arch() == "sm_90");
  for (int i = 0; i < 100; ++i) CHECK(&fam.get({ir::Scalar::F32, 1, ""}) == &a);  // last-hit slot
  CHECK(fam.builds() == 1);

  // Another config misses once; going back to the first is a map hit, not a build.
  const jit::CompiledKernel& b = fam.get({ir::Scalar::F16, 4, ""});
  CHECK(fam.builds() == 2);
  CHECK(b.name() == "fam_hits_f16_v4");
  CHECK(b.key() != a.key());
  CHECK(&fam.get({ir::Scalar::F32, 1, ""}) == &a);
  CHECK(&fam.get({ir::Scalar::F16, 4, ""}) == &b);
  // A field that is only a string still selects a config.
  CHECK(&fam.get({ir::Scalar::F32, 1, "x"}) != &a);
  CHECK(fam.builds() == 3);
  CHECK(fam.loaded_count() == 3);
}

TEST_CASE("two families with one config type do not share last hits", "[jit][family]") {
  jit::Family<ScaleCfg> f1("fam_one", [](const ScaleCfg& c) { return build_scale("fam_one", c); }, {}, kOffline);
  jit::Family<ScaleCfg> f2("fam_two", [](const ScaleCfg& c) { return build_scale("fam_two", c); }, {}, kOffline);
  ScaleCfg c{ir::Scalar::F32, 2, ""};
  CHECK(f1.get(c).name() == "fam_one_f32_v2");
  CHECK(f2.get(c).name() == "fam_two_f32_v2");
  CHECK(f1.get(c).name() == "fam_one_f32_v2");
  CHECK(f1.builds() == 1);
  CHECK(f2.builds() == 1);
}

TEST_CASE("concurrent first calls of one config build it once", "[jit][family][concurrency]") {
  for (int round = 0; round < 4; ++round) {
    std::string name = "fam_race" + std::to_string(round);
    std::atomic<int> running_builders{0}, max_running{0};
    jit::Family<ScaleCfg> fam(name, [&](const ScaleCfg& c) {
      int now = ++running_builders;
      int prev = max_running.load();
      while (now > prev && !max_running.compare_exchange_weak(prev, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // widen the window for a second builder
      ir::Kernel k = build_scale(name, c);
      --running_builders;
      return k;
    }, {}, kOffline);
    constexpr int kThreads = 8;
    std::atomic<int> ready{0};
    std::vector<const jit::CompiledKernel*> got(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        ++ready;
        while (ready.load() < kThreads) std::this_thread::yield();  // start together
        // Half the threads ask for a second config too: two configs, two builds.
        got[t] = &fam.get({ir::Scalar::F32, 3, ""});
        if (t % 2) fam.get({ir::Scalar::F32, 5, ""});
      });
    for (auto& t : ts) t.join();
    CHECK(fam.builds() == 2);
    CHECK(max_running.load() <= 2);  // never two builders of one config at once
    for (auto* p : got) CHECK(p == got[0]);
  }
}

TEST_CASE("a failing builder is not cached: the next call tries again", "[jit][family]") {
  int calls = 0;
  jit::Family<ScaleCfg> fam("fam_fail", [&](const ScaleCfg& c) {
    ++calls;
    if (c.vec == 0) throw UsageError("fam_fail", "build", "vec must be >= 1");
    return build_scale("fam_fail", c);
  }, {}, kOffline);
  CHECK_THROWS_AS(fam.get({ir::Scalar::F32, 0, ""}), UsageError);
  CHECK_THROWS_AS(fam.get({ir::Scalar::F32, 0, ""}), UsageError);
  CHECK(calls == 2);
  CHECK(fam.get({ir::Scalar::F32, 1, ""}).valid());
  CHECK(fam.builds() == 3);
}

TEST_CASE("the family registry: names, declared configs, precompile for any arch", "[jit][family]") {
  test::TempDir dir;
  {
    jit::Family<ScaleCfg> fam("fam_reg", [](const ScaleCfg& c) { return build_scale("fam_reg", c); },
                              {{ir::Scalar::F32, 1, ""}, {ir::Scalar::BF16, 2, ""}});
    REQUIRE(jit::find_family("fam_reg") == &fam);
    bool listed = false;
    for (jit::FamilyBase* f : jit::families()) listed |= f == &fam;
    CHECK(listed);
    CHECK(fam.configs().size() == 2);
    CHECK(fam.config_names() == std::vector<std::string>{"fam_reg(f32, 1, )", "fam_reg(bf16, 2, )"});

    auto err = test::usage_error_of([] { jit::Family<ScaleCfg> dup("fam_reg", [](const ScaleCfg&) { return ir::Kernel(); }); });
    CHECK_THAT(err.what(), Contains("fam_reg") && Contains("exists already"));

    for (const char* arch : {"sm_80", "sm_90"}) {
      std::vector<jit::FamilyCompileResult> r = fam.precompile({.arch = arch, .cache_dir = dir.str()});
      REQUIRE(r.size() == 2);
      for (const auto& x : r) {
        INFO(x.config << ": " << x.error);
        CHECK(x.error.empty());
        REQUIRE(x.kernel.valid());
        CHECK(x.kernel.arch() == arch);
      }
      CHECK(r[0].config == "fam_reg(f32, 1, )");
      CHECK(r[0].kernel.key() != r[1].kernel.key());
    }
    CHECK(fam.builds() == 4);       // precompile runs the builder per config and arch
    CHECK(fam.loaded_count() == 0); // but does not fill the launch map
  }
  CHECK(jit::find_family("fam_reg") == nullptr);  // unregistered with its destruction
}

TEST_CASE("a config's own str() names it in listings", "[jit][family]") {
  struct Named {
    uint32_t tile = 64;
    auto fields() const { return std::tie(tile); }
    std::string str() const { return "tile=" + std::to_string(tile); }
  };
  jit::Family<Named> fam("fam_named", [](const Named&) { return build_scale("fam_named", {}); }, {{64}, {128}}, kOffline);
  CHECK(fam.config_names() == std::vector<std::string>{"tile=64", "tile=128"});
}

TEST_CASE("the ops catalog is every declared config of the ops families", "[jit][family][ops]") {
  std::vector<jit::FamilyBase*> fams = ops::families();
  size_t declared = 0;
  for (jit::FamilyBase* f : fams) {
    CHECK(jit::find_family(f->name()) == f);
    declared += f->config_count();
  }
  std::vector<ir::Kernel> cat = ops::catalog();
  CHECK(cat.size() == declared);
  std::vector<std::string> names;
  for (const auto& k : cat) names.push_back(k.name());
  for (const char* n : {"saxpy", "fused_silu_gate", "axpby_2d", "row_sum", "saxpy_f16", "saxpy_bf16"})
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
}
