// Speculative decoding (serving.hpp): the tokens a draft of g tokens yields per target step at acceptance α, and the
// decode speed-up of drafting, verifying and accepting them.
#include "gpuplan/model/serving.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

using units::Seconds;

double expected_tokens_per_step(const Speculation& s) {
  const double a = std::clamp(s.acceptance, 0.0, 1.0);
  const double g = double(std::max<std::int64_t>(0, s.draft_tokens));
  if (a >= 1.0) return g + 1.0;
  return (1.0 - std::pow(a, g + 1.0)) / (1.0 - a);
}

SpeculativeResult speculative_decoding(const Speculation& s, Seconds t_draft, Seconds t_target, Seconds t_verify,
                                       Explain explain) {
  using units::format;
  SpeculativeResult r;
  r.tokens_per_step = expected_tokens_per_step(s);
  r.step = t_draft * double(s.draft_tokens) + t_verify;
  r.per_token = r.step / r.tokens_per_step;
  r.speedup = r.per_token.raw() > 0 ? (t_target / r.per_token).raw() : 0.0;
  if (explain == Explain::on)
    r.derivation = {"serving.speculative",
                    "Speculative decoding",
                    "E = (1 − α^(γ+1)) / (1 − α) ; speedup = E·t_target / (γ·t_draft + t_verify)",
                    {{"α", units::format_number(s.acceptance, 3), "acceptance rate", Origin::user("--spec-acceptance")},
                     {"γ", std::to_string(s.draft_tokens), "draft tokens per step", Origin::user("--spec-tokens")},
                     {"t_draft", format(t_draft), "draft model step", Origin::derived()},
                     {"t_target", format(t_target), "target model decode step", Origin::derived()},
                     {"t_verify", format(t_verify), "target pass over γ+1 tokens per sequence", Origin::derived()}},
                    fmt::format("{:.2f} tokens per step, {:.2f}× speedup", r.tokens_per_step, r.speedup),
                    {"Leviathan et al., ICML'23, eq. (1); acceptance i.i.d. per position"},
                    {}};
  return r;
}

}  // namespace gpuplan::model
