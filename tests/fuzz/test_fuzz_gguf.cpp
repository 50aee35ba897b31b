// GGUF-file fuzzer: a well-formed file truncated, with bytes flipped, and with huge
// counts and lengths written over its fields. Each case is parsed in a child process that
// also reads every tensor's span and every metadata value: it must exit (0: parsed, 1: a
// ToolError or UsageError), never die by a signal or throw anything else.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "../quant/gguf_writer.h"
#include "fuzz_support.h"
#include "kaio/ir/error.h"

using namespace kaio::quant;

namespace {

std::string sample() {
  kaio::test::GgufWriter w;
  w.alignment = 64;
  w.kv<uint32_t>("general.alignment", GgufType::U32, 64);
  w.kv_string("general.name", "fuzz");
  w.kv<float>("f", GgufType::F32, 1.5f);
  kaio::test::GgufWriter::str(w.meta, "arr");
  kaio::test::GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::Array));
  kaio::test::GgufWriter::put<uint32_t>(w.meta, uint32_t(GgufType::String));
  kaio::test::GgufWriter::put<uint64_t>(w.meta, 2);
  kaio::test::GgufWriter::str(w.meta, "x");
  kaio::test::GgufWriter::str(w.meta, "yz");
  ++w.kvs;
  std::vector<float> x(512, 0.5f);
  w.tensor("a", {256, 2}, uint32_t(GgmlType::Q6_K), quantize(14, x.data(), 512));
  w.tensor("b", {64}, uint32_t(GgmlType::Q8_0), quantize(8, x.data(), 64));
  w.tensor("c", {8, 2}, 0, quantize(0, x.data(), 16));
  return w.bytes();
}

// 0: parsed and read; 1: refused with kaio's error; 2: another exception; a signal: crash.
int parse_in_child(const std::string& bytes) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    try {
      const GgufFile f = GgufFile::parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "fuzz.gguf");
      volatile uint64_t sum = 0;
      for (const GgufKv& kv : f.metadata()) {
        for (uint8_t b : kv.value.raw) sum = sum + b;
        for (std::string_view s : kv.value.strings) sum = sum + s.size();
        sum = sum + kv.value.str.size() + kv.key.size();
      }
      for (const GgufTensor& t : f.tensors()) {
        if (!t.bytes) continue;
        for (uint8_t b : f.data(t)) sum = sum + b;
      }
    } catch (const kaio::ToolError&) {
      code = 1;
    } catch (const kaio::UsageError&) {
      code = 1;
    } catch (...) {
      code = 2;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("GGUF fuzzer: truncations, flipped bytes and huge counts never crash the reader", "[fuzz][gguf]") {
  const uint64_t seed = kaio::test::fuzz_seed(1234);
  const uint64_t cases = kaio::test::fuzz_iterations(20000) / 200;  // 100 in CI
  const std::string good = sample();
  REQUIRE(parse_in_child(good) == 0);
  std::mt19937_64 rng(seed);
  uint64_t refused = 0, total = 0;
  auto check = [&](const std::string& bytes, const std::string& what) {
    INFO("seed " << seed << ": " << what);
    const int code = parse_in_child(bytes);
    REQUIRE((code == 0 || code == 1));
    refused += code == 1;
    ++total;
  };
  SECTION("truncated") {
    // Every length through the header, the metadata and the tensor infos (the first 320
    // bytes), then a spread over the data.
    for (size_t n = 0; n < good.size(); n += n < 320 ? 1 : 97) check(good.substr(0, n), "truncated to " + std::to_string(n));
  }
  SECTION("bytes flipped") {
    for (uint64_t i = 0; i < cases; ++i) {
      std::string s = good;
      std::string where;
      for (uint64_t k = 0, count = 1 + rng() % 4; k < count; ++k) {
        const size_t at = rng() % std::min<size_t>(s.size(), i % 2 ? 400 : s.size());  // half in the header
        s[at] = char(s[at] ^ (1 + rng() % 255));
        where += " " + std::to_string(at);
      }
      check(s, "case " + std::to_string(i) + ": flipped bytes at" + where);
    }
  }
  SECTION("huge counts and lengths") {
    const uint64_t huge[] = {~uint64_t(0), uint64_t(1) << 63, uint64_t(1) << 62, uint64_t(1) << 32, 0xffffffffu,
                             uint64_t(good.size())};
    for (uint64_t i = 0; i < cases; ++i) {
      std::string s = good;
      const size_t at = rng() % 400;  // any position in the header, the metadata and the tensor infos
      const uint64_t v = huge[rng() % std::size(huge)];
      s.replace(at, 8, std::string(reinterpret_cast<const char*>(&v), 8));
      check(s, "case " + std::to_string(i) + ": " + std::to_string(v) + " written at " + std::to_string(at));
    }
  }
  WARN("GGUF fuzzer: seed " << seed << ", " << total << " files, " << refused << " refused");
}
