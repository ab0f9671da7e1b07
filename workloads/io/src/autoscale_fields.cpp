// The autoscale scenario's field tables (scenario_fields.hpp): the file's top level, its load and its policy, each key
// once with its flag. cli/cmd_autoscale.cpp reads the file through the specs and generates its flags from `flags`;
// `gpuplan schema` prints the rows. The file's `serving` object is a serving scenario (serving_fields.cpp).
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "scenario_row.hpp"

namespace gpuplan::wl_io {

using json_io::FieldType;

namespace {
using scenario_row::row;
}  // namespace

const ScenarioFieldTable& autoscale_load_fields() {
  static const ScenarioFieldTable t{
      row("peak_per_s", FieldType::number, "Peak rate")
          .flags({"--peak-rate"})
          .help("built-in diurnal curve: requests/s at the peak")
          .doc("built-in diurnal curve: requests/s at the peak"),
      row("trough_per_s", FieldType::number, "Trough rate")
          .flags({"--trough-rate"})
          .help("built-in diurnal curve: requests/s at the trough")
          .doc("built-in diurnal curve: requests/s at the trough (12 hours from the peak)"),
      row("peak_hour", FieldType::number, "Peak hour")
          .flags({"--peak-hour"})
          .help("built-in diurnal curve: hour of the peak")
          .otherwise("14")
          .doc("built-in diurnal curve: hour of the peak, [0, 24) (default 14)"),
      row("points", FieldType::any, "Rate points")
          .flags({"--rate-points"})
          .help("the load as HOUR:RATE,HOUR:RATE,... joined linearly")
          .doc("instead of the diurnal curve: [[hour, requests/s], ...], hours ascending in [0, 24·7], joined "
               "linearly"),
      row("hours", FieldType::number, "Hours")
          .flags({"--hours"})
          .help("hours of load from midnight")
          .otherwise("24")
          .doc("hours of load to simulate from midnight (default 24)"),
      row("trace", FieldType::string, "Trace")
          .flags({"--trace"})
          .help("replay a trace CSV: Azure LLM inference 2023 (TIMESTAMP, ContextTokens, GeneratedTokens) or BurstGPT "
                "(Timestamp, Request tokens, Response tokens), instead of synthetic arrivals")
          .doc("a trace CSV (Azure LLM inference 2023 or BurstGPT columns, found by header) replayed instead of "
               "synthetic arrivals; in a scenario file, a path relative to the file"),
      row("input_lengths", FieldType::string, "Prompt lengths")
          .flags({"--input-lengths"})
          .help("prompt lengths: fixed:N, uniform:LOW,HIGH or lognormal:MEAN,SD")
          .otherwise("fixed --input-tokens")
          .doc("prompt lengths: fixed:N, uniform:LOW,HIGH or lognormal:MEAN,SD (default fixed input_tokens)"),
      row("output_lengths", FieldType::string, "Output lengths")
          .flags({"--output-lengths"})
          .help("output lengths: fixed:N, uniform:LOW,HIGH or lognormal:MEAN,SD")
          .otherwise("fixed --output-tokens")
          .doc("output lengths: fixed:N, uniform:LOW,HIGH or lognormal:MEAN,SD (default fixed output_tokens)"),
      row("seed", FieldType::integer, "Seed")
          .flags({"--seed"})
          .help("seed of the arrivals and lengths")
          .otherwise("1")
          .doc("seed of the arrivals and lengths (default 1)"),
  };
  return t;
}

const ScenarioFieldTable& autoscale_policy_fields() {
  static const ScenarioFieldTable t{
      row("metric", FieldType::string, "Metric")
          .flags({"--metric"})
          .help("scaling metric: queue (requests per replica) or utilisation (KV in use)")
          .doc("queue: requests in a replica (waiting + running) per ready replica; utilisation: KV blocks in use / "
               "blocks, mean over ready replicas"),
      row("target", FieldType::number, "Target")
          .flags({"--target"})
          .help("the metric the fleet is sized to: desired = ceil(ready × metric / target)")
          .doc("the metric the fleet is sized to: desired replicas = ceil(ready × metric / target) (Kubernetes HPA)"),
      row("scale_up_at", FieldType::number, "Scale up at")
          .flags({"--scale-up-at"})
          .help("scale up only when the metric exceeds this")
          .otherwise("target")
          .doc("scale up only when the metric exceeds this (default: target)"),
      row("scale_down_at", FieldType::number, "Scale down at")
          .flags({"--scale-down-at"})
          .help("scale down only when the metric is below this")
          .otherwise("0.7 × target")
          .doc("scale down only when the metric is below this (default 0.7 × target)"),
      row("min_replicas", FieldType::integer, "Min replicas")
          .flags({"--min-replicas"})
          .help("fewest replicas")
          .otherwise("1")
          .doc("fewest replicas (default 1)"),
      row("max_replicas", FieldType::integer, "Max replicas")
          .flags({"--max-replicas"})
          .help("most replicas")
          .otherwise("4 × the planner's fixed fleet")
          .doc("most replicas (default: 4 × the planner's fixed fleet)"),
      row("initial_replicas", FieldType::integer, "Initial replicas")
          .flags({"--initial-replicas"})
          .help("replicas ready at 00:00")
          .otherwise("--min-replicas")
          .doc("replicas ready at midnight (default min_replicas)"),
      row("cold_start_s", FieldType::number, "Cold start")
          .flags({"--cold-start-s"})
          .help("seconds from starting a replica to serving")
          .otherwise("300")
          .doc("seconds from starting a replica to its first request (default 300)"),
      row("interval_s", FieldType::number, "Interval")
          .flags({"--interval-s"})
          .help("seconds between the autoscaler's evaluations")
          .otherwise("30")
          .doc("seconds between the autoscaler's evaluations (default 30)"),
      row("up_cooldown_s", FieldType::number, "Up cooldown")
          .flags({"--up-cooldown-s"})
          .help("seconds after a scale-up before the next")
          .otherwise("0")
          .doc("seconds after a scale-up before the next one (default 0)"),
      row("down_cooldown_s", FieldType::number, "Down cooldown")
          .flags({"--down-cooldown-s"})
          .help("seconds after a scale event before a scale-down")
          .otherwise("300")
          .doc("seconds after any scale event before a scale-down (default 300)"),
  };
  return t;
}

const ScenarioFieldTable& autoscale_fields() {
  static const json_io::FieldTable load = field_specs(autoscale_load_fields());
  static const json_io::FieldTable policy = field_specs(autoscale_policy_fields());
  static const ScenarioFieldTable t{
      row("description", FieldType::string, "Description")
          .help("what the scenario is, in words")
          .doc("what the scenario is, in words"),
      row("serving", FieldType::object, "Serving")
          .help("the replica: serving scenario keys")
          .doc("the replica: serving scenario keys (model, gpu, tp, SLA, engine knobs)"),
      row("load", FieldType::object, "Load").help("the load over the day").nested(&load).doc("the load over the day"),
      row("autoscale", FieldType::object, "Autoscaling policy")
          .help("the autoscaling policy")
          .nested(&policy)
          .doc("the autoscaling policy"),
      row("e2e_ms", FieldType::number, "SLA end-to-end")
          .flags({"--e2e-ms"})
          .help("SLA: end-to-end latency of a request, ms")
          .otherwise("none")
          .doc("SLA: end-to-end latency of a request, ms (default: none)"),
  };
  return t;
}

const json_io::FieldTable& autoscale_file_specs() {
  static const json_io::FieldTable t = field_specs(autoscale_fields());
  return t;
}

}  // namespace gpuplan::wl_io
