// The three error channels of kaio (see README "Errors").
//  1. UsageError    - misuse of the builder or the API; names the kernel and the op.
//  2. InternalError - a broken invariant inside kaio (raised through KAIO_ASSERT).
//  3. ToolError     - a failure of an outside tool: nvJitLink, the CUDA driver, LMDB,
//                     the file system; carries the tool, its code name and its full log.
#pragma once

#include <stdexcept>
#include <string>

namespace kaio {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  // `kernel` and `op` may be empty when the misuse is not tied to one of them.
  UsageError(std::string kernel, std::string op, const std::string& message);
  const std::string& kernel() const noexcept { return kernel_; }
  const std::string& op() const noexcept { return op_; }

 private:
  std::string kernel_, op_;
};

class InternalError : public Error {
 public:
  using Error::Error;
};

class ToolError : public Error {
 public:
  ToolError(std::string tool, std::string code, std::string message, std::string log = {});
  const std::string& tool() const noexcept { return tool_; }
  const std::string& code() const noexcept { return code_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string tool_, code_, log_;
};

namespace detail {
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& context);
}  // namespace detail

}  // namespace kaio

// KAIO_ASSERT(cond, context): context is a std::string (often the IR printed) that is
// shown with the failure. Debug builds abort after printing; release builds throw
// kaio::InternalError so that a host application can recover.
#define KAIO_ASSERT(cond, context)                                               \
  do {                                                                           \
    if (!(cond)) ::kaio::detail::assert_fail(#cond, __FILE__, __LINE__, (context)); \
  } while (0)
