# The CPU engine's side-by-side benchmark binary (driven by bench/cpu_peers.sh).
add_executable(cpu_rnn_bench ${CMAKE_CURRENT_LIST_DIR}/cpu_rnn_bench.cc)
# It inlines Eigen's AVX-512 packets, where GCC 12 reports a known false -Wmaybe-uninitialized
# inside its own avx512fintrin.h (see engine/CMakeLists.txt).
target_compile_options(cpu_rnn_bench PRIVATE ${RNNSERVE_WARNINGS}
  $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
target_link_libraries(cpu_rnn_bench PRIVATE rnnserve_engine rnnserve_client_lib CLI11::CLI11)

# A whole model file on the CPU engine, no gRPC (driven by bench/cpu_real_peers.sh).
add_executable(cpu_real_bench ${CMAKE_CURRENT_LIST_DIR}/cpu_real_bench.cc)
target_compile_options(cpu_real_bench PRIVATE ${RNNSERVE_WARNINGS}
  $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
target_link_libraries(cpu_real_bench PRIVATE rnnserve_models rnnserve_engine rnnserve_client_lib
  CLI11::CLI11)
