# The shared state store (server/store/): its record, and the Redis store against a real
# redis-server (tests/support/redis_server.h; skipped, naming the reason, without one).
add_library(rnnserve_test_redis STATIC ${CMAKE_CURRENT_LIST_DIR}/../support/redis_server.cc)
target_compile_options(rnnserve_test_redis PRIVATE ${RNNSERVE_WARNINGS})
target_include_directories(rnnserve_test_redis PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(rnnserve_test_redis PUBLIC absl::status absl::statusor absl::strings
  absl::time)

rnnserve_test(store_record_test unit ${CMAKE_CURRENT_LIST_DIR}/store_record_test.cc)
target_link_libraries(store_record_test PRIVATE rnnserve_store)
rnnserve_test(store_redis_test unit ${CMAKE_CURRENT_LIST_DIR}/store_redis_test.cc)
target_link_libraries(store_redis_test PRIVATE rnnserve_store rnnserve_test_redis)

# Clients name a call's sequence in the x-sequence-id header, for a proxy to hash.
rnnserve_test(client_sequence_header_test unit
  ${CMAKE_CURRENT_LIST_DIR}/client_sequence_header_test.cc)
target_link_libraries(client_sequence_header_test PRIVATE rnnserve_client)
rnnserve_test(store_redis_drain_test unit ${CMAKE_CURRENT_LIST_DIR}/store_redis_drain_test.cc)
target_link_libraries(store_redis_drain_test PRIVATE rnnserve_store rnnserve_test_redis)
rnnserve_test(store_redis_client_test unit ${CMAKE_CURRENT_LIST_DIR}/store_redis_client_test.cc)
target_link_libraries(store_redis_client_test PRIVATE rnnserve_store rnnserve_test_redis)
