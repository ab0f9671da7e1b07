#include "gpuplan/wl/pipeline_layout.hpp"

#include <cstddef>

namespace gpuplan::wl {
namespace {

constexpr std::size_t kMaxExpanded = 1000000;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Reads the digits at s[i...]: their value (capped above kMaxExpanded) and the index after them.
std::size_t read_count(std::string_view s, std::size_t i, std::size_t& end) {
  std::size_t n = 0;
  while (i < s.size() && is_digit(s[i])) {
    if (n <= kMaxExpanded) n = n * 10 + std::size_t(s[i] - '0');
    ++i;
  }
  end = i;
  return n;
}

/// Appends `n` copies of `x` to `out`; false when the result would exceed the limit.
bool repeat(std::string& out, std::string_view x, std::size_t n) {
  if (n > kMaxExpanded || x.size() * n > kMaxExpanded - out.size()) return false;
  for (std::size_t k = 0; k < n; ++k) out.append(x);
  return true;
}

}  // namespace

ParsedPipelineLayout parse_pipeline_layout(std::string_view text) {
  ParsedPipelineLayout r;
  const std::string too_long = "expands to more than 1000000 layers";
  std::string s0;
  for (char c : text)
    if (c != ',') s0 += c;  // cosmetic commas
  // Pass 1: (X)*N with X free of ')' (Megatron's r'\(([^)]+)\)\*(\d+)').
  std::string s1;
  for (std::size_t i = 0; i < s0.size();) {
    if (s0[i] == '(') {
      const std::size_t close = s0.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && close + 2 < s0.size() && s0[close + 1] == '*' &&
          is_digit(s0[close + 2])) {
        std::size_t end = 0;
        const std::size_t n = read_count(s0, close + 2, end);
        if (!repeat(s1, std::string_view(s0).substr(i + 1, close - i - 1), n)) {
          r.error = too_long;
          return r;
        }
        i = end;
        continue;
      }
    }
    s1 += s0[i++];
  }
  // Pass 2: c*N (Megatron's r'(.)\*(\d+)').
  std::string s2;
  for (std::size_t i = 0; i < s1.size();) {
    if (s1[i] != '\n' && i + 2 < s1.size() && s1[i + 1] == '*' && is_digit(s1[i + 2])) {
      std::size_t end = 0;
      const std::size_t n = read_count(s1, i + 2, end);
      if (!repeat(s2, std::string_view(s1).substr(i, 1), n)) {
        r.error = too_long;
        return r;
      }
      i = end;
      continue;
    }
    s2 += s1[i++];
  }
  if (s2.size() > kMaxExpanded) {
    r.error = too_long;
    return r;
  }
  r.chunks.emplace_back();
  std::int64_t e = 0, l = 0;
  bool after_mtp = false, after_loss = false;
  for (char c : s2) {
    if (c == '|') {
      r.chunks.emplace_back();
      continue;
    }
    LayoutChunk& ch = r.chunks.back();
    const bool first_layer = r.chunks.size() == 1 && ch.embedding + ch.decoder + ch.mtp + ch.loss == 0;
    if (after_loss) {
      r.error = "the loss (L) must be the last layer";
      return r;
    }
    switch (c) {
      case 'E':
        if (!first_layer) {
          r.error = "the embedding (E) must be the first layer of the first chunk";
          return r;
        }
        ++ch.embedding;
        ++e;
        break;
      case 't':
        if (after_mtp) {
          r.error = "decoder layers (t) must come before the multi-token-prediction layers (m)";
          return r;
        }
        ++ch.decoder;
        break;
      case 'm':
        ++ch.mtp;
        after_mtp = true;
        break;
      case 'L':
        ++ch.loss;
        ++l;
        after_loss = true;
        break;
      default:
        r.error = std::string("invalid layer character '") + c +
                  "' after expanding the repetitions (known: E embedding, t decoder layer, m multi-token prediction, "
                  "L loss, | between chunks, (...)*N and c*N repetitions; parentheses do not nest)";
        return r;
    }
  }
  if (e != 1) {
    r.error = e == 0 ? "the embedding (E) must be given, as the first layer" : "the embedding (E) is given more than once";
    return r;
  }
  if (l != 1) {
    r.error = l == 0 ? "the loss (L) must be given, as the last layer" : "the loss (L) is given more than once";
    return r;
  }
  if (r.chunks.back().loss != 1) {
    r.error = "the loss (L) must be in the last chunk (after the last '|')";
    return r;
  }
  return r;
}

}  // namespace gpuplan::wl
