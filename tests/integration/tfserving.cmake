# TF Serving's own Python client (tensorflow-serving-api + tensorflow-cpu) against the real
# server, from the venv deploy/install_deps.sh makes for this test alone
# ($RNNSERVE_TFSERVING_PYTHON, else /opt/tfserving-client/bin/python); it skips (exit 77) with
# the reason where that venv is absent.
add_test(NAME tfserving_client_test
  COMMAND sh -c "py=\"\${RNNSERVE_TFSERVING_PYTHON:-/opt/tfserving-client/bin/python}\"; [ -x \"$py\" ] || { echo \"SKIPPED: $py not found (deploy/install_deps.sh makes the tensorflow-serving-api venv)\"; exit 77; }; exec \"$py\" \"$@\""
    sh ${CMAKE_CURRENT_LIST_DIR}/tfserving_client_test.py
    --server $<TARGET_FILE:rnnserve> --source-dir ${PROJECT_SOURCE_DIR})
set_tests_properties(tfserving_client_test PROPERTIES
  LABELS integration SKIP_RETURN_CODE 77 TIMEOUT 300)

# TF Serving's REST API on --http-port with curl (tfserving_rest_test.py).
add_test(NAME tfserving_rest_test
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/tfserving_rest_test.py
    --server $<TARGET_FILE:rnnserve> --source-dir ${PROJECT_SOURCE_DIR})
set_tests_properties(tfserving_rest_test PROPERTIES LABELS integration SKIP_RETURN_CODE 77
  TIMEOUT 180)
