// `gpuplan calibrate import-nccl-tests FILE… --topology …`: nccl-tests logs → the collective samples file that
// `gpuplan calibrate fit` consumes (calibrate/fit: nccl_tests.hpp). The topology is stated by the user: nccl-tests
// prints neither the node type nor how its ranks sit on nodes.
#include <algorithm>
#include <charconv>
#include <memory>

#include <fmt/format.h>

#include "commands.hpp"
#include "gpuplan/app/file_write.hpp"
#include "gpuplan/calibrate/nccl_tests.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::cli {
namespace {

struct ImportFlags {
  std::vector<std::string> files;
  std::string topology, op, out;
};

constexpr const char* kTopologyRule =
    "--topology is node=NODE_ID,gpus_per_node=G,nodes=N (e.g. node=dgx-h100,gpus_per_node=8,nodes=2)";

std::optional<calib::NcclTestsTopology> parse_topology(const std::string& spec, const hw::HardwareDb& db,
                                                       Diagnostics& diags) {
  calib::NcclTestsTopology t;
  bool have_node = false, have_g = false, have_n = false;
  std::size_t at = 0;
  while (at <= spec.size()) {
    const auto comma = spec.find(',', at);
    const std::string item = spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const auto eq = item.find('=');
    std::string key = eq == std::string::npos ? item : item.substr(0, eq);
    std::replace(key.begin(), key.end(), '-', '_');
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto count = [&](int& v, bool& have, int max) {
      int x = 0;
      const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size() || x < 1 || x > max) {
        diags.error("", "--topology", fmt::format("{} '{}': expected a whole number from 1 to {}", key, value, max));
        return;
      }
      v = x;
      have = true;
    };
    if (key == "node" && !value.empty()) {
      t.node = value;
      have_node = true;
    } else if (key == "gpus_per_node") {
      count(t.gpus_per_node, have_g, 1024);
    } else if (key == "nodes") {
      count(t.nodes, have_n, 1'000'000);
    } else {
      diags.error("", "--topology", fmt::format("'{}' in '{}': {}", item, spec, kTopologyRule));
      return std::nullopt;
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (diags.has_errors()) return std::nullopt;
  if (!have_node || !have_g || !have_n) {
    diags.error("", "--topology",
                fmt::format("'{}' lacks {}: {}", spec, !have_node ? "node" : !have_g ? "gpus_per_node" : "nodes",
                            kTopologyRule));
    return std::nullopt;
  }
  const hw::NodeSpec* node = db.find_node(t.node);
  if (node == nullptr) {
    diags.error("", "--topology", fmt::format("unknown node '{}'{}", t.node, did_you_mean(t.node, db.node_ids())));
    return std::nullopt;
  }
  t.node = node->info.id;
  if (t.gpus_per_node > node->gpus) {
    diags.error("", "--topology",
                fmt::format("gpus_per_node {} exceeds the {} GPUs of a {} node", t.gpus_per_node, node->gpus, t.node));
    return std::nullopt;
  }
  if (t.ranks() < 2) {
    diags.error("", "--topology", "a collective needs 2 ranks or more: gpus_per_node × nodes is 1");
    return std::nullopt;
  }
  return t;
}

int run_import(const GlobalOptions& g, const ImportFlags& f) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const auto topo = parse_topology(f.topology, db, diags);
  if (!topo) return report(diags);
  std::string op;
  if (!f.op.empty()) {
    op = f.op;
    std::replace(op.begin(), op.end(), '-', '_');
    if (op == "alltoall") op = "all_to_all";
    if (op == "sendrecv") op = "send_recv";
    if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" && op != "all_to_all" && op != "send_recv") {
      diags.error("", "--op",
                  fmt::format("'{}' is not one of all-reduce, all-gather, reduce-scatter, all-to-all, send-recv", f.op));
      return report(diags);
    }
  }
  const hw::NodeSpec* node = db.find_node(topo->node);
  const hw::GpuSpec* gpu = db.find_gpu(node->gpu);
  std::vector<calib::NcclTestsLog> logs;
  for (const auto& file : f.files) {
    auto text = json_io::read_text_file(file, diags);
    if (!text) continue;
    auto log = calib::parse_nccl_tests_log(*text, file, *topo, op, diags);
    if (!log) continue;
    for (const auto& name : log->devices) {
      const hw::GpuSpec* seen = db.find_gpu(name);
      if (seen != nullptr && seen != gpu) {
        diags.error(file, "",
                    fmt::format("the log ran on '{}' ({}), but node {} holds {}: state the node the run used",
                                name, seen->info.id, node->info.id, gpu->info.id));
        break;
      }
    }
    if (log->skipped_nccl_lines > 0)
      diags.note(file, "", fmt::format("{} NCCL INFO/WARN lines skipped", log->skipped_nccl_lines));
    logs.push_back(std::move(*log));
  }
  if (diags.has_errors()) return report(diags);
  std::size_t rows = 0;
  for (const auto& l : logs) rows += l.rows.size();
  if (topo->nodes > 1)
    diags.warning("", "--topology",
                  fmt::format("{} nodes: the model takes measured collectives of one scale-up domain (the NVLink "
                              "tier) only; `gpuplan calibrate fit` fits and shows these rows across nodes, but the "
                              "model does not use them (no bus efficiency against a NIC)",
                              topo->nodes));
  const std::string text = calib::nccl_tests_samples_json(logs, *topo, gpu->info.id);
  if (f.out.empty() || f.out == "-") {
    report(diags);
    out(text);
    return kExitOk;
  }
  if (!app::write_file_atomically(f.out, text, diags, f.files)) return report(diags);
  diags.note(f.out, "",
             fmt::format("{} samples of {} written; fit them with gpuplan calibrate fit {} --dry-run", rows,
                         gpu->info.id, f.out));
  return report(diags);
}

}  // namespace

void register_calibrate_import(CLI::App& calibrate, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<ImportFlags>();
  auto* c = calibrate.add_subcommand("import-nccl-tests",
                                     "nccl-tests logs (all_reduce_perf, ...) → collective samples for calibrate fit");
  c->add_option("files", f->files, "nccl-tests output files, one collective each")->required();
  c->add_option("--topology", f->topology,
                "the run's hosts: node=NODE_ID,gpus_per_node=G,nodes=N (nccl-tests does not print them)")
      ->required();
  c->add_option("--op", f->op,
                "the collective of every file (default: the log's 'Collective test starting' line, else the file "
                "name)");
  c->add_option("--out,-o", f->out, "samples file to write (default: standard output)");
  add_format_option(*c, g);
  c->callback([&g, f, &rc] { rc = run_import(g, *f); });
}

}  // namespace gpuplan::cli
