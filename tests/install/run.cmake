# Builds the consumer project against the installed package and runs it.
include(${CMAKE_CURRENT_LIST_DIR}/build_consumer.cmake)
execute_process(COMMAND ${WORK}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer says: ${out}")
if(rc OR NOT out MATCHES "sum=6")
  message(FATAL_ERROR "the consumer did not run correctly: rc=${rc} out=${out}")
endif()
