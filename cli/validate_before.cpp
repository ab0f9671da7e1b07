// How much issue #22's newly expressible structure moved each training case: the case's scenario priced again
// without that structure (validate.hpp predict_before).
#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

#include "validate.hpp"

namespace gpuplan::cli {

namespace {
/// The structure of issue #22 the plan uses, in words, and the scenario keys that express it.
struct Used {
  std::vector<std::string> what;
  bool interleaved_overlap = false;
  bool fp4 = false;
};

Used structure_of(const wl::TrainingPlan& p) {
  Used u;
  auto& w = u.what;
  if (p.par.etp > 0 && p.par.etp != p.par.tp) w.push_back(fmt::format("expert TP {} (parallel folding)", p.par.etp));
  if (p.split.any()) w.emplace_back(p.split.layout.empty() ? "uneven pipeline split" : "pipeline layout");
  if (p.partial_recompute()) w.emplace_back("partial recompute");
  if (p.recompute_modules != 0) w.emplace_back("recompute modules");
  if (p.recompute == wl::Recompute::selective_op) w.emplace_back("op-level selective recompute (TorchTitan)");
  if (p.norm_kernel == wl::NormKernel::composite) w.emplace_back("RMSNorm as PyTorch ops");
  if (p.cross_entropy == wl::CrossEntropyKernel::eager && p.kernels == wl::KernelStyle::fused)
    w.emplace_back("eager loss beside compiled blocks");
  if (p.mtp_layers > 0) w.emplace_back("MTP");
  if (p.activation_offload_layers > 0) w.emplace_back("activation offload");
  if (p.ep_a2a_overlap) w.emplace_back("EP A2A overlap");
  if (p.cuda_graphs != wl::CudaGraphScope::none)
    w.push_back(fmt::format("CUDA graphs ({})", wl::to_string(p.cuda_graphs)));
  if (p.fp8_dot_product_attention) w.emplace_back("FP8 attention");
  if (p.cross_entropy == wl::CrossEntropyKernel::flash) w.emplace_back("FlashAttention loss");
  if (p.schedule == wl::PipelineSchedule::interleaved && p.par.pp > 1 && p.model_chunks() > 1 && p.overlap_p2p_comm) {
    w.emplace_back("overlapped pipeline sends");
    u.interleaved_overlap = true;
  }
  if (p.pp_scatter_gather && p.par.pp > 1) w.emplace_back("scatter/gather pipeline sends");
  if (p.dp_sharp) w.emplace_back("SHARP");
  if (p.defer_embedding_wgrad && p.par.pp > 1) w.emplace_back("deferred embedding wgrad");
  if (p.precision.compute == hw::Precision::fp4) {
    w.emplace_back("NVFP4");
    u.fp4 = true;
  } else if (p.precision.compute == hw::Precision::fp8 && p.precision.recipe != wl::QuantRecipe::delayed) {
    w.push_back(fmt::format("FP8 {}", wl::to_string(p.precision.recipe)));
  }
  return u;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ", ";
    s += x;
  }
  return s;
}
}  // namespace

void predict_before(const nlohmann::json& scenario, const nlohmann::json* patch, const wl::TrainingPlan& plan,
                    const std::function<BeforePrediction(const nlohmann::json&)>& predict, CaseResult& r) {
  const Used u = structure_of(plan);
  if (u.what.empty() && patch == nullptr) return;
  r.structure = u.what.empty() ? "(the case's own before)" : joined(u.what);
  if (u.fp4) {
    r.before_note = "NVFP4 training was refused before (--precision fp4)";
    return;
  }
  // The keys of the new structure removed: their defaults are what the model priced before (even split, expert TP =
  // TP, whole-layer recompute, no MTP, no offload, plain FP8 with delayed scaling and 16-bit attention, exposed
  // pipeline sends).
  nlohmann::json b = scenario;
  for (const char* k : {"etp", "pipeline_layout", "embedding_in_pipeline_split", "loss_in_pipeline_split",
                        "first_stage_layers", "last_stage_layers", "recompute_method", "recompute_num_layers",
                        "recompute_modules", "mtp_layers", "activation_offload_layers", "ep_a2a_overlap",
                        "pp_scatter_gather", "fp8_recipe", "overlap_p2p_comm", "fp8_dot_product_attention",
                        "norm_kernel", "cuda_graphs", "sharp", "defer_embedding_wgrad", "wgrad_deferral_limit"})
    b.erase(k);
  // A stack that compiles only its blocks had its loss priced as the fused kernels' (cross_entropy te).
  if (plan.cross_entropy == wl::CrossEntropyKernel::eager) b.erase("cross_entropy");
  if (u.interleaved_overlap) b["overlap_p2p_comm"] = false;
  // FlashAttention's loss: before, eager kernels ran PyTorch's cross entropy and fused ones the default (te).
  if (plan.cross_entropy == wl::CrossEntropyKernel::flash) b.erase("cross_entropy");
  // TorchTitan's op-level policy was written as Megatron's selective recompute, the nearest mode before.
  if (plan.recompute == wl::Recompute::selective_op) b["recompute"] = "selective";
  // A layout string set the chunks per stage: the even split keeps the same number.
  if (!plan.split.layout.empty() && plan.model_chunks() > 1) {
    b["virtual_stages"] = plan.model_chunks();
    b["schedule"] = "interleaved";
  }
  if (patch != nullptr) b.merge_patch(*patch);
  BeforePrediction p = predict(b);
  if (!p.value && b.value("schedule", std::string()) == "interleaved") {
    // Before #22 the interleaved schedule needed equal chunks; the nearest expressible layout was 1F1B.
    nlohmann::json one = b;
    one["schedule"] = "1f1b";
    one["virtual_stages"] = 1;
    one.erase("overlap_p2p_comm");
    const BeforePrediction q = predict(one);
    if (q.value) {
      p = q;
      p.why = "the interleaved schedule needed equal chunks: 1F1B";
    }
  }
  r.predicted_before = p.value;
  r.before_layout = p.layout;
  r.before_note = p.why;
}

}  // namespace gpuplan::cli

namespace gpuplan::cli {

std::string render_structure_moves(const ValidationSummary& s) {
  int priced = 0, using_it = 0;
  std::string rows;
  for (const auto& c : s.cases) {
    if (!c.predicted) continue;
    ++priced;
    if (c.structure.empty()) continue;
    ++using_it;
    const std::string before =
        c.predicted_before ? units::format_number(*c.predicted_before, 4) : std::string("—");
    const std::string moved = c.predicted_before && *c.predicted_before > 0
                                  ? fmt::format("{:+.1f}%", (*c.predicted / *c.predicted_before - 1.0) * 100.0)
                                  : std::string("—");
    const std::string err_before =
        c.predicted_before && c.measured > 0 ? fmt::format("{:+.1f}%", (*c.predicted_before / c.measured - 1.0) * 100.0)
                                             : std::string("—");
    std::string how = c.before_layout;
    if (!c.before_note.empty()) {
      if (!how.empty()) how += ": ";
      how += c.before_note.substr(0, 120);
    }
    rows += fmt::format("| {} | {} | {} | {} | {} | {} | {} → {} |\n", c.id, c.structure, how.empty() ? "—" : how, before,
                        units::format_number(*c.predicted, 4), moved, err_before,
                        c.error ? fmt::format("{:+.1f}%", *c.error * 100.0) : std::string("—"));
  }
  if (using_it == 0) return "";
  std::string o = fmt::format(
      "### What issue #22's structure moved\n\n{} of the {} priced cases use structure made expressible in issue #22 "
      "(uneven pipelines, parallel folding, partial, module and op-level recompute, MTP, activation offload, FP8/FP4 "
      "recipes, overlapped or scattered pipeline sends, the EP all-to-all overlap); the other {} use none of it and did "
      "not move. Each is priced again without it: those keys removed (the nearest layout expressible before), or the "
      "case's own `before`; moved = predicted / predicted before − 1.\n\n",
      using_it, priced, priced - using_it);
  o += "| case | structure used | nearest layout before | predicted before | predicted | moved | error before → now |\n"
       "| --- | --- | --- | ---: | ---: | ---: | --- |\n";
  return o + rows + "\n";
}

}  // namespace gpuplan::cli
