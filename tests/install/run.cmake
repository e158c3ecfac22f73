# Builds the consumer project against the installed package (CONSUMER_ARGS: extra
# configure arguments, e.g. -DKILN_SHARED=ON) and runs it.
include(${CMAKE_CURRENT_LIST_DIR}/build_consumer.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/check_consumer.cmake)
check_consumer(${WORK}/build/consumer ${SHARED})
