rnnserve_test(engine_ir_test unit ${CMAKE_CURRENT_LIST_DIR}/engine_ir_test.cc)
rnnserve_test(engine_lengths_test unit ${CMAKE_CURRENT_LIST_DIR}/engine_lengths_test.cc)
rnnserve_test(lstm_keras_test unit ${CMAKE_CURRENT_LIST_DIR}/lstm_keras_test.cc)
rnnserve_test(npy_test unit ${CMAKE_CURRENT_LIST_DIR}/npy_test.cc)
