// vLLM's and SGLang's argument tables (vllm_arg_names.inc, sglang_arg_names.inc), the server command found in a
// pasted line or script (read_engine_command) and its words read into flags (parse_engine_words). The mapping onto
// gpuplan's scenario keys is engine_map.cpp.
#include "engine_args.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace gpuplan::cli {

namespace {
#include "sglang_arg_names.inc"
#include "vllm_arg_names.inc"

void error_at(Diagnostics& diags, const std::string& file, int line, const std::string& pointer, std::string message) {
  diags.add(Diagnostic{Severity::error, file, pointer, line, 0, std::move(message)});
}

const std::map<std::string, const EngineFlagName*, std::less<>>& flag_index(ServingEngine e) {
  static const auto build = [](ServingEngine eng) {
    std::map<std::string, const EngineFlagName*, std::less<>> m;
    for (const auto& n : engine_flag_names(eng)) m.emplace(n.name, &n);
    return m;
  };
  static const auto v = build(ServingEngine::vllm);
  static const auto s = build(ServingEngine::sglang);
  return e == ServingEngine::vllm ? v : s;
}

const EngineFlagName* primary(ServingEngine e, const EngineFlagName* n) {
  if (n == nullptr || n->canonical == nullptr) return n;
  const auto& m = flag_index(e);
  const auto it = m.find(n->canonical);
  return it == m.end() ? n : it->second;
}

bool is_flag_word(const std::string& t) {
  if (t.size() < 2 || t[0] != '-') return false;
  // A negative number is a value, not a flag (argparse does the same when the parser has no numeric options).
  return !(t[1] >= '0' && t[1] <= '9') && t[1] != '.';
}

}  // namespace

const char* engine_label(ServingEngine e) { return e == ServingEngine::vllm ? "vLLM" : "SGLang"; }

const std::vector<EngineFlagName>& engine_flag_names(ServingEngine e) {
  static const std::vector<EngineFlagName> v(std::begin(kVllmFlagNames), std::end(kVllmFlagNames));
  static const std::vector<EngineFlagName> s(std::begin(kSglangFlagNames), std::end(kSglangFlagNames));
  return e == ServingEngine::vllm ? v : s;
}

std::string_view engine_names_source(ServingEngine e) {
  return e == ServingEngine::vllm ? kVllmSource : kSglangSource;
}

EngineFlagMatch find_engine_flag(ServingEngine e, std::string_view name) {
  EngineFlagMatch r;
  const auto& m = flag_index(e);
  std::string n(name);
  if (e == ServingEngine::vllm && n.rfind("--", 0) == 0) std::replace(n.begin() + 2, n.end(), '_', '-');
  if (auto it = m.find(n); it != m.end()) {
    r.entry = primary(e, it->second);
    return r;
  }
  if (e == ServingEngine::vllm) {
    if (n.rfind("--no-", 0) == 0) {
      if (auto it = m.find("--" + n.substr(5)); it != m.end() && primary(e, it->second)->arity == 4) {
        r.entry = primary(e, it->second);
        r.negated = true;
      }
    }
    return r;
  }
  // SGLang: argparse's unique-prefix abbreviation of a long option.
  if (n.rfind("--", 0) != 0 || n.size() < 3) return r;
  std::vector<const EngineFlagName*> hits;
  for (auto it = m.lower_bound(n); it != m.end() && it->first.rfind(n, 0) == 0; ++it) {
    const EngineFlagName* p = primary(e, it->second);
    if (std::find(hits.begin(), hits.end(), p) == hits.end()) hits.push_back(p);
  }
  if (hits.size() == 1) r.entry = hits.front();
  if (hits.size() > 1) {
    std::string list;
    for (const auto* h : hits) list += fmt::format("{}{}", list.empty() ? "" : ", ", h->name);
    r.error = fmt::format("ambiguous option: '{}' could match {} (SGLang's parser refuses it too)", n, list);
  }
  return r;
}

std::string EngineFlag::text() const {
  std::string s = given;
  for (const auto& v : values) {
    const bool blank = v.text.find_first_of(" \t") != std::string::npos || v.text.empty();
    s += blank ? " '" + v.text + "'" : " " + v.text;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// The server command of a pasted line or script

std::optional<std::vector<ShellWord>> read_engine_command(ServingEngine e, std::string_view text,
                                                          const std::string& source, Diagnostics& diags) {
  const auto commands = read_shell_commands(text, source, diags);
  if (!commands) return std::nullopt;
  const bool vllm = e == ServingEngine::vllm;
  std::vector<std::vector<ShellWord>> found;
  std::vector<int> lines;
  for (const auto& c : *commands) {
    const auto& w = c.words;
    std::optional<std::size_t> start;
    for (std::size_t k = 0; k < w.size() && !start; ++k) {
      const std::string& t = w[k].text;
      const std::string base = t.substr(t.rfind('/') == std::string::npos ? 0 : t.rfind('/') + 1);
      if (vllm && base == "vllm" && k + 1 < w.size() && w[k + 1].text == "serve") start = k + 2;
      if (t == "-m" && k + 1 < w.size()) {
        const std::string& mod = w[k + 1].text;
        if (vllm && mod == "vllm.entrypoints.openai.api_server") start = k + 2;
        if (!vllm && mod == "sglang.launch_server") start = k + 2;
        if (!vllm && mod == "sglang_router.launch_server") {
          error_at(diags, source, c.line, "",
                   "'python -m sglang_router.launch_server' starts SGLang's router with data-parallel workers; "
                   "gpuplan reads one server's line (python -m sglang.launch_server ...)");
          return std::nullopt;
        }
      }
    }
    // `docker run ... vllm/vllm-openai[:tag] --model ...` (no `vllm serve` after the image): the image's entry point
    // is the API server.
    for (std::size_t k = 0; k < w.size() && !start && vllm; ++k)
      if (w[k].text.find("vllm/vllm-openai") != std::string::npos) start = k + 1;
    if (!start && !w.empty() && w.front().text.rfind("--", 0) == 0) start = 0;  // a bare flag list
    if (!start) continue;  // cd, export, echo, ...: not the server command
    found.emplace_back(w.begin() + static_cast<std::ptrdiff_t>(*start), w.end());
    lines.push_back(c.line);
  }
  if (found.empty()) {
    error_at(diags, source, 0, "",
             vllm ? "no vLLM server command found: expected 'vllm serve MODEL --flag ...' (or python -m "
                    "vllm.entrypoints.openai.api_server --model MODEL ...) or a list of vLLM flags"
                  : "no SGLang server command found: expected 'python -m sglang.launch_server --model-path MODEL "
                    "--flag ...' or a list of SGLang flags");
    return std::nullopt;
  }
  if (found.size() > 1) {
    std::string at;
    for (int l : lines) at += (at.empty() ? "" : ", ") + std::to_string(l);
    error_at(diags, source, lines[1], "",
             fmt::format("{} server commands (lines {}): give one (for a multi-node server, the head node's)",
                         found.size(), at));
    return std::nullopt;
  }
  return found.front();
}

// ---------------------------------------------------------------------------------------------------------------
// Words -> flags

std::optional<EngineArgs> parse_engine_words(ServingEngine e, const std::vector<ShellWord>& words, bool whole_command,
                                             const std::string& source, const std::vector<std::string>& extra_names,
                                             Diagnostics& diags) {
  EngineArgs a;
  a.engine = e;
  a.whole_command = whole_command;
  a.source = source;
  const char* label = engine_label(e);
  auto unresolved = [&](const ShellWord& w) {
    error_at(diags, source, w.line, "",
             fmt::format("'{}' uses {}, which the command line does not set", w.text, w.unresolved.front()));
  };
  for (std::size_t k = 0; k < words.size();) {
    const ShellWord& w = words[k];
    if (!is_flag_word(w.text)) {
      if (!w.unresolved.empty()) {
        unresolved(w);
        return std::nullopt;
      }
      if (e == ServingEngine::vllm && whole_command && !a.model_tag) {
        a.model_tag = w;  // vllm serve MODEL: the positional model tag
        ++k;
        continue;
      }
      std::string after;
      if (!a.flags.empty()) after = fmt::format(" after '{}'", a.flags.back().text());
      if (whole_command)
        error_at(diags, source, w.line, "",
                 fmt::format("unexpected word '{}'{}: {}'s arguments are flags (--name value)", w.text, after, label));
      else
        error_at(diags, source, w.line, "",
                 fmt::format("unexpected word '{}'{}: the command takes flags (--name value); a vLLM or SGLang command "
                             "line goes in --vllm-args / --sglang-args",
                             w.text, after));
      return std::nullopt;
    }
    std::string name = w.text;
    std::optional<ShellWord> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = ShellWord{name.substr(eq + 1), w.unresolved, w.line};
      name = name.substr(0, eq);
    } else if (e == ServingEngine::vllm && name.size() > 2 && name.rfind("-O", 0) == 0) {
      inline_value = ShellWord{name.substr(2), w.unresolved, w.line};  // -O3: argparse's attached short value
      name = "-O";
    }
    const EngineFlagMatch m = find_engine_flag(e, name);
    if (!m.error.empty()) {
      error_at(diags, source, w.line, name, m.error);
      return std::nullopt;
    }
    if (m.entry == nullptr) {
      std::vector<std::string> names = extra_names;
      for (const auto& n : engine_flag_names(e)) names.emplace_back(n.name);
      error_at(diags, source, w.line, name,
               fmt::format("unknown flag: not a {} server argument ({}){}", label, engine_names_source(e),
                           did_you_mean(name, names)));
      return std::nullopt;
    }
    if (!w.unresolved.empty() && !inline_value) {
      unresolved(w);
      return std::nullopt;
    }
    ++k;
    EngineFlag f{m.entry->name, name, m.negated, {}, w.line};
    const int arity = m.entry->arity;
    if (inline_value) {
      if (arity == 0 || arity == 4) {
        error_at(diags, source, w.line, name,
                 fmt::format("'{}' is a switch and takes no value (given '{}')", name, inline_value->text));
        return std::nullopt;
      }
      f.values.push_back(*inline_value);
    } else if (arity == 1) {
      if (k >= words.size() || is_flag_word(words[k].text)) {
        error_at(diags, source, w.line, name, "expected a value after the flag");
        return std::nullopt;
      }
      f.values.push_back(words[k++]);
    } else if (arity == 2) {
      while (k < words.size() && !is_flag_word(words[k].text)) f.values.push_back(words[k++]);
      if (f.values.empty()) {
        error_at(diags, source, w.line, name, "expected one or more values after the flag");
        return std::nullopt;
      }
    } else if (arity == 3) {
      if (k < words.size() && !is_flag_word(words[k].text)) f.values.push_back(words[k++]);
    }
    for (const auto& v : f.values)
      if (!v.unresolved.empty()) {
        unresolved(v);
        return std::nullopt;
      }
    a.flags.push_back(std::move(f));
  }
  return a;
}

}  // namespace gpuplan::cli
