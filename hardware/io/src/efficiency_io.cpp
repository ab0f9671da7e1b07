// Measured kernel efficiencies (data/hardware/efficiency/*.json): decoding, cross-reference checks, and their
// resolution onto the GPUs of a loaded database (each part's own row, else its family's measured member's).
#include <map>
#include <utility>

#include <fmt/format.h>

#include "decode_common.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"

namespace gpuplan::hw_io {

using namespace detail;

namespace {

// A fraction of a peak rate or bandwidth: in (0, 1], or [0, 1] where 0 means "not available on this part".
FieldSpec fraction(std::string key, std::string doc, bool zero_allowed = false) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::number;
  f.presence = kReq;
  f.min = 0.0;
  f.max = 1.0;
  f.min_exclusive = !zero_allowed;
  f.doc = std::move(doc);
  return f;
}

// The same, optional: a compute path measured on some parts only.
FieldSpec opt_fraction(std::string key, std::string doc) {
  FieldSpec f = fraction(std::move(key), std::move(doc));
  f.presence = kOpt;
  return f;
}

// A kernel class's fixed cost in microseconds (or a per-element latency in `unit`): optional, in (0, 100].
FieldSpec opt_us(std::string key, std::string doc, const char* unit = "us") {
  FieldSpec f = opt_fraction(std::move(key), std::move(doc));
  f.max = 100.0;
  f.unit = unit;
  return f;
}

// A fixed cost in key-tile iterations (the fused attention's sequence law): optional, in (0, 100].
FieldSpec opt_key_tiles(std::string key, std::string doc) {
  FieldSpec f = opt_us(std::move(key), std::move(doc), "key tiles");
  return f;
}

}  // namespace

const FieldTable& efficiency_row_fields() {
  static const FieldTable t{
      text("gpu", "GPU id (gpus/) whose measurements these are", kReq),
      fraction("gemm_bf16", "sustained 16-bit GEMM rate / dense bf16 peak, at K = 8192"),
      fraction("gemm_fp8", "sustained fp8 GEMM rate / dense fp8 peak (0: no fp8 GEMMs)", true),
      fraction("hbm", "streaming bandwidth (triad) / memory bandwidth"),
      fraction("attention_fwd", "fused attention forward (cuDNN / FA3 / FA4), d = 128, s = 4096 causal / bf16 peak"),
      fraction("attention_bwd", "fused attention backward, as attention_fwd"),
      fraction("fa2_fwd", "FlashAttention-2 forward, as attention_fwd"),
      fraction("fa2_bwd", "FlashAttention-2 backward, as attention_fwd"),
      opt_key_tiles("attention_tile_fwd", "the fused attention's fixed cost per 128-row query tile in key-tile "
                                          "iterations, forward: its sequence law eta ~ k/(k + c), k key tiles per "
                                          "query tile, fitted to the row's sweep over s (absent: the built-in law)"),
      opt_key_tiles("attention_tile_bwd", "the same, backward"),
      opt_fraction("gemm_int8", "int8 GEMM rate (int32 accumulate) / dense int8 peak, at compute-bound shapes"),
      opt_fraction("gemm_sparse24",
                   "2:4-sparse 16-bit GEMM rate (dense-equivalent FLOPs) / sparse 16-bit peak, compute-bound shapes"),
      opt_fraction("gemm_w4a16", "weight-only int4 GEMM rate (dequantised in the main loop) / dense 16-bit peak, "
                                 "compute-bound shapes"),
      opt_fraction("gemm_w4a16_hbm", "weight-only int4 GEMM bandwidth at memory-bound shapes (bytes moved / time) / "
                                     "memory bandwidth"),
      opt_us("graph_gemm_us", "fixed cost of a dense GEMM kernel inside a replayed CUDA graph, beyond bytes / (hbm × "
                              "bandwidth) or its compute time (the intercept of in-graph memory-bound GEMMs)"),
      opt_us("graph_attention_us", "fixed cost of a decode attention call inside a replayed CUDA graph (split-KV "
                                   "pass and combine), beyond its KV bytes / (hbm × bandwidth)"),
      opt_us("graph_elementwise_us", "fixed cost of a small elementwise, norm or routing kernel inside a replayed "
                                     "CUDA graph, beyond its bytes / (hbm × bandwidth)"),
      opt_us("graph_attention_fused_us", "fixed cost of one fused attention kernel without a combine pass inside a "
                                         "replayed CUDA graph (prefill; an engine's decode kernel), beyond its bytes"),
      opt_us("graph_norm_us", "a norm kernel's fixed cost inside a replayed CUDA graph at a row of zero elements (the "
                              "intercept of its row latency; one thread block per row)"),
      opt_us("graph_norm_ns_per_element", "a norm kernel's row latency per element of the row inside a replayed CUDA "
                                          "graph, nanoseconds", "ns"),
      count("tile_m", 512, "GEMM output tile rows the library picks for large shapes", kReq),
      count("tile_n", 512, "GEMM output tile columns", kReq),
      text("origin", "one line: what was measured and where (shown in every derivation)", kReq),
      typed("sources", FieldType::string_list, "ids of this file's sources behind the row", kReq),
  };
  return t;
}

const FieldTable& efficiency_family_fields() {
  static const FieldTable t{
      text("family", "GPU family (the `family` of gpus/*.json)", kReq),
      text("gpu", "the GPU with a row that stands for parts of this family without one", kReq),
  };
  return t;
}

const FieldTable& efficiency_fields() {
  static const FieldTable t = with_common(
      "efficiency",
      {
          typed("rows", FieldType::any,
                "measured efficiencies per GPU: a list of {gpu, gemm_bf16, gemm_fp8, hbm, attention_fwd, "
                "attention_bwd, fa2_fwd, fa2_bwd, [attention_tile_fwd, attention_tile_bwd, gemm_int8, gemm_sparse24, gemm_w4a16, gemm_w4a16_hbm, graph_gemm_us, "
                "graph_attention_us, graph_elementwise_us, graph_attention_fused_us, graph_norm_us, "
                "graph_norm_ns_per_element,] tile_m, tile_n, origin, "
                "sources}",
                kReq),
          typed("families", FieldType::any,
                "per GPU family, the measured member used for parts without a row: a list of {family, gpu}", kReq),
      });
  return t;
}

Result<hw::EfficiencyTable> decode_efficiency(const Json& j, const std::string& file) {
  Diagnostics diags;
  ObjectReader r(j, efficiency_fields(), file, "", diags);
  if (!j.is_object()) return Result<hw::EfficiencyTable>(std::move(diags));
  hw::EfficiencyTable t;
  t.info = decode_info(r, file, diags);
  std::map<std::string, bool> source_ids;
  for (const auto& s : t.info.sources) source_ids[s.id] = true;
  auto each = [&](const char* key, auto&& decode_one) {
    const Json* a = r.raw(key);
    if (a == nullptr) return;
    if (!a->is_array() || a->empty()) {
      r.error(key, fmt::format("expected a non-empty array, found {}",
                               a->is_array() ? std::string("an empty array") : json_io::describe_type(*a)));
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i) decode_one((*a)[i], r.pointer(key) + "/" + std::to_string(i));
  };
  each("rows", [&](const Json& v, const std::string& ptr) {
    ObjectReader e(v, efficiency_row_fields(), file, ptr, diags);
    if (!e.valid()) return;
    hw::EfficiencyRow row;
    row.gpu = e.str("gpu").value_or("");
    row.gemm_bf16 = e.num("gemm_bf16").value_or(0.0);
    row.gemm_fp8 = e.num("gemm_fp8").value_or(0.0);
    row.hbm = e.num("hbm").value_or(0.0);
    row.attention_fwd = e.num("attention_fwd").value_or(0.0);
    row.attention_bwd = e.num("attention_bwd").value_or(0.0);
    row.fa2_fwd = e.num("fa2_fwd").value_or(0.0);
    row.fa2_bwd = e.num("fa2_bwd").value_or(0.0);
    row.attention_tile_fwd = e.num("attention_tile_fwd").value_or(0.0);
    row.attention_tile_bwd = e.num("attention_tile_bwd").value_or(0.0);
    row.gemm_int8 = e.num("gemm_int8").value_or(0.0);
    row.gemm_sparse24 = e.num("gemm_sparse24").value_or(0.0);
    row.gemm_w4a16 = e.num("gemm_w4a16").value_or(0.0);
    row.gemm_w4a16_hbm = e.num("gemm_w4a16_hbm").value_or(0.0);
    row.graph_gemm_us = e.num("graph_gemm_us").value_or(0.0);
    row.graph_attention_us = e.num("graph_attention_us").value_or(0.0);
    row.graph_elementwise_us = e.num("graph_elementwise_us").value_or(0.0);
    row.graph_attention_fused_us = e.num("graph_attention_fused_us").value_or(0.0);
    row.graph_norm_us = e.num("graph_norm_us").value_or(0.0);
    row.graph_norm_ns_per_element = e.num("graph_norm_ns_per_element").value_or(0.0);
    row.tile_m = static_cast<int>(e.integer("tile_m").value_or(128));
    row.tile_n = static_cast<int>(e.integer("tile_n").value_or(128));
    row.origin = e.str("origin").value_or("");
    row.sources = e.strings("sources").value_or(std::vector<std::string>{});
    if (row.sources.empty()) e.error("sources", "a row needs at least one source id");
    for (std::size_t k = 0; k < row.sources.size(); ++k)
      if (source_ids.count(row.sources[k]) == 0)
        diags.error(file, ptr + "/sources/" + std::to_string(k),
                    fmt::format("'{}' is not the id of one of this file's sources", row.sources[k]));
    t.rows.push_back(std::move(row));
  });
  each("families", [&](const Json& v, const std::string& ptr) {
    ObjectReader e(v, efficiency_family_fields(), file, ptr, diags);
    if (!e.valid()) return;
    t.families.emplace_back(e.str("family").value_or(""), e.str("gpu").value_or(""));
  });
  if (diags.has_errors()) return Result<hw::EfficiencyTable>(std::move(diags));
  return Result<hw::EfficiencyTable>(std::move(t), std::move(diags));
}

void resolve_efficiency(hw::HardwareDb& db, Diagnostics& diags) {
  std::map<std::string, const hw::EfficiencyRow*> by_gpu;
  std::map<std::string, std::string> family_member;
  for (const auto& t : db.efficiency) {
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const auto& row = t.rows[i];
      const std::string ptr = "/rows/" + std::to_string(i) + "/gpu";
      const hw::GpuSpec* g = db.find_gpu(row.gpu);
      if (g == nullptr || g->info.id != row.gpu)
        diags.error(t.info.file, ptr, fmt::format("unknown GPU id '{}'{}", row.gpu, did_you_mean(row.gpu, db.gpu_names())));
      else if (!by_gpu.emplace(row.gpu, &row).second)
        diags.error(t.info.file, ptr, fmt::format("a second efficiency row for '{}'", row.gpu));
    }
  }
  for (const auto& t : db.efficiency) {
    for (std::size_t i = 0; i < t.families.size(); ++i) {
      const auto& [family, gpu] = t.families[i];
      const std::string ptr = "/families/" + std::to_string(i);
      if (by_gpu.count(gpu) == 0)
        diags.error(t.info.file, ptr + "/gpu", fmt::format("'{}' has no efficiency row to stand for its family", gpu));
      else if (!family_member.emplace(family, gpu).second)
        diags.error(t.info.file, ptr + "/family", fmt::format("family '{}' is given twice", family));
    }
  }
  if (diags.has_errors()) return;
  for (auto& g : db.gpus) {
    g.efficiency.reset();
    g.efficiency_via.clear();
    if (auto it = by_gpu.find(g.info.id); it != by_gpu.end()) {
      g.efficiency = *it->second;
    } else if (auto f = family_member.find(g.family); f != family_member.end()) {
      g.efficiency = *by_gpu.at(f->second);
      g.efficiency_via = "no measurement for " + g.info.id + ": uses its family's (" + f->second + ")";
    }
  }
}

}  // namespace gpuplan::hw_io
