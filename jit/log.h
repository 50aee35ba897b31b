// kaio's logger ("kaio", stderr). Level from KAIO_LOG_LEVEL: trace, debug, info, warn
// (default), error, critical, off.
#pragma once

#include <string>

namespace spdlog {
class logger;
}

namespace kaio::jit {

spdlog::logger& log();
// Logs `message` at warn level the first time `topic` is seen in this process.
void warn_once(const std::string& topic, const std::string& message);

}  // namespace kaio::jit
