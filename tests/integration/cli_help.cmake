# Every binary's --help and flag errors (CLI11), run on the built binaries.
rnnserve_test(cli_help_test integration ${CMAKE_CURRENT_LIST_DIR}/cli_help_test.cc)
target_link_libraries(cli_help_test PRIVATE rnnserve_server_process)
# bench/ is added after tests/: its targets are known by name here, not yet as targets.
if(RNNSERVE_BUILD_BENCH)
  target_compile_definitions(cli_help_test PRIVATE CPU_RNN_BENCH_BIN="$<TARGET_FILE:cpu_rnn_bench>")
  add_dependencies(cli_help_test cpu_rnn_bench)
endif()
if(RNNSERVE_BUILD_BENCH AND RNNSERVE_HAVE_CUDA)
  target_compile_definitions(cli_help_test PRIVATE GPU_PEERS_BIN="$<TARGET_FILE:gpu_peers>")
  add_dependencies(cli_help_test gpu_peers)
endif()
