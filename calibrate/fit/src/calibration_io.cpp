// Calibration files: reading the benches' samples JSON (read_samples), writing and reading the fitted profile
// (profile_json, read_profile). The fitting itself is in calibration.cpp; files are written by
// app::write_file_atomically.
#include "gpuplan/calibrate/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::calib {

using json_io::Json;
using units::Seconds;

// ---------------------------------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------------------------------

namespace {

/// Reads one number at `obj[key]` (required); a diagnostic names the pointer when it is missing, not a number, or not
/// positive (when `positive`).
std::optional<double> number(const Json& obj, const char* key, const std::string& file, const std::string& ptr,
                             Diagnostics& d, bool positive = true) {
  if (!obj.contains(key)) {
    d.error(file, ptr + "/" + key, "missing");
    return std::nullopt;
  }
  const Json& v = obj[key];
  if (!v.is_number()) {
    d.error(file, ptr + "/" + key, "expected a number, found " + json_io::describe_type(v));
    return std::nullopt;
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || (positive && !(x > 0))) {
    d.error(file, ptr + "/" + key, fmt::format("expected a positive number, found {}", json_io::describe_value(v)));
    return std::nullopt;
  }
  return x;
}
std::optional<std::string> text(const Json& obj, const char* key, const std::string& file, const std::string& ptr,
                                Diagnostics& d, const std::vector<std::string>& choices = {}) {
  if (!obj.contains(key) || !obj[key].is_string()) {
    d.error(file, ptr + "/" + key,
            obj.contains(key) ? "expected a string, found " + json_io::describe_type(obj[key]) : std::string("missing"));
    return std::nullopt;
  }
  std::string s = obj[key].get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end()) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    d.error(file, ptr + "/" + key, fmt::format("'{}' is not one of {}{}", s, list, did_you_mean(s, choices)));
    return std::nullopt;
  }
  return s;
}
/// Reads one count at `obj[key]` (required): an integer (8 or 8.0, not 8.5: json_io::is_integral, the rule of every
/// integer field) from 1 to `max`; `what` names the limit ("a rank count up to 2^20"). A fractional count would be
/// cut to an integer silently (ranks 1.5 -> 1), and one beyond `max` would overflow the conversion.
std::optional<std::int64_t> count(const Json& obj, const char* key, const std::string& file, const std::string& ptr,
                                  Diagnostics& d, double max, const char* what) {
  if (!obj.contains(key)) {
    d.error(file, ptr + "/" + key, "missing");
    return std::nullopt;
  }
  const Json& v = obj[key];
  if (!json_io::is_integral(v)) {
    d.error(file, ptr + "/" + key,
            v.is_number() ? fmt::format("expected an integer, found {} {}", json_io::describe_type(v),
                                        json_io::describe_value(v))
                          : "expected an integer, found " + json_io::describe_type(v));
    return std::nullopt;
  }
  const double x = v.get<double>();
  if (!(x >= 1)) {
    d.error(file, ptr + "/" + key, fmt::format("expected a positive integer, found {}", json_io::describe_value(v)));
    return std::nullopt;
  }
  if (!(x <= max)) {
    d.error(file, ptr + "/" + key, fmt::format("expected {}, found {}", what, json_io::describe_value(v)));
    return std::nullopt;
  }
  return static_cast<std::int64_t>(x);
}
constexpr double kMaxRanks = 1048576.0;  // no NCCL run has more than 2^20 ranks (fuzz_calib: 1e12 overflowed an int)
constexpr const char* kRanksLimit = "a rank count up to 2^20";
const Json* array_at(const Json& root, const char* key, const std::string& file, Diagnostics& d) {
  if (!root.contains(key)) return nullptr;
  if (!root[key].is_array()) {
    d.error(file, std::string("/") + key, "expected an array, found " + json_io::describe_type(root[key]));
    return nullptr;
  }
  return &root[key];
}

}  // namespace

Result<Samples> read_samples(const std::string& path) {
  Diagnostics d;
  auto body = json_io::read_text_file(path, d);
  if (!body) return Result<Samples>(std::move(d));
  auto j = json_io::parse(*body, path, d);
  if (!j) return Result<Samples>(std::move(d));
  Samples s;
  s.file = path;
  if (!j->is_object()) {
    d.error(path, "", "expected a JSON object (a calibration samples file)");
    return Result<Samples>(std::move(d));
  }
  if (const auto kind = j->find("kind");
      kind == j->end() || !kind->is_string() || kind->get<std::string>() != "gpuplan-calibration-samples")
    d.error(path, "/kind", "expected \"gpuplan-calibration-samples\" (is this a samples file written by the benches?)");
  if (j->contains("device") && (*j)["device"].is_object()) {
    const Json& dev = (*j)["device"];
    if (dev.contains("name") && dev["name"].is_string()) s.gpu_name = dev["name"].get<std::string>();
    else if (dev.contains("name"))
      d.error(path, "/device/name", "expected a string (the GPU's name), found " + json_io::describe_type(dev["name"]));
    if (dev.contains("driver") && dev["driver"].is_string()) s.driver = dev["driver"].get<std::string>();
    const Json* sw = j->contains("software") && (*j)["software"].is_object() ? &(*j)["software"] : nullptr;
    if (s.driver.empty() && sw != nullptr && sw->contains("driver") && (*sw)["driver"].is_string())
      s.driver = (*sw)["driver"].get<std::string>();
    if (dev.contains("sm_count"))
      if (auto n = count(dev, "sm_count", path, "/device", d, 1e6, "an SM count up to 10^6")) s.sm_count = int(*n);
    if (dev.contains("l2_bytes") && dev["l2_bytes"].is_number()) s.l2_bytes = dev["l2_bytes"].get<double>();
  } else {
    d.error(path, "/device", "missing: the GPU the samples were taken on");
  }
  static const std::vector<std::string> kDtypes{"bf16", "fp16", "fp8", "tf32", "fp32"};
  if (const Json* a = array_at(*j, "gemm", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/gemm/{}", i);
      GemmSample g;
      auto dt = text(e, "dtype", path, p, d, kDtypes);
      // GEMM sizes become 64-bit integers (and their product FLOPs): a size beyond 2^31 is not a benchmark shape
      // (fuzz_calib: 1e30 overflowed the conversion).
      constexpr double kMaxDim = 2147483647.0;
      constexpr const char* kDimLimit = "a matrix size up to 2^31";
      auto m = count(e, "m", path, p, d, kMaxDim, kDimLimit), n = count(e, "n", path, p, d, kMaxDim, kDimLimit),
           k = count(e, "k", path, p, d, kMaxDim, kDimLimit);
      auto t = number(e, "median_s", path, p, d);
      if (!dt || !m || !n || !k || !t) continue;
      g.dtype = *dt;
      if (e.contains("shape") && e["shape"].is_string()) g.shape = e["shape"].get<std::string>();
      else if (e.contains("shape")) d.error(path, p + "/shape", "expected a string, found " + json_io::describe_type(e["shape"]));
      g.m = *m;
      g.n = *n;
      g.k = *k;
      g.median_s = *t;
      s.gemm.push_back(g);
    }
  if (const Json* a = array_at(*j, "hbm", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/hbm/{}", i);
      auto op = text(e, "op", path, p, d);
      auto b = number(e, "bytes", path, p, d);
      auto t = number(e, "median_s", path, p, d);
      auto g = number(e, "gbps", path, p, d);
      if (!op || !b || !t || !g) continue;
      s.hbm.push_back({*op, *b, *t, *g});
    }
  if (j->contains("launch") && (*j)["launch"].is_object()) {
    const Json& l = (*j)["launch"];
    if (l.contains("launch_s")) s.launch_s = number(l, "launch_s", path, "/launch", d);
    if (l.contains("graph_kernel_s")) s.graph_kernel_s = number(l, "graph_kernel_s", path, "/launch", d);
  }
  static const std::vector<std::string> kOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
  if (const Json* a = array_at(*j, "collectives", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/collectives/{}", i);
      auto op = text(e, "op", path, p, d, kOps);
      auto r = count(e, "ranks", path, p, d, kMaxRanks, kRanksLimit);
      auto b = number(e, "bytes", path, p, d);
      auto t = number(e, "median_s", path, p, d);
      if (!op || !r || !b || !t) continue;
      s.collectives.push_back({*op, int(*r), *b, *t});
    }
  if (const Json* a = array_at(*j, "overlap", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/overlap/{}", i);
      auto op = text(e, "op", path, p, d, kOps);
      auto r = count(e, "ranks", path, p, d, kMaxRanks, kRanksLimit);
      auto b = number(e, "bytes", path, p, d);
      auto ca = number(e, "coll_alone_s", path, p, d);
      auto co = number(e, "coll_overlap_s", path, p, d);
      auto ga = number(e, "gemm_alone_s", path, p, d);
      auto go = number(e, "gemm_overlap_s", path, p, d);
      if (!op || !r || !b || !ca || !co || !ga || !go) continue;
      s.overlap.push_back({*op, int(*r), *b, *ca, *co, *ga, *go});
    }
  // "sustained": one object (the bf16 run of files before 2026-11-23) or an array of runs, each with its "dtype".
  if (j->contains("sustained")) {
    const auto& sj = (*j)["sustained"];
    auto one = [&](const Json& e, const std::string& p) {
      const auto dt = e.contains("dtype") ? text(e, "dtype", path, p, d, {"bf16", "fp8"}) : std::optional<std::string>("bf16");
      const auto v = number(e, "sustained_tflops", path, p, d);
      if (!dt || !v) return;
      (*dt == "fp8" ? s.sustained_fp8_tflops : s.sustained_tflops) = *v;
    };
    if (sj.is_object()) one(sj, "/sustained");
    else if (sj.is_array())
      for (std::size_t i = 0; i < sj.size(); ++i)
        if (sj[i].is_object()) one(sj[i], fmt::format("/sustained/{}", i));
        else d.error(path, fmt::format("/sustained/{}", i), "expected an object (one sustained run)");
    else d.error(path, "/sustained", "expected an object or an array of sustained runs");
  }
  if (j->contains("rejected") && (*j)["rejected"].is_array()) s.rejected = int((*j)["rejected"].size());
  // A sweep that stopped early (time limit, or killed) says "complete": false; what it measured is still valid.
  if (j->contains("complete") && (*j)["complete"].is_boolean()) s.complete = (*j)["complete"].get<bool>();
  if (s.gemm.empty() && s.hbm.empty() && s.collectives.empty() && s.overlap.empty() && !s.launch_s &&
      !s.graph_kernel_s && !s.sustained_tflops && !s.sustained_fp8_tflops)
    d.error(path, "", "no samples: none of gemm, hbm, launch, collectives, overlap, sustained holds a measurement");
  if (d.has_errors()) return Result<Samples>(std::move(d));
  return Result<Samples>(std::move(s), std::move(d));
}

// ---------------------------------------------------------------------------------------------------------------
// Profile JSON
// ---------------------------------------------------------------------------------------------------------------

namespace {
double round_sig(double x, int digits = 6) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, digits - 1 - int(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * scale) / scale;
}
nlohmann::ordered_json quality_json(const FitQuality& q) {
  return {{"points", q.points}, {"median_rel_error", round_sig(q.median_rel_error, 4)},
          {"max_rel_error", round_sig(q.max_rel_error, 4)}};
}
nlohmann::ordered_json stream_json(const StreamFit& f) {
  return {{"efficiency", round_sig(f.efficiency, 4)}, {"t0_s", round_sig(f.t0.raw(), 4)}, {"fit", quality_json(f.fit)}};
}
}  // namespace

std::string profile_json(const Profile& p) {
  nlohmann::ordered_json o;
  o["schema"] = p.schema;
  o["kind"] = "gpuplan-calibration-profile";
  o["gpu"] = p.gpu_id;
  o["gpu_name"] = p.gpu_name;
  o["driver"] = p.driver;
  o["samples"] = p.samples;
  o["gemm"] = nlohmann::ordered_json::array();
  for (const auto& g : p.gemm)
    o["gemm"].push_back({{"dtype", g.dtype},
                         {"ceiling", round_sig(g.ceiling, 4)},
                         {"t0_s", round_sig(g.t0.raw(), 4)},
                         {"fit", quality_json(g.fit)},
                         {"roofline_check", quality_json(g.all)}});
  for (std::size_t i = 0; i < p.gemm.size(); ++i)
    if (p.gemm[i].depth) o["gemm"][i]["depth_iterations"] = round_sig(*p.gemm[i].depth, 4);
  if (p.hbm) o["hbm"] = stream_json(*p.hbm);
  if (p.gemm_memory) o["gemm_memory"] = stream_json(*p.gemm_memory);
  if (p.launch) o["launch_s"] = round_sig(p.launch->raw(), 4);
  if (p.graph_kernel) o["graph_kernel_s"] = round_sig(p.graph_kernel->raw(), 4);
  o["links"] = nlohmann::ordered_json::array();
  for (const auto& l : p.links)
    o["links"].push_back({{"op", l.op},
                          {"ranks", l.ranks},
                          {"intercept_s", round_sig(l.intercept.raw(), 4)},
                          {"bus_bandwidth_GBps", round_sig(units::to_GBps(l.bus_bandwidth), 4)},
                          {"bus_efficiency", round_sig(l.bus_efficiency, 4)},
                          {"step_latency_s", round_sig(l.step_latency.raw(), 4)},
                          {"call_latency_s", round_sig(l.call_latency.raw(), 4)},
                          {"fit", quality_json(l.fit)},
                          {"curve", [&l] {
                             auto a = nlohmann::ordered_json::array();
                             for (const auto& [b, t] : l.curve) a.push_back({b, round_sig(t, 4)});
                             return a;
                           }()}});
  if (p.sustained_ratio) o["gemm_sustained_ratio"] = round_sig(*p.sustained_ratio, 4);
  if (p.sustained_ratio_fp8) o["gemm_sustained_ratio_fp8"] = round_sig(*p.sustained_ratio_fp8, 4);
  if (p.overlap)
    o["overlap"] = {{"compute_loss", round_sig(p.overlap->compute_loss, 4)},
                    {"wait_kernels", round_sig(p.overlap->wait_kernels, 4)},
                    {"points", p.overlap->points},
                    {"compute_loss_range", {round_sig(p.overlap->compute_loss_min, 4), round_sig(p.overlap->compute_loss_max, 4)}},
                    {"wait_kernels_range", {round_sig(p.overlap->wait_kernels_min, 4), round_sig(p.overlap->wait_kernels_max, 4)}}};
  o["notes"] = p.notes;
  return o.dump(2, ' ', false, decltype(o)::error_handler_t::replace) + "\n";  // a file name need not be UTF-8
}

namespace {
json_io::FieldSpec field(std::string key, json_io::FieldType type, json_io::Presence presence, std::string unit,
                         double min, double max, std::string doc, std::vector<std::string> choices = {},
                         const json_io::FieldTable* nested = nullptr) {
  json_io::FieldSpec f;
  f.key = std::move(key);
  f.type = type;
  f.presence = presence;
  f.unit = std::move(unit);
  f.min = min;
  f.max = max;
  f.doc = std::move(doc);
  f.choices = std::move(choices);
  f.nested = nested;
  return f;
}
using FT = json_io::FieldType;
constexpr auto kReq = json_io::Presence::required;
constexpr auto kOpt = json_io::Presence::optional;
const json_io::FieldTable kQuality{field("points", FT::integer, kReq, "", 0, 1e9, "points fitted"),
                                   field("median_rel_error", FT::number, kReq, "", 0, kMaxFitRelError, "median |relative error|"),
                                   field("max_rel_error", FT::number, kReq, "", 0, kMaxFitRelError, "max |relative error|")};
const json_io::FieldTable kGemmFit{
    field("dtype", FT::string, kReq, "", 0, 0, "precision", {"bf16", "fp16", "fp8", "tf32", "fp32"}),
    field("ceiling", FT::number, kReq, "", 0, 1.5, "achieved / dense peak on compute-bound shapes"),
    field("t0_s", FT::number, kReq, "s", 0, 1, "fixed cost per GEMM"),
    field("fit", FT::object, kReq, "", 0, 0, "fit quality on the compute-bound points", {}, &kQuality),
    field("roofline_check", FT::object, kReq, "", 0, 0, "whole-roofline check over every shape", {}, &kQuality),
    field("depth_iterations", FT::number, kOpt, "", 0, 64,
          "depth law: fixed cost per output tile in main-loop iterations (fitted from a depth sweep)")};
const json_io::FieldTable kHbmFit{field("efficiency", FT::number, kReq, "", 0, kMaxStreamEfficiency,
                                        "achieved / datasheet bandwidth"),
                                  field("t0_s", FT::number, kReq, "s", 0, 1, "fixed cost"),
                                  field("fit", FT::object, kReq, "", 0, 0, "fit quality", {}, &kQuality)};
const json_io::FieldTable kLinkFit{
    field("op", FT::string, kReq, "", 0, 0, "collective",
          {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}),
    field("ranks", FT::integer, kReq, "", 2, 1e6, "GPUs"),
    field("intercept_s", FT::number, kReq, "s", 0, 1, "time of an empty call"),
    field("bus_bandwidth_GBps", FT::number, kReq, "GB/s", 0, 1e5, "asymptotic bus bandwidth"),
    field("bus_efficiency", FT::number, kReq, "", 0, 1.5, "bus bandwidth / per-GPU link bandwidth"),
    field("step_latency_s", FT::number, kReq, "s", 0, 1, "per-step α"),
    field("call_latency_s", FT::number, kOpt, "s", 0, 1, "base latency per call (≤ the model's NCCL constant)"),
    field("fit", FT::object, kReq, "", 0, 0, "fit quality", {}, &kQuality),
    field("curve", FT::any, kOpt, "", 0, 0,
          "measured [bytes, seconds] pairs, sizes increasing, times not decreasing (interpolated in log-log)")};
const json_io::FieldTable kOverlapFit{
    field("compute_loss", FT::number, kReq, "", 0, 0.999, "GEMM throughput lost beside a collective (median)"),
    field("wait_kernels", FT::number, kReq, "", 0, 100, "extra time per collective call, in compute-kernel durations (median)"),
    field("points", FT::integer, kReq, "", 1, 1e9, "overlap items"),
    field("compute_loss_range", FT::any, kOpt, "", 0, 0, "[min, max] over the items"),
    field("wait_kernels_range", FT::any, kOpt, "", 0, 0, "[min, max] over the items")};
const json_io::FieldTable kProfile{
    field("schema", FT::integer, kReq, "", 1, 1, "format version"),
    field("kind", FT::string, kReq, "", 0, 0, "file kind", {"gpuplan-calibration-profile"}),
    field("gpu", FT::string, kReq, "", 0, 0, "GPU id (data/hardware/gpus)"),
    field("gpu_name", FT::string, kOpt, "", 0, 0, "the driver's name of the GPU measured"),
    field("driver", FT::string, kOpt, "", 0, 0, "driver version"),
    field("samples", FT::string_list, kReq, "", 0, 0, "sample files it was fitted from"),
    field("gemm", FT::any, kReq, "", 0, 0, "GEMM fits, one per precision"),
    field("hbm", FT::object, kOpt, "", 0, 0, "HBM streaming fit", {}, &kHbmFit),
    field("gemm_memory", FT::object, kOpt, "", 0, 0, "memory-bound GEMM streaming fit", {}, &kHbmFit),
    field("launch_s", FT::number, kOpt, "s", 0, 1, "eager launch interval of an empty kernel"),
    field("graph_kernel_s", FT::number, kOpt, "s", 0, 1, "per kernel inside a replayed CUDA graph"),
    field("links", FT::any, kReq, "", 0, 0, "collective fits, one per (op, ranks)"),
    field("overlap", FT::object, kOpt, "", 0, 0, "communication beside compute", {}, &kOverlapFit),
    field("gemm_sustained_ratio", FT::number, kOpt, "", 0.3, 1.0, "sustained / swept bf16 8192³ GEMM throughput"),
    field("gemm_sustained_ratio_fp8", FT::number, kOpt, "", 0.3, 1.0,
          "sustained / swept fp8 8192³ GEMM throughput (absent: the bf16 ratio applies to fp8)"),
    field("notes", FT::string_list, kOpt, "", 0, 0, "what could not be fitted, refused samples")};

FitQuality read_quality(const json_io::ObjectReader& r, const char* key) {
  FitQuality q;
  if (auto o = r.object(key)) {
    q.points = int(o->integer("points").value_or(0));
    q.median_rel_error = o->num("median_rel_error").value_or(0);
    q.max_rel_error = o->num("max_rel_error").value_or(0);
  }
  return q;
}
StreamFit read_stream_fit(const json_io::ObjectReader& h) {
  StreamFit f;
  f.efficiency = h.num("efficiency").value_or(0);
  f.t0 = Seconds(h.num("t0_s").value_or(0));
  f.fit = read_quality(h, "fit");
  return f;
}
}  // namespace

Result<Profile> read_profile(const std::string& path) {
  Diagnostics d;
  auto body = json_io::read_text_file(path, d);
  if (!body) return Result<Profile>(std::move(d));
  auto j = json_io::parse(*body, path, d);
  if (!j) return Result<Profile>(std::move(d));
  json_io::ObjectReader r(*j, kProfile, path, "", d);
  Profile p;
  p.file = path;
  p.gpu_id = r.str("gpu").value_or("");
  p.gpu_name = r.str("gpu_name").value_or("");
  p.driver = r.str("driver").value_or("");
  p.samples = r.strings("samples").value_or(std::vector<std::string>{});
  p.notes = r.strings("notes").value_or(std::vector<std::string>{});
  auto list = [&](const char* key, const json_io::FieldTable& table, auto&& each) {
    const Json* a = r.raw(key);
    if (a == nullptr) return;
    if (!a->is_array()) {
      r.error(key, "expected an array, found " + json_io::describe_type(*a));
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      json_io::ObjectReader e((*a)[i], table, path, fmt::format("/{}/{}", key, i), d);
      if (e.valid()) each(e);
    }
  };
  list("gemm", kGemmFit, [&](const json_io::ObjectReader& e) {
    GemmFit g;
    g.dtype = e.str("dtype").value_or("");
    g.ceiling = e.num("ceiling").value_or(0);
    g.t0 = Seconds(e.num("t0_s").value_or(0));
    if (auto v = e.num("depth_iterations")) g.depth = *v;
    g.fit = read_quality(e, "fit");
    g.all = read_quality(e, "roofline_check");
    p.gemm.push_back(g);
  });
  if (auto h = r.object("hbm")) p.hbm = read_stream_fit(*h);
  if (auto h = r.object("gemm_memory")) p.gemm_memory = read_stream_fit(*h);
  if (auto v = r.num("launch_s")) p.launch = Seconds(*v);
  if (auto v = r.num("graph_kernel_s")) p.graph_kernel = Seconds(*v);
  list("links", kLinkFit, [&](const json_io::ObjectReader& e) {
    LinkFit l;
    l.op = e.str("op").value_or("");
    l.ranks = int(e.integer("ranks").value_or(0));
    l.intercept = Seconds(e.num("intercept_s").value_or(0));
    l.bus_bandwidth = units::gb_per_s(e.num("bus_bandwidth_GBps").value_or(0));
    l.bus_efficiency = e.num("bus_efficiency").value_or(0);
    l.step_latency = Seconds(e.num("step_latency_s").value_or(0));
    l.call_latency = Seconds(e.num("call_latency_s").value_or(0));
    l.fit = read_quality(e, "fit");
    if (const Json* v = e.raw("curve")) {
      bool ok = v->is_array();
      for (std::size_t i = 0; ok && i < v->size(); ++i) {
        const Json& pt = (*v)[i];
        ok = pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number();
        if (!ok) break;
        const double b = pt[0].get<double>(), t = pt[1].get<double>();
        ok = std::isfinite(b) && std::isfinite(t) && b > 0 && t > 0 &&
             (l.curve.empty() || (b > l.curve.back().first && t >= l.curve.back().second));
        if (ok) l.curve.emplace_back(b, t);
      }
      if (!ok) {
        e.error("curve", "expected [[bytes, seconds], ...] with positive numbers, sizes increasing and times not decreasing");
        l.curve.clear();
      }
    }
    p.links.push_back(l);
  });
  if (auto v = r.num("gemm_sustained_ratio")) p.sustained_ratio = *v;
  if (auto v = r.num("gemm_sustained_ratio_fp8")) p.sustained_ratio_fp8 = *v;
  if (auto ov = r.object("overlap")) {
    OverlapFit f;
    f.compute_loss = ov->num("compute_loss").value_or(0);
    f.wait_kernels = ov->num("wait_kernels").value_or(0);
    f.points = int(ov->integer("points").value_or(0));
    auto range = [&](const char* key, double& lo, double& hi) {
      const Json* v = ov->raw(key);
      if (v == nullptr) return;
      if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number()) {
        ov->error(key, "expected [min, max], two numbers");
        return;
      }
      lo = (*v)[0].get<double>();
      hi = (*v)[1].get<double>();
    };
    range("compute_loss_range", f.compute_loss_min, f.compute_loss_max);
    range("wait_kernels_range", f.wait_kernels_min, f.wait_kernels_max);
    p.overlap = f;
  }
  if (d.has_errors()) return Result<Profile>(std::move(d));
  return Result<Profile>(std::move(p), std::move(d));
}

}  // namespace gpuplan::calib
