// The remote tier's envelope (signing, key binding, sizes), its URL parser and its circuit
// breaker. No server needed.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include "kaio/cache/record.h"
#include "kaio/cache/meta.h"
#include "kaio/cache/redis_client.h"
#include "kaio/cache/remote_record.h"

using namespace kaio::cache;
using Catch::Matchers::Contains;

namespace {
const std::string kSecret = "0123456789abcdef-shared-secret";
const std::string kKey = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16);

std::string some_record() {
  Record r;
  r.name = "k";
  r.arch = "sm_90";
  r.toolchain = "tc";
  r.cubin = std::string(1000, 'c');
  r.ptx = "ptx";
  return encode_record(r);
}
}  // namespace

TEST_CASE("a signed envelope opens with its key and only with it", "[cache][remote]") {
  const std::string payload = some_record();
  const std::string sealed = seal(kRemoteKernel, kKey, payload, kSecret);
  std::string why;
  auto body = open_sealed(sealed, kRemoteKernel, kKey, {kSecret, kDefaultRemoteMaxBytes}, &why);
  REQUIRE(body);
  CHECK(*body == payload);

  CHECK_FALSE(open_sealed(sealed, kRemoteKernel, kKey, {"another-secret-of-16+bytes", kDefaultRemoteMaxBytes}, &why));
  CHECK_THAT(why, Contains("bad signature"));

  // Any flipped byte: the signature (or a size, or the key binding) catches it.
  for (size_t at : {size_t(0), size_t(9), size_t(20), sealed.size() / 2, sealed.size() - 1}) {
    std::string bad = sealed;
    bad[at] ^= 0x20;
    CHECK_FALSE(open_sealed(bad, kRemoteKernel, kKey, {kSecret, kDefaultRemoteMaxBytes}));
  }
}

TEST_CASE("envelopes refuse another key, kind, a cut, padding, oversize and unsigned bytes under a key", "[cache][remote]") {
  const std::string payload = some_record();
  const std::string sealed = seal(kRemoteKernel, kKey, payload, kSecret);
  const OpenPolicy p{kSecret, kDefaultRemoteMaxBytes};
  std::string why;

  std::string other_key = kKey;
  other_key[0] = 'x';
  CHECK_FALSE(open_sealed(sealed, kRemoteKernel, other_key, p, &why));
  CHECK_THAT(why, Contains("another key"));
  CHECK_FALSE(open_sealed(sealed, kRemoteTuning, kKey, p, &why));
  CHECK_THAT(why, Contains("another kind"));
  for (size_t keep : {size_t(0), size_t(5), size_t(30), sealed.size() - 1}) {
    CHECK_FALSE(open_sealed(sealed.substr(0, keep), kRemoteKernel, kKey, p, &why));
  }
  CHECK_FALSE(open_sealed(sealed + "x", kRemoteKernel, kKey, p, &why));
  CHECK_THAT(why, Contains("size mismatch"));
  CHECK_FALSE(open_sealed(sealed, kRemoteKernel, kKey, {kSecret, sealed.size() - 1}, &why));
  CHECK_THAT(why, Contains("oversize"));

  const std::string unsigned_env = seal(kRemoteKernel, kKey, payload, "");
  CHECK_FALSE(open_sealed(unsigned_env, kRemoteKernel, kKey, p, &why));
  CHECK_THAT(why, Contains("unsigned"));
  // Without a key (read-only or trusted-unsigned tiers) the envelope's checks still hold.
  auto body = open_sealed(unsigned_env, kRemoteKernel, kKey, {"", kDefaultRemoteMaxBytes}, &why);
  REQUIRE(body);
  CHECK(*body == payload);

  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng() % 300, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    if (i % 2) junk.replace(0, std::min<size_t>(8, junk.size()), std::string("KAIORMT\0", 8).substr(0, std::min<size_t>(8, junk.size())));
    CHECK_FALSE(open_sealed(junk, kRemoteKernel, kKey, p));
  }
}

TEST_CASE("HMAC-SHA256 matches RFC 4231 test case 2", "[cache][remote]") {
  const std::string mac = hmac_sha256("Jefe", "what do ya want for nothing?");
  CHECK(to_hex(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST_CASE("redis URLs: host, port, user, password, db; bad ones say why", "[cache][remote]") {
  auto a = parse_redis_url("redis://cache.internal:6380/2");
  REQUIRE(a);
  CHECK(a->host == "cache.internal");
  CHECK(a->port == 6380);
  CHECK(a->db == 2);
  CHECK(a->password.empty());
  auto b = parse_redis_url("redis://kaio:s3cr:et@10.0.0.5:7000");
  REQUIRE(b);
  CHECK(b->user == "kaio");
  CHECK(b->password == "s3cr:et");
  CHECK(b->port == 7000);
  CHECK(b->describe() == "10.0.0.5:7000/0");  // never the password
  auto c = parse_redis_url("redis://localhost");
  REQUIRE(c);
  CHECK(c->port == 6379);
  std::string why;
  CHECK_FALSE(parse_redis_url("http://x:1", &why));
  CHECK_THAT(why, Contains("redis://"));
  CHECK_FALSE(parse_redis_url("redis://x:99999", &why));
  CHECK_THAT(why, Contains("port"));
  CHECK_FALSE(parse_redis_url("redis://x:1/db", &why));
  CHECK_THAT(why, Contains("database"));
  CHECK_FALSE(parse_redis_url("redis://:1", &why));
}

TEST_CASE("the circuit breaker opens after repeated failures and lets one probe through later", "[cache][remote]") {
  // Open for 2 s: the checks between a failure and the next wait must not outlast it on a
  // loaded machine.
  Breaker b({.failures = 3, .open_ms = 2000});
  CHECK(b.allow());
  CHECK(b.failure());        // begins the outage: the one warning
  CHECK_FALSE(b.failure());  // same outage
  CHECK(b.allow());
  CHECK_FALSE(b.failure());  // third: open
  CHECK(b.is_open());
  CHECK_FALSE(b.allow());
  CHECK(b.opened_count() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  CHECK(b.allow());        // the probe
  CHECK_FALSE(b.allow());  // only one at a time
  CHECK_FALSE(b.failure());
  CHECK_FALSE(b.allow());  // open again
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  CHECK(b.allow());
  CHECK(b.success());  // ends the outage
  CHECK(b.allow());
  CHECK_FALSE(b.success());
}

TEST_CASE("a connection to a port with nothing listening fails fast and opens the breaker", "[cache][remote]") {
  auto br = std::make_shared<Breaker>(Breaker::Options{.failures = 2, .open_ms = 60000});
  // Port 1 on loopback: refused at once (nothing listens there in CI).
  RedisConnection c(RedisEndpoint{"127.0.0.1", 1, "", "", 0}, RedisTimeouts{50, 50}, br);
  RedisReply r = c.command({"PING"});
  CHECK(r.status == RedisStatus::Failed);
  CHECK(r.outage_began);
  r = c.command({"PING"});
  CHECK(r.status == RedisStatus::Failed);
  CHECK_FALSE(r.outage_began);
  // With the breaker open nothing is sent at all.
  for (int i = 0; i < 1000; ++i) CHECK(c.command({"PING"}).status == RedisStatus::Unavailable);
  CHECK(br->is_open());
}
