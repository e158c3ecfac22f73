# Builds the sample extension (examples/extension) against the installed package, then
# runs its demo (trace for cuda:0, export, load and run on cpu:1), its five multi-device
# mistakes (each of which kiln must stop), and the kiln command on the demo's program:
# kx-kiln (with kx's ops) shows and runs it, plain kiln shows it and names the missing op when run.
include(${CMAKE_CURRENT_LIST_DIR}/build_consumer.cmake)
set(program ${WORK}/gated_mlp.kiln)
function(expect what rc_wanted regex)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_CPU_DEVICES=3 ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL rc_wanted OR NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${what}: exit status ${rc} (wanted ${rc_wanted}), output not matching '${regex}'")
  endif()
endfunction()
expect(kx_demo 0 "max \\|program - eager\\| = 0" ${WORK}/build/kx_demo ${program})
expect(kx_mistakes 0 "correct kernel on cpu:1 and cpu:2" ${WORK}/build/kx_mistakes)
expect("kx-kiln show" 0 "extension ops: kx::gated_mlp\n.*kx::gated_mlp\\(%input_0" ${WORK}/build/kx-kiln show ${program})
expect("kx-kiln run" 0 "f32\\[8, *16\\]" ${WORK}/build/kx-kiln run ${program} --device-map cuda:0=cpu:1)
# Showing needs no kernel: plain kiln shows the op from its stored schema; running names it.
expect("kiln show without kx" 0 "extension ops: kx::gated_mlp\n.*kx::gated_mlp\\(%input_0"
       ${WORK}/prefix/bin/kiln show ${program})
expect("kiln run without kx" 1 "uses the extension op 'kx::gated_mlp' \\(from kx \\(examples/extension\\)\\), which is not registered"
       ${WORK}/prefix/bin/kiln run ${program} --device-map cuda:0=cpu:1)
