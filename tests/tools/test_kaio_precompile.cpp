// kaio-precompile run as a subprocess: manifests (the built-in one, files, bad ones),
// comma-separated and repeated --arch, -j, the summary's counts, --tune without a GPU.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "kaio/jit/buffer.h"
#include "kaio/jit/driver.h"
#include "../child_process.h"
#include "../support.h"

using Catch::Matchers::Contains;
using kaio::test::run_child;
using kaio::test::TempDir;

namespace {

kaio::test::ChildResult precompile(const TempDir& cache, std::vector<std::string> args) {
  args.insert(args.begin(), kaio::test::beside_exe(KAIO_PRECOMPILE_REL));
  args.push_back("--cache-dir");
  args.push_back(cache.str());
  return run_child(args, {{"KAIO_INTERPRET", "0"}}, 300);
}

std::string write_manifest(const TempDir& d, const std::string& text) {
  const std::string path = d.str() + "/manifest.json";
  std::ofstream(path) << text;
  return path;
}

// "N kernels for A, B: compiled C, already cached D, failed F, T s"
struct Summary {
  int kernels = -1, compiled = -1, cached = -1, failed = -1;
  std::string archs;
};
Summary summary(const std::string& out) {
  static const std::regex re(R"((\d+) kernels for ([^:]+): compiled (\d+), already cached (\d+), failed (\d+), [0-9.]+ s)");
  std::smatch m;
  Summary s;
  if (std::regex_search(out, m, re)) s = {std::stoi(m[1]), std::stoi(m[3]), std::stoi(m[4]), std::stoi(m[5]), m[2]};
  return s;
}

const char* kSmall = R"({"families": ["saxpy"], "matmul": [{"in": "f32", "shapes": [[64, 64, 64]]}]})";

}  // namespace

TEST_CASE("kaio-precompile compiles a manifest for a comma list of archs, then finds it cached", "[tools][precompile]") {
  TempDir cache, files;
  const std::string manifest = write_manifest(files, kSmall);
  const auto listed = precompile(cache, {"-m", manifest, "--arch", "sm_80,sm_90", "--list"});
  INFO(listed.describe());
  REQUIRE(listed.code == 0);
  // saxpy's declared configs and the three SIMT variants (the only f32 matmul without tf32), per arch.
  CHECK_THAT(listed.out, Contains("simt_128x128x8_8x8") && Contains("sm_80") && Contains("sm_90"));
  CHECK_THAT(listed.out, !Contains("mma_"));
  std::smatch m;
  REQUIRE(std::regex_search(listed.out, m, std::regex(R"((\d+) kernels)")));
  const int n = std::stoi(m[1]);
  CHECK(n % 2 == 0);
  CHECK(n >= 2 * (1 + 3));

  const auto first = precompile(cache, {"-m", manifest, "--arch", "sm_80,sm_90", "-j", "2"});
  INFO(first.describe());
  REQUIRE(first.code == 0);
  Summary s = summary(first.out);
  CHECK(s.kernels == n);
  CHECK(s.archs == "sm_80, sm_90");
  CHECK(s.compiled == n);
  CHECK(s.cached == 0);
  CHECK(s.failed == 0);

  // Repeats and comma lists mix; duplicates count once.
  const auto second = precompile(cache, {"-m", manifest, "-a", "sm_90", "--arch", "sm_80,sm_90", "-j", "3"});
  INFO(second.describe());
  REQUIRE(second.code == 0);
  s = summary(second.out);
  CHECK(s.kernels == n);
  CHECK(s.archs == "sm_90, sm_80");
  CHECK(s.compiled == 0);
  CHECK(s.cached == n);
}

TEST_CASE("kaio-precompile's built-in manifest covers the ops families and every matmul variant", "[tools][precompile]") {
  TempDir cache;
  const auto r = precompile(cache, {"--list", "--arch", "sm_90"});
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("saxpy") && Contains("row_sum") && Contains("silu_gate"));
  for (const char* v : {"simt_128x128x8_8x8", "mma_128x128x32_w64x64", "mma_cp_128x256x32_w64x64_s3", "gemv_m1_w8_n4_k8"})
    CHECK_THAT(r.out, Contains(v));
  CHECK_THAT(r.out, Contains("bf16 -> bf16, col/col") && Contains("f16 -> f32, row/col"));
  const auto p = precompile(cache, {"--print-manifest"});
  REQUIRE(p.code == 0);
  CHECK_NOTHROW(nlohmann::json::parse(p.out));
}

TEST_CASE("kaio-precompile refuses bad manifests and archs with a clear message", "[tools][precompile]") {
  TempDir cache, files;
  struct Bad {
    const char* manifest;
    const char* says;
  };
  for (const Bad& b : {Bad{"{not json", "not valid JSON"}, Bad{"[1, 2]", "top level must be an object"},
                       Bad{R"({"kernels": []})", "unknown key 'kernels'"},
                       Bad{R"({"families": ["nope"]})", "no family is called 'nope'"},
                       Bad{R"({"matmul": [{"in": "f64", "shapes": [[1, 1, 1]]}]})", "matmul[0].in: 'f64'"},
                       Bad{R"({"matmul": [{"in": "f16"}]})", "matmul[0].shapes"},
                       Bad{R"({"matmul": [{"in": "f16", "shapes": [[1, 0, 1]]}]})", "positive integers"},
                       Bad{R"({"matmul": [{"in": "f16", "layouts": ["row"], "shapes": [[1, 1, 1]]}]})", "is not A/B"},
                       Bad{R"({"matmul": [{"in": "f16", "tile": 3, "shapes": [[1, 1, 1]]}]})", "unknown key 'tile'"}}) {
    INFO(b.manifest);
    const auto r = precompile(cache, {"-m", write_manifest(files, b.manifest)});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains("kaio-precompile: manifest") && Contains(b.says));
  }
  const auto missing = precompile(cache, {"-m", files.str() + "/absent.json"});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Contains("cannot read the manifest"));
  const auto arch = precompile(cache, {"--arch", "sm_80,sm9"});
  CHECK(arch.code == 2);
  CHECK_THAT(arch.err, Contains("--arch: 'sm9'"));
  const auto help = precompile(cache, {"--help"});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Contains("--manifest") && Contains("--tune") && Contains("--jobs"));
}

TEST_CASE("kaio-precompile --tune without a GPU says so", "[tools][precompile]") {
  if (kaio::jit::driver::available()) return;  // with a GPU --tune works (see the README's device commands)
  TempDir cache;
  const auto r = precompile(cache, {"--tune", "--arch", "sm_90"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Contains("--tune") && Contains("GPU"));
}

TEST_CASE("kaio-precompile --tune tunes the manifest's matmul shapes once", "[tools][precompile][tuner]") {
  // In the interpreter (the timings mean nothing there, the bookkeeping is the same).
  TempDir cache, files;
  const std::string manifest = write_manifest(files, R"({"matmul": [{"in": "f32", "shapes": [[4, 4, 4]]}]})");
  auto run = [&] {
    std::vector<std::string> args{kaio::test::beside_exe(KAIO_PRECOMPILE_REL), "-m", manifest, "--tune", "--cache-dir", cache.str()};
    return run_child(args, {{"KAIO_INTERPRET", "1"}, {"KAIO_TUNE", "on"}}, 300);
  };
  const auto first = run();
  INFO(first.describe());
  REQUIRE(first.code == 0);
  CHECK_THAT(first.out, Contains("tune matmul|f32>f32|row/row|sm_90|interpreter|0sm|m4|n4|k4|b1|align") &&
                            Contains(" -> ") && Contains("(tuned, "));  // a SIMT or GEMV row: host timings
  const auto second = run();
  INFO(second.describe());
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Contains("(stored)"));
  const auto ls = kaio::test::run_command("'" + kaio::test::cache_tool_exe() + "' --cache-dir '" + cache.str() + "' tune ls");
  CHECK_THAT(ls.out, Contains("1 tuning entries"));
}

TEST_CASE("kaio-precompile for sm_90 compiles the wgmma variants for sm_90a, and kaio-cache ls shows it", "[tools][precompile][wgmma]") {
  TempDir cache, files;
  const std::string manifest =
      write_manifest(files, R"({"matmul": [{"in": "bf16", "out": "bf16", "layouts": ["row/col"], "shapes": [[256, 256, 256]]}]})");
  const auto r = precompile(cache, {"-m", manifest, "--arch", "sm_90", "-j", "2", "-v"});
  INFO(r.describe());
  REQUIRE(r.code == 0);
  const Summary s = summary(r.out);
  CHECK(s.failed == 0);
  CHECK(s.compiled == s.kernels);
  // the wgmma variants' lines name sm_90a, the others sm_90
  CHECK(std::regex_search(r.out, std::regex(R"(compiled  matmul\(wgmma_128x256x64_s4, [^)]*\)  sm_90a)")));
  CHECK(std::regex_search(r.out, std::regex(R"(compiled  matmul\(mma_cp_128x128x32_w64x64_s4, [^)]*\)  sm_90\n)")));
  const std::string tool = kaio::test::beside_exe(KAIO_CACHE_TOOL_REL);
  const auto ls_a = run_child({tool, "--cache-dir", cache.str(), "ls", "--arch", "sm_90a"}, {}, 60);
  INFO(ls_a.describe());
  REQUIRE(ls_a.code == 0);
  CHECK_THAT(ls_a.out, Contains("matmul_wgmma_128x256x64_s4_bf16_bf16_rc") && Contains("sm_90a") && !Contains("mma_cp"));
  const auto ls = run_child({tool, "--cache-dir", cache.str(), "ls", "--arch", "sm_90"}, {}, 60);
  REQUIRE(ls.code == 0);
  CHECK_THAT(ls.out, Contains("mma_cp_128x128x32") && !Contains("wgmma"));
  // sm_80 has no wgmma variant at all
  const auto l80 = precompile(cache, {"-m", manifest, "--arch", "sm_80", "--list"});
  REQUIRE(l80.code == 0);
  CHECK_THAT(l80.out, Contains("mma_cp_") && !Contains("wgmma"));
}

TEST_CASE("kaio-precompile takes e4m3 / e5m2 matmul entries: the Wgmma rows, K-major operands", "[tools][precompile][fp8]") {
  TempDir cache, files;
  const std::string manifest = write_manifest(
      files, R"({"matmul": [{"in": "e4m3", "out": "bf16", "layouts": ["row/col", "row/row"], "shapes": [[256, 256, 256]]},
                            {"in": "e5m2", "out": "f32", "layouts": ["row/col"], "shapes": [[64, 64, 64]]}]})");
  const auto r = precompile(cache, {"-m", manifest, "--arch", "sm_90", "--list"});
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Contains("matmul(wgmma_128x256x64_s4, e4m3 -> bf16, row/col)") &&
                        Contains("matmul(wgmma_64x128x64_s8, e5m2 -> f32, row/col)") && !Contains("row/row") &&
                        !Contains("mma_cp"));
  const auto bad = precompile(cache, {"-m", write_manifest(files, R"({"matmul": [{"in": "e3m4"}]})"), "--list"});
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out + bad.err, Contains("'e3m4' is not one of f32, f16, bf16, e4m3, e5m2"));
}

TEST_CASE("kaio-precompile on an sm_90 GPU loads the kernels with setmaxnreg once (the driver's cache)", "[gpu][tools][precompile]") {
  if (!kaio::jit::driver::available() || kaio::jit::driver::device_sm() != 90) {
    WARN("needs an sm_90 GPU: not run");
    return;
  }
  TempDir cache, files;
  // The 256x192 row moves registers (setmaxnreg); the other rows of the shape do not.
  const std::string manifest =
      write_manifest(files, R"({"matmul": [{"in": "bf16", "out": "bf16", "layouts": ["row/col"], "shapes": [[4096, 4096, 4096]]}]})");
  const auto r = precompile(cache, {"-m", manifest, "--arch", "native", "-v"});
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(summary(r.out).failed == 0);
  CHECK_THAT(r.out, Contains("compiled  matmul(wgmma_256x192x64_s3, "));
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"((\d+) kernels with setmaxnreg loaded once on this )")));
  CHECK(std::stoi(m[1]) == 1);
}
