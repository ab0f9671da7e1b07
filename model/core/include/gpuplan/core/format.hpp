#pragma once
// Human-readable, auto-scaled formatting of quantities ("80 GB", "74.5 GiB", "3.35 TB/s", "989 TFLOP/s", "4.2 ms").
// Pure string formatting: no IO.
#include <string>

#include "gpuplan/core/units.hpp"

namespace gpuplan::units {

enum class BytePrefix { decimal, binary };

/// Formats with `digits` significant digits (3 by default) and the largest prefix that keeps the mantissa >= 1.
std::string format(Bytes v, BytePrefix prefix = BytePrefix::decimal, int digits = 3);
std::string format(Seconds v, int digits = 3);
std::string format(Flops v, int digits = 3);
std::string format(FlopRate v, int digits = 3);
std::string format(Bandwidth v, int digits = 3);
std::string format(Intensity v, int digits = 3);
std::string format(Usd v, int digits = 3);
std::string format(UsdPerSecond v, int digits = 3);  ///< as $/h
std::string format(Watts v, int digits = 3);
std::string format(Joules v, int digits = 3);        ///< as kWh/MWh above 1 kWh
std::string format(Ratio v, int digits = 3);         ///< as a percentage

/// A plain number with `digits` significant digits, no trailing zeros ("989.4", "0.0125", "1.2e+21").
std::string format_number(double v, int digits = 4);
/// A count with thousands separators ("70,553,706,496").
std::string format_count(double v);

}  // namespace gpuplan::units
