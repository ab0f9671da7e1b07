#pragma once
// Diagnostics for invalid input: every problem found, each with the file, the JSON pointer (or flag) and, where
// known, the line and column, so that a user can go straight to it. Library code returns these; it never prints,
// throws across its API or exits on user input (DESIGN.md §7).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gpuplan {

enum class Severity { error, warning, note };

struct Diagnostic {
  Severity severity = Severity::error;
  std::string file;     ///< path as given by the user, or empty
  std::string pointer;  ///< RFC 6901 JSON pointer ("/memory/bandwidth_TBps"), a flag ("--gpu"), or empty
  int line = 0;         ///< 1-based, 0 if unknown
  int column = 0;       ///< 1-based, 0 if unknown
  std::string message;

  /// "file:line:col: pointer: error: message" with absent parts left out.
  [[nodiscard]] std::string to_string() const;
};

class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  void error(std::string file, std::string pointer, std::string message);
  void warning(std::string file, std::string pointer, std::string message);
  void note(std::string file, std::string pointer, std::string message);
  void append(const Diagnostics& other);

  [[nodiscard]] bool has_errors() const;
  [[nodiscard]] std::size_t error_count() const;
  [[nodiscard]] bool empty() const { return items_.empty(); }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return items_; }
  /// All diagnostics, one per line.
  [[nodiscard]] std::string to_string() const;

 private:
  std::vector<Diagnostic> items_;
};

/// A value or the diagnostics that explain why there is none. Warnings and notes may accompany a value.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): ergonomic success path
  Result(T value, Diagnostics diags) : value_(std::move(value)), diags_(std::move(diags)) {}
  Result(Diagnostics diags) : diags_(std::move(diags)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return value_.has_value() && !diags_.has_errors(); }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] const T& value() const& { return *value_; }
  [[nodiscard]] T& value() & { return *value_; }
  [[nodiscard]] T&& value() && { return std::move(*value_); }
  [[nodiscard]] const T* operator->() const { return &*value_; }
  [[nodiscard]] const T& operator*() const { return *value_; }
  [[nodiscard]] const Diagnostics& diagnostics() const { return diags_; }
  [[nodiscard]] Diagnostics& diagnostics() { return diags_; }

 private:
  std::optional<T> value_;
  Diagnostics diags_;
};

/// Levenshtein edit distance, for "did you mean" hints.
std::size_t edit_distance(std::string_view a, std::string_view b);
/// The closest candidate to `word` if it is close enough to be a plausible typo, else empty.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);
/// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

/// Escapes a key for use as one JSON-pointer token (RFC 6901: '~' -> "~0", '/' -> "~1").
std::string json_pointer_token(std::string_view key);

}  // namespace gpuplan
