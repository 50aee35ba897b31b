// Key stability: the same kernel gives the same hash and key; any change that alters the
// code gives a different one; names that do not change the code do not matter.
#include <catch2/catch.hpp>

#include "kaio/kaio.h"
#include "kaio/ops/elementwise.h"

using namespace kaio;

namespace {

struct Variant {
  const char* kernel_name = "k";
  const char* param_name = "x";
  float constant = 2.0f;
  bool use_f64 = false;
  bool use_sub = false;
  int spec = 64;
};

ir::Kernel make(const Variant& v) {
  ir::KernelBuilder b(v.kernel_name);
  if (v.use_f64) {
    auto x = b.param<double*>(v.param_name);
    auto i = b.global_id_x();
    x[i] = x[i] * static_cast<double>(v.constant);
  } else {
    auto x = b.param<float*>(v.param_name);
    auto s = b.spec<int32_t>("S", v.spec);
    auto i = b.global_id_x();
    auto scaled = v.use_sub ? x[i] - v.constant : x[i] * v.constant;
    x[i] = scaled + ir::cast<float>(s);
  }
  return b.build();
}

}  // namespace

TEST_CASE("same kernel built twice: same hash and key", "[ir][hash]") {
  CHECK(make({}).hash() == make({}).hash());
  CHECK(make({}).canonical() == make({}).canonical());
  CHECK(ops::saxpy_kernel().hash() == ops::saxpy_kernel().hash());
  CHECK(jit::cache_key(make({}), "sm_90") == jit::cache_key(make({}), "sm_90"));
}

TEST_CASE("names that do not change the code do not change the hash", "[ir][hash]") {
  Variant v;
  v.param_name = "renamed";
  CHECK(make(v).hash() == make({}).hash());
}

TEST_CASE("each change that alters the code changes the hash and key", "[ir][hash]") {
  const ir::Hash128 base = make({}).hash();
  Variant constant, type, op, spec, name;
  constant.constant = 3.0f;
  type.use_f64 = true;
  op.use_sub = true;
  spec.spec = 128;
  name.kernel_name = "k2";  // the entry symbol is in the PTX
  for (const Variant& v : {constant, type, op, spec, name}) {
    CHECK_FALSE(make(v).hash() == base);
    CHECK_FALSE(jit::cache_key(make(v), "sm_90") == jit::cache_key(make({}), "sm_90"));
  }
}

TEST_CASE("the target arch is part of the key", "[ir][hash]") {
  ir::Kernel k = make({});
  CHECK_FALSE(jit::cache_key(k, "sm_80") == jit::cache_key(k, "sm_90"));
  CHECK_FALSE(jit::cache_key(k, "sm_90") == jit::cache_key(k, "sm_90a"));
  CHECK(jit::cache_key(k, "sm_90").hex().size() == 32);
}
