// A GGUF file image written byte by byte, so that tests can make well-formed files and
// then damage them at known places.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kaio/quant/blocks.h"
#include "kaio/quant/gguf.h"

namespace kaio::test {

struct GgufWriter {
  std::string head, data;
  uint64_t tensors = 0, kvs = 0;
  uint32_t alignment = 32;
  std::string infos, meta;

  template <class T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static void str(std::string& s, const std::string& v) {
    put<uint64_t>(s, v.size());
    s += v;
  }
  template <class T>
  void kv(const std::string& key, quant::GgufType t, T v) {
    str(meta, key);
    put<uint32_t>(meta, uint32_t(t));
    put<T>(meta, v);
    ++kvs;
  }
  void kv_string(const std::string& key, const std::string& v) {
    str(meta, key);
    put<uint32_t>(meta, uint32_t(quant::GgufType::String));
    str(meta, v);
    ++kvs;
  }
  // A tensor of ggml type `t` with `dims` and these bytes, placed at the next aligned offset.
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t t, const std::string& bytes) {
    while (data.size() % alignment) data += '\0';
    str(infos, name);
    put<uint32_t>(infos, uint32_t(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(infos, d);
    put<uint32_t>(infos, t);
    put<uint64_t>(infos, data.size());
    data += bytes;
    ++tensors;
  }
  std::string bytes(uint32_t version = 3) const {
    std::string s = "GGUF";
    put<uint32_t>(s, version);
    put<uint64_t>(s, tensors);
    put<uint64_t>(s, kvs);
    s += meta;
    s += infos;
    while (s.size() % alignment) s += '\0';
    return s + data;
  }
};

}  // namespace kaio::test
