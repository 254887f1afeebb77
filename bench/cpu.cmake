# The CPU engine's side-by-side benchmark binary (driven by bench/cpu_peers.sh).
add_executable(cpu_rnn_bench ${CMAKE_CURRENT_LIST_DIR}/cpu_rnn_bench.cc)
target_compile_options(cpu_rnn_bench PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(cpu_rnn_bench PRIVATE rnnserve_engine rnnserve_client_lib)
