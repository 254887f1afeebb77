# The CPU engine: every recurrent option and every layer kernel against the real frameworks
# (fixtures from models/scripts/make_cpu_fixtures.py).
foreach(t cpu_recurrent_test cpu_keras_recurrent_test cpu_layers_test cpu_engine_test)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${t}.cc)
    rnnserve_test(${t} unit ${CMAKE_CURRENT_LIST_DIR}/${t}.cc)
  endif()
endforeach()
