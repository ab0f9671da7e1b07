#pragma once
// Megatron-LM's own argument names for `gpuplan train` (issue #22): a pasted command line or launch script, or
// Megatron spellings typed among gpuplan's flags, read into gpuplan's scenario keys. Three steps, each pure (text in,
// typed values and diagnostics out; no IO):
//   read_megatron_script   shell text -> words (continuations, comments, quotes, NAME=value and NAME=(...) arrays,
//                          $NAME / ${NAME} / ${NAME:-default} / ${NAME[@]}; launcher words skipped)
//   parse_megatron_words   words -> flags with their values, every name checked against Megatron-LM's parser
//   map_megatron           flags -> scenario keys (mapped), model-shape expectations (checked against -m MODEL),
//                          flags that do not change performance (ignored, listed in a note), and refusals (exit 2,
//                          "not modelled yet (#22)") for flags that would change performance but are not modelled
// then apply_megatron (model-dependent keys, shape checks, conflicts with gpuplan's own flags) and
// check_megatron_batch (Megatron's global-batch rule) once the model and the layout are known.
// The flag names and their arities come from megatron/training/arguments.py at the commit in
// megatron_arg_names.inc (scripts/megatron_arg_names.py); docs/cli.md "Megatron-LM arguments" has the mapping table.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"
#include "shell_words.hpp"

namespace gpuplan::cli {

namespace detail {
/// What every refusal of a performance-changing flag that gpuplan does not price says, with the issue tracking it.
inline constexpr const char* kNotModelled = "not modelled yet (#22)";
}  // namespace detail

/// One entry of Megatron-LM's parser: the flag, how many values it takes (0 a switch, 1 one value, 2 one or more,
/// 3 an optional value) and the arguments.py function or config dataclass that defines it.
struct MegatronFlagName {
  const char* name;
  int arity;
  const char* group;
};

/// Every flag of Megatron-LM's pretraining parser, sorted by name.
const std::vector<MegatronFlagName>& megatron_flag_names();
/// The Megatron-LM commit the names were read from ("d98e8a64ddf3 (2026-08-22)").
std::string_view megatron_commit();
/// Flags that Megatron launch scripts pass but the pinned parser lacks, each with a Megatron-LM commit that has it
/// (its group: "legacy: <repository> <commit> ..."), sorted by name.
const std::vector<MegatronFlagName>& megatron_legacy_flag_names();
/// The entry of `name` ("--seq-length") in the pinned parser's names, else in the legacy names, or nullptr.
const MegatronFlagName* find_megatron_flag(std::string_view name);

/// The training command of a script: the words after the Python program (or all of a bare flag list), and the
/// world size the launcher gives (torchrun --nproc-per-node × --nnodes) when both are plain numbers.
struct MegatronCommand {
  std::vector<ShellWord> words;
  std::optional<long long> launcher_gpus;
  std::string launcher_text;  ///< "torchrun --nproc_per_node 8 --nnodes 4"
  std::map<std::string, std::string> environment;  ///< what the script exports to the command (ShellCommand)
};

/// Reads a command line or a bash launch script (`source` names it in diagnostics: "--megatron-args FILE").
/// The training command is the line that runs a .py program (pretrain_gpt.py, through torchrun, python -m
/// torch.distributed.run, srun, ...) or, in a bare paste, the line that starts with "--". Errors: no or several
/// training commands, an unterminated quote or array, a variable set inside an if/for/while/case block and used by
/// the command (gpuplan does not evaluate shell conditions).
std::optional<MegatronCommand> read_megatron_script(std::string_view text, const std::string& source,
                                                    Diagnostics& diags);

/// One Megatron flag as given: its name and values ("--recompute-modules core_attn moe_act").
struct MegatronFlag {
  std::string name;
  std::vector<ShellWord> values;
  int line = 0;  ///< the script line of the flag (0: gpuplan's command line)
};

struct MegatronArgs {
  std::vector<MegatronFlag> flags;  ///< in the order given; a repeated flag: the last counts (argparse)
  /// A whole Megatron command line (--megatron-args): what it leaves out takes Megatron's default (no
  /// --sequence-parallel = off, no --bf16/--fp16 = fp32, ...). Spellings typed among gpuplan's flags set only what
  /// they name.
  bool whole_command = false;
  std::string source;  ///< "--megatron-args FILE" or "" (gpuplan's command line)
  std::optional<long long> launcher_gpus;
  std::string launcher_text;
  /// The environment a pasted script gives the command (exports and the command's NAME=value prefix): Transformer
  /// Engine reads some of its recipe from it (NVTE_NVFP4_DISABLE_*). Empty for flags typed on gpuplan's line.
  std::map<std::string, std::string> environment;
};

/// Words -> flags. `--name=value` and `--name value...` both work; a name not in Megatron-LM's parser is an error
/// with a hint (the closest Megatron or gpuplan flag), as is a switch given a value or a flag missing its value.
std::optional<MegatronArgs> parse_megatron_words(const std::vector<ShellWord>& words, bool whole_command,
                                                 const std::string& source, Diagnostics& diags);

/// What the Megatron flags say the model is; checked against -m MODEL (a mismatch is exit 2 naming both values).
struct MegatronShape {
  std::optional<std::int64_t> layers, hidden, ffn, heads, kv_heads, head_dim, experts, topk, moe_ffn, shared_ffn,
      vocab, max_position, q_lora_rank, kv_lora_rank, qk_head_dim, qk_pos_head_dim, v_head_dim;
  std::optional<bool> gated_mlp, tied_embeddings, rmsnorm, qk_norm, qkv_bias, linear_bias, mla;
  std::optional<wl::PositionKind> position;
  std::map<std::string, std::string> flag;  ///< field ("layers") -> the flag as given ("--num-layers 32")
};

struct MegatronMapping {
  nlohmann::json keys = nlohmann::json::object();  ///< scenario keys (docs/scenario.md) the flags set
  std::map<std::string, std::string> origin;      ///< key -> the flag as given ("--tensor-model-parallel-size 8")
  /// Keys set from Megatron's defaults (whole command line): a gpuplan flag given for one of them wins, with a note.
  std::map<std::string, std::string> defaulted;  ///< key -> why ("Megatron-LM's default without --bf16/--fp16")
  MegatronShape shape;
  // Values that need the model or the final layout:
  std::optional<long long> layers_per_virtual_stage;
  /// --num-distributed-optimizer-instances N > 1 (the hybrid shard group dp·cp / N, once the GPU count is known), the
  /// flag as typed and its line.
  std::optional<long long> optimizer_instances;
  std::string optimizer_instances_flag, optimizer_instances_source;
  int optimizer_instances_line = 0;
  bool global_batch_given = false;
  std::optional<long long> launcher_gpus;
  std::optional<long long> typed_gpus;  ///< gpuplan's --gpus N (megatron_overlay), which wins over the launcher
  std::string launcher_text;
  std::vector<std::string> ignored;  ///< flags that do not change what gpuplan models ("--lr", "--save")
  std::vector<std::string> assumed;  ///< flags that state what gpuplan already assumes ("--moe-grouped-gemm")
  std::vector<std::string> notes;
};

/// Flags -> scenario keys, shape expectations, ignored and assumed lists. Every refusal is an error naming the
/// flag, its value and "not modelled yet (#22)"; nullopt after an error.
std::optional<MegatronMapping> map_megatron(const MegatronArgs& args, Diagnostics& diags);

/// Completes the mapping with the model: checks the shape flags against `arch`, turns
/// --num-layers-per-virtual-pipeline-stage into virtual stages, checks the expert-TP condition, then
/// writes the keys into the scenario object `j` (and `origin`), refusing a key a gpuplan flag or the scenario file
/// sets to another value (`origin` names where). Notes list the ignored and assumed flags. False after an error.
bool apply_megatron(const MegatronMapping& m, const wl::TransformerArch& arch, nlohmann::json& j,
                    std::map<std::string, std::string>& origin, Diagnostics& diags);

/// Megatron-LM's rule for a given global batch (megatron/core/num_microbatches_calculator.py): the global batch in
/// sequences must be divisible by micro-batch × DP. False (with an error naming the three numbers) when it is not.
bool check_megatron_batch(const MegatronMapping& m, const wl::TrainingPlan& plan, Diagnostics& diags);

/// The one step that reads: `gpuplan train`'s Megatron input. `file` (--megatron-args FILE, "-" for stdin) is read
/// as a whole command line (Megatron's defaults apply), `typed` (Megatron flags among gpuplan's, in order) after it;
/// the model named by the scenario's "model" key is loaded from `data_dir` for the shape checks; then the keys go
/// into `j` / `origin` (apply_megatron). `typed_gpus`: gpuplan's --gpus N, applied to `j` after this call, which the
/// keys that depend on the GPU count read first. Nullopt after an error.
std::optional<MegatronMapping> megatron_overlay(const std::string& data_dir, const std::optional<std::string>& file,
                                                const std::vector<std::string>& typed, nlohmann::json& j,
                                                std::map<std::string, std::string>& origin, Diagnostics& diags,
                                                std::optional<long long> typed_gpus = std::nullopt);

}  // namespace gpuplan::cli
