# rnnserve-cli's commands and `rnnserve inspect` against the real server binary.
rnnserve_test(cli_commands_test integration ${CMAKE_CURRENT_LIST_DIR}/cli_commands_test.cc)
target_link_libraries(cli_commands_test PRIVATE rnnserve_server_process)
