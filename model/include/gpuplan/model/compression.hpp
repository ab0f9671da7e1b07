#pragma once
// Compression what-ifs for serving (issue #27, deliverable 5): weight and activation quantisation with their compute
// paths, 2:4 structured sparsity, structured pruning and a distilled student — each a serving plan and/or a smaller
// architecture derived from the original, priced by the same op graph and GEMM formula as `gpuplan serve`
// (serving.hpp forward_cost → ops.hpp gemm_cost; serving_memory.hpp for the weights and the KV cache). Accuracy is
// out of scope: every choice costs quality that this model does not estimate, and the study says so.
//
// Compute paths (ops.hpp gemm_cost, serving.cpp's weight GEMMs):
//  W8A8 int8   int8 weights with one fp32 scale per output channel, activations quantised per token before each
//              GEMM (a pass), int8 tensor cores with int32 accumulation at the int8 peak × the measured int8 ceiling,
//              dequantised with the token × channel scales in the epilogue (fused) or by a pass (eager: int32 out).
//  W8A8 fp8    the same with e4m3 weights and activations on fp8 tensor cores (Hopper and later).
//  W4A16       int4 weights (group 128, GPTQ/AWQ layout) dequantised in the GEMM's main loop, 16-bit tensor cores:
//              memory-bound decode reads ~¼ of the bytes, compute-bound prefill runs at the weight-only kernel's
//              measured rate (no gain, often a loss).
//  NVFP4/MXFP4 W4A4 on fp4 tensor cores (Blackwell): e2m1 values with an e4m3 scale per 16 (NVFP4) or an e8m0
//              scale per 32 (MXFP4, OCP MX v1.0); refused on parts with no fp4 peak.
//  2:4         half the weights of every group of four kept, 2-bit indices; sparse tensor cores at the part's sparse
//              peak × the measured sparse ceiling (never the datasheet's 2× by itself); refused without a sparse
//              peak in the GPU's data.
// Derived architectures:
//  prune-ffn=f     FFN width (dense and routed-expert) × (1 − f), rounded to a multiple of 64 (tensor-core tiles);
//  prune-heads=f   a fraction f of the KV-head groups dropped with their query heads (the GQA ratio kept): fewer
//                  attention weights and a smaller KV cache;
//  drop-layers=N   N layers removed: the block just before the last layer (Gromov et al. 2024, "The Unreasonable
//                  Ineffectiveness of the Deeper Layers", arXiv:2403.17887: deep blocks are the most redundant);
//  student=MODEL   a smaller library model (a distilled student) in place of the original.
// Steps join with '+' ("prune-ffn=0.25+w4a16"): at most one quantisation and one 2:4 step per choice.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

enum class CompressionKind {
  baseline,     ///< the model as it is (the plan's own weight dtype)
  w8a8_int8,
  w8a8_fp8,
  w4a16,
  nvfp4,
  mxfp4,
  sparse24,
  prune_ffn,
  prune_heads,
  drop_layers,
  student,
};
std::string_view to_string(CompressionKind k);

struct CompressionStep {
  CompressionKind kind = CompressionKind::baseline;
  double fraction = 0.0;     ///< prune-ffn, prune-heads: share removed, in (0, 1)
  std::int64_t count = 0;    ///< drop-layers: layers removed
  std::string model;         ///< student: the library model id
};

/// One choice of the study: its steps, applied in order (architecture steps, then the plan's).
struct CompressionChoice {
  std::string label;  ///< as typed
  std::vector<CompressionStep> steps;
  [[nodiscard]] bool quantises() const;
  [[nodiscard]] const CompressionStep* find(CompressionKind k) const;
};

/// "baseline", "w8a8-int8" (alias int8), "w8a8-fp8" (fp8), "w4a16" (int4), "nvfp4" (fp4), "mxfp4", "2:4"
/// (sparse24), "prune-ffn=F", "prune-heads=F", "drop-layers=N", "student=MODEL", joined with '+'. On a bad value
/// `error` states the part as typed and the rule it breaks; `choice` is then empty.
struct ParsedCompression {
  std::optional<CompressionChoice> choice;
  std::string error;
};
ParsedCompression parse_compression(std::string_view text);

/// The choices `gpuplan compress` and the GUI's compression view price when none are given: every quantisation path,
/// 2:4, a quarter of the FFN, a quarter of the heads and (from 4 layers) a quarter of the layers.
std::vector<std::string> default_compression_variants(const wl::TransformerArch& a);

/// The architecture a choice derives from `base` (its pruning steps; a student step replaces it with `student`, which
/// the caller loaded). `error` says why it cannot be derived (e.g. more layers dropped than the model has).
struct DerivedArch {
  wl::TransformerArch arch;
  std::vector<std::string> notes;  ///< what each step changed ("FFN 11008 → 8256")
  std::string error;
};
DerivedArch derive_architecture(const wl::TransformerArch& base, const CompressionChoice& choice,
                                const wl::TransformerArch* student = nullptr);

/// The serving plan (weights, compute precision, activation passes) of a choice on `gpu`, from `base`. `refused`
/// says why the part cannot run it (no int8/fp8/fp4 tensor cores, no sparse peak); empty when it can.
struct CompressedPlan {
  ServingPerfPlan perf;
  std::string refused;
  std::vector<std::string> notes;
};
CompressedPlan compressed_plan(const ServingPerfPlan& base, const CompressionChoice& choice, const hw::GpuSpec& gpu);

struct CompressionRow {
  std::string label;
  std::string refused;              ///< non-empty: not priced here, and why
  std::string weights;              ///< weight storage ("int4 g128", "bf16 2:4")
  std::string compute;              ///< GEMM precision and path ("int8 tensor cores")
  std::int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0;
  double params = 0;                ///< all weights of the derived model
  units::Bytes weight_bytes{};      ///< stored weights, whole model (scales, indices and 16-bit parts included)
  units::Bytes kv_bytes{};          ///< KV cache of `batch` sequences at `context` tokens, whole model
  units::Bytes memory{};            ///< weight_bytes + kv_bytes (per replica; per GPU = / (TP·PP) for the layers)
  bool fits = true;                 ///< the serving memory model holds `batch` sequences at the context
  std::int64_t max_batch = 0;       ///< sequences of `context` tokens the replica's KV pool holds
  units::Seconds ttft{};            ///< one prompt of `input_tokens`, alone (no queueing)
  units::Seconds itl{};             ///< one decode step of `batch` sequences at the mean context
  double decode_tokens_per_s = 0;   ///< batch / ITL
  double prefill_tokens_per_s = 0;  ///< batch·input / prefill time of the batch's prompts
  std::vector<std::string> notes;
  Derivation derivation;
};

struct CompressionStudy {
  std::int64_t batch = 1, input_tokens = 0, output_tokens = 0;
  std::int64_t context = 0;         ///< input + output: the KV each sequence reaches
  std::int64_t decode_context = 0;  ///< input + output/2: the mean context of a decode step
  std::vector<CompressionRow> rows;  ///< rows[0] is the baseline
  std::string accuracy_note;
};

/// Prices every choice (the baseline first) on one replica of `plan` (TP, PP, KV dtype, engine knobs) with `memory`
/// the engine's memory plan (its weights and KV dtype are the choice's). `students[i]` is choice i's student model
/// when it has a student step. For each: weights and KV (serving_memory), TTFT = prefill_time(1 prompt), ITL =
/// decode_step_time(batch, input + output/2), decode tokens/s = batch / ITL, prefill tokens/s = batch·input /
/// prefill_time(batch prompts).
CompressionStudy compression_study(const wl::TransformerArch& base, const ServingPerfPlan& plan,
                                   const ServingMemoryPlan& memory, const ServingSystem& sys,
                                   const std::vector<CompressionChoice>& choices,
                                   const std::vector<const wl::TransformerArch*>& students, std::int64_t batch,
                                   std::int64_t input_tokens, std::int64_t output_tokens,
                                   Explain explain = Explain::on);

}  // namespace gpuplan::model
