# The shell tooling: deploy/install_deps.sh's failures and progress (deploy/progress.sh), and
# bench/pack_gpu_device_build.sh on a stand-in build tree.
add_test(NAME Scripts.InstallDepsFailsWithPipsMessage
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/install_deps_test.sh)
add_test(NAME Scripts.PackGpuDeviceBuild
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/pack_gpu_device_build_test.sh)
set_tests_properties(Scripts.InstallDepsFailsWithPipsMessage Scripts.PackGpuDeviceBuild
  PROPERTIES LABELS integration TIMEOUT 120)
