# Keras importer: what it writes into the IR, and what it does with broken files.
find_package(nlohmann_json 3.10 REQUIRED)
rnnserve_test(keras_import_test unit ${CMAKE_CURRENT_LIST_DIR}/keras_import_test.cc)
target_link_libraries(keras_import_test PRIVATE nlohmann_json::nlohmann_json)
rnnserve_test(keras_bad_files_test unit ${CMAKE_CURRENT_LIST_DIR}/keras_bad_files_test.cc)
target_include_directories(keras_bad_files_test PRIVATE ${HDF5_INCLUDE_DIRS})
target_link_libraries(keras_bad_files_test PRIVATE ${HDF5_C_LIBRARIES} PkgConfig::LIBZIP)

# TensorFlow SavedModels (models/savedmodel/), served as TF Serving lays them out.
add_library(rnnserve_savedmodel_case STATIC ${CMAKE_CURRENT_LIST_DIR}/savedmodel_case.cc)
target_compile_options(rnnserve_savedmodel_case PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(rnnserve_savedmodel_case PUBLIC rnnserve_server_lib rnnserve_test_support
                      GTest::gtest nlohmann_json::nlohmann_json)
rnnserve_test(savedmodel_import_test unit ${CMAKE_CURRENT_LIST_DIR}/savedmodel_import_test.cc)
target_link_libraries(savedmodel_import_test PRIVATE rnnserve_savedmodel_case)
rnnserve_test(savedmodel_signature_test unit
              ${CMAKE_CURRENT_LIST_DIR}/savedmodel_signature_test.cc)
target_link_libraries(savedmodel_signature_test PRIVATE rnnserve_savedmodel_case)
# TF Serving's front ends on SavedModels of several inputs and outputs.
rnnserve_test(tfserving_savedmodel_test unit
              ${CMAKE_CURRENT_LIST_DIR}/tfserving_savedmodel_test.cc)
target_link_libraries(tfserving_savedmodel_test PRIVATE rnnserve_tfserving rnnserve_server_lib
                      nlohmann_json::nlohmann_json)
