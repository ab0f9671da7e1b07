// `gpuplan model list|show`
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/vision_tower.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

struct ModelOptions {
  std::string name;
  std::int64_t seq = 4096;
  std::string kv_dtype = "bf16";
};

// Table cells keep full precision (JSON/CSV); `show` sections print 4 significant digits.
std::string billions(std::int64_t n) { return fmt::format("{:.10g}", static_cast<double>(n) / 1e9); }
std::string billions4(std::int64_t n) { return u::format_number(static_cast<double>(n) / 1e9, 4); }

std::string attention_kind(const wl::TransformerArch& a) {
  if (a.mla) return "MLA";
  if (a.kv_heads == a.heads) return "MHA";
  if (a.kv_heads == 1) return "MQA";
  return "GQA";
}

/// The layer kinds of the model, e.g. "36 × chunked attention (8192) + MoE".
struct LayerKindRow {
  std::string attention;
  std::int64_t span = 0;  ///< tokens of a local layer's window or chunk; 0: global
  std::string ffn;
  std::int64_t layers = 0;
  [[nodiscard]] std::string text() const {
    return fmt::format("{} × {}{} + {}", layers, attention, span > 0 ? fmt::format(" ({})", span) : "", ffn);
  }
};
std::vector<LayerKindRow> layer_kinds(const wl::TransformerArch& a) {
  std::vector<LayerKindRow> rows;
  model::for_each_layer_kind(a, [&](model::LayerKind k, std::int64_t n) {
    rows.push_back({model::attention_span_name(a, k), k.local ? a.local_span() : 0, model::ffn_name(a, k), n});
  });
  return rows;
}

int list(const GlobalOptions& g) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = false, .models = true});
  if (!ws.ok()) return report(ws.diagnostics());
  const wl_io::ModelLibrary& lib = ws->library;
  Table t;
  t.columns = {{"id", "id"},
               {"name", "name"},
               {"total_params_B", "params B", true},
               {"active_params_B", "active B", true},
               {"layers", "layers", true},
               {"hidden", "hidden", true},
               {"attention", "attention"},
               {"heads", "heads q/kv", false},
               {"experts", "experts", false},
               {"max_position", "context", true}};
  for (const auto& m : lib.models) {
    const auto& a = m.arch;
    const auto p = model::parameter_counts(a, Explain::off);
    t.rows.push_back({a.id, a.name, billions(p.total), a.moe ? billions(p.active) : "", std::to_string(a.layers),
                      std::to_string(a.hidden), attention_kind(a), fmt::format("{}/{}", a.heads, a.kv_heads),
                      a.moe ? fmt::format("{} top-{}", a.moe->num_experts, a.moe->experts_per_token) : "",
                      a.max_position ? std::to_string(a.max_position) : ""});
  }
  out(t.render(parse_format(g.format)));
  return report(ws.diagnostics());
}

int show(const GlobalOptions& g, const ModelOptions& o) {
  // A vision model (data/models/vision, or an ONNX file) has its own view.
  if (auto rc = show_vision_model(g, o.name)) return *rc;
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  // A bad --data-dir is an error; no data directory at all still allows a path to a config.json.
  if (!dir && !g.data_dir.empty()) return report(diags);
  Result<app::Workspace> ws = app::Workspace{};
  if (dir) ws = app::load_workspace(*dir, {.hardware = false, .models = true});
  if (!ws.ok()) return report(ws.diagnostics());
  const wl_io::ModelLibrary& lib = ws->library;
  auto m = wl_io::resolve_model(lib, o.name);
  if (!m.ok()) {
    if (!dir) diags.append(m.diagnostics());
    return report(dir ? m.diagnostics() : diags);
  }
  const auto prec = hw::parse_precision(o.kv_dtype);
  const auto& a = m->arch;
  const auto p = model::parameter_counts(a, g.explain ? Explain::on : Explain::off);
  const auto f = model::flops_per_token(a, o.seq, g.explain ? Explain::on : Explain::off);
  const double kv_b = hw::bytes_per_element(*prec);
  const auto kv = model::kv_cache_size(a, o.seq, kv_b, g.explain ? Explain::on : Explain::off);
  const Format fmt_ = parse_format(g.format);

  if (fmt_ == Format::json || fmt_ == Format::csv) {
    nlohmann::ordered_json j;
    j["id"] = a.id;
    j["name"] = a.name;
    j["file"] = m->file;
    j["architecture"] = {{"model_type", a.model_type}, {"layers", a.layers}, {"hidden", a.hidden},
                         {"heads", a.heads}, {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim},
                         {"intermediate", a.intermediate}, {"vocab", a.vocab}, {"attention", attention_kind(a)},
                         {"tied_embeddings", a.tied_embeddings}, {"max_position", a.max_position}};
    if (a.moe)
      j["architecture"]["moe"] = {{"experts", a.moe->num_experts}, {"experts_per_token", a.moe->experts_per_token},
                                  {"expert_intermediate", a.moe->expert_intermediate},
                                  {"shared_experts", a.moe->shared_experts}, {"moe_layers", a.moe_layer_count()}};
    if (a.sliding_layer_count() > 0)
      j["architecture"]["sliding_window"] = {{"window", a.sliding_window}, {"layers", a.sliding_layer_count()}};
    if (a.chunked_layer_count() > 0)
      j["architecture"]["chunked_attention"] = {{"chunk", a.attention_chunk}, {"layers", a.chunked_layer_count()}};
    if (a.mamba)
      j["architecture"]["mamba2"] = {{"heads", a.mamba->heads}, {"head_dim", a.mamba->head_dim},
                                     {"state", a.mamba->state}, {"groups", a.mamba->groups},
                                     {"conv_kernel", a.mamba->conv_kernel}, {"chunk", a.mamba->chunk},
                                     {"layers", a.mamba_layer_count()}};
    if (a.gdn)
      j["architecture"]["gated_deltanet"] = {{"key_heads", a.gdn->key_heads}, {"value_heads", a.gdn->value_heads},
                                             {"key_dim", a.gdn->key_dim}, {"value_dim", a.gdn->value_dim},
                                             {"conv_kernel", a.gdn->conv_kernel}, {"chunk", a.gdn->chunk},
                                             {"layers", a.gdn_layer_count()}};
    if (a.dsa)
      j["architecture"]["sparse_attention"] = {{"index_heads", a.dsa->index_heads},
                                               {"index_head_dim", a.dsa->index_head_dim}, {"topk", a.dsa->topk},
                                               {"indexer_layers", a.indexer_layer_count()}};
    if (a.attention_sinks) j["architecture"]["attention_sinks"] = a.heads;
    if (a.attention_output_gate) j["architecture"]["attention_output_gate"] = true;
    j["architecture"]["layer_kinds"] = nlohmann::ordered_json::array();
    for (const auto& k : layer_kinds(a))
      j["architecture"]["layer_kinds"].push_back(
          {{"attention", k.attention}, {"span", k.span}, {"ffn", k.ffn}, {"layers", k.layers}});
    j["params"] = {{"total", p.total}, {"active", p.active}, {"embedding", p.embedding},
                   {"position_embedding", p.position_embedding}, {"attention", p.attention},
                   {"dense_mlp", p.dense_mlp}, {"router", p.router}, {"routed_experts", p.routed_experts},
                   {"shared_experts", p.shared_experts}, {"norms", p.norms}, {"lm_head", p.lm_head},
                   {"mtp_excluded", p.mtp}};
    if (p.ssm > 0) j["params"]["ssm"] = p.ssm;
    if (a.vision) {
      const auto vt = model::vision_tower_counts(*a.vision, Explain::off);
      j["params"]["vision"] = p.vision;
      j["vision_tower"] = {{"kind", a.vision->kind},
                           {"parameters", vt.parameters},
                           {"projector_parameters", vt.projector_parameters},
                           {"image_px", a.vision->encoder.resolution},
                           {"image_origin", a.vision->resolution_origin},
                           {"patches", vt.patches},
                           {"tokens_per_image", vt.tokens_per_image},
                           {"flops_per_image", vt.flops_per_image.raw()}};
    }
    if (m->published) {
      j["published"] = {{"total_params_B", m->published->total_params_B}, {"source", m->published->source}};
      if (m->published->active_params_B) j["published"]["active_params_B"] = *m->published->active_params_B;
    }
    j["flops_per_token"] = {{"context", o.seq}, {"forward_FLOP", f.forward.raw()},
                            {"forward_matmul_FLOP", f.matmul_forward.raw()},
                            {"forward_attention_FLOP", f.attention_forward.raw()}, {"training_FLOP", f.training.raw()}};
    j["kv_cache"] = {{"dtype", o.kv_dtype}, {"kv_bytes_per_token", kv.per_token_full.raw()},
                     {"kv_bytes_per_sequence", kv.per_sequence.raw()}, {"sequence_tokens", o.seq}};
    if (f.ssm_forward.raw() > 0) j["flops_per_token"]["forward_ssm_scan_FLOP"] = f.ssm_forward.raw();
    if (f.indexer_forward.raw() > 0) j["flops_per_token"]["forward_indexer_FLOP"] = f.indexer_forward.raw();
    if (kv.index_per_token.raw() > 0) j["kv_cache"]["indexer_key_bytes_per_token"] = kv.index_per_token.raw();
    if (kv.state_per_sequence.raw() > 0) j["kv_cache"]["state_bytes_per_sequence"] = kv.state_per_sequence.raw();
    j["assumptions"] = a.assumptions;
    j["ignored_config_keys"] = nlohmann::ordered_json::array();
    for (const auto& n : m->ignored_keys)
      if (n.counted) j["ignored_config_keys"].push_back({{"keys", n.keys}, {"why", n.why}});
    if (g.explain)
      j["derivations"] = {derivation_json(p.derivation), derivation_json(f.derivation), derivation_json(kv.derivation)};
    if (fmt_ == Format::csv) {
      Table t;
      t.columns = {{"id", "id"}, {"total_params", "total", true}, {"active_params", "active", true},
                   {"forward_FLOP_per_token", "fwd FLOP/token", true}, {"training_FLOP_per_token", "train FLOP/token", true},
                   {"kv_bytes_per_token", "KV B/token", true}, {"context", "context", true}};
      t.rows.push_back({a.id, std::to_string(p.total), std::to_string(p.active), fmt::format("{:.6g}", f.forward.raw()),
                        fmt::format("{:.6g}", f.training.raw()), fmt::format("{:.6g}", kv.per_token_full.raw()),
                        std::to_string(o.seq)});
      out(t.render(Format::csv));
    } else {
      out(json_text(j));
    }
    return report(m.diagnostics());
  }

  std::vector<Section> s;
  Section arch{a.name.empty() ? a.id : a.name, {}};
  arch.rows = {{"id", a.id}, {"file", m->file}, {"model type", a.model_type},
               {"layers × hidden", fmt::format("{} × {}", a.layers, a.hidden)},
               {"attention", fmt::format("{}: {} query heads, {} KV heads, head dim {}", attention_kind(a), a.heads,
                                         a.kv_heads, a.head_dim)},
               {"FFN", fmt::format("{} {}", a.mlp == wl::MlpKind::gated ? "gated (SwiGLU-style)" : "plain", a.intermediate)},
               {"vocabulary", fmt::format("{}{}", a.vocab, a.tied_embeddings ? " (tied LM head)" : "")}};
  if (a.moe)
    arch.rows.emplace_back("MoE", fmt::format("{} of {} layers, {} experts top-{}, expert width {}, {} shared",
                                              a.moe_layer_count(), a.layers, a.moe->num_experts,
                                              a.moe->experts_per_token, a.moe->expert_intermediate, a.moe->shared_experts));
  if (a.mla)
    arch.rows.emplace_back("MLA", fmt::format("q rank {}, kv rank {}, rope dim {}, nope dim {}, v dim {}",
                                              a.mla->q_lora_rank, a.mla->kv_lora_rank, a.mla->qk_rope_head_dim,
                                              a.mla->qk_nope_head_dim, a.mla->v_head_dim));
  if (a.sliding_layer_count() > 0)
    arch.rows.emplace_back("sliding window", fmt::format("{} tokens on {} of {} layers", a.sliding_window,
                                                         a.sliding_layer_count(), a.layers));
  if (a.chunked_layer_count() > 0)
    arch.rows.emplace_back("chunked attention", fmt::format("{}-token chunks on {} of {} layers", a.attention_chunk,
                                                            a.chunked_layer_count(), a.layers));
  if (a.mamba)
    arch.rows.emplace_back("Mamba-2", fmt::format("{} of {} layers: {} heads × head dim {}, state {}, {} groups, conv "
                                                  "{}, chunk {}",
                                                  a.mamba_layer_count(), a.layers, a.mamba->heads, a.mamba->head_dim,
                                                  a.mamba->state, a.mamba->groups, a.mamba->conv_kernel,
                                                  a.mamba->chunk));
  if (a.gdn)
    arch.rows.emplace_back("gated DeltaNet", fmt::format("{} of {} layers: {} key heads × {}, {} value heads × {}, conv "
                                                         "{}, chunk {} (no KV: a state per sequence)",
                                                         a.gdn_layer_count(), a.layers, a.gdn->key_heads,
                                                         a.gdn->key_dim, a.gdn->value_heads, a.gdn->value_dim,
                                                         a.gdn->conv_kernel, a.gdn->chunk));
  if (a.attention_output_gate)
    arch.rows.emplace_back("attention output gate", "sigmoid gate per query head, fused into q_proj (h × 2·n_q·d)");
  if (a.dsa)
    arch.rows.emplace_back("sparse attention (DSA)",
                           fmt::format("lightning indexer {} heads × {} (FP8), top-{} keys per query; indexer keys "
                                       "{} B per token per layer beside the latent{}",
                                       a.dsa->index_heads, a.dsa->index_head_dim, a.dsa->topk,
                                       u::format_number(a.dsa->key_cache_bytes()),
                                       a.indexer_layer_count() < a.attention_layer_count()
                                           ? fmt::format("; {} of {} layers run an indexer, the other {} read the "
                                                         "top-k of the last one (shared indexer)",
                                                         a.indexer_layer_count(), a.attention_layer_count(),
                                                         a.attention_layer_count() - a.indexer_layer_count())
                                           : std::string()));
  if (a.attention_sinks)
    arch.rows.emplace_back("attention sinks", fmt::format("one learned logit per query head per layer ({} parameters "
                                                          "in all; negligible cost)",
                                                          p.attention_sinks));
  {
    std::string kinds;
    for (const auto& k : layer_kinds(a)) kinds += (kinds.empty() ? "" : ", ") + k.text();
    arch.rows.emplace_back("layer kinds", kinds);
  }
  if (a.max_position) arch.rows.emplace_back("max positions", std::to_string(a.max_position));
  s.push_back(arch);

  Section params{"Parameters (billions)", {}};
  params.rows = {{"embedding", billions4(p.embedding + p.position_embedding)},
                 {"attention", billions4(p.attention)},
                 {"dense FFN", billions4(p.dense_mlp)}};
  if (p.ssm > 0) params.rows.emplace_back(a.gdn ? "gated DeltaNet mixers" : "Mamba-2 mixers", billions4(p.ssm));
  if (a.moe) {
    params.rows.emplace_back("router", billions4(p.router));
    params.rows.emplace_back("routed experts", billions4(p.routed_experts));
    if (p.shared_experts) params.rows.emplace_back("shared experts", billions4(p.shared_experts));
  }
  params.rows.emplace_back("norms", billions4(p.norms));
  params.rows.emplace_back("LM head", a.tied_embeddings ? "tied" : billions4(p.lm_head));
  if (p.vision > 0) params.rows.emplace_back("vision tower", billions4(p.vision) + " (not in the active count)");
  params.rows.emplace_back("total", billions4(p.total) + " (" + u::format_count(double(p.total)) + ")");
  if (a.moe)
    params.rows.emplace_back("active per token", fmt::format("{} ({} without the input embedding)", billions4(p.active),
                                                             billions4(p.active - p.embedding)));
  if (p.mtp) params.rows.emplace_back("MTP modules (not in total)", billions4(p.mtp));
  if (m->published) {
    std::string pub = u::format_number(m->published->total_params_B, 5) + " total";
    if (m->published->active_params_B) pub += ", " + u::format_number(*m->published->active_params_B, 4) + " active";
    params.rows.emplace_back("published", pub + " — " + m->published->source);
  }
  s.push_back(params);

  Section fl{fmt::format("Compute per token at context {}", o.seq), {}};
  fl.rows = {{"forward", fmt::format("{} ({} matmul + {} attention{}{})", u::format(f.forward), u::format(f.matmul_forward),
                                     u::format(f.attention_forward),
                                     f.ssm_forward.raw() > 0
                                         ? fmt::format(" + {} {}", u::format(f.ssm_forward),
                                                       a.gdn ? "gated delta rule" : "SSD scan")
                                         : std::string(),
                                     f.indexer_forward.raw() > 0
                                         ? fmt::format(" + {} DSA indexer", u::format(f.indexer_forward))
                                         : std::string())},
             {"training (fwd + bwd)", u::format(f.training)}};
  s.push_back(fl);

  if (a.vision) {
    const auto vt = model::vision_tower_counts(*a.vision, Explain::off);
    Section vs{fmt::format("Vision tower ({})", a.vision->kind), {}};
    vs.rows = {{"image", a.vision->resolution_origin},
               {"patches", fmt::format("{} of {}×{} px", vt.patches, a.vision->encoder.patch, a.vision->encoder.patch)},
               {"encoder", fmt::format("{} blocks, width {}, MLP {}, {} heads", a.vision->encoder.layers,
                                       a.vision->encoder.hidden, a.vision->encoder.mlp, a.vision->encoder.heads)},
               {"parameters", fmt::format("{} (projector and merger {})", u::format_count(double(vt.parameters)),
                                          u::format_count(double(vt.projector_parameters)))},
               {"per image", fmt::format("{} tokens to the language model, {} forward", vt.tokens_per_image,
                                         u::format(vt.flops_per_image))}};
    s.push_back(vs);
  }

  Section kvs{fmt::format("KV cache ({})", o.kv_dtype), {}};
  kvs.rows = {{"per token", fmt::format("{} ({})", u::format(kv.per_token_full), u::format(kv.per_token_full, u::BytePrefix::binary))},
              {fmt::format("per sequence of {}", o.seq),
               fmt::format("{} ({})", u::format(kv.per_sequence), u::format(kv.per_sequence, u::BytePrefix::binary))}};
  if (kv.state_per_sequence.raw() > 0)
    kvs.rows.emplace_back(fmt::format("{} state per sequence (in the above; any length)",
                                      a.gdn ? "gated DeltaNet" : "Mamba-2"),
                          u::format(kv.state_per_sequence));
  if (kv.index_per_token.raw() > 0)
    kvs.rows.emplace_back("DSA indexer keys per token (in the above)", u::format(kv.index_per_token));
  s.push_back(kvs);
  if (!a.assumptions.empty()) {
    Section as{"Assumptions", {}};
    for (const auto& x : a.assumptions) as.rows.emplace_back("-", x);
    s.push_back(as);
  }
  bool any_ignored = false;
  for (const auto& n : m->ignored_keys) any_ignored = any_ignored || n.counted;
  if (any_ignored) {
    Section ig{"Config keys ignored (reviewed: no size or cost; data/hf/config_keys.json)", {}};
    for (const auto& n : m->ignored_keys) {
      if (!n.counted) continue;  // listed with the assumptions
      std::string keys;
      for (const auto& k : n.keys) keys += (keys.empty() ? "" : ", ") + k;
      ig.rows.emplace_back(keys, n.why);
    }
    s.push_back(ig);
  }
  out(render_sections(s, fmt_));
  if (g.explain) {
    out(render_derivation(p.derivation, fmt_));
    out(render_derivation(f.derivation, fmt_));
    out(render_derivation(kv.derivation, fmt_));
  }
  return report(m.diagnostics());
}

}  // namespace

void register_model(CLI::App& app, GlobalOptions& g, int& rc) {
  auto* cmd = app.add_subcommand("model", "model library and Hugging Face config.json import");
  cmd->require_subcommand(1);
  auto o = std::make_shared<ModelOptions>();
  auto* l = cmd->add_subcommand("list", "list the shipped models");
  add_format_option(*l, g);
  l->callback([&g, &rc] { rc = list(g); });

  auto* s = cmd->add_subcommand("show", "parameters by component, FLOPs per token, KV bytes per token");
  s->add_option("MODEL", o->name,
                "a shipped name (llama-3.1-70b, resnet50) or a path to a JSON file (ours or a config.json) or to an "
                "ONNX file (.onnx)")
      ->required();
  s->add_option("--seq", o->seq, "context length for attention FLOPs and the KV cache per sequence")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000'000}))
      ->capture_default_str();
  s->add_option("--kv-dtype", o->kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8", "fp4"}))
      ->capture_default_str();
  add_format_option(*s, g);
  s->add_flag("--explain", g.explain, "print the derivation of every number");
  s->callback([&g, o, &rc] { rc = show(g, *o); });
}

}  // namespace gpuplan::cli
