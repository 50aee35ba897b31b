// Runs a program as a child process and reports how it ended, so that a test can tell a
// clean exit from death by a signal (which popen/system blur) and bound its run time.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace kaio::test {

struct ChildResult {
  bool exited = false;     // ended by exit(): `code` is valid
  int code = -1;
  int signal = 0;          // ended by this signal (0: not signalled)
  bool timed_out = false;  // killed (SIGKILL) after the time limit
  double seconds = 0;
  std::string out, err;
  std::string describe() const {
    std::ostringstream s;
    if (timed_out) s << "timed out after " << seconds << " s";
    else if (signal) s << "killed by signal " << signal << " (" << strsignal(signal) << ")";
    else s << "exit " << code;
    s << "\n--- stdout ---\n" << out << "--- stderr ---\n" << err;
    return s.str();
  }
};

// Runs argv[0] with `env` added to this process's environment; kills it after
// `limit_seconds`.
inline ChildResult run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                             double limit_seconds = 120) {
  char tmpl[] = "/tmp/kaio-child-XXXXXX";
  const std::string dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  const std::string out_path = dir + "/out", err_path = dir + "/err";
  // Everything the child needs is built here: after fork() in a threaded process the
  // child may only call async-signal-safe functions until it execs.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (!env.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& kv : env_strings) envp.push_back(kv.data());
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  ChildResult r;
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (done < 0) break;
    if (s > limit_seconds && !r.timed_out) {
      r.timed_out = true;
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(status)) {
    r.exited = true;
    r.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status) && !r.timed_out) {
    r.signal = WTERMSIG(status);
  }
  auto slurp = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace kaio::test
