// `gpuplan validate`: predicted vs measured for every published case we ship; docs/accuracy.md is its output.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bands.hpp"
#include "commands.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "validate.hpp"

namespace gpuplan::cli {

namespace {
/// The summary numbers of one validation set, as every set reports them in JSON.
void put_summary(nlohmann::ordered_json& s, const ValidationSummary& v) {
  s["evaluated"] = v.evaluated;
  s["median_abs_error"] = v.median_abs_error;
  s["max_abs_error"] = v.max_abs_error;
  s["evaluated_calibrated"] = v.evaluated_calibrated;
  s["median_abs_error_calibrated"] = v.median_abs_error_calibrated;
  s["max_abs_error_calibrated"] = v.max_abs_error_calibrated;
  if (v.dev_cases_evaluated > 0 && v.dev_cases_evaluated < v.evaluated) {
    s["dev_cases_evaluated"] = v.dev_cases_evaluated;
    s["dev_case_median_abs_error"] = v.dev_case_median_abs_error;
    s["dev_case_max_abs_error"] = v.dev_case_max_abs_error;
  }
  if (auto fams = families_json(v); !fams.empty()) s["families"] = std::move(fams);
}

/// The cases of one set: "id", then `keys` in order (fields of CaseResult), then the predictions where present.
void put_cases(nlohmann::ordered_json& s, const ValidationSummary& v, std::initializer_list<std::string_view> keys) {
  s["cases"] = nlohmann::ordered_json::array();
  for (const auto& c : v.cases) {
    nlohmann::ordered_json r{{"id", c.id}};
    for (const auto k : keys) {
      if (k == "measured") r["measured"] = c.measured;
      else if (k == "source") r["source"] = c.source;
      else if (k == "model") r["model"] = c.model;
      else if (k == "gpu") r["gpu"] = c.gpu;
      else if (k == "layout") r["layout"] = c.layout;
      else if (k == "metric") r["metric"] = c.metric;
      else if (k == "status") r["status"] = c.status;
      else if (k == "note") r["note"] = c.note;
    }
    if (c.predicted) r["predicted"] = *c.predicted;
    if (c.error) r["error"] = *c.error;
    if (c.predicted_calibrated) r["predicted_calibrated"] = *c.predicted_calibrated;
    if (c.error_calibrated) r["error_calibrated"] = *c.error_calibrated;
    if (!c.structure.empty()) {
      // Issue #22: the structure the case uses and the case priced without it (validate_before.cpp).
      r["structure"] = c.structure;
      if (c.predicted_before) r["predicted_before"] = *c.predicted_before;
      if (c.predicted_before && c.predicted && *c.predicted_before > 0) r["moved"] = *c.predicted / *c.predicted_before - 1.0;
      if (!c.before_layout.empty()) r["before_layout"] = c.before_layout;
      if (!c.before_note.empty()) r["before_note"] = c.before_note;
    }
    s["cases"].push_back(r);
  }
}

struct BandFlags {
  std::string write, check;
};

/// The commit of the data directory's checkout (recorded in the band file, never compared), or "unknown".
std::string data_commit(const std::string& dir) {
  std::string out;
  if (FILE* p = popen(("git -C '" + dir + "' rev-parse --short HEAD 2>/dev/null").c_str(), "r")) {
    char buf[64];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

/// --write-bands / --check-bands: the band file from the residuals just computed.
int finish_bands(const BandFlags& bf, const std::string& dir, const std::vector<model::BandCase>& now) {
  if (!bf.write.empty()) {
    const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
    std::ofstream f(bf.write);
    f << bands_json(now, date, data_commit(dir)).dump(1) << "\n";
    if (!f) {
      Diagnostics d;
      d.error(bf.write, "", "cannot write the band file");
      return report(d);
    }
  }
  if (!bf.check.empty()) {
    Diagnostics d;
    const auto committed = read_band_cases(bf.check, bf.check, d);
    if (!committed) return report(d);
    const auto diff = band_differences(*committed, now);
    if (!diff.empty()) {
      std::string msg = fmt::format("{} is stale ({} differences):\n", bf.check, diff.size());
      for (std::size_t i = 0; i < diff.size() && i < 20; ++i) msg += "  " + diff[i] + "\n";
      msg += "regenerate it with `gpuplan validate --write-bands data/accuracy/bands.json`\n";
      std::fputs(msg.c_str(), stderr);
      return 1;
    }
  }
  return kExitOk;
}

int run_validate(const GlobalOptions& g, const BandFlags& bf) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  struct Set {
    const char* file;
    const char* title;
  };
  const Set sets[] = {{"training_cases.json", "Published training throughput (data/validation/training_cases.json)"},
                      {"measured_cases.json", "Our own measurements on H100 and H200 (data/validation/measured_cases.json)"},
                      {"measured_moe_training_cases.json",
                       "Our own MoE training steps on 1, 2 and 4 H100s at EP 1/2/4 (data/validation/measured_moe_training_cases.json)"}};
  // Whole-host runs (scripts/measure/run_node.sh): their case files join our own measured sets below.
  auto node = validate_node_runs(dir, db, lib);
  if (!node.ok()) return report(node.diagnostics());
  const Format f = parse_format(g.format);
  nlohmann::ordered_json o;
  std::vector<model::BandCase> band_cases;
  const bool quiet = !bf.write.empty() || !bf.check.empty();  // the band commands print nothing else
  if (f != Format::json && !quiet)
    out("# gpuplan accuracy\n\nGenerated by `gpuplan validate --format md`. Each case is a measurement with its source "
        "(data/validation/); the prediction runs the same code as `gpuplan train`. Error = predicted / measured − 1.\n\n");
  for (const auto& set : sets) {
    auto v = validate_training(dir + "/validation/" + set.file, db, lib, dir);
    if (!v.ok()) return report(v.diagnostics());
    const std::string file = set.file;
    const ValidationSummary* extra = file == "measured_cases.json"                ? &node->training
                                     : file == "measured_moe_training_cases.json" ? &node->moe_training
                                                                                  : nullptr;
    const bool with_node = extra != nullptr && !extra->cases.empty();
    if (with_node) merge_cases(v.value(), *extra);
    append_band_cases(*v, band_cases);
    if (quiet) continue;
    if (f == Format::json) {
      auto& s = o[set.file];
      put_summary(s, *v);
      put_cases(s, *v, {"model", "gpu", "layout", "metric", "measured", "status", "note"});
    } else {
      out(render_validation_markdown(
          *v, with_node ? std::string(set.title) +
                              " and whole-host runs (data/validation/measured/<gpu>/node-x*-cases.json)"
                        : std::string(set.title)));
    }
  }
  for (const auto& [file, heading] :
       {std::pair<std::string, std::string>{"measured_inference_cases.json",
                                            "Our own serving measurements on H100 and H200"},
        std::pair<std::string, std::string>{"measured_moe_inference_cases.json",
                                            "Our own MoE serving measurements on H100 (Qwen3-30B-A3B shape)"},
        std::pair<std::string, std::string>{"inference_cases.json", "Published inference latency and throughput"}}) {
    std::vector<std::pair<std::string, ValidationSummary>> by_source;
    auto v = validate_inference(dir + "/validation/" + file, db, lib, &by_source, dir);
    if (!v.ok()) return report(v.diagnostics());
    const bool moe_set = file == "measured_moe_inference_cases.json";
    const ValidationSummary& extra = moe_set ? node->moe_serving : node->serving;
    const bool with_node = (moe_set || file == "measured_inference_cases.json") && !extra.cases.empty();
    if (with_node) {
      merge_cases(v.value(), extra);
      const auto& split = moe_set ? node->moe_serving_by_source : node->serving_by_source;
      by_source.insert(by_source.end(), split.begin(), split.end());
    }
    append_band_cases(*v, band_cases);
    if (quiet) continue;
    if (f == Format::json) {
      auto& s = o[file];
      put_summary(s, *v);
      for (const auto& [src, sv] : by_source) put_summary(s["by_source"][src], sv);
      put_cases(s, *v, {"source", "model", "gpu", "layout", "metric", "measured", "status"});
    } else {
      std::string t = fmt::format("## {} (data/validation/{}{})\n\n", heading, file,
                                  with_node ? " and whole-host runs, data/validation/measured/<gpu>/node-x*-cases.json"
                                            : "") +
                      "| source | cases | evaluated | median abs error | max abs error | within 25% | calibrated: cases, "
                      "median, max |\n"
                      "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
      for (const auto& [src, sv] : by_source)
        t += fmt::format("| {} | {} | {} | {:.1f}% | {:.1f}% | {:.0f}% | {} |\n", src, sv.cases.size(), sv.evaluated,
                         sv.median_abs_error * 100, sv.max_abs_error * 100, sv.within_25 * 100,
                         sv.evaluated_calibrated > 0
                             ? fmt::format("{}, {:.1f}%, {:.1f}%", sv.evaluated_calibrated,
                                           sv.median_abs_error_calibrated * 100, sv.max_abs_error_calibrated * 100)
                             : std::string("—"));
      out(t + "\n");
      out(render_validation_markdown(*v, heading + ", one by one"));
    }
  }
  if (quiet) return finish_bands(bf, dir, band_cases);
  if (f != Format::json) out(render_bands_markdown(band_cases));
  {
    auto v = validate_collectives(dir, db);
    if (!v.ok()) return report(v.diagnostics());
    if (f == Format::json) {
      auto& s = o["collectives"];
      put_summary(s, *v);
      put_cases(s, *v, {"source", "gpu", "layout", "metric", "measured", "status"});
    } else {
      out(render_validation_markdown(
          *v, "Our own NCCL collective measurements, held out from the calibration (data/validation/measured/<gpu>/heldout-collectives-*.json)"));
    }
  }
  {
    auto v = validate_vision(dir, db);
    if (!v.ok()) return report(v.diagnostics());
    const auto groups = split_by_convention(*v);
    if (f == Format::json) {
      auto& s = o["vision"];
      put_summary(s, *v);
      for (const auto& [conv, sv] : groups) put_summary(s["by_kind"][conv], sv);
      put_cases(s, *v, {"source", "model", "gpu", "layout", "metric", "measured", "status", "note"});
    } else if (!v->cases.empty()) {
      std::string t =
          "## Our own vision measurements (data/validation/measured/<gpu>/vision_*.json) and published ResNet-50 "
          "training (data/validation/vision_published.json)\n\n"
          "torchvision models on one GPU; inference with bf16 weights, eager and as one CUDA graph; training steps "
          "under bf16 autocast, on one GPU and with DDP on 2 and 4; ResNet-50 fed by a JPEG DataLoader of 2 to 15 "
          "workers (training-loader). Predicted by `gpuplan serve` / `gpuplan train` with the vision model; the memory-bound "
          "training kernels' bandwidth fractions come from a per-kernel profile of these steps (docs/design/vision.md), "
          "nothing else is fitted. published-pytorch: NVIDIA DeepLearningExamples' eager PyTorch ResNet-50 throughput on "
          "DGX-1 V100 and DGX A100; published-mlperf: NVIDIA's MLPerf MXNet ResNet-50, priced with the fused "
          "conv-BN-ReLU training engine (statistics in the convolution epilogue, scale-bias-ReLU in the next "
          "convolution's prologue, one block-output and one dBN kernel: model/src/vision/vision_kernels.hpp).\n\n"
          "| kind | cases | evaluated | median abs error | max abs error | within 25% |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: |\n";
      for (const auto& [conv, sv] : groups)
        t += fmt::format("| {} | {} | {} | {:.1f}% | {:.1f}% | {:.0f}% |\n", conv, sv.cases.size(), sv.evaluated,
                         sv.median_abs_error * 100, sv.max_abs_error * 100, sv.within_25 * 100);
      out(t + "\n");
      out(render_validation_markdown(*v, "Our own vision measurements, one by one"));
    }
  }
  {
    auto t = validate_textbook(dir + "/validation/textbook_cases.json", lib);
    if (!t.ok()) return report(t.diagnostics());
    if (f == Format::json) {
      auto& s = o["textbook_cases.json"];
      s["evaluated"] = t->evaluated;
      s["max_abs_error"] = t->max_abs_error;
      for (const auto& c : t->cases)
        s["cases"].push_back({{"id", c.id}, {"question", c.layout}, {"expected", c.measured}, {"unit", c.unit},
                              {"predicted", c.predicted ? *c.predicted : 0.0}, {"status", c.status}});
    } else {
      out(render_validation_markdown(*t, "Textbook worked examples (data/validation/textbook_cases.json)"));
    }
  }
  if (f == Format::json) {
    out(json_text(o));
  } else {
    // The hand-written analysis of the errors travels with the data and closes the generated report.
    Diagnostics ignore;
    if (auto text = json_io::read_text_file(dir + "/validation/ANALYSIS.md", ignore)) out(*text);
  }
  return kExitOk;
}
}  // namespace

void register_validate(CLI::App& app, GlobalOptions& g, int& rc) {
  auto* c = app.add_subcommand("validate", "predicted vs measured on the shipped published cases");
  add_format_option(*c, g);
  auto bf = std::make_shared<BandFlags>();
  c->add_option("--write-bands", bf->write,
                "write the error-band file (the residuals of every case) to FILE: data/accuracy/bands.json");
  c->add_option("--check-bands", bf->check, "exit 1 when the band file FILE differs from what validate computes now");
  c->callback([&g, &rc, bf] { rc = run_validate(g, *bf); });
}

}  // namespace gpuplan::cli
