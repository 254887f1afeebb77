# The CPU engine's BF16 and INT8 weight modes on the conformance corpus and the real Keras
# files, against the frameworks' outputs within docs/precision.md's bounds; once with the best
# kernel set and once with each set forced (rnnserve_cpu_kernel_runs, tests/unit/cpu.cmake).
find_package(nlohmann_json 3.10 REQUIRED)
rnnserve_test(cpu_precision_test conformance ${CMAKE_CURRENT_LIST_DIR}/cpu_precision_test.cc)
target_link_libraries(cpu_precision_test PRIVATE nlohmann_json::nlohmann_json)
rnnserve_cpu_kernel_runs(cpu_precision_test conformance)
