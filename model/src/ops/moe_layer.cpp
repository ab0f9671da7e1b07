// One MoE layer on one GPU, the same for training and serving (moe_layer.hpp).
#include "moe_layer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "moe_cost.hpp"

namespace gpuplan::model::detail {

MoeExpertWork moe_expert_work(const MoeSharding& s, std::int64_t experts, std::int64_t top_k, std::int64_t width) {
  MoeExpertWork w;
  const double E = double(std::max<std::int64_t>(1, experts)), k = double(std::max<std::int64_t>(1, top_k));
  const double ep = double(std::max<std::int64_t>(1, s.ep));
  const std::int64_t etp = std::max<std::int64_t>(1, s.etp), tp = std::max<std::int64_t>(1, s.tp);
  w.imbalance = s.imbalance > 0.0 ? s.imbalance : 1.0;  // < 1 only under a capacity that drops tokens
  w.group_tokens = s.tokens * (ep * double(etp) / double(tp));  // exactly T when ep·etp = tp
  w.local = E / ep;
  // Uniform top-k routing: an expert is missed by one token with probability 1 − k/E, by all of them with that to
  // the power of the tokens; at training's thousands of tokens every expert is touched.
  w.touched = w.local * (1.0 - std::pow(1.0 - k / E, w.group_tokens));
  w.rows = w.group_tokens * k / ep * w.imbalance;
  w.groups = at_least_one(w.touched);
  w.rows_per_expert = at_least_one(w.rows / std::max(1e-9, w.touched));
  w.width = width / etp > 0 ? width / etp : 1;
  return w;
}

OpCost moe_expert_gemm(OpCost batched, const MoeExpertWork& w, const Device& d) {
  if (double(w.groups) != w.touched) {
    // The expected (fractional) count of touched experts: the groups' work scales, the kernel's fixed cost does not.
    const units::Seconds launch = kernel_fixed(d, OpClass::gemm);
    const double f = w.touched / double(w.groups);
    batched.time = (batched.time - launch) * f + launch;
    batched.flops = batched.flops * f;
    batched.bytes = batched.bytes * f;
  }
  return grouped_gemm(std::move(batched));
}

units::Seconds moe_all_to_all(double rows, double row_bytes, const CommGroup& g, double imbalance) {
  return collective_time(Collective::all_to_all, units::bytes(rows * row_bytes), g) * (imbalance > 0.0 ? imbalance : 1.0);
}

units::Seconds MoeLayerTerms::total() const {
  units::Seconds s{};
  for (const auto& x : t) s += x;
  return s;
}

Derivation explain_moe_terms(const std::string& id, const std::string& pass, const MoeLayerTerms& m,
                             const std::string& sharding, const Origin& imbalance_origin) {
  using units::format;
  const MoeExpertWork& w = m.work;
  Derivation r{id,
               "One MoE layer on one GPU (" + pass + "): router, dispatch, expert GEMMs, combine, imbalance",
               "t_moe = t_router + t_dispatch + t_expert GEMMs + t_combine + t_shared + t_routing + t_host ; grouped "
               "GEMM = a·(batched GEMM of ⌈touched⌉ experts × rows/expert)·touched/⌈touched⌉ + t₀ ; the busiest EP "
               "rank (ι) sets the pace: expert rows ×ι, all-to-alls ×ι",
               {},
               "",
               {},
               {}};
  auto in = [&](std::string sym, std::string value, std::string meaning, Origin o = Origin::derived("moe_layer")) {
    r.inputs.push_back({std::move(sym), std::move(value), std::move(meaning), std::move(o)});
  };
  in("sharding", sharding, "attention TP, expert TP (etp), EP; the EP × ETP group routes T·ep·etp/tp tokens");
  in("tokens routed", units::format_number(w.group_tokens, 4), "distinct tokens the EP × ETP group routes");
  in("experts per GPU", units::format_number(w.local, 4),
     fmt::format("E/ep; touched {} (uniform top-k: local·(1 − (1 − k/E)^tokens)), {} rows each, width {}",
                 units::format_number(w.touched, 4), w.rows_per_expert, w.width));
  in("t_router", format(m.t[MoeLayerTerms::router]), "router GEMM h → E (and its softmax/top-k where priced)");
  in("t_dispatch", format(m.t[MoeLayerTerms::dispatch]),
     "token rows to their experts' GPUs (all-to-all; 0 at EP 1; training under Megatron-Core: with the routing "
     "weights' own all-to-all)");
  in("t_expert GEMMs", format(m.t[MoeLayerTerms::expert_gemm]),
     fmt::format("grouped GEMMs (a = {}, t₀ = {}) with the experts' activation", units::format_number(kGroupedGemmTimeFactor, 4),
                 format(units::Seconds(kGroupedGemmFixedSeconds))),
     Origin::measurement("our H100: torch._grouped_mm vs torch.bmm, 147 bf16 shapes "
                         "(data/validation/measured/h100-sxm5-80gb/moe_grouped_gemm.json); other GPUs and fp8 assumed "
                         "the same"));
  in("t_combine", format(m.t[MoeLayerTerms::combine]), "the expert outputs back to their tokens' GPUs (0 at EP 1)");
  in("t_shared", format(m.t[MoeLayerTerms::shared]), "shared experts (dense GEMMs every token passes through)");
  in("t_routing", format(m.t[MoeLayerTerms::routing]), "token permute/unpermute, the routing kernels, fixed-capacity buffers");
  in("t_host", format(m.t[MoeLayerTerms::host]), "the dispatcher's host synchronisations (0 when sync-free)");
  in("ι", units::format_number(w.imbalance, 3), "load imbalance: routed rows of the busiest EP rank over the mean",
     imbalance_origin);
  in("t_imbalance", format(m.imbalance),
     "what ι adds to the expert GEMMs and the all-to-alls (inside them; priced again at ι = 1)");
  r.result = fmt::format("{} (router {}, dispatch {}, expert GEMMs {}, combine {}, shared {}, imbalance {})",
                         format(m.total()), format(m.t[MoeLayerTerms::router]), format(m.t[MoeLayerTerms::dispatch]),
                         format(m.t[MoeLayerTerms::expert_gemm]), format(m.t[MoeLayerTerms::combine]),
                         format(m.t[MoeLayerTerms::shared]), format(m.imbalance));
  return r;
}

}  // namespace gpuplan::model::detail
