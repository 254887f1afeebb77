# The /metrics endpoint of the real rnnserve binary, scraped by a real Prometheus.
rnnserve_test(metrics_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/metrics_integration_test.cc)
target_link_libraries(metrics_integration_test PRIVATE rnnserve_server_process
  nlohmann_json::nlohmann_json)
