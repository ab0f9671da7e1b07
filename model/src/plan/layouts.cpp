// Layouts (search.hpp): a training plan with a layout applied and the layout a plan has, their one-line description,
// the ranking objective's name, and the comparison of two evaluated layouts (what changed, what it did).
#include "gpuplan/model/search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "memory_core.hpp"
#include "training_core.hpp"

namespace gpuplan::model {

// ------------------------------------------------------------------------------------------------------------------
// Layouts
// ------------------------------------------------------------------------------------------------------------------

wl::TrainingPlan with_layout(const wl::TrainingPlan& base, const Layout& l) {
  wl::TrainingPlan p = base;
  apply_layout(p, l);
  return p;
}

void apply_layout(wl::TrainingPlan& p, const Layout& l) {
  p.par.tp = l.tp;
  p.par.pp = l.pp;
  p.par.dp = l.dp;
  p.par.cp = l.cp;
  p.par.ep = l.ep;
  p.par.etp = l.etp;
  p.par.virtual_stages = l.virtual_stages;
  p.par.sequence_parallel = l.sequence_parallel;
  p.schedule = l.dualpipe             ? wl::PipelineSchedule::dualpipe
               : l.virtual_stages > 1 ? wl::PipelineSchedule::interleaved
                                      : wl::PipelineSchedule::one_f_one_b;
  p.micro_batch = l.micro_batch;
  p.recompute = l.recompute;
  p.zero = l.zero;
  p.offload = l.offload;
  // The layer split: set by the layout, else the plan's own (a hand-made Layout keeps the base plan's split; the
  // search's evaluator puts the base plan's split back before a layout that sets none).
  if (l.split_set()) {
    p.split.first_stage_layers = l.first_stage_layers;
    p.split.last_stage_layers = l.last_stage_layers;
    p.split.embedding_as_layer = l.embedding_as_layer;
    p.split.loss_as_layer = l.loss_as_layer;
    p.split.chunk_layers.clear();
    p.split.layout.clear();
  }
}

Layout layout_of(const wl::TrainingPlan& plan) {
  Layout l;
  l.gpus = plan.par.gpus();
  l.tp = plan.par.tp;
  l.pp = plan.par.pp;
  l.dp = plan.par.dp;
  l.cp = plan.par.cp;
  l.ep = plan.par.ep;
  l.etp = plan.par.etp;
  l.virtual_stages = plan.schedule == wl::PipelineSchedule::interleaved ? plan.par.virtual_stages : 1;
  l.micro_batch = plan.micro_batch;
  l.sequence_parallel = plan.par.sequence_parallel;
  l.recompute = plan.recompute;
  l.zero = plan.zero;
  l.offload = plan.offload;
  l.dualpipe = plan.schedule == wl::PipelineSchedule::dualpipe;
  l.first_stage_layers = int(plan.split.first_stage_layers);
  l.last_stage_layers = int(plan.split.last_stage_layers);
  l.embedding_as_layer = plan.split.embedding_as_layer;
  l.loss_as_layer = plan.split.loss_as_layer;
  return l;
}

namespace {

const char* recompute_name(wl::Recompute r) { return wl::to_string(r); }

}  // namespace

std::string describe(const Layout& l) {
  std::string s = fmt::format("TP {} · PP {}", l.tp, l.pp);
  if (l.virtual_stages > 1) s += fmt::format(" (v={})", l.virtual_stages);
  if (l.dualpipe) s += " DualPipe";
  s += fmt::format(" · DP {} · CP {}", l.dp, l.cp);
  if (l.ep > 1) s += fmt::format(" · EP {}", l.ep);
  if (l.etp > 0 && l.etp != l.tp) s += fmt::format(" · ETP {}", l.etp);
  if (l.sequence_parallel && l.tp > 1) s += " · SP";
  s += fmt::format(" · micro-batch {} · recompute {} · ZeRO {}", l.micro_batch, recompute_name(l.recompute),
                   static_cast<int>(l.zero));
  if (l.offload == wl::Offload::optimizer) s += " · CPU offload";
  if (l.first_stage_layers > 0) s += fmt::format(" · first stage {} layers", l.first_stage_layers);
  if (l.last_stage_layers > 0) s += fmt::format(" · last stage {} layers", l.last_stage_layers);
  if (l.embedding_as_layer) s += " · embedding as a layer";
  if (l.loss_as_layer) s += " · loss as a layer";
  return s;
}

std::string megatron_split_flags(const Layout& l) {
  std::string s;
  auto add = [&](const std::string& flag) { s += (s.empty() ? "" : " ") + flag; };
  if (l.first_stage_layers > 0) add(fmt::format("--decoder-first-pipeline-num-layers {}", l.first_stage_layers));
  if (l.last_stage_layers > 0) add(fmt::format("--decoder-last-pipeline-num-layers {}", l.last_stage_layers));
  if (l.embedding_as_layer) add("--account-for-embedding-in-pipeline-split");
  if (l.loss_as_layer) add("--account-for-loss-in-pipeline-split");
  return s;
}

std::string to_string(RankBy r) {
  switch (r) {
    case RankBy::time: return "time";
    case RankBy::cost: return "cost";
    case RankBy::tokens_per_usd: return "tokens-per-usd";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------------------------------
// Comparison
// ------------------------------------------------------------------------------------------------------------------

LayoutComparison compare_layouts(const Layout& la, const TrainingEstimate& a, const Layout& lb,
                                 const TrainingEstimate& b) {
  LayoutComparison c;
  auto change = [&](const char* name, auto x, auto y) {
    if (x != y) c.changes.push_back(fmt::format("{} {} → {}", name, x, y));
  };
  change("GPUs", la.gpus, lb.gpus);
  change("TP", la.tp, lb.tp);
  change("PP", la.pp, lb.pp);
  change("virtual stages", la.virtual_stages, lb.virtual_stages);
  change("DP", la.dp, lb.dp);
  change("CP", la.cp, lb.cp);
  change("EP", la.ep, lb.ep);
  if ((la.etp > 0 && la.etp != la.tp) || (lb.etp > 0 && lb.etp != lb.tp))
    change("expert TP", la.etp > 0 ? la.etp : la.tp, lb.etp > 0 ? lb.etp : lb.tp);
  if (la.sequence_parallel != lb.sequence_parallel)
    c.changes.push_back(
        fmt::format("SP {} → {}", la.sequence_parallel ? "on" : "off", lb.sequence_parallel ? "on" : "off"));
  change("micro-batch", la.micro_batch, lb.micro_batch);
  if (la.recompute != lb.recompute)
    c.changes.push_back(fmt::format("recompute {} → {}", recompute_name(la.recompute), recompute_name(lb.recompute)));
  change("ZeRO", static_cast<int>(la.zero), static_cast<int>(lb.zero));
  change("first-stage layers", la.first_stage_layers, lb.first_stage_layers);
  change("last-stage layers", la.last_stage_layers, lb.last_stage_layers);
  if (la.embedding_as_layer != lb.embedding_as_layer || la.loss_as_layer != lb.loss_as_layer)
    c.changes.push_back(fmt::format("embedding/loss as a layer {}/{} → {}/{}", la.embedding_as_layer ? "on" : "off",
                                    la.loss_as_layer ? "on" : "off", lb.embedding_as_layer ? "on" : "off",
                                    lb.loss_as_layer ? "on" : "off"));
  if (la.offload != lb.offload)
    c.changes.push_back(fmt::format("CPU offload {} → {}", la.offload == wl::Offload::optimizer ? "on" : "off",
                                    lb.offload == wl::Offload::optimizer ? "on" : "off"));

  const StepBreakdown& x = a.step;
  const StepBreakdown& y = b.step;
  c.terms = {{"GEMM", x.gemm, y.gemm},
             {"attention", x.attention, y.attention},
             {"elementwise", x.elementwise, y.elementwise},
             {"embedding + LM head + loss", x.embedding_loss, y.embedding_loss}};
  for (std::size_t i = 0; i < a.comm.size() && i < b.comm.size(); ++i)
    c.terms.push_back({a.comm[i].kind + " comm exposed", a.comm[i].exposed, b.comm[i].exposed});
  c.terms.push_back({"pipeline bubble", x.bubble, y.bubble});
  c.terms.push_back({"optimizer", x.optimizer, y.optimizer});
  c.terms.push_back({"offload transfers", x.offload, y.offload});
  std::erase_if(c.terms, [](const TermDelta& d) { return d.first == d.second; });
  std::stable_sort(c.terms.begin(), c.terms.end(), [](const TermDelta& p, const TermDelta& q) {
    return std::abs((p.second - p.first).raw()) > std::abs((q.second - q.first).raw());
  });
  c.step_first = a.step_time;
  c.step_second = b.step_time;
  c.headroom_first = a.memory.capacity - a.memory.total;
  c.headroom_second = b.memory.capacity - b.memory.total;
  return c;
}

}  // namespace gpuplan::model
