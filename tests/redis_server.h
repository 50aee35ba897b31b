// A real redis-server on 127.0.0.1 at a free port for the remote cache tests and the bench:
// started by the constructor, stopped by the destructor; kill (SIGKILL), pause (SIGSTOP),
// resume and restart it to cause the faults the remote tier must survive. `redis-cli`
// plants and reads values. Without the redis-server binary, available() is false and the
// caller skips with a clear message.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kaio::test {

// The first executable of that name on PATH or in /usr/bin, /usr/local/bin.
inline std::string find_program(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("PATH")) {
    std::string s = p;
    for (size_t at = 0; at <= s.size();) {
      size_t end = s.find(':', at);
      if (end == std::string::npos) end = s.size();
      dirs.push_back(s.substr(at, end - at));
      at = end + 1;
    }
  }
  dirs.insert(dirs.end(), {"/usr/bin", "/usr/local/bin", "/usr/sbin"});
  for (const auto& d : dirs) {
    const std::string f = d + "/" + name;
    if (!d.empty() && access(f.c_str(), X_OK) == 0) return f;
  }
  return "";
}

// A TCP port nothing listens on right now (bound, read, closed).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    socklen_t n = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

class RedisServer {
 public:
  // `extra`: more redis-server arguments ("--maxmemory", "1mb", ...).
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    server_ = find_program("redis-server");
    cli_ = find_program("redis-cli");
    if (server_.empty() || cli_.empty()) return;
    port_ = free_port();
    start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool available() const { return !server_.empty() && !cli_.empty(); }
  static const char* missing_message() {
    return "redis-server / redis-cli not found (apt-get install redis-server): remote cache test skipped";
  }
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }

  void start() {
    if (pid_ > 0 || !available()) return;
    std::vector<std::string> argv = {server_, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--protected-mode", "no",
                                     "--daemonize", "no", "--loglevel", "warning", "--dir", "/tmp"};
    argv.insert(argv.end(), extra_.begin(), extra_.end());
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execv(args[0], args.data());
      _exit(127);
    }
    // Ready when it answers PING (a few seconds at most).
    for (int i = 0; i < 500; ++i) {
      if (cli({"PING"}) == "PONG") return;
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGTERM);
    reap();
  }
  void kill9() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    reap();
  }
  void pause() { if (pid_ > 0) kill(pid_, SIGSTOP); }
  void resume() { if (pid_ > 0) kill(pid_, SIGCONT); }
  void restart() {
    stop();
    start();
  }

  // redis-cli with arguments; its output, trailing newline removed. `stdin_file`: the last
  // argument is read from that file (-x), so binary values can be planted.
  std::string cli(const std::vector<std::string>& args, const std::string& stdin_file = "") const {
    std::string cmd = "'" + cli_ + "' -h 127.0.0.1 -p " + std::to_string(port_) + (stdin_file.empty() ? "" : " -x");
    for (const auto& a : args) cmd += " '" + a + "'";
    if (!stdin_file.empty()) cmd += " < '" + stdin_file + "'";
    cmd += " 2>/dev/null";
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
  }
  // SET key <bytes> through redis-cli -x (a temporary file carries the bytes).
  bool plant(const std::string& key, const std::string& bytes) const {
    char tmpl[] = "/tmp/kaio-plant-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return false;
    close(fd);
    std::ofstream(tmpl, std::ios::binary) << bytes;
    const std::string r = cli({"SET", key}, tmpl);
    std::remove(tmpl);
    return r == "OK";
  }
  long long strlen_of(const std::string& key) const { return std::atoll(cli({"STRLEN", key}).c_str()); }

 private:
  void reap() {
    int st = 0;
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid_, &st, WNOHANG) == pid_) break;
      if (i == 300) kill(pid_, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
  }

  std::string server_, cli_;
  std::vector<std::string> extra_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kaio::test
