// Test runner. [gpu] tests need a CUDA device: when the test spec asks for them and no
// device is present, the run exits 77, which CTest reports as "skipped" -- unless
// KAIO_INTERPRET=1, where they run in the CPU interpreter.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "kaio/jit/buffer.h"
#include "kaio/jit/driver.h"

int main(int argc, char** argv) {
  bool wants_gpu = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.find("[gpu]") != std::string::npos && a.find("~[gpu]") == std::string::npos) wants_gpu = true;
  }
  if (wants_gpu && !kaio::jit::interpret_mode() && !kaio::jit::driver::available()) {
    std::fprintf(stderr, "no CUDA device: [gpu] tests skipped\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
