// `gpuplan collective`: what one NCCL collective costs on a fabric — time, algorithm bandwidth and bus bandwidth in
// nccl-tests' conventions (doc/PERFORMANCE.md), the link tiers it crosses, for one size or an nccl-tests-style sweep
// (-b/-e/-f). Every number comes from model::collective_cost on the communicator the training model uses
// (model::training_comm_group), so this command, `train` and `validate` price a collective identically.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/app/resolve.hpp"
#include "sizes.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct CollectiveFlags {
  std::string op, bytes, minbytes, maxbytes, stepbytes;
  double stepfactor = 2.0;
  long long gpus = 0;
  std::string gpu, node, cluster, algo = "auto", dtype = "float";
  bool no_calibration = false;
};

struct DataType {
  const char* name;  ///< nccl-tests' spelling (-d)
  int bytes;
};
constexpr DataType kTypes[] = {{"int8", 1},  {"uint8", 1},  {"int32", 4},    {"uint32", 4}, {"int64", 8},
                               {"uint64", 8}, {"half", 2},  {"float", 4},    {"double", 8}, {"bfloat16", 2},
                               {"f8e4m3", 1}, {"f8e5m2", 1}};

/// The op as the command spells it (all-reduce) or as the samples do (all_reduce).
std::optional<model::Collective> parse_op(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  if (s == "alltoall") s = "all_to_all";
  if (s == "sendrecv") s = "send_recv";
  if (s == "broadcast") return std::nullopt;  // not offered: nccl-tests' broadcast has a root the model does not place
  return model::parse_collective(s);
}

const char* op_name(model::Collective c) {
  switch (c) {
    case model::Collective::all_reduce: return "all_reduce";
    case model::Collective::all_gather: return "all_gather";
    case model::Collective::reduce_scatter: return "reduce_scatter";
    case model::Collective::all_to_all: return "all_to_all";
    case model::Collective::send_recv: return "send_recv";
    case model::Collective::broadcast: return "broadcast";
  }
  return "?";
}

/// nccl-tests' redop column: the reduction the test runs (none for data movement only).
const char* redop(model::Collective c) {
  return c == model::Collective::all_gather || c == model::Collective::all_to_all ? "none" : "sum";
}

/// Ranks that share the buffer nccl-tests counts as "size": the all-gather output, the reduce-scatter input and the
/// all-to-all buffer are n per-rank pieces (nccl-tests src/*.cu GetCollByteCount: paramcount = count / nranks).
int pieces(model::Collective c, int n) {
  return c == model::Collective::all_gather || c == model::Collective::reduce_scatter ||
                 c == model::Collective::all_to_all
             ? n
             : 1;
}

std::string algo_text(model::CollectiveAlgorithm a) {
  switch (a) {
    case model::CollectiveAlgorithm::automatic: return "auto";
    case model::CollectiveAlgorithm::ring: return "ring";
    case model::CollectiveAlgorithm::tree: return "tree";
    case model::CollectiveAlgorithm::nvls: return "nvls";
    case model::CollectiveAlgorithm::hierarchical: return "hierarchical";
    case model::CollectiveAlgorithm::collnet: return "collnet";
  }
  return "?";
}

std::string size_convention(model::Collective c) {
  switch (c) {
    case model::Collective::all_reduce: return "size = the buffer of each rank (input = output)";
    case model::Collective::all_gather: return "size = the gathered output of each rank (n × its input)";
    case model::Collective::reduce_scatter: return "size = the input of each rank (n × its output)";
    case model::Collective::all_to_all: return "size = the buffer each rank sends in total (n pieces, one per peer)";
    case model::Collective::send_recv: return "size = the message each rank sends (and receives)";
    case model::Collective::broadcast: return "size = the buffer of the root";
  }
  return "";
}

/// nccl-tests' number formats (src/common.cu): time in µs with fewer decimals as it grows, bandwidths %6.2f.
std::string nccl_time(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

ordered_json tier_json(const char* level, const model::LinkTier& t) {
  return {{"level", level},
          {"name", t.name},
          {"bandwidth_GBps_per_gpu", u::to_GBps(t.uni_per_gpu)},
          {"latency_us", t.latency.raw() * 1e6},
          {"bus_efficiency", t.bus_efficiency},
          {"p2p_efficiency", t.p2p_eta()},
          {"in_network_reduction", t.in_network_reduction},
          {"description", model::describe(t)},
          {"origin", t.origin}};
}

int run_collective(const GlobalOptions& g, const CollectiveFlags& f, const CLI::App& cmd) {
  Diagnostics diags;
  // ---- flags first: a malformed flag is reported before any file is read ----
  const auto op = parse_op(f.op);
  if (!op)
    diags.error("", "--op",
                fmt::format("'{}' is not one of all-reduce, all-gather, reduce-scatter, all-to-all, send-recv", f.op));
  std::optional<model::CollectiveAlgorithm> algo;
  for (const auto a : {model::CollectiveAlgorithm::automatic, model::CollectiveAlgorithm::ring,
                       model::CollectiveAlgorithm::tree, model::CollectiveAlgorithm::nvls,
                       model::CollectiveAlgorithm::hierarchical, model::CollectiveAlgorithm::collnet})
    if (algo_text(a) == f.algo) algo = a;
  if (!algo)
    diags.error("", "--algo",
                fmt::format("'{}' is not one of auto, ring, tree, nvls, hierarchical, collnet", f.algo));
  const DataType* type = nullptr;
  for (const auto& t : kTypes)
    if (f.dtype == t.name) type = &t;
  if (type == nullptr) {
    std::vector<std::string> names;
    for (const auto& t : kTypes) names.emplace_back(t.name);
    diags.error("", "--datatype",
                fmt::format("'{}' is not an nccl-tests data type{}", f.dtype, did_you_mean(f.dtype, names)));
  }
  if (f.gpu.empty() && f.node.empty() && f.cluster.empty())
    diags.error("", "--gpu", "no GPU, node or cluster given (e.g. --node dgx-h100)");
  const bool range_flags = cmd.count("--minbytes") > 0 || cmd.count("--maxbytes") > 0;
  if (!f.bytes.empty() && range_flags)
    diags.error("", "--bytes", "give --bytes or -b/--minbytes with -e/--maxbytes, not both");
  if (f.bytes.empty() && !range_flags)
    diags.error("", "--bytes", "no size given: --bytes 1GiB, a range --bytes 1KiB:4GiB, or -b MIN -e MAX [--stepfactor F]");
  if (diags.has_errors()) return report(diags);
  std::vector<double> sizes;
  if (!f.bytes.empty()) {
    if (!sizes_from_spec(f.bytes, f.stepfactor, cmd.count("--stepbytes") > 0 ? f.stepbytes : "", "--bytes", sizes,
                         diags))
      return report(diags);
  } else {
    if (cmd.count("--minbytes") == 0 || cmd.count("--maxbytes") == 0) {
      diags.error("", cmd.count("--minbytes") == 0 ? "--minbytes" : "--maxbytes",
                  "a sweep needs both -b/--minbytes and -e/--maxbytes");
      return report(diags);
    }
    if (!sizes_from_spec(f.minbytes + ":" + f.maxbytes, f.stepfactor,
                         cmd.count("--stepbytes") > 0 ? f.stepbytes : "", "--minbytes", sizes, diags))
      return report(diags);
  }
  const int n = int(f.gpus);

  // ---- hardware and calibration ----
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  model::TrainingSystem sys;
  auto where = [](const std::string& key) { return "--" + key; };
  if (!resolve_hardware(f.gpu, f.node, f.cluster, db, where, diags, sys)) return report(diags);
  if (sys.node == nullptr) {
    diags.error("", "--gpu", fmt::format("no node in the database holds {}: give --node", sys.gpu->info.id));
    return report(diags);
  }
  if (!load_calibration(dir, sys, f.no_calibration, diags)) return report(diags);
  report(diags);  // notes
  std::vector<std::string> reasons;
  if (sys.cluster != nullptr && static_cast<long long>(sys.cluster->nodes) * sys.node->gpus < f.gpus)
    reasons.push_back(fmt::format("{} GPUs do not fit in cluster {} ({} nodes × {} GPUs)", f.gpus,
                                  sys.cluster->info.id, sys.cluster->nodes, sys.node->gpus));

  model::CommGroup group = model::training_comm_group(n, 1, sys);
  // --algo collnet: the communicator with NCCL_COLLNET_ENABLE=1 (SHARP where the scale-out fabric reduces).
  group.collnet = *algo == model::CollectiveAlgorithm::collnet;
  const Explain ex = g.explain ? Explain::on : Explain::off;
  struct Row {
    double bytes;
    long long count;
    model::CollectiveCost cost;
  };
  std::vector<Row> rows;
  std::vector<std::string> notes;
  for (double s : sizes) {
    // nccl-tests rounds a size down to whole elements of every rank's piece (src/common.cu, GetCollByteCount).
    const long long per = static_cast<long long>(type->bytes) * pieces(*op, n);
    const double rounded = std::floor(s / double(per)) * double(per);
    if (rounded != s)
      notes.push_back(fmt::format("{} B rounded down to {} B: whole {} elements for each of the {} rank pieces, as "
                                  "nccl-tests does",
                                  plain_number(s), plain_number(rounded), type->name, pieces(*op, n)));
    if (rounded <= 0) continue;
    rows.push_back({rounded, static_cast<long long>(rounded / double(per)),
                    model::collective_cost(*op, u::bytes(rounded), group, *algo, ex)});
  }
  if (rows.empty()) {
    diags.error("", "--bytes", fmt::format("every size is smaller than one {} element per rank piece ({} B)",
                                           type->name, type->bytes * pieces(*op, n)));
    return report(diags);
  }
  for (const auto& r : rows)
    if (!std::isfinite(r.cost.time.raw())) {
      reasons.push_back(fmt::format("the group spans {} scale-up domains of {} GPUs but {} has no scale-out link in "
                                    "the data",
                                    group.domains(), group.scale_up_size, sys.node->info.id));
      break;
    }
  if (*algo != model::CollectiveAlgorithm::automatic)
    for (const auto& r : rows)
      if (r.cost.algorithm != *algo && n > 1) {
        notes.push_back(fmt::format("--algo {} does not apply to {} on this group at every size: the fastest valid "
                                    "algorithm was used there (--explain says why)",
                                    f.algo, op_name(*op)));
        break;
      }
  const bool feasible = reasons.empty();
  const int rc = feasible ? kExitOk : kExitInfeasible;
  const int domains = group.domains();
  const std::string where_text =
      domains > 1 ? fmt::format("{} GPUs = {} × {} per scale-up domain of {}", n, domains, group.scale_up_size,
                                sys.node->info.id)
                  : fmt::format("{} GPU{} inside one scale-up domain of {}", n, n == 1 ? "" : "s", sys.node->info.id);
  std::vector<std::pair<const char*, const model::LinkTier*>> tiers;
  if (n > 1) tiers.emplace_back("scale-up", &group.scale_up);
  if (domains > 1 && group.scale_out) tiers.emplace_back("scale-out", &*group.scale_out);
  const std::string calibration =
      sys.scale_up_calibration ? sys.scale_up_calibration->origin : std::string("none (built-in link data)");
  const double factor = model::bus_factor(*op, n);
  const bool sweep = rows.size() > 1;

  const Format fmt_ = parse_format(g.format);
  auto row_json = [&](const Row& r) {
    ordered_json o{{"size_bytes", r.bytes},
                   {"count", r.count},
                   {"type", type->name},
                   {"redop", redop(*op)},
                   {"root", -1},
                   {"time_s", feasible ? ordered_json(r.cost.time.raw()) : ordered_json()},
                   {"time_us", feasible ? ordered_json(r.cost.time.raw() * 1e6) : ordered_json()},
                   {"algbw_GBps", feasible ? ordered_json(u::to_GBps(r.cost.algbw)) : ordered_json()},
                   {"busbw_GBps", feasible ? ordered_json(u::to_GBps(r.cost.busbw)) : ordered_json()},
                   {"algorithm", algo_text(r.cost.algorithm)}};
    if (g.explain) o["derivation"] = derivation_json(r.cost.derivation);
    return o;
  };
  if (fmt_ == Format::json) {
    ordered_json o;
    o["op"] = op_name(*op);
    o["gpus"] = n;
    o["gpu"] = sys.gpu->info.id;
    o["node"] = sys.node->info.id;
    o["cluster"] = sys.cluster != nullptr ? ordered_json(sys.cluster->info.id) : ordered_json();
    o["ranks_per_domain"] = group.scale_up_size;
    o["domains"] = domains;
    o["algorithm_requested"] = f.algo;
    o["bus_factor"] = factor;
    o["call_latency_us"] = group.call_latency.raw() * 1e6;
    o["size_convention"] = "nccl-tests doc/PERFORMANCE.md: " + size_convention(*op);
    o["calibration"] = calibration;
    ordered_json t = ordered_json::array();
    for (const auto& [level, tier] : tiers) t.push_back(tier_json(level, *tier));
    o["tiers"] = t;
    if (sweep) {
      ordered_json arr = ordered_json::array();
      for (const auto& r : rows) arr.push_back(row_json(r));
      o["rows"] = arr;
    } else {
      const ordered_json one = row_json(rows.front());
      for (auto it = one.begin(); it != one.end(); ++it) o[it.key()] = it.value();
    }
    o["feasible"] = feasible;
    o["reasons"] = reasons;
    o["notes"] = notes;
    out(json_text(o));
    return rc;
  }
  if (fmt_ == Format::csv || fmt_ == Format::md) {
    Table t;
    t.columns = {{"op", "op"},
                 {"gpus", "GPUs", true},
                 {"size_bytes", "size (B)", true},
                 {"count", "count (elements)", true},
                 {"type", "type"},
                 {"redop", "redop"},
                 {"root", "root", true},
                 {"time_us", "time (us)", true},
                 {"algbw_GBps", "algbw (GB/s)", true},
                 {"busbw_GBps", "busbw (GB/s)", true},
                 {"algorithm", "algorithm"}};
    for (const auto& r : rows)
      t.rows.push_back({op_name(*op), std::to_string(n), plain_number(r.bytes), std::to_string(r.count), type->name,
                        redop(*op), "-1", feasible ? fmt::format("{:.6g}", r.cost.time.raw() * 1e6) : "",
                        feasible ? fmt::format("{:.6g}", u::to_GBps(r.cost.algbw)) : "",
                        feasible ? fmt::format("{:.6g}", u::to_GBps(r.cost.busbw)) : "", algo_text(r.cost.algorithm)});
    if (fmt_ == Format::md)
      out(fmt::format("## {} on {}\n\n{}\n\n", op_name(*op), where_text,
                      "nccl-tests conventions (doc/PERFORMANCE.md): " + size_convention(*op) +
                          fmt::format("; algbw = size / time; busbw = algbw × {}", units::format_number(factor, 4))));
    out(t.render(fmt_));
    if (fmt_ == Format::md) {
      std::string s = "\n";
      for (const auto& [level, tier] : tiers) s += fmt::format("- {} tier: {}\n", level, model::describe(*tier));
      s += "- calibration: " + calibration + "\n";
      for (const auto& x : reasons) s += "- infeasible: " + x + "\n";
      for (const auto& x : notes) s += "- note: " + x + "\n";
      out(s);
      if (g.explain)
        for (const auto& r : rows) out(render_derivation(r.cost.derivation, fmt_));
    }
    return rc;
  }

  // ---- text: nccl-tests' header and table ----
  std::string s;
  s += fmt::format("# gpuplan collective: {} on {}\n", op_name(*op), where_text);
  s += fmt::format("# GPU {}{}; algorithm {}{}\n", sys.gpu->info.id,
                   sys.cluster != nullptr ? ", cluster " + sys.cluster->info.id : std::string(), f.algo,
                   f.algo == "auto" ? " (the fastest valid)" : "");
  for (const auto& [level, tier] : tiers) s += fmt::format("# {} tier: {}\n", level, model::describe(*tier));
  if (tiers.empty()) s += "# one rank: no link is crossed\n";
  s += "# calibration: " + calibration + "\n";
  s += fmt::format("# nccl-tests conventions (doc/PERFORMANCE.md): {}; algbw = size / time; busbw = algbw × {} "
                   "({})\n",
                   size_convention(*op), units::format_number(factor, 4),
                   *op == model::Collective::all_reduce ? "2(n-1)/n"
                   : *op == model::Collective::send_recv ? "1"
                                                         : "(n-1)/n");
  s += "# predicted by the model, not measured: one time column (nccl-tests' out-of-place)\n#\n";
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {}\n", "size", "count", "type", "redop",
                   "root", "time", "algbw", "busbw", "algorithm");
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}\n", "(B)", "(elements)", "", "", "",
                   "(us)", "(GB/s)", "(GB/s)");
  for (const auto& r : rows) {
    const bool ok = feasible && std::isfinite(r.cost.time.raw());
    s += fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {}  {:>6}  {:>6}  {}\n", plain_number(r.bytes), r.count,
                     type->name, redop(*op), -1, ok ? nccl_time(r.cost.time.raw() * 1e6) : std::string("    n/a"),
                     ok ? fmt::format("{:6.2f}", u::to_GBps(r.cost.algbw)) : "n/a",
                     ok ? fmt::format("{:6.2f}", u::to_GBps(r.cost.busbw)) : "n/a", algo_text(r.cost.algorithm));
  }
  if (!sweep && feasible)
    s += fmt::format("#\n# {} of {} over {} GPU{}: {} (algbw {}, busbw {})\n", op_name(*op),
                     u::format(u::bytes(rows.front().bytes), u::BytePrefix::binary), n, n == 1 ? "" : "s",
                     u::format(rows.front().cost.time), u::format(rows.front().cost.algbw),
                     u::format(rows.front().cost.busbw));
  for (const auto& x : reasons) s += "# infeasible: " + x + "\n";
  for (const auto& x : notes) s += "# note: " + x + "\n";
  out(s);
  if (g.explain)
    for (const auto& r : rows) out(render_derivation(r.cost.derivation, fmt_));
  return rc;
}

}  // namespace

void register_collective(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<CollectiveFlags>();
  auto* c = app.add_subcommand("collective",
                               "time, algbw and busbw of one NCCL collective (nccl-tests conventions), one size or a "
                               "sweep, and the link tiers it crosses");
  c->add_option("--op", f->op, "all-reduce, all-gather, reduce-scatter, all-to-all or send-recv")->required();
  c->add_option("--bytes", f->bytes,
                "size in nccl-tests' convention (docs/cli.md): 1GiB, 64M, 1e9; a sweep MIN:MAX (times "
                "--stepfactor, default 2), or a list A,B,C");
  c->add_option("-b,--minbytes", f->minbytes, "sweep start, as nccl-tests -b (K, M, G are powers of 1024)");
  c->add_option("-e,--maxbytes", f->maxbytes, "sweep end, as nccl-tests -e");
  c->add_option("--stepfactor", f->stepfactor,
                "sweep: multiply the size by this factor (default 2), nccl-tests -f/--stepfactor (-f is --format here)")
      ->check(CLI::Range(1.0001, 1e6));
  c->add_option("-i,--stepbytes", f->stepbytes, "sweep: add this many bytes instead of multiplying, nccl-tests -i");
  c->add_option("--gpus,-g", f->gpus, "ranks in the communicator")->required()->check(CLI::Range(1LL, 1'000'000LL));
  c->add_option("--gpu", f->gpu, "GPU id or alias (its first node is used unless --node says otherwise)");
  c->add_option("--node", f->node, "node id (dgx-h100, ...): the scale-up domain and the NICs");
  c->add_option("--cluster", f->cluster, "cluster id: its node, fabric and size");
  c->add_option("--algo", f->algo,
                "auto (default: the fastest valid), ring, tree, nvls, hierarchical or collnet (SHARP: "
                "NCCL_COLLNET_ENABLE=1)");
  c->add_option("-d,--datatype", f->dtype, "nccl-tests data type for the count column (default float)");
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in link data");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  c->callback([&g, f, c, &rc] { rc = run_collective(g, *f, *c); });
}

}  // namespace gpuplan::cli
