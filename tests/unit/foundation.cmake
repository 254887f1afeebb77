rnnserve_test(engine_ir_test unit ${CMAKE_CURRENT_LIST_DIR}/engine_ir_test.cc)
rnnserve_test(engine_tensor_test unit ${CMAKE_CURRENT_LIST_DIR}/engine_tensor_test.cc)
# The example model on each engine (*/Gpu instances: label gpu).
rnnserve_engines_test(example_model_test unit ${CMAKE_CURRENT_LIST_DIR}/example_model_test.cc)
rnnserve_test(engine_lengths_test unit ${CMAKE_CURRENT_LIST_DIR}/engine_lengths_test.cc)
rnnserve_test(npy_test unit ${CMAKE_CURRENT_LIST_DIR}/npy_test.cc)
