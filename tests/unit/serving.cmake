rnnserve_test(sequence_manager_test unit ${CMAKE_CURRENT_LIST_DIR}/sequence_manager_test.cc)
target_link_libraries(sequence_manager_test PRIVATE rnnserve_server_lib)

rnnserve_test(serving_batch_axis_test unit ${CMAKE_CURRENT_LIST_DIR}/serving_batch_axis_test.cc)
target_link_libraries(serving_batch_axis_test PRIVATE rnnserve_server_lib)
rnnserve_test(serving_torch_state_test unit ${CMAKE_CURRENT_LIST_DIR}/serving_torch_state_test.cc)
target_link_libraries(serving_torch_state_test PRIVATE rnnserve_server_lib)

rnnserve_test(health_service_test unit ${CMAKE_CURRENT_LIST_DIR}/health_service_test.cc)
target_link_libraries(health_service_test PRIVATE rnnserve_server_lib)

rnnserve_test(server_flags_test unit ${CMAKE_CURRENT_LIST_DIR}/server_flags_test.cc)
target_link_libraries(server_flags_test PRIVATE rnnserve_server_lib)
rnnserve_test(model_check_test unit ${CMAKE_CURRENT_LIST_DIR}/model_check_test.cc)
target_link_libraries(model_check_test PRIVATE rnnserve_server_lib)

rnnserve_test(servable_test unit ${CMAKE_CURRENT_LIST_DIR}/servable_test.cc)
target_link_libraries(servable_test PRIVATE rnnserve_server_lib rnnserve_batching_test_support)

rnnserve_test(token_auth_test unit ${CMAKE_CURRENT_LIST_DIR}/token_auth_test.cc)
target_link_libraries(token_auth_test PRIVATE rnnserve_auth)
rnnserve_test(access_control_test unit ${CMAKE_CURRENT_LIST_DIR}/access_control_test.cc)
target_link_libraries(access_control_test PRIVATE rnnserve_auth rnnserve_proto rnnserve_kserve_proto
  rnnserve_health_proto rnnserve_tfserving_proto)
rnnserve_test(tls_test unit ${CMAKE_CURRENT_LIST_DIR}/tls_test.cc)
target_link_libraries(tls_test PRIVATE rnnserve_auth)
rnnserve_test(client_text_test unit ${CMAKE_CURRENT_LIST_DIR}/client_text_test.cc)
target_link_libraries(client_text_test PRIVATE rnnserve_server_lib)
rnnserve_test(limits_test unit ${CMAKE_CURRENT_LIST_DIR}/limits_test.cc)
rnnserve_test(fair_share_test unit ${CMAKE_CURRENT_LIST_DIR}/fair_share_test.cc)
target_link_libraries(fair_share_test PRIVATE rnnserve_server_lib)
target_link_libraries(limits_test PRIVATE rnnserve_server_lib)
rnnserve_test(readiness_test unit ${CMAKE_CURRENT_LIST_DIR}/readiness_test.cc)
target_link_libraries(readiness_test PRIVATE rnnserve_server_lib)
rnnserve_test(evaluate_keras_logits_test unit
  ${CMAKE_CURRENT_LIST_DIR}/evaluate_keras_logits_test.cc)
target_link_libraries(evaluate_keras_logits_test PRIVATE rnnserve_server_lib)

rnnserve_test(request_core_test unit ${CMAKE_CURRENT_LIST_DIR}/request_core_test.cc)
target_link_libraries(request_core_test PRIVATE rnnserve_kserve rnnserve_server_lib
  rnnserve_batching_test_support)
rnnserve_test(serving_lengths_batching_test unit
  ${CMAKE_CURRENT_LIST_DIR}/serving_lengths_batching_test.cc)
target_link_libraries(serving_lengths_batching_test PRIVATE rnnserve_server_lib)

rnnserve_test(log_test unit ${CMAKE_CURRENT_LIST_DIR}/log_test.cc)
target_link_libraries(log_test PRIVATE rnnserve_server_lib)

# TF Serving's gRPC and REST front ends (server/services/tfserving).
rnnserve_test(tfserving_test unit ${CMAKE_CURRENT_LIST_DIR}/tfserving_test.cc)
target_link_libraries(tfserving_test PRIVATE rnnserve_tfserving rnnserve_server_lib
  nlohmann_json::nlohmann_json)

rnnserve_test(model_config_test unit ${CMAKE_CURRENT_LIST_DIR}/model_config_test.cc)
target_link_libraries(model_config_test PRIVATE rnnserve_server_lib)
rnnserve_test(kserve_rest_test unit ${CMAKE_CURRENT_LIST_DIR}/kserve_rest_test.cc)
target_link_libraries(kserve_rest_test PRIVATE rnnserve_kserve nlohmann_json::nlohmann_json)
