rnnserve_test(gpu_availability_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_availability_test.cc)
