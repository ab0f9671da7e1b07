// `gpuplan roofline`: one op (GEMM, attention, streaming op) or every op of one layer of a model, on one or more
// GPUs: FLOPs, bytes, intensity, ridge point, bound, predicted time and achieved FLOP/s.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/app/gemm_shapes.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/lookup.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

struct RooflineFlags {
  std::vector<std::string> gpus{"h100-sxm5-80gb"};
  std::string gemm;       // MxNxK
  std::string attention;  // b,heads,seq,head_dim
  bool causal = true;
  bool backward = false;
  std::optional<double> stream_elements;
  double bytes_per_element_rw = 4.0;  // bytes read + written per element (e.g. 2 B in + 2 B out)
  double flops_per_element = 1.0;
  std::string model;
  std::int64_t seq = 4096, micro_batch = 1;
  int tp = 1;
  std::string precision = "bf16";
  bool no_calibration = false;
};

bool parse_ints(const std::string& s, char sep, std::vector<std::int64_t>& out) {
  out.clear();
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t next = s.find(sep, pos);
    const std::string tok = s.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(tok, &used);
      // At most 1e9 per dimension: batch × heads, the FLOP and byte products stay far inside int64 and double.
      if (used != tok.size() || v < 1 || v > 1'000'000'000) return false;
      out.push_back(v);
    } catch (...) {
      return false;
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return true;
}

int run_roofline(const GlobalOptions& g, const RooflineFlags& f) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  const auto prec = hw::parse_precision(f.precision);
  const int modes = int(!f.gemm.empty()) + int(!f.attention.empty()) + int(f.stream_elements.has_value()) + int(!f.model.empty());
  if (modes != 1) {
    diags.error("", "--gemm", "give exactly one of --gemm MxNxK, --attention b,heads,seq,head_dim, --elementwise N, --model");
    return report(diags);
  }
  std::vector<std::int64_t> dims;
  std::optional<std::array<std::vector<std::int64_t>, 3>> shapes;  // --gemm: each dimension a value or a range
  if (!f.gemm.empty()) {
    std::string error;
    shapes = app::parse_gemm_shapes(f.gemm, error);
    if (!shapes) diags.error("", "--gemm", error);
  }
  if (!f.attention.empty() && (!parse_ints(f.attention, ',', dims) || dims.size() != 4))
    diags.error("", "--attention", fmt::format("'{}' is not batch,heads,seq,head_dim, four integers from 1 to 1e9 (e.g. 1,32,8192,128)", f.attention));
  std::optional<wl_io::ModelEntry> entry;
  if (!f.model.empty()) {
    auto lib = app::load_workspace(dir, {.hardware = false, .models = true});
    if (!lib.ok()) return report(lib.diagnostics());
    auto m = wl_io::resolve_model(lib->library, f.model);
    if (!m.ok()) return report(m.diagnostics());
    entry = m.value();
  }
  std::vector<const hw::GpuSpec*> gpus;
  for (const auto& name : f.gpus) {
    const hw::GpuSpec* gs = db.find_gpu(name);
    if (gs == nullptr) diags.error("", "--gpu", fmt::format("unknown GPU '{}'{}", name, did_you_mean(name, db.gpu_names())));
    else gpus.push_back(gs);
  }
  if (diags.has_errors()) return report(diags);

  const Format fmt_ = parse_format(g.format);
  Table t;
  t.columns = {{"gpu", "gpu"}, {"op", "op"}, {"flops", "FLOP", true}, {"bytes", "bytes", true},
               {"intensity", "FLOP/B", true}, {"ridge", "ridge FLOP/B", true}, {"bound", "bound"},
               {"time_s", "time s", true}, {"achieved_TFLOPs", "achieved TFLOP/s", true}, {"efficiency", "of peak", true}};
  nlohmann::ordered_json js = nlohmann::ordered_json::array();
  std::vector<Derivation> whys;
  for (const hw::GpuSpec* gs : gpus) {
    // The calibration profile of the GPU where the data directory has one, as every other command (burst rates: a
    // single op is not a sustained training step).
    model::TrainingSystem cal;
    cal.gpu = gs;
    if (!load_calibration(dir, cal, f.no_calibration, diags)) return report(diags);
    model::Device d = model::make_device(*gs);
    if (cal.efficiency) d.eff = *cal.efficiency;
    std::vector<model::OpCost> ops;
    if (shapes && (*shapes)[0].size() * (*shapes)[1].size() * (*shapes)[2].size() == 1) {
      Derivation why;
      ops.push_back(model::gemm_cost(f.gemm, {(*shapes)[0][0], (*shapes)[1][0], (*shapes)[2][0], 1}, *prec, d,
                                     g.explain ? &why : nullptr));
      if (g.explain) whys.push_back(why);
    } else if (shapes) {  // a sweep (app/gemm_shapes.hpp): one row per shape, no derivations
      for (auto& pt : app::gemm_shape_sweep(d, *prec, *shapes)) ops.push_back(std::move(pt.cost));
    } else if (!f.attention.empty()) {
      ops = model::attention_cost("attention", dims[0] * dims[1], dims[2], dims[2], dims[3], dims[3], f.causal, true,
                                  f.backward, *prec, d);
    } else if (f.stream_elements) {
      ops.push_back(model::streaming_cost("elementwise", model::OpClass::elementwise,
                                          u::bytes(*f.stream_elements * f.bytes_per_element_rw),
                                          u::flop(*f.stream_elements * f.flops_per_element), d));
    } else {
      wl::TrainingPlan plan;
      plan.seq_len = f.seq;
      plan.micro_batch = f.micro_batch;
      plan.global_batch = f.micro_batch;
      plan.par.tp = f.tp;
      plan.par.sequence_parallel = f.tp > 1;
      plan.precision.compute = *prec;
      model::TrainingSystem sys;
      sys.db = &db;
      sys.gpu = gs;
      sys.efficiency = cal.efficiency;
      sys.node = hw::first_node_of(db, gs->info.id);
      auto est = model::estimate_training(entry->arch, plan, sys, Explain::off);
      if (!est.feasibility.ok && est.layer_ops.empty()) {
        for (const auto& r : est.feasibility.reasons) diags.error("", "--model", r);
        return report(diags);
      }
      ops = est.layer_ops;
    }
    const double ridge = (d.peak(*prec) / (gs->memory.bandwidth)).raw();
    for (const auto& op : ops) {
      const double intensity = op.bytes.raw() > 0 ? op.flops.raw() / op.bytes.raw() : 0;
      const double achieved = op.time.raw() > 0 ? op.flops.raw() / op.time.raw() : 0;
      auto num = [](double v) { return fmt::format("{:.10g}", v); };
      t.rows.push_back({gs->info.id, op.name, num(op.flops.raw()), num(op.bytes.raw()), num(intensity), num(ridge),
                        model::to_string(op.bound), num(op.time.raw()), num(achieved / 1e12),
                        num(achieved / d.peak(*prec).raw())});
      js.push_back({{"gpu", gs->info.id}, {"op", op.name}, {"class", model::to_string(op.cls)}, {"flops", op.flops.raw()},
                    {"bytes", op.bytes.raw()}, {"intensity", intensity}, {"ridge", ridge}, {"bound", model::to_string(op.bound)},
                    {"time_s", op.time.raw()}, {"achieved_flops_per_s", achieved}, {"efficiency_origin", d.eff.origin}});
    }
  }
  if (fmt_ == Format::json) {
    if (g.explain && !whys.empty()) {
      nlohmann::ordered_json o;
      o["ops"] = js;
      o["derivations"] = nlohmann::ordered_json::array();
      for (const auto& w : whys) o["derivations"].push_back(nlohmann::ordered_json::parse(json_inline(derivation_json(w))));
      out(json_text(o));
    } else {
      out(json_text(js));
    }
  } else {
    out(t.render(fmt_));
    if (fmt_ != Format::csv)
      for (const auto& w : whys) out(render_derivation(w, fmt_ == Format::md ? Format::md : Format::text));
  }
  return report(diags);
}

}  // namespace

void register_roofline(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<RooflineFlags>();
  auto* c = app.add_subcommand("roofline", "roofline of one op or of every op of one layer, on one or more GPUs");
  c->add_option("--gpu", f->gpus, "GPU ids or aliases (repeatable)")->capture_default_str();
  c->add_option("--gemm", f->gemm,
                "GEMM M×N×K, e.g. 8192x8192x8192; a dimension may be a range A..B[:STEP] (one row per shape: "
                "4096x4096x4088..4104 shows the alignment classes, 1..1024x22016x4096 the tile staircase)");
  c->add_option("--attention", f->attention, "flash attention batch,heads,seq,head_dim");
  c->add_option("--causal", f->causal, "causal attention (default true)");
  c->add_flag("--backward", f->backward, "attention backward pass");
  c->add_option("--elementwise", f->stream_elements, "a streaming op over N elements")->check(CLI::PositiveNumber);
  c->add_option("--bytes-per-element", f->bytes_per_element_rw, "bytes read + written per element (streaming op)")
      ->check(CLI::PositiveNumber);
  c->add_option("--flops-per-element", f->flops_per_element, "FLOPs per element (streaming op)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--model,-m", f->model, "every op of one layer of this model (forward and backward)");
  c->add_option("--seq", f->seq, "sequence length for --model")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000'000}))
      ->capture_default_str();
  c->add_option("--micro-batch", f->micro_batch, "micro-batch for --model")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}))
      ->capture_default_str();
  c->add_option("--tp", f->tp, "tensor parallel for --model")->check(CLI::Range(1, 1024))->capture_default_str();
  c->add_flag("--no-calibration", f->no_calibration,
              "use the built-in efficiency defaults even where the data directory has a calibration profile");
  c->add_option("--precision", f->precision, "precision")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16", "fp8"}))
      ->capture_default_str();
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation (GEMM)");
  c->callback([&g, f, &rc] { rc = run_roofline(g, *f); });
}

}  // namespace gpuplan::cli
