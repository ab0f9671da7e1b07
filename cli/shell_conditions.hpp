#pragma once
// The if/elif/else conditions of a launch script (shell_words.cpp's reader decides with them which branch runs).
// if/elif/else conditions. Launch scripts choose their flags with tests on variables they set themselves
// (`DTYPE="fp8"` ... `if [[ "$DTYPE" == "fp8" ]]; then DTYPE_ARGS+=(...)`, Megatron-LM's examples/llama), so the
// branch taken is known when every operand is: tests of strings and integers (bash(1), CONDITIONAL EXPRESSIONS and
// `test`) are evaluated; anything else (file tests, command substitutions, commands) is unknown, and what its branch
// sets is marked unresolved where used, as before.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shell_words.hpp"

namespace gpuplan::cli::shell_conditions {

/// Three-valued truth: a branch is taken, not taken, or gpuplan cannot tell.
enum class Tri { no, yes, unknown };

/// not, in three values (unknown stays unknown).
Tri tri_not(Tri t);

/// One operand's value; nullopt when it depends on something gpuplan cannot know (a command substitution, a variable
/// set in an undecided branch). A bare reference to a variable the script never sets reads as empty; `assumed`
/// collects those names for a note.
std::optional<std::string> operand(const ShellWord& w, std::vector<std::string>& assumed);

/// An integer operand of -eq ... -ge; nullopt when the text is not one.
std::optional<long long> integer_of(const std::string& s);

/// One test: `[ ... ]`, `[[ ... ]]`, `test ...` or `true`/`false`, optionally after `!`.
Tri eval_test(std::vector<ShellWord> w, std::vector<std::string>& assumed);

/// An if/elif condition: tests joined by && and || (left to right, as bash groups an and-or list).
Tri eval_condition(const std::vector<std::pair<std::string, std::vector<ShellWord>>>& list,
                   std::vector<std::string>& assumed);

/// An open if/for/while/until/case/select block and whether its current branch runs.
struct Block {
  bool is_if = false;
  Tri branch = Tri::unknown;  ///< the branch being read runs (yes), does not (no), or gpuplan cannot tell
  bool taken = false;         ///< an earlier branch of this if surely ran
  bool maybe = false;         ///< an earlier branch of this if may have run
  int line = 0;
  bool is_case = false;  ///< a case block, whose branches open with a pattern word ending in ')'
};

/// Whether the statements being read run: no inside any branch that does not, unknown inside an undecided one.
Tri running(const std::vector<Block>& blocks);

}  // namespace gpuplan::cli::shell_conditions
