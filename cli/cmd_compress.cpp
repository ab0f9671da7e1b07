// `gpuplan compress`: the compression playground (issue #27) — quantisation with its compute path, 2:4 sparsity,
// structured pruning and a distilled student, each priced as `gpuplan serve` prices a replica (model/compression.hpp):
// weight size, memory (weights + KV at a batch and context), TTFT, ITL and throughput. The model, hardware, engine and
// KV dtype resolve exactly as for `serve` (serve_options.hpp); accuracy is out of scope and the output says so.
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/model/compression.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "serve_options.hpp"

namespace gpuplan::cli {
namespace {

using nlohmann::ordered_json;
namespace u = gpuplan::units;

struct CompressFlags {
  std::vector<std::string> variants;
};

std::string gb(u::Bytes b) { return fmt::format("{:.2f}", b.raw() / 1e9); }
std::string msec(u::Seconds s) { return fmt::format("{:.3f}", s.raw() * 1e3); }

int run_compress(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s,
                 const CompressFlags& cf) {
  Diagnostics diags;
  ServeContext ctx;
  auto resolved = resolve_serve_command(g, cmd, s, diags, ctx);
  if (!resolved) return report(diags);
  const ResolvedServing& rs = *resolved;
  const std::vector<std::string> given = cf.variants.empty() ? model::default_compression_variants(rs.arch) : cf.variants;
  std::vector<model::CompressionChoice> choices;
  for (const auto& v : given) {
    auto p = model::parse_compression(v);
    if (!p.choice) diags.error("", "--variants", p.error);
    else choices.push_back(std::move(*p.choice));
  }
  // Students: library models (or config.json paths), loaded once.
  std::vector<std::unique_ptr<wl::TransformerArch>> owned;
  std::vector<const wl::TransformerArch*> students(choices.size(), nullptr);
  std::optional<wl_io::ModelLibrary> lib;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const model::CompressionStep* st = choices[i].find(model::CompressionKind::student);
    if (st == nullptr) continue;
    if (!lib) {
      auto l = app::load_workspace(ctx.data_dir, {.hardware = false, .models = true});
      diags.append(l.diagnostics());
      if (!l.ok()) return report(diags);
      lib = l->library;
    }
    auto m = wl_io::resolve_model(*lib, st->model);
    if (!m.ok()) {
      for (auto d : m.diagnostics().items()) {
        d.message = fmt::format("'{}' in --variants: {}", choices[i].label, d.message);
        if (d.pointer == "MODEL") d.pointer = "--variants";
        diags.add(d);
      }
      continue;
    }
    owned.push_back(std::make_unique<wl::TransformerArch>(m->arch));
    students[i] = owned.back().get();
  }
  // A choice the model cannot take (more layers dropped than it has, heads of an MLA model) is bad input; a choice the
  // GPU cannot run (no fp4 tensor cores) is a result, printed as refused.
  const bool unloaded = diags.has_errors();  // a student that did not load was reported already
  for (std::size_t i = 0; i < choices.size() && !unloaded; ++i) {
    const auto d = model::derive_architecture(rs.arch, choices[i], students[i]);
    if (!d.error.empty()) diags.error("", "--variants", fmt::format("'{}' for {}: {}", choices[i].label, rs.arch.id, d.error));
  }
  if (diags.has_errors()) return report(diags);
  report(diags);  // notes

  const std::int64_t batch = rs.batch.value_or(16);
  const Explain ex = g.explain ? Explain::on : Explain::off;
  const model::CompressionStudy st = model::compression_study(rs.arch, rs.perf, rs.memory, rs.sys, choices, students,
                                                              batch, rs.input_tokens, rs.output_tokens, ex);
  const model::CompressionRow& base = st.rows.front();
  const Format fmt_ = parse_format(g.format);
  const std::string title = fmt::format("Compression of {} on {} (TP {}{}), batch {}, {} + {} tokens",
                                        rs.arch.name.empty() ? rs.arch.id : rs.arch.name, rs.sys.gpu->info.id,
                                        rs.perf.tp, rs.perf.pp > 1 ? fmt::format(", PP {}", rs.perf.pp) : "",
                                        st.batch, st.input_tokens, st.output_tokens);
  auto speedup = [&](const model::CompressionRow& r) {
    return r.refused.empty() && r.itl.raw() > 0 ? base.itl.raw() / r.itl.raw() : 0.0;
  };

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = rs.arch.id;
    o["gpu"] = rs.sys.gpu->info.id;
    o["tp"] = rs.perf.tp;
    o["pp"] = rs.perf.pp;
    o["batch"] = st.batch;
    o["input_tokens"] = st.input_tokens;
    o["output_tokens"] = st.output_tokens;
    o["context_tokens"] = st.context;
    o["decode_context_tokens"] = st.decode_context;
    o["kv_dtype"] = std::string(model::to_string(rs.perf.kv.dtype));
    o["accuracy"] = st.accuracy_note;
    ordered_json rows = ordered_json::array();
    for (const auto& r : st.rows) {
      ordered_json x;
      x["choice"] = r.label;
      x["refused"] = r.refused.empty() ? ordered_json(nullptr) : ordered_json(r.refused);
      x["weights"] = r.weights;
      x["compute"] = r.compute;
      x["layers"] = r.layers;
      x["hidden"] = r.hidden;
      x["heads"] = r.heads;
      x["kv_heads"] = r.kv_heads;
      x["ffn"] = r.intermediate;
      if (r.refused.empty()) {
        x["params"] = r.params;
        x["weight_bytes"] = r.weight_bytes.raw();
        x["kv_bytes"] = r.kv_bytes.raw();
        x["memory_bytes"] = r.memory.raw();
        x["fits"] = r.fits;
        x["max_batch"] = r.max_batch;
        x["ttft_s"] = r.ttft.raw();
        x["itl_s"] = r.itl.raw();
        x["decode_tokens_per_s"] = r.decode_tokens_per_s;
        x["prefill_tokens_per_s"] = r.prefill_tokens_per_s;
        x["itl_speedup"] = speedup(r);
        x["weight_ratio"] = base.weight_bytes.raw() > 0 ? r.weight_bytes.raw() / base.weight_bytes.raw() : 0.0;
      }
      x["notes"] = r.notes;
      if (g.explain && r.refused.empty()) x["derivation"] = derivation_json(r.derivation);
      rows.push_back(x);
    }
    o["rows"] = rows;
    out(json_text(o));
    return kExitOk;
  }

  Table t{{{"choice", "choice", false},
           {"weights", "weights", false},
           {"params_B", "params B", true},
           {"weights_GB", "weights GB", true},
           {"kv_GB", "KV GB", true},
           {"memory_GB", "weights+KV GB", true},
           {"fits", "fits", false},
           {"max_batch", "max batch", true},
           {"ttft_ms", "TTFT ms", true},
           {"itl_ms", "ITL ms", true},
           {"decode_tok_s", "decode tok/s", true},
           {"prefill_tok_s", "prefill tok/s", true},
           {"itl_speedup", "ITL ×", true}},
          {}};
  for (const auto& r : st.rows) {
    if (!r.refused.empty()) {
      t.rows.push_back({r.label, r.weights, "", "", "", "", "refused", "", "", "", "", "", ""});
      continue;
    }
    t.rows.push_back({r.label, r.weights, fmt::format("{:.3f}", r.params / 1e9), gb(r.weight_bytes), gb(r.kv_bytes),
                      gb(r.memory), r.fits ? "yes" : "no", std::to_string(r.max_batch), msec(r.ttft), msec(r.itl),
                      fmt::format("{:.0f}", r.decode_tokens_per_s), fmt::format("{:.0f}", r.prefill_tokens_per_s),
                      fmt::format("{:.2f}", speedup(r))});
  }
  if (fmt_ == Format::csv) {
    out(t.render(fmt_));
    return kExitOk;
  }
  std::vector<Section> secs;
  secs.push_back({title,
                  {{"KV cache", fmt::format("{} ({} sequences × {} tokens; decode steps at {} tokens)",
                                            model::to_string(rs.perf.kv.dtype), st.batch, st.context,
                                            st.decode_context)},
                   {"accuracy", st.accuracy_note}}});
  std::string text = render_sections(secs, fmt_);
  text += (fmt_ == Format::md ? "\n" : "\n") + t.render(fmt_);
  Section notes{"Per choice", {}};
  for (const auto& r : st.rows) {
    notes.rows.emplace_back(r.label, r.refused.empty() ? r.compute : "refused: " + r.refused);
    for (const auto& n : r.notes) notes.rows.emplace_back("", n);
  }
  text += "\n" + render_sections({notes}, fmt_);
  out(text);
  if (g.explain)
    for (const auto& r : st.rows)
      if (r.refused.empty()) out(render_derivation(r.derivation, fmt_));
  return kExitOk;
}

}  // namespace

void register_compress(CLI::App& app, GlobalOptions& g, int& rc) {
  auto s = std::make_shared<ServeFlags>();
  auto cf = std::make_shared<CompressFlags>();
  auto* c = app.add_subcommand("compress", "compression playground: quantisation (W8A8 int8/fp8, W4A16, NVFP4/MXFP4), "
                                           "2:4 sparsity, pruning and a student: size, memory, TTFT, ITL, throughput");
  c->add_option("--scenario", s->scenario, "serving scenario JSON (keys of docs/scenario.md); flags override it");
  add_serve_options(*c, *s, false);
  add_serve_key(*c, *s, "batch", "concurrent sequences (decode batch) the choices are compared at (default 16)");
  c->add_option("--variants", cf->variants,
                "choices, comma-separated: w8a8-int8, w8a8-fp8, w4a16, nvfp4, mxfp4, 2:4, prune-ffn=F, "
                "prune-heads=F, drop-layers=N, student=MODEL, or steps joined with '+' (default: all quantisations, "
                "2:4, prune-ffn=0.25, prune-heads=0.25, drop-layers=L/4)")
      ->delimiter(',');
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  add_format_option(*c, g);
  accept_engine_spellings(*c, g.data_dir);
  c->callback([&g, s, cf, c, &rc] {
    s->engine_typed = c->remaining();
    rc = run_compress(g, *c, *s, *cf);
  });
}

}  // namespace gpuplan::cli
