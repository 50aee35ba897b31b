#include "kaio/ir/error.h"

#include <cstdio>
#include <cstdlib>

namespace kaio {

namespace {
std::string usage_text(const std::string& kernel, const std::string& op, const std::string& msg) {
  std::string s = "kaio usage error";
  if (!kernel.empty()) s += " in kernel '" + kernel + "'";
  if (!op.empty()) s += " at op '" + op + "'";
  return s + ": " + msg;
}
std::string tool_text(const std::string& tool, const std::string& code, const std::string& msg,
                      const std::string& log) {
  std::string s = tool + " failed";
  if (!code.empty()) s += " (" + code + ")";
  s += ": " + msg;
  if (!log.empty()) s += "\n--- " + tool + " log ---\n" + log;
  return s;
}
}  // namespace

UsageError::UsageError(std::string kernel, std::string op, const std::string& message)
    : Error(usage_text(kernel, op, message)), kernel_(std::move(kernel)), op_(std::move(op)) {}

ToolError::ToolError(std::string tool, std::string code, std::string message, std::string log)
    : Error(tool_text(tool, code, message, log)),
      tool_(std::move(tool)),
      code_(std::move(code)),
      log_(std::move(log)) {}

namespace detail {
void assert_fail(const char* expr, const char* file, int line, const std::string& context) {
  std::string msg = std::string("kaio internal error: ") + expr + " failed at " + file + ":" +
                    std::to_string(line);
  if (!context.empty()) msg += "\n" + context;
#ifndef NDEBUG
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::abort();
#else
  throw InternalError(msg);
#endif
}
}  // namespace detail

}  // namespace kaio
