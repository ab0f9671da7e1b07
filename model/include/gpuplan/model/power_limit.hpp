#pragma once
/// The sustained-clock law: the clock a power-capped compute-bound kernel (a long GEMM) sustains on one part relative
/// to another, from their board power limits and SM counts (issue #24). The built-in efficiency rows that carry a
/// measured part's GEMM ceilings to another part (data/hardware/efficiency/measured.json: B200, B300 and GB300 from
/// GB200's sustained run; Grand Teton's 500 W H100 from the 700 W H100) were derived with it, and
/// tests/model/ops/test_power_limit.cpp recomputes them through this function. docs/blackwell.md has the evidence.

namespace gpuplan::model {

/// One part's operating point: the board power limit it runs at, its rated board power (its idle power is
/// kIdlePowerFraction of it) and its SM count.
struct PowerPoint {
  double power_limit_W = 0.0;
  double tdp_W = 0.0;
  int compute_units = 0;
};

/// Idle board power / rated board power: our H100 SXM at rest in P0 (1980 MHz, 46 °C) drew 88.256 W of its 700 W
/// (data/calibration/h100-sxm5-80gb/samples-sustained-bf16-fp8-2026-11-22.json, conditions.start). Carried to every
/// part as an assumption.
inline constexpr double kIdlePowerFraction = 88.256 / 700.0;

/// f/f_ref for a long GEMM under each part's power cap. Under the cap the board draws its limit: P = P_idle + N·k·f³
/// (CMOS dynamic power α·C·V²·f with the voltage rising in step with the clock over the DVFS range, so ∝ f³; k the
/// same for the same tensor cores), hence
///   f/f_ref = [ ((P − P_idle)/N) / ((P_ref − P_idle,ref)/N_ref) ]^(1/3),   P_idle = kIdlePowerFraction · TDP.
/// 1 when either point lacks a power budget above idle or an SM count. The exponent and the idle share are stated
/// assumptions; scripts/measure/power_clock_sms.py tests them on one GPU under its own cap.
double sustained_clock_ratio(const PowerPoint& p, const PowerPoint& ref);

}  // namespace gpuplan::model
