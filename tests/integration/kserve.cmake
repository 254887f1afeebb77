# KServe v2 / Open Inference Protocol: a C++ stub against the real server, and the official
# Python tools (tritonclient, perf_analyzer), which skip (exit 77) with the reason when absent.
rnnserve_test(kserve_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/kserve_integration_test.cc)
target_link_libraries(kserve_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto)

foreach(tool tritonclient perf_analyzer http)
  add_test(NAME kserve_${tool}_test
    COMMAND sh -c "command -v python3 >/dev/null || { echo 'SKIPPED: python3 not found'; exit 77; }; exec python3 \"$@\""
      sh ${CMAKE_CURRENT_LIST_DIR}/kserve_${tool}_test.py
      --server $<TARGET_FILE:rnnserve> --source-dir ${PROJECT_SOURCE_DIR})
  set_tests_properties(kserve_${tool}_test PROPERTIES
    LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
