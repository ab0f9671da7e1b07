// The output of `gpuplan train --search` (train_search_output.hpp): the ranked layouts as a table, as CSV rows (the
// stable columns of docs/search.md) and as JSON objects, and the "Why #1 beats #2" section. Moved out of
// cmd_train.cpp, which keeps the flags, running the search and assembling the output.
#include "train_search_output.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

std::string csv_num(double v) { return fmt::format("{:.10g}", v); }

/// The stable columns of a search CSV (docs/search.md): one row per layout.
const std::vector<Table::Column>& point_columns() {
  static const std::vector<Table::Column> c = {{"rank", "#", true},
                                               {"gpus", "GPUs", true},
                                               {"tp", "TP", true},
                                               {"pp", "PP", true},
                                               {"dp", "DP", true},
                                               {"cp", "CP", true},
                                               {"ep", "EP", true},
                                               {"virtual_stages", "v", true},
                                               {"micro_batch", "micro", true},
                                               {"sequence_parallel", "SP"},
                                               {"recompute", "recompute"},
                                               {"zero", "ZeRO", true},
                                               {"offload", "offload"},
                                               {"valid", "valid"},
                                               {"fits", "fits"},
                                               {"meets_deadline", "deadline"},
                                               {"step_time_s", "step s", true},
                                               {"tokens_per_s", "tokens/s", true},
                                               {"mfu", "MFU", true},
                                               {"peak_bytes_per_gpu", "peak B/GPU", true},
                                               {"capacity_bytes", "capacity B", true},
                                               {"gemm_s", "GEMM s", true},
                                               {"attention_s", "attention s", true},
                                               {"elementwise_s", "elementwise s", true},
                                               {"embedding_loss_s", "head s", true},
                                               {"recompute_s", "recompute s", true},
                                               {"comm_exposed_s", "comm s", true},
                                               {"tp_exposed_s", "TP comm s", true},
                                               {"cp_exposed_s", "CP comm s", true},
                                               {"ep_exposed_s", "EP comm s", true},
                                               {"pp_exposed_s", "PP comm s", true},
                                               {"dp_exposed_s", "DP comm s", true},
                                               {"bubble_s", "bubble s", true},
                                               {"optimizer_s", "optimizer s", true},
                                               {"offload_s", "offload s", true},
                                               {"time_to_train_s", "time to train s", true},
                                               {"cost_usd", "cost $", true},
                                               {"tokens_per_usd", "tokens/$", true},
                                               {"expert_tp", "ETP", true},
                                               {"first_stage_layers", "first-stage layers", true},
                                               {"last_stage_layers", "last-stage layers", true},
                                               {"embedding_as_layer", "embedding as a layer"},
                                               {"loss_as_layer", "loss as a layer"}};
  return c;
}

/// One CSV row of point_columns(); `rank` counts the eligible rows so far.
/// `meets_deadline` is empty without a deadline.
std::vector<std::string> point_row(const model::SearchPoint& p, bool deadline, std::uint64_t& rank) {
  const auto& l = p.layout;
  const auto& s = p.score;
  const bool v = s.valid;
  auto sec = [&](u::Seconds x) { return v ? csv_num(x.raw()) : std::string(); };
  return {p.rank_class == 0 ? std::to_string(++rank) : "",
          std::to_string(l.gpus),
          std::to_string(l.tp),
          std::to_string(l.pp),
          std::to_string(l.dp),
          std::to_string(l.cp),
          std::to_string(l.ep),
          std::to_string(l.virtual_stages),
          std::to_string(l.micro_batch),
          l.sequence_parallel ? "true" : "false",
          recompute_key(l.recompute),
          std::to_string(static_cast<int>(l.zero)),
          l.offload == wl::Offload::optimizer ? "optimizer" : "none",
          v ? "true" : "false",
          s.fits ? "true" : "false",
          !deadline || p.rank_class >= 2 ? "" : p.rank_class == 0 ? "true" : "false",
          sec(s.step_time),
          v ? csv_num(s.tokens_per_s) : "",
          v ? csv_num(s.mfu) : "",
          v ? csv_num(s.memory.raw()) : "",
          v ? csv_num(s.capacity.raw()) : "",
          sec(s.step.gemm),
          sec(s.step.attention),
          sec(s.step.elementwise),
          sec(s.step.embedding_loss),
          sec(s.step.recompute),
          sec(s.step.comm_exposed),
          sec(s.comm.tp),
          sec(s.comm.cp),
          sec(s.comm.ep),
          sec(s.comm.pp),
          sec(s.comm.dp),
          sec(s.step.bubble),
          sec(s.step.optimizer),
          sec(s.step.offload),
          v && s.has_time_to_train ? csv_num(s.time_to_train.raw()) : "",
          v && s.has_cost ? csv_num(s.cost.raw()) : "",
          v && s.has_price ? csv_num(s.tokens_per_usd) : "",
          std::to_string(l.etp > 0 ? l.etp : l.tp),
          std::to_string(l.first_stage_layers),
          std::to_string(l.last_stage_layers),
          l.embedding_as_layer ? "true" : "false",
          l.loss_as_layer ? "true" : "false"};
}

/// The layout's layer split for the table: "even", else its stage layer counts and accounting ("last 1").
std::string split_cell(const model::Layout& l) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : " ") + x; };
  if (l.first_stage_layers > 0) add(fmt::format("first {}", l.first_stage_layers));
  if (l.last_stage_layers > 0) add(fmt::format("last {}", l.last_stage_layers));
  if (l.embedding_as_layer) add("emb");
  if (l.loss_as_layer) add("loss");
  return s.empty() ? std::string("even") : s;
}

}  // namespace

Table points_table(const std::vector<model::SearchPoint>& points, bool deadline) {
  Table t;
  t.columns = point_columns();
  std::uint64_t rank = 0;
  for (const auto& p : points) t.rows.push_back(point_row(p, deadline, rank));
  return t;
}

void write_points_csv(std::ostream& os, const std::vector<model::RankedLayout>& all, bool deadline,
                      const wl::TransformerArch& arch, const wl::TrainingPlan& base, const model::TrainingSystem& sys) {
  Table header;
  header.columns = point_columns();
  os << header.render(Format::csv);
  model::FastTrainingEvaluator ev(arch, base, sys);
  std::uint64_t rank = 0;
  std::string line;
  for (const auto& r : all) {
    const model::SearchPoint p{r.layout, ev.evaluate(r.layout), r.objective, r.rank_class};
    line.clear();
    const auto cells = point_row(p, deadline, rank);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i > 0) line += ',';
      line += cells[i];
    }
    line += '\n';
    os << line;
  }
}

ordered_json point_json(const model::SearchPoint& p, std::uint64_t rank) {
  const auto& l = p.layout;
  const auto& s = p.score;
  ordered_json o;
  o["rank"] = rank;
  o["layout"] = {{"gpus", l.gpus}, {"tp", l.tp}, {"pp", l.pp}, {"dp", l.dp}, {"cp", l.cp}, {"ep", l.ep},
                 {"expert_tp", l.etp > 0 ? l.etp : l.tp},
                 {"virtual_stages", l.virtual_stages}, {"micro_batch", l.micro_batch},
                 {"sequence_parallel", l.sequence_parallel}, {"recompute", recompute_key(l.recompute)},
                 {"zero", static_cast<int>(l.zero)},
                 {"offload", l.offload == wl::Offload::optimizer ? "optimizer" : "none"}};
  // The layer split over the pipeline stages (with a pipeline): the Megatron-LM flags that set it.
  if (l.pp > 1)
    o["layout"]["split"] = {{"first_stage_layers", l.first_stage_layers},
                            {"last_stage_layers", l.last_stage_layers},
                            {"embedding_as_layer", l.embedding_as_layer},
                            {"loss_as_layer", l.loss_as_layer},
                            {"megatron_flags", model::megatron_split_flags(l)}};
  o["step_time_s"] = s.step_time.raw();
  o["tokens_per_s"] = s.tokens_per_s;
  o["mfu"] = s.mfu;
  o["peak_bytes_per_gpu"] = s.memory.raw();
  o["capacity_bytes"] = s.capacity.raw();
  if (s.has_time_to_train) o["time_to_train_s"] = s.time_to_train.raw();
  if (s.has_cost) o["cost_usd"] = s.cost.raw();
  if (s.has_price) o["tokens_per_usd"] = s.tokens_per_usd;
  return o;
}

Table top_table(const std::vector<model::SearchPoint>& top, bool several_gpu_counts, bool moe, bool tokens, bool price) {
  Table t;
  t.columns = {{"rank", "#", true}};
  if (several_gpu_counts) t.columns.push_back({"gpus", "GPUs", true});
  t.columns.insert(t.columns.end(), {{"tp", "TP", true}, {"pp", "PP", true}, {"v", "v", true}, {"dp", "DP", true},
                                     {"cp", "CP", true}});
  if (moe) t.columns.insert(t.columns.end(), {{"ep", "EP", true}, {"expert_tp", "ETP", true}});
  // The layer split, where a top layout splits unevenly (the column would read "even" throughout otherwise).
  const bool split = std::any_of(top.begin(), top.end(), [](const model::SearchPoint& p) { return p.layout.split_set(); });
  if (split) t.columns.push_back({"split", "layer split"});
  t.columns.insert(t.columns.end(), {{"sp", "SP"}, {"micro", "micro", true}, {"recompute", "recompute"},
                                     {"zero", "ZeRO", true}, {"step", "step", true}, {"tokens_per_s", "tokens/s", true},
                                     {"mfu", "MFU"}, {"memory", "memory/GPU", true}});
  if (tokens) t.columns.push_back({"time_to_train", "time to train", true});
  if (tokens && price) t.columns.push_back({"cost", "cost", true});
  if (price) t.columns.push_back({"tokens_per_usd", "tokens/$", true});
  std::uint64_t rank = 0;
  for (const auto& p : top) {
    const auto& l = p.layout;
    const auto& s = p.score;
    std::vector<std::string> r{std::to_string(++rank)};
    if (several_gpu_counts) r.push_back(std::to_string(l.gpus));
    // The v column says "dual" for the DualPipe schedule (one chunk per direction).
    r.insert(r.end(), {std::to_string(l.tp), std::to_string(l.pp),
                       l.dualpipe ? std::string("dual") : std::to_string(l.virtual_stages), std::to_string(l.dp),
                       std::to_string(l.cp)});
    if (moe) r.insert(r.end(), {std::to_string(l.ep), std::to_string(l.etp > 0 ? l.etp : l.tp)});
    if (split) r.push_back(split_cell(l));
    r.insert(r.end(), {l.sequence_parallel ? "on" : "off", std::to_string(l.micro_batch), recompute_key(l.recompute),
                       std::to_string(static_cast<int>(l.zero)) + (l.offload == wl::Offload::optimizer ? " +off" : ""),
                       u::format(s.step_time),
                       u::format_count(std::round(s.tokens_per_s)), u::format(u::Ratio(s.mfu)),
                       u::format(s.memory, u::BytePrefix::binary)});
    if (tokens) r.push_back(u::format(s.time_to_train));
    if (tokens && price) r.push_back(s.has_cost ? u::format(s.cost) : "");
    if (price) r.push_back(u::format_count(std::round(s.tokens_per_usd)));
    t.rows.push_back(std::move(r));
  }
  return t;
}

Section why_section(const model::LayoutComparison& c, const model::SearchPoint& a, const model::SearchPoint& b,
                    model::RankBy rank_by) {
  Section w{"Why #1 beats #2", {}};
  const double gain = (c.step_second - c.step_first).raw() / c.step_second.raw();
  w.rows.emplace_back("step time", fmt::format("{} vs {} (#1 {} {})", u::format(c.step_first), u::format(c.step_second),
                                               gain >= 0 ? "faster by" : "slower by", u::format(u::Ratio(std::abs(gain)))));
  if (rank_by != model::RankBy::time && a.score.has_price && b.score.has_price)
    w.rows.emplace_back("tokens per $", fmt::format("{} vs {}", u::format_count(std::round(a.score.tokens_per_usd)),
                                                    u::format_count(std::round(b.score.tokens_per_usd))));
  std::string changes;
  for (const auto& x : c.changes) changes += (changes.empty() ? "" : ", ") + x;
  w.rows.emplace_back("#2 differs in", changes.empty() ? std::string("nothing") : changes);
  for (const auto& d : c.terms) {
    const u::Seconds delta = d.second - d.first;
    w.rows.emplace_back(d.term, fmt::format("{} vs {} (#1 {} {})", u::format(d.first), u::format(d.second),
                                            delta.raw() > 0 ? "saves" : "loses", u::format(u::Seconds(std::abs(delta.raw())))));
  }
  if (c.terms.empty()) w.rows.emplace_back("step terms", "identical: the order is the layout tuple (a tie)");
  w.rows.emplace_back("memory headroom", fmt::format("{} vs {}", u::format(c.headroom_first, u::BytePrefix::binary),
                                                     u::format(c.headroom_second, u::BytePrefix::binary)));
  return w;
}

}  // namespace gpuplan::cli
