// The JSON and CSV forms of `gpuplan report` (report_render.hpp): the stable keys of docs/report.md, and one CSV row
// per item × option. report_render.cpp builds the document (Markdown, text, HTML).
#include <set>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "report_render.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

ordered_json num_or_null(const std::optional<double>& v) { return v ? ordered_json(*v) : ordered_json(); }

/// The keys every cell of an item × option starts with, training or serving (docs/report.md): the option, whether it
/// works, whether it is the item's cheapest, and why not.
template <class Cell>
ordered_json cell_head(const std::string& option, const Cell& c, bool cheapest) {
  ordered_json x;
  x["option"] = option;
  x["feasible"] = c.feasible;
  x["cheapest"] = cheapest;
  x["reasons"] = c.reasons;
  return x;
}

}  // namespace

ordered_json report_json(const ReportContext& ctx, const model::ReportResult& res, bool explain) {
  const auto& opts = ctx.plan.options;
  const auto kinds = option_kinds(ctx);
  const std::string mixed = mixed_price_note(kinds);
  ordered_json o;
  o["plan"] = ctx.file;
  o["description"] = ctx.plan.description;
  o["feasible"] = res.all_feasible;
  o["options"] = ordered_json::array();
  for (std::size_t k = 0; k < opts.size(); ++k) {
    const auto& oc = ctx.options[k];
    const auto price = oc.sys.price ? oc.sys.price : oc.sys.gpu->price;
    o["options"].push_back({{"id", opts[k].id},
                            {"name", opts[k].name},
                            {"gpu", oc.sys.gpu->info.id},
                            {"node", oc.sys.node ? ordered_json(oc.sys.node->info.id) : ordered_json()},
                            {"cluster", opts[k].cluster.empty() ? ordered_json() : ordered_json(opts[k].cluster)},
                            {"price_usd_per_gpu_hour", price ? ordered_json(u::to_usd_per_hour(*price)) : ordered_json()},
                            {"price_kind", price ? ordered_json(*price_kind(oc.sys.price, oc.sys.gpu)) : ordered_json()},
                            {"price_source", price ? ordered_json(oc.price_origin) : ordered_json()},
                            {"max_gpus", res.options[k].max_gpus ? ordered_json(*res.options[k].max_gpus) : ordered_json()}});
  }
  // Costs at on-demand and spot prices side by side are not comparable as they stand: the report says so (null: one kind).
  o["price_note"] = mixed.empty() ? ordered_json() : ordered_json(mixed);
  o["training"] = ordered_json::array();
  for (std::size_t i = 0; i < res.training.size(); ++i) {
    const auto& ir = res.training[i];
    const auto& req = ctx.training[i];
    ordered_json it;
    it["id"] = ir.id;
    it["name"] = ir.name;
    it["model"] = req.arch.id;
    it["tokens"] = req.tokens;
    it["deadline_days"] = req.deadline_days;
    it["cheapest"] = ir.cheapest ? ordered_json(opts[*ir.cheapest].id) : ordered_json();
    it["options"] = ordered_json::array();
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      ordered_json x = cell_head(opts[k].id, c, ir.cheapest == k);
      x["gpu_counts"] = c.gpu_counts;
      x["layouts_searched"] = c.layouts_searched;
      x["price_usd_per_gpu_hour"] = c.price ? ordered_json(u::to_usd_per_hour(*c.price)) : ordered_json();
      x["price_kind"] = c.price ? ordered_json(kinds[k]) : ordered_json();
      if (c.feasible) {
        const auto& l = *c.layout;
        x["gpus"] = c.gpus;
        x["layout"] = {{"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"cp", l.cp}, {"ep", l.ep},
                       {"virtual_stages", l.virtual_stages}, {"micro_batch", l.micro_batch},
                       {"sequence_parallel", l.sequence_parallel}, {"recompute", recompute_key(l.recompute)},
                       {"zero", static_cast<int>(l.zero)},
                       {"offload", l.offload == wl::Offload::optimizer ? "optimizer" : "none"}};
        x["layout_text"] = c.layout_text;
        x["step_time_s"] = c.step_time.raw();
        x["tokens_per_s"] = c.tokens_per_s;
        x["time_s"] = c.time_to_train.raw();
        x["time_days"] = c.time_to_train.raw() / 86400.0;
        x["gpu_hours"] = c.gpu_hours;
        x["cost_usd"] = num_or_null(c.cost ? std::optional<double>(c.cost->raw()) : std::nullopt);
        x["energy_kWh"] = num_or_null(c.energy ? std::optional<double>(c.energy->raw() / 3.6e6) : std::nullopt);
        if (c.band) {
          x["step_time_s_band"] = {c.step_time.raw() * c.band->p10, c.step_time.raw() * c.band->p90};
          x["time_s_band"] = {c.time_to_train.raw() * c.band->p10, c.time_to_train.raw() * c.band->p90};
          if (c.cost) x["cost_usd_band"] = {c.cost->raw() * c.band->p10, c.cost->raw() * c.band->p90};
          x["expected_factor"] = c.band->p50;
          x["band_regime"] = c.band->regime;
        }
        x["mfu"] = c.mfu;
        x["peak_memory_bytes"] = c.peak_memory.raw();
        x["capacity_bytes"] = c.capacity.raw();
        x["headroom_bytes"] = (c.capacity - c.peak_memory).raw();
      }
      if (explain && !c.derivation.empty()) x["derivation"] = derivation_json(c.derivation);
      it["options"].push_back(x);
    }
    o["training"].push_back(it);
  }
  o["serving"] = ordered_json::array();
  for (std::size_t i = 0; i < res.serving.size(); ++i) {
    const auto& ir = res.serving[i];
    const auto& req = ctx.serving[i];
    ordered_json it;
    it["id"] = ir.id;
    it["name"] = ir.name;
    it["model"] = req.arch.id;
    it["requests_per_s"] = req.traffic.requests_per_s;
    it["input_tokens"] = req.traffic.input ? req.traffic.input->mean() : double(req.traffic.input_tokens);
    it["output_tokens"] = req.traffic.output ? req.traffic.output->mean() : double(req.traffic.output_tokens);
    it["sla"] = {{"ttft_s", req.sla.ttft ? ordered_json(req.sla.ttft->raw()) : ordered_json()},
                 {"itl_s", req.sla.itl ? ordered_json(req.sla.itl->raw()) : ordered_json()},
                 {"percentile", req.sla.percentile}};
    it["cheapest"] = ir.cheapest ? ordered_json(opts[*ir.cheapest].id) : ordered_json();
    it["options"] = ordered_json::array();
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      ordered_json x = cell_head(opts[k].id, c, ir.cheapest == k);
      x["price_usd_per_gpu_hour"] = c.price ? ordered_json(u::to_usd_per_hour(*c.price)) : ordered_json();
      x["price_kind"] = c.price ? ordered_json(kinds[k]) : ordered_json();
      if (c.has_numbers) {
        x["gpus"] = c.gpus;
        x["replicas"] = c.replicas;
        x["tp"] = c.tp;
        x["pp"] = c.pp;
        x["batch"] = c.batch;
        x["ttft_s"] = c.ttft.raw();
        x["itl_s"] = c.itl.raw();
        x["output_tokens_per_s"] = c.output_tokens_per_s;
        x["cost_usd_per_hour"] = u::to_usd_per_hour(c.cost_rate);
        x["cost_usd_per_month"] = u::to_usd_per_hour(c.cost_rate) * model::kHoursPerMonth;
        x["cost_per_mtok_usd"] = c.cost_per_mtok_usd;
      }
      if (explain && !c.derivation.empty()) x["derivation"] = derivation_json(c.derivation);
      it["options"].push_back(x);
    }
    o["serving"].push_back(it);
  }
  ordered_json per = ordered_json::array();
  for (std::size_t k = 0; k < opts.size(); ++k) {
    const auto& t = res.per_option[k];
    per.push_back({{"option", opts[k].id},
                   {"covers_all", t.covers_all},
                   {"training_cost_usd", t.training_cost.raw()},
                   {"training_gpu_hours", t.training_gpu_hours},
                   {"serving_cost_usd_per_hour", u::to_usd_per_hour(t.serving_cost_rate)},
                   {"serving_gpus", t.serving_gpus}});
  }
  o["totals"] = {{"training_cost_usd", res.training_cost.raw()},
                 {"training_cost_usd_band", {res.training_cost_p10.raw(), res.training_cost_p90.raw()}},
                 {"training_gpu_hours", res.training_gpu_hours},
                 {"training_energy_kWh", res.training_energy.raw() / 3.6e6},
                 {"training_time_days_longest", res.training_time_longest.raw() / 86400.0},
                 {"serving_cost_usd_per_hour", u::to_usd_per_hour(res.serving_cost_rate)},
                 {"serving_cost_usd_per_hour_band",
                  {u::to_usd_per_hour(res.serving_cost_rate_p10), u::to_usd_per_hour(res.serving_cost_rate_p90)}},
                 {"serving_cost_usd_per_month", u::to_usd_per_hour(res.serving_cost_rate) * model::kHoursPerMonth},
                 {"serving_gpus", res.serving_gpus},
                 {"per_option", per}};
  if (explain) o["totals"]["derivation"] = derivation_json(res.totals);
  return o;
}

namespace {

std::string csv_num(double v) { return fmt::format("{:.10g}", v); }

}  // namespace

std::string report_csv(const ReportContext& ctx, const model::ReportResult& res) {
  const auto& opts = ctx.plan.options;
  Table t;
  t.columns = {{"kind", "kind"},
               {"item", "item"},
               {"option", "option"},
               {"gpu", "gpu"},
               {"price_usd_per_gpu_hour", "price", true},
               {"price_kind", "price_kind"},
               {"feasible", "feasible"},
               {"cheapest", "cheapest"},
               {"gpus", "gpus", true},
               {"layout", "layout"},
               {"time_days", "time_days", true},
               {"gpu_hours", "gpu_hours", true},
               {"cost_usd", "cost_usd", true},
               {"energy_kWh", "energy_kWh", true},
               {"mfu", "mfu", true},
               {"headroom_bytes", "headroom_bytes", true},
               {"replicas", "replicas", true},
               {"batch", "batch", true},
               {"ttft_s", "ttft_s", true},
               {"itl_s", "itl_s", true},
               {"cost_usd_per_hour", "cost_usd_per_hour", true},
               {"cost_per_mtok_usd", "cost_per_mtok_usd", true},
               {"reasons", "reasons"}};
  auto joined = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  auto price = [](const std::optional<u::UsdPerSecond>& p) { return p ? csv_num(u::to_usd_per_hour(*p)) : std::string(); };
  const auto kinds = option_kinds(ctx);
  auto kind = [&](const std::optional<u::UsdPerSecond>& p, std::size_t k) { return p ? kinds[k] : std::string(); };
  for (const auto& ir : res.training)
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      const bool f = c.feasible;
      t.rows.push_back({"training", ir.id, opts[k].id, ctx.options[k].sys.gpu->info.id, price(c.price),
                        kind(c.price, k), f ? "true" : "false", ir.cheapest && *ir.cheapest == k ? "true" : "false",
                        f ? std::to_string(c.gpus) : "", f ? c.layout_text : "",
                        f ? csv_num(c.time_to_train.raw() / 86400.0) : "", f ? csv_num(c.gpu_hours) : "",
                        f && c.cost ? csv_num(c.cost->raw()) : "", f && c.energy ? csv_num(c.energy->raw() / 3.6e6) : "",
                        f ? csv_num(c.mfu) : "", f ? csv_num((c.capacity - c.peak_memory).raw()) : "", "", "", "", "",
                        "", "", joined(c.reasons)});
    }
  for (const auto& ir : res.serving)
    for (std::size_t k = 0; k < ir.cells.size(); ++k) {
      const auto& c = ir.cells[k];
      const bool n = c.has_numbers;
      t.rows.push_back({"serving", ir.id, opts[k].id, ctx.options[k].sys.gpu->info.id, price(c.price),
                        kind(c.price, k), c.feasible ? "true" : "false", ir.cheapest && *ir.cheapest == k ? "true" : "false",
                        n ? std::to_string(c.gpus) : "",
                        n ? fmt::format("TP {}{}", c.tp, c.pp > 1 ? fmt::format(" · PP {}", c.pp) : "") : "", "", "", "", "",
                        "", "", n ? std::to_string(c.replicas) : "", n ? std::to_string(c.batch) : "",
                        n ? csv_num(c.ttft.raw()) : "", n ? csv_num(c.itl.raw()) : "",
                        n ? csv_num(u::to_usd_per_hour(c.cost_rate)) : "", n ? csv_num(c.cost_per_mtok_usd) : "",
                        joined(c.reasons)});
    }
  return t.render(Format::csv);
}

}  // namespace gpuplan::cli
