# Dynamic batcher tests: fake clock and fake engine, no sleeps.
add_library(rnnserve_batching_test_support STATIC
  ${CMAKE_CURRENT_LIST_DIR}/batching_fake_engine.cc ${CMAKE_CURRENT_LIST_DIR}/batching_test_util.cc)
target_link_libraries(rnnserve_batching_test_support PUBLIC rnnserve_batching GTest::gtest)

rnnserve_test(batching_former_test unit ${CMAKE_CURRENT_LIST_DIR}/batching_former_test.cc)
target_link_libraries(batching_former_test PRIVATE rnnserve_batching_test_support)

rnnserve_test(batching_dynamic_batcher_test unit
  ${CMAKE_CURRENT_LIST_DIR}/batching_dynamic_batcher_test.cc)
target_link_libraries(batching_dynamic_batcher_test PRIVATE rnnserve_batching_test_support)

rnnserve_test(batching_servable_test unit ${CMAKE_CURRENT_LIST_DIR}/batching_servable_test.cc)
target_link_libraries(batching_servable_test PRIVATE rnnserve_server_lib)

rnnserve_test(batching_policy_test unit ${CMAKE_CURRENT_LIST_DIR}/batching_policy_test.cc)
target_link_libraries(batching_policy_test PRIVATE rnnserve_batching)

rnnserve_test(batching_instance_pool_test unit
  ${CMAKE_CURRENT_LIST_DIR}/batching_instance_pool_test.cc)
target_link_libraries(batching_instance_pool_test PRIVATE rnnserve_batching)

rnnserve_test(batching_cellular_test unit ${CMAKE_CURRENT_LIST_DIR}/batching_cellular_test.cc)
target_link_libraries(batching_cellular_test PRIVATE rnnserve_batching_test_support)

rnnserve_test(batching_async_runner_test unit
  ${CMAKE_CURRENT_LIST_DIR}/batching_async_runner_test.cc)
target_link_libraries(batching_async_runner_test PRIVATE rnnserve_batching)
