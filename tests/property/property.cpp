#include "test_paths.hpp"
#include "property.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/search.hpp"

namespace gpuplan::prop {

namespace {
std::optional<long long> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::strtoll(v, nullptr, 10);
}
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}
}  // namespace

std::uint64_t run_seed() {
  static const std::uint64_t s = [] {
    const char* v = std::getenv("GPUPLAN_PROPERTY_SEED");
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : kDefaultSeed;
  }();
  return s;
}

int cases(int n) {
  const char* v = std::getenv("GPUPLAN_PROPERTY_SCALE");
  const double scale = v != nullptr && *v != '\0' ? std::strtod(v, nullptr) : 1.0;
  return std::max(1, static_cast<int>(std::lround(n * scale)));
}

std::vector<int> case_indices(int n) {
  if (const auto only = env_int("GPUPLAN_PROPERTY_CASE")) return {static_cast<int>(*only)};
  std::vector<int> v(static_cast<std::size_t>(cases(n)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

std::string repro(int index) {
  return fmt::format("GPUPLAN_PROPERTY_SEED={} GPUPLAN_PROPERTY_CASE={}", run_seed(), index);
}

Rng::Rng(const std::string& property, int index)
    : g_(run_seed() ^ fnv1a(property) ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(index + 1))) {}

std::int64_t Rng::range(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1;
  return lo + static_cast<std::int64_t>(g_() % span);
}
double Rng::uniform(double lo, double hi) {
  const double u = static_cast<double>(g_() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}
double Rng::log_uniform(double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); }
int Rng::pow2(int max) {
  int k = 0;
  while ((2 << k) <= max) ++k;
  return 1 << range(0, k);
}

const hw::HardwareDb& db() {
  static const hw::HardwareDb d = [] {
    auto r = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  return d;
}
const wl_io::ModelLibrary& library() {
  static const wl_io::ModelLibrary lib = [] {
    auto r = wl_io::load_model_library(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  return lib;
}

wl::TransformerArch import_config(const std::string& json_text) {
  Diagnostics d;
  auto j = json_io::parse(json_text, "synthetic.json", d);
  REQUIRE_MESSAGE(j.has_value(), d.to_string());
  auto r = wl_io::import_hf_config(*j, "synthetic.json");
  REQUIRE_MESSAGE(r.ok(), "the importer refuses a generated config: " << r.diagnostics().to_string() << "\n"
                                                                      << json_text);
  return r.value();
}

GenArch random_arch(Rng& r, ArchKind kind, bool small) {
  if (kind == ArchKind::any) {
    static const std::vector<ArchKind> kinds{ArchKind::library, ArchKind::library, ArchKind::dense, ArchKind::gqa,
                                             ArchKind::mqa,     ArchKind::mla,     ArchKind::moe};
    kind = r.pick(kinds);
  }
  if (kind == ArchKind::library) {
    const auto& models = library().models;
    const auto& m = models[static_cast<std::size_t>(r.range(0, static_cast<std::int64_t>(models.size()) - 1))];
    return {m.arch, "library " + m.arch.id};
  }
  nlohmann::ordered_json c;
  const int head_dim = static_cast<int>(r.pick(std::vector<std::int64_t>{32, 64, 80, 96, 128, 256}));
  const int heads = small ? r.pow2(16) : static_cast<int>(r.pick(std::vector<std::int64_t>{1, 2, 4, 8, 12, 16, 32, 40, 64, 96, 128}));
  const std::int64_t hidden = small ? static_cast<std::int64_t>(heads) * head_dim
                                    : (r.chance(0.7) ? static_cast<std::int64_t>(heads) * head_dim
                                                     : 128 * r.range(1, small ? 16 : 128));
  const int layers = static_cast<int>(small ? r.range(1, 8) : r.range(1, 96));
  const std::int64_t vocab = r.chance(0.2) ? r.range(2, 1000) : r.range(1000, 260000);
  c["model_type"] = "llama";
  c["hidden_size"] = hidden;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;
  c["head_dim"] = head_dim;
  c["intermediate_size"] = r.chance(0.5) ? hidden * 4 : 64 * r.range(1, small ? 64 : 1024);
  c["vocab_size"] = vocab;
  c["max_position_embeddings"] = r.pick(std::vector<std::int64_t>{2048, 4096, 8192, 32768, 131072, 1048576});
  c["tie_word_embeddings"] = r.chance(0.3);
  c["hidden_act"] = r.chance(0.8) ? "silu" : "gelu";
  if (r.chance(0.15)) c["attention_bias"] = true;
  int kv = heads;
  switch (kind) {
    case ArchKind::gqa: {
      std::vector<std::int64_t> divisors;
      for (int d = 1; d < heads; ++d)
        if (heads % d == 0) divisors.push_back(d);
      kv = divisors.empty() ? heads : static_cast<int>(r.pick(divisors));
      break;
    }
    case ArchKind::mqa: kv = 1; break;
    default: break;
  }
  c["num_key_value_heads"] = kv;
  if ((kind == ArchKind::dense || kind == ArchKind::gqa) && r.chance(0.25) && layers > 1) {
    // Hybrid sliding-window / full attention, per layer.
    const std::int64_t window = r.pick(std::vector<std::int64_t>{128, 512, 1024, 4096});
    auto types = nlohmann::ordered_json::array();
    for (int i = 0; i < layers; ++i) types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    c["sliding_window"] = window;
    c["layer_types"] = types;
  }
  if (kind == ArchKind::mla) {
    c["model_type"] = "deepseek_v3";
    c.erase("head_dim");
    c["hidden_size"] = static_cast<std::int64_t>(heads) * head_dim;  // no head_dim key: the importer derives it
    c["num_key_value_heads"] = heads;
    c["q_lora_rank"] = r.chance(0.3) ? 0 : 64 * r.range(1, 24);
    if (c["q_lora_rank"] == 0) c.erase("q_lora_rank");
    c["kv_lora_rank"] = 64 * r.range(1, 8);
    c["qk_nope_head_dim"] = r.pick(std::vector<std::int64_t>{64, 128});
    c["qk_rope_head_dim"] = r.pick(std::vector<std::int64_t>{32, 64});
    c["v_head_dim"] = r.pick(std::vector<std::int64_t>{64, 128});
    if (r.chance(0.6)) {  // DeepSeek-V3-style MoE on top of MLA
      c["n_routed_experts"] = r.range(2, small ? 16 : 256);
      c["num_experts_per_tok"] = r.range(1, std::min<std::int64_t>(8, c["n_routed_experts"].get<std::int64_t>()));
      c["moe_intermediate_size"] = 64 * r.range(1, 64);
      c["n_shared_experts"] = r.range(0, 2);
      c["first_k_dense_replace"] = r.range(0, std::max(0, layers - 1));
      c["moe_layer_freq"] = 1;
    }
  }
  if (kind == ArchKind::moe) {
    if (r.chance(0.5)) {  // Mixtral
      c["model_type"] = "mixtral";
      c["num_local_experts"] = r.range(2, small ? 16 : 128);
      c["num_experts_per_tok"] = r.range(1, std::min<std::int64_t>(8, c["num_local_experts"].get<std::int64_t>()));
    } else {  // Qwen2-MoE: routed + a shared expert
      c["model_type"] = "qwen2_moe";
      c["num_experts"] = r.range(2, small ? 16 : 128);
      c["num_experts_per_tok"] = r.range(1, std::min<std::int64_t>(8, c["num_experts"].get<std::int64_t>()));
      c["moe_intermediate_size"] = 64 * r.range(1, 64);
      c["shared_expert_intermediate_size"] = r.chance(0.5) ? 64 * r.range(1, 64) : 0;
      if (c["shared_expert_intermediate_size"] == 0) c.erase("shared_expert_intermediate_size");
    }
  }
  const std::string text = c.dump();
  GenArch g{import_config(text), "synthetic " + text};
  g.arch.id = "synthetic";
  return g;
}

model::TrainingSystem system_of(const hw::HardwareDb& d, const std::string& node_id) {
  model::TrainingSystem s;
  s.db = &d;
  s.node = d.find_node(node_id);
  REQUIRE_MESSAGE(s.node != nullptr, "node not in the database: " << node_id);
  s.gpu = d.find_gpu(s.node->gpu);
  REQUIRE(s.gpu != nullptr);
  return s;
}

std::string TrainingCase::describe() const {
  const auto& p = plan;
  const auto& q = p.par;
  return fmt::format(
      "model: {}\nsystem: node {} (GPU {})\nplan: seq {} micro {} global {} | TP {} PP {} DP {} CP {} EP {} SP {} v {} "
      "shard_group {} | ZeRO {} recompute {} schedule {} | compute {} weight/grad/master/act bytes {}/{}/{}/{} | "
      "optimizer {} states {} fp8 params {} flash {} kernel {} kernels {} mixed {} | overlap grad/param/tp {}/{}/{}",
      arch.what, sys.node ? sys.node->info.id : "-", sys.gpu ? sys.gpu->info.id : "-", p.seq_len, p.micro_batch,
      p.global_batch, q.tp, q.pp, q.dp, q.cp, q.ep, q.sequence_parallel, q.virtual_stages, q.shard_group,
      static_cast<int>(p.zero), static_cast<int>(p.recompute), static_cast<int>(p.schedule),
      hw::to_string(p.precision.compute), p.precision.weight_bytes, p.precision.gradient_bytes,
      p.precision.master_bytes, p.precision.activation_bytes, static_cast<int>(p.optimizer),
      p.optimizer_states == wl::StateDtype::bf16 ? "bf16" : "fp32", p.precision.fp8_params, p.flash_attention,
      static_cast<int>(p.attention_kernel), static_cast<int>(p.kernels), static_cast<int>(p.mixed_precision),
      p.overlap_grad_reduce, p.overlap_param_gather, p.overlap_tp_comm);
}

std::optional<TrainingCase> random_training(Rng& r, const GenArch& arch) {
  const auto& a = arch.arch;
  const auto& nodes = db().nodes;
  for (int attempt = 0; attempt < 200; ++attempt) {
    TrainingCase t{arch, {}, {}};
    const auto& node = nodes[static_cast<std::size_t>(r.range(0, static_cast<std::int64_t>(nodes.size()) - 1))];
    t.sys = system_of(db(), node.info.id);
    auto& p = t.plan;
    auto& q = p.par;
    q.tp = r.pow2(std::max(1, std::min(node.scale_up.domain_gpus, 16)));
    q.pp = r.chance(0.4) ? 1 : static_cast<int>(r.range(1, std::min<std::int64_t>(a.layers, 16)));
    q.dp = r.chance(0.3) ? 1 : static_cast<int>(r.pick(std::vector<std::int64_t>{1, 2, 3, 4, 8, 16, 64, 256}));
    q.cp = r.chance(0.8) ? 1 : r.pow2(8);
    q.ep = a.moe && r.chance(0.6) ? r.pow2(static_cast<int>(std::min<std::int64_t>(a.moe->num_experts, 64))) : 1;
    q.sequence_parallel = q.tp > 1 && r.chance(0.6);
    if (q.pp > 1 && r.chance(0.3)) {
      p.schedule = wl::PipelineSchedule::interleaved;
      q.virtual_stages = static_cast<int>(r.range(2, 4));
    }
    const auto dp_cp = static_cast<long long>(q.dp) * q.cp;
    if (dp_cp > 1) p.zero = static_cast<wl::ZeroStage>(r.range(0, 3));
    if (p.zero == wl::ZeroStage::parameters && q.dp > 1 && r.chance(0.2)) q.shard_group = static_cast<int>(r.pick(std::vector<std::int64_t>{1, 2, q.dp}));
    p.recompute = static_cast<wl::Recompute>(r.range(0, 2));
    p.seq_len = r.pick(std::vector<std::int64_t>{128, 512, 1024, 2048, 4096, 8192, 32768});
    if (a.max_position > 0) p.seq_len = std::min(p.seq_len, a.max_position);
    p.micro_batch = r.pick(std::vector<std::int64_t>{1, 1, 2, 4, 8});
    p.global_batch = p.micro_batch * q.dp * r.range(1, 16);
    static const std::vector<hw::Precision> precs{hw::Precision::bf16, hw::Precision::bf16, hw::Precision::fp16,
                                                  hw::Precision::fp8, hw::Precision::fp32, hw::Precision::tf32};
    p.precision.compute = r.pick(precs);
    if (p.precision.compute == hw::Precision::fp32) p.precision = {hw::Precision::fp32, 4, 4, 0, 4};
    if (r.chance(0.3)) p.precision.gradient_bytes = 4;
    p.optimizer = static_cast<wl::OptimizerKind>(r.range(0, 2));
    p.flash_attention = r.chance(0.8);
    p.attention_kernel = r.chance(0.5) ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
    p.kernels = r.chance(0.8) ? wl::KernelStyle::fused : wl::KernelStyle::eager;
    p.mixed_precision = r.chance(0.8) ? wl::MixedPrecision::megatron : wl::MixedPrecision::amp;
    p.overlap_grad_reduce = r.chance(0.7);
    p.overlap_param_gather = r.chance(0.7);
    p.overlap_tp_comm = r.chance(0.3);
    if (r.chance(0.5)) p.tokens_to_train = r.log_uniform(1e9, 1e13);
    if (r.chance(0.15)) {  // LoRA / QLoRA fine-tuning
      p.lora.rank = static_cast<int>(r.range(1, 256));
      p.lora.targets = static_cast<wl::LoraTargets>(r.range(0, 3));
      p.lora.base = static_cast<wl::LoraBase>(r.range(0, 3));
    }
    if (p.optimizer != wl::OptimizerKind::adamw_8bit && r.chance(0.2)) p.optimizer_states = wl::StateDtype::bf16;
    if (p.precision.compute == hw::Precision::fp8 && r.chance(0.3)) {
      p.precision.fp8_params = true;
      p.precision.weight_bytes = 1.0;
    }
    if (model::check_training_layout(a, p, t.sys).ok) return t;
  }
  return std::nullopt;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

namespace {
struct Bad {
  std::vector<std::string> out;
  void operator()(double v, const std::string& what) {
    if (!good(v)) out.push_back(fmt::format("{} = {}", what, v));
  }
};
}  // namespace

std::vector<std::string> bad_values(const model::TrainingMemory& m) {
  Bad b;
  b(m.weights.raw(), "memory.weights");
  b(m.gradients.raw(), "memory.gradients");
  b(m.master_weights.raw(), "memory.master_weights");
  b(m.optimizer_states.raw(), "memory.optimizer_states");
  b(m.activations.raw(), "memory.activations");
  b(m.logits.raw(), "memory.logits");
  b(m.cuda_context.raw(), "memory.cuda_context");
  b(m.nccl_buffers.raw(), "memory.nccl_buffers");
  b(m.fragmentation.raw(), "memory.fragmentation");
  b(m.total.raw(), "memory.total");
  b(m.capacity.raw(), "memory.capacity");
  return b.out;
}

std::vector<std::string> bad_values(const model::TrainingEstimate& e) {
  Bad b;
  const auto& s = e.step;
  b(s.gemm.raw(), "step.gemm");
  b(s.attention.raw(), "step.attention");
  b(s.elementwise.raw(), "step.elementwise");
  b(s.embedding_loss.raw(), "step.embedding_loss");
  b(s.recompute.raw(), "step.recompute");
  b(s.comm_exposed.raw(), "step.comm_exposed");
  b(s.bubble.raw(), "step.bubble");
  b(s.optimizer.raw(), "step.optimizer");
  b(s.total.raw(), "step.total");
  b(e.step_time.raw(), "step_time");
  b(e.tokens_per_s, "tokens_per_s");
  b(e.mfu, "mfu");
  b(e.hfu, "hfu");
  b(e.model_flops_per_step.raw(), "model_flops_per_step");
  b(e.hardware_flops_per_step.raw(), "hardware_flops_per_step");
  b(static_cast<double>(e.micro_batches), "micro_batches");
  b(e.bubble_fraction, "bubble_fraction");
  for (const auto& c : e.comm) {
    b(c.bytes_per_step.raw(), "comm[" + c.kind + "].bytes_per_step");
    b(c.time.raw(), "comm[" + c.kind + "].time");
    b(c.exposed.raw(), "comm[" + c.kind + "].exposed");
  }
  if (e.time_to_train) b(e.time_to_train->raw(), "time_to_train");
  if (e.gpu_hours) b(*e.gpu_hours, "gpu_hours");
  if (e.cost) b(e.cost->raw(), "cost");
  if (e.energy) b(e.energy->raw(), "energy");
  for (const auto& op : e.layer_ops) {
    b(op.flops.raw(), "layer_ops[" + op.name + "].flops");
    b(op.bytes.raw(), "layer_ops[" + op.name + "].bytes");
    b(op.time.raw(), "layer_ops[" + op.name + "].time");
  }
  auto m = bad_values(e.memory);
  b.out.insert(b.out.end(), m.begin(), m.end());
  return b.out;
}

std::vector<std::string> bad_values(const model::ForwardCost& f) {
  Bad b;
  b(f.total.raw(), "forward.total");
  b(f.stage.raw(), "forward.stage");
  b(f.gemm.raw(), "forward.gemm");
  b(f.attention.raw(), "forward.attention");
  b(f.elementwise.raw(), "forward.elementwise");
  b(f.comm.raw(), "forward.comm");
  b(f.overhead.raw(), "forward.overhead");
  b(f.pp_transfer.raw(), "forward.pp_transfer");
  b(f.flops.raw(), "forward.flops");
  b(f.weight_bytes.raw(), "forward.weight_bytes");
  b(f.kv_bytes.raw(), "forward.kv_bytes");
  b(static_cast<double>(f.kernels), "forward.kernels");
  b(f.tokens, "forward.tokens");
  for (const auto& op : f.ops) {
    b(op.flops.raw(), "forward.ops[" + op.name + "].flops");
    b(op.bytes.raw(), "forward.ops[" + op.name + "].bytes");
    b(op.time.raw(), "forward.ops[" + op.name + "].time");
  }
  return b.out;
}

std::vector<std::string> bad_values(const model::SteadyState& s) {
  Bad b;
  b(s.iteration.raw(), "steady.iteration");
  b(s.itl_decode_only.raw(), "steady.itl_decode_only");
  b(s.prefill.raw(), "steady.prefill");
  b(s.ttft.raw(), "steady.ttft");
  b(s.request_latency.raw(), "steady.request_latency");
  b(s.output_tokens_per_s, "steady.output_tokens_per_s");
  b(s.input_tokens_per_s, "steady.input_tokens_per_s");
  b(s.requests_per_s, "steady.requests_per_s");
  return b.out;
}

std::vector<std::string> bad_values(const model::ServingMemory& m) {
  Bad b;
  b(m.kv_bytes_per_token.raw(), "kv_bytes_per_token");
  b(m.kv_bytes_per_token_per_gpu.raw(), "kv_bytes_per_token_per_gpu");
  b(m.kv_bytes_per_sequence.raw(), "kv_bytes_per_sequence");
  b(m.kv_bytes_per_sequence_per_gpu.raw(), "kv_bytes_per_sequence_per_gpu");
  b(m.weights_total.raw(), "weights_total");
  b(m.kv_total.raw(), "kv_total");
  b(m.memory_needed.raw(), "memory_needed");
  b(static_cast<double>(m.max_concurrency), "max_concurrency");
  b(static_cast<double>(m.max_context_tokens), "max_context_tokens");
  b(static_cast<double>(m.kv_token_capacity), "kv_token_capacity");
  b(m.token.per_layer.raw(), "token.per_layer");
  b(m.token.per_token_model.raw(), "token.per_token_model");
  if (m.gpus_needed) b(static_cast<double>(*m.gpus_needed), "gpus_needed");
  if (m.gpus_needed_pooled) b(static_cast<double>(*m.gpus_needed_pooled), "gpus_needed_pooled");
  for (const auto& s : m.stages) {
    const std::string w = fmt::format("stages[{}].", s.layers.stage);
    b(s.capacity.raw(), w + "capacity");
    b(s.budget.raw(), w + "budget");
    b(s.weights.raw(), w + "weights");
    b(s.activations.raw(), w + "activations");
    b(s.cuda_graphs.raw(), w + "cuda_graphs");
    b(s.cuda_context.raw(), w + "cuda_context");
    b(s.nccl.raw(), w + "nccl");
    b(s.kv_used.raw(), w + "kv_used");
    b(s.sequence.per_sequence.raw(), w + "sequence.per_sequence");
    b(s.sequence.unique.raw(), w + "sequence.unique");
    b(s.sequence.exact.raw(), w + "sequence.exact");
    b(s.sequence.block_waste.raw(), w + "sequence.block_waste");
    b(static_cast<double>(s.max_concurrency), w + "max_concurrency");
    // kv_pool and free may be negative by design: "does not fit" is a value (DESIGN.md §2.5); they must be finite.
    if (!std::isfinite(s.kv_pool.raw())) b.out.push_back(w + "kv_pool not finite");
    if (!std::isfinite(s.free.raw())) b.out.push_back(w + "free not finite");
  }
  return b.out;
}

std::vector<std::string> bad_values(const model::ServingPlanResult& p) {
  Bad b;
  b(p.kv_bytes_per_token.raw(), "plan.kv_bytes_per_token");
  auto cand = [&](const model::ServingCandidate& c, const std::string& w) {
    b(static_cast<double>(c.batch), w + ".batch");
    b(static_cast<double>(c.max_batch_memory), w + ".max_batch_memory");
    b(c.queue_wait.raw(), w + ".queue_wait");
    b(c.ttft.raw(), w + ".ttft");
    b(c.itl.raw(), w + ".itl");
    b(c.replica_requests_per_s, w + ".replica_requests_per_s");
    b(static_cast<double>(c.replicas), w + ".replicas");
    b(static_cast<double>(c.gpus), w + ".gpus");
    b(c.cost_rate.raw(), w + ".cost_rate");
    b(c.cost_per_mtok_usd, w + ".cost_per_mtok_usd");
    for (auto& s : bad_values(c.state)) b.out.push_back(w + "." + s);
  };
  if (p.best) cand(*p.best, "best");
  for (std::size_t i = 0; i < p.per_tp.size(); ++i) cand(p.per_tp[i], fmt::format("per_tp[{}]", i));
  if (p.disaggregated) {
    const auto& d = *p.disaggregated;
    b(static_cast<double>(d.prefill_gpus), "disagg.prefill_gpus");
    b(static_cast<double>(d.decode_gpus), "disagg.decode_gpus");
    b(static_cast<double>(d.decode_batch), "disagg.decode_batch");
    b(d.kv_transfer.raw(), "disagg.kv_transfer");
    b(d.ttft.raw(), "disagg.ttft");
    b(d.itl.raw(), "disagg.itl");
    b(static_cast<double>(d.gpus), "disagg.gpus");
    b(d.cost_per_mtok_usd, "disagg.cost_per_mtok_usd");
  }
  return b.out;
}

}  // namespace gpuplan::prop
