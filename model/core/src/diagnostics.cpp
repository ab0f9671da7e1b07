#include "gpuplan/core/diagnostics.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

#include <fmt/format.h>

namespace gpuplan {

std::string Diagnostic::to_string() const {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) {
      out += fmt::format(":{}", line);
      if (column > 0) out += fmt::format(":{}", column);
    }
    out += ": ";
  }
  if (!pointer.empty()) out += pointer + ": ";
  switch (severity) {
    case Severity::error: out += "error: "; break;
    case Severity::warning: out += "warning: "; break;
    case Severity::note: out += "note: "; break;
  }
  out += message;
  return out;
}

void Diagnostics::error(std::string file, std::string pointer, std::string message) {
  items_.push_back({Severity::error, std::move(file), std::move(pointer), 0, 0, std::move(message)});
}
void Diagnostics::warning(std::string file, std::string pointer, std::string message) {
  items_.push_back({Severity::warning, std::move(file), std::move(pointer), 0, 0, std::move(message)});
}
void Diagnostics::note(std::string file, std::string pointer, std::string message) {
  items_.push_back({Severity::note, std::move(file), std::move(pointer), 0, 0, std::move(message)});
}
void Diagnostics::append(const Diagnostics& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}
bool Diagnostics::has_errors() const { return error_count() > 0; }
std::size_t Diagnostics::error_count() const {
  return static_cast<std::size_t>(
      std::count_if(items_.begin(), items_.end(), [](const Diagnostic& d) { return d.severity == Severity::error; }));
}
std::string Diagnostics::to_string() const {
  std::string out;
  for (const auto& d : items_) {
    out += d.to_string();
    out += '\n';
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = static_cast<std::size_t>(-1);
  auto lower = [](std::string_view s) {
    std::string o(s);
    for (char& ch : o) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return o;
  };
  const std::string lw = lower(word);
  for (const auto& c : candidates) {
    // Case differences cost nothing: "Nvidia" is a typo of "NVIDIA".
    const std::size_t d = edit_distance(lw, lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A typo changes at most about a third of a word; anything further away is a different word.
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  if (best.empty() || best_d > limit) {
    // Also accept a candidate that starts with or contains the word ("h100" for "h100-sxm5-80gb").
    for (const auto& c : candidates)
      if (word.size() >= 3 && c.find(word) != std::string::npos) return c;
    return {};
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string m = closest_match(word, candidates);
  return m.empty() ? std::string{} : fmt::format(" (did you mean '{}'?)", m);
}

std::string json_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

}  // namespace gpuplan
