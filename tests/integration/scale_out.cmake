# Scale-out of stateful sequences: two rnnserve replicas sharing a real redis-server
# (--sequence-store); skipped, naming the reason, without redis-server.
rnnserve_test(scale_out_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/scale_out_integration_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/scale_out_proxy_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/scale_out_drain_test.cc)
target_link_libraries(scale_out_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto rnnserve_test_redis rnnserve_store)
