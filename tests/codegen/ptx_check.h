// Golden helpers for PTX: build a one-op kernel over parameters (a, b, c: T; out: T*),
// emit PTX, and look for one exact instruction line.
#pragma once

#include <functional>
#include <string>

#include "kaio/codegen/ptx.h"
#include "kaio/kaio.h"

namespace kaio::test {

inline std::string ptx_of(ir::Type t, ir::Type out_t,
                          const std::function<ir::Value(ir::KernelBuilder&, ir::Value, ir::Value, ir::Value)>& f,
                          const std::string& arch = "sm_90") {
  ir::KernelBuilder b("g");
  auto a = b.param("a", t);
  auto bb = b.param("b", t);
  auto c = b.param("c", t);
  auto out = b.param("out", ir::Type::pointer(out_t.elem, false));
  out[0] = f(b, a, bb, c);
  return codegen::emit_ptx(b.build(), {arch, 9, 0});
}

inline bool has_line(const std::string& ptx, const std::string& line) {
  return ptx.find("\t" + line + ";\n") != std::string::npos;
}

}  // namespace kaio::test

// CHECK_PTX(type, expression over a b c, "one PTX line") - asmjit / lit style golden.
#define CHECK_PTX_T(T, OUT, EXPR, LINE)                                                           \
  do {                                                                                           \
    std::string ptx_ = ::kaio::test::ptx_of(::kaio::ir::type_of<T>(), ::kaio::ir::type_of<OUT>(), \
                                            [](auto& b, auto a, auto bb, auto c) -> ::kaio::ir::Value { \
                                              (void)b; (void)a; (void)bb; (void)c;               \
                                              return (EXPR);                                     \
                                            });                                                  \
    INFO(ptx_);                                                                                  \
    CHECK(::kaio::test::has_line(ptx_, LINE));                                                   \
  } while (0)
#define CHECK_PTX(T, EXPR, LINE) CHECK_PTX_T(T, T, EXPR, LINE)
