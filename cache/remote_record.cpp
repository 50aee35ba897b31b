#include "kaio/cache/remote_record.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "kaio/cache/meta.h"
#include "kaio/cache/record.h"

namespace kaio::cache {

namespace {
constexpr char kMagic[8] = {'K', 'A', 'I', 'O', 'R', 'M', 'T', '\0'};
constexpr size_t kFixed = 8 + 1 + 1 + 2 + 4 + 8;
constexpr uint8_t kSigned = 1;

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}
template <class T>
std::optional<T> fail(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return std::nullopt;
}
}  // namespace

std::string remote_key(std::string_view ns, char kind, std::string_view key) {
  std::string out(ns);
  out += ':';
  out += kind;
  out += ':';
  out += kind == kRemoteKernel ? to_hex(key) : std::string(key);
  return out;
}

std::string default_remote_namespace() { return "kaio:v" + std::to_string(kRecordSchema); }

void init_crypto() {
  // OpenSSL cleans itself up from an atexit handler registered at its first use, which is
  // later than the cache's own exit flush (registered at the first compile): at exit it
  // would run first, and the publisher thread's HMAC during the flush would then fail.
  // Without that handler the library stays usable until the process ends.
  static const int ok = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  (void)ok;
}

std::string hmac_sha256(std::string_view secret, std::string_view data) {
  init_crypto();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out, &n))
    return {};
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string seal(char kind, std::string_view key, std::string_view payload, std::string_view secret) {
  std::string out;
  out.reserve(kFixed + key.size() + payload.size() + kHmacBytes);
  out.append(kMagic, sizeof kMagic);
  out.push_back(static_cast<char>(secret.empty() ? 0 : kSigned));
  out.push_back(kind);
  put_le(out, 0, 2);
  put_le(out, key.size(), 4);
  put_le(out, payload.size(), 8);
  out.append(key);
  out.append(payload);
  if (!secret.empty()) {
    const std::string mac = hmac_sha256(secret, out);
    if (mac.size() != kHmacBytes) return {};  // never an envelope that says signed without its signature
    out += mac;
  }
  return out;
}

std::optional<std::string_view> open_sealed(std::string_view b, char kind, std::string_view key,
                                            const OpenPolicy& policy, std::string* why) {
  using R = std::string_view;
  if (b.size() > policy.max_bytes)
    return fail<R>(why, "oversize: " + std::to_string(b.size()) + " bytes, limit " + std::to_string(policy.max_bytes));
  if (b.size() < kFixed) return fail<R>(why, "short: " + std::to_string(b.size()) + " bytes");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return fail<R>(why, "not a kaio remote record (magic)");
  const uint8_t flags = static_cast<uint8_t>(b[8]);
  if (b[9] != kind) return fail<R>(why, "a record of another kind");
  if (flags & ~kSigned) return fail<R>(why, "unknown flags");
  const uint64_t key_bytes = get_le(b, 12, 4), payload_bytes = get_le(b, 16, 8);
  const uint64_t body = b.size() - kFixed;
  const uint64_t tail = (flags & kSigned) ? kHmacBytes : 0;
  // Compared one by one so that huge declared sizes cannot overflow a sum.
  if (key_bytes > body || payload_bytes > body - key_bytes || body - key_bytes - payload_bytes != tail)
    return fail<R>(why, "size mismatch (truncated or padded): declares " + std::to_string(key_bytes) + "+" +
                            std::to_string(payload_bytes) + "+" + std::to_string(tail) + " bytes, holds " +
                            std::to_string(body));
  if (b.substr(kFixed, key_bytes) != key) return fail<R>(why, "stored under another key than it was made for");
  if (!policy.secret.empty()) {
    if (!(flags & kSigned)) return fail<R>(why, "unsigned (a signing key is configured)");
    const std::string mac = hmac_sha256(policy.secret, b.substr(0, b.size() - kHmacBytes));
    if (mac.size() != kHmacBytes || CRYPTO_memcmp(mac.data(), b.data() + b.size() - kHmacBytes, kHmacBytes) != 0)
      return fail<R>(why, "bad signature");
  }
  return b.substr(kFixed + key_bytes, payload_bytes);
}

}  // namespace kaio::cache
