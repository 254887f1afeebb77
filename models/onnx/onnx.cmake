# The ONNX importer: our own subset of onnx.proto (ONNX's field numbers), compiled with protoc,
# and the graph -> IR conversion. Included from models/CMakeLists.txt.
set(ONNX_PROTO_OUT ${PROJECT_BINARY_DIR}/models/onnx)
file(MAKE_DIRECTORY ${ONNX_PROTO_OUT})
add_custom_command(
  OUTPUT ${ONNX_PROTO_OUT}/onnx.pb.cc ${ONNX_PROTO_OUT}/onnx.pb.h
  COMMAND protobuf::protoc --proto_path=${PROJECT_SOURCE_DIR} --cpp_out=${PROJECT_BINARY_DIR}
          ${CMAKE_CURRENT_LIST_DIR}/onnx.proto
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/onnx.proto protobuf::protoc
  COMMENT "protoc models/onnx/onnx.proto")

# Generated code is compiled without our warnings.
add_library(rnnserve_onnx_proto STATIC ${ONNX_PROTO_OUT}/onnx.pb.cc)
target_include_directories(rnnserve_onnx_proto PUBLIC ${PROJECT_BINARY_DIR})
target_link_libraries(rnnserve_onnx_proto PUBLIC protobuf::libprotobuf)

add_library(rnnserve_onnx STATIC
  ${CMAKE_CURRENT_LIST_DIR}/onnx_batch_axes.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_graph.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_recurrent.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_tensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/onnx_zero_state.cc)
target_compile_options(rnnserve_onnx PRIVATE ${RNNSERVE_WARNINGS})
target_link_libraries(rnnserve_onnx PUBLIC rnnserve_engine_core rnnserve_onnx_proto absl::status
  absl::statusor absl::strings)
