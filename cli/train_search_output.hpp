#pragma once
// The output of `gpuplan train --search` (cmd_train.cpp runs the search and assembles these): the ranked layouts as a
// table for people, as CSV (the stable columns of docs/search.md) and as JSON objects, and the "Why #1 beats #2"
// section. No model arithmetic here (DESIGN.md §2.1).
#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::cli {

/// The layouts as CSV rows with the stable columns (docs/search.md); `deadline` fills the meets_deadline column.
Table points_table(const std::vector<model::SearchPoint>& points, bool deadline);

/// Every evaluated layout, streamed in rank order; each row's numbers are evaluated again (bit-identical).
void write_points_csv(std::ostream& os, const std::vector<model::RankedLayout>& all, bool deadline,
                      const wl::TransformerArch& arch, const wl::TrainingPlan& base, const model::TrainingSystem& sys);

/// One layout as a JSON object (its layout, step time, throughput, memory, and time, cost and tokens/$ when known).
nlohmann::ordered_json point_json(const model::SearchPoint& p, std::uint64_t rank);

/// The top layouts as a table for people.
Table top_table(const std::vector<model::SearchPoint>& top, bool several_gpu_counts, bool moe, bool tokens, bool price);

/// "Why #1 beats #2": the terms of the step that differ, and the memory headroom.
Section why_section(const model::LayoutComparison& c, const model::SearchPoint& a, const model::SearchPoint& b,
                    model::RankBy rank_by);

}  // namespace gpuplan::cli
