#pragma once
// What `gpuplan simulate` and `gpuplan autoscale` share: length-distribution flags, latency rendering and the KV blocks
// of one replica from the serving memory model.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/model/simulate.hpp"
#include "common.hpp"  // the application layer's names unqualified
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {

/// "fixed:N", "uniform:LOW,HIGH" or "lognormal:MEAN,SD" (tokens); a diagnostic at `where` (a flag or a file pointer)
/// when it does not parse or is out of range.
std::optional<model::LengthSampler> parse_sampler(const std::string& spec, const std::string& where, Diagnostics& d);

nlohmann::ordered_json stats_json(const model::LatencyStats& s);
std::string stats_text(const model::LatencyStats& s);

/// The engine of one replica at `rs`'s layout for `requests`: its KV blocks from the serving memory model at the mean
/// prompt + output (the engine's pool, its knobs included) and block size; sets rs.perf.kv_block_tokens (prefix-cache
/// hits in the engine's blocks). nullopt (the diagnostic printed) when no KV block is left: exit 3.
std::optional<model::SimOptions> replica_sim_options(ResolvedServing& rs, const std::vector<model::SimRequest>& requests);

}  // namespace gpuplan::cli
