// Shared test helpers: temporary directories, scoped environment variables, subprocesses.
#pragma once

#include <stdlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "kaio/ir/error.h"

namespace kaio::test {

// Random inputs. Every generator of the tests is seeded from the run's seed (KAIO_TEST_SEED,
// or a fresh one each run) and the name of the running test case, reseeded as each case
// starts: a case draws the same inputs whether it runs alone or in the whole suite, and a
// failing case prints the seed that draws them again (tests/main.cpp).
uint64_t run_seed();
// A new seed on each call inside a case (for a generator of its own, e.g. one a thread).
uint64_t case_seed();
// The running case's generators.
std::mt19937& rng();
std::mt19937_64& rng64();

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kaio-test-XXXXXX";
    char* p = mkdtemp(tmpl);
    path_ = p ? p : "/tmp/kaio-test-fallback";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Sets (or unsets) an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// For tests that rank tuning candidates with fake timers: the tuner's wall-clock budget
// counts each candidate's check (slow in the interpreter, slower under a sanitizer on a busy
// machine), and must not leave a candidate untimed there. A budget skip is not a failure
// (tuner::stats().over_budget), but it changes which candidates a test sees timed.
struct UnboundedTuneBudget : ScopedEnv {
  UnboundedTuneBudget() : ScopedEnv("KAIO_TUNE_BUDGET_SECONDS", std::string("600")) {}
};

// A path next to the running test binary (helpers travel with the build folder).
inline std::string beside_exe(const std::string& rel) {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / rel).lexically_normal().string();
}
inline std::string child_exe() { return beside_exe(KAIO_TEST_CHILD_REL); }
inline std::string cache_tool_exe() { return beside_exe(KAIO_CACHE_TOOL_REL); }

// The UsageError a misuse throws (fails the test when none is thrown).
template <class F>
kaio::UsageError usage_error_of(F&& f) {
  try {
    f();
  } catch (const kaio::UsageError& e) {
    return e;
  }
  FAIL("expected kaio::UsageError");
  throw;  // unreachable
}

struct CommandResult {
  int status = -1;
  std::string out;
};

// Runs a shell command and captures its standard output.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace kaio::test
