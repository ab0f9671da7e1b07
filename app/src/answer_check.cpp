#include "gpuplan/app/answer_check.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::app {

namespace {
const std::vector<AnswerUnit>& units_table() {
  static const std::vector<AnswerUnit> t = {
      {"B", Dimension::bytes, 1},       {"KB", Dimension::bytes, 1e3},     {"MB", Dimension::bytes, 1e6},
      {"GB", Dimension::bytes, 1e9},    {"TB", Dimension::bytes, 1e12},    {"KiB", Dimension::bytes, 1024.0},
      {"MiB", Dimension::bytes, 1048576.0}, {"GiB", Dimension::bytes, 1073741824.0},
      {"TiB", Dimension::bytes, 1099511627776.0},
      {"s", Dimension::time, 1},        {"ms", Dimension::time, 1e-3},     {"ms per token", Dimension::time, 1e-3},
      {"us", Dimension::time, 1e-6},    {"µs", Dimension::time, 1e-6},     {"min", Dimension::time, 60},
      {"h", Dimension::time, 3600},     {"days", Dimension::time, 86400},  {"day", Dimension::time, 86400},
      {"FLOP/B", Dimension::intensity, 1},
      {"FLOP/s", Dimension::flop_rate, 1}, {"GFLOP/s", Dimension::flop_rate, 1e9},
      {"TFLOP/s", Dimension::flop_rate, 1e12}, {"PFLOP/s", Dimension::flop_rate, 1e15},
      {"FLOP", Dimension::flops, 1},    {"GFLOP", Dimension::flops, 1e9},  {"TFLOP", Dimension::flops, 1e12},
      {"PFLOP", Dimension::flops, 1e15}, {"EFLOP", Dimension::flops, 1e18}, {"ZFLOP", Dimension::flops, 1e21},
      {"×", Dimension::ratio, 1},       {"x", Dimension::ratio, 1},        {"%", Dimension::ratio, 0.01},
      {"tokens per step", Dimension::count, 1}, {"tokens", Dimension::count, 1}, {"GPUs", Dimension::count, 1},
      {"GPU", Dimension::count, 1}, {"micro-batches", Dimension::count, 1},
  };
  return t;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = char(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Removes ',' between digit groups of three ("1,365.3"); false when a comma is anywhere else ("1,5").
bool strip_thousands(std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != ',') {
      o += s[i];
      continue;
    }
    std::size_t digits = 0;
    while (i + 1 + digits < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1 + digits]))) ++digits;
    if (i == 0 || !std::isdigit(static_cast<unsigned char>(s[i - 1])) || digits != 3) return false;
  }
  s = o;
  return true;
}
}  // namespace

std::string_view to_string(Dimension d) {
  switch (d) {
    case Dimension::bytes: return "bytes";
    case Dimension::time: return "time";
    case Dimension::intensity: return "arithmetic intensity";
    case Dimension::flop_rate: return "FLOP rate";
    case Dimension::flops: return "FLOPs";
    case Dimension::ratio: return "ratio";
    case Dimension::count: return "count";
  }
  return "?";
}

const AnswerUnit* find_unit(std::string_view symbol) {
  for (const auto& u : units_table())
    if (u.symbol == symbol) return &u;
  const std::string l = lower(symbol);
  for (const auto& u : units_table())
    if (lower(u.symbol) == l) return &u;
  return nullptr;
}

std::vector<std::string> unit_symbols() {
  std::vector<std::string> o;
  for (const auto& u : units_table()) o.push_back(u.symbol);
  return o;
}

Result<double> parse_answer(std::string_view text, const AnswerUnit& expected) {
  Diagnostics d;
  std::string_view t = trim(text);
  for (std::string_view approx : {"≈", "~"})
    if (t.substr(0, approx.size()) == approx) t = trim(t.substr(approx.size()));
  if (t.empty()) {
    d.error("", "", fmt::format("enter a number (in {})", expected.symbol));
    return d;
  }
  // The number: the longest prefix of number characters, then the unit.
  std::size_t n = 0;
  while (n < t.size() && (std::isdigit(static_cast<unsigned char>(t[n])) || t[n] == '.' || t[n] == ',' || t[n] == '-' ||
                          t[n] == '+' || ((t[n] == 'e' || t[n] == 'E') && n > 0 && n + 1 < t.size() &&
                                          (std::isdigit(static_cast<unsigned char>(t[n + 1])) || t[n + 1] == '-' ||
                                           t[n + 1] == '+'))))
    ++n;
  std::string number(t.substr(0, n));
  const std::string_view unit = trim(t.substr(n));
  double v = 0;
  if (number.empty() || !strip_thousands(number)) {
    d.error("", "", fmt::format("'{}' is not a number (write e.g. 156, 1.2e3 or 1,365.3)", std::string(trim(text))));
    return d;
  }
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(v)) {
    d.error("", "", fmt::format("'{}' is not a number (write e.g. 156, 1.2e3 or 1,365.3)", std::string(trim(text))));
    return d;
  }
  if (unit.empty()) return v;
  const AnswerUnit* u = find_unit(unit);
  if (u == nullptr) {
    d.error("", "", fmt::format("unknown unit '{}'{}", std::string(unit), did_you_mean(unit, unit_symbols())));
    return d;
  }
  if (u->dim != expected.dim) {
    d.error("", "", fmt::format("'{}' is a unit of {}; this answer is {} (in {})", u->symbol, to_string(u->dim),
                                to_string(expected.dim), expected.symbol));
    return d;
  }
  return v * u->scale / expected.scale;
}

Verdict check_answer(double given, double expected, double rel_tolerance, std::optional<double> common_wrong) {
  Verdict v;
  v.given = given;
  v.expected = expected;
  auto rel = [](double a, double b) { return b != 0 ? (a - b) / std::fabs(b) : a - b; };
  v.relative_error = rel(given, expected);
  // A hair of slack so that "3" is exactly 3 and a tolerance of 1% accepts an answer 1% off as written.
  const double tol = rel_tolerance + 1e-12;
  v.correct = std::fabs(v.relative_error) <= tol;
  if (!v.correct && common_wrong) v.common_wrong = std::fabs(rel(given, *common_wrong)) <= tol;
  return v;
}

std::string describe(const Verdict& v, const std::string& unit, double rel_tolerance) {
  const std::string tol = rel_tolerance > 0 ? fmt::format("±{}%", units::format_number(rel_tolerance * 100, 3)) : "exact";
  return fmt::format("{}: {} {} (model: {} {}; error {:+.1f}%, tolerance {}){}", v.correct ? "correct" : "wrong",
                     units::format_number(v.given, 6), unit, units::format_number(v.expected, 4), unit,
                     v.relative_error * 100.0, tol, v.common_wrong ? " — that is the common wrong answer" : "");
}

}  // namespace gpuplan::app
