// Stale cubins must never be served: the cache key holds kCodegenVersion, so any change of
// codegen output must bump it. This test hashes the PTX of the whole test-kernel corpus
// of the language (all op families and types, sm_80 and sm_90; not the ops library, whose
// kernels change their IR, hence their keys, when they change) and compares it with the hash recorded next to the
// version in codegen_corpus.txt. Changed output with an unchanged version fails; after a
// bump, record the new hash with KAIO_UPDATE_CORPUS=1.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kaio/codegen/ptx.h"
#include "../kernels.h"

using namespace kaio;

namespace {

std::string corpus_hash() {
  std::string all;
  for (const ir::Kernel& k : test::language_kernels())
    for (const char* arch : {"sm_80", "sm_90"}) {
      std::string ptx = codegen::emit_ptx(k, {arch, 9, 0});
      size_t body = ptx.find(".version");  // the header names the version itself
      all += ptx.substr(body == std::string::npos ? 0 : body);
    }
  return ir::hash_bytes(all.data(), all.size()).hex();
}

}  // namespace

TEST_CASE("codegen output changes only with a kCodegenVersion bump", "[codegen][version]") {
  const std::string path = std::string(KAIO_SOURCE_DIR) + "/tests/codegen/codegen_corpus.txt";
  const std::string hash = corpus_hash();
  const char* update = std::getenv("KAIO_UPDATE_CORPUS");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << "version " << codegen::kCodegenVersion << "\nhash " << hash << "\n";
    WARN("recorded codegen corpus hash " << hash << " for version " << codegen::kCodegenVersion);
  }
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string w1, w2, recorded_hash;
  int recorded_version = 0;
  in >> w1 >> recorded_version >> w2 >> recorded_hash;
  REQUIRE(w1 == "version");
  REQUIRE(w2 == "hash");
  INFO("recorded: version " << recorded_version << ", hash " << recorded_hash << "; now: version "
                            << codegen::kCodegenVersion << ", hash " << hash);
  if (hash != recorded_hash && recorded_version == codegen::kCodegenVersion)
    FAIL("codegen output changed but kCodegenVersion is still " << recorded_version
         << ": bump it in codegen/ptx.h, then record the new hash with KAIO_UPDATE_CORPUS=1");
  CHECK(hash == recorded_hash);
  CHECK(recorded_version == codegen::kCodegenVersion);
}
