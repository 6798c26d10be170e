// attn — scaled dot-product attention with every stage dumped. All wiring is in src/cli.
#include "cli/commands.hpp"

int main(int argc, char** argv) { return attn::cli::main(argc, argv); }
