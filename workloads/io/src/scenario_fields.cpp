// What every scenario field table shares (scenario_fields.hpp): look-ups, the reader's view, help and tooltip text,
// and the Markdown field reference.
#include "gpuplan/wl_io/scenario_fields.hpp"

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

const ScenarioField* find_field(const ScenarioFieldTable& table, std::string_view key) {
  for (const auto& f : table)
    if (f.key() == key) return &f;
  return nullptr;
}

std::string training_key_label(std::string_view key) {
  const ScenarioField* f = find_field(training_fields(), key);
  return f != nullptr && !f->label.empty() ? f->label : std::string(key);
}

std::string serving_key_label(std::string_view key) {
  const ScenarioField* f = find_field(serving_fields(), key);
  return f != nullptr && !f->label.empty() ? f->label : std::string(key);
}

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
}  // namespace

std::string scenario_field_reference_markdown(const std::string& title, const ScenarioFieldTable& table) {
  std::string out = fmt::format(
      "### {}\n\n| key | type | range | flag | GUI label | default | meaning |\n| --- | --- | --- | --- | --- | --- | --- |\n",
      title);
  for (const auto& f : table) {
    const auto& s = f.spec;
    std::string type;
    switch (s.type) {
      case json_io::FieldType::string: type = "string"; break;
      case json_io::FieldType::number: type = "number"; break;
      case json_io::FieldType::integer: type = "integer"; break;
      case json_io::FieldType::boolean: type = "boolean"; break;
      case json_io::FieldType::string_list: type = "[string]"; break;
      case json_io::FieldType::object: type = "object"; break;
      case json_io::FieldType::any: type = "any"; break;
    }
    std::string range = s.min == 0.0 && s.max == 0.0 ? "" : fmt::format(">= {} and <= {}", s.min, s.max);
    for (const auto& c : s.choices) range += (range.empty() ? "" : ", ") + ("`" + c + "`");
    std::string flags;
    for (const auto& x : f.flags) flags += (flags.empty() ? "" : ", ") + ("`" + x + "`");
    if (!flags.empty() && f.switch_flag) flags += " (no value)";
    if (!flags.empty() && f.planner_only) flags += " (planner)";
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} |\n", s.key, type, range, flags, cell(f.label),
                       cell(f.default_text), cell(s.doc));
  }
  out += "\n";
  return out;
}

}  // namespace gpuplan::wl_io
