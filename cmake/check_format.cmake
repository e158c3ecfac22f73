# Every C++ file of the repository in the format of .clang-format (Google's style at 100
# columns), as clang-format 14 -- the version scripts/install-deps.sh installs -- writes it.
#
#   cmake -DROOT=<repository> -DCLANG_FORMAT=<clang-format-14> -P cmake/check_format.cmake
#
# Fails listing the files that differ; `make format` rewrites them.
if(NOT CLANG_FORMAT)
  message(FATAL_ERROR "clang-format-14 was not found: scripts/install-deps.sh installs it")
endif()
set(files "")
foreach(dir kiln tests tools bench python examples)
  file(GLOB_RECURSE found "${ROOT}/${dir}/*.h" "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.cu"
       "${ROOT}/${dir}/*.cuh")
  list(APPEND files ${found})
endforeach()
list(FILTER files EXCLUDE REGEX "/(build[^/]*|\\.venv|_deps)/")
set(wrong "")
foreach(f IN LISTS files)
  execute_process(COMMAND "${CLANG_FORMAT}" --dry-run --Werror "${f}"
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    file(RELATIVE_PATH where "${ROOT}" "${f}")
    string(APPEND wrong "\n  ${where}")
  endif()
endforeach()
list(LENGTH files n)
if(wrong)
  message(FATAL_ERROR "not in the repository's format (run `make format`):${wrong}")
endif()
message(STATUS "all ${n} C++ files are formatted")
