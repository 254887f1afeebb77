# Generation (server/generation/): the sampler and vocabulary, and the Generator on the tf-keras
# fixture models (models/scripts/make_generation_fixtures.py).
rnnserve_test(generation_sampler_test unit ${CMAKE_CURRENT_LIST_DIR}/generation_sampler_test.cc)
target_link_libraries(generation_sampler_test PRIVATE rnnserve_server_lib
  nlohmann_json::nlohmann_json)
# Its */Gpu instances are labelled gpu (they skip without a GPU): the GPU engine's greedy tokens
# and seeded samples against Keras's and the CPU engine's.
rnnserve_engines_test(generation_generator_test unit
  ${CMAKE_CURRENT_LIST_DIR}/generation_generator_test.cc)
target_link_libraries(generation_generator_test PRIVATE rnnserve_server_lib
  nlohmann_json::nlohmann_json)
