// Scenario flags generated from a field table (scenario_flags.hpp).
#include "scenario_flags.hpp"

#include <utility>

namespace gpuplan::cli {

void ScenarioFlags::add(CLI::App& cmd, const wl_io::ScenarioFieldTable& table, const Own& own, const Keep& keep) {
  for (const auto& f : table) {
    if (keep && !keep(f)) continue;
    if (const auto it = own.find(f.key()); it != own.end()) {
      it->second(f);
      continue;
    }
    if (!f.flags.empty()) add_field(cmd, f, f.help_with_default());
  }
}

void ScenarioFlags::add_field(CLI::App& cmd, const wl_io::ScenarioField& f, const std::string& help) {
  using json_io::FieldType;
  std::string names;
  for (const auto& n : f.flags) {
    if (!names.empty()) names += ",";
    names += n;
  }
  Value& v = values_[f.key()];
  v.field = &f;
  if (f.switch_flag) {
    cmd.add_flag(names, v.on, help);
    return;
  }
  switch (f.spec.type) {
    case FieldType::integer: cmd.add_option(names, v.integer, help); break;
    case FieldType::number: cmd.add_option(names, v.number, help); break;
    case FieldType::boolean:
      // Also the bare switch (`--sequence-parallel`, `--fp8-dot-product-attention`), as Megatron-LM's own command
      // lines spell these: no value = true; `--flag false` and `--flag=false` still work.
      cmd.add_option(names, v.boolean, help)->expected(0, 1)->default_str("true")->option_text("[BOOLEAN]");
      break;
    case FieldType::string_list: cmd.add_option(names, v.list, help)->delimiter(','); break;
    default: cmd.add_option(names, v.text, help); break;
  }
}

bool ScenarioFlags::given(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return false;
  const Value& v = it->second;
  return v.integer || v.number || v.boolean || v.text || !v.list.empty() || v.on;
}

std::vector<std::string> ScenarioFlags::take_list(const std::string& key) {
  const auto it = values_.find(key);
  if (it == values_.end()) return {};
  return std::exchange(it->second.list, {});  // already one word per value: the option splits at commas (add)
}

std::optional<std::string> ScenarioFlags::text(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? std::nullopt : it->second.text;
}

std::optional<double> ScenarioFlags::number(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? std::nullopt : it->second.number;
}

std::optional<long long> ScenarioFlags::integer(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? std::nullopt : it->second.integer;
}

void ScenarioFlags::overlay(nlohmann::json& j, std::map<std::string, std::string>& origin) const {
  for (const auto& [key, v] : values_) {
    if (!given(key)) continue;
    if (v.integer) j[key] = *v.integer;
    else if (v.number) j[key] = *v.number;
    else if (v.boolean) j[key] = *v.boolean;
    else if (v.on) j[key] = true;
    else if (v.text) j[key] = *v.text;
    else j[key] = v.list;
    origin[key] = v.field->flag();
  }
}

}  // namespace gpuplan::cli
