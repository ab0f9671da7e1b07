// The overlay of a vLLM or SGLang command line on gpuplan's serving scenario (engine_args.hpp engine_overlay):
// --vllm-args / --sglang-args (text, @FILE or -) and the engines' spellings typed among gpuplan's flags, mapped by
// map_engine (engine_map.cpp) and applied to the scenario object with the checks that need the model or other keys.
#include "engine_args.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/app/workspace.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {

using engine_detail::kNotModelled;

namespace {

std::optional<EngineArgs> read_whole(ServingEngine e, const std::string& arg, const std::vector<std::string>& own,
                                     Diagnostics& diags) {
  const std::string flag = e == ServingEngine::vllm ? "--vllm-args" : "--sglang-args";
  std::string text = arg, source = flag;
  if (arg == "-" || (!arg.empty() && arg[0] == '@')) {
    const std::string path = arg == "-" ? "/dev/stdin" : arg.substr(1);
    source = arg == "-" ? "<stdin>" : path;
    auto t = json_io::read_text_file(path, diags);
    if (!t) return std::nullopt;
    text = *t;
  }
  auto words = read_engine_command(e, text, source, diags);
  if (!words) return std::nullopt;
  return parse_engine_words(e, *words, true, source, own, diags);
}

std::string join(const std::vector<std::string>& v) {
  std::string o;
  for (const auto& x : v) o += (o.empty() ? "" : ", ") + x;
  return o;
}

long long int_key(const nlohmann::json& j, const char* key, long long dflt) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<long long>() : dflt;
}

}  // namespace

bool engine_overlay(const std::string& data_dir, const std::optional<std::string>& vllm_args,
                    const std::optional<std::string>& sglang_args, const std::vector<std::string>& typed,
                    const std::vector<std::string>& own_flags, nlohmann::json& j,
                    std::map<std::string, std::string>& origin, Diagnostics& diags) {
  if (vllm_args && sglang_args) {
    diags.error("", "--sglang-args", "give one engine's command line: --vllm-args or --sglang-args");
    return false;
  }
  std::optional<EngineArgs> all;
  if (vllm_args) all = read_whole(ServingEngine::vllm, *vllm_args, own_flags, diags);
  if (sglang_args) all = read_whole(ServingEngine::sglang, *sglang_args, own_flags, diags);
  if ((vllm_args || sglang_args) && !all) return false;
  if (!typed.empty()) {
    // Which engine's spellings: the one whose parser knows every typed flag (vLLM first when both do).
    std::vector<ShellWord> words;
    for (const auto& t : typed) words.push_back(ShellWord{t, {}, 0});
    auto knows_all = [&](ServingEngine e) {
      for (const auto& t : typed) {
        if (t.size() < 2 || t[0] != '-' || (t[1] >= '0' && t[1] <= '9')) continue;
        const auto m = find_engine_flag(e, t.substr(0, t.find('=')));
        if (m.entry == nullptr && !(e == ServingEngine::vllm && t.rfind("-O", 0) == 0 && t.size() > 2)) return false;
      }
      return true;
    };
    std::optional<ServingEngine> e;
    if (all) e = all->engine;
    else if (knows_all(ServingEngine::vllm)) e = ServingEngine::vllm;
    else if (knows_all(ServingEngine::sglang)) e = ServingEngine::sglang;
    if (!e) {
      // Name the first flag neither parser knows, with the closest name of all three.
      for (const auto& t : typed) {
        if (t.size() < 2 || t[0] != '-') continue;
        const std::string n = t.substr(0, t.find('='));
        if (find_engine_flag(ServingEngine::vllm, n).entry || find_engine_flag(ServingEngine::sglang, n).entry) continue;
        std::vector<std::string> names = own_flags;
        for (auto eng : {ServingEngine::vllm, ServingEngine::sglang})
          for (const auto& x : engine_flag_names(eng)) names.emplace_back(x.name);
        diags.error("", n,
                    fmt::format("unknown flag: neither a gpuplan flag of this command nor a vLLM ({}) or SGLang ({}) "
                                "server argument{}",
                                engine_names_source(ServingEngine::vllm), engine_names_source(ServingEngine::sglang),
                                did_you_mean(n, names)));
        return false;
      }
      diags.error("", typed.front(), "mixes vLLM-only and SGLang-only spellings: use one engine's names");
      return false;
    }
    auto args = parse_engine_words(*e, words, false, "", own_flags, diags);
    if (!args) return false;
    if (all) {
      all->flags.insert(all->flags.end(), args->flags.begin(), args->flags.end());
    } else {
      all = std::move(args);
    }
  }
  if (!all) return true;
  auto m = map_engine(*all, diags);
  if (!m) return false;
  const char* label = engine_label(m->engine);

  // The model (and a speculative draft): a library id (Hugging Face ids are aliases), a config.json, or a local
  // checkpoint folder holding one; anything else is a diagnostic here, where the flag that named it is known.
  for (const char* key : {"model", "draft_model"}) {
    if (!m->keys.contains(key)) continue;
    const std::string id = m->keys[key].get<std::string>();
    auto ws = app::load_workspace(data_dir, {.hardware = false, .models = true});
    if (!ws.ok()) {
      diags.append(ws.diagnostics());
      return false;
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    if (ws->library.find(id) != nullptr) continue;
    if (fs::is_directory(id, ec) && fs::exists(fs::path(id) / "config.json", ec)) {
      m->keys[key] = (fs::path(id) / "config.json").string();
    } else if (!fs::exists(id, ec)) {
      diags.error("", m->origin[key],
                  fmt::format("'{}' is neither a model of gpuplan's library (`gpuplan model list`; Hugging Face ids "
                              "are aliases of its entries) nor a local file or checkpoint folder: gpuplan does not "
                              "download; save the model's config.json and give its path, or -m LIBRARY-ID{}",
                              id, did_you_mean(id, ws->library.names())));
      return false;
    }
  }

  // Conflicts with gpuplan's own spellings (flags or the scenario file); the engine's defaults yield to them.
  const bool before = diags.has_errors();
  for (auto it = m->keys.begin(); it != m->keys.end(); ++it) {
    const std::string& key = it.key();
    if (!j.contains(key)) continue;
    const std::string where = origin.count(key) ? origin.at(key) : "/" + key;
    bool same = j[key] == *it;
    if (!same && j[key].is_number() && it->is_number()) same = j[key].get<double>() == it->get<double>();
    if (m->defaulted.count(key)) {
      if (!same)
        diags.note("", where, fmt::format("{} = {} overrides the {} command line's {} = {} ({})", key, j[key].dump(),
                                          label, key, it->dump(), m->defaulted.at(key)));
      continue;
    }
    if (!same)
      diags.error("", m->origin.at(key),
                  fmt::format("sets {} = {}, but {} sets it to {}: give the knob once", key, it->dump(), where,
                              j[key].dump()));
  }
  if (diags.has_errors() && !before) return false;
  for (auto it = m->keys.begin(); it != m->keys.end(); ++it) {
    if (j.contains(it.key()) && m->defaulted.count(it.key())) continue;
    j[it.key()] = *it;
    origin[it.key()] = m->origin.at(it.key());
  }

  // vLLM's expert parallelism: the MoE layers sharded over TP × DP GPUs. DP > 1 is gpuplan's --attention-dp (wide
  // EP = TP × DP, checked against the model when resolved); DP 1 is the replica's TP group, gpuplan's --ep = TP. A
  // dense model: vLLM ignores the flag.
  if (!m->expert_parallel_flag.empty() && m->keys.contains("attention_dp")) {
    diags.note("", m->expert_parallel_flag,
               fmt::format("vLLM's EP size is TP × DP: gpuplan's --attention-dp {} with the TP group of each rank "
                           "(wide EP, the experts over all of them)",
                           m->keys["attention_dp"].dump()));
  } else if (!m->expert_parallel_flag.empty()) {
    if (!j.contains("tp")) {
      diags.error("", m->expert_parallel_flag,
                  "vLLM's expert parallelism spans the TP group: give the TP size (--tensor-parallel-size or --tp), "
                  "which the planner would otherwise choose");
      return false;
    }
    const long long tp = int_key(j, "tp", 1);
    bool moe = true;
    if (j.contains("model") && j["model"].is_string()) {
      auto ws = app::load_workspace(data_dir, {.hardware = false, .models = true});
      if (ws.ok()) {
        auto entry = wl_io::resolve_model(ws->library, j["model"].get<std::string>());
        if (entry.ok()) moe = entry->arch.moe.has_value();
      }
    }
    if (!moe) {
      diags.note("", m->expert_parallel_flag, "a dense model has no experts: vLLM ignores expert parallelism");
    } else if (j.contains("ep") && int_key(j, "ep", 0) != tp) {
      diags.error("", m->expert_parallel_flag,
                  fmt::format("vLLM's expert parallelism is EP = TP × DP = {}, but {} sets --ep {}", tp,
                              origin.count("ep") ? origin.at("ep") : std::string("/ep"), int_key(j, "ep", 0)));
      return false;
    } else if (tp > 1) {
      j["ep"] = tp;
      origin["ep"] = m->expert_parallel_flag;
      diags.note("", m->expert_parallel_flag,
                 fmt::format("vLLM's EP size is TP × DP = {} × 1: gpuplan's --ep {} (the experts split over the TP "
                             "group, no tensor parallelism inside an expert)",
                             tp, tp));
    }
  }
  // --max-model-len / --context-length: the engine refuses longer requests.
  if (m->max_len) {
    if (j.contains("input_dist") || j.contains("output_dist")) {
      diags.note("", m->max_len_flag, "length distributions are not checked against the engine's maximum length");
    } else {
      const long long in = int_key(j, "input_tokens", 1024), out = int_key(j, "output_tokens", 256);
      if (in + out > *m->max_len) {
        diags.error("", m->max_len_flag,
                    fmt::format("requests of {} + {} = {} tokens are longer than the {} maximum of {} tokens: {} "
                                "refuses them (raise it or shorten --input-tokens / --output-tokens)",
                                in, out, in + out, label, *m->max_len, label));
        return false;
      }
    }
  }
  // Prefix caching off: gpuplan's shared prefix is stored once and prefilled once, which needs the cache.
  if (!m->prefix_cache_off_flag.empty()) {
    if (int_key(j, "prefix_tokens", 0) > 0) {
      diags.error("", m->prefix_cache_off_flag,
                  fmt::format("--prefix-tokens {} assumes the prefix cache, which this flag turns off: serving a shared "
                              "prefix without it is {}",
                              int_key(j, "prefix_tokens", 0), kNotModelled));
      return false;
    }
    m->notes.push_back(fmt::format("'{}': no shared prefix given (--prefix-tokens 0), so the cache changes nothing "
                                   "in the estimate",
                                   m->prefix_cache_off_flag));
  }
  // Speculative decoding: the acceptance rate is the workload's, and a draft without a model needs its step time.
  if (!m->spec_flag.empty()) {
    if (!j.contains("spec_acceptance")) {
      diags.error("", m->spec_flag,
                  "the speculative config says how many tokens are drafted, not how often they are accepted: add "
                  "--spec-acceptance ALPHA (measured, e.g. from vLLM's spec-decode metrics)");
      return false;
    }
    if (m->spec_needs_draft_ms && !j.contains("draft_ms")) {
      diags.error("", m->spec_flag,
                  fmt::format("the draft step of a draft without a separate model (ngram, EAGLE, MTP heads) is {}: "
                              "give --draft-ms, or a draft model (\"model\" with method draft_model)",
                              kNotModelled));
      return false;
    }
  }

  std::string mapped;
  for (const auto& [key, from] : m->origin)
    if (j.contains(key) && origin.count(key) && origin.at(key) == from)
      mapped += fmt::format("{}{} = {} ({})", mapped.empty() ? "" : "; ", key, j[key].dump(), from);
  if (!mapped.empty()) diags.note("", label, "mapped: " + mapped);
  if (!m->ignored.empty())
    diags.note("", label, "ignored (they do not change the latency, throughput or memory gpuplan models): " +
                              join(m->ignored));
  if (!m->assumed.empty()) diags.note("", label, "already gpuplan's assumption: " + join(m->assumed));
  for (const auto& n : m->notes) diags.note("", label, n);
  return true;
}

}  // namespace gpuplan::cli
