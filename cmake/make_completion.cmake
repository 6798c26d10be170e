# Writes the bash completion from completions/attn.bash.in and the built binary's --help
# (CMakeLists.txt, target attn_completion):
#   cmake -DATTN=path/to/attn -DTEMPLATE=completions/attn.bash.in -DOUT=attn.bash -P make_completion.cmake
# Fills in the subcommands (`attn --help`), the long options of `attn compute --help`, and
# per option of compute what to offer after it: its choices when --help lists them
# ("TEXT:{a,b}", several comma-separated when it takes several values, "..."), files for
# FILE, nothing for other values (numbers, free text), unless the template's own case
# block handles the option; the stages (--dump) and model
# families (--arch) from their descriptions. A description it cannot read stops the build.

cmake_minimum_required(VERSION 3.22)

function(attn_help out)
  execute_process(COMMAND ${ATTN} ${ARGN} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ATTN} ${ARGN} --help failed (${rc})")
  endif()
  set(${out} "${help}" PARENT_SCOPE)
endfunction()

# Subcommands: "  name   description" lines after "Subcommands:", up to a blank line.
attn_help(top)
string(REGEX REPLACE ".*\nSubcommands:\n" "" listing "${top}")
string(FIND "${listing}" "\n\n" end)
string(SUBSTRING "${listing}" 0 ${end} listing)
string(REGEX MATCHALL "(^|\n)  [a-z][a-z0-9-]*" names "${listing}")
set(subcommands "")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  list(APPEND subcommands ${name})
endforeach()
list(JOIN subcommands " " ATTN_SUBCOMMANDS)

# The options of compute, one per line "  [-o,]--name [VALUE[:{a,b}][=default]] [...]".
attn_help(compute compute)
string(REPLACE ";" "\\;" compute "${compute}")
string(REPLACE "\n" ";" lines "${compute}")
set(options "")
set(values "")
# The options the template's case block already handles ("  --config | --vocab) ...").
file(READ ${TEMPLATE} template)
string(REGEX MATCHALL "\n +(-[a-z] \\| )?--[a-z0-9 |-]+\\)" handled "${template}")
string(REGEX MATCHALL "--[a-z0-9-]+" by_hand "${handled}")
foreach(line IN LISTS lines)
  # Two spaces: an option; a description's continuation lines are indented further.
  if(NOT line MATCHES "^  (-[a-zA-Z],)?(--[a-z0-9][a-z0-9-]*)( ([^ ]+))?( \\.\\.\\.)?")
    continue()
  endif()
  set(short "${CMAKE_MATCH_1}")
  set(long "${CMAKE_MATCH_2}")
  set(value "${CMAKE_MATCH_4}")
  set(several "${CMAKE_MATCH_5}")
  list(APPEND options ${long})
  if(long IN_LIST by_hand OR value STREQUAL "")
    continue()
  endif()
  set(pattern "${long}")
  if(short)
    string(REPLACE "," "" short "${short}")
    set(pattern "${short} | ${long}")
  endif()
  if(value MATCHES ":\\{([^}]*)\\}")
    string(REPLACE "," " " choices "${CMAKE_MATCH_1}")
    if(several)
      string(APPEND values "            ${pattern}) _attn_comma_list \"${choices}\"; return ;;\n")
    else()
      string(APPEND values "            ${pattern}) COMPREPLY=($(compgen -W \"${choices}\" -- \"$cur\")); return ;;\n")
    endif()
  elseif(value STREQUAL "FILE")
    string(APPEND values "            ${pattern}) _filedir; return ;;\n")
  else()
    string(APPEND values "            ${pattern}) return ;;\n")
  endif()
endforeach()
list(JOIN options " " ATTN_COMPUTE_OPTIONS)
string(REGEX REPLACE "\n$" "" ATTN_COMPUTE_VALUES "${values}")

# Descriptions wrap at 80 columns: read them with the line breaks and indents folded.
string(REGEX REPLACE "[ \n]+" " " flat "${compute}")
if(NOT flat MATCHES "Stages to write, comma-separated: ([a-z_ ]+) \\(")
  message(FATAL_ERROR "${ATTN} compute --help: no \"Stages to write, comma-separated: ... (\" in --dump's description")
endif()
set(ATTN_STAGES "${CMAKE_MATCH_1}")
if(NOT flat MATCHES "Model family of the checkpoint: ([a-z0-9_, ]+) \\(")
  message(FATAL_ERROR "${ATTN} compute --help: no \"Model family of the checkpoint: ... (\" in --arch's description")
endif()
string(REPLACE ", " " " ATTN_FAMILIES "${CMAKE_MATCH_1}")

configure_file(${TEMPLATE} ${OUT} @ONLY)
