# Builds the sample extension (examples/extension) against the installed package, then
# runs its demo (trace for cuda:0, export, load and run on cpu:1) and its five
# multi-device mistakes, each of which kiln must stop.
include(${CMAKE_CURRENT_LIST_DIR}/build_consumer.cmake)
foreach(program kx_demo kx_mistakes)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CPU_DEVICES=3 ${WORK}/build/${program}
                          ${WORK}/gated_mlp.kiln
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${program}:\n${out}${err}")
  if(rc)
    message(FATAL_ERROR "${program} failed: rc=${rc}")
  endif()
endforeach()
