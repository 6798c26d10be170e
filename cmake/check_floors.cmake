# Checks that every #include in src/ and include/attn/ runs down the floors, never up or
# sideways (docs/design.md §3): the build runs this script before it compiles any floor
# (target attn_floors, CMakeLists.txt), so a wrong-way include fails the build. The floors'
# link checks (cmake/floors.cmake) catch what an include cannot show: a function declared
# by hand and called across floors.
#
#   cmake -DROOT=<source dir> [-DSTAMP=<file to touch on success>] -P check_floors.cmake
#
# A file's floor comes from its path; a floor may include the floors listed for it:
#   base      include/attn/*.hpp (not pipeline.hpp), src/*.cpp     base
#   core      include/attn/core/, src/core/                        base core
#   io        include/attn/io/, src/io/                            base io
#   model     include/attn/model/, src/model/                      base core model
#   tokenizer include/attn/tokenizer/, src/tokenizer/              base tokenizer
#   pipeline  include/attn/pipeline.hpp, include/attn/pipeline/,   base core io model tokenizer pipeline
#             src/pipeline/
#   cli       src/cli/ (main.cpp among them)                      every floor
# Inside cli, a subcommand file (src/cli/cmd_<name>.cpp/.hpp) includes no other
# subcommand's header: what two subcommands share lives in a cli file of its own
# (plot_input, pipeline_options, …), wired by app.cpp and main.cpp.
cmake_minimum_required(VERSION 3.22)
if(NOT ROOT)
  message(FATAL_ERROR "check_floors.cmake: -DROOT=<source dir> is required")
endif()

set(allowed_base base)
set(allowed_core base core)
set(allowed_io base io)
set(allowed_model base core model)
set(allowed_tokenizer base tokenizer)
set(allowed_pipeline base core io model tokenizer pipeline)
set(allowed_cli base core io model tokenizer pipeline cli)

# The floor of a path relative to ROOT, or "" for a file outside the floors (a system or
# third-party header, an included data file).
function(floor_of rel out)
  set(f "")
  if(rel MATCHES "^include/attn/pipeline(\\.hpp$|/)" OR rel MATCHES "^src/pipeline/")
    set(f pipeline)
  elseif(rel MATCHES "^include/attn/(core|io|model|tokenizer)/")
    set(f ${CMAKE_MATCH_1})
  elseif(rel MATCHES "^src/(core|io|model|tokenizer|cli)/")
    set(f ${CMAKE_MATCH_1})
  elseif(rel MATCHES "^include/attn/[^/]+\\.hpp$" OR rel MATCHES "^src/[^/]+\\.cpp$")
    set(f base)
  endif()
  set(${out} ${f} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE ${ROOT}
  ${ROOT}/src/*.cpp ${ROOT}/src/*.hpp ${ROOT}/include/attn/*.hpp)
set(violations "")
foreach(rel ${files})
  floor_of(${rel} from)
  if(from STREQUAL "")
    continue()
  endif()
  get_filename_component(dir ${rel} DIRECTORY)
  file(STRINGS ${ROOT}/${rel} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" name "${line}")
    # As the compiler looks: beside the including file first, then include/.
    if(EXISTS ${ROOT}/${dir}/${name})
      get_filename_component(target ${ROOT}/${dir}/${name} ABSOLUTE)
    elseif(EXISTS ${ROOT}/include/${name})
      get_filename_component(target ${ROOT}/include/${name} ABSOLUTE)
    elseif(EXISTS ${ROOT}/src/${name})
      get_filename_component(target ${ROOT}/src/${name} ABSOLUTE)
    else()
      continue()
    endif()
    file(RELATIVE_PATH target_rel ${ROOT} ${target})
    floor_of(${target_rel} to)
    if(to STREQUAL "")
      continue()
    endif()
    list(FIND allowed_${from} ${to} ok)
    if(ok EQUAL -1)
      string(APPEND violations "\n  ${rel} (${from}) includes ${target_rel} (${to})")
    endif()
    if(rel MATCHES "^src/cli/cmd_([A-Za-z0-9_]+)\\.[ch]pp$")
      set(from_cmd ${CMAKE_MATCH_1})
      if(target_rel MATCHES "^src/cli/cmd_([A-Za-z0-9_]+)\\.hpp$" AND NOT CMAKE_MATCH_1 STREQUAL from_cmd)
        string(APPEND violations "\n  ${rel} (subcommand ${from_cmd}) includes ${target_rel} (subcommand ${CMAKE_MATCH_1})")
      endif()
    endif()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "includes that run the wrong way between floors (docs/design.md §3):${violations}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
