# What recording one request's metrics costs (bench/results/metrics-histogram-2026-11-23.md).
add_executable(metrics_record_bench ${CMAKE_CURRENT_LIST_DIR}/metrics_record_bench.cc)
target_compile_options(metrics_record_bench PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(metrics_record_bench PRIVATE rnnserve_metrics)
