#include "stack_job.hpp"
#include "gpuplan/app/input_pipeline.hpp"

#include <fmt/format.h>

#include "gpuplan/app/resolve.hpp"
#include "training_job.hpp"

namespace gpuplan::gui {

std::string stack_flag(const StackRequest& req) {
  std::string s;
  for (const auto& st : req.steps) {  // (appending "," + to_string(st) trips GCC 12's -Wrestrict false positive)
    if (!s.empty()) s += ',';
    s += model::to_string(st);
  }
  return s;
}

StackResult evaluate_stack(const AppData& data, const StackRequest& req) {
  StackResult out;
  out.request = req;
  if (!(req.sample_ms >= 0 && req.sample_ms <= 1e6))
    out.diags.error("", "Sample CPU ms", fmt::format("{} is not a CPU time per sample in [0, 10⁶] ms", req.sample_ms));
  for (const auto& st : req.steps)
    if (st.kind == model::OptKind::workers && (st.workers < 1 || st.workers > 4096))
      out.diags.error("", "Workers", fmt::format("{} is not a worker count (1 to 4096 per GPU)", st.workers));
  if (out.diags.has_errors()) return out;
  std::map<std::string, std::string> origin;
  if (req.scenario.is_object())
    for (const auto& kv : req.scenario.items()) origin[kv.key()] = scenario_key_label(kv.key());
  auto decoded = wl_io::decode_training_scenario(req.scenario, "", origin);
  out.diags.append(decoded.diagnostics());
  if (!decoded.ok()) return out;
  auto where = [](const std::string& k) { return scenario_key_label(k); };
  auto r = app::resolve_training(decoded.value(), req.scenario.contains("global_batch"), data.db, data.library, where,
                                 out.diags);
  if (!r) return out;
  if (!app::load_calibration(data.data_dir, r->sys, !req.calibration, out.diags)) return out;
  if (!r->pre.ok) {
    for (const auto& reason : r->pre.reasons) out.diags.error("", "Layout", reason);
    return out;
  }
  const model::TextLoader loader = app::text_loader(r->sys, req.sample_ms, "Sample CPU ms");
  out.stack = model::optimisation_stack(r->arch, r->plan, r->sys, loader, req.steps, Explain::off);
  const auto& par = r->plan.par;
  out.title = fmt::format("{} on {} × {}, global batch {} × {} tokens", r->arch.name.empty() ? r->arch.id : r->arch.name,
                          par.gpus(), r->sys.gpu->info.name.empty() ? r->sys.gpu->info.id : r->sys.gpu->info.name,
                          r->plan.global_batch, r->plan.seq_len);
  out.valid = true;
  return out;
}

}  // namespace gpuplan::gui
