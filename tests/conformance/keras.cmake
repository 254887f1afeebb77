# Keras import against real Keras (fixtures: models/scripts/make_keras_fixtures.py).
find_package(nlohmann_json 3.10 REQUIRED)
rnnserve_test(keras_conformance_test conformance
  ${CMAKE_CURRENT_LIST_DIR}/keras_conformance_test.cc)
target_link_libraries(keras_conformance_test PRIVATE nlohmann_json::nlohmann_json)
rnnserve_test(keras_real_test conformance ${CMAKE_CURRENT_LIST_DIR}/keras_real_test.cc)
target_link_libraries(keras_real_test PRIVATE nlohmann_json::nlohmann_json)

# The Keras corpus through step-level (cellular) batching, on each engine: Gpu/* labelled gpu.
rnnserve_test_binary(cellular_conformance_test
  ${CMAKE_CURRENT_LIST_DIR}/cellular_conformance_test.cc)
target_link_libraries(cellular_conformance_test PRIVATE rnnserve_server_lib
  nlohmann_json::nlohmann_json)
gtest_discover_tests(cellular_conformance_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-Gpu/*"
  PROPERTIES LABELS conformance SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
gtest_discover_tests(cellular_conformance_test DISCOVERY_TIMEOUT 60 TEST_FILTER "Gpu/*"
  PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# Slot states (engine/slot_states.h) against Keras, on each engine: Gpu/* labelled gpu.
rnnserve_test_binary(slot_states_test ${CMAKE_CURRENT_LIST_DIR}/slot_states_test.cc)
target_link_libraries(slot_states_test PRIVATE rnnserve_server_lib nlohmann_json::nlohmann_json)
gtest_discover_tests(slot_states_test DISCOVERY_TIMEOUT 60 TEST_FILTER "-Gpu/*"
  PROPERTIES LABELS conformance SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
gtest_discover_tests(slot_states_test DISCOVERY_TIMEOUT 60 TEST_FILTER "Gpu/*"
  PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
