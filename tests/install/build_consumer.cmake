# Installs the kiln build tree KILN_BUILD into ${WORK}/prefix, then configures and
# builds the project at KILN_SOURCE against it (find_package(kiln CONFIG REQUIRED)) in
# ${WORK}/build. Included by the install tests.
include(${CMAKE_CURRENT_LIST_DIR}/install_kiln.cmake)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${KILN_SOURCE} -B ${WORK}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release ${CONSUMER_ARGS}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring ${KILN_SOURCE} failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building ${KILN_SOURCE} failed: ${rc}")
endif()
