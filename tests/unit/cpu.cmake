# The CPU engine: every recurrent option and every layer kernel against the real frameworks
# (fixtures from models/scripts/make_cpu_fixtures.py).
foreach(t cpu_recurrent_test cpu_keras_recurrent_test cpu_layers_test cpu_engine_test
          cpu_kernels_test cpu_quant_gemm_test cpu_phase_runner_test cpu_row_split_test
          cpu_work_team_test cpu_stop_test)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${t}.cc)
    rnnserve_test(${t} unit ${CMAKE_CURRENT_LIST_DIR}/${t}.cc)
  endif()
endforeach()

# Each kernel set forced (RNNSERVE_CPU_KERNELS) through whole binaries: the CPU engine's tests
# here and the conformance corpus (tests/conformance). A set the CPU lacks skips, saying so.
function(rnnserve_cpu_kernel_runs target label)
  foreach(set amx avx512 avx2 plain)
    if(set STREQUAL "amx")
      set(flags "amx_tile amx_bf16 amx_int8 avx512f avx512vl avx512bw avx512dq fma")
    elseif(set STREQUAL "avx512")
      set(flags "avx512f avx512vl avx512bw avx512dq fma")
    elseif(set STREQUAL "avx2")
      set(flags "avx2 fma")
    else()
      set(flags "")
    endif()
    add_test(NAME cpu_kernels_${set}.${target}
      COMMAND sh -c "for f in ${flags}; do grep -qw \$f /proc/cpuinfo || { echo \"SKIPPED: this CPU lacks \$f, which the ${set} kernels need\"; exit 77; }; done; exec \"\$@\""
        sh $<TARGET_FILE:${target}>)
    set_tests_properties(cpu_kernels_${set}.${target} PROPERTIES
      LABELS ${label} ENVIRONMENT RNNSERVE_CPU_KERNELS=${set} SKIP_RETURN_CODE 77 TIMEOUT 900)
  endforeach()
endfunction()
foreach(t cpu_recurrent_test cpu_keras_recurrent_test cpu_kernels_test cpu_quant_gemm_test
          cpu_row_split_test)
  rnnserve_cpu_kernel_runs(${t} unit)
endforeach()
# amx forced on every CPU: where it lacks AMX (or the OS refuses the tile state), the set is
# refused with FAILED_PRECONDITION naming RNNSERVE_CPU_KERNELS=amx; where it has it, amx runs.
add_test(NAME cpu_kernels_amx_forced.cpu_kernels_test
  COMMAND cpu_kernels_test --gtest_filter=CpuKernelsTest.ActiveSetIsTheForcedOneOrTheBest)
set_tests_properties(cpu_kernels_amx_forced.cpu_kernels_test PROPERTIES
  LABELS unit ENVIRONMENT RNNSERVE_CPU_KERNELS=amx)
