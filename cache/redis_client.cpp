#include "kaio/cache/redis_client.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/time.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace kaio::cache {

std::string RedisEndpoint::describe() const { return host + ":" + std::to_string(port) + "/" + std::to_string(db); }

namespace {
template <class T>
std::optional<T> fail(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return std::nullopt;
}
bool parse_int(std::string_view s, int lo, int hi, int& out) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}
}  // namespace

std::optional<RedisEndpoint> parse_redis_url(std::string_view url, std::string* why) {
  using R = RedisEndpoint;
  constexpr std::string_view scheme = "redis://";
  const std::string shown(url.substr(0, 200));
  if (url.substr(0, scheme.size()) != scheme)
    return fail<R>(why, "'" + shown + "' is not a redis://[user:password@]host:port[/db] URL");
  std::string_view rest = url.substr(scheme.size());
  RedisEndpoint ep;
  if (auto at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (auto colon = cred.find(':'); colon != std::string_view::npos) {
      ep.user = std::string(cred.substr(0, colon));
      ep.password = std::string(cred.substr(colon + 1));
    } else {
      ep.password = std::string(cred);  // redis://password@host (Redis before ACLs)
    }
  }
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty() && !parse_int(db, 0, 1 << 20, ep.db)) return fail<R>(why, "redis URL: database '" + std::string(db) + "' is not a number");
  }
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (!parse_int(rest.substr(colon + 1), 1, 65535, ep.port))
      return fail<R>(why, "redis URL: port '" + std::string(rest.substr(colon + 1)) + "' is not a port number");
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) return fail<R>(why, "redis URL '" + shown + "' names no host");
  ep.host = std::string(rest);
  return ep;
}

// ---------------------------------------------------------------------------------------
// Breaker

bool Breaker::allow() {
  std::lock_guard<std::mutex> g(m_);
  if (consecutive_ < o_.failures) return true;
  if (Clock::now() < open_until_ || probing_) return false;
  probing_ = true;  // half-open: this caller tries, the others wait for its outcome
  return true;
}

bool Breaker::success() {
  std::lock_guard<std::mutex> g(m_);
  const bool ended = in_outage_;
  consecutive_ = 0;
  in_outage_ = false;
  probing_ = false;
  return ended;
}

bool Breaker::failure() {
  std::lock_guard<std::mutex> g(m_);
  const bool began = !in_outage_;
  in_outage_ = true;
  probing_ = false;
  if (++consecutive_ >= o_.failures) {
    if (consecutive_ == o_.failures || Clock::now() >= open_until_) ++opened_;
    open_until_ = Clock::now() + std::chrono::milliseconds(o_.open_ms);
  }
  return began;
}

bool Breaker::is_open() const {
  std::lock_guard<std::mutex> g(m_);
  return consecutive_ >= o_.failures && Clock::now() < open_until_;
}

const char* status_name(RedisStatus s) {
  switch (s) {
    case RedisStatus::Ok: return "ok";
    case RedisStatus::Nil: return "nil";
    case RedisStatus::Unavailable: return "unavailable (circuit open)";
    case RedisStatus::Timeout: return "timeout";
    case RedisStatus::Failed: return "failed";
    case RedisStatus::Refused: return "refused";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// Connection

namespace {

timeval to_tv(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

redisContext* as_ctx(void* p) { return static_cast<redisContext*>(p); }

// hiredis reports a socket timeout as an I/O error with EAGAIN (SO_RCVTIMEO) or a
// connect that "timed out".
bool is_timeout(const redisContext* c, int saved_errno) {
  if (c->err != REDIS_ERR_IO) return false;
  return saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS ||
         std::strstr(c->errstr, "timed out") != nullptr || std::strstr(c->errstr, "temporarily unavailable") != nullptr;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_NIL: out.status = RedisStatus::Nil; break;
    case REDIS_REPLY_ERROR:
      out.status = RedisStatus::Refused;
      out.value.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.status = RedisStatus::Ok;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.status = RedisStatus::Ok;
      out.items.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.items.push_back(convert(r->element[i]));
      break;
    default:  // string, status
      out.status = RedisStatus::Ok;
      if (r->str) out.value.assign(r->str, r->len);
  }
  return out;
}

// A write to a connection the server closed raises SIGPIPE, which would kill the process:
// it is blocked on this thread for the call and a SIGPIPE it caused is consumed.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

}  // namespace

RedisConnection::RedisConnection(RedisEndpoint ep, RedisTimeouts t, std::shared_ptr<Breaker> breaker)
    : ep_(std::move(ep)), t_(t), breaker_(std::move(breaker)) {}

RedisConnection::~RedisConnection() {
  std::lock_guard<std::mutex> g(m_);
  close_locked();
}

void RedisConnection::close_locked() {
  if (ctx_) redisFree(as_ctx(ctx_));
  ctx_ = nullptr;
}

void RedisConnection::reset() {
  std::lock_guard<std::mutex> g(m_);
  close_locked();
}

bool RedisConnection::ensure_connected(RedisReply& r) {
  if (ctx_) return true;
  errno = 0;
  redisContext* c = redisConnectWithTimeout(ep_.host.c_str(), ep_.port, to_tv(t_.connect_ms));
  const int saved = errno;
  if (!c) {
    r.status = RedisStatus::Failed;
    r.value = "cannot allocate a Redis connection";
    return false;
  }
  if (c->err) {
    r.status = is_timeout(c, saved) ? RedisStatus::Timeout : RedisStatus::Failed;
    r.value = std::string("connect to ") + ep_.describe() + ": " + c->errstr;
    redisFree(c);
    return false;
  }
  redisSetTimeout(c, to_tv(t_.command_ms));
  ctx_ = c;
  auto handshake = [&](const std::vector<std::string_view>& argv) {
    RedisReply h = run(argv);
    if (h.status == RedisStatus::Ok) return true;
    r = std::move(h);
    if (r.status == RedisStatus::Refused) r.value = std::string(argv[0]) + ": " + r.value;
    close_locked();
    return false;
  };
  if (!ep_.password.empty()) {
    if (!ep_.user.empty() ? !handshake({"AUTH", ep_.user, ep_.password}) : !handshake({"AUTH", ep_.password})) return false;
  }
  if (ep_.db != 0) {
    const std::string db = std::to_string(ep_.db);
    if (!handshake({"SELECT", db})) return false;
  }
  return true;
}

// One command on the open connection; an I/O or protocol failure closes it.
RedisReply RedisConnection::run(const std::vector<std::string_view>& argv) {
  std::vector<const char*> a;
  std::vector<size_t> len;
  a.reserve(argv.size());
  len.reserve(argv.size());
  for (std::string_view s : argv) {
    a.push_back(s.data());
    len.push_back(s.size());
  }
  SigpipeGuard guard;
  errno = 0;
  auto* rep = static_cast<redisReply*>(redisCommandArgv(as_ctx(ctx_), static_cast<int>(a.size()), a.data(), len.data()));
  const int saved = errno;
  RedisReply out;
  if (!rep) {
    redisContext* c = as_ctx(ctx_);
    out.status = is_timeout(c, saved) ? RedisStatus::Timeout : RedisStatus::Failed;
    out.value = std::string(argv.empty() ? "" : std::string(argv[0])) + " on " + ep_.describe() + ": " +
                (c->errstr[0] ? c->errstr : "connection lost");
    close_locked();  // hiredis contexts are unusable after an error
    return out;
  }
  out = convert(rep);
  freeReplyObject(rep);
  return out;
}

RedisReply RedisConnection::command(const std::vector<std::string_view>& argv) {
  if (!breaker_->allow()) {
    RedisReply r;
    r.status = RedisStatus::Unavailable;
    r.value = "the remote cache at " + ep_.describe() + " is paused after repeated failures";
    return r;
  }
  RedisReply r;
  {
    std::lock_guard<std::mutex> g(m_);
    const bool reused = ctx_ != nullptr;
    if (ensure_connected(r)) r = run(argv);
    // A connection kept from earlier may have been closed by a server restart (or an idle
    // timeout) meanwhile: one fresh connection is tried before it counts as a failure.
    if (reused && r.status == RedisStatus::Failed && ensure_connected(r)) r = run(argv);
  }
  // A server that answers (even with an error such as OOM) is reachable.
  const bool reachable = r.status == RedisStatus::Ok || r.status == RedisStatus::Nil ||
                         (r.status == RedisStatus::Refused && r.value.rfind("NOAUTH", 0) != 0 &&
                          r.value.rfind("AUTH", 0) != 0 && r.value.rfind("WRONGPASS", 0) != 0);
  if (reachable) r.outage_ended = breaker_->success();
  else r.outage_began = breaker_->failure();
  return r;
}

}  // namespace kaio::cache
