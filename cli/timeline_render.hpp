#pragma once
// Renderings of the step and memory timelines (model/timeline.hpp): a text Gantt chart / memory chart with their
// totals, JSON (every span and sample), and SVG (one <rect> per span with its terms as a <title> tooltip; a step
// line per pipeline stage for memory). Rendering only: every number comes from the model.
#include <string>

#include <nlohmann/json.hpp>

#include "gpuplan/model/timeline.hpp"

namespace gpuplan::cli {

/// The output formats of --timeline and --memory-timeline.
enum class TimelineFormat { text, svg, json };
/// Parses a --timeline / --memory-timeline value; false for anything else.
bool parse_timeline_format(const std::string& s, TimelineFormat& out);
inline constexpr const char* kTimelineFormats = "text, svg or json";

std::string timeline_text(const model::StepTimeline& t, int width = 100);
nlohmann::json timeline_json(const model::StepTimeline& t);
std::string timeline_svg(const model::StepTimeline& t, const std::string& title);

std::string memory_timeline_text(const model::MemoryTimeline& m, int width = 100, int height = 14);
nlohmann::json memory_timeline_json(const model::MemoryTimeline& m);
std::string memory_timeline_svg(const model::MemoryTimeline& m, const std::string& title);

}  // namespace gpuplan::cli
