# The resident step loop's admission and step costs on one GPU (engine/cuda/resident_loop.h).
if(RNNSERVE_HAVE_CUDA)
  add_executable(resident_loop_bench ${CMAKE_CURRENT_LIST_DIR}/resident_loop_bench.cc)
  target_compile_options(resident_loop_bench PRIVATE ${RNNSERVE_WARNINGS})
  target_link_libraries(resident_loop_bench PRIVATE rnnserve_engine_cuda)
endif()
