// The main of every gtest binary: gtest_main's, after the engine settings the environment gives
// are read, once, as the server's main.cc reads them (README.md, "Environment variables"):
// RNNSERVE_CPU_KERNELS forces the CPU kernel set, so that tests/unit/cpu.cmake runs whole
// binaries on each set. Nothing in engine/ reads the environment.

#include <cstdlib>

#include "engine/cpu/panel_gemm.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (const char* kernels = std::getenv("RNNSERVE_CPU_KERNELS"); kernels != nullptr) {
    // Fails only when a set was chosen already, which nothing before this line does; a name the
    // CPU cannot run is what ActiveCpuKernelSet reports and the CPU engine refuses.
    rnnserve::engine::cpu::UseCpuKernelSet(kernels).IgnoreError();
  }
  return RUN_ALL_TESTS();
}
