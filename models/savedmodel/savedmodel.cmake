# The SavedModel importer: our own subset of TensorFlow's and tf_keras's protos (their field
# numbers), the checkpoint (TensorBundle) reader and the Keras metadata path. Included from
# models/CMakeLists.txt.
set(SAVEDMODEL_PROTO_OUT ${PROJECT_BINARY_DIR}/models/savedmodel)
file(MAKE_DIRECTORY ${SAVEDMODEL_PROTO_OUT})
add_custom_command(
  OUTPUT ${SAVEDMODEL_PROTO_OUT}/savedmodel.pb.cc ${SAVEDMODEL_PROTO_OUT}/savedmodel.pb.h
  COMMAND protobuf::protoc --proto_path=${PROJECT_SOURCE_DIR} --cpp_out=${PROJECT_BINARY_DIR}
          ${CMAKE_CURRENT_LIST_DIR}/savedmodel.proto
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/savedmodel.proto protobuf::protoc
  COMMENT "protoc models/savedmodel/savedmodel.proto")

# Generated code is compiled without our warnings.
add_library(rnnserve_savedmodel_proto STATIC ${SAVEDMODEL_PROTO_OUT}/savedmodel.pb.cc)
target_include_directories(rnnserve_savedmodel_proto PUBLIC ${PROJECT_BINARY_DIR})
target_link_libraries(rnnserve_savedmodel_proto PUBLIC protobuf::libprotobuf)

# The checkpoint reader alone (the fuzz target links only this).
add_library(rnnserve_tensor_bundle STATIC
  ${CMAKE_CURRENT_LIST_DIR}/sstable.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle.cc)
target_compile_options(rnnserve_tensor_bundle PRIVATE ${RNNSERVE_WARNINGS})
target_include_directories(rnnserve_tensor_bundle PRIVATE ${HDF5_INCLUDE_DIRS})
target_link_libraries(rnnserve_tensor_bundle PUBLIC rnnserve_savedmodel_proto absl::status
  absl::statusor absl::strings absl::str_format)

# The SavedModel importer itself is part of rnnserve_models: its Keras path builds through
# models/keras/.
target_sources(rnnserve_models PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/savedmodel.cc
  ${CMAKE_CURRENT_LIST_DIR}/savedmodel_keras.cc
  ${CMAKE_CURRENT_LIST_DIR}/savedmodel_graph.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph_layers.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph_recurrent.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph_walk.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph_cudnn.cc
  ${CMAKE_CURRENT_LIST_DIR}/function_graph.cc)
target_link_libraries(rnnserve_models PRIVATE rnnserve_tensor_bundle)
