// The renderers of `gpuplan report`: the report's content as a document (report_doc.hpp renders it as Markdown, text
// or HTML); its JSON and CSV forms are in report_json.cpp (both declared in report_render.hpp). Moved out of
// cmd_report.cpp, which keeps the command's wiring.
#include "report_render.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "report_svg.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

// ------------------------------------------------------------------------------------------------------------------
// The report's content
// ------------------------------------------------------------------------------------------------------------------

std::string days(u::Seconds t) { return fmt::format("{} days", u::format_number(t.raw() / 86400.0, 3)); }
/// "1 day", "30 days", "2.5 days".
std::string days_n(double d) { return fmt::format("{} day{}", u::format_number(d, 4), d == 1.0 ? "" : "s"); }
std::string money(double usd) { return u::format(u::Usd(usd)); }
std::string per_hour(u::UsdPerSecond r) { return u::format(r); }
std::string per_month(u::UsdPerSecond r) { return money(r.raw() * 3600.0 * model::kHoursPerMonth); }
std::string gib(u::Bytes b) { return u::format(b, u::BytePrefix::binary); }
std::string count(double v) { return u::format_count(v); }

/// Token counts as people say them: "2T", "500B", "15.6M".
std::string tokens_text(double n) {
  if (n >= 1e12) return u::format_number(n / 1e12, 3) + "T";
  if (n >= 1e9) return u::format_number(n / 1e9, 3) + "B";
  if (n >= 1e6) return u::format_number(n / 1e6, 3) + "M";
  return count(n);
}

/// "H100, $1.14M (+16%)": the next cheapest feasible option after the cheapest; `labels` are the options' names as
/// the cost comparisons show them (cost_labels).
template <class Cell, class Key, class Text>
std::string runner_up(const model::ItemReport<Cell>& ir, const std::vector<std::string>& labels, Key key, Text text) {
  if (!ir.cheapest) return "";
  std::optional<std::size_t> second;
  for (std::size_t k = 0; k < ir.cells.size(); ++k)
    if (k != *ir.cheapest && ir.cells[k].feasible && (!second || key(ir.cells[k]) < key(ir.cells[*second]))) second = k;
  if (!second) return "no other option works";
  const double a = key(ir.cells[*ir.cheapest]), b = key(ir.cells[*second]);
  return fmt::format("{}, {} (+{:.0f}%)", labels[*second], text(ir.cells[*second]), a > 0 ? (b / a - 1.0) * 100.0 : 0.0);
}

std::string model_name(const wl::TransformerArch& a) { return a.name.empty() ? a.id : a.name; }

std::string sla_text(const model::Sla& sla) {
  std::vector<std::string> parts;
  if (sla.ttft) parts.push_back(fmt::format("TTFT p{} ≤ {}", plain_number(sla.percentile * 100.0), u::format(*sla.ttft)));
  if (sla.itl) parts.push_back(fmt::format("ITL ≤ {}", u::format(*sla.itl)));
  if (parts.empty()) return "no latency target";
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::string lengths_text(const model::Traffic& t, bool input) {
  const auto& d = input ? t.input : t.output;
  const std::int64_t fixed = input ? t.input_tokens : t.output_tokens;
  if (!d) return count(double(fixed));
  return fmt::format("{} on average", u::format_number(d->mean(), 4));
}

/// The equivalent `gpuplan train` command of a training cell (rerun it with --explain).
std::string train_command(const wl_io::PlanTrainingItem& item, const model::Layout& l,
                          const model::TrainingSystem& sys, const wl_io::PlanOption& o) {
  std::string c = "gpuplan train";
  auto add = [&](const std::string& flag, const std::string& v) { c += " " + flag + " " + v; };
  add("-m", item.scenario.model);
  add("--gpu", sys.gpu->info.id);
  if (sys.node) add("--node", sys.node->info.id);
  if (!o.cluster.empty()) add("--cluster", o.cluster);
  add("--gpus", std::to_string(l.gpus));
  add("--tp", std::to_string(l.tp));
  add("--pp", std::to_string(l.pp));
  if (l.virtual_stages > 1) add("--virtual-stages", std::to_string(l.virtual_stages));
  if (l.cp > 1) add("--cp", std::to_string(l.cp));
  if (l.ep > 1) add("--ep", std::to_string(l.ep));
  add("--sp", l.sequence_parallel ? "true" : "false");
  add("--micro-batch", std::to_string(l.micro_batch));
  add("--recompute", recompute_key(l.recompute));
  add("--zero", std::to_string(static_cast<int>(l.zero)));
  if (l.offload == wl::Offload::optimizer) add("--offload", "optimizer");
  // The layer split (searched, or the scenario's, which the layout carries).
  if (l.first_stage_layers > 0) add("--first-stage-layers", std::to_string(l.first_stage_layers));
  if (l.last_stage_layers > 0) add("--last-stage-layers", std::to_string(l.last_stage_layers));
  if (l.embedding_as_layer) add("--embedding-in-pipeline-split", "true");
  if (l.loss_as_layer) add("--loss-in-pipeline-split", "true");
  static const std::set<std::string> layout_keys{"model", "tp", "pp", "cp", "ep", "virtual_stages", "schedule",
                                                 "micro_batch", "sequence_parallel", "recompute", "zero", "offload",
                                                 "first_stage_layers", "last_stage_layers",
                                                 "embedding_in_pipeline_split", "loss_in_pipeline_split"};
  for (const auto& [key, v] : item.scenario_json.items()) {
    if (layout_keys.count(key) != 0) continue;
    std::string flag = key == "sequence_parallel" ? "sp"
                       : key == "flash_attention" ? "flash"
                       : key == "overlap_tp_comm" ? "overlap-tp"
                                                  : key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    add("--" + flag, v.is_string() ? v.get<std::string>() : v.is_number() ? plain_number(v.get<double>()) : json_inline(v));
  }
  add("--tokens", plain_number(item.tokens));
  if (o.price_usd_per_gpu_hour) add("--price", plain_number(*o.price_usd_per_gpu_hour));
  return c + " --explain";
}

/// The equivalent `gpuplan serve` command of a serving cell, its TP and PP fixed to the chosen ones.
std::string serve_command(const wl_io::PlanServingItem& item, const model::ServingCell& cell,
                          const model::TrainingSystem& sys, const wl_io::PlanOption& o) {
  std::string c = "gpuplan serve";
  auto add = [&](const std::string& flag, const std::string& v) { c += " " + flag + " " + v; };
  add("-m", item.scenario.model);
  add("--gpu", sys.gpu->info.id);
  if (sys.node) add("--node", sys.node->info.id);
  if (!o.cluster.empty()) add("--cluster", o.cluster);
  for (const auto& [key, v] : item.scenario_json.items()) {
    if (key == "model" || key == "tp" || key == "pp") continue;
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (v.is_boolean()) {
      if (key == "cudagraph_in_budget") add("--" + flag, v.get<bool>() ? "true" : "false");
      else if (v.get<bool>()) c += " --" + flag;
      continue;
    }
    add("--" + flag, v.is_string() ? v.get<std::string>() : plain_number(v.get<double>()));
  }
  add("--tp", std::to_string(cell.tp));
  if (cell.pp > 1) add("--pp", std::to_string(cell.pp));
  if (o.price_usd_per_gpu_hour) add("--price", plain_number(*o.price_usd_per_gpu_hour));
  return c + " --explain";
}

/// The verdict of an infeasible training cell in a few words.
std::string short_reason(const model::TrainingCell& c) {
  if (c.reasons.empty()) return "infeasible";
  const auto& r0 = c.reasons.front();
  return r0.find("deadline") != std::string::npos ? "misses the deadline"
         : r0.find("memory") != std::string::npos ? "does not fit in memory"
         : r0.find("limit") != std::string::npos  ? "too few GPUs available"
                                                  : "cannot run";
}

}  // namespace

std::string option_label(const wl_io::PlanOption& o) { return o.name == o.id ? o.id : o.name; }

std::vector<std::string> option_kinds(const ReportContext& ctx) {
  std::vector<std::string> kinds;
  for (const auto& oc : ctx.options) kinds.push_back(price_kind(oc.sys.price, oc.sys.gpu).value_or(""));
  return kinds;
}

namespace {

/// The options' names as every cost comparison shows them: where the options mix on-demand and spot prices each name
/// carries its price kind ("NVL (spot)"), so that a cheaper spot option is never read as cheaper on equal terms
/// (#22 deliverable 3); otherwise the plain names.
std::vector<std::string> cost_labels(const ReportContext& ctx) {
  const auto kinds = option_kinds(ctx);
  const bool mixed = !mixed_price_note(kinds).empty();
  std::vector<std::string> labels;
  for (std::size_t k = 0; k < ctx.plan.options.size(); ++k) {
    std::string l = option_label(ctx.plan.options[k]);
    if (mixed && !kinds[k].empty()) l += " (" + kinds[k] + ")";
    labels.push_back(std::move(l));
  }
  return labels;
}

// The parts of the report, in the order build_doc writes them.
void doc_summary(Doc& doc, const ReportContext& ctx, const model::ReportResult& res) {
  const auto labels = cost_labels(ctx);
  doc.heading("Summary");
  Table sum;
  sum.columns = {{"item", "item"},       {"need", "need"},       {"cheapest", "cheapest option"},
                 {"gpus", "GPUs", true}, {"time", "time", true}, {"cost", "cost", true},
                 {"next", "next best"}};
  for (std::size_t i = 0; i < res.training.size(); ++i) {
    const auto& ir = res.training[i];
    const auto& req = ctx.training[i];
    std::vector<std::string> row{ir.name, fmt::format("train {} tokens within {}", tokens_text(req.tokens),
                                                      days_n(req.deadline_days))};
    auto cost_text = [](const model::TrainingCell& c) {
      if (c.cost && c.band)
        return fmt::format("{} ({}–{})", u::format(*c.cost), u::format(*c.cost * c.band->p10), u::format(*c.cost * c.band->p90));
      return c.cost ? u::format(*c.cost) : fmt::format("{} GPU-hours", count(c.gpu_hours));
    };
    if (ir.cheapest) {
      const auto& c = ir.cells[*ir.cheapest];
      row.insert(row.end(), {"**" + labels[*ir.cheapest] + "**", count(double(c.gpus)), days(c.time_to_train),
                             cost_text(c),
                             runner_up(ir, labels,
                                       [](const model::TrainingCell& x) {
                                         return (x.cost ? x.cost->raw() : x.gpu_hours) * model::expected_factor(x);
                                       },
                                       cost_text)});
    } else {
      row.insert(row.end(), {"none meets the deadline", "", "", "", ""});
    }
    sum.rows.push_back(row);
  }
  for (std::size_t i = 0; i < res.serving.size(); ++i) {
    const auto& ir = res.serving[i];
    const auto& req = ctx.serving[i];
    std::vector<std::string> row{ir.name, fmt::format("serve {} req/s, {}", u::format_number(req.traffic.requests_per_s, 4),
                                                      sla_text(req.sla))};
    if (ir.cheapest) {
      const auto& c = ir.cells[*ir.cheapest];
      row.insert(row.end(), {"**" + labels[*ir.cheapest] + "**", count(double(c.gpus)), "ongoing",
                             fmt::format("{} ({} per month){}", per_hour(c.cost_rate), per_month(c.cost_rate),
                                         c.band ? fmt::format(" ({}–{})", per_hour(c.cost_rate * c.band->p10),
                                                              per_hour(c.cost_rate * c.band->p90))
                                                : std::string()),
                             runner_up(ir, labels,
                                       [](const model::ServingCell& x) { return x.cost_rate.raw() * model::expected_factor(x); },
                                       [](const model::ServingCell& x) { return per_hour(x.cost_rate); })});
    } else {
      row.insert(row.end(), {"none meets the SLA", "", "", "", ""});
    }
    sum.rows.push_back(row);
  }
  doc.table(sum);
  // The summary ranks options by cost: where their prices are of different kinds, say so right under the ranking.
  if (const std::string mixed = mixed_price_note(option_kinds(ctx)); !mixed.empty()) doc.para("**Note:** " + mixed + ".");
  {
    std::vector<std::string> tot;
    const bool any_training = std::any_of(res.training.begin(), res.training.end(), [](const auto& x) { return x.cheapest.has_value(); });
    const bool any_serving = std::any_of(res.serving.begin(), res.serving.end(), [](const auto& x) { return x.cheapest.has_value(); });
    if (any_training)
      tot.push_back(fmt::format("**Training: {}**{} one-off ({} GPU-hours{}; the longest run takes {})",
                                u::format(res.training_cost),
                                res.training_cost_p90.raw() > res.training_cost_p10.raw()
                                    ? fmt::format(" (p10–p90: {}–{})", u::format(res.training_cost_p10),
                                                  u::format(res.training_cost_p90))
                                    : std::string(),
                                count(res.training_gpu_hours),
                                res.training_energy.raw() > 0 ? ", about " + u::format(res.training_energy) + " of GPU energy"
                                                              : std::string(),
                                days(res.training_time_longest)));
    if (any_serving)
      tot.push_back(fmt::format("**Serving: {}**{} = {} per 30-day month, on {} GPU{}", per_hour(res.serving_cost_rate),
                                res.serving_cost_rate_p90.raw() > res.serving_cost_rate_p10.raw()
                                    ? fmt::format(" (p10–p90: {}–{})", per_hour(res.serving_cost_rate_p10),
                                                  per_hour(res.serving_cost_rate_p90))
                                    : std::string(),
                                per_month(res.serving_cost_rate), count(double(res.serving_gpus)),
                                res.serving_gpus == 1 ? "" : "s"));
    if (!res.all_feasible)
      tot.push_back("**Some items have no feasible option** (exit code 3); they are left out of the totals");
    doc.para("Totals, each item on its cheapest option:");
    doc.bullets(tot);
  }

}

void doc_options(Doc& doc, const ReportContext& ctx, const model::ReportResult& res, bool html) {
  const auto& opts = ctx.plan.options;
  doc.heading("Hardware options");
  Table ot;
  const bool any_max = std::any_of(res.options.begin(), res.options.end(), [](const model::ReportOption& o) { return o.max_gpus.has_value(); });
  ot.columns = {{"option", "option"}, {"gpu", "GPU"}, {"node", "node"}, {"price", "price per GPU-hour", true}};
  if (any_max) ot.columns.push_back({"max", "max GPUs", true});
  std::vector<std::string> sources;
  const auto kinds = option_kinds(ctx);
  for (std::size_t k = 0; k < opts.size(); ++k) {
    const auto& oc = ctx.options[k];
    const auto price = oc.sys.price ? oc.sys.price : oc.sys.gpu->price;
    ot.rows.push_back({option_label(opts[k]), oc.sys.gpu->info.name, oc.sys.node ? oc.sys.node->info.id : "",
                       price ? fmt::format("${:.2f} {}", u::to_usd_per_hour(*price), kinds[k]) : ""});
    if (any_max) ot.rows.back().push_back(res.options[k].max_gpus ? count(double(*res.options[k].max_gpus)) : "");
    sources.push_back(fmt::format("**{}**: {}", option_label(opts[k]),
                                  price ? oc.price_origin : "no price known: give price_usd_per_gpu_hour"));
  }
  doc.table(ot);
  if (const std::string mixed = mixed_price_note(kinds); !mixed.empty()) doc.para("**Note:** " + mixed + ".");
  doc.para("Where each price comes from:");
  doc.bullets(sources);
  if (html) {
    const auto labels = cost_labels(ctx);
    // Everything on one option.
    BarChart ch{"chart-options", "Everything on one option: training cost + one month of serving", {}, std::nullopt, {},
                AxisUnit::money, "US$: training + one month of serving"};
    std::optional<std::size_t> best;
    for (std::size_t k = 0; k < opts.size(); ++k) {
      const auto& t = res.per_option[k];
      if (t.covers_all && (!best || (t.training_cost.raw() + t.serving_cost_rate.raw() * 3600 * model::kHoursPerMonth) <
                                        (res.per_option[*best].training_cost.raw() +
                                         res.per_option[*best].serving_cost_rate.raw() * 3600 * model::kHoursPerMonth)))
        best = k;
    }
    for (std::size_t k = 0; k < opts.size(); ++k) {
      const auto& t = res.per_option[k];
      const double v = t.training_cost.raw() + t.serving_cost_rate.raw() * 3600 * model::kHoursPerMonth;
      ch.bars.push_back({labels[k], v,
                         t.covers_all ? money(v) : "cannot do every item", best && *best == k, !t.covers_all});
    }
    doc.chart(svg_bar_chart(ch));
  }

}

// After an item's table: why the infeasible options cannot, and the command that reruns each row.
void doc_reasons_and_commands(Doc& doc, const std::vector<std::string>& why, const std::vector<std::string>& cmds,
                              const char* command) {
  if (!why.empty()) {
    doc.para("Why some options cannot:");
    doc.bullets(why);
  }
  if (!cmds.empty()) {
    doc.para(fmt::format("Each row is one `gpuplan {}` run; rerun it to see every figure derived:", command));
    doc.code(cmds);
  }
}

void doc_training_item(Doc& doc, const ReportContext& ctx, const model::ReportResult& res, std::size_t i, bool html) {
  const auto& opts = ctx.plan.options;
  const auto& ir = res.training[i];
  const auto& req = ctx.training[i];
  const auto& item = *std::find_if(ctx.plan.training.begin(), ctx.plan.training.end(),
                                   [&](const wl_io::PlanTrainingItem& t) { return t.id == ir.id; });
  doc.heading("Training: " + ir.name);
  const auto& base = ctx.training_base[i];
  std::string counts;
  for (long long n : item.gpus) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
  std::string fixed;
  for (const char* k : {"tp", "pp", "cp", "ep", "virtual_stages", "schedule", "micro_batch", "sequence_parallel",
                        "recompute", "zero", "offload"})
    if (item.scenario_json.contains(k))
      fixed += fmt::format("{}{} {}", fixed.empty() ? "; fixed by the plan: " : ", ", k,
                           item.scenario_json[k].is_string() ? item.scenario_json[k].get<std::string>()
                                                             : json_inline(item.scenario_json[k]));
  doc.para(fmt::format("{}: {} tokens in sequences of {} tokens, {} sequences per step, {} precision; deadline {}. "
                       "For each option every parallel layout (tensor, pipeline, data, context parallel, "
                       "micro-batch, recomputation, ZeRO stage{}) on {} GPUs is evaluated, and the cheapest layout "
                       "that fits in memory and finishes in time is kept.",
                       model_name(req.arch), tokens_text(req.tokens), count(double(base.seq_len)), count(double(base.global_batch)),
                       hw::to_string(base.precision.compute), days_n(req.deadline_days), fixed, counts));
  Table t;
  t.columns = {{"option", "option"},          {"gpus", "GPUs", true},          {"layout", "layout"},
               {"time", "time to train", true}, {"gpu_hours", "GPU-hours", true}, {"cost", "cost", true},
               {"energy", "energy", true},      {"mfu", "MFU", true},           {"memory", "memory per GPU (free)", true},
               {"verdict", "verdict"}};
  std::vector<std::string> why;
  std::vector<std::string> cmds;
  const auto labels = cost_labels(ctx);
  for (std::size_t k = 0; k < ir.cells.size(); ++k) {
    const auto& c = ir.cells[k];
    if (!c.feasible) {
      t.rows.push_back({labels[k], "", "", "", "", "", "", "", "", short_reason(c)});
      for (const auto& r : c.reasons) why.push_back(fmt::format("**{}**: {}", option_label(opts[k]), r));
      continue;
    }
    const bool best = ir.cheapest && *ir.cheapest == k;
    t.rows.push_back({labels[k], count(double(c.gpus)),
                      model::describe(*c.layout),
                      days(c.time_to_train), count(c.gpu_hours), c.cost ? u::format(*c.cost) : "",
                      c.energy ? u::format(*c.energy) : "", u::format(u::Ratio(c.mfu)),
                      fmt::format("{} ({} free)", gib(c.peak_memory), gib(c.capacity - c.peak_memory)),
                      best ? "**cheapest**" : "meets the deadline"});
    cmds.push_back(train_command(item, *c.layout, req.cells[k].sys, opts[k]));
  }
  doc.table(t);
  if (html) {
    // One unit per chart: dollars when every feasible option has a price, else GPU-hours for all of them.
    const bool priced = std::all_of(ir.cells.begin(), ir.cells.end(),
                                    [](const auto& c) { return !c.feasible || c.cost.has_value(); });
    BarChart cost_chart{fmt::format("chart-training-{}-cost", ir.id), "Cost to train, per option", {}, std::nullopt,
                        {}, priced ? AxisUnit::money : AxisUnit::count, priced ? "US$" : "GPU-hours"};
    BarChart time_chart{fmt::format("chart-training-{}-time", ir.id), "Time to train vs the deadline", {},
                        req.deadline_days, fmt::format("deadline {} days", u::format_number(req.deadline_days, 4)),
                        AxisUnit::days, "days"};
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      const bool best = ir.cheapest && *ir.cheapest == k;
      const std::string& label = labels[k];
      if (!c.feasible) {
        cost_chart.bars.push_back({label, 0, short_reason(c), false, true});
        time_chart.bars.push_back({label, 0, short_reason(c), false, true});
        continue;
      }
      const double v = priced ? c.cost->raw() : c.gpu_hours;
      cost_chart.bars.push_back({label, v,
                           (c.cost ? u::format(*c.cost) : count(c.gpu_hours) + " GPU-hours") +
                               fmt::format(" on {} GPUs", count(double(c.gpus))),
                           best, false});
      time_chart.bars.push_back({label, c.time_to_train.raw() / 86400.0, days(c.time_to_train), best, false});
    }
    doc.chart(svg_bar_chart(cost_chart));
    doc.chart(svg_bar_chart(time_chart));
  }
  doc_reasons_and_commands(doc, why, cmds, "train");
}

void doc_serving_item(Doc& doc, const ReportContext& ctx, const model::ReportResult& res, std::size_t i, bool html) {
  const auto& opts = ctx.plan.options;
  const auto& ir = res.serving[i];
  const auto& req = ctx.serving[i];
  const auto& item = *std::find_if(ctx.plan.serving.begin(), ctx.plan.serving.end(),
                                   [&](const wl_io::PlanServingItem& s) { return s.id == ir.id; });
  doc.heading("Serving: " + ir.name);
  std::string engine;
  for (const auto& e : ctx.serving_engine[i])
    if (!e.empty()) {
      engine = e;
      break;
    }
  doc.para(fmt::format("{}: {} requests/s, {} prompt tokens and {} output tokens per request; target {}{}. For each "
                       "option the replica layout (tensor / pipeline parallel) and batch that meet the target with "
                       "the fewest GPUs are kept; TTFT includes queueing at that load.",
                       model_name(req.arch), u::format_number(req.traffic.requests_per_s, 4),
                       lengths_text(req.traffic, true), lengths_text(req.traffic, false), sla_text(req.sla),
                       engine.empty() ? "" : "; " + engine));
  Table t;
  t.columns = {{"option", "option"},         {"gpus", "GPUs", true},        {"layout", "replicas × layout"},
               {"batch", "batch", true},      {"ttft", "TTFT", true},        {"itl", "ITL", true},
               {"rate", "cost per hour", true}, {"month", "per month", true}, {"mtok", "per M output tokens", true},
               {"verdict", "verdict"}};
  std::vector<std::string> why;
  std::vector<std::string> cmds;
  const auto labels = cost_labels(ctx);
  for (std::size_t k = 0; k < ir.cells.size(); ++k) {
    const auto& c = ir.cells[k];
    const std::string label = option_label(opts[k]);
    const bool best = ir.cheapest && *ir.cheapest == k;
    if (!c.has_numbers) {
      t.rows.push_back({labels[k], "", "", "", "", "", "", "", "", "cannot run"});
    } else {
      t.rows.push_back({labels[k], count(double(c.gpus)), fmt::format("{} × TP {}{}", c.replicas, c.tp, c.pp > 1 ? fmt::format(" · PP {}", c.pp) : ""),
                        std::to_string(c.batch), u::format(c.ttft), u::format(c.itl), per_hour(c.cost_rate),
                        per_month(c.cost_rate), fmt::format("${:.3g}", c.cost_per_mtok_usd),
                        best ? "**cheapest**" : c.feasible ? "meets the SLA" : "misses the SLA"});
      cmds.push_back(serve_command(item, c, req.cells[k].sys, opts[k]));
    }
    if (!c.feasible)
      for (const auto& r : c.reasons) why.push_back(fmt::format("**{}**: {}", label, r));
  }
  doc.table(t);
  if (html) {
    BarChart cost_chart{fmt::format("chart-serving-{}-cost", ir.id), "Serving cost per month, per option", {},
                        std::nullopt, {}, AxisUnit::money, "US$ per month"};
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      const bool best = ir.cheapest && *ir.cheapest == k;
      const std::string& label = labels[k];
      if (!c.feasible) {
        cost_chart.bars.push_back({label, 0, "misses the SLA", false, true});
        continue;
      }
      cost_chart.bars.push_back({label, c.cost_rate.raw() * 3600 * model::kHoursPerMonth,
                           fmt::format("{} per month on {} GPUs", per_month(c.cost_rate), count(double(c.gpus))), best,
                           false});
    }
    doc.chart(svg_bar_chart(cost_chart));
  }
  doc_reasons_and_commands(doc, why, cmds, "serve");
}

void doc_reading_guide(Doc& doc) {
  doc.heading("How to read this report");
  doc.bullets({
      "**Time to train** = step time × tokens ÷ tokens per step, from the training model (compute, memory traffic, "
      "communication and pipeline bubbles of the chosen layout); **GPU-hours** = GPUs × time to train; **cost** = "
      "GPU-hours × the price per GPU-hour.",
      "**Energy** = GPU TDP × GPUs × time to train: an upper-bound estimate for the GPUs alone (no CPUs, network, "
      "cooling).",
      "**MFU** (model FLOPs utilisation) = useful training FLOPs ÷ (time × GPUs × peak): how busy the tensor cores "
      "are. **Memory per GPU** is the peak on the busiest GPU, with what is left of the usable memory in brackets.",
      "**TTFT** (time to first token) is at the stated percentile, queueing included; **ITL** (inter-token latency) is "
      "the mean time between output tokens; **per M output tokens** = cost per hour ÷ output tokens per hour × 10⁶.",
      "Prices are indicative list prices per GPU-hour from the hardware data files (sources above) unless the plan "
      "gives its own; a month is 720 hours of serving.",
      "Layout: TP / PP / DP / CP = tensor, pipeline, data, context parallel sizes; v = pipeline chunks per stage; SP = "
      "sequence parallelism; micro = sequences per micro-batch; ZeRO = optimizer-state sharding stage.",
      "Accuracy: docs/accuracy.md compares the model with our own GPU measurements and with published runs; on "
      "published large-scale training it is mostly optimistic (faster steps than reported), so read training times "
      "and costs as lower bounds.",
  });

}

void doc_derivations(Doc& doc, const model::ReportResult& res, bool html) {
  doc.heading("Derivations");
  const Format f = html ? Format::text : Format::md;
  for (std::size_t i = 0; i < res.training.size(); ++i)
    for (std::size_t k = 0; k < res.training[i].cells.size(); ++k) {
      const auto& c = res.training[i].cells[k];
      if (!c.derivation.empty()) doc.raw(render_derivation(c.derivation, f));
    }
  for (std::size_t i = 0; i < res.serving.size(); ++i)
    for (std::size_t k = 0; k < res.serving[i].cells.size(); ++k) {
      const auto& c = res.serving[i].cells[k];
      if (!c.derivation.empty()) doc.raw(render_derivation(c.derivation, f));
    }
  doc.raw(render_derivation(res.totals, f));
}

}  // namespace

Doc build_doc(const ReportContext& ctx, const model::ReportResult& res, bool explain, bool html) {
  Doc doc;
  const auto& opts = ctx.plan.options;
  doc.title("Budget report");
  if (!ctx.plan.description.empty()) doc.para(ctx.plan.description);
  doc.para(fmt::format("Plan `{}`: {} training run{}, {} serving deployment{}, {} hardware option{}. Each item is "
                       "costed on every option; the cheapest option that meets the item's deadline or latency target "
                       "is marked **cheapest**. Where data/accuracy/bands.json is present, \"cheapest\" is on the "
                       "expected cost (the estimate × the median measured/predicted time of its regime's validation "
                       "cases, docs/accuracy.md) and costs show their p10–p90 range.",
                       ctx.file, res.training.size(), res.training.size() == 1 ? "" : "s", res.serving.size(),
                       res.serving.size() == 1 ? "" : "s", opts.size(), opts.size() == 1 ? "" : "s"));

  doc_summary(doc, ctx, res);
  doc_options(doc, ctx, res, html);
  for (std::size_t i = 0; i < res.training.size(); ++i) doc_training_item(doc, ctx, res, i, html);
  for (std::size_t i = 0; i < res.serving.size(); ++i) doc_serving_item(doc, ctx, res, i, html);
  doc_reading_guide(doc);
  if (explain) doc_derivations(doc, res, html);
  return doc;
}

}  // namespace gpuplan::cli
