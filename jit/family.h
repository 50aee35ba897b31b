// Kernel families: op-level caching without IR rebuilds.
//
// A family turns a small config struct (dtype, shape bucket, vector width, tile sizes, ...)
// into a built kernel, and caches the loaded CompiledKernel per config, so that an op's call
// path costs a lookup, not a builder run plus an IR hash:
//
//   struct SoftmaxCfg {
//     ir::Scalar dtype; uint32_t cols_bucket; uint32_t vec;
//     auto fields() const { return std::tie(dtype, cols_bucket, vec); }  // what selects the kernel
//   };
//   jit::Family<SoftmaxCfg> softmax("softmax", [](const SoftmaxCfg& c) { return build_softmax(c); },
//                                   {/* the declared config table */});
//   softmax.get(cfg).launch(lc, x, y, n);     // or softmax.launch(cfg, lc, x, y, n)
//
// A config needs only `fields()`: a std::tie of the members that select the kernel
// (integers, enums such as ir::Scalar, bool, floating point, std::string). Equality and the
// hash are taken over them. An optional `std::string str() const` names the config in
// listings (default: "name(f32, 1024, 4)").
//
// get(): a per-thread last-hit slot, then a sharded map (shared locks) to a loaded kernel;
// the builder runs only on a miss (builds() counts builder runs), and concurrent first
// calls of one config run it once. The family compiles with its CompileOptions (empty arch:
// the backend's default, i.e. this device, and then loads the kernel too). A family keeps
// every config it has served for its lifetime, so references from get() stay valid as long
// as the family does; keep the number of configs bounded by bucketing shapes.
//
// Families register themselves by name (unique among live families) for kaio-precompile
// and the tuner: families() lists them, configs() / config_names() enumerate the declared
// table, precompile(options) compiles it for any arch (no GPU needed).
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kaio/ir/kernel.h"
#include "kaio/ir/types.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/compiled_kernel.h"

namespace kaio::jit {

template <class C>
concept FamilyConfig = std::copy_constructible<C> && requires(const C& c) { c.fields(); };

// One result of FamilyBase::precompile: the kernel, or why it failed.
struct FamilyCompileResult {
  std::string family, config;
  CompiledKernel kernel;  // invalid when error is set
  std::string error;
};

// The type-erased side of a family: what registries, kaio-precompile and the tuner use.
class FamilyBase {
 public:
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;
  virtual ~FamilyBase();

  const std::string& name() const { return name_; }
  const CompileOptions& options() const { return options_; }
  // Builder runs so far (misses of get(), kernel(), precompile()).
  uint64_t builds() const { return builds_.load(std::memory_order_relaxed); }

  // The declared config table.
  virtual size_t config_count() const = 0;
  virtual std::string config_name(size_t i) const = 0;
  std::vector<std::string> config_names() const;
  // Builds the kernel of the i-th declared config (runs the builder).
  virtual ir::Kernel declared_kernel(size_t i) const = 0;
  // Configs compiled and held in memory by get().
  virtual size_t loaded_count() const = 0;

  // Compiles every declared config with `options` (e.g. {.arch = "sm_90"}) into the
  // caches; one failure does not stop the others.
  std::vector<FamilyCompileResult> precompile(const CompileOptions& options) const;

 protected:
  FamilyBase(std::string name, CompileOptions options);
  uint64_t id() const { return id_; }
  mutable std::atomic<uint64_t> builds_{0};

 private:
  std::string name_;
  CompileOptions options_;
  uint64_t id_;
};

// The live families, in registration order. The pointers are valid while the families live
// (families are meant to be long-lived, e.g. function-local statics).
std::vector<FamilyBase*> families();
FamilyBase* find_family(std::string_view name);
// precompile() of every live family.
std::vector<FamilyCompileResult> precompile_families(const CompileOptions& options);

namespace detail {

inline size_t hash_mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

template <class T>
size_t hash_field(const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_enum_v<U>) return std::hash<std::underlying_type_t<U>>{}(static_cast<std::underlying_type_t<U>>(v));
  else return std::hash<U>{}(v);
}

template <class T>
std::string describe_field(const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, ir::Scalar>) return ir::scalar_name(v);
  else if constexpr (std::is_same_v<U, bool>) return v ? "true" : "false";
  else if constexpr (std::is_enum_v<U>) return std::to_string(static_cast<long long>(v));
  else if constexpr (std::is_arithmetic_v<U>) return std::to_string(v);
  else if constexpr (std::is_convertible_v<U, std::string>) return std::string(v);
  else return "?";
}

template <FamilyConfig C>
struct ConfigHash {
  size_t operator()(const C& c) const {
    return std::apply([](const auto&... f) {
      size_t h = 0;
      ((h = hash_mix(h, hash_field(f))), ...);
      return h;
    }, c.fields());
  }
};

template <FamilyConfig C>
struct ConfigEq {
  bool operator()(const C& a, const C& b) const { return a.fields() == b.fields(); }
};

template <FamilyConfig C>
std::string describe_config(const std::string& family, const C& c) {
  if constexpr (requires { { c.str() } -> std::convertible_to<std::string>; }) {
    return c.str();
  } else {
    std::string s = family + "(";
    bool first = true;
    std::apply([&](const auto&... f) { ((s += (first ? "" : ", ") + describe_field(f), first = false), ...); }, c.fields());
    return s + ")";
  }
}

// Registry hooks (family.cpp).
void register_family(FamilyBase* f);
void unregister_family(FamilyBase* f) noexcept;
uint64_t next_family_id();
// Makes a freshly compiled kernel launchable when the family targets the backend's default
// arch (loads its module), so that the first launch costs what later ones do.
void prepare_for_launch(const CompiledKernel& k, const CompileOptions& o);

}  // namespace detail

template <FamilyConfig Cfg>
class Family final : public FamilyBase {
 public:
  using Builder = std::function<ir::Kernel(const Cfg&)>;

  // `configs` is the declared table (what precompile() and the tuner see); get() accepts any
  // config. Throws UsageError when a live family has this name already.
  Family(std::string name, Builder builder, std::vector<Cfg> configs = {}, CompileOptions options = {})
      : FamilyBase(std::move(name), std::move(options)), builder_(std::move(builder)), configs_(std::move(configs)) {
    if (!builder_) throw UsageError("", "Family", "family '" + this->name() + "' has no builder");
    detail::register_family(this);
  }
  ~Family() override { detail::unregister_family(this); }

  // The compiled (and, for the default arch, loaded) kernel of `c`. The hot path: a per-thread
  // last hit, then a shared-locked shard of the map; the builder runs only on a miss.
  const CompiledKernel& get(const Cfg& c) const {
    LastHit& last = last_hit();
    if (last.family == id() && last.entry && detail::ConfigEq<Cfg>{}(*last.cfg, c)) return last.entry->kernel;
    return get_slow(c, last);
  }

  template <class... A>
  void launch(const Cfg& c, const LaunchConfig& lc, const A&... args) const {
    get(c).launch(lc, args...);
  }

  // The IR of `c` (runs the builder; counted in builds()).
  ir::Kernel kernel(const Cfg& c) const {
    builds_.fetch_add(1, std::memory_order_relaxed);
    return builder_(c);
  }

  const std::vector<Cfg>& configs() const { return configs_; }
  std::string describe(const Cfg& c) const { return detail::describe_config(name(), c); }

  size_t config_count() const override { return configs_.size(); }
  std::string config_name(size_t i) const override { return describe(configs_.at(i)); }
  ir::Kernel declared_kernel(size_t i) const override { return kernel(configs_.at(i)); }
  size_t loaded_count() const override {
    size_t n = 0;
    for (const Shard& s : shards_) {
      std::shared_lock<std::shared_mutex> g(s.m);
      n += s.map.size();
    }
    return n;
  }

 private:
  struct Entry {
    std::mutex m;              // held while the builder and compile() run
    std::atomic<bool> ready{false};
    CompiledKernel kernel;     // written once, before `ready`
  };
  struct alignas(64) Shard {
    mutable std::shared_mutex m;
    std::unordered_map<Cfg, std::unique_ptr<Entry>, detail::ConfigHash<Cfg>, detail::ConfigEq<Cfg>> map;
  };
  struct LastHit {
    uint64_t family = 0;  // ids are never reused, so a slot of a destroyed family never matches
    std::optional<Cfg> cfg;
    const Entry* entry = nullptr;
  };
  static constexpr size_t kShards = 16;

  static LastHit& last_hit() {
    static thread_local LastHit slot;
    return slot;
  }

  const CompiledKernel& get_slow(const Cfg& c, LastHit& last) const {
    Shard& sh = shards_[detail::ConfigHash<Cfg>{}(c) % kShards];
    Entry* e = nullptr;
    {
      std::shared_lock<std::shared_mutex> g(sh.m);
      auto it = sh.map.find(c);
      if (it != sh.map.end()) e = it->second.get();
    }
    if (!e) {
      std::unique_lock<std::shared_mutex> g(sh.m);
      auto& slot = sh.map[c];
      if (!slot) slot = std::make_unique<Entry>();
      e = slot.get();
    }
    if (!e->ready.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> g(e->m);  // concurrent first calls: one builds, the others wait
      if (!e->ready.load(std::memory_order_relaxed)) {
        ir::Kernel k = kernel(c);  // a throw leaves the entry unbuilt: the next call tries again
        CompiledKernel ck = compile(k, options());
        detail::prepare_for_launch(ck, options());
        e->kernel = std::move(ck);
        e->ready.store(true, std::memory_order_release);
      }
    }
    last.family = id();
    last.cfg.emplace(c);
    last.entry = e;
    return e->kernel;
  }

  Builder builder_;
  std::vector<Cfg> configs_;
  mutable Shard shards_[kShards];
};

}  // namespace kaio::jit
