# The ONNX importer: bad files, gate-order conversion, folding (label unit).
rnnserve_test(onnx_import_test unit ${CMAKE_CURRENT_LIST_DIR}/onnx_import_test.cc)
target_link_libraries(onnx_import_test PRIVATE rnnserve_onnx)
# FLOAT16 / BFLOAT16 initializers against the formats' definitions (label unit).
rnnserve_test(onnx_tensor_test unit ${CMAKE_CURRENT_LIST_DIR}/onnx_tensor_test.cc)
target_link_libraries(onnx_tensor_test PRIVATE rnnserve_onnx)
