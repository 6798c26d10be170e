# Writes the attn(1) man page with help2man from the built binary (cmake/install.cmake):
#   cmake -DATTN=path/to/attn -DHELP2MAN=help2man -DVERSION=x.y.z -DOUT=attn.1 -P make_man.cmake
# help2man turns `attn --help` into NAME, SYNOPSIS, DESCRIPTION and OPTIONS; every
# subcommand's own --help, listed in `attn --help`, goes into a SUBCOMMANDS section, so
# the page follows the CLI definitions without being edited by hand.

execute_process(COMMAND ${ATTN} --help OUTPUT_VARIABLE top RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${ATTN} --help failed (${rc})")
endif()

# CLI11 lists them as "  name   description" lines after "Subcommands:", up to a blank line.
string(REGEX REPLACE ".*\nSubcommands:\n" "" listing "${top}")
string(FIND "${listing}" "\n\n" end)
string(SUBSTRING "${listing}" 0 ${end} listing)
string(REGEX MATCHALL "(^|\n)  [a-z][a-z0-9-]*" names "${listing}")
set(text "[SUBCOMMANDS]\n")
foreach(name IN LISTS names)
  string(STRIP "${name}" name)
  execute_process(COMMAND ${ATTN} ${name} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ATTN} ${name} --help failed (${rc})")
  endif()
  # roff: a backslash is \e; a line starting with '.' or '\'' needs \& in front.
  string(REPLACE "\\" "\\e" help "${help}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
  # --help is wrapped to 80 columns: print it flush left (.in 0) so the page fits 80 too.
  string(APPEND text ".SS \"attn ${name}\"\n.nf\n.in 0\n${help}.fi\n.in\n")
endforeach()
string(APPEND text "
[EXAMPLES]
.nf
attn compute \\-\\-mask causal data/notebook.npz \\-\\-tokens \"my name is Aj\"
attn compute data/notebook.npz \\-\\-dump weights \\-o w.npy
attn compute \\-\\-max\\-bytes 2G big.npz \\-\\-format csv > scores.csv
.fi

[SIGNALS]
SIGINT, SIGTERM and SIGHUP remove any output file still being written and exit with
128 + the signal number; files written with \\fB\\-o\\fR appear only when complete.
")

get_filename_component(dir ${OUT} DIRECTORY)
set(include_file ${dir}/attn.h2m)
file(WRITE ${include_file} "${text}")
execute_process(
  COMMAND ${HELP2MAN} --no-info --locale=C.UTF-8 --version-string=${VERSION}
          --name=scaled\ dot-product\ attention\ with\ every\ stage\ dumped
          --include=${include_file} --output=${OUT} ${ATTN}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man failed (${rc})")
endif()
