# GPU engine vs PyTorch (bench/gpu_peers.py drives gpu_peers on the device machine).
if(RNNSERVE_HAVE_CUDA)
  add_executable(gpu_peers ${CMAKE_CURRENT_LIST_DIR}/gpu_peers.cc)
  target_compile_options(gpu_peers PRIVATE ${RNNSERVE_WARNINGS})
  target_link_libraries(gpu_peers PRIVATE rnnserve_engine rnnserve_engine_cuda rnnserve_client_lib
    CLI11::CLI11)
endif()
