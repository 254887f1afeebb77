# The request path's floor: KServe v2 over gRPC with no model, per threading design
# (bench/grpc_floor.sh).
add_executable(grpc_floor ${CMAKE_CURRENT_LIST_DIR}/grpc_floor.cc)
target_compile_options(grpc_floor PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(grpc_floor PRIVATE rnnserve_kserve_proto CLI11::CLI11)
