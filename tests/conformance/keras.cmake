# Keras import against real Keras (fixtures: models/scripts/make_keras_fixtures.py).
find_package(nlohmann_json 3.10 REQUIRED)
rnnserve_test(keras_conformance_test conformance
  ${CMAKE_CURRENT_LIST_DIR}/keras_conformance_test.cc)
target_link_libraries(keras_conformance_test PRIVATE nlohmann_json::nlohmann_json)
rnnserve_test(keras_real_test conformance ${CMAKE_CURRENT_LIST_DIR}/keras_real_test.cc)
target_link_libraries(keras_real_test PRIVATE nlohmann_json::nlohmann_json)
