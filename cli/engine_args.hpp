#pragma once
// vLLM's and SGLang's own argument names for `gpuplan serve` and `gpuplan simulate` (issue #29): a pasted
// `vllm serve ...` or `python -m sglang.launch_server ...` command line (--vllm-args / --sglang-args), or their
// spellings typed among gpuplan's flags, read into serving scenario keys with the engine's semantics. The design is
// --megatron-args' (megatron_args.hpp), in three pure steps:
//   read_engine_command   shell text -> the server command's words (read_shell_commands: quotes, continuations,
//                         variables), after `vllm serve` / `python -m vllm.entrypoints.openai.api_server` /
//                         `docker run ... vllm/vllm-openai` / `python -m sglang.launch_server`, or a bare flag list
//   parse_engine_words    words -> flags with their values, every name checked against the engine's parser table
//                         (vllm_arg_names.inc, sglang_arg_names.inc: the source file and commit they come from)
//   map_engine            flags -> scenario keys (mapped), flags that do not change performance (ignored, listed in
//                         a note), flags gpuplan already assumes, and refusals (exit 2, "not modelled yet (#29)")
// then engine_overlay applies the keys to the scenario object, with the checks that need the model or the other
// keys (vLLM's expert parallelism spans TP × DP; --max-model-len against the request lengths; the model id).
// docs/cli.md "vLLM and SGLang arguments" has the mapping table.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"
#include "shell_words.hpp"

namespace gpuplan::cli {

namespace engine_detail {
/// What every refusal of a performance-changing engine flag that gpuplan does not price says, with the issue tracking
/// it (engine_map.cpp, engine_overlay.cpp).
inline constexpr const char* kNotModelled = "not modelled yet (#29)";
}  // namespace engine_detail

enum class ServingEngine { vllm, sglang };

/// "vLLM" / "SGLang".
const char* engine_label(ServingEngine e);

/// One entry of an engine's argument parser: the flag, how many values it takes (0 a switch, 1 one value, 2 one or
/// more, 3 an optional value, 4 a switch with a --no- form), the argument group that defines it, and for an alias
/// the primary name (nullptr for a primary name).
struct EngineFlagName {
  const char* name;
  int arity;
  const char* group;
  const char* canonical;
};

/// Every flag of the engine's server parser.
const std::vector<EngineFlagName>& engine_flag_names(ServingEngine e);
/// Where the names come from ("vllm-project/vllm vllm/engine/arg_utils.py @ 99d7eb5d6a51, ...").
std::string_view engine_names_source(ServingEngine e);

/// How a name as typed resolves in the engine's parser.
struct EngineFlagMatch {
  const EngineFlagName* entry = nullptr;  ///< the entry of the primary name; nullptr: unknown
  bool negated = false;                   ///< vLLM's --no-NAME of a boolean flag
  std::string error;                      ///< an ambiguous abbreviation (SGLang): argparse's message
};
/// vLLM: exact names, '_' read as '-' (vLLM's FlexibleArgumentParser), --no-NAME for boolean fields. SGLang: exact
/// names or a unique prefix of one (argparse's allow_abbrev: "--tp" is "--tp-size").
EngineFlagMatch find_engine_flag(ServingEngine e, std::string_view name);

/// One flag as given: its primary name, the spelling used, and its values.
struct EngineFlag {
  std::string name;   ///< primary name ("--tensor-parallel-size")
  std::string given;  ///< as typed ("-tp")
  bool negated = false;
  std::vector<ShellWord> values;
  int line = 0;
  /// "-tp 8", "--no-enable-prefix-caching": the flag as the user wrote it, for messages.
  [[nodiscard]] std::string text() const;
};

struct EngineArgs {
  ServingEngine engine = ServingEngine::vllm;
  std::vector<EngineFlag> flags;         ///< in the order given; a repeated flag: the last counts (argparse)
  std::optional<ShellWord> model_tag;    ///< `vllm serve MODEL`'s positional model
  /// A whole command line (--vllm-args / --sglang-args): what it leaves out takes the engine's default (TP 1, PP 1,
  /// the engine's memory semantics). Spellings typed among gpuplan's flags set only what they name.
  bool whole_command = false;
  std::string source;  ///< "--vllm-args" or the file; "" for gpuplan's command line
};

/// Reads a command line or a script holding one server command (`source` names it in diagnostics). Errors: no or
/// several server commands, an unterminated quote.
std::optional<std::vector<ShellWord>> read_engine_command(ServingEngine e, std::string_view text,
                                                          const std::string& source, Diagnostics& diags);

/// Words -> flags. `--name=value` and `--name value` both work; an unknown name is an error with the closest name
/// of the engine's parser (and of `extra_names`, gpuplan's own flags) as a hint.
std::optional<EngineArgs> parse_engine_words(ServingEngine e, const std::vector<ShellWord>& words, bool whole_command,
                                             const std::string& source, const std::vector<std::string>& extra_names,
                                             Diagnostics& diags);

struct EngineMapping {
  ServingEngine engine = ServingEngine::vllm;
  nlohmann::json keys = nlohmann::json::object();  ///< serving scenario keys (docs/scenario.md) the flags set
  std::map<std::string, std::string> origin;      ///< key -> the flag as given ("-tp 8")
  /// Keys set from the engine's defaults (whole command line): a gpuplan flag given for one of them wins, with a note.
  std::map<std::string, std::string> defaulted;
  // Checks that need the other keys or the model (engine_overlay):
  std::optional<long long> max_len;  ///< --max-model-len / --context-length
  std::string max_len_flag;
  std::string expert_parallel_flag;  ///< vLLM --enable-expert-parallel (EP = TP × DP)
  std::string prefix_cache_off_flag;  ///< --no-enable-prefix-caching / --disable-radix-cache
  std::string spec_flag;              ///< --speculative-config
  bool spec_needs_draft_ms = false;   ///< a draft without a model (ngram, eagle, mtp, ...): its cost is --draft-ms
  std::optional<std::string> model_from;  ///< the flag that named the model
  std::vector<std::string> ignored;  ///< flags that do not change what gpuplan models ("--port 8000")
  std::vector<std::string> assumed;  ///< flags that state what gpuplan already assumes ("--enable-chunked-prefill")
  std::vector<std::string> notes;
};

/// Flags -> scenario keys and the checks left for engine_overlay. Every refusal is an error naming the flag as
/// given, its value and "not modelled yet (#29)"; nullopt after an error.
std::optional<EngineMapping> map_engine(const EngineArgs& args, Diagnostics& diags);

/// The one step that reads: `--vllm-args TEXT` / `--sglang-args TEXT` (a whole command line; `@FILE` reads it from a
/// file, `-` from stdin) and `typed` (vLLM or SGLang spellings among gpuplan's flags, CLI11's extras) into the
/// scenario object `j` / `origin`, refusing a key that a gpuplan flag or the scenario file sets to another value.
/// `own_flags` are gpuplan's flag names (for "did you mean"). False after an error.
bool engine_overlay(const std::string& data_dir, const std::optional<std::string>& vllm_args,
                    const std::optional<std::string>& sglang_args, const std::vector<std::string>& typed,
                    const std::vector<std::string>& own_flags, nlohmann::json& j,
                    std::map<std::string, std::string>& origin, Diagnostics& diags);

}  // namespace gpuplan::cli
