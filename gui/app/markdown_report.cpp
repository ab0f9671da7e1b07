#include "markdown_report.hpp"

#include <fmt/format.h>

#include "compare_model.hpp"
#include "gpuplan/app/output.hpp"
#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {
namespace u = gpuplan::units;

namespace {
/// One heading level below the report's: a line's "## title" becomes "### title" (one '#' inserted as a character:
/// GCC 12's -Wrestrict misreads insert(pos, const char*) here).
void demote_headings(std::string& sec) {
  for (std::size_t p = 0; (p = sec.find("## ", p)) != std::string::npos; p += 4)
    if (p == 0 || sec[p - 1] == '\n') sec.insert(p, 1, '#');
}
}  // namespace

std::string markdown_report(const TrainingResult& t, const json_io::Json& scenario, const ServingResult& s,
                            const CompareModel* compare) {
  std::string o = "# gpuplan report\n\nExported from gpuplan-gui " GPUPLAN_VERSION
                  ". The sections are those `gpuplan train` and `gpuplan serve` print for the same inputs.\n\n";
  // Training.
  o += "## Training scenario\n\n```json\n" + scenario.dump(2) +
       "\n```\n\nReproduce: save it as `scenario.json`, then `gpuplan train --scenario scenario.json --format md`.\n\n";
  if (!t.valid || !t.resolved || t.gpus_evaluated.empty()) {
    o += "No training estimate: the scenario does not resolve.\n\n";
    for (const auto& d : t.diags.items()) o += "- " + d.to_string() + "\n";
    o += "\n";
  } else {
    const auto& est = t.gpus_evaluated[0].est;
    // One heading level below the report's: the CLI's "## title" becomes "### title".
    std::string sec = app::render_sections(app::training_sections(t.resolved->arch, t.gpus, t.resolved->sys, t.plan, est),
                                           app::Format::md);
    demote_headings(sec);
    o += sec;
    if (t.gpus_evaluated.size() > 1) {
      app::Table tab{{{"gpu", "GPU"}, {"step", "step time"}, {"tps", "tokens/s"}, {"mfu", "MFU"},
                      {"mem", "memory / GPU"}, {"ttt", "time to train"}, {"cost", "cost"}, {"ok", "feasible"}},
                     {}};
      for (const auto& g : t.gpus_evaluated) {
        const auto& e = g.est;
        const bool has = e.step_time.raw() > 0;
        tab.rows.push_back({g.gpu_name, has ? u::format(e.step_time) : "", has ? u::format_number(e.tokens_per_s, 4) : "",
                            has ? u::format(u::Ratio(e.mfu)) : "",
                            has ? u::format(e.memory.total, u::BytePrefix::binary) + " of " +
                                      u::format(e.memory.capacity, u::BytePrefix::binary)
                                : "",
                            e.time_to_train ? u::format(*e.time_to_train) : "", e.cost ? u::format(*e.cost) : "",
                            e.feasibility.ok ? "yes" : "no"});
      }
      o += "### The same plan on the compare GPUs\n\n" + tab.render(app::Format::md) + "\n";
    }
  }
  // Serving.
  if (s.valid && s.plan && s.planner) {
    o += "## Serving scenario\n\n```json\n" + s.scenario.dump(2) +
         "\n```\n\nReproduce: save it as `serving.json`, then `gpuplan serve --scenario serving.json --format md`.\n\n";
    std::string sec = app::render_sections(app::planner_sections(*s.planner, *s.plan), app::Format::md);
    demote_headings(sec);
    o += sec + "#### Best batch per TP size\n\n" + app::planner_table(*s.plan).render(app::Format::md) + "\n";
  }
  // Compare mode.
  if (compare != nullptr && compare->pinned()) {
    app::Table tab{{{"q", "quantity"}, {"a", "pinned (A)"}, {"b", "current (B)"}, {"d", "Δ = B − A"}, {"p", "Δ %"}}, {}};
    for (int r = 0; r < compare->rowCount(); ++r) {
      std::vector<std::string> row;
      for (int c = 0; c < CompareModel::kColumnCount; ++c)
        row.push_back(compare->data(compare->index(r, c)).toString().toStdString());
      tab.rows.push_back(row);
    }
    o += "## Compare: pinned (A) vs current (B)\n\n" + tab.render(app::Format::md) + "\n";
  }
  return o;
}

}  // namespace gpuplan::gui
