#include "megatron_args.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "gpuplan/app/workspace.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/model_io.hpp"

// Megatron-LM's argument table (megatron_arg_names.inc) and, once the model is known, the shape checks, the
// model-dependent keys and the batch rule (apply_megatron, check_megatron_batch); the overlay of --megatron-args and
// Megatron spellings on gpuplan's own flags (megatron_overlay). The script reader is megatron_script.cpp, the flag
// mapping megatron_map.cpp.
namespace gpuplan::cli {

namespace {
#include "megatron_arg_names.inc"

/// Flags that launch scripts pass but Megatron-LM's parser at the pinned commit (megatron_arg_names.inc) does not
/// have, each with a public Megatron-LM commit whose parser has it (the group names that commit and the arguments.py
/// function). Kept beside the generated list, never in it: regenerating the names does not drop them, and a name
/// that the pinned parser gains is found there first. Sorted by name.
inline constexpr MegatronFlagName kMegatronLegacyFlagNames[] = {
    // TransformerConfig.fp8_dot_product_attention exists at the pinned commit (megatron/core/transformer/
    // transformer_config.py), but arguments.py lists it under "no CLI argument exists for these"; the switch is
    // _add_transformer_engine_args' in NVIDIA/Megatron-LM pull request #1551 (commit b23f6c22a227, 2025-03-14),
    // and Megatron launch scripts with FP8 attention pass it.
    {"--fp8-dot-product-attention", 0,
     "legacy: NVIDIA/Megatron-LM b23f6c22a227 (pull request #1551), _add_transformer_engine_args"},
};
}  // namespace

using detail::kNotModelled;

const std::vector<MegatronFlagName>& megatron_flag_names() {
  static const std::vector<MegatronFlagName> names(std::begin(kMegatronFlagNames), std::end(kMegatronFlagNames));
  return names;
}

std::string_view megatron_commit() { return kMegatronCommit; }

const std::vector<MegatronFlagName>& megatron_legacy_flag_names() {
  static const std::vector<MegatronFlagName> names(std::begin(kMegatronLegacyFlagNames),
                                                   std::end(kMegatronLegacyFlagNames));
  return names;
}

namespace {
const MegatronFlagName* find_in(const std::vector<MegatronFlagName>& v, std::string_view name) {
  auto it = std::lower_bound(v.begin(), v.end(), name,
                             [](const MegatronFlagName& e, std::string_view n) {
                               return std::string_view(e.name) < n;
                             });
  return it != v.end() && it->name == name ? &*it : nullptr;
}
}  // namespace

const MegatronFlagName* find_megatron_flag(std::string_view name) {
  if (const auto* e = find_in(megatron_flag_names(), name)) return e;
  return find_in(megatron_legacy_flag_names(), name);
}

// ---------------------------------------------------------------------------------------------------------------
// With the model: shape checks, model-dependent keys, conflicts

namespace {
std::string position_name(wl::PositionKind p) {
  switch (p) {
    case wl::PositionKind::rope: return "rope";
    case wl::PositionKind::learned: return "learned_absolute";
    case wl::PositionKind::alibi: return "alibi";
    case wl::PositionKind::none: return "none";
  }
  return "?";
}
}  // namespace

bool apply_megatron(const MegatronMapping& m, const wl::TransformerArch& arch, nlohmann::json& j,
                    std::map<std::string, std::string>& origin, Diagnostics& diags) {
  const bool before = diags.has_errors();
  auto mismatch = [&](const char* key, const std::string& megatron_value, const std::string& model_value) {
    const auto it = m.shape.flag.find(key);
    diags.error("", it != m.shape.flag.end() ? it->second : key,
                fmt::format("the Megatron-LM arguments say {} = {}, the model '{}' has {}", key, megatron_value,
                            arch.id, model_value));
  };
  const auto& s = m.shape;
  auto eq = [&](const char* key, const std::optional<std::int64_t>& want, std::int64_t have) {
    if (want && *want != have) mismatch(key, std::to_string(*want), std::to_string(have));
  };
  auto eqb = [&](const char* key, const std::optional<bool>& want, bool have, const char* yes, const char* no) {
    if (want && *want != have) mismatch(key, *want ? yes : no, have ? yes : no);
  };
  eq("layers", s.layers, arch.layers);
  eq("hidden", s.hidden, arch.hidden);
  eq("heads", s.heads, arch.heads);
  if (!arch.mla) {
    eq("kv_heads", s.kv_heads, arch.kv_heads);
    eq("head_dim", s.head_dim, arch.head_dim);
  }
  if (s.ffn) {
    // The dense FFN width; an MoE model without dense layers has none to compare.
    const bool has_dense = !arch.moe || arch.moe_layer_count() < arch.layers;
    if (has_dense) eq("ffn", s.ffn, arch.intermediate);
  }
  eq("vocab", s.vocab, arch.vocab);
  if (s.max_position && arch.position == wl::PositionKind::learned)
    eq("max_position", s.max_position, arch.max_position);
  const std::int64_t experts = arch.moe ? arch.moe->num_experts : 0;
  eq("experts", s.experts, experts);
  if (arch.moe) {
    eq("topk", s.topk, arch.moe->experts_per_token);
    eq("moe_ffn", s.moe_ffn, arch.moe->expert_intermediate);
    eq("shared_ffn", s.shared_ffn, arch.moe->shared_experts * arch.moe->shared_intermediate);
  }
  eqb("gated_mlp", s.gated_mlp, arch.mlp == wl::MlpKind::gated, "a gated (SwiGLU) MLP", "a two-matrix MLP");
  eqb("tied_embeddings", s.tied_embeddings, arch.tied_embeddings, "tied embeddings", "untied embeddings");
  eqb("rmsnorm", s.rmsnorm, arch.norm == wl::NormKind::rmsnorm, "RMSNorm", "LayerNorm");
  eqb("linear_bias", s.linear_bias, arch.o_bias || arch.mlp_bias, "biases on the linear layers",
      "no biases on the output and MLP projections");
  eqb("qkv_bias", s.qkv_bias, arch.qkv_bias, "a QKV bias", "no QKV bias");
  eqb("mla", s.mla, arch.mla.has_value(), "multi-latent attention", "no multi-latent attention");
  if (arch.mla) {
    eq("q_lora_rank", s.q_lora_rank, arch.mla->q_lora_rank);
    eq("kv_lora_rank", s.kv_lora_rank, arch.mla->kv_lora_rank);
    eq("qk_head_dim", s.qk_head_dim, arch.mla->qk_nope_head_dim);
    eq("qk_pos_head_dim", s.qk_pos_head_dim, arch.mla->qk_rope_head_dim);
    eq("v_head_dim", s.v_head_dim, arch.mla->v_head_dim);
  }
  if (s.position && *s.position != arch.position)
    mismatch("position", position_name(*s.position), position_name(arch.position));
  if (diags.has_errors() && !before) return false;

  nlohmann::json keys = m.keys;
  std::map<std::string, std::string> korigin = m.origin;
  // The layout sizes the flags set, else gpuplan's flags or scenario, else 1.
  auto size = [&](const char* key) -> long long {
    if (keys.contains(key)) return keys[key].get<long long>();
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<long long>() : 1;
  };
  const long long pp = size("pp");
  if (m.layers_per_virtual_stage) {
    // arguments.py, validate_args: layers per stage = layers (+1 with the embedding, +1 with the loss accounted) / PP;
    // virtual stages = that / layers per virtual stage.
    const std::int64_t layers = arch.layers + (keys.contains("embedding_in_pipeline_split") ? 1 : 0) +
                                (keys.contains("loss_in_pipeline_split") ? 1 : 0);
    const std::string flag = fmt::format("--num-layers-per-virtual-pipeline-stage {}", *m.layers_per_virtual_stage);
    if (layers % pp != 0)
      diags.error("", flag, fmt::format("the {} layers are not divisible by PP {} (Megatron-LM: 'number of layers of "
                                        "the model must be divisible pipeline model parallel size')",
                                        layers, pp));
    else if ((layers / pp) % *m.layers_per_virtual_stage != 0)
      diags.error("", flag, fmt::format("{} layers per stage are not divisible by {} (Megatron-LM: 'number of layers "
                                        "per pipeline stage must be divisible number of layers per virtual pipeline "
                                        "stage')",
                                        layers / pp, *m.layers_per_virtual_stage));
    else {
      keys["virtual_stages"] = (layers / pp) / *m.layers_per_virtual_stage;
      korigin["virtual_stages"] = flag;
    }
  }
  // --num-distributed-optimizer-instances N: the hybrid shard group dp·cp / N (Mapper::optimizer_instances).
  if (m.optimizer_instances) {
    const long long n = *m.optimizer_instances, tp = size("tp"), cp = size("cp");
    auto at_flag = [&](std::string msg) {
      diags.add(Diagnostic{Severity::error, m.optimizer_instances_source, "--num-distributed-optimizer-instances",
                           m.optimizer_instances_line, 0,
                           fmt::format("'{}': {}", m.optimizer_instances_flag, std::move(msg))});
    };
    std::optional<long long> gpus = m.launcher_gpus;
    if (j.contains("gpus") && j["gpus"].is_number_integer()) gpus = j["gpus"].get<long long>();
    if (m.typed_gpus) gpus = m.typed_gpus;
    // Megatron's expert tensor parallel size defaults to TP (arguments.py).
    const long long expert_tp =
        keys.contains("etp") || (j.contains("etp") && j["etp"].is_number_integer()) ? size("etp") : tp;
    std::optional<long long> dp;
    if (keys.contains("dp") || (j.contains("dp") && j["dp"].is_number_integer())) dp = size("dp");
    else if (gpus && *gpus > 0 && *gpus % (tp * pp * cp) == 0) dp = *gpus / (tp * pp * cp);
    if (!dp) {
      if (!gpus) at_flag("the instances slice the data-parallel ranks: give the GPU count (--gpus) or DP (--dp)");
      // else: the GPU count does not divide by TP × PP × CP, which the layout check reports
    } else if ((*dp * cp) % n != 0) {
      at_flag(fmt::format("DP × CP = {} is not divisible by {} instances (Megatron-LM, parallel_state.py: \"Data "
                          "parallel size should be divisible by partial DistOpt shard factor\")",
                          *dp * cp, n));
    } else if (const long long stage = tp * cp * *dp, shard = expert_tp * size("ep");
               shard > 0 && stage % shard == 0 && (stage / shard) % n != 0) {
      // The experts' data-parallel group (tp·cp·dp / (etp·ep), parallel_state.py) is cut into as many instances; a
      // grid that etp·ep does not divide is the layout check's to report.
      at_flag(fmt::format("the expert-data-parallel size TP × CP × DP / (expert TP × EP) = {} / {} = {} is not "
                          "divisible by {} instances (Megatron-LM, parallel_state.py: \"Expert data parallel size "
                          "should be divisible by partial DistOpt shard factor\")",
                          stage, shard, stage / shard, n));
    } else {
      keys["shard_group"] = *dp * cp / n;
      korigin["shard_group"] =
          fmt::format("{} (DP × CP / N = {} / {})", m.optimizer_instances_flag, *dp * cp, n);
    }
  }
  // Conflicts with gpuplan's own spellings (flags or the scenario file).
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string& key = it.key();
    if (!j.contains(key)) continue;
    const std::string where = origin.count(key) ? origin.at(key) : "/" + key;
    if (m.defaulted.count(key)) {
      if (j[key] != *it)
        diags.note("", where,
                   fmt::format("{} = {} overrides what the Megatron-LM command line implies ({} = {}: {})", key,
                               j[key].dump(), key, it->dump(), m.defaulted.at(key)));
      continue;
    }
    bool same = j[key] == *it;
    if (!same && j[key].is_number() && it->is_number()) same = j[key].get<double>() == it->get<double>();
    if (!same)
      diags.error("", korigin.at(key),
                  fmt::format("sets {} = {}, but {} sets it to {}: give the knob once", key, it->dump(), where,
                              j[key].dump()));
  }
  if (diags.has_errors() && !before) return false;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    if (j.contains(it.key()) && m.defaulted.count(it.key())) continue;
    j[it.key()] = *it;
    origin[it.key()] = korigin.at(it.key());
  }
  if (m.launcher_gpus && !j.contains("gpus")) {
    j["gpus"] = *m.launcher_gpus;
    origin["gpus"] = m.launcher_text;
    diags.note("", "--megatron-args",
               fmt::format("{} GPUs from the launcher ({}); --gpus overrides", *m.launcher_gpus, m.launcher_text));
  }
  std::string mapped;
  for (const auto& [key, from] : korigin) mapped += fmt::format("{}{} = {} ({})", mapped.empty() ? "" : "; ", key,
                                                                keys[key].dump(), from);
  if (!mapped.empty()) diags.note("", "Megatron-LM", "mapped: " + mapped);
  auto join = [](const std::vector<std::string>& v) {
    std::string o;
    for (const auto& x : v) o += (o.empty() ? "" : ", ") + x;
    return o;
  };
  if (!m.ignored.empty())
    diags.note("", "Megatron-LM",
               "ignored (they do not change the step time or memory gpuplan models): " + join(m.ignored));
  if (!m.assumed.empty()) diags.note("", "Megatron-LM", "already gpuplan's assumption: " + join(m.assumed));
  for (const auto& n : m.notes) diags.note("", "Megatron-LM", n);
  return true;
}

bool check_megatron_batch(const MegatronMapping& m, const wl::TrainingPlan& plan, Diagnostics& diags) {
  if (!m.global_batch_given) return true;
  const long long mb = plan.micro_batch, dp = plan.par.dp, gb = plan.global_batch;
  if (mb > 0 && dp > 0 && gb % (mb * dp) == 0) return true;
  diags.error("", "--global-batch-size",
              fmt::format("global batch size ({}) is not divisible by micro batch size ({}) times data parallel size "
                          "({}): Megatron-LM refuses it (megatron/core/num_microbatches_calculator.py)",
                          gb, mb, dp));
  return false;
}

}  // namespace gpuplan::cli

namespace gpuplan::cli {

std::optional<MegatronMapping> megatron_overlay(const std::string& data_dir, const std::optional<std::string>& file,
                                                const std::vector<std::string>& typed, nlohmann::json& j,
                                                std::map<std::string, std::string>& origin, Diagnostics& diags,
                                                std::optional<long long> typed_gpus) {
  MegatronArgs all;
  if (file) {
    const std::string source = *file == "-" ? "<stdin>" : *file;
    auto text = json_io::read_text_file(*file == "-" ? "/dev/stdin" : *file, diags);
    if (!text) return std::nullopt;
    auto cmd = read_megatron_script(*text, source, diags);
    if (!cmd) return std::nullopt;
    auto args = parse_megatron_words(cmd->words, true, source, diags);
    if (!args) return std::nullopt;
    all = std::move(*args);
    all.launcher_gpus = cmd->launcher_gpus;
    all.launcher_text = cmd->launcher_text;
    all.environment = cmd->environment;
  }
  if (!typed.empty()) {
    std::vector<ShellWord> words;
    for (const auto& t : typed) words.push_back(ShellWord{t, {}, 0});
    auto args = parse_megatron_words(words, false, "", diags);
    if (!args) return std::nullopt;
    all.flags.insert(all.flags.end(), args->flags.begin(), args->flags.end());
    if (!file) all.source.clear();
    all.whole_command = file.has_value();
  }
  auto m = map_megatron(all, diags);
  if (!m) return std::nullopt;
  m->typed_gpus = typed_gpus;
  const auto model_where = origin.count("model") ? origin.at("model") : std::string("--model");
  if (!j.contains("model") || !j["model"].is_string()) {
    diags.error("", "--model",
                "the Megatron-LM arguments need -m MODEL (a library id or a config.json): gpuplan does not build a "
                "model from --num-layers, --hidden-size, ...; it checks them against the model");
    return std::nullopt;
  }
  auto ws = app::load_workspace(data_dir, {.hardware = false, .models = true});
  if (!ws.ok()) {
    diags.append(ws.diagnostics());
    return std::nullopt;
  }
  auto entry = wl_io::resolve_model(ws->library, j["model"].get<std::string>());
  if (!entry.ok()) {
    for (auto d : entry.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = model_where;
      diags.add(d);
    }
    return std::nullopt;
  }
  if (!apply_megatron(*m, entry->arch, j, origin, diags)) return std::nullopt;
  return m;
}

}  // namespace gpuplan::cli
