// approx(v): doctest's Approx made relative. doctest compares |a − v| < ε·(scale + max(|a|, |v|)) with a default scale
// of 1, so for quantities well below 1 (seconds, fractions, ratios of small numbers) its ε is an absolute tolerance:
// doctest::Approx(3.17e-6).epsilon(0.05) accepts anything within ±0.05, i.e. any value at all. approx(v) sets the
// scale to 0, so ε is relative to the larger of the two values at every magnitude. An expected value of exactly 0 keeps
// doctest's scale of 1 (a relative tolerance around 0 matches nothing but 0 itself): there ε is an absolute bound.
// Every test uses this; tests/architecture refuses doctest::Approx outside this file.
#pragma once

#include <doctest/doctest.h>

namespace gptest {

inline doctest::Approx approx(double v) {
  doctest::Approx a(v);
  if (v != 0.0) a.scale(0.0);
  return a;
}

}  // namespace gptest
