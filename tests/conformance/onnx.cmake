# ONNX conformance: ONNX's backend node tests (libonnx-testdata) and models exported by
# PyTorch / built with onnx.helper, against PyTorch's and onnxruntime's outputs.
rnnserve_test(onnx_backend_test conformance ${CMAKE_CURRENT_LIST_DIR}/onnx_backend_test.cc)
target_link_libraries(onnx_backend_test PRIVATE rnnserve_onnx)
rnnserve_test(onnx_fixtures_test conformance ${CMAKE_CURRENT_LIST_DIR}/onnx_fixtures_test.cc)
# PyTorch's h0 / c0 inputs in both layouts and its zero-state chain (torch_state fixtures).
rnnserve_test(torch_state_test conformance ${CMAKE_CURRENT_LIST_DIR}/torch_state_test.cc)

# The corpus once more with each CPU kernel set forced (rnnserve_cpu_kernel_runs, tests/unit).
foreach(t keras_conformance_test keras_real_test onnx_backend_test onnx_fixtures_test)
  rnnserve_cpu_kernel_runs(${t} conformance)
endforeach()
# Per-sequence lengths on PyTorch exports without sequence_lens (CPU; the GPU half is in tests/gpu).
rnnserve_test(torch_lengths_test conformance ${CMAKE_CURRENT_LIST_DIR}/torch_lengths_test.cc)
rnnserve_cpu_kernel_runs(torch_lengths_test conformance)
