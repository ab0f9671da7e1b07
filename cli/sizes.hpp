#pragma once
// Message sizes as users type them for collectives: nccl-tests' -b/-e spellings (8, 64K, 1M, 4G: K, M, G, T are
// powers of 1024, as its parsesize), binary units (1KiB, 4GiB), decimal units (1KB = 1000 B, 1GB), plain numbers
// (1e9), and sweeps (MIN:MAX by a factor or a step, or a list A,B,C).
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::cli {

/// One size in bytes: a whole number from 1 B to 2^50 B. Diagnostic at `where` naming the value and the rule.
std::optional<double> parse_size(const std::string& text, const std::string& where, Diagnostics& diags);

/// "SIZE", "A,B,C" (as given, in order) or "MIN:MAX" (MIN, MIN×factor, ... while ≤ MAX; with `step` non-empty,
/// MIN, MIN+step, ...), as nccl-tests' size loop. At most 10000 sizes. False after a diagnostic at `where`.
bool sizes_from_spec(const std::string& spec, double factor, const std::string& step, const std::string& where,
                     std::vector<double>& sizes, Diagnostics& diags);

}  // namespace gpuplan::cli
