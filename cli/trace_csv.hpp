#pragma once
// Request traces in public CSV formats for `gpuplan simulate --trace`:
//  - Azure LLM inference trace 2023 (github.com/Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md):
//    TIMESTAMP ("2023-11-16 18:15:46.6805900"), ContextTokens, GeneratedTokens.
//  - BurstGPT (github.com/HPMLL/BurstGPT, README "Data"): Timestamp (seconds from the trace start), Model,
//    Request tokens, Response tokens, Total tokens, Log Type.
// Columns are found by their header names; other columns are ignored. Every bad row is a diagnostic naming the
// file, the line, the column, the value as written and the rule.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/model/simulate.hpp"

namespace gpuplan::cli {

struct ParsedTrace {
  std::vector<model::SimRequest> requests;  ///< sorted by arrival, the first at 0 s
  std::string format;                       ///< "azure-2023" or "burstgpt"
  std::int64_t skipped_zero_output = 0;     ///< rows with no generated token (BurstGPT's failed requests)
};

/// Parses the text of `file`; nullopt after an error (all bad rows reported, up to 20).
std::optional<ParsedTrace> parse_trace_csv(const std::string& text, const std::string& file, Diagnostics& diags);

}  // namespace gpuplan::cli
