#pragma once
// Internal to comm/: the algorithms collective_cost chooses among (collective_algorithms.cpp), each evaluated on one
// group as a Plan: ring, double binary tree, NVLS, hierarchical, CollNet (SHARP), all-to-all and send/recv; the evaluation context
// (Ctx) with its derivation inputs. In its own namespace: memory_core.hpp has a detail::Ctx of its own.
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model::collective_algorithms {

using units::Bandwidth;
using units::Bytes;
using units::Seconds;

/// One algorithm evaluated on one group: its time split into latency and transfer, and (Explain::on) its formula.
struct Plan {
  CollectiveAlgorithm algo = CollectiveAlgorithm::ring;
  bool valid = false;
  std::string invalid;  ///< why the algorithm does not apply
  /// Why `automatic` passes over a valid plan (empty: it competes): a form NCCL does not run for this op, priced only
  /// when a caller asks for it by name.
  std::string on_request_only;
  Seconds latency{}, transfer{};
  std::string formula;
  std::vector<DerivationInput> inputs;
  std::vector<Derivation> children;
  std::vector<std::string> notes;
  [[nodiscard]] Seconds time() const { return latency + transfer; }
};

/// The part of an origin text that backs one number (collective_algorithms.cpp).
Origin origin_part(const std::string& text, std::string_view key, OriginKind kind);
/// The origin of a tier's number `key` (α, BW, η, gain).
Origin tier_origin(const LinkTier& t, std::string_view key, OriginKind kind);

struct Ctx {
  Collective op;
  Bytes S;
  int n, s, d;  // ranks, ranks per scale-up domain, domains
  const LinkTier& up;
  const LinkTier* out;  // non-null whenever d > 1
  Seconds t0;           // per-call base latency (CommGroup::call_latency)
  const std::string& t0_origin;
  bool explain;
  int ctas = 0;  // CommGroup::max_ctas: 0 = NCCL's own channel count
  bool collnet = false;  // CommGroup::collnet: the run lets NCCL reduce in the scale-out switches (SHARP)

  /// The scale-up rate per direction before η: the link's, or ctas × one CTA's where the communicator's CTAs are
  /// capped below what the link needs.
  [[nodiscard]] Bandwidth raw_up() const {
    return capped() ? std::min(up.uni_per_gpu, up.per_cta * double(ctas)) : up.uni_per_gpu;
  }
  [[nodiscard]] bool capped() const { return ctas > 0 && up.per_cta > Bandwidth(0); }
  [[nodiscard]] Bandwidth bw_up() const { return raw_up() * up.bus_efficiency; }
  [[nodiscard]] Bandwidth bw_out() const { return out->uni_per_gpu * out->bus_efficiency; }
  /// The rates of NCCL's point-to-point path (send/recv, all-to-all) on each tier.
  [[nodiscard]] Bandwidth p2p_up() const { return raw_up() * up.p2p_eta(); }
  [[nodiscard]] Bandwidth p2p_out() const { return out->uni_per_gpu * out->p2p_eta(); }
  /// Bandwidth of a ring or tree that spans domains: NCCL spreads its channels over all s NICs of the group's GPUs
  /// in a domain, and each channel crosses every domain boundary once, so the rate is the lesser of the scale-up
  /// rate and s × the per-GPU scale-out rate (tuning.cc: busBw = nChannels × bwInter when nNodes > 2). A ring
  /// channel leaves a domain through one NIC, so with its CTAs capped at c only min(s, c) NICs carry it.
  [[nodiscard]] Bandwidth bw_spanning() const {
    if (d <= 1) return bw_up();
    const Bandwidth across = bw_out() * double(ctas > 0 ? std::min(s, ctas) : s);
    return s > 1 ? std::min(bw_up(), across) : bw_out();
  }

  // ---- derivation inputs ----
  void add_common(Plan& p) const {
    p.inputs.push_back({"S", units::format(S), "bytes per rank as NCCL counts them", Origin::derived("caller")});
    p.inputs.push_back({"n", std::to_string(n), "ranks in the group", Origin::derived("parallel layout")});
    if (d > 1) {
      p.inputs.push_back({"s", std::to_string(s), "ranks per scale-up domain", Origin::derived("resolve_group")});
      p.inputs.push_back({"d", std::to_string(d), "scale-up domains spanned", Origin::derived("resolve_group")});
    }
  }
  void add_t0(Plan& p) const {
    p.inputs.push_back({"t₀", units::format(t0), "base latency per collective call",
                        t0_origin.empty() ? Origin::user("given with the group") : Origin::constant(t0_origin)});
  }
  void add_tier(Plan& p, const LinkTier& t, std::string_view suffix, bool gain = false) const {
    const std::string sfx(suffix);
    p.inputs.push_back({"α" + sfx, units::format(t.latency), "per-step latency, " + t.name,
                        tier_origin(t, "α", OriginKind::constant)});
    p.inputs.push_back({"BW" + sfx, units::format(t.uni_per_gpu), "per-GPU per-direction spec, " + t.name,
                        tier_origin(t, "BW", OriginKind::datasheet)});
    add_cta_cap(p, t, sfx);
    p.inputs.push_back({"η" + sfx, units::format_number(t.bus_efficiency, 3), "NCCL bus efficiency, " + t.name,
                        tier_origin(t, "η", OriginKind::derived)});
    if (gain)
      p.inputs.push_back({"g", units::format_number(t.in_network_gain, 3), "NVLS busbw gain over the ring",
                          tier_origin(t, "gain", OriginKind::derived)});
  }
  /// With the communicator's CTAs capped: the cap, one CTA's rate, and the BW it leaves (the scale-up tier's BW in
  /// the formulas stands for min(BW, c·BW_cta); a ring across domains leaves through min(s, c) NICs).
  void add_cta_cap(Plan& p, const LinkTier& t, const std::string& sfx) const {
    if (ctas <= 0) return;
    p.inputs.push_back({"c", std::to_string(ctas), "CTAs (NCCL channels) the communicator may use",
                        Origin::user("max CTAs of the communicator (--dp-max-ctas)")});
    if (&t != &up || !capped()) return;
    p.inputs.push_back({"BW_cta" + sfx, units::format(t.per_cta), "what one CTA moves per direction, " + t.name,
                        Origin{OriginKind::constant, t.per_cta_origin}});
    p.notes.push_back(fmt::format("CTAs capped at c = {}: BW{} → min(BW{}, c·BW_cta{}) = {}", ctas, sfx, sfx, sfx,
                                  units::format(raw_up())));
  }
  /// A tier as NCCL's point-to-point path sees it: α, BW, η_p2p and (with `fill`) the pipeline fill F.
  void add_p2p_tier(Plan& p, const LinkTier& t, std::string_view suffix, bool fill) const {
    const std::string sfx(suffix);
    p.inputs.push_back({"α" + sfx, units::format(t.latency), "per-step latency, " + t.name,
                        tier_origin(t, "α", OriginKind::constant)});
    p.inputs.push_back({"BW" + sfx, units::format(t.uni_per_gpu), "per-GPU per-direction spec, " + t.name,
                        tier_origin(t, "BW", OriginKind::datasheet)});
    add_cta_cap(p, t, sfx);
    p.inputs.push_back({"η_p2p" + sfx, units::format_number(t.p2p_eta(), 3),
                        "NCCL point-to-point efficiency, " + t.name,
                        t.p2p_efficiency > 0
                            ? origin_part(t.p2p_origin, "η_p2p",
                                          t.p2p_origin.rfind("η_p2p: calibration", 0) == 0 ? OriginKind::calibration
                                                                                           : OriginKind::measurement)
                            : Origin::assumption("the tier's bus efficiency η: no p2p figure given with this tier")});
    if (fill)
      p.inputs.push_back({"F" + sfx, units::format(t.p2p_fill), "p2p pipeline fill per rank (channels × chunk)",
                          t.p2p_origin.empty() ? Origin::assumption("none given with this tier")
                                               : origin_part(t.p2p_origin, "fill", OriginKind::constant)});
  }
};

/// The bus factor's formula as text, for the derivations (collectives.cpp).
std::string_view bus_factor_text(Collective op);

/// Each algorithm on the context's group: valid or why not, its latency and transfer time, its derivation inputs.
Plan ring(const Ctx& c);
Plan tree(const Ctx& c);
Plan nvls(const Ctx& c);
Plan hierarchical(const Ctx& c);
Plan collnet(const Ctx& c);
Plan all_to_all(const Ctx& c);
Plan send_recv(const Ctx& c);

}  // namespace gpuplan::model::collective_algorithms
