// gpuplan — analytical performance model and capacity planner for LLMs on GPU clusters.
#include "commands.hpp"

int main(int argc, char** argv) { return gpuplan::cli::run_main(argc, argv); }
