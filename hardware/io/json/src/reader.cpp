#include "gpuplan/json_io/reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <fmt/format.h>

namespace gpuplan::json_io {

namespace {

namespace fs = std::filesystem;

std::string limit_text(std::size_t max_bytes) {
  if (max_bytes >= (std::size_t{1} << 20) && max_bytes % (std::size_t{1} << 20) == 0)
    return fmt::format("{} MiB", max_bytes >> 20);
  return fmt::format("{}-byte", max_bytes);
}

/// Why a path that exists cannot be read as a file, or "" for a regular file or a pipe.
std::string not_a_file(fs::file_type t) {
  switch (t) {
    case fs::file_type::regular:
    case fs::file_type::fifo: return "";
    case fs::file_type::directory: return "is a directory, expected a JSON file";
    case fs::file_type::character:
      return "is a character device (such as /dev/zero, /dev/urandom or a terminal), not a file: gpuplan reads JSON "
             "from files and pipes";
    case fs::file_type::block: return "is a block device, not a file: gpuplan reads JSON from files and pipes";
    case fs::file_type::socket: return "is a socket, not a file: gpuplan reads JSON from files and pipes";
    default: return "is not a regular file: gpuplan reads JSON from files and pipes";
  }
}

}  // namespace

std::optional<std::string> read_text_file(const std::string& path, Diagnostics& diags, std::size_t max_bytes) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    diags.error(path, "", "file not found");
    return std::nullopt;
  }
  // Devices are refused before they are opened: /dev/zero and /dev/urandom never end, a terminal waits for typing.
  if (const std::string why = not_a_file(st.type()); !why.empty()) {
    diags.error(path, "", why);
    return std::nullopt;
  }
  const bool regular = st.type() == fs::file_type::regular;
  std::uintmax_t size = 0;
  if (regular) {
    size = fs::file_size(path, ec);
    if (!ec && size > max_bytes) {
      diags.error(path, "", fmt::format("file is larger than the {} limit for JSON input ({} bytes)",
                                        limit_text(max_bytes), size));
      return std::nullopt;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.error(path, "", "cannot be read (permission denied or I/O error)");
    return std::nullopt;
  }
  // At most max_bytes + 1 bytes: a pipe (or a file that grew since its size was taken) has no size to check first.
  std::string out;
  if (regular && !ec) out.reserve(static_cast<std::size_t>(size) + 1);
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  while (out.size() <= max_bytes) {
    const std::size_t want = std::min(kChunk, max_bytes + 1 - out.size());
    const std::size_t at = out.size();
    out.resize(at + want);
    in.read(out.data() + at, static_cast<std::streamsize>(want));
    const auto got = static_cast<std::size_t>(in.gcount());
    out.resize(at + got);
    if (got < want) break;
  }
  if (in.bad()) {
    diags.error(path, "", "cannot be read (I/O error)");
    return std::nullopt;
  }
  if (out.size() > max_bytes) {
    diags.error(path, "",
                fmt::format("file is larger than the {} limit for JSON input (stopped reading after {} bytes)",
                            limit_text(max_bytes), out.size()));
    return std::nullopt;
  }
  return out;
}

namespace {

/// 1-based line and column (in bytes) of the byte at `offset`.
std::pair<int, int> line_column(std::string_view text, std::size_t offset) {
  const std::size_t at = std::min(offset, text.size());
  int line = 1, col = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

/// Offset of the first '[' or '{' that opens nesting level `limit + 1`, or npos. Run only after the parser stopped
/// there, so the text before it is valid JSON and counting brackets outside strings is exact.
std::size_t too_deep_offset(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

/// Builds the value as nlohmann's own DOM parser does, and also: stops at kMaxJsonDepth, and records every key that
/// an object already has (the DOM parser would keep the last value silently).
class Builder {
 public:
  using string_t = Json::string_t;

  Json root;
  bool too_deep = false;
  struct Duplicate {
    std::string pointer;
    std::string key;
  };
  std::vector<Duplicate> duplicates;
  // The parser's error, if any: the message, and for a syntax error (not e.g. a number too large) its byte offset.
  std::optional<std::string> error;
  std::optional<std::size_t> error_byte;

  bool null() { return add(Json(nullptr)); }
  bool boolean(bool v) { return add(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return add(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return add(Json(v)); }
  bool number_float(Json::number_float_t v, const string_t& /*text*/) { return add(Json(v)); }
  bool string(string_t& v) { return add(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return add(Json(v)); }  // not produced by JSON text
  bool start_object(std::size_t /*elements*/) { return open(Json::value_t::object); }
  bool start_array(std::size_t /*elements*/) { return open(Json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    Json& object = *stack_.back();
    auto it = object.find(k);
    if (it != object.end()) {
      duplicates.push_back({pointer() + "/" + json_pointer_token(k), k});
      slot_ = &*it;
    } else {
      slot_ = &object[std::move(k)];
    }
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& e) {
    error = e.what();
    if (const auto* pe = dynamic_cast<const Json::parse_error*>(&e)) error_byte = pe->byte;
    return false;
  }

 private:
  std::vector<Json*> stack_;  // the open arrays and objects, outermost first
  Json* slot_ = nullptr;      // the member of the innermost object whose key was read last

  /// Puts a value where the parser is (the root, the end of the innermost array, or the member just keyed).
  Json* place(Json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool add(Json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(Json::value_t t) {
    if (stack_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      too_deep = true;
      return false;
    }
    // An open container is the last element of its array (or a map member): later siblings cannot move it.
    stack_.push_back(place(Json(t)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  /// JSON pointer of the innermost open container (only built for a diagnostic).
  std::string pointer() const {
    std::string p;
    for (std::size_t i = 1; i < stack_.size(); ++i) {
      const Json& parent = *stack_[i - 1];
      if (parent.is_array()) {
        p += "/" + std::to_string(parent.size() - 1);
        continue;
      }
      for (auto it = parent.begin(); it != parent.end(); ++it)
        if (&*it == stack_[i]) {
          p += "/" + json_pointer_token(it.key());
          break;
        }
    }
    return p;
  }
};

}  // namespace

std::optional<Json> parse(std::string_view text, const std::string& file, Diagnostics& diags) {
  Builder b;
  try {
    Json::sax_parse(text.begin(), text.end(), &b, Json::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const Json::exception& e) {
    b.error = e.what();
  }
  if (b.error) {
    std::string what = *b.error;
    if (b.error_byte) {
      // The parse error's byte is the 1-based offset of the offending byte; turn it into line:column.
      const auto [line, col] = line_column(text, *b.error_byte == 0 ? 0 : *b.error_byte - 1);
      // nlohmann's message: "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error while
      // parsing object - invalid literal; last read: '...'". Keep the part after the position.
      if (const auto p = what.find(": syntax error"); p != std::string::npos) what = what.substr(p + 2);
      else if (const auto q = what.find("] "); q != std::string::npos) what = what.substr(q + 2);
      Diagnostic d;
      d.file = file;
      d.line = line;
      d.column = col;
      d.message = "malformed JSON: " + what;
      diags.add(std::move(d));
      return std::nullopt;
    }
    // Other parser failures (e.g. out_of_range 406: a number such as 1e999 that overflows a double) carry no
    // position; report them on the file.
    if (const auto q = what.find("] "); q != std::string::npos) what = what.substr(q + 2);
    diags.error(file, "", "malformed JSON: " + what);
    return std::nullopt;
  }
  if (b.too_deep) {
    Diagnostic d;
    d.file = file;
    if (const auto at = too_deep_offset(text, kMaxJsonDepth); at != std::string_view::npos)
      std::tie(d.line, d.column) = line_column(text, at);
    d.message = fmt::format("JSON nested deeper than the {}-level limit for JSON input (arrays and objects inside "
                            "one another; gpuplan's files need fewer than 10)",
                            kMaxJsonDepth);
    diags.add(std::move(d));
    return std::nullopt;
  }
  if (!b.duplicates.empty()) {
    for (const auto& dup : b.duplicates)
      diags.error(file, dup.pointer,
                  fmt::format("duplicate key {}: the object already has this key (keys must be unique; one of the "
                              "two values would be dropped silently)",
                              describe_value(Json(dup.key))));
    return std::nullopt;
  }
  return std::move(b.root);
}

std::optional<Json> parse_allowing_non_finite(std::string_view text, const std::string& file, Diagnostics& diags,
                                              std::vector<NonFiniteLiteral>* found) {
  // Rewrite the literals outside strings as quoted strings; line and column refer to the original text. A literal
  // must stand alone (a value starts after ':', ',', '[' or whitespace); anything else is left to the parser's error.
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  int line = 1, col = 1;
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[i + 1];
        i += 2;
        col += 2;
        continue;
      }
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
      out += c;
    } else {
      std::string_view lit;
      for (std::string_view w : {std::string_view("-Infinity"), std::string_view("Infinity"), std::string_view("NaN")})
        if (text.substr(i, w.size()) == w) {
          lit = w;
          break;
        }
      const auto boundary = [&](std::size_t at) {
        return at >= text.size() || text[at] == ',' || text[at] == ']' || text[at] == '}' || text[at] == ' ' ||
               text[at] == '\n' || text[at] == '\r' || text[at] == '\t';
      };
      if (!lit.empty() && boundary(i + lit.size())) {
        out += '"';
        out += lit;
        out += '"';
        if (found) found->push_back({std::string(lit), line, col});
        i += lit.size();
        col += static_cast<int>(lit.size());
        continue;
      }
      out += c;
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    ++i;
  }
  return parse(out, file, diags);
}

bool is_integral(const Json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double x = v.get<double>();
  return std::isfinite(x) && std::floor(x) == x;
}

std::string describe_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    default: return "an unsupported value";
  }
}

namespace {

constexpr std::size_t kShown = 40;  // describe_value's longest result; longer ones end in "..."

/// Appends the compact dump() of `v` to `out` until `out` holds more than kShown characters: the same bytes as
/// v.dump(-1, ' ', false, replace) up to that point. Each level of nesting writes a character before it recurses,
/// so the recursion is at most kShown + 1 deep; a long string is dumped from a prefix that covers what is shown.
void render_string(const Json::string_t& s, std::string& out) {
  constexpr auto replace = Json::error_handler_t::replace;
  // Every byte dumps to at least one character (an invalid byte to the three of U+FFFD), so 4·kShown bytes cover
  // what is shown; the cut string's own end (closing quote, a split UTF-8 sequence) lies beyond it.
  constexpr std::size_t kPrefix = 4 * kShown;
  if (s.size() <= kPrefix) {
    out += Json(s).dump(-1, ' ', false, replace);
  } else {
    out += Json(s.substr(0, kPrefix)).dump(-1, ' ', false, replace);
    out.resize(std::min(out.size(), kShown + 1));
  }
}

void render(const Json& v, std::string& out) {
  if (out.size() > kShown) return;
  switch (v.type()) {
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (out.size() > kShown) return;
        if (!first) out += ',';
        first = false;
        render(e, out);
      }
      out += ']';
      return;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (out.size() > kShown) return;
        if (!first) out += ',';
        first = false;
        render_string(it.key(), out);
        out += ':';
        render(it.value(), out);
      }
      out += '}';
      return;
    }
    case Json::value_t::string: render_string(v.get_ref<const Json::string_t&>(), out); return;
    default:  // numbers, booleans, null, binary (not made by parse): a few characters
      out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
      return;
  }
}

}  // namespace

std::string describe_value(const Json& v) {
  try {
    std::string s;
    render(v, s);
    if (s.size() > kShown) s = s.substr(0, kShown - 3) + "...";
    return s;
  } catch (...) {  // only allocation can fail here; a message must not throw on its way out
    return "(value)";
  }
}

namespace {
std::string expected_name(FieldType t) {
  switch (t) {
    case FieldType::string: return "a string";
    case FieldType::number: return "a number";
    case FieldType::integer: return "an integer";
    case FieldType::boolean: return "a boolean (true or false)";
    case FieldType::string_list: return "an array of strings";
    case FieldType::object: return "an object";
    case FieldType::any: return "any value";
  }
  return "a value";
}

bool has_range(const FieldSpec& f) { return !(f.min == 0.0 && f.max == 0.0); }

std::string range_text(const FieldSpec& f) {
  const std::string lo = f.min_exclusive ? fmt::format("> {}", f.min) : fmt::format(">= {}", f.min);
  return fmt::format("{} and <= {}", lo, f.max);
}
}  // namespace

ObjectReader::ObjectReader(const Json& value, const FieldTable& table, std::string file, std::string base,
                           Diagnostics& diags, UnknownKeys unknown)
    : value_(&value), table_(&table), file_(std::move(file)), pointer_(std::move(base)), diags_(&diags),
      unknown_(unknown) {
  const std::string where = pointer_.empty() ? std::string("/") : pointer_;
  if (!value.is_object()) {
    diags.error(file_, where, fmt::format("expected an object, found {}", describe_type(value)));
    valid_ = false;
    return;
  }
  std::vector<std::string> known;
  for (const auto& f : table) known.push_back(f.key);

  for (const auto& [key, v] : value.items()) {
    const FieldSpec* f = spec(key);
    if (f == nullptr) {
      if (unknown == UnknownKeys::ignore) continue;
      diags.error(file_, pointer(key), fmt::format("unknown key '{}'{}", key, did_you_mean(key, known)));
      valid_ = false;
      continue;
    }
    if (v.is_null() && f->nullable) {
      null_keys_.push_back(key);
      continue;
    }
    bool ok = true;
    switch (f->type) {
      case FieldType::string: ok = v.is_string(); break;
      case FieldType::number: ok = v.is_number(); break;
      case FieldType::integer: ok = is_integral(v); break;
      case FieldType::boolean: ok = v.is_boolean(); break;
      case FieldType::string_list:
        ok = v.is_array() && std::all_of(v.begin(), v.end(), [](const Json& e) { return e.is_string(); });
        break;
      case FieldType::object: ok = v.is_object(); break;
      case FieldType::any: ok = true; break;
    }
    if (!ok) {
      diags.error(file_, pointer(key),
                  v.is_null() || v.is_object() || v.is_array()
                      ? fmt::format("expected {}, found {}", expected_name(f->type), describe_type(v))
                      : fmt::format("expected {}, found {} {}", expected_name(f->type), describe_type(v),
                                    describe_value(v)));
      bad_keys_.push_back(key);
      valid_ = false;
      continue;
    }
    if (f->type == FieldType::number || f->type == FieldType::integer) {
      const double x = v.get<double>();
      const std::string unit = f->unit.empty() ? "" : " " + f->unit;
      std::string problem;
      if (std::fpclassify(x) == FP_SUBNORMAL) {
        // Below 2.2e-308 a double loses precision, and dividing by it overflows: no quantity is meant by it.
        problem = fmt::format("value {}{} is too small to mean anything (a subnormal number, below 2.2e-308 in "
                              "magnitude){}",
                              describe_value(v), unit,
                              has_range(*f) ? fmt::format(": expected {}{}", range_text(*f), unit) : std::string());
      } else if (has_range(*f) && ((f->min_exclusive ? !(x > f->min) : !(x >= f->min)) || !(x <= f->max))) {
        const char* note = "";
        if (x > f->max && f->plausibility_bound) note = " (the plausibility bound is 10x the largest known part)";
        if (x > 0 && x < f->min && f->plausibility_floor)
          note = " (the floor is a millionth of the plausibility bound: no real part is that small)";
        problem = fmt::format("value {}{} is out of range: expected {}{}{}", describe_value(v), unit, range_text(*f),
                              unit, note);
      } else if (f->type == FieldType::integer && !(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) {
        problem =
            fmt::format("value {} is out of range: expected an integer from -2^63 to 2^63 - 1", describe_value(v));
      }
      if (!problem.empty()) {
        diags.error(file_, pointer(key), std::move(problem));
        bad_keys_.push_back(key);
        valid_ = false;
        continue;
      }
    }
    if (f->type == FieldType::string && !f->choices.empty()) {
      const auto s = v.get<std::string>();
      if (std::find(f->choices.begin(), f->choices.end(), s) == f->choices.end()) {
        std::string list;
        for (const auto& c : f->choices) list += (list.empty() ? "'" : ", '") + c + "'";
        diags.error(file_, pointer(key),
                    fmt::format("'{}' is not one of {}{}", s, list, did_you_mean(s, f->choices)));
        bad_keys_.push_back(key);
        valid_ = false;
      }
    }
  }
  for (const auto& f : table) {
    const bool absent = !value.contains(f.key) || (f.nullable && value.at(f.key).is_null());
    if (f.presence == Presence::required && absent) {
      diags.error(file_, where, fmt::format("missing required key '{}' ({})", f.key, f.doc));
      valid_ = false;
    }
  }
}

const FieldSpec* ObjectReader::spec(std::string_view key) const {
  for (const auto& f : *table_)
    if (f.key == key) return &f;
  return nullptr;
}

bool ObjectReader::has(std::string_view key) const {
  return value_->is_object() && value_->contains(std::string(key)) &&
         std::find(bad_keys_.begin(), bad_keys_.end(), key) == bad_keys_.end() &&
         std::find(null_keys_.begin(), null_keys_.end(), key) == null_keys_.end() && spec(key) != nullptr;
}

std::string ObjectReader::pointer(std::string_view key) const { return pointer_ + "/" + json_pointer_token(key); }

void ObjectReader::error(std::string_view key, std::string message) const {
  diags_->error(file_, key.empty() ? (pointer_.empty() ? "/" : pointer_) : pointer(key), std::move(message));
}

std::optional<std::string> ObjectReader::str(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return value_->at(std::string(key)).get<std::string>();
}
std::optional<double> ObjectReader::num(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return value_->at(std::string(key)).get<double>();
}
std::optional<long long> ObjectReader::integer(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const auto& v = value_->at(std::string(key));
  return v.is_number_integer() ? v.get<long long>() : static_cast<long long>(v.get<double>());
}
std::optional<bool> ObjectReader::boolean(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return value_->at(std::string(key)).get<bool>();
}
std::optional<std::vector<std::string>> ObjectReader::strings(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return value_->at(std::string(key)).get<std::vector<std::string>>();
}
std::optional<ObjectReader> ObjectReader::object(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const FieldSpec* f = spec(key);
  static const FieldTable kEmpty;
  return ObjectReader(value_->at(std::string(key)), f->nested ? *f->nested : kEmpty, file_, pointer(key), *diags_,
                      unknown_);
}
const Json* ObjectReader::raw(std::string_view key) const {
  if (!has(key)) return nullptr;
  return &value_->at(std::string(key));
}

std::string field_reference_markdown(const std::string& title, const FieldTable& table) {
  std::string out = fmt::format("### {}\n\n| key | type | unit | range | required | meaning |\n| --- | --- | --- | --- | --- | --- |\n", title);
  std::vector<std::pair<std::string, const FieldTable*>> nested;
  for (const auto& f : table) {
    std::string type;
    switch (f.type) {
      case FieldType::string: type = "string"; break;
      case FieldType::number: type = "number"; break;
      case FieldType::integer: type = "integer"; break;
      case FieldType::boolean: type = "boolean"; break;
      case FieldType::string_list: type = "[string]"; break;
      case FieldType::object: type = "object"; break;
      case FieldType::any: type = "any"; break;
    }
    std::string range = has_range(f) ? range_text(f) : "";
    if (!f.choices.empty()) {
      for (const auto& c : f.choices) range += (range.empty() ? "" : ", ") + ("`" + c + "`");
    }
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", f.key, type, f.unit, range,
                       f.presence == Presence::required ? "yes" : "", f.doc);
    if (f.nested != nullptr) nested.emplace_back(title + " / " + f.key, f.nested);
  }
  out += "\n";
  for (const auto& [t, tab] : nested) out += field_reference_markdown(t, *tab);
  return out;
}

}  // namespace gpuplan::json_io
