#include "gpuplan/core/format.hpp"

#include <array>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace gpuplan::units {
namespace {

struct Prefix {
  double scale;
  std::string_view symbol;
};

// Significant-digit formatting without trailing zeros: 80 -> "80", 74.505 -> "74.5", 0.333 -> "0.333".
std::string sig(double v, int digits) {
  if (v == 0.0) return "0";
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  const double mag = std::floor(std::log10(std::fabs(v)));
  const int decimals = std::max(0, digits - 1 - static_cast<int>(mag));
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

template <std::size_t N>
std::string scaled(double v, const std::array<Prefix, N>& prefixes, std::string_view unit, int digits) {
  const double a = std::fabs(v);
  const Prefix* chosen = &prefixes[0];
  for (const auto& p : prefixes)
    if (a >= p.scale) chosen = &p;
  if (!std::isfinite(v)) chosen = &prefixes[0];
  return fmt::format("{} {}{}", sig(v / chosen->scale, digits), chosen->symbol, unit);
}

constexpr std::array<Prefix, 7> kDecimal{{{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}, {1e15, "P"},
                                          {1e18, "E"}}};
constexpr std::array<Prefix, 8> kDecimalZ{{{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}, {1e15, "P"},
                                           {1e18, "E"}, {1e21, "Z"}}};
constexpr std::array<Prefix, 6> kBinary{{{1, ""}, {kKibi, "Ki"}, {kMebi, "Mi"}, {kGibi, "Gi"}, {kTebi, "Ti"},
                                         {kTebi * 1024.0, "Pi"}}};

}  // namespace

std::string format_number(double v, int digits) {
  if (v != 0.0 && std::isfinite(v) && (std::fabs(v) >= 1e7 || std::fabs(v) < 1e-4))
    return fmt::format("{:.{}e}", v, std::max(0, digits - 1));
  return sig(v, digits);
}

std::string format_count(double v) {
  if (!std::isfinite(v)) return sig(v, 3);
  const auto n = static_cast<long long>(std::llround(v));
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return n < 0 ? "-" + out : out;
}

std::string format(Bytes v, BytePrefix prefix, int digits) {
  if (prefix == BytePrefix::binary) return scaled(v.raw(), kBinary, "B", digits);
  return scaled(v.raw(), kDecimal, "B", digits);
}

std::string format(Seconds v, int digits) {
  const double s = v.raw();
  const double a = std::fabs(s);
  if (!std::isfinite(s)) return sig(s, digits) + " s";
  if (a == 0.0) return "0 s";
  if (a < 1e-6) return sig(s * 1e9, digits) + " ns";
  if (a < 1e-3) return sig(s * 1e6, digits) + " µs";
  if (a < 1.0) return sig(s * 1e3, digits) + " ms";
  if (a < 120.0) return sig(s, digits) + " s";
  if (a < 7200.0) return sig(s / 60.0, digits) + " min";
  if (a < 3.0 * 86400.0) return sig(s / 3600.0, digits) + " h";
  return sig(s / 86400.0, digits) + " days";
}

std::string format(Flops v, int digits) { return scaled(v.raw(), kDecimalZ, "FLOP", digits); }
std::string format(FlopRate v, int digits) { return scaled(v.raw(), kDecimalZ, "FLOP/s", digits); }
std::string format(Bandwidth v, int digits) { return scaled(v.raw(), kDecimal, "B/s", digits); }
std::string format(Intensity v, int digits) { return sig(v.raw(), digits) + " FLOP/B"; }
std::string format(Usd v, int digits) {
  const double a = std::fabs(v.raw());
  // fmt rather than "$" + std::string: GCC 12's -O3 inlining of operator+ raises a false -Wrestrict (GCC PR 105329).
  if (a >= 1e6) return fmt::format("${}M", sig(v.raw() / 1e6, digits));
  if (a >= 1e4) return fmt::format("${}k", sig(v.raw() / 1e3, digits));
  return fmt::format("${}", sig(v.raw(), digits));
}
std::string format(UsdPerSecond v, int digits) { return fmt::format("${}/h", sig(v.raw() * 3600.0, digits)); }
std::string format(Watts v, int digits) { return scaled(v.raw(), kDecimal, "W", digits); }
std::string format(Joules v, int digits) {
  const double kwh = v.raw() / 3.6e6;
  if (std::fabs(kwh) >= 1e3) return sig(kwh / 1e3, digits) + " MWh";
  if (std::fabs(kwh) >= 1.0) return sig(kwh, digits) + " kWh";
  return scaled(v.raw(), kDecimal, "J", digits);
}
std::string format(Ratio v, int digits) { return sig(v.raw() * 100.0, digits) + "%"; }

}  // namespace gpuplan::units
