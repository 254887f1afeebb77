# Cancelled and expired requests stop their work (server/batching/abandon_watch.h, the engine's
# Batch::stop): the server's CPU time and the next request's wait against the real binary.
rnnserve_test(cancel_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/cancel_integration_test.cc)
target_link_libraries(cancel_integration_test PRIVATE rnnserve_server_process)
