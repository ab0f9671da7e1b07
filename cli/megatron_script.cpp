// Megatron-LM launch scripts and command lines read into flags (megatron_args.hpp): the training command of a
// script read by the shell lexer (shell_words.cpp) with its launcher's world size (read_megatron_script), and the
// words-to-flags parser against Megatron-LM's argument table (parse_megatron_words).
#include "megatron_args.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

namespace gpuplan::cli {

namespace {

std::string as_words(const MegatronFlag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

bool digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

}  // namespace

std::optional<MegatronCommand> read_megatron_script(std::string_view text, const std::string& source,
                                                    Diagnostics& diags) {
  const auto all = read_shell_commands(text, source, diags);
  if (!all) return std::nullopt;
  std::vector<MegatronCommand> commands;
  std::vector<int> command_lines;
  for (const auto& sc : *all) {
    const auto& st = sc.words;
    const int line = sc.line;
    const std::size_t k = 0;
    // Messages a script prints ("echo \"Error: pretrain_gpt.py not found at $PRETRAIN_SCRIPT_PATH\"") name the
    // program too: they are no command.
    if (st[k].text == "echo" || st[k].text == "printf") continue;
    // A training command: the words after a .py program (one word, no blanks), or a bare list of flags.
    auto program = [](const std::string& t) {
      return t.size() > 3 && t.ends_with(".py") && t.find_first_of(" \t\n") == std::string::npos;
    };
    std::size_t py = k;
    while (py < st.size() && !program(st[py].text)) ++py;
    MegatronCommand cmd;
    if (py < st.size()) {
      cmd.words.assign(st.begin() + static_cast<std::ptrdiff_t>(py) + 1, st.end());
      cmd.environment = sc.environment;
      std::optional<long long> nproc, nnodes;
      std::string launcher;
      for (std::size_t j = k; j < py; ++j) {
        launcher += (launcher.empty() ? "" : " ") + st[j].text;
        std::string name = st[j].text, value;
        const auto eq = name.find('=');
        if (eq != std::string::npos) {
          value = name.substr(eq + 1);
          name = name.substr(0, eq);
        } else if (j + 1 < py) {
          value = st[j + 1].text;
        }
        long long n = 0;
        const bool num = digits(value) && std::from_chars(value.data(), value.data() + value.size(), n).ec ==
                                              std::errc() && n > 0;
        if ((name == "--nproc_per_node" || name == "--nproc-per-node") && num) nproc = n;
        if (name == "--nnodes" && num) nnodes = n;
      }
      cmd.launcher_text = launcher;
      if (nproc) cmd.launcher_gpus = *nproc * nnodes.value_or(1);
    } else if (st[k].text.rfind("--", 0) == 0) {
      cmd.words.assign(st.begin() + static_cast<std::ptrdiff_t>(k), st.end());
      cmd.environment = sc.environment;
    } else {
      continue;  // mkdir, echo, cd, ...: not the training command
    }
    commands.push_back(std::move(cmd));
    command_lines.push_back(line);
  }
  if (commands.empty()) {
    script_error_at(diags, source, 0, "",
             "no training command found: expected a line that runs a .py program (torchrun ... pretrain_gpt.py "
             "--tensor-model-parallel-size 8 ...) or a list of Megatron-LM flags");
    return std::nullopt;
  }
  if (commands.size() > 1) {
    std::string at;
    for (int l : command_lines) at += (at.empty() ? "" : ", ") + std::to_string(l);
    script_error_at(diags, source, command_lines[1], "",
             fmt::format("{} training commands (lines {}): give a file with one", commands.size(), at));
    return std::nullopt;
  }
  return commands.front();
}

// ---------------------------------------------------------------------------------------------------------------
// Words -> flags

std::optional<MegatronArgs> parse_megatron_words(const std::vector<ShellWord>& words, bool whole_command,
                                                 const std::string& source, Diagnostics& diags) {
  MegatronArgs a;
  a.whole_command = whole_command;
  a.source = source;
  std::vector<std::string> names;
  auto all_names = [&]() -> const std::vector<std::string>& {
    if (names.empty())
      for (const auto& n : megatron_flag_names()) names.emplace_back(n.name);
    return names;
  };
  auto is_flag = [](const std::string& t) { return t.size() > 2 && t.rfind("--", 0) == 0; };
  for (std::size_t k = 0; k < words.size();) {
    const ShellWord& w = words[k];
    if (!w.unresolved.empty() && w.text.rfind("-", 0) != 0) {
      script_error_at(diags, source, w.line, "",
               fmt::format("'{}' uses {}", w.text, unresolved_phrase(w.unresolved.front())));
      return std::nullopt;
    }
    if (!is_flag(w.text)) {
      std::string after;
      if (!a.flags.empty() && !a.flags.back().values.empty())
        after = fmt::format(" after '{}', which takes {} (an unquoted ${{ARRAY[@]}} or $VAR splits a quoted value at "
                            "its blanks, as bash does, and Megatron-LM's parser then refuses the rest too)",
                            as_words(a.flags.back()),
                            find_megatron_flag(a.flags.back().name)->arity == 2 ? "values" : "one value");
      script_error_at(diags, source, w.line, "",
               fmt::format("unexpected word '{}'{}: Megatron-LM's arguments are flags (--name value)", w.text, after));
      return std::nullopt;
    }
    std::string name = w.text;
    std::optional<ShellWord> inline_value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      inline_value = ShellWord{name.substr(eq + 1), w.unresolved, w.line};
      name = name.substr(0, eq);
    }
    const MegatronFlagName* e = find_megatron_flag(name);
    if (e == nullptr) {
      script_error_at(diags, source, w.line, name,
               fmt::format("unknown flag: neither a gpuplan train flag nor a Megatron-LM argument "
                           "(megatron/training/arguments.py at {}){}",
                           megatron_commit(), did_you_mean(name, all_names())));
      return std::nullopt;
    }
    if (!w.unresolved.empty() && !inline_value) {
      script_error_at(diags, source, w.line, name, "the flag uses " + unresolved_phrase(w.unresolved.front()));
      return std::nullopt;
    }
    ++k;
    MegatronFlag f{name, {}, w.line};
    if (inline_value) {
      if (e->arity == 0) {
        script_error_at(diags, source, w.line, name,
                 fmt::format("'{}' is a switch and takes no value (given '{}')", name, inline_value->text));
        return std::nullopt;
      }
      f.values.push_back(*inline_value);
    } else if (e->arity == 1) {
      if (k >= words.size() || is_flag(words[k].text)) {
        script_error_at(diags, source, w.line, name, "expected a value after the flag");
        return std::nullopt;
      }
      f.values.push_back(words[k++]);
    } else if (e->arity == 2) {
      while (k < words.size() && !is_flag(words[k].text)) f.values.push_back(words[k++]);
      if (f.values.empty()) {
        script_error_at(diags, source, w.line, name, "expected one or more values after the flag");
        return std::nullopt;
      }
    } else if (e->arity == 3) {
      if (k < words.size() && !is_flag(words[k].text)) f.values.push_back(words[k++]);
    }
    a.flags.push_back(std::move(f));
  }
  return a;
}

}  // namespace gpuplan::cli
