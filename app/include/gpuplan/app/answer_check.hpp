#pragma once
// Checking a typed answer against the model's: units an answer may carry, parsing what a user types ("156",
// "1.2e3", "1,365.3", "70 GB", "4.2ms", "2.77x"), and the verdict within a relative tolerance. Pure: no Qt, no IO;
// shared by `gpuplan drill` and the GUI's interview drills.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::app {

/// What an answer measures; an answer converts only between units of one dimension.
enum class Dimension { bytes, time, intensity, flop_rate, flops, ratio, count };
std::string_view to_string(Dimension d);

struct AnswerUnit {
  std::string symbol;  ///< as shown ("GB", "FLOP/B", "days", "×")
  Dimension dim = Dimension::count;
  double scale = 1.0;  ///< value in the dimension's base unit (B, s, FLOP/B, FLOP/s, FLOP, 1) = value · scale
};

/// The unit with this symbol (exact, then ignoring case), or nullptr.
const AnswerUnit* find_unit(std::string_view symbol);
/// Every symbol, for "did you mean" hints and docs.
std::vector<std::string> unit_symbols();

/// Parses a typed answer into the value in `expected` units. The text is a number (decimal or exponent; ',' only as
/// a thousands separator; a leading '≈' or '~' is ignored) optionally followed by a unit of the same dimension
/// ("70 GB" for an answer in GiB converts). Errors say what was wrong: empty, not a number, unknown unit, a unit of
/// another dimension.
Result<double> parse_answer(std::string_view text, const AnswerUnit& expected);

struct Verdict {
  bool correct = false;
  double given = 0;           ///< in the answer's unit
  double expected = 0;        ///< the model's answer, same unit
  double relative_error = 0;  ///< (given − expected) / expected; given − expected when expected is 0
  bool common_wrong = false;  ///< wrong, and within tolerance of the known common wrong answer
};

/// Right when |relative error| ≤ `rel_tolerance` (exactly equal when the tolerance is 0).
Verdict check_answer(double given, double expected, double rel_tolerance,
                     std::optional<double> common_wrong = std::nullopt);

/// "correct: 156 FLOP/B (model: 156 FLOP/B, error +0.0%, tolerance ±1%)" / "wrong: ...".
std::string describe(const Verdict& v, const std::string& unit, double rel_tolerance);

}  // namespace gpuplan::app
