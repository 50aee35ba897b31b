// jit_latency: where the time of a kernel compile goes, beside the raw floors measured in
// the same run.
//   codegen        emit_ptx alone
//   nvJitLink      link_ptx alone on the same kind of PTX (unique entry names: nvJitLink
//                  answers identical PTX from an internal cache)
//   cold           jit::compile of a never-seen kernel (key, codegen, link, queued cache write)
//   disk hit       jit::compile + module load in a fresh process, against the floor of the
//                  same process: LMDB get + cuModuleLoadData of another record
//   memory hit     jit::compile of a kernel this process already compiled
// Usage: jit_latency [--rounds N]   (the disk-hit rows need a GPU)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/codegen/ptx.h"
#include "kaio/jit/driver.h"
#include "kaio/jit/linker.h"
#include "kaio/kaio.h"

using namespace kaio;
using Clock = std::chrono::steady_clock;

namespace {

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

ir::Kernel trivial(const std::string& name) {
  ir::KernelBuilder b(name);
  auto x = b.param<float*>("x");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value xi = x[i];
    x[i] = xi + 1.0f;
  });
  return b.build();
}

// About a thousand PTX lines: a long unrolled chain of dependent math.
ir::Kernel large(const std::string& name) {
  ir::KernelBuilder b(name);
  auto x = b.param<const float*>("x");
  auto y = b.param<float*>("y");
  auto n = b.param<uint32_t>("n");
  auto i = b.global_id_x();
  b.if_(i < n, [&] {
    ir::Value v = x[i];
    auto acc = b.var<float>(0.0f);
    for (int k = 0; k < 42; ++k) {
      ir::Value t = ir::fma(v, 1.0f + 0.01f * k, ir::Value(acc));
      ir::Value s = ir::rsqrt(t * t + 1.0f);
      acc = ir::select(t > 0.0f, t * s, ir::max(t, -1.0f * k));
      acc += ir::cast<float>(ir::cast<int32_t>(ir::Value(acc)) & (k | 1));
    }
    y[i] = acc;
  });
  return b.build();
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

struct Row {
  const char* kernel;
  int ptx_lines = 0;
  double codegen_us = 0, link_us = 0, cold_us = 0, disk_us = -1, floor_us = -1, mem_us = 0;
  double cold_nocache_us = 0, cold_flushed_us = 0;
  double parts[5] = {0, 0, 0, 0, 0};  // LMDB get, module load (floor); compile, load, get function (kaio)
};

ir::Kernel make(bool big, const std::string& name) { return big ? large(name) : trivial(name); }

// Child mode: one fresh process measures one disk hit and its floor. Both sides are warmed
// first the same way (one kaio compile + module load of a third record: driver, LMDB
// environment and kaio's statics), so the numbers compare steady-state costs.
int child(const std::string& dir, bool big, const std::string& floor_name, const std::string& kaio_name,
          const std::string& warm_name, bool kaio_first) {
  jit::driver::ensure_context();
  const auto& api = jit::driver::api();
  const std::string& arch = jit::driver::device_arch();
  ir::Kernel kf = make(big, floor_name), kk = make(big, kaio_name), kw = make(big, warm_name);
  jit::compile(kw, {.cache_dir = dir}).load();
  auto store = cache::Store::open(dir);
  std::string fkey = jit::cache_key(kf, arch).bytes();
  double get_us = 0, load_us = 0, compile_us = 0, kload_us = 0, resolve_us = 0;
  bool hit = false;
  auto floor = [&] {
    auto t0 = Clock::now();
    auto bytes = store->get("kernels", fkey);
    get_us = since_us(t0);
    auto rec = cache::decode_record(*bytes);
    CUmodule m;
    t0 = Clock::now();
    jit::driver::check(api.module_load_data(&m, rec->cubin.data()), "floor load");
    load_us = since_us(t0);
  };
  auto kaio = [&] {
    auto t0 = Clock::now();
    jit::CompiledKernel ck = jit::compile(kk, {.cache_dir = dir});
    compile_us = since_us(t0);
    t0 = Clock::now();
    ck.load();
    kload_us = since_us(t0);
    hit = ck.from_cache();
    t0 = Clock::now();
    ck.resolve();  // not part of either side: the floor stops at cuModuleLoadData
    resolve_us = since_us(t0);
  };
  if (kaio_first) {
    kaio();
    floor();
  } else {
    floor();
    kaio();
  }
  std::printf("%d %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", hit ? 1 : 0, get_us + load_us, compile_us + kload_us, get_us,
              load_us, compile_us, kload_us, resolve_us);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 8 && !std::strcmp(argv[1], "--child"))
    return child(argv[2], argv[3][0] == '1', argv[4], argv[5], argv[6], argv[7][0] == '1');
  int rounds = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[++i]);

  char tmpl[] = "/tmp/kaio-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  bool gpu = jit::driver::available();
  std::string arch = gpu ? jit::driver::device_arch() : "sm_90";
  std::string tag = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  auto [pm, pn] = codegen::ptx_isa_for_toolkit(jit::nvjitlink_version().first, jit::nvjitlink_version().second);
  codegen::Target target{arch, pm, pn};

  std::vector<Row> rows;
  for (bool big : {false, true}) {
    Row row{big ? "large" : "trivial"};
    std::vector<double> cg, lk, cold, mem, nocache, flushed;
    int n = big ? std::max(5, rounds / 2) : rounds;
    for (int r = 0; r < n + 2; ++r) {  // rounds 0 and 1 warm up
      std::string base = std::string(big ? "big_" : "tiny_") + tag + "_" + std::to_string(r);
      ir::Kernel k = make(big, base + "_link");
      ir::Kernel kc = make(big, base + "_cold");
      double t_cg = 0, t_lk = 0, t_cold = 0;
      // Alternate which of the two is timed first, so that neither gains from the order.
      auto time_link = [&] {
        auto t0 = Clock::now();
        std::string ptx = codegen::emit_ptx(k, target);
        t_cg = since_us(t0);
        row.ptx_lines = count_lines(ptx);
        t0 = Clock::now();
        jit::link_ptx(ptx, arch, k.name());
        t_lk = since_us(t0);
      };
      auto time_cold = [&] {
        auto t0 = Clock::now();
        jit::CompiledKernel ck = jit::compile(kc, {.arch = arch, .cache_dir = dir});
        t_cold = since_us(t0);
      };
      // Diagnostics: the same without the disk cache, and with earlier writes finished first.
      ir::Kernel kn = make(big, base + "_nocache"), kf = make(big, base + "_flushed");
      auto t0 = Clock::now();
      jit::compile(kn, {.arch = arch, .use_cache = false});
      double t_nocache = since_us(t0);
      jit::flush_cache_writes();
      t0 = Clock::now();
      jit::compile(kf, {.arch = arch, .cache_dir = dir});
      double t_flushed = since_us(t0);
      if (r % 2) {
        time_link();
        time_cold();
      } else {
        time_cold();
        time_link();
      }
      if (r < 2) continue;
      cg.push_back(t_cg);
      lk.push_back(t_lk);
      cold.push_back(t_cold);
      nocache.push_back(t_nocache);
      flushed.push_back(t_flushed);
    }
    // In-process hit: the same kernel again, many times.
    ir::Kernel hot = make(big, std::string(big ? "big_" : "tiny_") + tag + "_hot");
    jit::compile(hot, {.arch = arch, .cache_dir = dir});
    for (int rep = 0; rep < 21; ++rep) {
      const int calls = 20000;
      auto t0 = Clock::now();
      for (int c = 0; c < calls; ++c) {
        jit::CompiledKernel ck = jit::compile(hot, {.arch = arch, .cache_dir = dir});
        if (!ck.from_cache()) std::abort();
      }
      mem.push_back(since_us(t0) / calls);
    }
    row.codegen_us = median(cg);
    row.link_us = median(lk);
    row.cold_us = median(cold);
    row.cold_nocache_us = median(nocache);
    row.cold_flushed_us = median(flushed);
    row.mem_us = median(mem);

    if (gpu) {
      // Records for the fresh-process disk hits: per round a floor, a kaio and a warm-up kernel.
      std::vector<double> fl, dh, parts[5];
      int dn = 15;
      for (int r = 0; r < dn; ++r) {
        std::string base = std::string(big ? "dbig_" : "dtiny_") + tag + "_" + std::to_string(r);
        for (const char* s : {"_f", "_k", "_w"}) jit::compile(make(big, base + s), {.arch = arch, .cache_dir = dir});
      }
      jit::flush_cache_writes();
      for (int r = 0; r < dn; ++r) {
        std::string base = std::string(big ? "dbig_" : "dtiny_") + tag + "_" + std::to_string(r);
        std::string cmd = std::string(argv[0]) + " --child " + dir + " " + (big ? "1 " : "0 ") + base + "_f " + base +
                          "_k " + base + "_w " + (r % 2 ? "1" : "0");
        FILE* p = popen(cmd.c_str(), "r");
        int hit = 0;
        double f = 0, k = 0, g = 0, l = 0, c = 0, kl = 0, rs = 0;
        if (p && std::fscanf(p, "%d %lf %lf %lf %lf %lf %lf %lf", &hit, &f, &k, &g, &l, &c, &kl, &rs) == 8 && hit == 1) {
          fl.push_back(f);
          dh.push_back(k);
          parts[0].push_back(g);
          parts[1].push_back(l);
          parts[2].push_back(c);
          parts[3].push_back(kl);
          parts[4].push_back(rs);
        }
        if (p) pclose(p);
      }
      row.floor_us = median(fl);
      row.disk_us = median(dh);
      for (int q = 0; q < 5; ++q) row.parts[q] = median(parts[q]);
    }
    rows.push_back(row);
  }
  std::string rm = "rm -rf " + dir;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());

  std::printf("\njit_latency on %s (%s), medians; %d rounds (large: %d)\n", gpu ? arch.c_str() : "no GPU",
              jit::toolchain_id().c_str(), rounds, std::max(5, rounds / 2));
  std::printf("| kernel  | PTX lines | codegen us | nvJitLink us | codegen/link | cold us | cold/link | disk hit us | LMDB get+load us | hit/floor | memory hit us |\n");
  std::printf("|---------|-----------|------------|--------------|--------------|---------|-----------|-------------|------------------|-----------|---------------|\n");
  for (const Row& r : rows) {
    char disk[64] = "n/a", floor[64] = "n/a", ratio[64] = "n/a";
    if (r.disk_us >= 0) {
      std::snprintf(disk, sizeof disk, "%.1f", r.disk_us);
      std::snprintf(floor, sizeof floor, "%.1f", r.floor_us);
      std::snprintf(ratio, sizeof ratio, "%.3f", r.disk_us / r.floor_us);
    }
    std::printf("| %-7s | %9d | %10.1f | %12.1f | %11.2f%% | %7.1f | %9.3f | %11s | %16s | %9s | %13.3f |\n", r.kernel,
                r.ptx_lines, r.codegen_us, r.link_us, 100.0 * r.codegen_us / r.link_us, r.cold_us,
                r.cold_us / r.link_us, disk, floor, ratio, r.mem_us);
  }
  std::printf("targets: codegen/link <= 2%%, cold/link <= 1.05, hit/floor <= 1.2, memory hit <= 0.5 us\n");
  std::printf("diagnostics (us): kernel | cold without disk cache | cold after pending writes finished | floor: LMDB get, module load | kaio: compile, module load | cuModuleGetFunction after\n");
  for (const Row& r : rows)
    std::printf("  %-7s | %9.1f | %9.1f | %7.1f %7.1f | %7.1f %7.1f | %7.1f\n", r.kernel, r.cold_nocache_us,
                r.cold_flushed_us, r.parts[0], r.parts[1], r.parts[2], r.parts[3], r.parts[4]);
  return 0;
}
