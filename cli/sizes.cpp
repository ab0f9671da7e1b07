#include "sizes.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace gpuplan::cli {

namespace {
constexpr double kMaxSize = 1125899906842624.0;  // 2^50 B: beyond any GPU's memory
constexpr std::size_t kMaxSizes = 10000;
constexpr const char* kRule =
    "a size is a whole number of bytes from 1 B to 2^50 B: 1048576, 1e9, 64K, 1M, 4G (nccl-tests: powers of 1024), "
    "1KiB, 4GiB, or 1KB, 1GB (powers of 1000)";
}  // namespace

std::optional<double> parse_size(const std::string& text, const std::string& where, Diagnostics& diags) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
                             text[i] == 'E' || ((text[i] == '+' || text[i] == '-') && i > 0 &&
                                                (text[i - 1] == 'e' || text[i - 1] == 'E'))))
    ++i;
  // "1e" followed by nothing numeric: the 'e' belongs to no exponent (there is no 'E' unit, so it is an error anyway).
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + i, v);
  std::string unit;
  for (const char* p = end; p != text.data() + text.size(); ++p) unit += char(std::tolower(static_cast<unsigned char>(*p)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1048576.0;
  else if (unit == "g" || unit == "gib") scale = 1073741824.0;
  else if (unit == "t" || unit == "tib") scale = 1099511627776.0;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  const double bytes = v * scale;
  if (text.empty() || ec != std::errc() || end == text.data() || scale == 0 || !std::isfinite(bytes) || bytes < 1 ||
      bytes > kMaxSize || bytes != std::floor(bytes)) {
    diags.error("", where, fmt::format("'{}' is not a size: {}", text, kRule));
    return std::nullopt;
  }
  return bytes;
}

bool sizes_from_spec(const std::string& spec, double factor, const std::string& step, const std::string& where,
                     std::vector<double>& sizes, Diagnostics& diags) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) {
    std::size_t at = 0;
    while (true) {
      const auto comma = spec.find(',', at);
      auto s = parse_size(spec.substr(at, comma == std::string::npos ? std::string::npos : comma - at), where, diags);
      if (!s) return false;
      sizes.push_back(*s);
      if (sizes.size() > kMaxSizes) {
        diags.error("", where, fmt::format("more than {} sizes", kMaxSizes));
        return false;
      }
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (!step.empty()) {
      diags.error("", "--stepbytes", "a step needs a range MIN:MAX (or -b and -e)");
      return false;
    }
    return true;
  }
  if (spec.find(',') != std::string::npos || spec.find(':', colon + 1) != std::string::npos) {
    diags.error("", where, fmt::format("'{}' is not a range MIN:MAX (one colon, no list)", spec));
    return false;
  }
  auto lo = parse_size(spec.substr(0, colon), where, diags);
  auto hi = parse_size(spec.substr(colon + 1), where, diags);
  if (!lo || !hi) return false;
  if (*hi < *lo) {
    diags.error("", where, fmt::format("'{}': the maximum {} B is below the minimum {} B", spec, *hi, *lo));
    return false;
  }
  std::optional<double> add;
  if (!step.empty()) {
    add = parse_size(step, "--stepbytes", diags);
    if (!add) return false;
  }
  for (double s = *lo; s <= *hi; s = add ? s + *add : std::floor(s * factor)) {
    sizes.push_back(s);
    if (sizes.size() > kMaxSizes) {
      diags.error("", where,
                  fmt::format("'{}' gives more than {} sizes: raise the factor (-f) or the step (-i)", spec, kMaxSizes));
      return false;
    }
    if (!add && std::floor(s * factor) <= s) break;  // a factor too close to 1 for this size: the loop would stall
  }
  return true;
}

}  // namespace gpuplan::cli
