# gRPC health checking (grpc.health.v1) on the real server.
rnnserve_test(health_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/health_integration_test.cc)
target_link_libraries(health_integration_test PRIVATE rnnserve_server_process
  rnnserve_health_proto rnnserve_kserve_proto)
