#include "gpuplan/json_io/reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace gpuplan::json_io {

std::optional<std::string> read_text_file(const std::string& path, Diagnostics& diags) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    diags.error(path, "", "file not found");
    return std::nullopt;
  }
  if (std::filesystem::is_directory(path, ec)) {
    diags.error(path, "", "is a directory, expected a JSON file");
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    diags.error(path, "", "cannot be read (permission denied or I/O error)");
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<Json> parse(std::string_view text, const std::string& file, Diagnostics& diags) {
  try {
    return Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset of the offending byte; turn it into line:column.
    const std::size_t at = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    int line = 1, col = 1;
    for (std::size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string what = e.what();
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
  } catch (const Json::exception& e) {
    // Other parser failures (e.g. out_of_range 406: a number such as 1e999 that overflows a double) carry no
    // position; report them on the file.
    std::string what = e.what();
    if (const auto q = what.find("] "); q != std::string::npos) what = what.substr(q + 2);
    diags.error(file, "", "malformed JSON: " + what);
    return std::nullopt;
  }
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

std::string describe_value(const Json& v) {
  // Strings that came from the command line may hold bytes that are not UTF-8; dump() would throw on them.
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
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
      case FieldType::integer:
        ok = v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
                                       std::isfinite(v.get<double>()));
        break;
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
    if ((f->type == FieldType::number || f->type == FieldType::integer) && has_range(*f)) {
      const double x = v.get<double>();
      const bool below = f->min_exclusive ? !(x > f->min) : !(x >= f->min);
      if (below || !(x <= f->max)) {
        const std::string unit = f->unit.empty() ? "" : " " + f->unit;
        diags.error(file_, pointer(key),
                    fmt::format("value {}{} is out of range: expected {}{}{}", describe_value(v), unit,
                                range_text(*f), unit,
                                x > f->max && f->plausibility_bound ? " (the plausibility bound is 10x the largest known part)" : ""));
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
