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
rnnserve_test(tls_test unit ${CMAKE_CURRENT_LIST_DIR}/tls_test.cc)
target_link_libraries(tls_test PRIVATE rnnserve_auth)
rnnserve_test(client_text_test unit ${CMAKE_CURRENT_LIST_DIR}/client_text_test.cc)
target_link_libraries(client_text_test PRIVATE rnnserve_server_lib)
rnnserve_test(limits_test unit ${CMAKE_CURRENT_LIST_DIR}/limits_test.cc)
target_link_libraries(limits_test PRIVATE rnnserve_server_lib)
rnnserve_test(readiness_test unit ${CMAKE_CURRENT_LIST_DIR}/readiness_test.cc)
target_link_libraries(readiness_test PRIVATE rnnserve_server_lib)
