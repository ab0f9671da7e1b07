#include "hf_rules.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuplan/wl_io/model_io.hpp"
#include "io_common.hpp"

namespace gpuplan::wl_io {

namespace {

FieldSpec schema_field() {
  FieldSpec f = field("schema", FieldType::integer, Presence::required, "schema version (1)");
  f.min = 1;
  f.max = 1;
  return f;
}
FieldSpec kind_field(std::string kind) {
  FieldSpec f = field("kind", FieldType::string, Presence::required, "entity kind");
  f.choices = {std::move(kind)};
  return f;
}

const FieldTable& pattern_fields() {
  static const FieldTable t = [] {
    FieldSpec rule = field("rule", FieldType::string, Presence::required,
                           "which layers slide: every layer; every layer but each period-th; layers from "
                           "max_window_layers on; every other layer below max_window_layers");
    rule.choices = {"all_sliding", "every_nth_full", "sliding_from_max_window_layers",
                    "alternating_below_max_window_layers"};
    FieldSpec period = field("period", FieldType::integer, Presence::optional,
                             "every_nth_full: layer i is full attention when (i + 1) % period == 0");
    period.min = 1;
    period.max = 1e4;
    return FieldTable{rule, period,
                      field("period_key", FieldType::string, Presence::optional,
                            "every_nth_full: the config key that holds the period"),
                      field("gate", FieldType::string, Presence::optional,
                            "a boolean config key that must be true for any layer to slide")};
  }();
  return t;
}

const FieldTable& model_type_fields() {
  static const FieldTable t = [] {
    FieldSpec pattern = field("attention_pattern", FieldType::object, Presence::optional,
                              "sliding-window layers when the config has no layer_types");
    pattern.nested = &pattern_fields();
    return FieldTable{field("file", FieldType::string, Presence::required, "the transformers file read"),
                      field("commit", FieldType::string, Presence::required, "its git commit"),
                      field("defaults", FieldType::object, Presence::optional,
                            "config key -> the class's default (keys the importer reads only)"),
                      pattern,
                      field("text_config_model_type", FieldType::string, Presence::optional,
                            "multimodal wrapper: model_type of its text_config when that has none")};
  }();
  return t;
}

const FieldTable& key_group_fields() {
  static const FieldTable t{
      field("keys", FieldType::string_list, Presence::required, "config keys"),
      field("why", FieldType::string, Presence::required, "the reviewed reason, shown in the import's output"),
      field("feature", FieldType::string, Presence::optional, "refused: the layer kind that is not modelled"),
      field("harmless_values", FieldType::any, Presence::optional, "refused: values read as absent (null always is)")};
  return t;
}

const FieldTable& refused_type_fields() {
  static const FieldTable t{field("model_types", FieldType::string_list, Presence::required, "model_type values"),
                            field("why", FieldType::string, Presence::required, "the reason, shown in the error")};
  return t;
}

void read_groups(const ObjectReader& r, const char* key, const std::string& file, Diagnostics& diags,
                 std::vector<HfKeyGroup>& out, bool refused_types = false) {
  const Json* list = r.raw(key);
  if (list == nullptr) return;
  if (!list->is_array()) {
    r.error(key, "expected an array");
    return;
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    ObjectReader g((*list)[i], refused_types ? refused_type_fields() : key_group_fields(), file,
                   r.pointer(key) + "/" + std::to_string(i), diags);
    if (!g.valid()) continue;
    HfKeyGroup kg;
    kg.keys = g.strings(refused_types ? "model_types" : "keys").value_or(std::vector<std::string>{});
    kg.why = g.str("why").value_or("");
    if (!refused_types) {
      kg.feature = g.str("feature").value_or("");
      if (const Json* h = g.raw("harmless_values")) {
        if (!h->is_array()) g.error("harmless_values", "expected an array of JSON values");
        else kg.harmless_values.assign(h->begin(), h->end());
      }
    }
    out.push_back(std::move(kg));
  }
}

}  // namespace

const FieldTable& hf_model_type_defaults_fields() {
  static const FieldTable t{schema_field(),
                            kind_field("hf_model_type_defaults"),
                            field("transformers", FieldType::string, Presence::required,
                                  "which transformers sources were read"),
                            field("notes", FieldType::string, Presence::optional, "free text"),
                            field("model_types", FieldType::object, Presence::required,
                                  "model_type -> {file, commit, defaults, attention_pattern, text_config_model_type}"),
                            field("sources", FieldType::any, Presence::required, "list of {id, ref}")};
  return t;
}
const FieldTable& hf_model_type_entry_fields() { return model_type_fields(); }
const FieldTable& hf_attention_pattern_fields() { return pattern_fields(); }

const FieldTable& hf_config_keys_fields() {
  static const FieldTable t{
      schema_field(),
      kind_field("hf_config_keys"),
      field("notes", FieldType::string, Presence::optional, "free text"),
      field("ignored", FieldType::any, Presence::required, "[{keys, why}]: keys that change no size or cost"),
      field("not_counted", FieldType::any, Presence::required,
            "[{keys, why}]: parts accepted but not counted (the output says so)"),
      field("refused", FieldType::any, Presence::required,
            "[{feature, why, keys, harmless_values}]: keys whose layer kind is not modelled (exit 2)"),
      field("refused_model_types", FieldType::any, Presence::required, "[{model_types, why}]"),
      field("sources", FieldType::any, Presence::required, "list of {id, ref}")};
  return t;
}
const FieldTable& hf_key_group_fields() { return key_group_fields(); }

const HfKeyGroup* HfRules::find(const std::vector<HfKeyGroup>& groups, std::string_view key) {
  for (const auto& g : groups)
    if (std::find(g.keys.begin(), g.keys.end(), key) != g.keys.end()) return &g;
  return nullptr;
}

const HfModelTypeRules* HfRules::type(const std::string& model_type) const {
  auto it = model_types.find(model_type);
  return it == model_types.end() ? nullptr : &it->second;
}

HfRules decode_hf_rules(std::string_view defaults_text, std::string_view keys_text) {
  HfRules rules;
  Diagnostics& diags = rules.diags;
  std::set<std::string> understood;
  for (const auto& f : hf_config_fields()) understood.insert(f.key);

  if (auto j = json_io::parse(defaults_text, kHfDefaultsFile, diags)) {
    ObjectReader r(*j, hf_model_type_defaults_fields(), kHfDefaultsFile, "", diags);
    if (const Json* types = r.raw("model_types"); types && types->is_object()) {
      for (auto it = types->begin(); it != types->end(); ++it) {
        const std::string base = r.pointer("model_types") + "/" + json_pointer_token(it.key());
        ObjectReader t(it.value(), model_type_fields(), kHfDefaultsFile, base, diags);
        if (!t.valid()) continue;
        HfModelTypeRules m;
        m.file = t.str("file").value_or("");
        m.commit = t.str("commit").value_or("");
        m.text_config_model_type = t.str("text_config_model_type").value_or("");
        if (const Json* d = t.raw("defaults")) {
          for (auto kv = d->begin(); kv != d->end(); ++kv) {
            if (understood.count(kv.key()) == 0)
              diags.error(kHfDefaultsFile, t.pointer("defaults") + "/" + json_pointer_token(kv.key()),
                          fmt::format("'{}' is not a key the importer reads: a default for it would change nothing",
                                      kv.key()));
            else
              m.defaults.emplace_back(kv.key(), kv.value());
          }
        }
        if (auto p = t.object("attention_pattern"); p && p->valid()) {
          HfAttentionPattern ap;
          ap.rule = p->str("rule").value_or("");
          ap.period = p->integer("period").value_or(0);
          ap.period_key = p->str("period_key").value_or("");
          ap.gate = p->str("gate").value_or("");
          if (ap.rule == "every_nth_full" && ap.period == 0 && ap.period_key.empty())
            p->error("", "every_nth_full needs 'period' or 'period_key'");
          m.pattern = ap;
        }
        rules.model_types.emplace(it.key(), std::move(m));
      }
    }
  }
  if (auto j = json_io::parse(keys_text, kHfKeysFile, diags)) {
    ObjectReader r(*j, hf_config_keys_fields(), kHfKeysFile, "", diags);
    read_groups(r, "ignored", kHfKeysFile, diags, rules.ignored);
    read_groups(r, "not_counted", kHfKeysFile, diags, rules.not_counted);
    read_groups(r, "refused", kHfKeysFile, diags, rules.refused);
    read_groups(r, "refused_model_types", kHfKeysFile, diags, rules.refused_model_types, true);
    // A key has exactly one fate: read, ignored, not counted or refused (a refused key may have several groups, one
    // per set of harmless values, all of the same feature).
    std::map<std::string, std::string> fate;
    for (const auto& k : understood) fate[k] = "read by the importer";
    auto claim = [&](const std::vector<HfKeyGroup>& groups, const char* list) {
      for (std::size_t g = 0; g < groups.size(); ++g)
        for (const auto& k : groups[g].keys) {
          const std::string mine = std::string("on '") + list + "'";
          auto [it, fresh] = fate.emplace(k, mine);
          if (!fresh && it->second != mine)
            diags.error(kHfKeysFile, fmt::format("/{}/{}", list, g),
                        fmt::format("key '{}' is both {} and {}", k, it->second, mine));
        }
    };
    claim(rules.ignored, "ignored");
    claim(rules.not_counted, "not_counted");
    claim(rules.refused, "refused");
  }
  return rules;
}

const HfRules& hf_rules() {
  static const HfRules rules =
      decode_hf_rules(embedded::hf_model_type_defaults_json(), embedded::hf_config_keys_json());
  return rules;
}

}  // namespace gpuplan::wl_io
