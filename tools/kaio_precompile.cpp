// kaio-precompile: compiles the kernels an application will need into the kernel cache, so
// that it starts warm, for one or more SMs. What to compile is a JSON manifest (the built-in
// default covers every ops family and every matmul variant); no GPU is needed, except with
// --tune, which also tunes the manifest's matmul shapes on this machine's GPU.
//
// Manifest (README "kaio-precompile"):
//   { "families": "all" | ["saxpy", "row_sum", ...],        every declared config of each
//     "matmul": [ { "in": "f16", "out": "f32",               f32 | f16 | bf16 | e4m3 | e5m2
//                   "tf32": false,                           f32 inputs on tensor cores
//                   "layouts": ["row/row", "row/col"],       A/B: row | col (default row/row)
//                   "shapes": [[4096, 4096, 4096], [16, 4096, 4096, 8]] } ] }   m, n, k[, batch]
// For each matmul entry, layout and arch, every variant whose can_implement accepts one of
// the shapes is compiled; --tune tunes each shape (ops/matmul_tune.h).
//
// --push publishes what was compiled (and tuned) to the fleet's remote tier
// (KAIO_REMOTE_CACHE or --remote; signed with KAIO_REMOTE_CACHE_KEY_FILE): a build box
// without a GPU compiles the manifest for the fleet's SMs once, every node reads it.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "kaio/codegen/ptx.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/compile.h"
#include "kaio/jit/device.h"
#include "kaio/jit/driver.h"
#include "kaio/ops/catalog.h"
#include "kaio/ops/matmul.h"
#include "kaio/ops/matmul_tune.h"
#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache_remote.h"
#include "kaio_cache_remote.h"

using namespace kaio;
using json = nlohmann::json;

namespace {

constexpr const char* kDefaultManifest = R"({
  "families": "all",
  "matmul": [
    {"in": "f32", "out": "f32", "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]},
    {"in": "f32", "out": "f32", "tf32": true, "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]},
    {"in": "f16", "out": "f32", "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]},
    {"in": "f16", "out": "f16", "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]},
    {"in": "bf16", "out": "f32", "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]},
    {"in": "bf16", "out": "bf16", "layouts": ["row/row", "row/col", "col/row", "col/col"],
     "shapes": [[1024, 1024, 1024], [4096, 4096, 4096], [1, 4096, 4096]]}
  ]
})";

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MatmulEntry {
  ir::Scalar in, out;
  bool tf32 = false;
  std::vector<std::pair<ops::MatLayout, ops::MatLayout>> layouts;
  std::vector<std::array<uint32_t, 4>> shapes;  // m, n, k, batch
};

struct Manifest {
  std::vector<jit::FamilyBase*> families;
  std::vector<MatmulEntry> matmul;
};

ir::Scalar parse_type(const json& v, const std::string& where) {
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s == "f32") return ir::Scalar::F32;
  if (s == "f16") return ir::Scalar::F16;
  if (s == "bf16") return ir::Scalar::BF16;
  if (s == "e4m3") return ir::Scalar::E4M3;  // FP8: the Wgmma rows, A row-major and B column-major
  if (s == "e5m2") return ir::Scalar::E5M2;
  throw Failure(where + ": '" + s + "' is not one of f32, f16, bf16, e4m3, e5m2");
}

ops::MatLayout parse_layout(const std::string& s, const std::string& where) {
  if (s == "row") return ops::MatLayout::RowMajor;
  if (s == "col") return ops::MatLayout::ColMajor;
  throw Failure(where + ": '" + s + "' is not row or col");
}

void only_keys(const json& o, const std::set<std::string>& allowed, const std::string& where) {
  for (auto it = o.begin(); it != o.end(); ++it)
    if (!allowed.count(it.key())) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw Failure(where + ": unknown key '" + it.key() + "' (known: " + list + ")");
    }
}

// Every error names the manifest and the place in it.
Manifest parse_manifest(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Failure("manifest " + name + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Failure("manifest " + name + ": the top level must be an object");
  only_keys(j, {"families", "matmul"}, "manifest " + name);
  Manifest m;
  std::vector<jit::FamilyBase*> known = ops::families();
  std::erase_if(known, [](jit::FamilyBase* f) { return f->name() == "matmul"; });  // the "matmul" section covers it
  if (j.contains("families")) {
    const json& f = j["families"];
    if (f.is_string() && f.get<std::string>() == "all") {
      m.families = known;
    } else if (f.is_array()) {
      for (const json& e : f) {
        const std::string n = e.is_string() ? e.get<std::string>() : e.dump();
        auto it = std::find_if(known.begin(), known.end(), [&](auto* x) { return x->name() == n; });
        if (it == known.end()) {
          std::string list;
          for (auto* x : known) list += (list.empty() ? "" : ", ") + x->name();
          throw Failure("manifest " + name + ": families: no family is called '" + n + "' (known: " + list + ")");
        }
        m.families.push_back(*it);
      }
    } else {
      throw Failure("manifest " + name + ": families must be \"all\" or an array of family names");
    }
  }
  if (j.contains("matmul")) {
    if (!j["matmul"].is_array()) throw Failure("manifest " + name + ": matmul must be an array");
    size_t i = 0;
    for (const json& e : j["matmul"]) {
      const std::string where = "manifest " + name + ": matmul[" + std::to_string(i++) + "]";
      if (!e.is_object()) throw Failure(where + " must be an object");
      only_keys(e, {"in", "out", "tf32", "layouts", "shapes"}, where);
      if (!e.contains("in")) throw Failure(where + ": 'in' (the input type) is missing");
      MatmulEntry me;
      me.in = parse_type(e["in"], where + ".in");
      me.out = e.contains("out") ? parse_type(e["out"], where + ".out") : ir::Scalar::F32;
      if (e.contains("tf32")) {
        if (!e["tf32"].is_boolean()) throw Failure(where + ".tf32 must be true or false");
        me.tf32 = e["tf32"];
      }
      const json lay = e.contains("layouts") ? e["layouts"] : json::array({"row/row"});
      if (!lay.is_array() || lay.empty()) throw Failure(where + ".layouts must be a non-empty array like [\"row/col\"]");
      for (const json& l : lay) {
        const std::string s = l.is_string() ? l.get<std::string>() : l.dump();
        const auto slash = s.find('/');
        if (slash == std::string::npos) throw Failure(where + ".layouts: '" + s + "' is not A/B, e.g. row/col");
        me.layouts.emplace_back(parse_layout(s.substr(0, slash), where + ".layouts"),
                                parse_layout(s.substr(slash + 1), where + ".layouts"));
      }
      if (!e.contains("shapes") || !e["shapes"].is_array() || e["shapes"].empty())
        throw Failure(where + ".shapes must be a non-empty array of [m, n, k] or [m, n, k, batch]");
      for (const json& s : e["shapes"]) {
        if (!s.is_array() || s.size() < 3 || s.size() > 4)
          throw Failure(where + ".shapes: " + s.dump() + " is not [m, n, k] or [m, n, k, batch]");
        std::array<uint32_t, 4> sh{0, 0, 0, 1};
        for (size_t d = 0; d < s.size(); ++d) {
          if (!s[d].is_number_unsigned() || s[d].get<uint64_t>() == 0 || s[d].get<uint64_t>() > 0xFFFFFFFFull)
            throw Failure(where + ".shapes: " + s.dump() + ": sizes must be positive integers");
          sh[d] = s[d].get<uint32_t>();
        }
        me.shapes.push_back(sh);
      }
      m.matmul.push_back(std::move(me));
    }
  }
  return m;
}

ops::MatmulProblem problem_of(const MatmulEntry& e, std::pair<ops::MatLayout, ops::MatLayout> l, const std::array<uint32_t, 4>& s) {
  ops::MatmulProblem p;
  p.m = s[0];
  p.n = s[1];
  p.k = s[2];
  p.batch = s[3];
  p.in = e.in;
  p.out = e.out;
  p.tf32 = e.tf32;
  p.a = l.first;
  p.b = l.second;
  return p;
}

struct Job {
  std::string label, arch;
  std::function<ir::Kernel()> build;
};

// The kernels of the manifest for one arch, without duplicates.
void add_jobs(const Manifest& m, const std::string& arch, std::vector<Job>& jobs) {
  const int sm = codegen::parse_arch(arch).sm;
  for (jit::FamilyBase* f : m.families) {
    // A family of sm_90a-only kernels (the wgmma attention kernel) has nothing for other SMs.
    if (sm != 90 && f->config_count() > 0 && f->declared_kernel(0).arch_specific()) continue;
    for (size_t i = 0; i < f->config_count(); ++i)
      jobs.push_back({f->config_name(i), arch, [f, i] { return f->declared_kernel(i); }});
  }
  std::set<std::tuple<uint32_t, int, int, int, int>> seen;
  const auto variants = ops::matmul_variants();
  for (const MatmulEntry& e : m.matmul)
    for (const auto& l : e.layouts)
      for (uint32_t v = 0; v < variants.size(); ++v)
        for (const auto& s : e.shapes) {
          if (!variants[v].can_implement(problem_of(e, l, s), sm)) continue;
          const ops::MatmulConfig cfg{v, e.in, e.out, l.first, l.second};
          if (seen.insert({v, int(e.in), int(e.out), int(l.first), int(l.second)}).second)
            jobs.push_back({cfg.str(), arch, [cfg] { return ops::matmul_kernel(cfg); }});
          break;
        }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kaio-precompile: compile the kernels of a manifest (default: every ops family and matmul variant) "
               "into the kernel cache",
               "kaio-precompile"};
  std::vector<std::string> archs;
  std::string cache_dir, manifest_file;
  bool force = false, list = false, print_manifest = false, tune = false, verbose = false;
  unsigned jobs_n = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("-a,--arch", archs,
                 "Target SMs: a comma list and/or repeated (sm_80,sm_90 or -a sm_80 -a sm_90); 'native' is this "
                 "machine's GPU (default: native with a GPU, else sm_90)")
      ->delimiter(',')
      ->type_name("ARCH");
  app.add_option("-m,--manifest", manifest_file, "JSON manifest of what to compile (default: the built-in one)")->type_name("FILE");
  app.add_option("-j,--jobs", jobs_n, "Parallel compiles (default: the number of cores)")->check(CLI::Range(1u, 1024u));
  app.add_option("--cache-dir", cache_dir, "Cache directory (overrides KAIO_CACHE_DIR)")->type_name("DIR");
  app.add_flag("-f,--force", force, "Recompile even when cached");
  app.add_flag("-l,--list", list, "List the kernels of the manifest and exit");
  app.add_flag("--print-manifest", print_manifest, "Print the built-in manifest and exit");
  app.add_flag("--tune", tune, "Also tune the manifest's matmul shapes on this machine's GPU (needs a GPU)");
  app.add_flag("-v,--verbose", verbose, "One line per kernel");
  bool push = false;
  std::string remote_url;
  app.add_flag("--push", push,
               "Publish the compiled kernels (and --tune's records) to the remote tier (KAIO_REMOTE_CACHE or --remote; "
               "signed with KAIO_REMOTE_CACHE_KEY_FILE)");
  app.add_option("--remote", remote_url, "redis://[user:password@]host:port[/db] for --push (default: $KAIO_REMOTE_CACHE)")
      ->type_name("URL");
  CLI11_PARSE(app, argc, argv);

  if (print_manifest) {
    std::printf("%s\n", kDefaultManifest);
    return 0;
  }
  try {
    // The tuner and the compiles read the same cache.
    if (!cache_dir.empty()) setenv("KAIO_CACHE_DIR", cache_dir.c_str(), 1);
    std::string text = kDefaultManifest, name = "(built-in)";
    if (!manifest_file.empty()) {
      std::ifstream in(manifest_file);
      if (!in) throw Failure("cannot read the manifest " + manifest_file);
      text.assign(std::istreambuf_iterator<char>(in), {});
      name = manifest_file;
    }
    const Manifest manifest = parse_manifest(text, name);
    if (push) {
      // Checked before compiling: a push that cannot happen should not cost the compiles.
      if (!remote_url.empty()) setenv("KAIO_REMOTE_CACHE", remote_url.c_str(), 1);  // --tune's records too
      std::string error;
      auto rs = jit::remote::resolve(remote_url, &error);
      if (!rs) throw Failure(!error.empty() ? error : "--push: no remote cache (set KAIO_REMOTE_CACHE or pass --remote)");
      if (!rs->can_publish())
        throw Failure("--push: the remote cache is read-only without KAIO_REMOTE_CACHE_KEY_FILE (a shared signing key)");
    }
    const bool gpu = jit::interpret_mode() || jit::driver::available();
    if (tune && !gpu)
      throw Failure("--tune times kernels on a GPU and this machine has none (no CUDA driver or device); "
                    "leave --tune out to compile only");
    if (archs.empty()) archs.push_back(gpu && !jit::interpret_mode() ? "native" : "sm_90");
    std::vector<std::string> targets;
    for (const std::string& a : archs) {
      if (a.empty()) continue;
      const std::string t = a == "native" ? jit::driver::device_arch() : a;
      try {
        codegen::parse_arch(t);
      } catch (const std::exception&) {
        throw Failure("--arch: '" + a + "' is not an SM like sm_80, sm_90 or sm_90a");
      }
      if (std::find(targets.begin(), targets.end(), t) == targets.end()) targets.push_back(t);
    }
    if (targets.empty()) throw Failure("--arch: no target SM given");

    std::vector<Job> jobs;
    for (const std::string& t : targets) add_jobs(manifest, t, jobs);
    if (list) {
      for (const Job& j : jobs) std::printf("%-60s %s\n", j.label.c_str(), j.arch.c_str());
      std::printf("%zu kernels\n", jobs.size());
      return 0;
    }

    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0}, done{0}, compiled{0}, cached{0}, failed{0}, warmed{0};
    // A kernel that moves registers between warpgroups (setmaxnreg) runs from the driver's
    // whole-program compile of its PTX, kept in the driver's compute cache: on a machine whose
    // GPU is the target, load it once here, so that the first process to launch it does not
    // pay that compile (0.3-1.7 s a kernel on an H200).
    const jit::DeviceInfo& dev = jit::device_info();
    auto warms = [&](const ir::Kernel& k, const std::string& arch) {
      return k.reallocates_registers() && dev.present && !jit::interpret_mode() &&
             arch.compare(0, dev.arch.size(), dev.arch) == 0;
    };
    std::mutex out_m;
    std::vector<std::string> keys(jobs.size());  // for --push: what this manifest compiled
    const bool tty = isatty(fileno(stderr));
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
        const Job& j = jobs[i];
        std::string line, err;
        try {
          const ir::Kernel k = j.build();
          // As on a device of that SM: kernels with sm_90a-only instructions (the wgmma
          // matmul variants, the wgmma attention kernel) compile for sm_90a, everything else
          // for the SM as given.
          const std::string arch = k.arch_specific() && j.arch == "sm_90" ? "sm_90a" : j.arch;
          jit::CompiledKernel ck = jit::compile(k, {.arch = arch, .force = force, .cache_dir = cache_dir});
          (ck.from_cache() ? cached : compiled).fetch_add(1);
          keys[i] = ck.key().bytes();
          if (warms(k, arch)) {
            ck.load();
            warmed.fetch_add(1);
          }
          line = std::string(ck.from_cache() ? "cached  " : "compiled") + "  " + j.label + "  " + arch;
        } catch (const std::exception& e) {
          failed.fetch_add(1);
          err = j.label + " for " + j.arch + " failed: " + e.what();
        }
        const size_t d = done.fetch_add(1) + 1;
        std::lock_guard<std::mutex> g(out_m);
        if (!err.empty()) std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", err.c_str());
        if (verbose) std::printf("[%zu/%zu] %s\n", d, jobs.size(), line.c_str());
        if (tty)
          std::fprintf(stderr, "\r\033[K[%zu/%zu] compiled %zu, cached %zu, failed %zu  %s", d, jobs.size(),
                       compiled.load(), cached.load(), failed.load(), j.label.c_str());
        std::fflush(stdout);
      }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < std::min<size_t>(jobs_n, std::max<size_t>(jobs.size(), 1)); ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    if (tty) std::fprintf(stderr, "\r\033[K");
    jit::flush_cache_writes();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string arch_list;
    for (const auto& t : targets) arch_list += (arch_list.empty() ? "" : ", ") + t;
    std::printf("%zu kernels for %s: compiled %zu, already cached %zu, failed %zu, %.1f s\n", jobs.size(),
                arch_list.c_str(), compiled.load(), cached.load(), failed.load(), secs);
    if (warmed.load())
      std::printf("%zu kernels with setmaxnreg loaded once on this %s (the driver's cache holds their whole-program "
                  "compile)\n", warmed.load(), dev.name.c_str());

    size_t tune_failed = 0;
    if (tune) {
      for (const MatmulEntry& e : manifest.matmul)
        for (const auto& l : e.layouts)
          for (const auto& s : e.shapes) {
            const ops::MatmulProblem p = problem_of(e, l, s);
            try {
              const tuner::MatmulChoice ch = tuner::choose_matmul(p, nullptr, force);
              const char* how = ch.source == tuner::MatmulChoice::Stored ? "stored" : ch.source == tuner::MatmulChoice::Tuned ? "tuned" : "untuned";
              std::printf("tune %s -> %s (%s%s)\n", tuner::matmul_key(p).c_str(), ch.variant->name, how,
                          ch.source == tuner::MatmulChoice::Tuned
                              ? (", " + std::to_string(ch.record.tune_seconds).substr(0, 4) + " s").c_str()
                              : "");
            } catch (const std::exception& x) {
              ++tune_failed;
              std::fprintf(stderr, "tune %ux%ux%u failed: %s\n", s[0], s[1], s[2], x.what());
            }
            std::fflush(stdout);
          }
    }
    size_t push_failed = 0;
    if (push) {
      jit::flush_cache_writes();
      std::vector<std::string> present;
      for (auto& k : keys)
        if (!k.empty()) present.push_back(std::move(k));
      std::sort(present.begin(), present.end());
      present.erase(std::unique(present.begin(), present.end()), present.end());
      tools::RemoteOptions ro;
      ro.url = remote_url;
      ro.force = force;
      auto store = cache::Store::open(cache_dir.empty() ? cache::default_dir() : std::filesystem::path(cache_dir));
      const tools::PushSummary ps = tools::push_keys(*store, present, ro);
      std::printf("push: %s\n", tools::describe(ps).c_str());
      push_failed = ps.failed;
    }
    return failed || tune_failed || push_failed ? 1 : 0;
  } catch (const Failure& e) {
    std::fprintf(stderr, "kaio-precompile: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kaio-precompile: %s\n", e.what());
    return 1;
  }
}
