// The passes of one LoRA adapter (lora_adapter.hpp).
#include "lora_adapter.hpp"

#include <algorithm>

namespace gpuplan::model::detail {

namespace {
bool row_parallel(LinearKind kind) { return kind == LinearKind::attention_out || kind == LinearKind::mlp_out; }
}  // namespace

LoraAdapterElements lora_adapter_elements(const wl::TrainingPlan& plan, LinearKind kind, std::int64_t m, std::int64_t k,
                                          std::int64_t n, std::int64_t batch) {
  const double t = double(std::max(1, plan.par.tp));
  const bool sp = plan.par.sequence_parallel && plan.par.tp > 1;
  const double mb = double(m) * double(batch);
  LoraAdapterElements e;
  e.in = mb * double(k) / (!row_parallel(kind) && sp && plan.overlap_tp_comm ? t : 1.0);
  e.out = mb * double(n) / (row_parallel(kind) && sp ? t : 1.0);
  return e;
}

std::vector<LoraPass> lora_adapter_passes(const std::string& name, const wl::TrainingPlan& plan, LinearKind kind,
                                          std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t batch,
                                          hw::Precision compute, const Device& d, bool keep_names) {
  std::vector<LoraPass> v;
  auto nm = [&](const char* suffix) { return keep_names ? name + suffix : std::string(); };
  const hw::Precision p = sixteen_bit_of(compute);
  const double ab = plan.precision.activation_bytes;
  const std::int64_t r = plan.lora.rank;
  // A row-parallel layer's adapter: linear_in takes the k = in/t shard (RowParallelLinear), linear_out produces n/t
  // columns (ColumnParallelLinear) that are then gathered or exchanged; a column-parallel layer's n is already n/t.
  const std::int64_t t = std::max(1, plan.par.tp);
  const std::int64_t n_b = row_parallel(kind) ? std::max<std::int64_t>(1, n / t) : n;
  auto gemm = [&](bool fwd, const char* suffix, GemmShape s) { v.push_back({fwd, true, gemm_cost(nm(suffix), s, p, d)}); };
  gemm(true, " LoRA A", {m, r, k, batch});
  gemm(true, " LoRA B", {m, n_b, r, batch});
  gemm(false, " LoRA B dgrad", {m, r, n_b, batch});
  gemm(false, " LoRA A dgrad", {m, k, r, batch});
  gemm(false, " LoRA B wgrad", {r, n_b, m, batch});
  gemm(false, " LoRA A wgrad", {k, r, m, batch});
  const LoraAdapterElements e = lora_adapter_elements(plan, kind, m, k, n, batch);
  auto stream = [&](bool fwd, const char* suffix, double elements, double bytes_per_element) {
    v.push_back({fwd, false,
                 streaming_cost(nm(suffix), OpClass::elementwise, units::bytes(elements * bytes_per_element),
                                units::flop(elements), d)});
  };
  if (plan.lora.dropout > 0.0) {
    stream(true, " LoRA dropout", e.in, 2.0 * ab + 1.0);
    stream(false, " LoRA dropout bwd", e.in, 2.0 * ab + 1.0);
  }
  stream(true, " LoRA scale", e.out, 2.0 * ab);
  stream(false, " LoRA scale bwd", e.out, 2.0 * ab);
  stream(true, " LoRA output sum", e.out, 3.0 * ab);
  stream(false, " LoRA input-gradient sum", e.in, 3.0 * ab);
  return v;
}

double lora_tp_collectives(const wl::TrainingPlan& plan, bool moe) {
  if (!plan.lora.on() || plan.par.tp <= 1) return 0.0;
  const bool sp = plan.par.sequence_parallel;
  const double column = sp && plan.overlap_tp_comm ? 2.0 : 0.0, row = sp ? 2.0 : 1.0;
  double n = 0.0;
  if (lora_targets(plan.lora, LinearKind::qkv)) n += column;
  if (lora_targets(plan.lora, LinearKind::attention_out)) n += row;
  if (!moe && lora_targets(plan.lora, LinearKind::mlp_in)) n += column;
  if (!moe && lora_targets(plan.lora, LinearKind::mlp_out)) n += row;
  return n;
}

}  // namespace gpuplan::model::detail
