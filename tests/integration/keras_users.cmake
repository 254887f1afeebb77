# What Keras users send: float token ids over both APIs, stream chunks of a fixed-window model
# (fixtures made by real Keras: models/scripts/make_keras_fixtures.py).
rnnserve_test(keras_users_integration_test integration
  ${CMAKE_CURRENT_LIST_DIR}/keras_users_integration_test.cc)
target_link_libraries(keras_users_integration_test PRIVATE rnnserve_server_process
  rnnserve_kserve_proto)
