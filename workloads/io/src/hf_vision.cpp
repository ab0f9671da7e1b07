// The vision tower of a multimodal Hugging Face config (issue #23 deliverable 2): SigLIP (Gemma 3), CLIP (LLaVA-1.5),
// Llama 4's encoder and Qwen2.5-VL's, each read into one ViT description (wl::VisionArch with its VitOptions) whose op
// list gives the tower's parameters, FLOPs per image and image tokens. Every key of the vision_config is read, on a
// reviewed list below, or refused; a tower of another kind stays "not counted" (data/hf/config_keys.json).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "hf_rules.hpp"

namespace gpuplan::wl_io {

using json_io::Json;

namespace {

/// vision_config keys that change no weight shape, matmul or token count (reviewed against transformers'
/// configuration_siglip.py, configuration_clip.py, configuration_llama4.py, configuration_qwen2_5_vl.py): the
/// activation, epsilons, initialisation, dropout in training (the tower is counted for inference and weights),
/// RoPE bases, the checkpoint dtype, video sampling.
const std::map<std::string, std::string>& vision_ignored() {
  static const std::map<std::string, std::string> m{
      {"model_type", "names the tower"},
      {"hidden_act", "the activation (element-wise)"},
      {"layer_norm_eps", "an epsilon"},
      {"norm_eps", "an epsilon"},
      {"initializer_range", "initialisation"},
      {"initializer_factor", "initialisation"},
      {"attention_dropout", "training dropout"},
      {"dropout", "training dropout"},
      {"projector_dropout", "training dropout"},
      {"torch_dtype", "the checkpoint's dtype"},
      {"dtype", "the checkpoint's dtype"},
      {"rope_theta", "the RoPE base (no weights)"},
      {"tokens_per_second", "Qwen2.5-VL: the temporal RoPE rate of video frames"},
      {"projection_dim", "CLIP: the contrastive projection, which a LLaVA tower does not have"},
      {"vision_feature_layer", "which layer's output the projector reads: every layer's weights are in the checkpoint"},
      {"architectures", "class names"},
      {"vocab_size", "LLaVA repeats the text vocabulary in its vision_config; the tower has none"},
      {"_name_or_path", "metadata"},
      {"transformers_version", "metadata"},
  };
  return m;
}

std::int64_t int_of(const Json& v) { return v.is_number_integer() ? v.get<std::int64_t>() : 0; }

}  // namespace

HfVisionRead read_hf_vision(const Json& config, const std::string& file, const std::string& pointer,
                            const HfRules& rules, Diagnostics& diags) {
  HfVisionRead out;
  if (!config.is_object() || !config.contains("vision_config") || !config["vision_config"].is_object()) return out;
  const Json& v = config["vision_config"];
  const std::string vptr = pointer + "/vision_config";
  const std::string outer = config.contains("model_type") && config["model_type"].is_string()
                                ? config["model_type"].get<std::string>()
                                : "";
  std::string kind = v.contains("model_type") && v["model_type"].is_string() ? v["model_type"].get<std::string>() : "";
  if (kind.empty() || kind == outer) kind = outer;  // Qwen2.5-VL names the tower after the model
  // Which kinds are read; any other stays on config_keys.json's not_counted list.
  const bool siglip = kind == "siglip_vision_model" && outer == "gemma3";
  const bool clip = kind == "clip_vision_model" && outer == "llava";
  const bool llama4 = kind == "llama4_vision_model";
  const bool qwen25 = kind == "qwen2_5_vl";
  if (!siglip && !clip && !llama4 && !qwen25) return out;

  // The language model's width (the projector's output); 0 when the text config leaves it to its defaults: the
  // importer sets it once the language model is read.
  std::int64_t text_hidden = 0;
  if (config.contains("text_config") && config["text_config"].is_object() &&
      config["text_config"].contains("hidden_size"))
    text_hidden = int_of(config["text_config"]["hidden_size"]);
  else if (config.contains("hidden_size"))
    text_hidden = int_of(config["hidden_size"]);

  // transformers' defaults of the tower's config class for the sizes a vision_config may leave out
  // (configuration_siglip.py SiglipVisionConfig, configuration_clip.py CLIPVisionConfig).
  static const std::map<std::string, std::map<std::string, std::int64_t>> kDefaults{
      {"siglip_vision_model",
       {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
        {"image_size", 224}, {"patch_size", 16}}},
      {"clip_vision_model",
       {{"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
        {"image_size", 224}, {"patch_size", 32}}}};
  std::vector<std::string> read_keys;
  bool bad = false;
  auto need = [&](const char* key) -> std::int64_t {
    read_keys.emplace_back(key);
    if (!v.contains(key) || v[key].is_null()) {
      const auto d = kDefaults.find(kind);
      if (d != kDefaults.end() && d->second.count(key) > 0) {
        const std::int64_t value = d->second.at(key);
        out.assumptions.push_back(fmt::format("vision_config.{} absent: {} (transformers' default for {})", key, value, kind));
        return value;
      }
    }
    if (!v.contains(key) || !v[key].is_number_integer() || v[key].get<std::int64_t>() < 1) {
      diags.error(file, vptr + "/" + key,
                  fmt::format("the {} vision tower needs '{}' as a positive integer, found {}", kind, key,
                              v.contains(key) ? json_io::describe_value(v[key]) : std::string("nothing")));
      bad = true;
      return 1;
    }
    return v[key].get<std::int64_t>();
  };
  auto opt_int = [&](const char* key, std::int64_t def) -> std::int64_t {
    read_keys.emplace_back(key);
    if (!v.contains(key) || v[key].is_null()) return def;
    if (!v[key].is_number_integer()) {
      diags.error(file, vptr + "/" + key, fmt::format("expected an integer, found {}", json_io::describe_value(v[key])));
      bad = true;
      return def;
    }
    return v[key].get<std::int64_t>();
  };

  wl::VisionTower t;
  t.kind = kind;
  wl::VisionArch& a = t.encoder;
  a.id = kind;
  a.family = wl::VisionFamily::vit;
  wl::VitOptions& o = a.vit;
  o.classifier = false;
  for (const char* k : {"num_channels", "in_chans", "in_channels"})
    if (opt_int(k, 3) != 3) {
      diags.error(file, vptr + "/" + k, "an image of other than 3 channels is not modelled");
      bad = true;
    }

  if (siglip || clip || llama4) {
    a.hidden = need("hidden_size");
    a.mlp = need("intermediate_size");
    a.heads = need("num_attention_heads");
    a.layers = need("num_hidden_layers");
    a.patch = need("patch_size");
    a.resolution = need("image_size");
    t.resolution_origin = fmt::format("image_size {} in vision_config", a.resolution);
  }
  if (siglip) {
    // transformers' SiglipVisionModel (Gemma 3: vision_use_head false): patch conv with bias, learned positions, no
    // class token, LayerNorm, fc1/fc2 GELU, post_layernorm; Gemma3MultiModalProjector: an average pool to
    // mm_tokens_per_image tokens, an RMSNorm (mm_soft_emb_norm) and a projection to the text width without bias.
    read_keys.emplace_back("vision_use_head");
    if (v.contains("vision_use_head") && v["vision_use_head"] != Json(false)) {
      diags.error(file, vptr + "/vision_use_head", "SigLIP's attention-pooling head is not modelled (Gemma 3 has none)");
      bad = true;
    }
    o.class_token = false;
    std::int64_t tokens = 256;
    if (config.contains("mm_tokens_per_image") && config["mm_tokens_per_image"].is_number_integer())
      tokens = config["mm_tokens_per_image"].get<std::int64_t>();
    else
      out.assumptions.push_back("mm_tokens_per_image absent: 256 (transformers' Gemma3Config default)");
    out.consumed.insert("mm_tokens_per_image");
    const std::int64_t side = a.patch > 0 ? a.resolution / a.patch : 0;
    const auto pooled = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(tokens))));
    if (pooled <= 0 || pooled * pooled != tokens || side % pooled != 0) {
      diags.error(file, pointer + "/mm_tokens_per_image",
                  fmt::format("{} tokens per image do not pool the {}×{} patches in equal squares", tokens, side, side));
      bad = true;
    } else {
      o.merge = (side / pooled) * (side / pooled);
      o.merge_pool = true;
    }
    o.merge_norm = o.merge_norm_rms = true;
    o.projector = {text_hidden};
    o.projector_bias = false;
  } else if (clip) {
    // transformers' CLIPVisionModel: patch conv without bias, a class token and learned positions, pre_layrnorm,
    // LayerNorm, fc1/fc2 (quick GELU), post_layernorm; LlavaMultiModalProjector: linear_1, GELU, linear_2 (biases
    // unless multimodal_projector_bias is false). vision_feature_select_strategy "default" drops the class token.
    o.patch_bias = false;
    o.pre_norm = true;
    const Json* strategy = config.contains("vision_feature_select_strategy")
                               ? &config["vision_feature_select_strategy"] : nullptr;
    if (strategy && *strategy != Json("default")) {
      diags.error(file, pointer + "/vision_feature_select_strategy",
                  fmt::format("{}: only \"default\" (the patches, without the class token) is modelled",
                              json_io::describe_value(*strategy)));
      bad = true;
    }
    o.projector = {text_hidden, text_hidden};
    o.projector_bias = !(config.contains("multimodal_projector_bias") &&
                         config["multimodal_projector_bias"] == Json(false));
    for (const char* k : {"vision_feature_select_strategy", "multimodal_projector_bias", "projector_hidden_act",
                          "vision_feature_layer", "image_seq_length"})
      out.consumed.insert(k);
  } else if (llama4) {
    // transformers' Llama4VisionModel: an unfold + linear patch embedding without bias, a class token and learned
    // positions, layernorm_pre / layernorm_post, blocks with biased q, k, v, o and fc1/fc2 GELU; the vision adapter
    // drops the class token, pixel-shuffles (ratio r: 1/r² patches become one token of 1/r² × the width) and runs
    // Llama4VisionMLP2 (fc1 to projector_input_dim, fc2 to projector_output_dim, no biases); Llama4MultiModalProjector
    // maps vision_output_dim to the text width (multi_modal_projector_bias).
    o.patch_bias = false;
    o.pre_norm = true;
    read_keys.emplace_back("pixel_shuffle_ratio");
    double ratio = 0.5;
    if (v.contains("pixel_shuffle_ratio") && v["pixel_shuffle_ratio"].is_number()) ratio = v["pixel_shuffle_ratio"].get<double>();
    const double inv = ratio > 0.0 ? 1.0 / (ratio * ratio) : 0.0;
    if (!(inv >= 1.0) || std::abs(inv - std::round(inv)) > 1e-9) {
      diags.error(file, vptr + "/pixel_shuffle_ratio", "expected a ratio r with 1/r² a whole number of patches");
      bad = true;
    } else {
      o.merge = std::llround(inv);
    }
    const std::int64_t in_dim = opt_int("projector_input_dim", 4096), out_dim = opt_int("projector_output_dim", 4096);
    const std::int64_t vis_out = opt_int("vision_output_dim", out_dim);
    if (vis_out != out_dim) {
      diags.error(file, vptr + "/vision_output_dim",
                  fmt::format("{} differs from projector_output_dim {}: the adapter's output is the projector's input",
                              vis_out, out_dim));
      bad = true;
    }
    o.projector = {in_dim, out_dim, text_hidden};
    read_keys.emplace_back("multi_modal_projector_bias");
    o.projector_bias = v.contains("multi_modal_projector_bias") && v["multi_modal_projector_bias"] == Json(true);
    read_keys.emplace_back("vision_feature_select_strategy");
    if (v.contains("vision_feature_select_strategy") && v["vision_feature_select_strategy"] != Json("default")) {
      diags.error(file, vptr + "/vision_feature_select_strategy", "only \"default\" is modelled");
      bad = true;
    }
  } else if (qwen25) {
    // transformers' Qwen2_5_VisionTransformerPretrainedModel: a Conv3d patch embedding without bias over
    // temporal_patch_size frames (a still image is repeated), 2-D RoPE (no position weights), RMSNorm, biased qkv
    // and proj, a gated SiLU MLP, windowed attention except on fullatt_block_indexes; the merger (ln_q RMSNorm, the
    // spatial_merge_size² neighbours concatenated, Linear + GELU + Linear with biases) projects to out_hidden_size.
    a.hidden = need("hidden_size");
    a.mlp = need("intermediate_size");
    a.heads = need("num_heads");
    a.layers = need("depth");
    a.patch = need("patch_size");
    read_keys.emplace_back("spatial_patch_size");
    if (v.contains("spatial_patch_size") && v["spatial_patch_size"] != v["patch_size"]) {
      diags.error(file, vptr + "/spatial_patch_size", "differs from patch_size");
      bad = true;
    }
    const std::int64_t temporal = opt_int("temporal_patch_size", 2), merge = opt_int("spatial_merge_size", 2);
    const std::int64_t window_px = opt_int("window_size", 112);
    a.in_channels = 3 * temporal;
    o.class_token = false;
    o.positions = false;
    o.patch_bias = false;
    o.final_norm = false;
    o.gated_mlp = true;
    o.rms_norm = true;
    const std::int64_t win = a.patch > 0 ? window_px / a.patch : 0;
    o.window = win * win;
    read_keys.emplace_back("fullatt_block_indexes");
    if (v.contains("fullatt_block_indexes") && v["fullatt_block_indexes"].is_array())
      for (const auto& e : v["fullatt_block_indexes"]) o.full_layers.push_back(int_of(e));
    o.merge = merge * merge;
    o.merge_norm = o.merge_norm_rms = true;
    const std::int64_t out_hidden = opt_int("out_hidden_size", text_hidden);
    o.projector = {a.hidden * o.merge, out_hidden};
    // Qwen2.5-VL reads images at their own size (min_pixels..max_pixels of the processor, not in config.json).
    a.resolution = 16 * merge * a.patch;
    t.resolution_origin = fmt::format(
        "assumed {0}×{0} px (Qwen2.5-VL takes images at their own size, in multiples of {1} px; the processor's "
        "pixel limits are not in config.json)",
        a.resolution, merge * a.patch);
    out.assumptions.push_back("vision tower: " + t.resolution_origin);
  }

  // Every other key of the vision_config: reviewed as harmless here or in config_keys.json's ignored lists.
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (std::find(read_keys.begin(), read_keys.end(), k) != read_keys.end()) continue;
    if (vision_ignored().count(k) > 0 || HfRules::find(rules.ignored, k) != nullptr) continue;
    diags.error(file, vptr + "/" + json_pointer_token(k),
                fmt::format("unknown key '{}' = {} in the {} vision tower: gpuplan cannot tell whether it changes the "
                            "tower's size or cost, so it stops rather than guess (#23)",
                            k, json_io::describe_value(it.value()), kind));
    bad = true;
  }
  if (!bad) {
    wl::VisionArch probe = a;  // a projector width still to come from the language model: any positive width
    for (auto& w : probe.vit.projector) w = w > 0 ? w : 1;
    const std::string why = wl::vision_input_problem(probe, probe.resolution);
    if (!why.empty()) {
      diags.error(file, vptr, why);
      bad = true;
    }
  }
  out.consumed.insert("vision_config");
  if (!bad) out.tower = std::move(t);
  out.failed = bad;
  return out;
}

}  // namespace gpuplan::wl_io
