// A small Redis client (hiredis underneath) for the remote cache tier: one connection with
// connect and command timeouts, and a circuit breaker shared by the connections of one
// tier. It stores bytes under keys and knows nothing of kernels.
//
// Nothing here throws on a network problem: every call returns a status. A connection that
// failed (timeout, reset, garbage on the wire) is dropped and opened again on the next call
// the breaker allows.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kaio::cache {

// redis://[user:password@]host[:port][/db]
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string user, password;
  int db = 0;
  // host:port/db, never the password (for logs and tools).
  std::string describe() const;
};
// nullopt with `why` when the URL is not of that form.
std::optional<RedisEndpoint> parse_redis_url(std::string_view url, std::string* why = nullptr);

struct RedisTimeouts {
  int connect_ms = 50;
  int command_ms = 50;
};

// Closed: calls go through. After `failures` failures in a row it opens: calls are
// answered Unavailable at once, without touching the network, for `open_ms`; then one
// call is let through (half-open): success closes it, failure opens it again.
class Breaker {
 public:
  struct Options {
    int failures = 3;
    int open_ms = 5000;
  };
  explicit Breaker(Options o) : o_(o) {}
  // False while open. While half-open only one caller at a time is let through.
  bool allow();
  // A success ends an outage: returns true when one was going on.
  bool success();
  // Returns true when this failure begins an outage (the first failure after a success):
  // the caller warns once per outage.
  bool failure();
  bool is_open() const;
  uint64_t opened_count() const { return opened_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  Options o_;
  mutable std::mutex m_;
  int consecutive_ = 0;
  bool in_outage_ = false;
  bool probing_ = false;
  Clock::time_point open_until_{};
  std::atomic<uint64_t> opened_{0};
};

enum class RedisStatus {
  Ok,           // a reply (value, integer, items)
  Nil,          // the key does not exist
  Unavailable,  // not tried: the breaker is open
  Timeout,      // connect or command timed out
  Failed,       // connection refused or reset, protocol error (garbage on the wire)
  Refused,      // the server answered with an error (OOM under noeviction, wrong type, auth)
};
const char* status_name(RedisStatus s);

struct RedisReply {
  RedisStatus status = RedisStatus::Failed;
  std::string value;  // bulk or status string; the error text for Refused/Timeout/Failed
  long long integer = 0;
  std::vector<RedisReply> items;  // array replies (SCAN)
  bool outage_began = false;      // this call's failure began an outage (warn once)
  bool outage_ended = false;      // this call's success ended one
  bool ok() const { return status == RedisStatus::Ok; }
};

class RedisConnection {
 public:
  RedisConnection(RedisEndpoint ep, RedisTimeouts t, std::shared_ptr<Breaker> breaker);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // One command, binary-safe arguments. Serialized on this connection.
  RedisReply command(const std::vector<std::string_view>& argv);
  // Drops the connection (the next command reconnects).
  void reset();
  const RedisEndpoint& endpoint() const { return ep_; }
  Breaker& breaker() { return *breaker_; }

 private:
  // Connects (AUTH, SELECT) if needed; a failure fills `r` and returns false.
  bool ensure_connected(RedisReply& r);
  RedisReply run(const std::vector<std::string_view>& argv);
  void close_locked();

  RedisEndpoint ep_;
  RedisTimeouts t_;
  std::shared_ptr<Breaker> breaker_;
  std::mutex m_;
  void* ctx_ = nullptr;  // redisContext*
};

}  // namespace kaio::cache
