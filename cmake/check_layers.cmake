# The layers of kiln/ (docs/architecture.md, "Layers"), checked on every include.
#
#   cmake -DROOT=<repository> -P cmake/check_layers.cmake
#
# Each folder has a rank; a file may include kiln headers of its own folder and of
# folders of a lower rank only. Folders of one rank (autograd, fake, ir) are side by
# side: none includes another. So the include graph has no upward arrow and no cycle,
# and the CMake targets (kiln/CMakeLists.txt) list the same order. Fails naming every
# file and include that breaks it.
set(kiln_layers
  core 0
  device 1
  ops 2
  backend 3
  dispatch 4
  api 5
  autograd 6  fake 6  ir 6
  trace 7  nn 7
  passes 8
  program 9
  runtime 10  interop 10  distributed 10)

list(LENGTH kiln_layers n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET kiln_layers ${i} folder)
  list(GET kiln_layers ${j} rank)
  set(rank_${folder} ${rank})
endforeach()

file(GLOB folders RELATIVE "${ROOT}/kiln" "${ROOT}/kiln/*")
set(broken "")
foreach(folder IN LISTS folders)
  if(NOT IS_DIRECTORY "${ROOT}/kiln/${folder}")
    continue()
  endif()
  if(NOT DEFINED rank_${folder})
    string(APPEND broken "\n  kiln/${folder}/ has no layer: give it a rank in cmake/check_layers.cmake")
    continue()
  endif()
  file(GLOB_RECURSE sources "${ROOT}/kiln/${folder}/*.h" "${ROOT}/kiln/${folder}/*.cpp"
       "${ROOT}/kiln/${folder}/*.cu" "${ROOT}/kiln/${folder}/*.cuh")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"kiln/[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE ".*\"kiln/([a-z_]+)/.*" "\\1" to "${line}")
      if(to STREQUAL folder)
        continue()
      endif()
      file(RELATIVE_PATH where "${ROOT}" "${source}")
      if(NOT DEFINED rank_${to})
        string(APPEND broken "\n  ${where}: includes kiln/${to}/, which has no layer")
      elseif(NOT rank_${to} LESS rank_${folder})
        string(APPEND broken "\n  ${where}: ${folder} (layer ${rank_${folder}}) includes ${to} (layer ${rank_${to}})")
      endif()
    endforeach()
  endforeach()
endforeach()

if(broken)
  message(FATAL_ERROR "kiln's layers are broken (a file includes a folder that is not below its own):${broken}")
endif()
message(STATUS "kiln's layers hold: no folder includes one at its own layer or above")
