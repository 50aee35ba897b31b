// The envelope a record travels in through the remote tier: it binds the payload to its
// key and kind and, with a shared secret, signs both (HMAC-SHA256, OpenSSL).
//
// Layout (little-endian): magic "KAIORMT\0" | u8 flags (1: signed) | u8 kind ('k' kernel,
//   't' tuning) | u16 zero | u32 key bytes | u64 payload bytes | key | payload |
//   HMAC-SHA256 of everything before it (32 bytes, signed envelopes only)
//
// The payload is checked again by its own format (kernel records: magic, schema, xxh3
// checksum, sizes; then arch and toolchain by the compile path). The envelope adds what a
// shared store needs: a record copied under another key, cut short, oversized, unsigned
// where a key is configured, or signed with another key is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kaio::cache {

inline constexpr char kRemoteKernel = 'k';
inline constexpr char kRemoteTuning = 't';
inline constexpr size_t kHmacBytes = 32;
// KAIO_REMOTE_CACHE_MAX_BYTES default: larger records are neither published nor loaded.
inline constexpr uint64_t kDefaultRemoteMaxBytes = uint64_t(64) << 20;

// The Redis key of a record: "<namespace>:k:<hex key>" or "<namespace>:t:<tuning key>".
std::string remote_key(std::string_view ns, char kind, std::string_view key);
// The default namespace: "kaio:v<record schema>".
std::string default_remote_namespace();

// An empty `secret` makes an unsigned envelope. Empty when the signature could not be
// computed (OpenSSL failing): such an envelope is not published.
std::string seal(char kind, std::string_view key, std::string_view payload, std::string_view secret);

struct OpenPolicy {
  std::string_view secret;     // non-empty: only envelopes signed with it are accepted
  uint64_t max_bytes = kDefaultRemoteMaxBytes;
};
// The payload of a valid envelope of `kind` and `key`, or nullopt with `why`.
std::optional<std::string_view> open_sealed(std::string_view bytes, char kind, std::string_view key,
                                            const OpenPolicy& policy, std::string* why = nullptr);

// HMAC-SHA256(secret, data); empty if OpenSSL fails.
std::string hmac_sha256(std::string_view secret, std::string_view data);
// Initialises OpenSSL without its exit-time cleanup (once; idempotent): the remote tier
// signs records from its publisher thread during the process's exit flush.
void init_crypto();

}  // namespace kaio::cache
