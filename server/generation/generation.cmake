# Generation by recurrent language models (server/generation/generator.h), part of the server
# library: its front end (services/generate_service.cc) and the servables are there.
target_sources(rnnserve_server_lib PRIVATE
  generation/generation_metrics.cc generation/generator.cc generation/model_kind.cc generation/model_step.cc
  generation/request.cc generation/sampler.cc generation/slot_feedback.cc generation/vocabulary.cc)
target_link_libraries(rnnserve_server_lib PRIVATE nlohmann_json::nlohmann_json)
