#pragma once
// Shell text read into commands, for the pasted command lines and launch scripts gpuplan reads (Megatron-LM's
// `--megatron-args`, vLLM's `--vllm-args`, SGLang's `--sglang-args`): one lexer for all of them (megatron_script.cpp).
// Pure: text in, words and diagnostics out; nothing is run.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::cli {

/// A shell word after expansion, with the variables it used that the script does not define (empty: resolved).
struct ShellWord {
  std::string text;
  std::vector<std::string> unresolved;  ///< "$1", "${DATA_PATH}", "$(...)"
  int line = 0;                         ///< 1-based line of the script it came from (0: a command-line argument)
};

/// One simple command of a script: its words after any `export`/`declare` and leading NAME=value environment
/// assignments, and the line it starts on. `environment`: what the command's process inherits from the script — the
/// variables exported before it (`export NAME=value`, `export NAME`) and its own NAME=value prefix, by name (the last
/// value wins); a variable set only inside an if/for/while/case block is not in it (gpuplan does not evaluate shell
/// conditions). The launcher's environment outside the script is not seen.
struct ShellCommand {
  std::vector<ShellWord> words;
  int line = 0;
  std::map<std::string, std::string> environment;
};

/// Reads shell text into its commands: backslash-newline continuations, comments, '...' and "..." quotes, NAME=value
/// and NAME=(...) arrays (kept as variables, not returned), $NAME / ${NAME} / ${NAME:-default} / ${NAME[@]}
/// expansions, $(( ... )) arithmetic (shell_arithmetic.hpp), statements split at ; && || | &, redirections dropped, if/for/while/case keywords skipped (a variable
/// set inside such a block is marked unresolved where used: gpuplan does not evaluate shell conditions). `source`
/// names the text in diagnostics. Errors: an unterminated quote, expansion or array.
std::optional<std::vector<ShellCommand>> read_shell_commands(std::string_view text, const std::string& source,
                                                             Diagnostics& diags);

/// How a diagnostic names an unresolved reference of a word: "$TP, which the script does not set", or for an
/// arithmetic expansion "$((A / B)) (line 3: division by zero ...), which gpuplan cannot evaluate".
std::string unresolved_phrase(const std::string& u);

/// An error at `line` of a script `file` (`pointer` names the flag or word): the one diagnostic shape of the script
/// readers (shell_words.cpp, megatron_script.cpp).
void script_error_at(Diagnostics& diags, const std::string& file, int line, const std::string& pointer,
                     std::string message);

}  // namespace gpuplan::cli
