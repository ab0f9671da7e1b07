// Issue #24's yardstick over a validated set: its priced cases by family (GPU generation × dense/MoE, then by scale),
// each with its median signed and absolute error, judged against the targets.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "bands.hpp"

namespace gpuplan::cli {

namespace {
int rank_of(const std::string& v, std::initializer_list<const char*> order) {
  int i = 0;
  for (const char* o : order) {
    if (v == o) return i;
    ++i;
  }
  return i;
}

/// Sort key: generation, dense before MoE, the family row before its scale rows, scales small to large.
std::tuple<int, int, int, int> key_of(const model::Regime& r, bool by_scale) {
  return {rank_of(r.generation, {"Ampere", "Hopper", "Blackwell", "other"}), rank_of(r.arch, {"dense", "moe"}),
          by_scale ? 1 : 0, by_scale ? rank_of(r.scale, {"1 node", "<=256 GPUs", "<=2048 GPUs", ">2048 GPUs"}) : 0};
}

struct Acc {
  std::string name;
  std::vector<double> speed, abs;
  int out_of_bands = 0, within_10 = 0;
};
}  // namespace

std::vector<FamilyStats> family_stats(const ValidationSummary& s) {
  std::map<std::tuple<int, int, int, int>, Acc> acc;
  for (const auto& c : s.cases) {
    if (c.status.rfind("ok", 0) != 0 || !c.error || c.regime.generation.empty()) continue;
    const auto t = measured_over_predicted_time(c);
    if (!t) continue;
    for (const bool by_scale : {false, true}) {
      auto& a = acc[key_of(c.regime, by_scale)];
      a.name = c.regime.generation + " " + c.regime.arch + (by_scale ? ", " + c.regime.scale : "");
      a.speed.push_back(std::copysign(std::fabs(*c.error), *t - 1.0));
      a.abs.push_back(std::fabs(*c.error));
      a.out_of_bands += c.regime.kind.empty() ? 1 : 0;
      a.within_10 += std::fabs(*c.error) <= 0.10 ? 1 : 0;
    }
  }
  std::vector<FamilyStats> out;
  for (const auto& [k, a] : acc) {
    FamilyStats f;
    f.family = a.name;
    f.by_scale = std::get<2>(k) == 1;
    f.cases = static_cast<int>(a.speed.size());
    f.out_of_bands = a.out_of_bands;
    f.median_speed_error = model::quantile(a.speed, 0.5);
    f.median_abs_error = model::quantile(a.abs, 0.5);
    f.within_10 = static_cast<double>(a.within_10) / f.cases;
    f.judged = f.cases >= kFamilyMinCases;
    f.meets = f.judged && f.median_abs_error <= kFamilyMaxMedianAbs && std::fabs(f.median_speed_error) <= kFamilyMaxMedianSigned;
    out.push_back(f);
  }
  return out;
}

namespace {
bool several_families(const std::vector<FamilyStats>& fams) {
  return std::count_if(fams.begin(), fams.end(), [](const FamilyStats& f) { return !f.by_scale; }) >= 2;
}
}  // namespace

std::string render_families_markdown(const ValidationSummary& s) {
  const auto fams = family_stats(s);
  if (!several_families(fams)) return "";
  int judged = 0, meet = 0;
  std::string rows;
  for (const auto& f : fams) {
    if (!f.by_scale) {
      judged += f.judged ? 1 : 0;
      meet += f.meets ? 1 : 0;
    }
    const std::string verdict = !f.judged ? fmt::format("— (under {} cases)", kFamilyMinCases) : f.meets ? "yes" : "no";
    rows += fmt::format("| {}{} | {}{} | {:+.1f}% | {:.1f}% | {:.0f}% | {} |\n", f.by_scale ? "· " : "", f.family,
                        f.cases, f.out_of_bands > 0 ? fmt::format(" ({} out of bands)", f.out_of_bands) : "",
                        f.median_speed_error * 100.0, f.median_abs_error * 100.0, f.within_10 * 100.0, verdict);
  }
  std::string o = fmt::format(
      "By family (GPU generation × dense/MoE, then by scale). Issue #24's target for a family of at least {} cases: "
      "median |error| ≤ {:.0f}% and median signed error within ±{:.0f}%, signed = the error with its sign "
      "set so that positive means the model is optimistic (a throughput over, or a time under, the measured one). Cases kept out of the error bands (`not_in_bands`) count here. {} of the "
      "{} families with at least {} cases meet it.\n\n",
      kFamilyMinCases, kFamilyMaxMedianAbs * 100.0, kFamilyMaxMedianSigned * 100.0, meet, judged, kFamilyMinCases);
  o += "| family | cases | median signed | median \\|error\\| | within 10% | meets |\n"
       "| --- | ---: | ---: | ---: | ---: | --- |\n";
  return o + rows + "\n";
}

nlohmann::ordered_json families_json(const ValidationSummary& s) {
  auto a = nlohmann::ordered_json::array();
  const auto fams = family_stats(s);
  if (!several_families(fams)) return a;
  for (const auto& f : fams)
    a.push_back({{"family", f.family},
                 {"by_scale", f.by_scale},
                 {"cases", f.cases},
                 {"out_of_bands", f.out_of_bands},
                 {"median_signed_speed_error", f.median_speed_error},
                 {"median_abs_error", f.median_abs_error},
                 {"within_10", f.within_10},
                 {"meets_target", f.judged ? nlohmann::ordered_json(f.meets) : nlohmann::ordered_json(nullptr)}});
  return a;
}

}  // namespace gpuplan::cli
