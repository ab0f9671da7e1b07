#pragma once
// Bash arithmetic expansion, $(( ... )), for the launch scripts gpuplan reads (shell_words.cpp): `WORLD_SIZE=$((
// GPUS_PER_NODE * NNODES ))`, `GLOBAL_BATCH=$((MICRO * DP * ACC))`. Pure: the expression text and a variable lookup in,
// a value or the reason there is none out; nothing is run.
//
// What bash(1) ARITHMETIC EVALUATION defines and launch scripts use: 64-bit signed integers; decimal, 0x hex,
// leading-0 octal and base#digits (bases 2 to 36) constants; variables by bare name (their value evaluated as an expression in turn, an empty value
// as 0); parentheses; unary + - ! ~; ** (exponent, right to left); * / %; + -; << >>; < <= > >=; == !=; & ^ |;
// && ||; the conditional ?:. Not evaluated, with the reason: a variable the script does not set or sets inside a block
// gpuplan cannot decide (bash would read an unset one as 0, which for a GPU count or a batch is no answer), division
// or remainder by zero and a negative exponent (bash refuses both), a value that is not an integer (1.5, a word), a
// result beyond 64 bits (bash wraps around silently), assignments and ++/-- (they change variables), and the comma.
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace gpuplan::cli::shell_arithmetic {

/// A variable's value as the script leaves it, or why it has none.
struct VarValue {
  std::optional<std::string> text;  ///< nullopt: no value gpuplan can use
  std::string why;                  ///< when no value: "is not set", "is set inside an if block at line 7"
};

/// The result of one expansion: its value, or the reason it has none.
struct Result {
  std::optional<long long> value;
  std::string why;  ///< "division by zero in 'A / B'", "NNODES is not set (bash would read 0)"
};

/// Evaluates the inside of $(( ... )) after parameter expansion (no $ left but in what `lookup` returns).
Result evaluate(std::string_view expr, const std::function<VarValue(const std::string&)>& lookup);

}  // namespace gpuplan::cli::shell_arithmetic
