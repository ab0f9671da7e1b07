#include "gpuplan/wl_io/plan_io.hpp"

#include <set>

#include <fmt/format.h>

#include "io_common.hpp"

namespace gpuplan::wl_io {

namespace {
FieldSpec f(std::string key, FieldType t, Presence p, std::string doc, double min = 0, double max = 0,
            std::string unit = {}) {
  FieldSpec s = field(std::move(key), t, p, std::move(doc), min, max);
  s.unit = std::move(unit);
  return s;
}
constexpr auto req = Presence::required;
constexpr auto opt = Presence::optional;

/// The array at `key` of `r`, each element an object; an error when it is not an array.
const Json* array_at(const ObjectReader& r, const char* key) {
  const Json* a = r.raw(key);
  if (a == nullptr) return nullptr;
  if (!a->is_array()) {
    r.error(key, fmt::format("expected an array of objects, found {}", json_io::describe_type(*a)));
    return nullptr;
  }
  return a;
}

/// Keys a scenario inside a plan may not give: the options supply the hardware, the item its budget.
void reject_keys(const Json& scenario, const std::string& file, const std::string& pointer,
                 const std::vector<std::pair<std::string, std::string>>& keys, Diagnostics& diags) {
  if (!scenario.is_object()) return;
  for (const auto& [key, why] : keys)
    if (scenario.contains(key)) diags.error(file, pointer + "/" + key, fmt::format("'{}' {}", key, why));
}

const std::string kByOption = "is set by each hardware option (/options), not by the item";
}  // namespace

const FieldTable& plan_fields() {
  static const FieldTable t{
      f("description", FieldType::string, opt, "what the plan compares and why (printed at the top of the report)"),
      f("options", FieldType::any, req, "array of hardware options to compare (table below)"),
      f("training", FieldType::any, opt, "array of training runs (table below)"),
      f("serving", FieldType::any, opt, "array of serving deployments (table below)"),
  };
  return t;
}

const FieldTable& plan_option_fields() {
  static const FieldTable t{
      f("id", FieldType::string, req, "short name used in the report's columns (\"h100\")"),
      f("name", FieldType::string, opt, "longer name (default: the id)"),
      f("gpu", FieldType::string, opt, "GPU id or alias — or give node or cluster"),
      f("node", FieldType::string, opt, "node id (default: the first shipped node with the GPU)"),
      f("cluster", FieldType::string, opt, "cluster id (sets node and fabric)"),
      f("price_usd_per_gpu_hour", FieldType::number, opt, "$ per GPU-hour (default: the GPU file's indicative price)",
        0, 1e4, "$/GPU-h"),
      f("max_gpus", FieldType::integer, opt, "the most GPUs of this option one can get", 1, 1e7),
  };
  return t;
}

const FieldTable& plan_training_fields() {
  static const FieldTable t{
      f("id", FieldType::string, req, "short name (\"pretrain\")"),
      f("name", FieldType::string, opt, "longer name (default: the id)"),
      f("scenario", FieldType::object, req,
        "training scenario keys (docs/scenario.md) without gpu, node, cluster, gpus, dp, tokens, price_usd_per_hour; "
        "model and global_batch are required"),
      f("tokens", FieldType::number, req, "token budget", 1, 1e18),
      f("deadline_days", FieldType::number, req, "the run must finish within this many days", 1e-3, 1e5, "days"),
      f("gpus", FieldType::any, opt,
        "GPU counts to search: N, \"A..B\" (doubling) or \"A..B:STEP\" (default \"8..16384\", capped by each option's "
        "max_gpus)"),
  };
  return t;
}

const FieldTable& plan_serving_fields() {
  static const FieldTable t{
      f("id", FieldType::string, req, "short name (\"chat\")"),
      f("name", FieldType::string, opt, "longer name (default: the id)"),
      f("scenario", FieldType::object, req,
        "serving scenario keys (docs/scenario.md) without gpu, node, cluster, price_usd_per_hour; model and rate are "
        "required"),
  };
  return t;
}

Result<Plan> decode_plan(const Json& j, const std::string& file) {
  Diagnostics diags;
  Plan plan;
  ObjectReader top(j, plan_fields(), file, "", diags);
  if (!top.valid() && !j.is_object()) return Result<Plan>(std::move(diags));
  plan.description = top.str("description").value_or("");
  auto check_id = [&](std::set<std::string>& seen, const std::string& id, const std::string& pointer) {
    if (id.empty()) return;
    if (!seen.insert(id).second) diags.error(file, pointer + "/id", fmt::format("duplicate id '{}'", id));
  };

  std::set<std::string> option_ids;
  if (const Json* a = array_at(top, "options")) {
    if (a->empty()) diags.error(file, "/options", "no hardware options: give at least one");
    for (std::size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("/options/{}", i);
      ObjectReader r((*a)[i], plan_option_fields(), file, p, diags);
      PlanOption o;
      o.pointer = p;
      o.id = r.str("id").value_or("");
      o.name = r.str("name").value_or(o.id);
      o.gpu = r.str("gpu").value_or("");
      o.node = r.str("node").value_or("");
      o.cluster = r.str("cluster").value_or("");
      o.price_usd_per_gpu_hour = r.num("price_usd_per_gpu_hour");
      o.max_gpus = r.integer("max_gpus");
      if (r.valid() && o.gpu.empty() && o.node.empty() && o.cluster.empty())
        diags.error(file, p, "no hardware: give gpu, node or cluster");
      check_id(option_ids, o.id, p);
      plan.options.push_back(std::move(o));
    }
  }

  std::set<std::string> item_ids;
  if (const Json* a = array_at(top, "training")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("/training/{}", i);
      ObjectReader r((*a)[i], plan_training_fields(), file, p, diags);
      PlanTrainingItem t;
      t.pointer = p;
      t.id = r.str("id").value_or("");
      t.name = r.str("name").value_or(t.id);
      t.tokens = r.num("tokens").value_or(0);
      t.deadline_days = r.num("deadline_days").value_or(0);
      check_id(item_ids, t.id, p);
      std::string range = kDefaultPlanGpus;
      if (const Json* g = r.raw("gpus")) {
        if (g->is_string()) range = g->get<std::string>();
        else if (g->is_number_integer()) range = std::to_string(g->get<long long>());
        else {
          diags.error(file, p + "/gpus",
                      fmt::format("expected a GPU count or a range string (\"256..4096\"), found {}", json_io::describe_type(*g)));
          range.clear();
        }
      }
      if (!range.empty()) {
        std::string error;
        t.gpus = parse_count_range(range, error);
        if (!error.empty()) diags.error(file, p + "/gpus", error);
      }
      if ((*a)[i].is_object() && (*a)[i].contains("scenario") && (*a)[i]["scenario"].is_object()) {
        const Json& sj = (*a)[i]["scenario"];
        const std::string sp = p + "/scenario";
        reject_keys(sj, file, sp,
                    {{"gpu", kByOption}, {"node", kByOption}, {"cluster", kByOption},
                     {"price_usd_per_hour", "is set by each hardware option (/options/N/price_usd_per_gpu_hour)"},
                     {"gpus", "is searched: give the range as the item's 'gpus'"},
                     {"dp", "is searched (DP = GPUs / (TP · PP · CP))"},
                     {"tokens", "is the item's 'tokens'"}},
                    diags);
        auto s = decode_training_scenario(sj, file, {}, sp);
        diags.append(s.diagnostics());
        if (s.ok()) t.scenario = s.value();
        for (const auto& [key, v] : sj.items()) t.scenario_keys.push_back(key);
        t.scenario_json = sj;
        if (!sj.contains("model"))
          diags.error(file, sp, "no model given (a library id such as llama-3.1-70b, or a config.json)");
        if (!sj.contains("global_batch"))
          diags.error(file, sp, "no global_batch given (sequences per optimizer step): the layouts divide it");
        t.scenario.plan.tokens_to_train = t.tokens;
      }
      plan.training.push_back(std::move(t));
    }
  }
  if (const Json* a = array_at(top, "serving")) {
    for (std::size_t i = 0; i < a->size(); ++i) {
      const std::string p = fmt::format("/serving/{}", i);
      ObjectReader r((*a)[i], plan_serving_fields(), file, p, diags);
      PlanServingItem s;
      s.pointer = p;
      s.id = r.str("id").value_or("");
      s.name = r.str("name").value_or(s.id);
      check_id(item_ids, s.id, p);
      if ((*a)[i].is_object() && (*a)[i].contains("scenario") && (*a)[i]["scenario"].is_object()) {
        const Json& sj = (*a)[i]["scenario"];
        const std::string sp = p + "/scenario";
        reject_keys(sj, file, sp,
                    {{"gpu", kByOption}, {"node", kByOption}, {"cluster", kByOption},
                     {"price_usd_per_hour", "is set by each hardware option (/options/N/price_usd_per_gpu_hour)"}},
                    diags);
        auto sc = decode_serving_scenario(sj, file, sp);
        diags.append(sc.diagnostics());
        if (sc.ok()) s.scenario = sc.value();
        s.scenario_json = sj;
        if (!sj.contains("model"))
          diags.error(file, sp, "no model given (a library id such as llama-3.1-70b, or a config.json)");
        if (!sj.contains("rate")) diags.error(file, sp, "no rate given (requests per second to serve)");
      }
      plan.serving.push_back(std::move(s));
    }
  }
  if (top.valid() && plan.training.empty() && plan.serving.empty())
    diags.error(file, "/", "nothing to report: give 'training' or 'serving' items");
  if (diags.has_errors()) return Result<Plan>(std::move(diags));
  return Result<Plan>(std::move(plan), std::move(diags));
}

}  // namespace gpuplan::wl_io
