// `kaio-cache tune ...`: the tuning database (tuner/tuner.h records).
#pragma once

#include <filesystem>

namespace kaio::tools {

// `kaio-cache tune ls [--json]`: one line per record: op, key, winner, its time, the
// runner-up and its margin, candidates timed / failed, tuning time, age, "noisy" when its
// timings were disturbed; then the claims of tunings in progress (owner pid and host, start,
// deadline, stale or not). Damaged records are listed as such. Returns the exit code.
int tune_ls(const std::filesystem::path& dir, bool as_json);

}  // namespace kaio::tools
