# GPU engine vs PyTorch (bench/gpu_peers.py drives gpu_peers on the device machine).
if(RNNSERVE_HAVE_CUDA)
  add_executable(gpu_peers ${CMAKE_CURRENT_LIST_DIR}/gpu_peers.cc)
  target_compile_options(gpu_peers PRIVATE ${RNNSERVE_WARNINGS})
  target_link_libraries(gpu_peers PRIVATE rnnserve_engine rnnserve_engine_cuda rnnserve_client_lib
    CLI11::CLI11)
  # A small request's engine call, layer by layer (bench/gpu_device_run.sh, stage path).
  add_executable(gpu_request_path ${CMAKE_CURRENT_LIST_DIR}/gpu_request_path.cc)
  target_compile_options(gpu_request_path PRIVATE ${RNNSERVE_WARNINGS})
  target_link_libraries(gpu_request_path PRIVATE rnnserve_engine rnnserve_engine_cuda
    rnnserve_models CLI11::CLI11)
endif()
