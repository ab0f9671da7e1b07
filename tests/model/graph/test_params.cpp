#include <cmath>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/params.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;
using gpuplan::test::library;

namespace {
// Tolerance for a published count: 0.5% (the bar), or half the publisher's rounding step where they round
// coarser than that ("22B activated" is 21.5-22.5B).
double tolerance(double published_B, std::optional<double> rounded_to_B) {
  const double rel = 0.005;
  if (!rounded_to_B) return rel;
  return std::max(rel, 0.5 * *rounded_to_B / published_B);
}
}  // namespace

TEST_CASE("every shipped model with a published count matches it within 0.5% (total and active)") {
  int checked = 0;
  for (const auto& m : library().models) {
    if (!m.published) continue;
    CAPTURE(m.arch.id);
    const auto p = model::parameter_counts(m.arch, Explain::off);
    const double total_B = static_cast<double>(p.total) / 1e9;
    const double tol = tolerance(m.published->total_params_B, m.published->rounded_to_B);
    CHECK(std::fabs(total_B / m.published->total_params_B - 1.0) <= tol);
    if (m.published->active_params_B) {
      double active = static_cast<double>(p.active);
      if (!m.published->active_includes_input_embedding) active -= static_cast<double>(p.embedding);
      CHECK(std::fabs(active / 1e9 / *m.published->active_params_B - 1.0) <=
            tolerance(*m.published->active_params_B, m.published->rounded_to_B));
    }
    ++checked;
  }
  CHECK(checked >= 30);
}

// The named checks, asserted directly so that a data edit cannot silently drop one.
TEST_CASE("named parameter counts from the publishers") {
  auto billions = [](const char* id) { return static_cast<double>(model::parameter_counts(arch(id), Explain::off).total) / 1e9; };
  auto active = [](const char* id) { return static_cast<double>(model::parameter_counts(arch(id), Explain::off).active) / 1e9; };
  CHECK(billions("llama-3.1-8b") == gptest::approx(8.03).epsilon(0.005));   // Meta model card
  CHECK(billions("llama-3.1-70b") == gptest::approx(70.6).epsilon(0.005));  // Meta model card
  CHECK(billions("llama-3.1-405b") == gptest::approx(405.9).epsilon(0.005));
  CHECK(billions("mixtral-8x7b") == gptest::approx(46.7).epsilon(0.005));   // arXiv:2401.04088
  CHECK(active("mixtral-8x7b") == gptest::approx(12.9).epsilon(0.005));
  CHECK(billions("deepseek-v3") == gptest::approx(671).epsilon(0.005));     // arXiv:2412.19437
  CHECK(billions("gpt3-175b") == gptest::approx(175).epsilon(0.005));       // Brown et al. 2020, Table 2.1
  CHECK(billions("llama-2-7b") == gptest::approx(6.74).epsilon(0.005));
  CHECK(billions("llama-2-70b") == gptest::approx(68.98).epsilon(0.005));
}

TEST_CASE("DeepSeek-V3: 37B active = 36.6B without the input embedding, MTP module counted apart") {
  const auto p = model::parameter_counts(arch("deepseek-v3"), Explain::off);
  CHECK(static_cast<double>(p.active - p.embedding) / 1e9 == gptest::approx(36.6).epsilon(0.005));
  CHECK(static_cast<double>(p.active) / 1e9 == gptest::approx(37.0).epsilon(0.02));
  // The MTP module is ~11.5B (DeepSeek-V3 README_WEIGHTS: 685B on the Hub = 671B + 14B incl. shared parts).
  CHECK(static_cast<double>(p.mtp) / 1e9 == gptest::approx(11.6).epsilon(0.02));
}

TEST_CASE("Megatron GPT count equals the paper's closed form 12·l·h²·(1 + 13/12h + (V+s)/12lh)") {
  // Narayanan et al. SC'21 §5.1; LayerNorm and biases included, final LayerNorm adds 2h.
  for (const char* id : {"megatron-gpt-1.7b", "megatron-gpt-145.6b", "megatron-gpt-1008b"}) {
    CAPTURE(id);
    const auto& a = arch(id);
    const double l = double(a.layers), h = double(a.hidden), V = double(a.vocab), s = double(a.max_position);
    const double closed = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    const auto p = model::parameter_counts(a, Explain::off);
    CHECK(static_cast<double>(p.total) == gptest::approx(closed + 2 * h).epsilon(1e-12));
  }
}

TEST_CASE("a dense model has active == total and an MoE model fewer") {
  const auto dense = model::parameter_counts(arch("llama-3.1-8b"), Explain::off);
  CHECK(dense.active == dense.total);
  const auto moe = model::parameter_counts(arch("qwen3-235b-a22b"), Explain::off);
  CHECK(moe.active < moe.total / 5);
}

TEST_CASE("parameters grow with layers and width") {
  auto a = arch("llama-3.1-8b");
  const auto base = model::parameter_counts(a, Explain::off).total;
  auto deeper = a;
  deeper.layers += 1;
  deeper.attention.push_back(wl::AttentionSpan::full);
  const auto more = model::parameter_counts(deeper, Explain::off);
  CHECK(more.total - base == more.attention_per_layer + more.dense_mlp_per_layer + 2 * a.hidden);
  auto wider = a;
  wider.intermediate += 1;
  CHECK(model::parameter_counts(wider, Explain::off).total == base + 3 * a.hidden * a.layers);
}

TEST_CASE("the derivation lists the components and the assumptions") {
  const auto p = model::parameter_counts(arch("mixtral-8x7b"), Explain::on);
  CHECK(p.derivation.id == "params");
  CHECK(p.derivation.find("params.attention") != nullptr);
  CHECK(p.derivation.find("params.moe") != nullptr);
  CHECK(p.derivation.result == "46,702,792,704 total, 12,879,925,248 active");
  const auto off = model::parameter_counts(arch("mixtral-8x7b"), Explain::off);
  CHECK(off.derivation.empty());
  CHECK(off.total == p.total);
}
