# GPU engine tests (label gpu). Each test skips with its reason where there is no GPU.
rnnserve_test(gpu_engine_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_engine_test.cc)
rnnserve_test(gpu_conformance_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_conformance_test.cc)
rnnserve_test(gpu_torch_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_torch_test.cc)
rnnserve_test(gpu_torch_lengths_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_torch_lengths_test.cc)
rnnserve_test(gpu_layers_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_layers_test.cc)
if(RNNSERVE_HAVE_CUDA)
  # Pins engine-internal algorithms, so it needs the CUDA build's headers.
  rnnserve_test(gpu_fused_lstm_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_fused_lstm_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_fused_onnx_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/gpu_fused_stack_keras_test.cc)
  rnnserve_test(gpu_fused_half_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_fused_half_test.cc)
  # Reads the pinned pool of the engine's compiled model.
  rnnserve_test(gpu_host_io_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_host_io_test.cc)
  # The resident step loop (engine/cuda/resident_loop.h) against the engine and Keras.
  rnnserve_test(gpu_resident_loop_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_resident_loop_test.cc)
endif()
# Loads a model through the server's Servable on GPUs 0 and 1.
rnnserve_test(gpu_multi_gpu_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_multi_gpu_test.cc)
target_link_libraries(gpu_multi_gpu_test PRIVATE rnnserve_server_lib)
rnnserve_test(gpu_evaluate_logits_test gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_evaluate_logits_test.cc)
target_link_libraries(gpu_evaluate_logits_test PRIVATE rnnserve_server_lib)
# Step-level batching on the resident step loop, through the server's Servable, against Keras.
rnnserve_test(gpu_resident_cellular_test gpu
  ${CMAKE_CURRENT_LIST_DIR}/gpu_resident_cellular_test.cc)
target_link_libraries(gpu_resident_cellular_test PRIVATE rnnserve_server_lib
  nlohmann_json::nlohmann_json)
