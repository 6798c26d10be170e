# The floors as CMake libraries (docs/design.md §3): one object library per floor, each
# linking only the floors below it, and one link check per floor that fails the build when
# a floor's code calls a function of a floor it may not use.
#
# CMakeLists.txt defines, before including this file, attn_floor_settings (what every floor
# compiles and links with: the public headers, the version, the third-party headers and
# libraries) and attn_floors (the include check).
#
#   attn_floor(<target> DIR <dir under src/> [FLAT] [EXCLUDE <files...>] [BELOW <floor targets...>])
#     An OBJECT library of DIR's *.cpp files, found again at every build
#     (CONFIGURE_DEPENDS), in subdirectories too unless FLAT: a new file, or a new folder
#     such as src/io/formats/, needs no edit here; EXCLUDE (paths under the source
#     directory) leaves files out. Links attn_floor_settings and the floor
#     targets BELOW (their usage requirements; objects join only where a floor is linked
#     directly: attn_core, the link checks). The include check (attn_floors,
#     cmake/check_floors.cmake) runs before any of it compiles.
#
#   attn_floor_link_check(<name> FLOORS <floor targets...> [SOURCES <extra .cpp...>])
#     An executable attn_floor_link_<name> made of a stub main, the SOURCES and every
#     object of FLOORS, and nothing else of attn: the floors' code must call only what
#     those floors define (or third-party libraries). A core file calling an io function
#     leaves an undefined reference and the link fails.

# The stub main of the link checks.
set(ATTN_FLOOR_LINK_MAIN ${CMAKE_CURRENT_LIST_DIR}/floor_link_main.cpp)

#   attn_registry(<floor target> DIR <dir under src/> DEFINES <type> OUT <name>.inc)
#     Writes <build>/registries/<name>.inc, one line ATTN_REGISTERED(<function>) for every
#     `const <type>& <function>() {` that begins a line of a DIR/*.cpp file, and gives the
#     floor that folder: the registry's .cpp includes it to name each definition, so that
#     the static archive keeps every one (its linker takes only the objects something
#     names) and a new family or format is one new file. Found again when a file is added
#     or removed (CONFIGURE_DEPENDS); the file is rewritten only when the list changes.

#   attn_mask_terms(DIR <dir of term headers> OUT <path under the generated include dir>)
#     Writes <build>/generated/<OUT>, the list of mask terms (docs/design.md §3.1 item 1,
#     include/attn/core/mask_term.hpp): every DIR/*.hpp holds one term and says so on one
#     line `/// attn mask term: <name>_term, build order <N>`; the header includes each
#     in ascending N and names them in `masks::terms` (and their files in
#     `masks::term_files`), from which mask_settings, mask<T>, the build order and meta's
#     entries are made. A file without exactly one such line, a term not named after its
#     file, or two terms with one build order fail the configure step. Any edit of a term
#     header reruns it; the file is rewritten only when the list changes. The generated
#     directory is on every floor's include path, and installed (cmake/install.cmake).

function(attn_floor target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "FLAT" "DIR" "BELOW;EXCLUDE")
  if(arg_FLAT)
    file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${arg_DIR}/*.cpp)
  else()
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${arg_DIR}/*.cpp)
  endif()
  foreach(file ${arg_EXCLUDE})
    list(REMOVE_ITEM sources ${PROJECT_SOURCE_DIR}/${file})
  endforeach()
  add_library(${target} OBJECT ${sources})
  add_dependencies(${target} attn_floors)
  target_link_libraries(${target} PUBLIC attn_floor_settings ${arg_BELOW})
endfunction()

function(attn_floor_link_check name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "FLOORS;SOURCES")
  set(exe attn_floor_link_${name})
  add_executable(${exe} ${ATTN_FLOOR_LINK_MAIN} ${arg_SOURCES})
  # Linked directly, an object library gives the executable all of its objects.
  target_link_libraries(${exe} PRIVATE ${arg_FLOORS})
  if(ATTN_FUZZ)
    # The floors' objects call libFuzzer's coverage hooks; only fuzz/ targets link its main.
    target_link_options(${exe} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()

function(attn_registry target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DIR;DEFINES;OUT" "")
  file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${arg_DIR}/*.cpp)
  list(SORT files)
  set(lines "// Written by the build (attn_registry, cmake/floors.cmake) from ${arg_DIR}/*.cpp.\n")
  foreach(file ${files})
    file(STRINGS ${file} definitions REGEX "^const ${arg_DEFINES}& [a-z0-9_]+\\(\\) {")
    foreach(definition ${definitions})
      string(REGEX REPLACE "^const ${arg_DEFINES}& ([a-z0-9_]+)\\(\\) {.*" "\\1" function "${definition}")
      string(APPEND lines "ATTN_REGISTERED(${function})\n")
    endforeach()
  endforeach()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/registries/${arg_OUT} CONTENT "${lines}")
  target_include_directories(${target} PRIVATE ${PROJECT_BINARY_DIR}/registries)
endfunction()

function(attn_mask_terms)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "DIR;OUT" "")
  # A changed marker (a new build order) must rewrite the list, not only a new file.
  # (Not in script mode: tests/check_mask_terms.cmake runs this function on scratch trees.)
  if(CMAKE_SCRIPT_MODE_FILE)
    file(GLOB files ${PROJECT_SOURCE_DIR}/${arg_DIR}/*.hpp)
  else()
    file(GLOB files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${arg_DIR}/*.hpp)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
  endif()
  set(entries "")
  set(orders "")
  foreach(file ${files})
    get_filename_component(stem ${file} NAME_WE)
    file(STRINGS ${file} markers REGEX "^/// attn mask term: ")
    list(LENGTH markers count)
    if(NOT count EQUAL 1)
      message(FATAL_ERROR "${file}: a mask term header needs one line `/// attn mask term: ${stem}_term, build order <N>` (found ${count})")
    endif()
    if(NOT markers MATCHES "^/// attn mask term: ([a-z0-9_]+), build order ([0-9]+)$")
      message(FATAL_ERROR "${file}: malformed marker `${markers}` (expected `/// attn mask term: ${stem}_term, build order <N>`)")
    endif()
    set(term ${CMAKE_MATCH_1})
    set(order ${CMAKE_MATCH_2})
    if(NOT term STREQUAL "${stem}_term")
      message(FATAL_ERROR "${file}: the term of ${stem}.hpp is ${stem}_term (its marker names ${term})")
    endif()
    if(order IN_LIST orders)
      message(FATAL_ERROR "${file}: build order ${order} is taken by another mask term")
    endif()
    list(APPEND orders ${order})
    string(LENGTH "${order}" digits)
    math(EXPR pad "8 - ${digits}")
    string(REPEAT "0" ${pad} zeros)
    list(APPEND entries "${zeros}${order}|${stem}")
  endforeach()
  list(SORT entries)
  set(includes "")
  set(names "")
  set(stems "")
  foreach(entry ${entries})
    string(REGEX REPLACE "^[0-9]+\\|" "" stem "${entry}")
    string(APPEND includes "#include \"${arg_DIR}/${stem}.hpp\"\n")
    string(APPEND names "    ${stem}_term,\n")
    string(APPEND stems "\"${stem}\", ")
  endforeach()
  string(REGEX REPLACE ",\n$" "" names "${names}")
  string(REGEX REPLACE ", $" "" stems "${stems}")
  string(REGEX REPLACE "^include/" "" include_dir "${arg_DIR}")
  string(REPLACE "${arg_DIR}/" "${include_dir}/" includes "${includes}")
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/${arg_OUT} @ONLY CONTENT
"#pragma once
// Written by the build (attn_mask_terms, cmake/floors.cmake) from ${arg_DIR}/*.hpp: every
// mask term, in build order (the marker line of each header). Do not edit.
#include \"attn/core/mask_term.hpp\"
${includes}
namespace attn::core::masks {

/// Every mask term, in build order: mask_settings and mask<T> are made of them.
using terms = term_list<
${names}>;

/// Each term's header under ${arg_DIR}/, without .hpp, in build order.
inline constexpr const char* term_files[] = {${stems}};

}  // namespace attn::core::masks
")
endfunction()
