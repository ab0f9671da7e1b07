#include "gpuplan/model/back_of_envelope.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::model {

namespace u = units;

u::Flops dense_training_flops(double params, double tokens) { return u::flop(6.0 * params * tokens); }
u::Flops dense_forward_flops(double params, double tokens) { return u::flop(2.0 * params * tokens); }

Estimate<u::Intensity> arithmetic_intensity(const std::string& op, u::Flops flops, u::Bytes bytes, const Origin& origin,
                                            Explain explain) {
  Estimate<u::Intensity> e;
  e.value = flops / bytes;
  if (explain == Explain::on)
    e.derivation = {"intensity",
                    "Arithmetic intensity of " + op,
                    "I = F / B",
                    {{"F", u::format(flops), "FLOPs of the op", origin},
                     {"B", u::format(bytes), "bytes read and written", origin}},
                    u::format(e.value),
                    {"compare with the GPU's ridge point: below it the op is memory-bound"},
                    {}};
  return e;
}

Estimate<u::FlopRate> attainable(u::FlopRate peak, u::Bandwidth bandwidth, u::Intensity i, const Origin& origin,
                                 Explain explain) {
  Estimate<u::FlopRate> e;
  e.value = attainable_performance(peak, bandwidth, i);
  if (explain == Explain::on) {
    const bool memory_bound = bandwidth * i < peak;
    e.derivation = {"roofline.attainable",
                    "Attainable performance under the roofline",
                    "P = min(P_peak, BW_mem · I)",
                    {{"P_peak", u::format(peak), "dense peak compute", origin},
                     {"BW_mem", u::format(bandwidth), "peak memory bandwidth", origin},
                     {"I", u::format(i), "arithmetic intensity of the op", origin}},
                    u::format(e.value),
                    {memory_bound ? "memory-bound: BW_mem · I is below the peak" : "compute-bound: capped at the peak"},
                    {}};
  }
  return e;
}

Estimate<u::Seconds> time_to_train(double params, double tokens, double gpus, u::FlopRate peak, double mfu,
                                   const Origin& origin, Explain explain) {
  Estimate<u::Seconds> e;
  const u::Flops total = dense_training_flops(params, tokens);
  e.value = time_at_mfu(total, gpus, peak, mfu);
  if (explain == Explain::on) {
    Derivation flops{"train.flops",
                     "Training FLOPs",
                     "F = 6 · P · T",
                     {{"P", u::format_count(params), "parameters", origin},
                      {"T", u::format_count(tokens), "training tokens", origin}},
                     u::format(total),
                     {"2 FLOPs per parameter per token forward, 4 backward (Kaplan et al. 2020 §2.1); attention "
                      "FLOPs not counted"},
                     {}};
    e.derivation = {"train.time",
                    "Time to train at a given MFU",
                    "t = F / (N · P_peak · MFU)",
                    {{"F", u::format(total), "training FLOPs (below)", Origin::derived("train.flops")},
                     {"N", u::format_number(gpus), "GPUs", origin},
                     {"P_peak", u::format(peak), "dense peak per GPU", origin},
                     {"MFU", u::format(u::Ratio(mfu)), "model-FLOPs utilisation", origin}},
                    fmt::format("{} ({} days)", u::format(e.value), u::format_number(e.value.raw() / 86400.0, 4)),
                    {},
                    {std::move(flops)}};
  }
  return e;
}

Estimate<u::Seconds> compute_bound_time(double params, double tokens, u::FlopRate peak, const Origin& origin,
                                        Explain explain) {
  Estimate<u::Seconds> e;
  const u::Flops f = dense_forward_flops(params, tokens);
  e.value = f / peak;
  if (explain == Explain::on)
    e.derivation = {"prefill.floor",
                    "Compute-bound floor of a forward pass (prefill)",
                    "t = 2 · P · T / P_peak",
                    {{"P", u::format_count(params), "parameters", origin},
                     {"T", u::format_count(tokens), "tokens in the pass", origin},
                     {"P_peak", u::format(peak), "dense peak compute", origin}},
                    u::format(e.value),
                    {fmt::format("2·P·T = {}; at 100% of the peak, no attention FLOPs: a real prefill is slower",
                                 u::format(f))},
                    {}};
  return e;
}

Estimate<u::Seconds> bandwidth_bound_time(const std::string& what, u::Bytes bytes, u::Bandwidth bandwidth,
                                          const Origin& origin, Explain explain) {
  // An ideal device: the datasheet bandwidth at η = 1, no launch cost, compute so fast it never binds.
  hw::GpuSpec gpu;
  gpu.info.id = "ideal";
  gpu.dense_peak[static_cast<std::size_t>(hw::Precision::fp32)] = u::tflops(1e6);
  gpu.memory.bandwidth = bandwidth;
  Device dev{&gpu, {}};
  dev.eff.hbm = 1.0;
  Estimate<u::Seconds> e;
  e.value = streaming_cost(what, OpClass::gemm, bytes, u::flop(0), dev).time;
  if (explain == Explain::on)
    e.derivation = {"decode.floor",
                    "Bandwidth-bound floor: " + what + " streamed once",
                    "t = B / BW_mem",
                    {{"B", u::format(bytes), "bytes read once", origin},
                     {"BW_mem", u::format(bandwidth), "peak memory bandwidth", origin}},
                    u::format(e.value),
                    {"at the datasheet bandwidth (η = 1) with no launch cost: a floor, not a prediction"},
                    {}};
  return e;
}

Estimate<u::Bytes> all_reduce_volume(u::Bytes buffer, int n, const Origin& origin, Explain explain) {
  Estimate<u::Bytes> e;
  const double f = bus_factor(Collective::all_reduce, n);
  e.value = buffer * f;
  if (explain == Explain::on)
    e.derivation = {"allreduce.volume",
                    "Bytes a ring all-reduce sends per GPU",
                    "V = 2(n − 1)/n · S",
                    {{"S", u::format(buffer), "buffer per GPU", origin},
                     {"n", fmt::format("{}", n), "GPUs in the ring", origin}},
                    u::format(e.value),
                    {fmt::format("bus factor 2(n−1)/n = {} (reduce-scatter then all-gather, each (n−1)/n)",
                                 u::format_number(f))},
                    {}};
  return e;
}

Estimate<double> pipeline_bubble(int pp, int virtual_stages, std::int64_t micro_batches, const Origin& origin,
                                 Explain explain) {
  Estimate<double> e;
  e.value = pipeline_bubble_fraction(pp, virtual_stages, micro_batches);
  if (explain == Explain::on)
    e.derivation = {"pipeline.bubble",
                    "Pipeline bubble (1F1B / interleaved)",
                    "bubble = (p − 1) / (v · m)",
                    {{"p", fmt::format("{}", pp), "pipeline stages", origin},
                     {"v", fmt::format("{}", virtual_stages), "model chunks per stage (1 = plain 1F1B)", origin},
                     {"m", fmt::format("{}", micro_batches), "micro-batches per step", origin}},
                    u::format(u::Ratio(e.value)),
                    {"as a fraction of the ideal compute time (Narayanan et al. 2021 §2.2)"},
                    {}};
  return e;
}

}  // namespace gpuplan::model
