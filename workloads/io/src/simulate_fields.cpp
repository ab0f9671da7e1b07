// `gpuplan simulate`'s own options (scenario_fields.hpp simulate_fields): the arrivals, the request lengths and the
// batching policy, each once with its flag, GUI label, help and default. cli/cmd_simulate.cpp generates the options,
// the GUI's simulation panel takes the labels and tooltips, `gpuplan schema` and docs/scenario.md print the rows. The
// trace, the lengths and the seed are the autoscale load's rows (autoscale_fields.cpp): one meaning for both commands.
#include <cassert>

#include "gpuplan/wl_io/scenario_fields.hpp"
#include "scenario_row.hpp"

namespace gpuplan::wl_io {

using json_io::FieldType;

namespace {
using scenario_row::row;

/// The autoscale load's row of `key`, shared by simulate.
ScenarioField load_row(std::string_view key) {
  const ScenarioField* f = find_field(autoscale_load_fields(), key);
  assert(f != nullptr && "simulate shares a row the autoscale load table does not have");
  return f != nullptr ? *f : ScenarioField{};
}

ScenarioFieldTable make_simulate_fields() {
  ScenarioFieldTable t;
  t.push_back(load_row("trace"));
  t.insert(t.end(), {
      row("arrival", FieldType::string, "Arrivals")
          .flags({"--arrival"})
          .help("synthetic arrival process: poisson or gamma")
          .otherwise("poisson")
          .choices({"poisson", "gamma"})
          .doc("synthetic arrival process: poisson (exponential gaps) or gamma (Gamma gaps of coefficient of "
               "variation cv; > 1: bursts, as BurstGPT fits its traces)"),
      row("cv", FieldType::number, "CV")
          .flags({"--cv"})
          .help("gamma arrivals: coefficient of variation of the gaps (> 1: bursty)")
          .otherwise("1")
          .doc("gamma arrivals: coefficient of variation of the gaps, in (0, 100] (1: Poisson; > 1: bursty)"),
      row("requests", FieldType::integer, "Requests")
          .flags({"--requests"})
          .help("synthetic requests to simulate")
          .otherwise("1000")
          .range(1, 1e8)
          .doc("synthetic requests to simulate"),
  });
  t.push_back(load_row("input_lengths"));
  t.push_back(load_row("output_lengths"));
  t.push_back(load_row("seed"));
  t.insert(t.end(), {
      row("series_s", FieldType::number, "Series interval")
          .flags({"--series-s"})
          .help("print a time series sample every this many simulated seconds")
          .doc("a time-series sample every this many simulated seconds, in (0, 10⁹)"),
      row("batching", FieldType::string, "Batching")
          .flags({"--batching"})
          .help("continuous (vLLM v1 scheduler) or static (batches of --static-batch requests padded to the longest, "
                "run to the longest output, no joins)")
          .otherwise("continuous")
          .choices({"continuous", "static"})
          .doc("continuous (vLLM v1's scheduler: requests join and leave at every step) or static (batches of "
               "static_batch requests, padded to the longest prompt, each run to its longest output; no joins)"),
      row("static_batch", FieldType::integer, "Batch B")
          .flags({"--static-batch"})
          .help("static batching: requests per batch")
          .otherwise("the engine's max_num_seqs")
          .range(1, 1e6)
          .doc("static batching: requests per batch (fewer when the padded batch would not fit the KV cache)"),
      row("batch_timeout_s", FieldType::number, "Timeout")
          .flags({"--batch-timeout-s"})
          .help("static batching: a partial batch starts once its oldest request has waited this long (0: as soon "
                "as the engine is free)")
          .otherwise("0")
          .doc("static batching: seconds a partial batch waits for its oldest request before it starts, in [0, 10⁹) "
               "(0: as soon as the engine is free)"),
  });
  return t;
}
}  // namespace

const ScenarioFieldTable& simulate_fields() {
  static const ScenarioFieldTable t = make_simulate_fields();
  return t;
}

}  // namespace gpuplan::wl_io
