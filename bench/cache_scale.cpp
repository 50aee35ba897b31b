// cache_scale: does the disk cache stay fast as it fills up?
//   disk hit      jit::compile of a kernel whose record is on disk, after dropping the
//                 in-memory cache: key + LMDB lookup + decode in place + use-count buffer.
//                 No module load: no GPU needed (jit_latency measures the load on a GPU).
//   disk::read    the lookup inside that: LMDB visit + decode in place + buffering the hit.
//   floor         Store::get + decode_record of the same keys (copy out, then decode).
//   kaio-cache ls the tool over the whole cache, output to /dev/null (table and --json).
//   export/import cache::export_records / import_records (what kaio-cache runs), MB/s
//                 of record bytes.
// Records are synthetic (a ~3.7 KB fake cubin, so one record fills one overflow page);
// the ones the jit path looks up are stored under real keys (jit::cache_key of generated
// kernels) with this toolchain's id, so jit::compile serves them.
// Usage: cache_scale [--sizes 1,10000,100000] [--rounds N] [--tool PATH]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kaio/cache/archive.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"
#include "kaio/cache/store.h"
#include "kaio/jit/disk_cache.h"
#include "kaio/kaio.h"

using namespace kaio;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr int kRealKeys = 256;  // kernels looked up through jit::compile
constexpr size_t kCubinBytes = 3700;

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

ir::Kernel kernel(int i) {
  ir::KernelBuilder b("scale_" + std::to_string(i));
  auto x = b.param<float*>("x");
  auto n = b.param<uint32_t>("n");
  auto g = b.global_id_x();
  b.if_(g < n, [&] {
    ir::Value xi = x[g];
    x[g] = xi * (1.0f + static_cast<float>(i));
  });
  return b.build();
}

cache::Record fake_record(const std::string& name, uint64_t seed) {
  cache::Record r;
  r.name = name;
  r.arch = "sm_90";
  r.toolchain = jit::toolchain_id();
  r.created_unix = static_cast<uint64_t>(std::time(nullptr));
  r.cubin.resize(kCubinBytes);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (char& c : r.cubin) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  r.ptx = "// fake PTX of " + name + "\n.version 9.0\n.target sm_90\n.address_size 64\n";
  r.info_log = "ptxas info    : Used 8 registers";
  return r;
}

std::string filler_key(uint64_t i) {
  std::string k(16, '\0');
  uint64_t a = i * 0x9e3779b97f4a7c15ull ^ 0x51ed27a3, b = ~i * 0xc2b2ae3d27d4eb4full;
  std::memcpy(k.data(), &a, 8);
  std::memcpy(k.data() + 8, &b, 8);
  return k;
}

double run_tool(const std::string& cmd, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "failed: %s\n", cmd.c_str());
    t.push_back(since_us(t0) / 1000.0);
  }
  return percentile(t, 0.5);
}

struct Row {
  uint64_t records = 0;
  double fill_s = 0, hit_p50 = 0, hit_p90 = 0, read_p50 = 0, floor_p50 = 0;
  double ls_ms = -1, ls_json_ms = -1, export_mbs = -1, import_mbs = -1, file_mb = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {1, 10000, 100000};
  int rounds = 20;
  std::string tool = (fs::read_symlink("/proc/self/exe").parent_path() / "../tools/kaio-cache").lexically_normal().string();
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--tool")) tool = argv[++i];
    else if (!std::strcmp(argv[i], "--sizes")) {
      sizes.clear();
      for (char* s = std::strtok(argv[++i], ","); s; s = std::strtok(nullptr, ",")) sizes.push_back(std::strtoull(s, nullptr, 10));
    }
  }
  std::vector<ir::Kernel> kernels;
  for (int i = 0; i < kRealKeys; ++i) kernels.push_back(kernel(i));

  std::vector<Row> rows;
  for (uint64_t n : sizes) {
    Row row;
    row.records = n;
    char tmpl[] = "/tmp/kaio-scale-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const int real = static_cast<int>(std::min<uint64_t>(n, kRealKeys));
    {
      auto store = cache::Store::open(dir);
      auto t0 = Clock::now();
      // Fillers in transactions of 5000, then the records jit::compile will look up.
      for (uint64_t done = real; done < n;) {
        const uint64_t end = std::min(n, done + 5000);
        store->update([&](cache::Txn& t) {
          for (uint64_t i = done; i < end; ++i) t.put("kernels", filler_key(i), cache::encode_record(fake_record("filler", i)));
        });
        done = end;
      }
      store->update([&](cache::Txn& t) {
        for (int i = 0; i < real; ++i)
          t.put("kernels", jit::cache_key(kernels[i], "sm_90").bytes(), cache::encode_record(fake_record(kernels[i].name(), i)));
      });
      row.fill_s = since_us(t0) / 1e6;
      row.file_mb = static_cast<double>(store->usage().file_bytes) / 1e6;

      std::vector<double> hits, reads, floors;
      std::shared_ptr<cache::Store> shared = jit::disk::store_for(dir);
      for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
        for (int i = 0; i < real; ++i) {
          jit::clear_memory_cache();
          auto t1 = Clock::now();
          jit::CompiledKernel ck = jit::compile(kernels[i], {.arch = "sm_90", .cache_dir = dir});
          const double us = since_us(t1);
          if (!ck.from_cache()) {
            std::fprintf(stderr, "not served from the cache: %s\n", kernels[i].name().c_str());
            return 1;
          }
          const std::string key = ck.key().bytes();
          t1 = Clock::now();
          auto bytes = store->get("kernels", key);
          auto rec = cache::decode_record(*bytes);
          const double fl = since_us(t1);
          if (!rec) return 1;
          cache::Record out;
          t1 = Clock::now();
          const jit::disk::Lookup lk = jit::disk::read(shared, key, "sm_90", out);
          const double rd = since_us(t1);
          if (lk != jit::disk::Lookup::Hit) return 1;
          if (r > 0) {
            hits.push_back(us);
            reads.push_back(rd);
            floors.push_back(fl);
          }
        }
      }
      row.hit_p50 = percentile(hits, 0.5);
      row.hit_p90 = percentile(hits, 0.9);
      row.read_p50 = percentile(reads, 0.5);
      row.floor_p50 = percentile(floors, 0.5);
      jit::flush_cache_writes();  // the use counts of the hits

      if (n == sizes.back()) {
        const std::string q = "'" + tool + "' --cache-dir '" + dir + "' ";
        row.ls_ms = run_tool(q + "ls > /dev/null", 3);
        row.ls_json_ms = run_tool(q + "ls --json > /dev/null", 3);
        const std::string file = dir + ".export";
        auto t2 = Clock::now();
        cache::ExportResult ex = cache::export_records(*store, file);
        double s = since_us(t2) / 1e6;
        row.export_mbs = static_cast<double>(ex.bytes) / 1e6 / s;
        const std::string dir2 = dir + ".import";
        {
          auto dst = cache::Store::open(dir2);
          t2 = Clock::now();
          cache::ImportResult im = cache::import_records(*dst, file, jit::toolchain_id(), 0);
          s = since_us(t2) / 1e6;
          row.import_mbs = static_cast<double>(im.bytes) / 1e6 / s;
          if (im.imported != ex.records) std::fprintf(stderr, "imported %llu of %llu\n", (unsigned long long)im.imported, (unsigned long long)ex.records);
        }
        std::error_code ec;
        fs::remove(file, ec);
        fs::remove_all(dir2, ec);
      }
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    std::fprintf(stderr, "%llu records done\n", static_cast<unsigned long long>(n));
    rows.push_back(row);
  }

  std::printf("\ncache_scale (%s), %d rounds x %d kernels; disk hit = jit::compile served from LMDB without module load\n",
              jit::toolchain_id().c_str(), rounds, kRealKeys);
  std::printf("| records | data.mdb MB | fill s | disk hit p50 us | p90 us | disk::read p50 us | get+decode p50 us | kaio-cache ls ms | ls --json ms | export MB/s | import MB/s |\n");
  std::printf("|---------|-------------|--------|-----------------|--------|-------------------|-------------------|------------------|--------------|-------------|-------------|\n");
  for (const Row& r : rows) {
    auto opt = [](double v, const char* fmt) {
      char b[32] = "-";
      if (v >= 0) std::snprintf(b, sizeof b, fmt, v);
      return std::string(b);
    };
    std::printf("| %7llu | %11.1f | %6.2f | %15.2f | %6.2f | %17.2f | %17.2f | %16s | %12s | %11s | %11s |\n",
                static_cast<unsigned long long>(r.records), r.file_mb, r.fill_s, r.hit_p50, r.hit_p90, r.read_p50, r.floor_p50,
                opt(r.ls_ms, "%.0f").c_str(), opt(r.ls_json_ms, "%.0f").c_str(), opt(r.export_mbs, "%.0f").c_str(),
                opt(r.import_mbs, "%.0f").c_str());
  }
  return 0;
}
