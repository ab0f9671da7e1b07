#pragma once
// Strongly typed physical quantities for gpuplan.
//
// A Quantity carries its dimension as integer exponents of five base units: bytes, seconds, FLOP, US dollars and
// joules. Adding quantities of different dimension does not compile; multiplying and dividing yields the right
// dimension. All values are stored in base SI-style units (B, s, FLOP, USD, J) as double; decimal prefixes are 10^3k,
// binary ones 2^10k, so 80_GB and 80_GiB are different numbers and cannot be confused in formatting either.
#include <cmath>
#include <compare>
#include <type_traits>

namespace gpuplan::units {

template <int B, int S, int F, int U, int J>
class Quantity {
 public:
  static constexpr int bytes_exp = B, seconds_exp = S, flop_exp = F, usd_exp = U, joule_exp = J;

  constexpr Quantity() = default;
  constexpr explicit Quantity(double base_value) : v_(base_value) {}

  /// The value in base units (B, s, FLOP, USD, J and their products).
  [[nodiscard]] constexpr double raw() const { return v_; }

  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity& operator*=(double k) { v_ *= k; return *this; }
  constexpr Quantity& operator/=(double k) { v_ /= k; return *this; }
  friend constexpr Quantity operator+(Quantity a, Quantity b) { return Quantity(a.v_ + b.v_); }
  friend constexpr Quantity operator-(Quantity a, Quantity b) { return Quantity(a.v_ - b.v_); }
  friend constexpr Quantity operator-(Quantity a) { return Quantity(-a.v_); }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.v_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.v_ / k); }
  friend constexpr auto operator<=>(Quantity a, Quantity b) = default;
  friend constexpr bool operator==(Quantity a, Quantity b) = default;

 private:
  double v_ = 0.0;
};

template <int B1, int S1, int F1, int U1, int J1, int B2, int S2, int F2, int U2, int J2>
constexpr auto operator*(Quantity<B1, S1, F1, U1, J1> a, Quantity<B2, S2, F2, U2, J2> b) {
  return Quantity<B1 + B2, S1 + S2, F1 + F2, U1 + U2, J1 + J2>(a.raw() * b.raw());
}
template <int B1, int S1, int F1, int U1, int J1, int B2, int S2, int F2, int U2, int J2>
constexpr auto operator/(Quantity<B1, S1, F1, U1, J1> a, Quantity<B2, S2, F2, U2, J2> b) {
  return Quantity<B1 - B2, S1 - S2, F1 - F2, U1 - U2, J1 - J2>(a.raw() / b.raw());
}
template <int B, int S, int F, int U, int J>
constexpr auto operator/(double k, Quantity<B, S, F, U, J> a) {
  return Quantity<-B, -S, -F, -U, -J>(k / a.raw());
}

using Ratio = Quantity<0, 0, 0, 0, 0>;            ///< dimensionless (efficiency, fraction, speedup)
using Bytes = Quantity<1, 0, 0, 0, 0>;
using Seconds = Quantity<0, 1, 0, 0, 0>;
using Flops = Quantity<0, 0, 1, 0, 0>;            ///< a count of floating-point operations
using FlopRate = Quantity<0, -1, 1, 0, 0>;        ///< FLOP/s
using Bandwidth = Quantity<1, -1, 0, 0, 0>;       ///< B/s
using Intensity = Quantity<-1, 0, 1, 0, 0>;       ///< FLOP/B (arithmetic intensity, roofline ridge point)
using Usd = Quantity<0, 0, 0, 1, 0>;
using UsdPerSecond = Quantity<0, -1, 0, 1, 0>;
using Joules = Quantity<0, 0, 0, 0, 1>;
using Watts = Quantity<0, -1, 0, 0, 1>;
using Hertz = Quantity<0, -1, 0, 0, 0>;

template <class T>
struct is_quantity : std::false_type {};
template <int B, int S, int F, int U, int J>
struct is_quantity<Quantity<B, S, F, U, J>> : std::true_type {};
template <class T>
inline constexpr bool is_quantity_v = is_quantity<T>::value;

/// Whether `a + b` is well-formed; used by the static checks in the tests.
template <class A, class Bq>
concept Addable = requires(A a, Bq b) { a + b; };

// ---- named constructors (for values read from data files with a unit suffix) ----
constexpr double kKilo = 1e3, kMega = 1e6, kGiga = 1e9, kTera = 1e12, kPeta = 1e15;
constexpr double kKibi = 1024.0, kMebi = kKibi * 1024.0, kGibi = kMebi * 1024.0, kTebi = kGibi * 1024.0;

constexpr Bytes bytes(double v) { return Bytes(v); }
constexpr Bytes kilobytes(double v) { return Bytes(v * kKilo); }
constexpr Bytes megabytes(double v) { return Bytes(v * kMega); }
constexpr Bytes gigabytes(double v) { return Bytes(v * kGiga); }
constexpr Bytes terabytes(double v) { return Bytes(v * kTera); }
constexpr Bytes kibibytes(double v) { return Bytes(v * kKibi); }
constexpr Bytes mebibytes(double v) { return Bytes(v * kMebi); }
constexpr Bytes gibibytes(double v) { return Bytes(v * kGibi); }
constexpr Bytes tebibytes(double v) { return Bytes(v * kTebi); }
constexpr Seconds seconds(double v) { return Seconds(v); }
constexpr Seconds milliseconds(double v) { return Seconds(v * 1e-3); }
constexpr Seconds microseconds(double v) { return Seconds(v * 1e-6); }
constexpr Seconds hours(double v) { return Seconds(v * 3600.0); }
constexpr Seconds days(double v) { return Seconds(v * 86400.0); }
constexpr Flops flop(double v) { return Flops(v); }
constexpr FlopRate tflops(double v) { return FlopRate(v * kTera); }
constexpr FlopRate pflops(double v) { return FlopRate(v * kPeta); }
constexpr Bandwidth gb_per_s(double v) { return Bandwidth(v * kGiga); }
constexpr Bandwidth tb_per_s(double v) { return Bandwidth(v * kTera); }
/// Network line rates are quoted in gigabits per second.
constexpr Bandwidth gbit_per_s(double v) { return Bandwidth(v * kGiga / 8.0); }
constexpr Watts watts(double v) { return Watts(v); }
constexpr Usd usd(double v) { return Usd(v); }
constexpr UsdPerSecond usd_per_hour(double v) { return UsdPerSecond(v / 3600.0); }
constexpr Hertz megahertz(double v) { return Hertz(v * kMega); }

// value-out helpers in the unit a name states
constexpr double to_GB(Bytes b) { return b.raw() / kGiga; }
constexpr double to_GiB(Bytes b) { return b.raw() / kGibi; }
constexpr double to_TFLOPs(FlopRate r) { return r.raw() / kTera; }
constexpr double to_TBps(Bandwidth r) { return r.raw() / kTera; }
constexpr double to_GBps(Bandwidth r) { return r.raw() / kGiga; }
constexpr double to_hours(Seconds s) { return s.raw() / 3600.0; }
constexpr double to_usd_per_hour(UsdPerSecond r) { return r.raw() * 3600.0; }

namespace literals {
constexpr auto operator""_B(long double v) { return bytes(static_cast<double>(v)); }
constexpr auto operator""_B(unsigned long long v) { return bytes(static_cast<double>(v)); }
constexpr auto operator""_KB(long double v) { return kilobytes(static_cast<double>(v)); }
constexpr auto operator""_KB(unsigned long long v) { return kilobytes(static_cast<double>(v)); }
constexpr auto operator""_MB(long double v) { return megabytes(static_cast<double>(v)); }
constexpr auto operator""_MB(unsigned long long v) { return megabytes(static_cast<double>(v)); }
constexpr auto operator""_GB(long double v) { return gigabytes(static_cast<double>(v)); }
constexpr auto operator""_GB(unsigned long long v) { return gigabytes(static_cast<double>(v)); }
constexpr auto operator""_TB(long double v) { return terabytes(static_cast<double>(v)); }
constexpr auto operator""_TB(unsigned long long v) { return terabytes(static_cast<double>(v)); }
constexpr auto operator""_KiB(long double v) { return kibibytes(static_cast<double>(v)); }
constexpr auto operator""_KiB(unsigned long long v) { return kibibytes(static_cast<double>(v)); }
constexpr auto operator""_MiB(long double v) { return mebibytes(static_cast<double>(v)); }
constexpr auto operator""_MiB(unsigned long long v) { return mebibytes(static_cast<double>(v)); }
constexpr auto operator""_GiB(long double v) { return gibibytes(static_cast<double>(v)); }
constexpr auto operator""_GiB(unsigned long long v) { return gibibytes(static_cast<double>(v)); }
constexpr auto operator""_TiB(long double v) { return tebibytes(static_cast<double>(v)); }
constexpr auto operator""_TiB(unsigned long long v) { return tebibytes(static_cast<double>(v)); }
constexpr auto operator""_s(long double v) { return seconds(static_cast<double>(v)); }
constexpr auto operator""_s(unsigned long long v) { return seconds(static_cast<double>(v)); }
constexpr auto operator""_ms(long double v) { return milliseconds(static_cast<double>(v)); }
constexpr auto operator""_ms(unsigned long long v) { return milliseconds(static_cast<double>(v)); }
constexpr auto operator""_us(long double v) { return microseconds(static_cast<double>(v)); }
constexpr auto operator""_us(unsigned long long v) { return microseconds(static_cast<double>(v)); }
constexpr auto operator""_h(long double v) { return hours(static_cast<double>(v)); }
constexpr auto operator""_h(unsigned long long v) { return hours(static_cast<double>(v)); }
constexpr auto operator""_FLOP(long double v) { return flop(static_cast<double>(v)); }
constexpr auto operator""_FLOP(unsigned long long v) { return flop(static_cast<double>(v)); }
constexpr auto operator""_TFLOPs(long double v) { return tflops(static_cast<double>(v)); }
constexpr auto operator""_TFLOPs(unsigned long long v) { return tflops(static_cast<double>(v)); }
constexpr auto operator""_PFLOPs(long double v) { return pflops(static_cast<double>(v)); }
constexpr auto operator""_PFLOPs(unsigned long long v) { return pflops(static_cast<double>(v)); }
constexpr auto operator""_GBps(long double v) { return gb_per_s(static_cast<double>(v)); }
constexpr auto operator""_GBps(unsigned long long v) { return gb_per_s(static_cast<double>(v)); }
constexpr auto operator""_TBps(long double v) { return tb_per_s(static_cast<double>(v)); }
constexpr auto operator""_TBps(unsigned long long v) { return tb_per_s(static_cast<double>(v)); }
constexpr auto operator""_Gbps(long double v) { return gbit_per_s(static_cast<double>(v)); }
constexpr auto operator""_Gbps(unsigned long long v) { return gbit_per_s(static_cast<double>(v)); }
constexpr auto operator""_W(long double v) { return watts(static_cast<double>(v)); }
constexpr auto operator""_W(unsigned long long v) { return watts(static_cast<double>(v)); }
constexpr auto operator""_usd(long double v) { return usd(static_cast<double>(v)); }
constexpr auto operator""_usd(unsigned long long v) { return usd(static_cast<double>(v)); }
}  // namespace literals

[[nodiscard]] inline bool is_finite(double v) { return std::isfinite(v); }
template <int B, int S, int F, int U, int J>
[[nodiscard]] bool is_finite(Quantity<B, S, F, U, J> q) {
  return std::isfinite(q.raw());
}

}  // namespace gpuplan::units
