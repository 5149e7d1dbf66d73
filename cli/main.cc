#include "cli/commands.h"

int main(int argc, char** argv) { return evo::cli::Main(argc, argv); }
