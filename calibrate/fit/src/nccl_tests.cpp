// nccl-tests logs → collective samples (nccl_tests.hpp). The table layout is nccl-tests' src/common.cu (print_header
// and the per-size line: size, count, type, redop, root, then time / algbw / busbw / #wrong out-of-place and in-place);
// the bus factors are doc/PERFORMANCE.md's, from model::bus_factor.
#include "gpuplan/calibrate/nccl_tests.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/model/collectives.hpp"

namespace gpuplan::calib {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> t;
  std::istringstream in(line);
  for (std::string w; in >> w;) t.push_back(w);
  return t;
}

std::optional<double> number(const std::string& s) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// The op of an nccl-tests binary or file name: all_reduce_perf → all_reduce, alltoall → all_to_all, ...
std::string op_of_name(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  std::replace(name.begin(), name.end(), '-', '_');
  static const std::pair<const char*, const char*> kNames[] = {
      {"all_reduce", "all_reduce"}, {"allreduce", "all_reduce"},         {"all_gather", "all_gather"},
      {"allgather", "all_gather"},  {"reduce_scatter", "reduce_scatter"}, {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},   {"all_to_all", "all_to_all"},         {"sendrecv", "send_recv"},
      {"send_recv", "send_recv"}};
  for (const auto& [k, v] : kNames)
    if (name.find(k) != std::string::npos) return v;
  return "";
}

constexpr const char* kTypes[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
                                  "bfloat16", "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2"};
constexpr const char* kRedops[] = {"sum", "prod", "max", "min", "avg", "mulsum", "none"};

bool member(const std::string& s, const auto& list) {
  return std::any_of(std::begin(list), std::end(list), [&](const char* x) { return s == x; });
}

}  // namespace

std::optional<NcclTestsLog> parse_nccl_tests_log(const std::string& text, const std::string& file,
                                                 const NcclTestsTopology& topo, const std::string& op,
                                                 Diagnostics& diags) {
  NcclTestsLog log;
  log.file = file;
  const std::size_t errors_before = diags.items().size();
  int bad = 0;
  auto fail = [&](int line, const std::string& msg) {
    Diagnostic d;
    d.file = file;
    d.line = line;
    d.message = msg;
    diags.add(d);
    ++bad;
  };
  std::string named_op;
  std::vector<std::pair<int, std::string>> table;  // (line number, text)
  std::istringstream in(text);
  int ln = 0;
  for (std::string line; std::getline(in, line);) {
    ++ln;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line[first] == '#') {
      const std::string h = line.substr(first + 1);
      if (const auto at = h.find("Collective test starting:"); at != std::string::npos)
        named_op = op_of_name(h.substr(at + 25));
      const auto t = split(h);
      if (t.size() >= 4 && t[0] == "Rank") {
        ++log.ranks;
        const auto close = h.rfind(']');
        if (close != std::string::npos) {
          std::string name = h.substr(close + 1);
          name.erase(0, name.find_first_not_of(" \t"));
          if (!name.empty()) log.devices.push_back(name);
        }
      }
      continue;
    }
    if (line.find("NCCL INFO") != std::string::npos || line.find("NCCL WARN") != std::string::npos) {
      ++log.skipped_nccl_lines;
      continue;
    }
    table.emplace_back(ln, line);
  }
  log.op = !op.empty() ? op : !named_op.empty() ? named_op : op_of_name(file.substr(file.find_last_of('/') + 1));
  const auto kind = model::parse_collective(log.op);
  if (!kind || *kind == model::Collective::broadcast) {
    diags.error(file, "",
                "which collective is this? The log has no '# Collective test starting: NAME' line and its file name "
                "names none of all_reduce, all_gather, reduce_scatter, alltoall, sendrecv: give --op");
    return std::nullopt;
  }
  const int n = topo.ranks();
  if (log.ranks > 0 && log.ranks != n)
    diags.error(file, "",
                fmt::format("the log lists {} ranks ('#  Rank' lines) but the stated topology has {} ({} nodes × {} "
                            "GPUs per node): the topology must describe the run",
                            log.ranks, n, topo.nodes, topo.gpus_per_node));
  const double factor = model::bus_factor(*kind, n);
  const char* factor_text = *kind == model::Collective::all_reduce ? "2(n-1)/n"
                            : *kind == model::Collective::send_recv ? "1"
                                                                    : "(n-1)/n";
  for (const auto& entry : table) {
    const int line_no = entry.first;  // not a structured binding: the lambdas below capture it (clang 14)
    const std::string& line = entry.second;
    const auto t = split(line);
    if (t.size() != 12 && t.size() != 13) {
      fail(line_no, fmt::format("'{}': expected an nccl-tests result row of 13 columns (size count type redop root "
                                "time algbw busbw #wrong time algbw busbw #wrong; 12 without root), found {}",
                                line, t.size()));
      continue;
    }
    const std::size_t o = t.size() == 13 ? 5 : 4;  // first out-of-place column
    auto whole = [&](const std::string& s, const char* what, double min) -> std::optional<double> {
      const auto v = number(s);
      if (!v || *v != std::floor(*v) || *v < min) {
        fail(line_no, fmt::format("{} '{}': expected a whole number ≥ {}", what, s, min));
        return std::nullopt;
      }
      return v;
    };
    auto positive = [&](const std::string& s, const char* what, bool zero_ok) -> std::optional<double> {
      const auto v = number(s);
      if (!v || *v < 0 || (!zero_ok && *v == 0)) {
        fail(line_no, fmt::format("{} '{}': expected a {} number", what, s, zero_ok ? "non-negative" : "positive"));
        return std::nullopt;
      }
      return v;
    };
    NcclTestsRow r;
    r.op = log.op;
    r.ranks = n;
    r.where = fmt::format("{}:{}", file, line_no);
    const auto size = whole(t[0], "size", 1);
    const auto count = whole(t[1], "count", 0);
    if (!member(t[2], kTypes)) fail(line_no, fmt::format("type '{}': not an nccl-tests data type (float, half, bfloat16, ...)", t[2]));
    if (!member(t[3], kRedops)) fail(line_no, fmt::format("redop '{}': not an nccl-tests reduction (sum, prod, max, min, avg, none)", t[3]));
    if (o == 5 && !number(t[4])) fail(line_no, fmt::format("root '{}': expected an integer", t[4]));
    const auto time = positive(t[o], "out-of-place time (us)", false);
    const auto alg = positive(t[o + 1], "out-of-place algbw (GB/s)", true);
    const auto bus = positive(t[o + 2], "out-of-place busbw (GB/s)", true);
    for (const std::size_t w : {o + 3, o + 7}) {
      if (t[w] == "N/A") continue;
      const auto wrong = number(t[w]);
      if (!wrong || *wrong != 0)
        fail(line_no, fmt::format("#wrong '{}': nccl-tests found wrong results at this size; a timing of a wrong "
                                  "result is not a sample",
                                  t[w]));
    }
    const auto ip = number(t[o + 4]);
    if (!size || !count || !time || !alg || !bus) continue;
    // The printed figures must agree with each other: algbw = size / time, busbw = algbw × the bus factor (within
    // the printed rounding: 2 decimals of GB/s, and the time's own digits).
    const double alg_calc = *size / *time / 1e3;
    if (std::fabs(*alg - alg_calc) > 0.006 + 0.01 * alg_calc) {
      fail(line_no, fmt::format("algbw {} GB/s ≠ size / time = {} B / {} us = {:.3f} GB/s: not an nccl-tests row, or "
                                "a corrupted one",
                                t[o + 1], t[0], t[o], alg_calc));
      continue;
    }
    if (std::fabs(*bus - *alg * factor) > 0.016 + 0.01 * *alg * factor) {
      fail(line_no, fmt::format("busbw {} GB/s ≠ algbw {} × {} = {:.3f} GB/s for {} on {} ranks: the log is another "
                                "collective or another rank count than stated (--op, --topology)",
                                t[o + 2], t[o + 1], factor_text, *alg * factor, log.op, n));
      continue;
    }
    r.bytes = *size;
    r.count = *count;
    r.type = t[2];
    r.time_s = *time * 1e-6;
    if (ip && *ip > 0) r.in_place_time_s = *ip * 1e-6;
    r.algbw_GBps = *alg;
    r.busbw_GBps = *bus;
    log.rows.push_back(r);
  }
  if (bad == 0 && log.rows.empty() && diags.items().size() == errors_before)
    diags.error(file, "", "no result rows: not an nccl-tests log (the table of size, count, type, ... is missing)");
  for (std::size_t i = errors_before; i < diags.items().size(); ++i)
    if (diags.items()[i].severity == Severity::error) return std::nullopt;
  return log;
}

std::string nccl_tests_samples_json(const std::vector<NcclTestsLog>& logs, const NcclTestsTopology& topo,
                                    const std::string& gpu_id) {
  nlohmann::ordered_json o;
  o["schema"] = 1;
  o["kind"] = "gpuplan-calibration-samples";
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& l : logs) files.push_back(l.file);
  o["generator"] = {{"program", "gpuplan calibrate import-nccl-tests"}, {"files", files}};
  std::string reported;
  for (const auto& l : logs)
    if (!l.devices.empty()) reported = l.devices.front();
  o["device"] = {{"name", gpu_id}, {"reported_name", reported}};
  o["topology"] = {{"node", topo.node}, {"gpus_per_node", topo.gpus_per_node}, {"nodes", topo.nodes},
                   {"stated_by", "the user (--topology)"}};
  nlohmann::ordered_json c = nlohmann::ordered_json::array();
  for (const auto& l : logs)
    for (const auto& r : l.rows) {
      nlohmann::ordered_json s{{"op", r.op},       {"dtype", r.type},         {"ranks", r.ranks},
                               {"bytes", r.bytes}, {"count", r.count},        {"median_s", r.time_s},
                               {"algbw_gbps", r.algbw_GBps}, {"busbw_gbps", r.busbw_GBps}, {"source", r.where}};
      if (r.in_place_time_s) s["in_place_s"] = *r.in_place_time_s;
      c.push_back(s);
    }
  o["collectives"] = c;
  o["definitions"] =
      "imported from nccl-tests logs: bytes = nccl-tests' size column (doc/PERFORMANCE.md: all_reduce/send_recv "
      "buffer; all_gather output of all ranks; reduce_scatter input; all_to_all buffer of one rank); median_s = the "
      "out-of-place time column (nccl-tests prints the mean over its -n iterations, not a median); in_place_s = the "
      "in-place time; algbw_gbps and busbw_gbps as printed";
  return o.dump(1) + "\n";
}

}  // namespace gpuplan::calib
