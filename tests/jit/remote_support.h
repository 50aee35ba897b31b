// Helpers of the remote cache tests: "machines" (a cache directory each) running
// kaio_remote_child against a real redis-server (tests/redis_server.h).
#pragma once

#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "../child_process.h"
#include "../redis_server.h"
#include "../support.h"

#ifndef KAIO_REMOTE_CHILD_REL
#error "KAIO_REMOTE_CHILD_REL must name the kaio_remote_child executable"
#endif

namespace kaio::test {

inline const std::string kFleetSecret = "fleet-secret-0123456789abcdef";

// A shared secret file, as a fleet would deploy it.
class KeyFile {
 public:
  explicit KeyFile(const std::string& secret = kFleetSecret) : path_(dir_.str() + "/remote.key") {
    std::ofstream(path_) << secret << "\n";
  }
  const std::string& path() const { return path_; }

 private:
  TempDir dir_;
  std::string path_;
};

using Env = std::map<std::string, std::string>;

// The environment of one machine: its own cache directory, the shared Redis and key.
// Timeouts are generous (a loaded CI box or a sanitizer build is slow, not an outage); the
// fault tests that are about timeouts set short ones.
inline Env machine_env(const TempDir& cache, const std::string& url, const std::string& key_file) {
  Env e{{"KAIO_CACHE_DIR", cache.str()}, {"KAIO_REMOTE_CACHE", url}, {"KAIO_INTERPRET", "0"},
        {"KAIO_REMOTE_CACHE_TIMEOUT_MS", "5000"}, {"KAIO_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "5000"}};
  e["KAIO_REMOTE_CACHE_KEY_FILE"] = key_file;
  return e;
}

inline ChildResult remote_child(const std::string& mode, const std::string& prefix, int n, const Env& env,
                                double limit_s = 120) {
  return run_child({beside_exe(KAIO_REMOTE_CHILD_REL), mode, prefix, std::to_string(n)}, env, limit_s);
}

// The child's last line: "stats builds=B disk_hits=D ..." as name -> value.
inline std::map<std::string, double> child_stats(const std::string& out) {
  std::map<std::string, double> m;
  const auto at = out.rfind("stats ");
  if (at == std::string::npos) return m;
  static const std::regex kv(R"((\w+)=([0-9.]+))");
  const std::string line = out.substr(at, out.find('\n', at) - at);
  for (std::sregex_iterator it(line.begin(), line.end(), kv), end; it != end; ++it)
    m[(*it)[1]] = std::stod((*it)[2]);
  return m;
}

// "<key hex> <cubin hash> <from_cache>" lines of a compile-mode child.
struct KernelLine {
  std::string key, cubin;
  int from_cache = -1;
};
inline std::vector<KernelLine> kernel_lines(const std::string& out) {
  std::vector<KernelLine> v;
  static const std::regex re(R"(^([0-9a-f]{32}) ([0-9a-f]{16}) ([01])$)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, re)) v.push_back({m[1], m[2], std::stoi(m[3])});
  }
  return v;
}

inline size_t occurrences(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) ++n;
  return n;
}

#define KAIO_REQUIRE_REDIS(server)                        \
  do {                                                    \
    if (!(server).available()) {                          \
      WARN(kaio::test::RedisServer::missing_message());   \
      return;                                             \
    }                                                     \
    REQUIRE((server).running());                          \
  } while (0)

}  // namespace kaio::test
