#include "kaio/jit/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace kaio::jit {

// The logger and the warn_once state are never destroyed: cache writers left running at
// process exit (see jit/disk_cache.h) may still log during static destruction.
spdlog::logger& log() {
  // The holder stays reachable through this static, so leak checkers see no leak.
  static std::shared_ptr<spdlog::logger>* holder = [] {
    auto l = std::make_shared<spdlog::logger>("kaio", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[%H:%M:%S.%e] [kaio] [%^%l%$] %v");
    spdlog::level::level_enum lvl = spdlog::level::warn;
    if (const char* env = std::getenv("KAIO_LOG_LEVEL")) lvl = spdlog::level::from_str(env);
    l->set_level(lvl);
    return new std::shared_ptr<spdlog::logger>(std::move(l));
  }();
  return **holder;
}

bool debug_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("KAIO_LOG_LEVEL");
    if (!env) return false;
    auto l = spdlog::level::from_str(env);
    return l <= spdlog::level::debug;
  }();
  return on;
}

void warn_once(const std::string& topic, const std::string& message) {
  static auto* m = new std::mutex;
  static auto* seen = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> g(*m);
    if (!seen->insert(topic).second) return;
  }
  log().warn("{}", message);
}

}  // namespace kaio::jit
