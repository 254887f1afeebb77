# A generated token's parts at concurrency 1 (bench/generation_bench.py --floor): the engine's
# single step, the server's token loop without gRPC, and a stream's message with no model.
add_executable(generation_floor ${CMAKE_CURRENT_LIST_DIR}/generation_floor.cc)
target_compile_options(generation_floor PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(generation_floor PRIVATE rnnserve_server_lib CLI11::CLI11)
