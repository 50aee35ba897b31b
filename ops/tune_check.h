// The tuning candidates' check, shared by the ops' tuners (ops/matmul_tune.cpp,
// ops/attention_tune.cpp): the first candidate's sampled output is the reference; each later
// one must agree within `tol` of the reference's largest magnitude.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace kaio::tuner::detail {

struct ReferenceCheck {
  std::vector<double> values;
  std::string name;  // empty: no reference yet
  // `what`: how the message names the output ("C", "o").
  std::string operator()(std::vector<double> got, const std::string& candidate, double tol, const char* what) {
    if (name.empty()) {
      values = std::move(got);
      name = candidate;
      return "";
    }
    double scale = 0, worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      scale = std::max(scale, std::fabs(values[i]));
      worst = std::max(worst, std::fabs(got[i] - values[i]));
    }
    const double rel = worst / std::max(scale, 1e-30);
    if (rel > tol)
      return "differs from " + name + " by " + std::to_string(rel) + " of max |" + what + "| (tolerance " + std::to_string(tol) + ")";
    return "";
  }
};

}  // namespace kaio::tuner::detail
