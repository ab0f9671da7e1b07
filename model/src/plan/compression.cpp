#include "gpuplan/model/compression.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"

namespace gpuplan::model {

std::string_view to_string(CompressionKind k) {
  switch (k) {
    case CompressionKind::baseline: return "baseline";
    case CompressionKind::w8a8_int8: return "w8a8-int8";
    case CompressionKind::w8a8_fp8: return "w8a8-fp8";
    case CompressionKind::w4a16: return "w4a16";
    case CompressionKind::nvfp4: return "nvfp4";
    case CompressionKind::mxfp4: return "mxfp4";
    case CompressionKind::sparse24: return "2:4";
    case CompressionKind::prune_ffn: return "prune-ffn";
    case CompressionKind::prune_heads: return "prune-heads";
    case CompressionKind::drop_layers: return "drop-layers";
    case CompressionKind::student: return "student";
  }
  return "?";
}

namespace {

bool is_quant(CompressionKind k) {
  return k == CompressionKind::w8a8_int8 || k == CompressionKind::w8a8_fp8 || k == CompressionKind::w4a16 ||
         k == CompressionKind::nvfp4 || k == CompressionKind::mxfp4;
}

std::optional<double> parse_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

constexpr const char* kKnown =
    "baseline, w8a8-int8, w8a8-fp8, w4a16, nvfp4, mxfp4, 2:4, prune-ffn=F, prune-heads=F, drop-layers=N, "
    "student=MODEL (joined with '+')";

}  // namespace

bool CompressionChoice::quantises() const {
  return std::any_of(steps.begin(), steps.end(), [](const CompressionStep& s) { return is_quant(s.kind); });
}

const CompressionStep* CompressionChoice::find(CompressionKind k) const {
  for (const auto& s : steps)
    if (s.kind == k) return &s;
  return nullptr;
}

std::vector<std::string> default_compression_variants(const wl::TransformerArch& a) {
  std::vector<std::string> v{"w8a8-int8", "w8a8-fp8", "w4a16", "nvfp4", "2:4", "prune-ffn=0.25", "prune-heads=0.25"};
  if (a.layers >= 4) v.push_back(fmt::format("drop-layers={}", a.layers / 4));
  return v;
}

ParsedCompression parse_compression(std::string_view text) {
  ParsedCompression out;
  CompressionChoice c;
  c.label = std::string(text);
  if (text.empty()) {
    out.error = fmt::format("an empty choice: give one of {}", kKnown);
    return out;
  }
  std::size_t start = 0;
  int quant = 0, sparse = 0, student = 0;
  while (start <= text.size()) {
    const std::size_t plus = text.find('+', start);
    const std::string_view part = text.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    start = plus == std::string_view::npos ? text.size() + 1 : plus + 1;
    CompressionStep s;
    const std::size_t eq = part.find('=');
    const std::string_view name = part.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1);
    const bool has_value = eq != std::string_view::npos;
    auto no_value = [&](CompressionKind k) {
      if (has_value) {
        out.error = fmt::format("'{}' takes no value (in '{}')", name, text);
        return false;
      }
      s.kind = k;
      return true;
    };
    if (name == "baseline" || name == "none") {
      if (!no_value(CompressionKind::baseline)) return out;
    } else if (name == "w8a8-int8" || name == "int8") {
      if (!no_value(CompressionKind::w8a8_int8)) return out;
    } else if (name == "w8a8-fp8" || name == "fp8") {
      if (!no_value(CompressionKind::w8a8_fp8)) return out;
    } else if (name == "w4a16" || name == "int4") {
      if (!no_value(CompressionKind::w4a16)) return out;
    } else if (name == "nvfp4" || name == "fp4") {
      if (!no_value(CompressionKind::nvfp4)) return out;
    } else if (name == "mxfp4") {
      if (!no_value(CompressionKind::mxfp4)) return out;
    } else if (name == "2:4" || name == "sparse24") {
      if (!no_value(CompressionKind::sparse24)) return out;
    } else if (name == "prune-ffn" || name == "prune-heads") {
      s.kind = name == "prune-ffn" ? CompressionKind::prune_ffn : CompressionKind::prune_heads;
      const auto f = parse_number(value);
      if (!f || !(*f > 0.0 && *f < 1.0)) {
        out.error = fmt::format("'{}' in '{}': {} takes the fraction removed, a number in (0, 1)",
                                std::string(value), text, name);
        return out;
      }
      s.fraction = *f;
    } else if (name == "drop-layers") {
      s.kind = CompressionKind::drop_layers;
      const auto n = parse_number(value);
      if (!n || *n < 1.0 || *n != std::floor(*n) || *n > 1e6) {
        out.error = fmt::format("'{}' in '{}': drop-layers takes the number of layers removed, a whole number ≥ 1",
                                std::string(value), text);
        return out;
      }
      s.count = static_cast<std::int64_t>(*n);
    } else if (name == "student") {
      s.kind = CompressionKind::student;
      if (value.empty()) {
        out.error = fmt::format("'{}': student takes a library model id (student=MODEL)", text);
        return out;
      }
      s.model = std::string(value);
    } else {
      out.error = fmt::format("'{}' in '{}' is not a compression step: {}", std::string(part), text, kKnown);
      return out;
    }
    if (is_quant(s.kind)) ++quant;
    if (s.kind == CompressionKind::sparse24) ++sparse;
    if (s.kind == CompressionKind::student) ++student;
    c.steps.push_back(std::move(s));
  }
  if (quant > 1) out.error = fmt::format("'{}' quantises twice: at most one of w8a8-int8, w8a8-fp8, w4a16, nvfp4, "
                                         "mxfp4 per choice", text);
  else if (sparse > 1) out.error = fmt::format("'{}' names 2:4 twice", text);
  else if (student > 1) out.error = fmt::format("'{}' names two students: one per choice", text);
  else if (c.steps.size() > 1 && c.find(CompressionKind::baseline) != nullptr)
    out.error = fmt::format("'{}': baseline is a choice of its own, not a step to join", text);
  if (out.error.empty()) out.choice = std::move(c);
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Derived architectures
// ---------------------------------------------------------------------------------------------------------------

namespace {
/// Width × (1 − f) rounded to a multiple of 64 (at least 64): the tensor-core tile granularity pruning tools keep.
std::int64_t pruned_width(std::int64_t width, double f) {
  const double kept = double(width) * (1.0 - f);
  return std::max<std::int64_t>(64, std::llround(kept / 64.0) * 64);
}

template <class T>
void erase_range(std::vector<T>& v, std::int64_t first, std::int64_t count) {
  if (v.empty()) return;
  const auto n = static_cast<std::int64_t>(v.size());
  const std::int64_t lo = std::min(first, n), hi = std::min(first + count, n);
  v.erase(v.begin() + lo, v.begin() + hi);
}
}  // namespace

DerivedArch derive_architecture(const wl::TransformerArch& base, const CompressionChoice& choice,
                                const wl::TransformerArch* student) {
  DerivedArch d;
  d.arch = base;
  if (const CompressionStep* s = choice.find(CompressionKind::student)) {
    if (student == nullptr) {
      d.error = fmt::format("student '{}' was not loaded", s->model);
      return d;
    }
    d.arch = *student;
    d.notes.push_back(fmt::format("student {} ({} layers, hidden {}, FFN {}) in place of {}: distilled from it, "
                                  "priced as its own architecture",
                                  student->id, student->layers, student->hidden, student->intermediate, base.id));
  }
  wl::TransformerArch& a = d.arch;
  for (const auto& s : choice.steps) {
    switch (s.kind) {
      case CompressionKind::prune_ffn: {
        const std::int64_t before = a.intermediate;
        if (a.intermediate > 0) a.intermediate = pruned_width(a.intermediate, s.fraction);
        std::string moe;
        if (a.moe) {
          const std::int64_t eb = a.moe->expert_intermediate;
          a.moe->expert_intermediate = pruned_width(eb, s.fraction);
          moe = fmt::format(", expert FFN {} → {}", eb, a.moe->expert_intermediate);
          if (a.moe->shared_intermediate > 0) a.moe->shared_intermediate = pruned_width(a.moe->shared_intermediate, s.fraction);
        }
        d.notes.push_back(fmt::format("prune-ffn={}: FFN width {} → {}{} (× (1 − {}), a multiple of 64)",
                                      units::format_number(s.fraction, 3), before, a.intermediate, moe,
                                      units::format_number(s.fraction, 3)));
        break;
      }
      case CompressionKind::prune_heads: {
        if (a.mla) {
          d.error = "prune-heads: MLA heads share one latent KV; pruning them is not modelled";
          return d;
        }
        if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0) {
          d.error = fmt::format("prune-heads: {} query heads are not whole groups of {} KV heads", a.heads, a.kv_heads);
          return d;
        }
        const std::int64_t group = a.heads / a.kv_heads;
        const std::int64_t kv = std::max<std::int64_t>(1, std::llround(double(a.kv_heads) * (1.0 - s.fraction)));
        d.notes.push_back(fmt::format("prune-heads={}: KV heads {} → {}, query heads {} → {} (groups of {} kept whole)",
                                      units::format_number(s.fraction, 3), a.kv_heads, kv, a.heads, kv * group, group));
        a.kv_heads = kv;
        a.heads = kv * group;
        break;
      }
      case CompressionKind::drop_layers: {
        if (s.count >= a.layers) {
          d.error = fmt::format("drop-layers={}: {} has {} layers; at least one must stay", s.count, a.id, a.layers);
          return d;
        }
        // The block just before the last layer (Gromov et al. 2024).
        const std::int64_t first = a.layers - 1 - s.count;
        erase_range(a.moe_layer, first, s.count);
        erase_range(a.attention, first, s.count);
        erase_range(a.mixers, first, s.count);
        erase_range(a.ffn_absent, first, s.count);
        d.notes.push_back(fmt::format("drop-layers={}: layers {}–{} of {} removed (the block before the last layer)",
                                      s.count, first, first + s.count - 1, a.layers));
        a.layers -= s.count;
        break;
      }
      default: break;
    }
  }
  if (a.id == base.id && choice.find(CompressionKind::student) == nullptr &&
      (choice.find(CompressionKind::prune_ffn) || choice.find(CompressionKind::prune_heads) ||
       choice.find(CompressionKind::drop_layers))) {
    a.id = base.id + " (" + choice.label + ")";
    a.name = a.id;
  }
  return d;
}

// ---------------------------------------------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------------------------------------------

CompressedPlan compressed_plan(const ServingPerfPlan& base, const CompressionChoice& choice, const hw::GpuSpec& gpu) {
  CompressedPlan cp;
  ServingPerfPlan& p = cp.perf;
  p = base;
  const std::string& id = gpu.info.id;
  const hw::Precision sixteen = sixteen_bit_of(base.compute);
  auto refuse = [&](std::string why) {
    if (cp.refused.empty()) cp.refused = std::move(why);
  };
  for (const auto& s : choice.steps) {
    switch (s.kind) {
      case CompressionKind::w8a8_int8:
        if (!gpu.peak(hw::Precision::int8)) refuse(fmt::format("{} has no int8 tensor-core rate in its data", id));
        p.weights = default_weight_quant(StoreDtype::int8);
        p.compute = hw::Precision::int8;
        p.activation_quant = true;
        cp.notes.push_back("W8A8 int8: per-channel weight scales, per-token activation scales (a quantise pass per "
                           "GEMM input), int32 accumulation dequantised in the epilogue" +
                           std::string(base.kernels == wl::KernelStyle::eager ? " (eager: a dequantise pass)" : ""));
        break;
      case CompressionKind::w8a8_fp8:
        if (!gpu.peak(hw::Precision::fp8)) refuse(fmt::format("{} has no fp8 tensor cores", id));
        p.weights = default_weight_quant(StoreDtype::fp8);
        p.compute = hw::Precision::fp8;
        p.activation_quant = true;
        cp.notes.push_back("W8A8 fp8 (e4m3): per-channel weight scales, dynamic per-token activation scales");
        break;
      case CompressionKind::w4a16:
        p.weights = default_weight_quant(StoreDtype::int4);
        p.compute = sixteen;
        p.activation_quant = false;
        cp.notes.push_back("W4A16: int4 weights dequantised to " + std::string(hw::to_string(sixteen)) +
                           " in the GEMM main loop; activations stay 16-bit; " +
                           (base.kernels == wl::KernelStyle::eager
                                ? std::string("eager: PyTorch's tinygemm kernel at its measured rates (fast at a few "
                                              "tokens, slow beyond: a decode kernel)")
                                : std::string("fused: an engine's Marlin-class kernel, not measured — the 16-bit GEMM "
                                              "ceiling and the memory-bound GEMM bandwidth")));
        break;
      case CompressionKind::nvfp4:
      case CompressionKind::mxfp4:
        if (!gpu.peak(hw::Precision::fp4))
          refuse(fmt::format("{} has no fp4 tensor cores (no fp4 rate in its data; fp4 GEMMs need Blackwell-class "
                             "parts)",
                             id));
        p.weights = default_weight_quant(StoreDtype::fp4);
        if (s.kind == CompressionKind::mxfp4) {
          p.weights.group_size = 32;
          p.weights.group_bytes = 1.0;
          p.weights.origin = "MXFP4 (OCP Microscaling Formats v1.0): e2m1 values in blocks of 32 with one e8m0 scale: "
                             "0.5 + 1/32 = 0.53125 B per weight";
        }
        p.compute = hw::Precision::fp4;
        p.activation_quant = true;
        cp.notes.push_back(std::string(to_string(s.kind)) + ": W4A4 on fp4 tensor cores, activations quantised per "
                           "block before each GEMM");
        break;
      default: break;
    }
  }
  if (choice.find(CompressionKind::sparse24) != nullptr) {
    if (p.weights.dtype == StoreDtype::int4 || p.weights.dtype == StoreDtype::fp4)
      refuse(fmt::format("2:4 sparsity with {} weights: no such kernel is priced (2:4 runs with 16-bit, int8 or fp8 "
                         "GEMMs)",
                         to_string(p.weights.dtype)));
    else if (!gpu.sparse(p.compute))
      refuse(fmt::format("{} has no 2:4-sparse {} rate in its data (sparse_peak)", id, hw::to_string(p.compute)));
    p.weights.sparse24 = true;
    p.weights.origin += "; 2:4 structured sparsity (half the values + 2-bit indices)";
    cp.notes.push_back("2:4 sparsity: sparse tensor cores at the measured sparse ceiling (never the datasheet 2× by "
                       "itself)");
  }
  return cp;
}

// ---------------------------------------------------------------------------------------------------------------
// The study
// ---------------------------------------------------------------------------------------------------------------

namespace {

std::string weights_text(const WeightQuant& w) {
  std::string s(to_string(w.dtype));
  if (is_quantized(w.dtype))
    s += w.group_size > 0 ? fmt::format(" g{}", w.group_size) : std::string(" per-channel");
  if (w.sparse24) s += " 2:4";
  return s;
}

std::string compute_text(const ServingPerfPlan& p) {
  const bool weight_only = is_quantized(p.weights.dtype) && element_bytes(p.weights.dtype) < hw::bytes_per_element(p.compute);
  std::string s = fmt::format("{} tensor cores", hw::to_string(p.compute));
  if (p.weights.sparse24) s = fmt::format("{} 2:4-sparse tensor cores", hw::to_string(p.compute));
  if (weight_only) s += " (weights dequantised in the main loop)";
  if (p.activation_quant) s += " + per-token activation quantisation";
  return s;
}

}  // namespace

CompressionStudy compression_study(const wl::TransformerArch& base, const ServingPerfPlan& plan,
                                   const ServingMemoryPlan& memory, const ServingSystem& sys,
                                   const std::vector<CompressionChoice>& choices,
                                   const std::vector<const wl::TransformerArch*>& students, std::int64_t batch,
                                   std::int64_t input_tokens, std::int64_t output_tokens, Explain explain) {
  using units::format;
  CompressionStudy st;
  st.batch = std::max<std::int64_t>(1, batch);
  st.input_tokens = std::max<std::int64_t>(1, input_tokens);
  st.output_tokens = std::max<std::int64_t>(1, output_tokens);
  st.context = st.input_tokens + st.output_tokens;
  st.decode_context = st.input_tokens + st.output_tokens / 2;
  st.accuracy_note =
      "Accuracy is out of scope: every choice below trades model quality (perplexity, task scores) that this model "
      "does not estimate; measure it on your own evaluation before relying on a row.";

  std::vector<CompressionChoice> all;
  std::vector<const wl::TransformerArch*> studs;
  if (choices.empty() || choices.front().find(CompressionKind::baseline) == nullptr) {
    CompressionChoice b;
    b.label = "baseline";
    b.steps.push_back({});
    all.push_back(b);
    studs.push_back(nullptr);
  }
  for (std::size_t i = 0; i < choices.size(); ++i) {
    all.push_back(choices[i]);
    studs.push_back(i < students.size() ? students[i] : nullptr);
  }

  const hw::GpuSpec& gpu = *sys.gpu;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const CompressionChoice& c = all[i];
    CompressionRow row;
    row.label = c.label;
    const DerivedArch da = derive_architecture(base, c, studs[i]);
    const CompressedPlan cp = compressed_plan(plan, c, gpu);
    row.notes = da.notes;
    row.notes.insert(row.notes.end(), cp.notes.begin(), cp.notes.end());
    row.weights = weights_text(cp.perf.weights);
    row.compute = compute_text(cp.perf);
    const wl::TransformerArch& a = da.arch;
    row.layers = a.layers;
    row.hidden = a.hidden;
    row.heads = a.heads;
    row.kv_heads = a.kv_heads;
    row.intermediate = a.moe && a.intermediate == 0 ? a.moe->expert_intermediate : a.intermediate;
    if (!da.error.empty() || !cp.refused.empty()) {
      row.refused = !da.error.empty() ? da.error : cp.refused;
      st.rows.push_back(std::move(row));
      continue;
    }
    const ParameterCounts pc = parameter_counts(a, Explain::off);
    row.params = double(pc.total);
    ServingMemoryPlan mp = memory;
    mp.weights = cp.perf.weights;
    mp.kv = cp.perf.kv;
    mp.tp = cp.perf.tp;
    mp.pp = cp.perf.pp;
    mp.context = st.context;
    mp.concurrency = st.batch;
    mp.gpus.reset();
    const ServingMemory sm = serving_memory(a, pc, gpu, mp, Explain::off);
    row.weight_bytes = sm.weights_total;
    row.kv_bytes = sm.kv_total;
    row.memory = sm.memory_needed;
    row.fits = sm.ok;
    row.max_batch = sm.max_concurrency;
    if (!sm.ok)
      for (const auto& r : sm.reasons) row.notes.push_back("memory: " + r);

    row.ttft = prefill_time(a, cp.perf, 1, st.input_tokens, sys);
    row.itl = decode_step_time(a, cp.perf, st.batch, st.decode_context, sys);
    row.decode_tokens_per_s = row.itl.raw() > 0 ? double(st.batch) / row.itl.raw() : 0.0;
    const units::Seconds prefill_batch = prefill_time(a, cp.perf, st.batch, st.input_tokens, sys);
    row.prefill_tokens_per_s =
        prefill_batch.raw() > 0 ? double(st.batch) * double(st.input_tokens) / prefill_batch.raw() : 0.0;

    if (explain == Explain::on) {
      ForwardBatch dec;
      dec.decode_seqs = double(st.batch);
      dec.decode_context = st.decode_context;
      ForwardCost fc = forward_cost(a, cp.perf, dec, sys, Explain::on);
      row.derivation = {
          "compress." + c.label,
          "Compression choice " + c.label,
          "weights = Σ params·b_w (+ 16-bit embeddings/head) ; KV = batch·context·KV/token ; TTFT = prefill(1 × isl) ; "
          "ITL = forward(batch decode at isl + osl/2) ; decode tok/s = batch / ITL",
          {{"arch", fmt::format("L {} h {} heads {}/{} FFN {}", a.layers, a.hidden, a.heads, a.kv_heads,
                                row.intermediate),
            "derived architecture", Origin::derived()},
           {"weights", row.weights, "weight storage", Origin::user(cp.perf.weights.origin)},
           {"compute", row.compute, "GEMM path", Origin::derived()},
           {"params", units::format_number(row.params, 4), "parameters of the derived model", Origin::derived()},
           {"batch × context", fmt::format("{} × {}", st.batch, st.context), "sequences and their tokens",
            Origin::user("--batch, --input-tokens + --output-tokens")}},
          fmt::format("weights {}, KV {}, TTFT {}, ITL {}, {:.0f} decode tok/s", format(row.weight_bytes),
                      format(row.kv_bytes), format(row.ttft), format(row.itl), row.decode_tokens_per_s),
          row.notes,
          {std::move(fc.derivation)}};
    }
    st.rows.push_back(std::move(row));
  }
  return st;
}

}  // namespace gpuplan::model
