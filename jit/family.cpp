#include "kaio/jit/family.h"

#include <algorithm>

#include "kaio/jit/backend.h"

namespace kaio::jit {

namespace {

struct Registry {
  std::mutex m;
  std::vector<FamilyBase*> list;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: families may outlive static destruction order
  return *r;
}

}  // namespace

namespace detail {

uint64_t next_family_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void register_family(FamilyBase* f) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  for (FamilyBase* o : r.list)
    if (o->name() == f->name())
      throw UsageError("", "Family", "a family named '" + f->name() + "' exists already (family names are unique)");
  r.list.push_back(f);
}

void unregister_family(FamilyBase* f) noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  r.list.erase(std::remove(r.list.begin(), r.list.end(), f), r.list.end());
}

void prepare_for_launch(const CompiledKernel& k, const CompileOptions& o) {
  if (o.arch.empty()) k.resolve();  // the backend's own arch: loadable here (a no-op when interpreted)
}

}  // namespace detail

FamilyBase::FamilyBase(std::string name, CompileOptions options)
    : name_(std::move(name)), options_(std::move(options)), id_(detail::next_family_id()) {
  if (name_.empty()) throw UsageError("", "Family", "a family needs a name");
}

FamilyBase::~FamilyBase() = default;

std::vector<std::string> FamilyBase::config_names() const {
  std::vector<std::string> out;
  out.reserve(config_count());
  for (size_t i = 0; i < config_count(); ++i) out.push_back(config_name(i));
  return out;
}

std::vector<FamilyCompileResult> FamilyBase::precompile(const CompileOptions& options) const {
  std::vector<FamilyCompileResult> out;
  for (size_t i = 0; i < config_count(); ++i) {
    FamilyCompileResult r{name_, config_name(i), {}, {}};
    try {
      r.kernel = compile(declared_kernel(i), options);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<FamilyBase*> families() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  return r.list;
}

FamilyBase* find_family(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  for (FamilyBase* f : r.list)
    if (f->name() == name) return f;
  return nullptr;
}

std::vector<FamilyCompileResult> precompile_families(const CompileOptions& options) {
  std::vector<FamilyCompileResult> out;
  for (FamilyBase* f : families()) {
    std::vector<FamilyCompileResult> r = f->precompile(options);
    out.insert(out.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
  }
  return out;
}

}  // namespace kaio::jit
