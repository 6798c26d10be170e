# The list of mask terms (attn_mask_terms, cmake/floors.cmake) can fail: on a copy of
# include/attn/core/masks/ it lists the real terms as the build does, and it stops, naming
# the file, at a header without its marker line, at a term not named after its file and
# at two terms with one build order.
#
#   cmake -DROOT=<source dir> -DSCRATCH=<empty scratch dir> -DBUILT=<the build's mask_terms.hpp> -P check_mask_terms.cmake
cmake_minimum_required(VERSION 3.22)
include(${ROOT}/cmake/floors.cmake)

# One run of attn_mask_terms in a child cmake on the tree ${tree}: its exit code and output.
function(run_on tree out_rc out_text)
  file(WRITE ${tree}/run.cmake "
cmake_minimum_required(VERSION 3.22)
set(PROJECT_SOURCE_DIR ${tree})
set(PROJECT_BINARY_DIR ${tree}/build)
include(${ROOT}/cmake/floors.cmake)
attn_mask_terms(DIR include/attn/core/masks OUT attn/core/mask_terms.hpp)
")
  execute_process(COMMAND ${CMAKE_COMMAND} -P ${tree}/run.cmake RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${o}${e}" PARENT_SCOPE)
endfunction()

function(fresh_tree name out)
  set(tree ${SCRATCH}/${name})
  file(REMOVE_RECURSE ${tree})
  file(MAKE_DIRECTORY ${tree}/include/attn/core)
  file(COPY ${ROOT}/include/attn/core/masks DESTINATION ${tree}/include/attn/core)
  set(${out} ${tree} PARENT_SCOPE)
endfunction()

# The real terms: the same list as the build's.
fresh_tree(real tree)
run_on(${tree} rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FAIL: the real terms were refused: ${text}")
endif()
file(READ ${tree}/build/generated/attn/core/mask_terms.hpp mine)
file(READ ${BUILT} built)
if(NOT mine STREQUAL built)
  message(FATAL_ERROR "FAIL: the list differs from the build's ${BUILT}:\n${mine}")
endif()

# Each planted mistake must stop it, naming the file.
foreach(case unlisted misnamed twice)
  fresh_tree(${case} tree)
  set(dir ${tree}/include/attn/core/masks)
  if(case STREQUAL "unlisted")
    file(WRITE ${dir}/stripes.hpp "#pragma once\n// A term whose header says nothing.\nstruct stripes_term {};\n")
    set(want "stripes.hpp: a mask term header needs one line")
  elseif(case STREQUAL "misnamed")
    file(WRITE ${dir}/stripes.hpp "#pragma once\n/// attn mask term: bands_term, build order 55\n")
    set(want "stripes.hpp: the term of stripes.hpp is stripes_term")
  else()
    file(WRITE ${dir}/stripes.hpp "#pragma once\n/// attn mask term: stripes_term, build order 50\n")
    set(want "build order 50 is taken by another mask term")
  endif()
  run_on(${tree} rc text)
  string(REGEX REPLACE "[ \t\n]+" " " text "${text}")  # CMake wraps its messages
  if(rc EQUAL 0)
    message(FATAL_ERROR "FAIL: ${case}: a wrong term header was listed")
  endif()
  string(FIND "${text}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "FAIL: ${case}: the refusal does not say `${want}`: ${text}")
  endif()
  message(STATUS "${case}: refused as it should be")
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
message(STATUS "ok")
