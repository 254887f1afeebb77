# Access: TLS, mutual TLS, bearer and admin tokens, probes and bind addresses on the real
# server (certificates made by openssl in the test); the Python client's side in
# security_client_test.py.
rnnserve_test(security_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/security_integration_test.cc)
target_link_libraries(security_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto rnnserve_health_proto rnnserve_tfserving_proto)

add_test(NAME PythonClient.TlsTokensAndReflection
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/security_client_test.py ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:rnnserve>)
set_tests_properties(PythonClient.TlsTokensAndReflection PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 120)

# Model control beyond loopback (server/auth/access_control.h).
rnnserve_test(model_control_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/model_control_integration_test.cc)
target_link_libraries(model_control_integration_test PRIVATE rnnserve_server_process)
