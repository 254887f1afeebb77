rnnserve_test(gpu_availability_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_availability_test.cc)
# nv_gpu_* metrics through NVML (server/metrics/gpu_metrics.h).
rnnserve_test(gpu_metrics_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_metrics_test.cc)
target_link_libraries(gpu_metrics_test PRIVATE rnnserve_metrics)
