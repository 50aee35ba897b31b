// kaio's logger ("kaio", stderr). Level from KAIO_LOG_LEVEL: trace, debug, info, warn
// (default), error, critical, off.
#pragma once

#include <string>

namespace spdlog {
class logger;
}

namespace kaio::jit {

spdlog::logger& log();
// True when debug messages would be printed; cheap (no logger is built to answer it), so
// hot paths can skip formatting.
bool debug_enabled();
// Logs `message` at warn level the first time `topic` is seen in this process.
void warn_once(const std::string& topic, const std::string& message);

}  // namespace kaio::jit
