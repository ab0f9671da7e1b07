// What every scenario field table shares (scenario_fields.hpp): look-ups, the reader's view, help and tooltip text,
// and the Markdown field reference.
#include "gpuplan/wl_io/scenario_fields.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gpuplan::wl_io {

std::string ScenarioField::help_with_default() const {
  if (default_text.empty()) return help;
  std::string s = help;
  s += " (default: ";
  s += default_text;
  s += ")";
  return s;
}

std::string ScenarioField::tooltip() const {
  std::string s = help_with_default();
  s += "\nscenario key \"";
  s += key();
  s += "\"";
  if (!flags.empty()) {
    s += ", flag ";
    s += flags.front();
  }
  return s;
}

std::vector<std::string> ScenarioField::picker_choices() const {
  std::vector<std::string> out;
  for (const auto& c : spec.choices)
    if (std::find(spellings.begin(), spellings.end(), c) == spellings.end()) out.push_back(c);
  return out;
}

const ScenarioField* find_field(const ScenarioFieldTable& table, std::string_view key) {
  for (const auto& f : table)
    if (f.key() == key) return &f;
  return nullptr;
}

std::string key_label(const ScenarioFieldTable& table, std::string_view key) {
  const ScenarioField* f = find_field(table, key);
  return f != nullptr && !f->label.empty() ? f->label : std::string(key);
}

std::string training_key_label(std::string_view key) { return key_label(training_fields(), key); }

std::string serving_key_label(std::string_view key) { return key_label(serving_fields(), key); }

std::string flag_of_key(const ScenarioFieldTable& table, const std::string& key) {
  if (const ScenarioField* f = find_field(table, key); f != nullptr && !f->flags.empty()) return f->flag();
  std::string flag = "--";
  flag += key;
  for (auto& ch : flag)
    if (ch == '_') ch = '-';
  return flag;
}

json_io::FieldTable field_specs(const ScenarioFieldTable& table) {
  json_io::FieldTable t;
  t.reserve(table.size());
  for (const auto& f : table) t.push_back(f.spec);
  return t;
}

namespace {
/// A Markdown table cell: '|' written as '\|' (a pipeline layout's chunk separator would end the cell).
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string type_name(json_io::FieldType t) {
  switch (t) {
    case json_io::FieldType::string: return "string";
    case json_io::FieldType::number: return "number";
    case json_io::FieldType::integer: return "integer";
    case json_io::FieldType::boolean: return "boolean";
    case json_io::FieldType::string_list: return "[string]";
    case json_io::FieldType::object: return "object";
    case json_io::FieldType::any: return "any";
  }
  return "any";
}

/// The key's flags ("`--model`, `-m`"), marked "(no value)" for a switch and "(planner)" for a planner-only key.
std::string flags_text(const ScenarioField& f) {
  std::string flags;
  for (const auto& x : f.flags) flags += (flags.empty() ? "" : ", ") + ("`" + x + "`");
  if (!flags.empty() && f.switch_flag) flags += " (no value)";
  if (!flags.empty() && f.planner_only) flags += " (planner)";
  return flags;
}

/// docs/scenario.md's type cell: the choices of a string ("\"a\" \\| \"b\""), a list's items, a number's range.
std::string doc_type(const json_io::FieldSpec& s) {
  const char* sep = s.type == json_io::FieldType::string ? " \\| " : ", ";
  std::string quoted;
  for (const auto& c : s.choices) {
    if (!quoted.empty()) quoted += sep;
    quoted += '"';
    quoted += c;
    quoted += '"';
  }
  if (s.type == json_io::FieldType::string && !quoted.empty()) return quoted;
  if (s.type == json_io::FieldType::string_list) return quoted.empty() ? "list of strings" : "list of " + quoted;
  std::string t = type_name(s.type);
  if (s.min != 0.0 || s.max != 0.0) t += fmt::format(" in {}{}, {}]", s.min_exclusive ? "(" : "[", s.min, s.max);
  return t;
}
}  // namespace

std::string scenario_field_reference_markdown(const std::string& title, const ScenarioFieldTable& table) {
  std::string out = fmt::format(
      "### {}\n\n| key | type | range | flag | GUI label | default | meaning |\n| --- | --- | --- | --- | --- | --- | --- |\n",
      title);
  for (const auto& f : table) {
    const auto& s = f.spec;
    std::string range = s.min == 0.0 && s.max == 0.0 ? "" : fmt::format(">= {} and <= {}", s.min, s.max);
    for (const auto& c : s.choices) range += (range.empty() ? "" : ", ") + ("`" + c + "`");
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} |\n", s.key, type_name(s.type), range, flags_text(f),
                       cell(f.label), cell(f.default_text), cell(s.doc));
  }
  out += "\n";
  return out;
}

std::string scenario_doc_table_markdown(const ScenarioFieldTable& table,
                                        const std::map<std::string, std::string>& meanings) {
  std::string out = "| key | type | flag | default | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& f : table) {
    const auto m = meanings.find(f.key());
    const std::string flags = flags_text(f);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", f.key(), doc_type(f.spec), flags.empty() ? "—" : flags,
                       cell(f.default_text), m != meanings.end() && !m->second.empty() ? m->second : cell(f.spec.doc));
  }
  return out;
}

}  // namespace gpuplan::wl_io
