#pragma once
// Property tests (docs/reliability.md "Property tests"): seeded generators of valid scenarios — models from the
// shipped library and synthetic architectures imported through the Hugging Face importer (so "valid" means what the
// importer accepts), GPUs and nodes from the shipped hardware database, layouts drawn at random and kept when
// check_training_layout accepts them — and the checks every property shares.
//
// Reproducing a failure: every case draws from its own generator seeded by (run seed, property, case index), and a
// failure prints "GPUPLAN_PROPERTY_SEED=<seed> GPUPLAN_PROPERTY_CASE=<index>" with the scenario. Environment:
//   GPUPLAN_PROPERTY_SEED   run seed (default kDefaultSeed: the same cases on every run)
//   GPUPLAN_PROPERTY_CASE   run only this case index of each property
//   GPUPLAN_PROPERTY_SCALE  multiply the case counts (e.g. 10 for a long local run; 0.1 for a quick one)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::prop {

inline constexpr std::uint64_t kDefaultSeed = 20261122;

std::uint64_t run_seed();
/// Cases to run for a property with `n` cases by default (scaled by GPUPLAN_PROPERTY_SCALE, at least 1).
int cases(int n);
/// The case indices to run: 0..cases(n)-1, or only GPUPLAN_PROPERTY_CASE.
std::vector<int> case_indices(int n);
/// "GPUPLAN_PROPERTY_SEED=… GPUPLAN_PROPERTY_CASE=…": how to run one case again.
std::string repro(int index);

/// A small deterministic generator (std::mt19937_64 seeded from the run seed, a property name and the case index;
/// the distributions are written out here because std's are not the same across standard libraries).
class Rng {
 public:
  Rng(const std::string& property, int index);
  std::uint64_t next() { return g_(); }
  /// Uniform in [lo, hi].
  std::int64_t range(std::int64_t lo, std::int64_t hi);
  double uniform(double lo, double hi);
  /// Log-uniform in [lo, hi] (lo > 0).
  double log_uniform(double lo, double hi);
  bool chance(double p) { return uniform(0.0, 1.0) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(v.size()) - 1))];
  }
  /// 2^k for k uniform in [0, log2(max)].
  int pow2(int max);

 private:
  std::mt19937_64 g_;
};

/// The shipped hardware database and model library, loaded once.
const hw::HardwareDb& db();
const wl_io::ModelLibrary& library();

/// An architecture with a one-line description of how it was made.
struct GenArch {
  wl::TransformerArch arch;
  std::string what;  ///< "library llama-3.1-8b" or "synthetic {json config}"
};
enum class ArchKind { library, dense, gqa, mqa, mla, moe, any };
/// A valid architecture of the kind: a shipped model, or a synthetic Hugging Face config (dense MHA, GQA, MQA, MLA
/// DeepSeek-style, MoE Mixtral/Qwen-style with or without shared experts, some with sliding windows) of moderate size
/// imported by wl_io::import_hf_config. `small` keeps the synthetic sizes small (for the search property).
GenArch random_arch(Rng& r, ArchKind kind = ArchKind::any, bool small = false);
/// A synthetic config imported from JSON text; FAILs the test on a config the importer refuses.
wl::TransformerArch import_config(const std::string& json_text);

/// A training scenario: architecture, plan, system (pointers into db() or into `own` for a scaled copy).
struct TrainingCase {
  GenArch arch;
  wl::TrainingPlan plan;
  model::TrainingSystem sys;
  std::string describe() const;
};
/// A random node of the database (any of them) and a random valid layout of `arch` on it: TP within the scale-up
/// domain, PP, DP, CP, EP, SP, virtual stages, micro-batch, ZeRO stage, recompute, precision, optimizer, kernels and
/// overlap switches; kept once check_training_layout accepts it (nullopt after many refusals).
std::optional<TrainingCase> random_training(Rng& r, const GenArch& arch);

/// `node` by id with its GPU, in `d`.
model::TrainingSystem system_of(const hw::HardwareDb& d, const std::string& node_id);

/// A finite, non-negative value; on failure the message names the quantity.
inline bool good(double v) { return std::isfinite(v) && v >= 0.0; }

/// Every time, byte, FLOP, rate and cost of a training estimate: names of the ones that are NaN, inf or negative.
std::vector<std::string> bad_values(const model::TrainingEstimate& e);
std::vector<std::string> bad_values(const model::TrainingMemory& m);
std::vector<std::string> bad_values(const model::ForwardCost& f);
std::vector<std::string> bad_values(const model::SteadyState& s);
std::vector<std::string> bad_values(const model::ServingMemory& m);
std::vector<std::string> bad_values(const model::ServingPlanResult& p);
std::string join(const std::vector<std::string>& v);

}  // namespace gpuplan::prop
