// What `gpuplan simulate` and `gpuplan autoscale` share (sim_common.hpp).
#include "sim_common.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/model/sim_kv.hpp"

namespace gpuplan::cli {

using nlohmann::ordered_json;

std::optional<model::LengthSampler> parse_sampler(const std::string& spec, const std::string& where, Diagnostics& d) {
  auto bad = [&](const std::string& why) {
    d.error("", where, fmt::format("'{}': {} (expected fixed:N, uniform:LOW,HIGH or lognormal:MEAN,SD)", spec, why));
    return std::nullopt;
  };
  const auto colon = spec.find(':');
  if (colon == std::string::npos) return bad("no distribution name");
  const std::string kind = spec.substr(0, colon);
  std::vector<double> v;
  std::string rest = spec.substr(colon + 1);
  std::size_t pos = 0;
  while (pos <= rest.size()) {
    auto comma = rest.find(',', pos);
    if (comma == std::string::npos) comma = rest.size();
    const std::string t = rest.substr(pos, comma - pos);
    try {
      std::size_t used = 0;
      const double x = std::stod(t, &used);
      if (used != t.size() || !std::isfinite(x)) return bad("'" + t + "' is not a number");
      v.push_back(x);
    } catch (...) {
      return bad("'" + t + "' is not a number");
    }
    pos = comma + 1;
  }
  model::LengthSampler s;
  if (kind == "fixed") {
    if (v.size() != 1 || v[0] < 1 || v[0] > 1e7) return bad("fixed takes one length in [1, 10⁷] tokens");
    s.kind = model::LengthSampler::Kind::fixed;
    s.a = s.b = v[0];
  } else if (kind == "uniform") {
    if (v.size() != 2 || v[0] < 1 || v[1] < v[0] || v[1] > 1e7)
      return bad("uniform takes LOW,HIGH with 1 ≤ LOW ≤ HIGH ≤ 10⁷");
    s.kind = model::LengthSampler::Kind::uniform;
    s.a = v[0];
    s.b = v[1];
  } else if (kind == "lognormal") {
    if (v.size() != 2 || v[0] < 1 || v[0] > 1e7 || v[1] <= 0 || v[1] > 1e7)
      return bad("lognormal takes MEAN,SD with MEAN in [1, 10⁷] and SD in (0, 10⁷]");
    s.kind = model::LengthSampler::Kind::lognormal;
    s.a = v[0];
    s.b = v[1];
  } else {
    return bad("unknown distribution '" + kind + "'");
  }
  return s;
}

ordered_json stats_json(const model::LatencyStats& s) {
  return ordered_json{{"mean_s", s.mean}, {"p50_s", s.p50}, {"p90_s", s.p90},
                      {"p99_s", s.p99},   {"max_s", s.max}, {"samples", s.samples}};
}

std::string stats_text(const model::LatencyStats& s) {
  namespace u = gpuplan::units;
  auto f = [](double x) { return u::format(u::Seconds(x)); };
  return fmt::format("mean {}, p50 {}, p90 {}, p99 {} ({} samples)", f(s.mean), f(s.p50), f(s.p90), f(s.p99),
                     s.samples);
}

std::optional<model::SimOptions> replica_sim_options(ResolvedServing& rs, const std::vector<model::SimRequest>& requests) {
  if (requests.empty()) return std::nullopt;
  // KV blocks of the replica from the serving memory model (the engine's pool at this layout).
  const model::SimKvPool pool = model::sim_kv_pool(rs.arch, rs.params, *rs.sys.gpu, rs.memory, rs.perf, requests);
  if (!pool.fits) {
    Diagnostics d2;
    d2.error("", "--tp", fmt::format("{} does not fit on TP {} of {}: no KV block is left for requests", rs.arch.id,
                                     rs.perf.tp, rs.sys.gpu->info.id));
    report(d2);
    return std::nullopt;
  }
  model::SimOptions opt;
  opt.block_size = pool.block_size;
  opt.kv_blocks = pool.blocks;
  rs.perf.kv_block_tokens = pool.block_size;  // prefix-cache hits in the engine's blocks
  return opt;
}

}  // namespace gpuplan::cli
