add_library(rnnserve_server_process STATIC ${CMAKE_CURRENT_LIST_DIR}/server_process.cc)
target_compile_definitions(rnnserve_server_process PUBLIC
  RNNSERVE_BIN="$<TARGET_FILE:rnnserve>" RNNSERVE_CLI_BIN="$<TARGET_FILE:rnnserve-cli>")
target_link_libraries(rnnserve_server_process PUBLIC rnnserve_client rnnserve_health_proto
  GTest::gtest)
add_dependencies(rnnserve_server_process rnnserve rnnserve-cli)

rnnserve_test(predict_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/predict_integration_test.cc)
target_link_libraries(predict_integration_test PRIVATE rnnserve_server_process)

rnnserve_test(evaluate_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/evaluate_integration_test.cc)
target_link_libraries(evaluate_integration_test PRIVATE rnnserve_server_process)

rnnserve_test(load_log_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/load_log_integration_test.cc)
target_link_libraries(load_log_integration_test PRIVATE rnnserve_server_process)

rnnserve_test(repository_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/repository_integration_test.cc)
target_link_libraries(repository_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto)

rnnserve_test(stream_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/stream_integration_test.cc)
target_link_libraries(stream_integration_test PRIVATE rnnserve_server_process)

rnnserve_test(errors_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/errors_integration_test.cc)
target_link_libraries(errors_integration_test PRIVATE rnnserve_server_process)

add_test(NAME PythonClient.PredictEvaluateStreamMatchKeras
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/python_client_test.py ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:rnnserve>)
set_tests_properties(PythonClient.PredictEvaluateStreamMatchKeras PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 120)

# Generate (server/generation/) with the Python client against the tf-keras fixtures.
add_test(NAME Generation.MatchesKerasAndRefusesBadInput
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/generation_test.py ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:rnnserve> $<TARGET_FILE:rnnserve-cli>)
set_tests_properties(Generation.MatchesKerasAndRefusesBadInput PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 300)

# The wheel built out of the checkout, in cached venvs at the stated floors and beside
# tritonclient[grpc] (the venvs are made once from the package index, then reused).
add_test(NAME PythonClient.WheelAtFloorsAndBesideTritonclient
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/python_client_wheel_test.py ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:rnnserve> ${CMAKE_CURRENT_BINARY_DIR}/python_client_wheel)
set_tests_properties(PythonClient.WheelAtFloorsAndBesideTritonclient PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 600)

rnnserve_test(onnx_serving_test integration ${CMAKE_CURRENT_LIST_DIR}/onnx_serving_test.cc)
target_link_libraries(onnx_serving_test PRIVATE rnnserve_server_process)

# PyTorch's h0 / c0 inputs and its zero-state export through Predict, StreamPredict and KServe
# sequences (tests/fixtures/torch_state).
rnnserve_test(torch_state_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/torch_state_integration_test.cc)
target_link_libraries(torch_state_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto)

rnnserve_test(limits_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/limits_integration_test.cc)
target_link_libraries(limits_integration_test PRIVATE rnnserve_server_process rnnserve_kserve_proto)
rnnserve_test(fairness_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/fairness_integration_test.cc)
target_link_libraries(fairness_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto)
