#pragma once
/// The sustained-clock law: the clock a power-capped compute-bound kernel (a long GEMM) sustains on one part relative
/// to another, from their board power limits and SM counts (issue #24). The built-in efficiency rows that carry a
/// measured part's GEMM ceilings to another part (data/hardware/efficiency/measured.json: B200, B300 and GB300 from
/// GB200's sustained run; Grand Teton's 500 W H100 from the 700 W H100) were derived with it, and
/// tests/model/ops/test_power_limit.cpp recomputes them through this function. docs/blackwell.md has the evidence.

namespace gpuplan::model {

/// One part's operating point: the board power limit it runs at, its rated board power (its power beside the busy SMs
/// is kIdlePowerFraction of it) and its SM count.
struct PowerPoint {
  double power_limit_W = 0.0;
  double tdp_W = 0.0;
  int compute_units = 0;
};

/// Board power that does not scale with the busy SMs / rated board power: our H200 held a bf16 GEMM on N of its 132
/// SMs under its 700 W cap (data/validation/measured/h200-sxm-141gb/power_clock_sms.json): uncapped (N ≤ 48, 1980
/// MHz) it drew 165.92 W + 9.89 W per busy SM; with that intercept and the cube law the capped clocks at N = 64…132 are
/// predicted within −1.9…+2.1% (least squares: exponent 2.95). Carried to every part as an assumption.
inline constexpr double kIdlePowerFraction = 165.92 / 700.0;

/// f/f_ref for a long GEMM under each part's power cap. Under the cap the board draws its limit: P = P_idle + N·k·f³
/// (CMOS dynamic power α·C·V²·f with the voltage rising in step with the clock over the DVFS range, so ∝ f³; k the
/// same for the same tensor cores), hence
///   f/f_ref = [ ((P − P_idle)/N) / ((P_ref − P_idle,ref)/N_ref) ]^(1/3),   P_idle = kIdlePowerFraction · TDP.
/// 1 when either point lacks a power budget above idle or an SM count. Tested on one GH100 part under its own cap
/// (scripts/measure/power_clock_sms.py, the measurement above); on other parts and at other limits an assumption.
double sustained_clock_ratio(const PowerPoint& p, const PowerPoint& ref);

}  // namespace gpuplan::model
