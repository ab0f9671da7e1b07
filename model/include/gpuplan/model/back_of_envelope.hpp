#pragma once
// The back-of-envelope templates that ML-performance interview material teaches (shared/reference/textbook.md), each
// as an Estimate with its derivation. They call the model's one formula where one exists (time_at_mfu, bus_factor,
// pipeline_bubble_fraction, attainable_performance, streaming_cost) and only add the explanation, so that
// `gpuplan validate` (textbook cases), `gpuplan drill` and the GUI's interview drills show the same numbers and the
// same derivation trees. Every input of a template carries the same origin (the question it answers).
#include <cstdint>
#include <string>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"

namespace gpuplan::model {

/// Dense training FLOPs of a model of `params` parameters over `tokens` tokens: 6·P·T (2 forward + 4 backward FLOPs
/// per parameter per token; Kaplan et al. 2020 §2.1, attention FLOPs not counted).
units::Flops dense_training_flops(double params, double tokens);
/// Dense forward FLOPs (prefill, inference): 2·P·T.
units::Flops dense_forward_flops(double params, double tokens);

/// Arithmetic intensity of an op that does `flops` FLOPs and moves `bytes` bytes: I = F / B.
Estimate<units::Intensity> arithmetic_intensity(const std::string& op, units::Flops flops, units::Bytes bytes,
                                                const Origin& origin, Explain explain = Explain::on);

/// What the roofline lets an op of intensity `i` achieve: min(P_peak, BW·I) (attainable_performance).
Estimate<units::FlopRate> attainable(units::FlopRate peak, units::Bandwidth bandwidth, units::Intensity i,
                                     const Origin& origin, Explain explain = Explain::on);

/// Time to train on `gpus` GPUs of dense peak `peak` at model-FLOPs utilisation `mfu`: t = 6·P·T / (N·P_peak·MFU)
/// (time_at_mfu over dense_training_flops).
Estimate<units::Seconds> time_to_train(double params, double tokens, double gpus, units::FlopRate peak, double mfu,
                                       const Origin& origin, Explain explain = Explain::on);

/// The compute-bound floor of a forward pass over `tokens` tokens (prefill) of a dense model of `params` parameters
/// at the dense peak: t = 2·P·T / P_peak (no efficiency, no attention FLOPs: the textbook's ideal).
Estimate<units::Seconds> compute_bound_time(double params, double tokens, units::FlopRate peak, const Origin& origin,
                                            Explain explain = Explain::on);

/// The bandwidth-bound floor of streaming `bytes` once at the datasheet bandwidth (decode at batch 1 reads every
/// weight once per token): t = B / BW, with η = 1 and no launch cost (streaming_cost on an ideal device).
Estimate<units::Seconds> bandwidth_bound_time(const std::string& what, units::Bytes bytes, units::Bandwidth bandwidth,
                                              const Origin& origin, Explain explain = Explain::on);

/// Bytes a ring all-reduce of a `buffer`-byte buffer sends per GPU over `n` GPUs: 2(n−1)/n · S (bus_factor;
/// nccl-tests PERFORMANCE.md).
Estimate<units::Bytes> all_reduce_volume(units::Bytes buffer, int n, const Origin& origin,
                                         Explain explain = Explain::on);

/// Pipeline bubble as a fraction of the ideal compute time: (p − 1) / (v·m) (pipeline_bubble_fraction;
/// Narayanan et al. 2021 §2.2).
Estimate<double> pipeline_bubble(int pp, int virtual_stages, std::int64_t micro_batches, const Origin& origin,
                                 Explain explain = Explain::on);

}  // namespace gpuplan::model
