// Helpers for tests that damage cache files: copying a cache, reading and writing bytes,
// and running kaio_cache_child / kaio-cache as child processes.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../child_process.h"
#include "../support.h"

#ifndef KAIO_CACHE_CHILD_REL
#error "KAIO_CACHE_CHILD_REL must name the kaio_cache_child executable"
#endif

namespace kaio::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A copy of the cache files in `from` (data.mdb only: the lock file belongs to a live
// environment and is rebuilt by the next opener).
inline void copy_cache(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  std::filesystem::copy_file(from / "data.mdb", to / "data.mdb", std::filesystem::copy_options::overwrite_existing);
}

// What an application does (see tests/cache_child.cpp "app"): compile and launch
// `kernels` kernels in the interpreter, twice, with the cache in `dir`.
inline ChildResult run_app(const std::filesystem::path& dir, int kernels, std::map<std::string, std::string> env = {},
                           bool flush = true, double limit_seconds = 120) {
  env["KAIO_CACHE_DIR"] = dir.string();
  env["KAIO_INTERPRET"] = "1";
  return run_child({beside_exe(KAIO_CACHE_CHILD_REL), "app", std::to_string(kernels), flush ? "flush" : "noflush"}, env,
                   limit_seconds);
}

inline ChildResult run_tool(const std::filesystem::path& dir, std::vector<std::string> args, double limit_seconds = 120) {
  std::vector<std::string> argv = {cache_tool_exe(), "--cache-dir", dir.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_child(argv, {}, limit_seconds);
}

// A cache holding the records of `kernels` app kernels, made by a child process.
inline void make_app_cache(const std::filesystem::path& dir, int kernels) {
  const ChildResult r = run_app(dir, kernels);
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.code == 0);
}

inline size_t count_of(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// Files named data.mdb.damaged-* in `dir`.
inline std::vector<std::filesystem::path> damaged_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("data.mdb.damaged-", 0) == 0) out.push_back(e.path());
  return out;
}

}  // namespace kaio::test
