#pragma once
// Table-driven, strict JSON decoding with diagnostics. Every data-file spec (GPU, link, node, model, scenario,
// calibration samples) is described by one FieldTable: key, type, unit, plausible range, presence and a one-line
// description. The same table validates input (unknown keys with "did you mean", wrong types, out-of-range values,
// missing required keys — all reported at once with file and JSON pointer) and generates the field reference.
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::json_io {

using Json = nlohmann::json;

enum class FieldType { string, number, integer, boolean, string_list, object, any };
enum class Presence { required, optional };
/// Our own files reject unknown keys; foreign formats (Hugging Face config.json) carry many keys we do not model.
enum class UnknownKeys { reject, ignore };

struct FieldSpec {
  std::string key;
  FieldType type = FieldType::string;
  Presence presence = Presence::optional;
  std::string unit;         ///< "TB/s" for documentation; the key itself carries the suffix
  double min = 0.0;         ///< inclusive lower bound for number/integer
  double max = 0.0;         ///< inclusive upper bound (plausibility bound); ignored if min == max == 0
  bool min_exclusive = false;  ///< value must be > min (e.g. a bandwidth must be positive)
  bool plausibility_bound = false;  ///< `max` is 10x the largest known part (said in the message), not a hard limit
  bool plausibility_floor = false;  ///< `min` is a millionth of `max`: smaller positive values are no real part
  std::string doc;
  std::vector<std::string> choices;  ///< allowed values of a string field (empty = any)
  const std::vector<FieldSpec>* nested = nullptr;  ///< table of an object field (nullptr = free-form)
  bool nullable = false;  ///< JSON null means "absent" (Hugging Face configs write null for unset fields)
};
using FieldTable = std::vector<FieldSpec>;

/// The most bytes read_text_file reads: 64 MiB. The largest shipped file (data/validation/inference_cases.json) is
/// 0.7 MB and a full calibration samples file 0.4 MB, so this is ~90x what gpuplan reads, and small enough that a
/// mistaken path (a log, a disk image, /dev/urandom through a pipe) is refused before it is held in memory and parsed.
inline constexpr std::size_t kMaxInputBytes = std::size_t{64} << 20;
/// The deepest nesting of arrays and objects that parse accepts. gpuplan's deepest input is 6 levels (a validation
/// case file); 128 is serde_json's default recursion limit, and it keeps every recursive step after parsing (copying a
/// value, dump(), nested field tables) far from the stack's end.
inline constexpr int kMaxJsonDepth = 128;

/// Reads a whole text file, at most `max_bytes` (reading stops at max_bytes + 1). A missing, unreadable or directory
/// path, a device (/dev/zero, /dev/urandom, a terminal), a socket and a file or pipe larger than the limit are
/// diagnostics. Regular files and pipes (`<(jq ...)`, /dev/stdin when piped) are read.
std::optional<std::string> read_text_file(const std::string& path, Diagnostics& diags,
                                          std::size_t max_bytes = kMaxInputBytes);

/// Parses JSON text. A syntax error becomes a diagnostic with line and column; so does nesting deeper than
/// kMaxJsonDepth (found while parsing, before anything recurses over the value). A key that appears twice in one
/// object is an error at its JSON pointer (which of the two values counts would otherwise be a silent guess).
std::optional<Json> parse(std::string_view text, const std::string& file, Diagnostics& diags);

/// A non-standard literal (Infinity, -Infinity, NaN) found by parse_allowing_non_finite, with its 1-based position.
struct NonFiniteLiteral {
  std::string text;
  int line = 0;
  int column = 0;
};
/// parse(), except that the literals Infinity, -Infinity and NaN outside strings (which Python's json module writes,
/// and Hugging Face config.json files contain) are read as the strings "Infinity", "-Infinity" and "NaN". Only for
/// foreign files: gpuplan's own data files are strict JSON. Each literal replaced is appended to `found`.
std::optional<Json> parse_allowing_non_finite(std::string_view text, const std::string& file, Diagnostics& diags,
                                              std::vector<NonFiniteLiteral>* found = nullptr);

/// True for a JSON integer or a number with an integral value (8 and 8.0, not 8.5 or inf): the one rule for every
/// integer field, ObjectReader's FieldType::integer and the calibration samples' counts alike.
bool is_integral(const Json& v);

/// Reads one JSON object against its field table. Construction validates every key at once; the getters return
/// only values that passed validation (nullopt when absent or invalid), so decoders never see bad data.
class ObjectReader {
 public:
  ObjectReader(const Json& value, const FieldTable& table, std::string file, std::string pointer, Diagnostics& diags,
               UnknownKeys unknown = UnknownKeys::reject);
  /// The reader keeps a pointer to the value: a temporary would dangle.
  ObjectReader(Json&& value, const FieldTable& table, std::string file, std::string pointer, Diagnostics& diags,
               UnknownKeys unknown = UnknownKeys::reject) = delete;

  [[nodiscard]] bool valid() const { return valid_; }
  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] std::optional<std::string> str(std::string_view key) const;
  [[nodiscard]] std::optional<double> num(std::string_view key) const;
  [[nodiscard]] std::optional<long long> integer(std::string_view key) const;
  [[nodiscard]] std::optional<bool> boolean(std::string_view key) const;
  [[nodiscard]] std::optional<std::vector<std::string>> strings(std::string_view key) const;
  /// A nested object with its own table (the field's `nested`), or nullopt.
  [[nodiscard]] std::optional<ObjectReader> object(std::string_view key) const;
  /// The raw JSON of a free-form field (`nested == nullptr`), or nullptr.
  [[nodiscard]] const Json* raw(std::string_view key) const;

  [[nodiscard]] std::string pointer(std::string_view key) const;
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] const std::string& base_pointer() const { return pointer_; }
  /// Adds an error at `key` (for cross-field checks done by the decoder).
  void error(std::string_view key, std::string message) const;

 private:
  const FieldSpec* spec(std::string_view key) const;
  const Json* value_;
  const FieldTable* table_;
  std::string file_;
  std::string pointer_;
  Diagnostics* diags_;
  UnknownKeys unknown_ = UnknownKeys::reject;
  bool valid_ = true;
  std::vector<std::string> null_keys_;  // null in a nullable field: treated as absent
  std::vector<std::string> bad_keys_;  // present but invalid: getters return nullopt for these
};

/// Human name of a JSON value's type for messages ("a string", "a number", "null").
std::string describe_type(const Json& v);
/// Short rendering of a value for messages (strings quoted, long values cut to 40 characters): the compact dump()
/// of the value, cut, but produced piece by piece so that a huge or deep value costs only the characters shown.
/// Bytes that are not UTF-8 are replaced by U+FFFD; it never throws.
std::string describe_value(const Json& v);

/// Markdown table of a field table (key, type, unit, range, required, meaning), nested tables after.
std::string field_reference_markdown(const std::string& title, const FieldTable& table);

}  // namespace gpuplan::json_io
