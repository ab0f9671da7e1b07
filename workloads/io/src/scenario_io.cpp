#include "gpuplan/wl_io/scenario_io.hpp"

#include <fmt/format.h>

namespace gpuplan::wl_io {

using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;

namespace {
FieldSpec f(std::string key, FieldType t, std::string doc, double min = 0, double max = 0, std::vector<std::string> choices = {}) {
  FieldSpec s;
  s.key = std::move(key);
  s.type = t;
  s.presence = Presence::optional;
  s.doc = std::move(doc);
  s.min = min;
  s.max = max;
  s.choices = std::move(choices);
  return s;
}
constexpr double kMaxGpus = 1e7;  // far beyond any cluster; catches typos and overflow
}  // namespace

const FieldTable& training_scenario_fields() {
  static const FieldTable t{
      f("model", FieldType::string, "library id or path to a model JSON / config.json"),
      f("gpu", FieldType::string, "GPU id or alias"),
      f("node", FieldType::string, "node id (sets the GPU and the links)"),
      f("cluster", FieldType::string, "cluster id (sets node and fabric)"),
      f("gpus", FieldType::integer, "total GPUs", 1, kMaxGpus),
      f("tp", FieldType::integer, "tensor parallel size", 1, 1024),
      f("pp", FieldType::integer, "pipeline parallel size", 1, 4096),
      f("dp", FieldType::integer, "data parallel size", 1, kMaxGpus),
      f("cp", FieldType::integer, "context parallel size", 1, 4096),
      f("ep", FieldType::integer, "expert parallel size", 1, 4096),
      f("sequence_parallel", FieldType::boolean, "Megatron sequence parallelism"),
      f("virtual_stages", FieldType::integer, "interleaved pipeline chunks per stage", 1, 1024),
      f("schedule", FieldType::string, "pipeline schedule", 0, 0, {"1f1b", "interleaved"}),
      f("micro_batch", FieldType::integer, "sequences per micro-batch", 1, 1e6),
      f("global_batch", FieldType::integer, "sequences per optimizer step", 1, 1e9),
      f("seq", FieldType::integer, "sequence length (tokens)", 1, 1e8),
      f("precision", FieldType::string, "GEMM precision", 0, 0, {"bf16", "fp16", "fp8", "fp32", "tf32"}),
      f("gradient_bytes", FieldType::number, "bytes per gradient element", 1, 4),
      f("optimizer", FieldType::string, "optimizer", 0, 0, {"adamw", "adamw-8bit", "sgd"}),
      f("zero", FieldType::integer, "ZeRO / FSDP stage", 0, 3),
      f("shard_group", FieldType::integer, "hybrid sharding group size", 1, kMaxGpus),
      f("recompute", FieldType::string, "activation recomputation", 0, 0, {"none", "selective", "full"}),
      f("flash_attention", FieldType::boolean, "fused attention"),
      f("attention_kernel", FieldType::string, "fused attention generation", 0, 0, {"fa2", "fa3"}),
      f("kernels", FieldType::string, "non-GEMM op implementation", 0, 0, {"fused", "eager"}),
      f("mixed_precision", FieldType::string, "mixed-precision scheme", 0, 0, {"megatron", "amp"}),
      f("offload", FieldType::string,
        "CPU offload: optimizer = ZeRO-Offload (master weights + optimizer states in host memory, optimizer step on "
        "the CPU; needs zero ≥ 1)",
        0, 0, {"none", "optimizer"}),
      f("overlap_grad_reduce", FieldType::boolean, "overlap DP gradient reduction with backward"),
      f("overlap_param_gather", FieldType::boolean, "overlap parameter all-gather with compute"),
      f("overlap_tp_comm", FieldType::boolean, "overlap TP communication with GEMMs"),
      f("tokens", FieldType::number, "token budget", 1, 1e18),
      f("price_usd_per_hour", FieldType::number, "$/GPU-hour", 0, 1e4),
  };
  return t;
}

Result<TrainingScenario> decode_training_scenario(const Json& j, const std::string& file,
                                                  const std::map<std::string, std::string>& origin_of_key) {
  Diagnostics raw;
  ObjectReader r(j, training_scenario_fields(), file, "", raw);
  // Re-home diagnostics of flag-provided keys onto the flag.
  Diagnostics diags;
  for (auto d : raw.items()) {
    for (const auto& [key, flag] : origin_of_key) {
      if (d.pointer == "/" + key) {
        d.file.clear();
        d.pointer = flag;
      }
    }
    diags.add(d);
  }
  TrainingScenario s;
  s.model = r.str("model").value_or("");
  s.gpu = r.str("gpu").value_or("");
  s.node = r.str("node").value_or("");
  s.cluster = r.str("cluster").value_or("");
  s.gpus = r.integer("gpus");
  auto& p = s.plan;
  auto as_int = [&](const char* k, int& into) {
    if (auto v = r.integer(k)) into = static_cast<int>(*v);
  };
  as_int("tp", p.par.tp);
  as_int("pp", p.par.pp);
  as_int("cp", p.par.cp);
  as_int("ep", p.par.ep);
  as_int("virtual_stages", p.par.virtual_stages);
  as_int("shard_group", p.par.shard_group);
  if (auto v = r.integer("dp")) {
    p.par.dp = static_cast<int>(*v);
    s.dp_given = true;
  }
  p.par.sequence_parallel = r.boolean("sequence_parallel").value_or(p.par.tp > 1);
  if (auto v = r.str("schedule")) p.schedule = *v == "interleaved" ? wl::PipelineSchedule::interleaved : wl::PipelineSchedule::one_f_one_b;
  else if (p.par.virtual_stages > 1) p.schedule = wl::PipelineSchedule::interleaved;
  if (auto v = r.integer("micro_batch")) p.micro_batch = *v;
  if (auto v = r.integer("global_batch")) p.global_batch = *v;
  if (auto v = r.integer("seq")) p.seq_len = *v;
  if (auto v = r.str("precision")) p.precision.compute = *hw::parse_precision(*v);
  if (p.precision.compute == hw::Precision::fp32 || p.precision.compute == hw::Precision::tf32) {
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
    p.precision.activation_bytes = 4;
  }
  if (auto v = r.num("gradient_bytes")) p.precision.gradient_bytes = *v;
  if (auto v = r.str("optimizer"))
    p.optimizer = *v == "adamw" ? wl::OptimizerKind::adamw : *v == "sgd" ? wl::OptimizerKind::sgd : wl::OptimizerKind::adamw_8bit;
  if (auto v = r.integer("zero")) p.zero = static_cast<wl::ZeroStage>(*v);
  if (auto v = r.str("recompute"))
    p.recompute = *v == "full" ? wl::Recompute::full : *v == "selective" ? wl::Recompute::selective : wl::Recompute::none;
  if (auto v = r.boolean("flash_attention")) p.flash_attention = *v;
  if (auto v = r.str("kernels")) p.kernels = *v == "eager" ? wl::KernelStyle::eager : wl::KernelStyle::fused;
  if (auto v = r.str("mixed_precision"); v && *v == "amp") {
    // AMP: fp32 parameters and gradients, no separate master copy (the parameters are the master).
    p.mixed_precision = wl::MixedPrecision::amp;
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
  }
  if (auto v = r.str("offload")) p.offload = *v == "optimizer" ? wl::Offload::optimizer : wl::Offload::none;
  if (auto v = r.str("attention_kernel")) p.attention_kernel = *v == "fa2" ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
  if (auto v = r.boolean("overlap_grad_reduce")) p.overlap_grad_reduce = *v;
  if (auto v = r.boolean("overlap_param_gather")) p.overlap_param_gather = *v;
  if (auto v = r.boolean("overlap_tp_comm")) p.overlap_tp_comm = *v;
  if (auto v = r.num("tokens")) p.tokens_to_train = *v;
  s.price_usd_per_hour = r.num("price_usd_per_hour");
  if (diags.has_errors()) return Result<TrainingScenario>(std::move(diags));
  return Result<TrainingScenario>(std::move(s), std::move(diags));
}

}  // namespace gpuplan::wl_io
