rnnserve_test(metrics_test unit ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cc)
target_link_libraries(metrics_test PRIVATE rnnserve_metrics)

# promtool checks of deploy/prometheus and of the exposition; skip where promtool is absent.
rnnserve_test(metrics_promtool_test unit ${CMAKE_CURRENT_LIST_DIR}/metrics_promtool_test.cc)
target_link_libraries(metrics_promtool_test PRIVATE rnnserve_metrics nlohmann_json::nlohmann_json)
