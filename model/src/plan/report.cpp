// Budget report: picks the cheapest layout per item × option (search_training, plan_serving), the cheapest option per
// item and sums the totals; every choice carries its derivation.
#include "gpuplan/model/report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {
namespace {

namespace u = gpuplan::units;

std::string counts_text(const std::vector<long long>& counts) {
  std::string s;
  for (long long n : counts) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s;
}

std::string days_text(double days) { return fmt::format("{}-day", u::format_number(days, 4)); }

TrainingCell evaluate_training(const TrainingRequest& item, const TrainingCellInput& in, const ReportOption& option,
                               unsigned threads, Explain explain) {
  TrainingCell c;
  c.price = in.sys.price ? in.sys.price : (in.sys.gpu ? in.sys.gpu->price : std::nullopt);
  c.price_origin = in.price_origin;
  if (!in.unresolved.empty()) {
    c.reasons = in.unresolved;
    return c;
  }
  SearchSpace space = in.space;
  if (option.max_gpus)
    space.gpus.erase(std::remove_if(space.gpus.begin(), space.gpus.end(), [&](long long n) { return n > *option.max_gpus; }),
                     space.gpus.end());
  c.gpu_counts = space.gpus;
  if (space.gpus.empty()) {
    c.reasons.push_back(fmt::format("no GPU count of the run's range is within this option's limit of {} GPUs",
                                    option.max_gpus.value_or(0)));
    return c;
  }
  // Rank by cost under the deadline. Without a price, a unit price makes the cost rank the GPU-hours.
  TrainingSystem search_sys = in.sys;
  if (!c.price) search_sys.price = u::usd_per_hour(1.0);
  SearchOptions opt;
  opt.rank_by = RankBy::cost;
  opt.deadline = u::days(item.deadline_days);
  opt.top = 1;
  opt.threads = threads;
  const SearchResult res = search_training(item.arch, in.base, search_sys, space, opt);
  c.layouts_searched = res.evaluated;
  c.layouts_meeting_deadline = res.eligible;
  const std::string deadline = days_text(item.deadline_days);
  const long long most = *std::max_element(space.gpus.begin(), space.gpus.end());
  if (!res.error.empty()) {
    c.reasons.push_back(res.error);
    return c;
  }
  if (res.top.empty()) {
    if (res.valid == 0) {
      c.reasons.push_back(fmt::format("no valid parallel layout on {} GPUs", counts_text(space.gpus)));
      for (const auto& n : res.notes) c.reasons.push_back(n);
    } else if (res.fitting == 0 && res.least_memory) {
      c.reasons.push_back(fmt::format(
          "does not fit in memory in any layout: the smallest peak is {} per GPU, {} available ({} GPUs, {})",
          u::format(res.least_memory->score.memory, u::BytePrefix::binary),
          u::format(res.least_memory->score.capacity, u::BytePrefix::binary), res.least_memory->layout.gpus,
          describe(res.least_memory->layout)));
    } else if (res.fastest_fitting) {
      c.reasons.push_back(fmt::format("misses the {} deadline even at {} GPUs: the fastest layout that fits takes {} ({} "
                                      "GPUs, {})",
                                      deadline, most, u::format(res.fastest_fitting->score.time_to_train),
                                      res.fastest_fitting->layout.gpus, describe(res.fastest_fitting->layout)));
    } else {
      c.reasons.push_back(fmt::format("no layout meets the {} deadline", deadline));
    }
    return c;
  }
  const Layout best = res.top[0].layout;
  const wl::TrainingPlan plan = with_layout(in.base, best);
  TrainingEstimate est = estimate_training(item.arch, plan, in.sys, explain);
  c.feasible = true;
  c.layout = best;
  c.layout_text = describe(best);
  c.gpus = best.gpus;
  c.step_time = est.step_time;
  c.time_to_train = est.time_to_train.value_or(u::Seconds{});
  c.gpu_hours = est.gpu_hours.value_or(0.0);
  c.cost = est.cost;
  c.energy = est.energy;
  c.peak_memory = est.memory.total;
  c.capacity = est.memory.capacity;
  c.mfu = est.mfu;
  c.tokens_per_s = est.tokens_per_s;

  Derivation& d = c.derivation;
  d.id = "report.training";
  d.title = fmt::format("{} on {}: the cheapest layout that trains {} tokens within {} days", item.name, option.name,
                        u::format_count(item.tokens), u::format_number(item.deadline_days, 4));
  d.formula = c.price ? "minimise cost = GPUs × time to train × price per GPU-hour, subject to time to train ≤ deadline"
                      : "minimise GPU-hours = GPUs × time to train, subject to time to train ≤ deadline (no price)";
  d.inputs = {{"tokens", u::format_count(item.tokens), "token budget", Origin::user("tokens")},
              {"deadline", fmt::format("{} days", u::format_number(item.deadline_days, 4)), "deadline",
               Origin::user("deadline_days")},
              {"GPUs", counts_text(space.gpus), "GPU counts searched", Origin::user("gpus, capped by the option's max_gpus")}};
  if (c.price)
    d.inputs.push_back({"price", u::format(*c.price) + " per GPU", "price per GPU-hour",
                        Origin::datasheet(c.price_origin)});
  d.result = fmt::format("{} GPUs, {}: {}, {}{}", c.gpus, c.layout_text, u::format(c.time_to_train),
                         fmt::format("{} GPU-hours", u::format_count(c.gpu_hours)),
                         c.cost ? ", " + u::format(*c.cost) : std::string());
  d.notes.push_back(fmt::format("searched {} layouts, {} fit in memory, {} meet the deadline (search_training, "
                                "docs/search.md)",
                                u::format_count(double(res.evaluated)), u::format_count(double(res.fitting)),
                                u::format_count(double(res.eligible))));
  d.notes.push_back("time to train = step time × tokens / tokens per step; GPU-hours = GPUs × time to train; cost = "
                    "GPU-hours × price; energy = TDP × GPUs × time to train (training.hpp)");
  if (!est.derivation.empty()) d.children.push_back(std::move(est.derivation));
  return c;
}

ServingCell evaluate_serving(const ServingRequest& item, const ServingCellInput& in, const ReportOption& option,
                             Explain explain) {
  ServingCell c;
  c.price = in.sys.price ? in.sys.price : (in.sys.gpu ? in.sys.gpu->price : std::nullopt);
  c.price_origin = in.price_origin;
  if (!in.unresolved.empty()) {
    c.reasons = in.unresolved;
    return c;
  }
  ServingPlanResult r = plan_serving(item.arch, item.params, in.perf, item.traffic, item.sla, in.sys, in.options, explain);
  c.feasible = r.feasible;
  if (r.best) {
    const auto& b = *r.best;
    c.has_numbers = true;
    c.tp = b.tp;
    c.pp = b.pp;
    c.replicas = b.replicas;
    c.gpus = b.gpus;
    c.batch = b.batch;
    c.ttft = b.ttft;
    c.itl = b.itl;
    c.cost_rate = b.cost_rate;
    c.cost_per_mtok_usd = b.cost_per_mtok_usd;
    c.output_tokens_per_s = b.state.output_tokens_per_s * double(b.replicas);
    if (!r.feasible)
      for (const auto& m : b.misses) c.reasons.push_back("SLA not met: " + m);
  }
  if (!r.feasible) {
    // plan_serving's "best achievable misses: ..." repeats the misses listed above.
    for (const auto& x : r.reasons)
      if (x.rfind("best achievable misses", 0) != 0 || c.reasons.empty()) c.reasons.push_back(x);
    if (c.reasons.empty()) c.reasons.push_back("no layout meets the SLA");
  }
  if (c.feasible && option.max_gpus && c.gpus > *option.max_gpus) {
    c.feasible = false;
    c.reasons.push_back(fmt::format("needs {} GPUs, more than this option's limit of {}", c.gpus, *option.max_gpus));
  }
  Derivation& d = c.derivation;
  d.id = "report.serving";
  d.title = fmt::format("{} on {}: the fewest GPUs that serve {} req/s within the SLA", item.name, option.name,
                        u::format_number(item.traffic.requests_per_s, 4));
  d.formula = "replicas = ⌈λ / λ_replica⌉ at the replica layout and batch with the fewest GPUs meeting TTFT and ITL; "
              "cost rate = GPUs × price; $/Mtok = cost rate / (λ · output tokens) · 10⁶";
  if (c.price)
    d.inputs.push_back({"price", u::format(*c.price) + " per GPU", "price per GPU-hour", Origin::datasheet(c.price_origin)});
  d.result = c.has_numbers ? fmt::format("{} GPUs = {}; {}; ${:.3g}/Mtok", c.gpus, replica_layout(c.replicas, c.tp, c.pp),
                                         u::format(c.cost_rate), c.cost_per_mtok_usd)
                           : std::string("no layout holds the model");
  for (const auto& n : r.notes) d.notes.push_back(n);
  if (!r.derivation.empty()) d.children.push_back(std::move(r.derivation));
  return c;
}

/// Index of the cheapest feasible cell by `key` (ties: the earlier option).
template <class Cell, class Key>
std::optional<std::size_t> cheapest(const std::vector<Cell>& cells, Key key) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (cells[i].feasible && (!best || key(cells[i]) < key(cells[*best]))) best = i;
  return best;
}

}  // namespace

ReportResult build_report(const ReportRequest& request) {
  ReportResult out;
  out.options = request.options;
  const std::size_t n_opt = request.options.size();
  const std::size_t total = (request.training.size() + request.serving.size()) * n_opt;
  std::size_t done = 0;
  auto tick = [&](const std::string& item, const ReportOption& o) {
    ++done;
    if (request.progress) request.progress(done, total, item + " on " + o.name);
  };
  for (const auto& item : request.training) {
    ItemReport<TrainingCell> ir{item.id, item.name, {}, std::nullopt};
    for (std::size_t k = 0; k < n_opt; ++k) {
      ir.cells.push_back(evaluate_training(item, item.cells.at(k), request.options[k], request.threads, request.explain));
      tick(item.name, request.options[k]);
    }
    for (std::size_t k = 0; k < n_opt; ++k) {
      auto& c = ir.cells[k];
      const auto& sys = item.cells.at(k).sys;
      if (c.feasible && sys.gpu != nullptr && !request.bands.empty())
        c.band = band_for(request.bands, Regime{"train", generation_of(sys.gpu->family),
                                                item.arch.moe.has_value() ? "moe" : "dense",
                                                scale_bucket(c.gpus, sys.node ? sys.node->gpus : 1)});
    }
    // Lowest expected cost; GPU-hours when no option has a price.
    const bool priced = std::all_of(ir.cells.begin(), ir.cells.end(), [](const TrainingCell& c) { return !c.feasible || c.cost; });
    ir.cheapest = cheapest(ir.cells, [&](const TrainingCell& c) {
      return (priced ? c.cost->raw() : c.gpu_hours) * expected_factor(c);
    });
    out.training.push_back(std::move(ir));
  }
  for (const auto& item : request.serving) {
    ItemReport<ServingCell> ir{item.id, item.name, {}, std::nullopt};
    for (std::size_t k = 0; k < n_opt; ++k) {
      ir.cells.push_back(evaluate_serving(item, item.cells.at(k), request.options[k], request.explain));
      tick(item.name, request.options[k]);
    }
    for (std::size_t k = 0; k < n_opt; ++k) {
      auto& c = ir.cells[k];
      const auto& sys = item.cells.at(k).sys;
      if (c.feasible && sys.gpu != nullptr && !request.bands.empty())
        c.band = band_for(request.bands, Regime{"serve", generation_of(sys.gpu->family),
                                                item.arch.moe.has_value() ? "moe" : "dense",
                                                scale_bucket(std::int64_t(c.tp) * c.pp, sys.node ? sys.node->gpus : 1)});
    }
    const bool priced = std::all_of(ir.cells.begin(), ir.cells.end(), [](const ServingCell& c) { return !c.feasible || c.price; });
    ir.cheapest = cheapest(ir.cells, [&](const ServingCell& c) {
      return (priced ? c.cost_rate.raw() : double(c.gpus)) * expected_factor(c);
    });
    out.serving.push_back(std::move(ir));
  }

  // Totals: each item on its cheapest option.
  out.all_feasible = true;
  Derivation& t = out.totals;
  t.id = "report.totals";
  t.title = "Totals: each item on its cheapest feasible option";
  t.formula = "training cost = Σ cost of each run's cheapest option; serving cost rate = Σ $/h of each deployment's "
              "cheapest option; per month = $/h × 720 h";
  for (const auto& ir : out.training) {
    if (!ir.cheapest) {
      out.all_feasible = false;
      t.notes.push_back(fmt::format("{}: no option meets the deadline; left out of the totals", ir.name));
      continue;
    }
    const auto& c = ir.cells[*ir.cheapest];
    if (c.cost) {
      out.training_cost += *c.cost;
      out.training_cost_p10 += *c.cost * (c.band ? c.band->p10 : 1.0);
      out.training_cost_p90 += *c.cost * (c.band ? c.band->p90 : 1.0);
    }
    out.training_gpu_hours += c.gpu_hours;
    if (c.energy) out.training_energy += *c.energy;
    out.training_time_longest = std::max(out.training_time_longest, c.time_to_train);
    t.inputs.push_back({ir.id, c.cost ? u::format(*c.cost) : fmt::format("{} GPU-hours", u::format_count(c.gpu_hours)),
                        fmt::format("{} on {}", ir.name, out.options[*ir.cheapest].name), Origin::derived("report.training")});
  }
  for (const auto& ir : out.serving) {
    if (!ir.cheapest) {
      out.all_feasible = false;
      t.notes.push_back(fmt::format("{}: no option meets the SLA; left out of the totals", ir.name));
      continue;
    }
    const auto& c = ir.cells[*ir.cheapest];
    out.serving_cost_rate += c.cost_rate;
    out.serving_cost_rate_p10 += c.cost_rate * (c.band ? c.band->p10 : 1.0);
    out.serving_cost_rate_p90 += c.cost_rate * (c.band ? c.band->p90 : 1.0);
    out.serving_gpus += c.gpus;
    t.inputs.push_back({ir.id, u::format(c.cost_rate), fmt::format("{} on {}", ir.name, out.options[*ir.cheapest].name),
                        Origin::derived("report.serving")});
  }
  t.result = fmt::format("training {} ({} GPU-hours); serving {} = {} per month on {} GPUs", u::format(out.training_cost),
                         u::format_count(out.training_gpu_hours), u::format(out.serving_cost_rate),
                         u::format(u::Usd(out.serving_cost_rate.raw() * kHoursPerMonth * 3600.0)), out.serving_gpus);

  for (std::size_t k = 0; k < n_opt; ++k) {
    OptionTotal o;
    o.covers_all = true;
    for (const auto& ir : out.training) {
      const auto& c = ir.cells[k];
      if (!c.feasible) o.covers_all = false;
      if (c.cost) o.training_cost += *c.cost;
      o.training_gpu_hours += c.gpu_hours;
    }
    for (const auto& ir : out.serving) {
      const auto& c = ir.cells[k];
      if (!c.feasible) o.covers_all = false;
      if (c.feasible) {
        o.serving_cost_rate += c.cost_rate;
        o.serving_gpus += c.gpus;
      }
    }
    out.per_option.push_back(o);
  }
  return out;
}

}  // namespace gpuplan::model
