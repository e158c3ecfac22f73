# Merges the static library ADD into the archive ARCHIVE in place, with an ar MRI
# script (Note [One library, static and shared] in CMakeLists.txt).
set(merged ${ARCHIVE}.merging)
set(script ${ARCHIVE}.mri)
file(REMOVE ${merged})
file(WRITE ${script} "CREATE ${merged}\nADDLIB ${ARCHIVE}\nADDLIB ${ADD}\nSAVE\nEND\n")
execute_process(COMMAND ${AR} -M INPUT_FILE ${script} RESULT_VARIABLE rc ERROR_VARIABLE err)
file(REMOVE ${script})
if(rc)
  file(REMOVE ${merged})
  message(FATAL_ERROR "merging ${ADD} into ${ARCHIVE} failed: ${err}")
endif()
file(RENAME ${merged} ${ARCHIVE})
