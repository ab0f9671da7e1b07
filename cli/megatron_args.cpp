#include "megatron_args.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {

namespace {
#include "megatron_arg_names.inc"

/// The issue that tracks what is not modelled yet; every refusal names it.
constexpr const char* kNotModelled = "not modelled yet (#22)";
}  // namespace

const std::vector<MegatronFlagName>& megatron_flag_names() {
  static const std::vector<MegatronFlagName> names(std::begin(kMegatronFlagNames), std::end(kMegatronFlagNames));
  return names;
}

std::string_view megatron_commit() { return kMegatronCommit; }

const MegatronFlagName* find_megatron_flag(std::string_view name) {
  const auto& v = megatron_flag_names();
  auto it = std::lower_bound(v.begin(), v.end(), name,
                             [](const MegatronFlagName& e, std::string_view n) {
                               return std::string_view(e.name) < n;
                             });
  return it != v.end() && it->name == name ? &*it : nullptr;
}

// ---------------------------------------------------------------------------------------------------------------
// Shell text -> words
namespace {

struct Tok {
  ShellWord w;
  bool op = false;  ///< ; && || | & (a statement separator)
};

struct Vars {
  std::map<std::string, ShellWord> scalars;
  std::map<std::string, std::vector<ShellWord>> arrays;
  std::map<std::string, int> conditional;  ///< set inside an if/for/while/case block: name -> line
};

bool name_char(char c, bool first) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

/// Splits on blanks (unquoted expansion).
std::vector<std::string> fields(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in) out.push_back(cur);
      cur.clear();
      in = false;
    } else {
      cur += c;
      in = true;
    }
  }
  if (in) out.push_back(cur);
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view s, int line, const Vars& vars) : s_(s), line_(line), vars_(vars) {}

  /// Words and operators of `s_`; false with `error` set on an unterminated quote or expansion.
  bool run(std::vector<Tok>& out, std::string& error) {
    out_ = &out;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        end_word();
        ++i_;
      } else if (c == '#' && !started_) {
        break;  // a comment
      } else if (c == '\'') {
        const auto e = s_.find('\'', i_ + 1);
        if (e == std::string_view::npos) return fail(error, "an unterminated ' quote");
        cur_.text += s_.substr(i_ + 1, e - i_ - 1);
        started_ = true;
        i_ = e + 1;
      } else if (c == '"') {
        if (!double_quoted(error)) return false;
      } else if (c == '\\') {
        if (i_ + 1 < s_.size()) cur_.text += s_[i_ + 1];
        started_ = true;
        i_ += 2;
      } else if (c == '$') {
        std::vector<ShellWord> parts;
        if (!dollar(parts, error)) return false;
        // Unquoted: each value splits on blanks; the first field joins the word being built.
        bool first = true;
        for (const auto& p : parts) {
          auto fs = fields(p.text);
          if (!p.unresolved.empty() && fs.empty()) fs.push_back(p.text);
          for (const auto& f : fs) {
            if (!first) end_word();
            cur_.text += f;
            for (const auto& u : p.unresolved) cur_.unresolved.push_back(u);
            started_ = true;
            first = false;
          }
        }
      } else if (c == '`') {
        const auto e = s_.find('`', i_ + 1);
        if (e == std::string_view::npos) return fail(error, "an unterminated ` command substitution");
        const std::string text(s_.substr(i_, e - i_ + 1));
        cur_.text += text;
        cur_.unresolved.push_back(text);
        started_ = true;
        i_ = e + 1;
      } else if (c == ';' || c == '|' || c == '&') {
        end_word();
        std::string op(1, c);
        if (i_ + 1 < s_.size() && (s_[i_ + 1] == c)) op += c;
        i_ += op.size();
        out_->push_back({ShellWord{op, {}, line_}, true});
      } else if (c == '>' || c == '<') {
        // A redirection: drop a file-descriptor number in front, the operator and its target.
        if (started_ && cur_.text.find_first_not_of("0123456789") == std::string::npos) {
          cur_ = ShellWord{};
          started_ = false;
        }
        end_word();
        ++i_;
        while (i_ < s_.size() && (s_[i_] == '>' || s_[i_] == '&')) ++i_;
        skip_next_ = true;
      } else {
        cur_.text += c;
        started_ = true;
        ++i_;
      }
    }
    end_word();
    return true;
  }

  /// Expands `text` as the inside of double quotes (a ${NAME:-default} default).
  static ShellWord expand_quoted(std::string_view text, int line, const Vars& vars, std::string& error) {
    const std::string wrapped = "\"" + std::string(text) + "\"";
    Lexer lx(wrapped, line, vars);
    std::vector<Tok> toks;
    if (!lx.run(toks, error) || toks.empty()) return ShellWord{"", {}, line};
    return toks.front().w;
  }

 private:
  bool fail(std::string& error, const std::string& why) {
    error = why;
    return false;
  }
  void end_word() {
    if (started_) {
      cur_.line = line_;
      if (skip_next_) skip_next_ = false;
      else out_->push_back({cur_, false});
    }
    cur_ = ShellWord{};
    started_ = false;
  }

  bool double_quoted(std::string& error) {
    ++i_;
    started_ = true;
    while (i_ < s_.size() && s_[i_] != '"') {
      const char c = s_[i_];
      if (c == '\\' && i_ + 1 < s_.size() && std::string_view("\\\"$`").find(s_[i_ + 1]) != std::string_view::npos) {
        cur_.text += s_[i_ + 1];
        i_ += 2;
      } else if (c == '$') {
        const std::size_t at = i_;
        std::vector<ShellWord> parts;
        if (!dollar(parts, error)) return false;
        const bool whole_array = parts.size() != 1 && at > 0 && s_[at - 1] == '"' && i_ < s_.size() && s_[i_] == '"';
        if (whole_array) {
          // "${NAME[@]}": one word per element.
          for (std::size_t k = 0; k < parts.size(); ++k) {
            if (k > 0) end_word(), started_ = true;
            cur_.text += parts[k].text;
            for (const auto& u : parts[k].unresolved) cur_.unresolved.push_back(u);
          }
          if (parts.empty()) started_ = false;
        } else {
          for (std::size_t k = 0; k < parts.size(); ++k) {
            if (k > 0) cur_.text += ' ';
            cur_.text += parts[k].text;
            for (const auto& u : parts[k].unresolved) cur_.unresolved.push_back(u);
          }
        }
      } else if (c == '`') {
        const auto e = s_.find('`', i_ + 1);
        if (e == std::string_view::npos) return fail(error, "an unterminated ` command substitution");
        const std::string text(s_.substr(i_, e - i_ + 1));
        cur_.text += text;
        cur_.unresolved.push_back(text);
        i_ = e + 1;
      } else {
        cur_.text += c;
        ++i_;
      }
    }
    if (i_ >= s_.size()) return fail(error, "an unterminated \" quote");
    ++i_;
    return true;
  }

  /// The end of a $( ... ) / ${ ... } opened at `open` (the index of its bracket), nesting counted; npos if none.
  std::size_t closing(std::size_t open, char o, char c) const {
    int depth = 0;
    for (std::size_t k = open; k < s_.size(); ++k) {
      if (s_[k] == o) ++depth;
      else if (s_[k] == c && --depth == 0) return k;
    }
    return std::string_view::npos;
  }

  ShellWord unresolved(const std::string& text, const std::string& why) const {
    return ShellWord{text, {why.empty() ? text : text + " (" + why + ")"}, line_};
  }

  /// The value(s) of variable `name`; `text` is how the script wrote the reference.
  void lookup(const std::string& name, bool array_all, const std::string& text, std::vector<ShellWord>& parts) const {
    if (auto c = vars_.conditional.find(name); c != vars_.conditional.end()) {
      parts.push_back(unresolved(text, fmt::format("set inside an if/for/while/case block at line {}: gpuplan does not "
                                                   "evaluate shell conditions; paste the command as run (bash -x "
                                                   "prints it)",
                                                   c->second)));
      return;
    }
    if (auto a = vars_.arrays.find(name); a != vars_.arrays.end()) {
      if (array_all) parts.insert(parts.end(), a->second.begin(), a->second.end());
      else if (!a->second.empty()) parts.push_back(a->second.front());
      return;
    }
    if (auto v = vars_.scalars.find(name); v != vars_.scalars.end()) {
      parts.push_back(v->second);
      return;
    }
    parts.push_back(unresolved(text, ""));
  }

  bool dollar(std::vector<ShellWord>& parts, std::string& error) {
    const std::size_t at = i_;
    if (at + 1 >= s_.size()) {
      ++i_;
      parts.push_back(ShellWord{"$", {}, line_});
      return true;
    }
    const char n = s_[at + 1];
    if (n == '(') {
      const auto e = closing(at + 1, '(', ')');
      if (e == std::string_view::npos) return fail(error, "an unterminated $( command substitution");
      const std::string text(s_.substr(at, e - at + 1));
      parts.push_back(unresolved(text, ""));
      i_ = e + 1;
      return true;
    }
    if (n == '{') {
      const auto e = closing(at + 1, '{', '}');
      if (e == std::string_view::npos) return fail(error, "an unterminated ${ expansion");
      const std::string text(s_.substr(at, e - at + 1));
      const std::string inner(s_.substr(at + 2, e - at - 2));
      i_ = e + 1;
      std::size_t k = 0;
      while (k < inner.size() && name_char(inner[k], k == 0)) ++k;
      if (k == 0)  // ${1}, ${1:-x}: a positional parameter
        while (k < inner.size() && inner[k] >= '0' && inner[k] <= '9') ++k;
      const std::string name = inner.substr(0, k);
      const std::string rest = inner.substr(k);
      if (name.empty()) {
        parts.push_back(unresolved(text, ""));
        return true;
      }
      if (rest == "[@]" || rest == "[*]") {
        lookup(name, true, text, parts);
        return true;
      }
      if (rest.empty()) {
        lookup(name, false, text, parts);
        return true;
      }
      for (const char* op : {":-", "-", ":=", "="}) {
        const std::string o(op);
        if (rest.rfind(o, 0) == 0) {
          const bool defined = vars_.scalars.count(name) || vars_.arrays.count(name) || vars_.conditional.count(name);
          if (defined) {
            lookup(name, false, text, parts);
          } else {
            std::string err;
            ShellWord w = expand_quoted(rest.substr(o.size()), line_, vars_, err);
            if (!err.empty()) return fail(error, err);
            parts.push_back(w);
          }
          return true;
        }
      }
      parts.push_back(unresolved(text, ""));  // ${#NAME}, ${NAME/x/y}, ...
      return true;
    }
    std::size_t k = at + 1;
    if (name_char(n, true)) {
      while (k < s_.size() && name_char(s_[k], false)) ++k;
    } else if ((n >= '0' && n <= '9') || n == '@' || n == '*' || n == '#' || n == '?' || n == '$' || n == '!') {
      k = at + 2;
    } else {
      ++i_;
      parts.push_back(ShellWord{"$", {}, line_});
      return true;
    }
    const std::string text(s_.substr(at, k - at));
    i_ = k;
    lookup(text.substr(1), false, text, parts);
    return true;
  }

  std::string_view s_;
  int line_;
  const Vars& vars_;
  std::size_t i_ = 0;
  ShellWord cur_;
  bool started_ = false, skip_next_ = false;
  std::vector<Tok>* out_ = nullptr;
};

/// `NAME=` / `NAME+=` at the start of a word: the name and whether it appends; nullopt otherwise.
std::optional<std::pair<std::string, bool>> assignment(std::string_view w) {
  std::size_t k = 0;
  while (k < w.size() && name_char(w[k], k == 0)) ++k;
  if (k == 0 || k >= w.size()) return std::nullopt;
  if (w[k] == '=') return std::make_pair(std::string(w.substr(0, k)), false);
  if (w.substr(k, 2) == "+=") return std::make_pair(std::string(w.substr(0, k)), true);
  return std::nullopt;
}

/// Whether the raw text has more unquoted '(' than ')' (an array still open).
int paren_balance(std::string_view s) {
  int bal = 0;
  char quote = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if (quote) {
      if (c == '\\' && quote == '"') ++k;
      else if (c == quote) quote = 0;
    } else if (c == '\\') {
      ++k;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (k == 0 || s[k - 1] == ' ' || s[k - 1] == '\t')) {
      while (k < s.size() && s[k] != '\n') ++k;
    } else if (c == '(') {
      ++bal;
    } else if (c == ')') {
      --bal;
    }
  }
  return bal;
}

std::string as_words(const MegatronFlag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

bool digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

void error_at(Diagnostics& diags, const std::string& file, int line, const std::string& pointer, std::string message) {
  diags.add(Diagnostic{Severity::error, file, pointer, line, 0, std::move(message)});
}

}  // namespace

std::optional<MegatronCommand> read_megatron_script(std::string_view text, const std::string& source,
                                                    Diagnostics& diags) {
  // Logical lines: backslash-newline joins, CR dropped; each remembers the line it starts on.
  std::vector<std::pair<int, std::string>> lines;
  {
    std::string cur;
    int line = 1, start = 1;
    for (std::size_t k = 0; k < text.size(); ++k) {
      const char c = text[k];
      if (c == '\r') continue;
      if (c == '\\' && k + 1 < text.size() && (text[k + 1] == '\n' || (text[k + 1] == '\r' && k + 2 < text.size() &&
                                                                          text[k + 2] == '\n'))) {
        k += text[k + 1] == '\r' ? 2 : 1;
        ++line;
        cur += ' ';
        continue;
      }
      if (c == '\n') {
        lines.emplace_back(start, cur);
        cur.clear();
        start = ++line;
        continue;
      }
      cur += c;
    }
    lines.emplace_back(start, cur);
  }

  Vars vars;
  int depth = 0;
  std::vector<MegatronCommand> commands;
  std::vector<int> command_lines;
  for (std::size_t li = 0; li < lines.size(); ++li) {
    auto [line, raw] = lines[li];
    // An array assignment may run over several lines: gather them until its parenthesis closes.
    {
      std::size_t k = 0;
      while (k < raw.size() && (raw[k] == ' ' || raw[k] == '\t')) ++k;
      const auto as = assignment(std::string_view(raw).substr(k));
      if (as) {
        const std::size_t eq = raw.find('=', k);
        if (eq + 1 < raw.size() && raw[eq + 1] == '(') {
          while (paren_balance(raw) > 0 && li + 1 < lines.size()) raw += "\n" + lines[++li].second;
          if (paren_balance(raw) > 0) {
            error_at(diags, source, line, "", fmt::format("the array {}=( is not closed", as->first));
            return std::nullopt;
          }
          const auto close = raw.rfind(')');
          const std::string body = raw.substr(eq + 2, close - eq - 2);
          std::vector<ShellWord> elems;
          // Element lines one by one, so that a '#' comment ends at its line.
          std::size_t p = 0;
          int eline = line;
          while (p <= body.size()) {
            auto nl = body.find('\n', p);
            if (nl == std::string::npos) nl = body.size();
            std::vector<Tok> toks;
            std::string err;
            Lexer lx(std::string_view(body).substr(p, nl - p), eline, vars);
            if (!lx.run(toks, err)) {
              error_at(diags, source, eline, "", err);
              return std::nullopt;
            }
            for (auto& t : toks) elems.push_back(t.w);
            p = nl + 1;
            ++eline;
          }
          if (depth > 0) {
            vars.conditional.emplace(as->first, line);
          } else if (!vars.conditional.count(as->first)) {
            auto& a = vars.arrays[as->first];
            if (!as->second) a.clear();
            a.insert(a.end(), elems.begin(), elems.end());
            vars.scalars.erase(as->first);
          }
          continue;
        }
      }
    }
    std::vector<Tok> toks;
    std::string err;
    Lexer lx(raw, line, vars);
    if (!lx.run(toks, err)) {
      error_at(diags, source, line, "", err);
      return std::nullopt;
    }
    // Statements split at ; && || | &.
    std::vector<std::vector<ShellWord>> statements(1);
    for (auto& t : toks) {
      if (t.op) statements.emplace_back();
      else statements.back().push_back(t.w);
    }
    for (auto& st : statements) {
      if (st.empty()) continue;
      const std::string& first = st.front().text;
      if (first == "if" || first == "for" || first == "while" || first == "until" || first == "case" ||
          first == "select") {
        ++depth;
        st.erase(st.begin());  // `if [ ... ]`: the condition is no command of interest
        continue;
      }
      if (first == "fi" || first == "done" || first == "esac") {
        depth = std::max(0, depth - 1);
        continue;
      }
      if (first == "then" || first == "do" || first == "else" || first == "elif") {
        st.erase(st.begin());
        if (st.empty()) continue;
      }
      std::size_t k = 0;
      if (st[0].text == "export" || st[0].text == "declare" || st[0].text == "local" || st[0].text == "readonly") k = 1;
      // Leading NAME=value words: assignments (alone) or an environment prefix (before a command).
      std::vector<std::pair<std::string, ShellWord>> assigns;
      while (k < st.size()) {
        const auto as = assignment(st[k].text);
        if (!as || as->second) break;
        ShellWord v = st[k];
        v.text = v.text.substr(as->first.size() + 1);
        assigns.emplace_back(as->first, v);
        ++k;
      }
      if (k == st.size()) {
        for (auto& [name, v] : assigns) {
          if (depth > 0) {
            vars.conditional.emplace(name, line);
          } else if (!vars.conditional.count(name)) {
            vars.scalars[name] = v;
            vars.arrays.erase(name);
          }
        }
        continue;
      }
      // A training command: the words after a .py program, or a bare list of flags.
      std::size_t py = k;
      while (py < st.size() && !(st[py].text.size() > 3 && st[py].text.ends_with(".py"))) ++py;
      MegatronCommand cmd;
      if (py < st.size()) {
        cmd.words.assign(st.begin() + static_cast<std::ptrdiff_t>(py) + 1, st.end());
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
      } else {
        continue;  // mkdir, echo, cd, ...: not the training command
      }
      commands.push_back(std::move(cmd));
      command_lines.push_back(line);
    }
  }
  if (commands.empty()) {
    error_at(diags, source, 0, "",
             "no training command found: expected a line that runs a .py program (torchrun ... pretrain_gpt.py "
             "--tensor-model-parallel-size 8 ...) or a list of Megatron-LM flags");
    return std::nullopt;
  }
  if (commands.size() > 1) {
    std::string at;
    for (int l : command_lines) at += (at.empty() ? "" : ", ") + std::to_string(l);
    error_at(diags, source, command_lines[1], "",
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
      error_at(diags, source, w.line, "",
               fmt::format("'{}' uses {}, which the script does not set", w.text, w.unresolved.front()));
      return std::nullopt;
    }
    if (!is_flag(w.text)) {
      std::string after;
      if (!a.flags.empty() && !a.flags.back().values.empty())
        after = fmt::format(" after '{}', which takes {} (an unquoted ${{ARRAY[@]}} or $VAR splits a quoted value at "
                            "its blanks, as bash does, and Megatron-LM's parser then refuses the rest too)",
                            as_words(a.flags.back()),
                            find_megatron_flag(a.flags.back().name)->arity == 2 ? "values" : "one value");
      error_at(diags, source, w.line, "",
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
      error_at(diags, source, w.line, name,
               fmt::format("unknown flag: neither a gpuplan train flag nor a Megatron-LM argument "
                           "(megatron/training/arguments.py at {}){}",
                           megatron_commit(), did_you_mean(name, all_names())));
      return std::nullopt;
    }
    if (!w.unresolved.empty() && !inline_value) {
      error_at(diags, source, w.line, name, fmt::format("the flag uses {}, which the script does not set",
                                                        w.unresolved.front()));
      return std::nullopt;
    }
    ++k;
    MegatronFlag f{name, {}};
    if (inline_value) {
      if (e->arity == 0) {
        error_at(diags, source, w.line, name,
                 fmt::format("'{}' is a switch and takes no value (given '{}')", name, inline_value->text));
        return std::nullopt;
      }
      f.values.push_back(*inline_value);
    } else if (e->arity == 1) {
      if (k >= words.size() || is_flag(words[k].text)) {
        error_at(diags, source, w.line, name, "expected a value after the flag");
        return std::nullopt;
      }
      f.values.push_back(words[k++]);
    } else if (e->arity == 2) {
      while (k < words.size() && !is_flag(words[k].text)) f.values.push_back(words[k++]);
      if (f.values.empty()) {
        error_at(diags, source, w.line, name, "expected one or more values after the flag");
        return std::nullopt;
      }
    } else if (e->arity == 3) {
      if (k < words.size() && !is_flag(words[k].text)) f.values.push_back(words[k++]);
    }
    a.flags.push_back(std::move(f));
  }
  return a;
}

// ---------------------------------------------------------------------------------------------------------------
// Flags -> scenario keys
namespace {

/// Argument groups whose flags never change the step time or memory gpuplan models: checkpointing, logging,
/// tokenizer, data, learning-rate schedule, seeds and initialization, evaluation, fault tolerance, profiling, and
/// the optimizer's hyperparameters (the regularization group: weight decay, clipping, Adam's betas).
const std::set<std::string_view> kIgnoredGroups{
    "CheckpointConfig",        "_add_checkpointing_args",      "LoggerConfig",
    "_add_logging_args",       "TokenizerConfig",              "_add_tokenizer_args",
    "_add_data_args",          "SchedulerConfig",              "_add_learning_rate_args",
    "RNGConfig",               "_add_initialization_args",     "ValidationConfig",
    "_add_validation_args",    "StragglerDetectionConfig",     "RerunStateMachineConfig",
    "FaultInjectorConfig",     "_add_one_logger_args",         "_add_ft_package_args",
    "_add_inprocess_restart_args", "_add_msc_args",            "_add_autoresume_args",
    "_add_workload_inspector_server_args", "ProfilingConfig",  "_add_regularization_args",
    "_add_inference_args",     "_add_sft_args"};

/// Single flags of other groups that do not change what gpuplan models (numerics, initialization, loss scaling,
/// router losses, bucket sizes, timeouts, process-group bookkeeping).
const std::set<std::string_view> kIgnoredNames{
    "--use-mcore-models", "--init-method-std", "--embedding-init-method-std", "--norm-epsilon",
    "--apply-layernorm-1p", "--apply-query-key-layer-scaling", "--apply-residual-connection-post-layernorm",
    "--calculate-per-token-loss", "--config-logger-dir", "--fp8-amax-history-len", "--fp8-amax-compute-algo",
    "--fp8-margin", "--fp8-interval", "--moe-router-load-balancing-type", "--moe-aux-loss-coeff",
    "--moe-z-loss-coeff", "--moe-input-jitter-eps", "--moe-router-topk-scaling-factor", "--moe-router-score-function",
    "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "--moe-router-pre-softmax",
    "--moe-per-layer-logging", "--moe-router-num-groups", "--moe-router-group-topk", "--rotary-interleaved",
    "--use-cpu-initialization", "--no-initialization", "--init-model-with-meta-device", "--rotary-base",
    "--rotary-percent", "--rotary-seq-len-interpolation-factor", "--use-rope-scaling", "--rope-scaling-factor",
    "--rotary-scaling-factor", "--mscale", "--mscale-all-dim", "--yarn-original-max-position-embeddings",
    "--yarn-beta-fast", "--yarn-beta-slow", "--yarn-correction-range-round-to-int",
    "--no-yarn-correction-range-round-to-int", "--make-vocab-size-divisible-by", "--onnx-safe",
    "--no-position-embedding", "--manual-gc", "--manual-gc-interval", "--no-manual-gc-eval", "--disable-manual-gc-eval",
    "--empty-unused-memory-level", "--exit-duration-in-mins", "--exit-interval", "--exit-signal",
    "--exit-signal-handler", "--exit-signal-handler-for-dataloader", "--exit-signal-handler-for-training",
    "--train-iters", "--train-samples", "--train-sync-interval", "--check-weight-hash-across-dp-replicas-interval",
    "--gpu-sniff-test-interval", "--iterations-to-skip", "--dataloader-type", "--no-check-for-nan-in-loss-and-grad",
    "--check-for-large-grads", "--result-rejected-tracker-filename", "--dump-param-to-param-group-map",
    "--hysteresis", "--initial-loss-scale", "--loss-scale", "--loss-scale-window", "--min-loss-scale",
    "--fp16-lm-cross-entropy", "--distributed-backend", "--distributed-timeout-minutes",
    "--distributed-timeout-seconds-after-init", "--local-rank", "--lazy-mpu-init", "--disable-gloo-process-groups",
    "--flight-recorder-dump-path", "--flight-recorder-include-stack-trace", "--flight-recorder-trace-buffer-size",
    "--disable-flight-recorder-dump-on-timeout", "--no-flight-recorder-dump-on-timeout",
    "--disable-flight-recorder-extra-dump-on-exec", "--no-flight-recorder-extra-dump-on-exec",
    "--disable-flight-recorder-include-only-active", "--no-flight-recorder-include-only-active",
    "--nccl-communicator-config-path", "--ddp-bucket-size", "--ddp-num-buckets", "--ddp-average-in-collective",
    "--ddp-pad-buckets-for-high-nccl-busbw", "--no-align-param-gather", "--disable-align-grad-reduce",
    "--no-align-grad-reduce", "--suggested-communication-unit-size", "--tp-comm-overlap-cfg",
    "--tp-comm-bootstrap-backend", "--enable-experimental", "--use-precision-aware-optimizer", "--moe-layer-freq",
    "--qk-layernorm", "--mtp-loss-scaling-factor", "--cache-mla-latents", "--no-load-optim", "--no-load-rng"};

/// Flags that state what gpuplan already assumes: fused kernels (Transformer Engine, Megatron's fusions), grouped
/// expert GEMMs, fp32 softmax.
const std::map<std::string_view, std::string_view> kAssumed{
    {"--moe-permute-fusion", "fused kernels"},
    {"--moe-router-fusion", "fused kernels"},
    {"--fused-residual-rmsnorm", "fused kernels"},
    {"--use-te-activation-func", "fused kernels"},
    {"--moe-grouped-gemm", "the experts priced as grouped GEMMs"},
    {"--attention-softmax-in-fp32", "fused attention"},
    {"--moe-router-dtype", "the router's cost is not priced apart"},
    {"--moe-router-padding-for-fp8", "the router's cost is not priced apart"},
    {"--moe-router-padding-for-quantization", "the router's cost is not priced apart"}};

/// Flags read as model shape (checked against -m MODEL) or as plan keys by map_megatron below.
const std::set<std::string_view> kHandled{
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank", "--sequence-parallel", "--micro-batch-size", "--global-batch-size",
    "--seq-length", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
    "--tp-comm-overlap", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--recompute-modules", "--recompute-activations", "--fp8-format", "--fp8-recipe", "--fp8-param-gather",
    "--fp4-format", "--fp4-recipe", "--bf16", "--fp16", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout", "--mtp-num-layers", "--moe-token-dispatcher-type", "--moe-enable-deepep",
    "--moe-flex-dispatcher-backend", "--overlap-moe-expert-parallel-comm", "--cpu-offloading-num-layers",
    "--use-flash-attn", "--attention-backend", "--transformer-impl", "--attention-dropout", "--hidden-dropout",
    "--optimizer", "--optimizer-cpu-offload", "--optimizer-offload-fraction", "--exp-avg-dtype", "--exp-avg-sq-dtype",
    "--main-grads-dtype", "--main-params-dtype", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16",
    "--cp-comm-type", "--no-overlap-p2p-communication",
    // model shape
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--kv-channels", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
    "--moe-shared-expert-intermediate-size", "--vocab-size", "--padded-vocab-size", "--swiglu",
    "--untie-embeddings-and-output-weights", "--max-position-embeddings", "--normalization",
    "--position-embedding-type",
    "--use-rotary-position-embeddings", "--disable-bias-linear", "--add-qkv-bias", "--multi-latent-attention",
    "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim"};

std::string as_typed(const MegatronFlag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

class Mapper {
 public:
  Mapper(const MegatronArgs& a, Diagnostics& d) : a_(a), diags_(d) {
    for (const auto& f : a.flags) last_[f.name] = &f;
  }

  std::optional<MegatronMapping> run() {
    m_.launcher_gpus = a_.launcher_gpus;
    m_.launcher_text = a_.launcher_text;
    std::set<std::string> seen;
    for (const auto& f : a_.flags) {
      if (!seen.insert(f.name).second) continue;
      const MegatronFlagName* e = find_megatron_flag(f.name);
      if (kHandled.count(f.name)) continue;
      if (kIgnoredNames.count(f.name) || (e != nullptr && kIgnoredGroups.count(e->group))) {
        m_.ignored.push_back(f.name);
        for (const auto& v : f.values)
          for (const auto& u : v.unresolved)
            m_.notes.push_back(fmt::format("{} uses {} (unset; ignored anyway)", f.name, u));
      } else if (auto it = kAssumed.find(f.name); it != kAssumed.end()) {
        m_.assumed.push_back(fmt::format("{} ({})", f.name, it->second));
      } else {
        refuse(f, "changes performance, and that is");
      }
    }
    parallel();
    batch();
    precision();
    recompute();
    pipeline_split();
    moe();
    attention();
    optimizer();
    shape();
    if (diags_.has_errors()) return std::nullopt;
    return m_;
  }

 private:
  const MegatronFlag* get(const char* name) const {
    auto it = last_.find(name);
    return it == last_.end() ? nullptr : it->second;
  }
  Diagnostic at(const MegatronFlag& f, std::string msg) const {
    const int line = f.values.empty() ? 0 : f.values.front().line;
    return Diagnostic{Severity::error, a_.source, f.name, line, 0, std::move(msg)};
  }
  void refuse(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {} {}", as_typed(f), why, kNotModelled)));
  }
  void bad(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {}", as_typed(f), why)));
  }

  /// The single value of `f`, refused when it uses a variable the script does not set.
  std::optional<std::string> value(const MegatronFlag& f) {
    if (f.values.empty()) return std::string();
    if (!f.values.front().unresolved.empty()) {
      bad(f, fmt::format("uses {}, which the script does not set", f.values.front().unresolved.front()));
      return std::nullopt;
    }
    return f.values.front().text;
  }
  std::optional<long long> integer(const char* name, long long lo = 1) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    auto v = value(*f);
    if (!v) return std::nullopt;
    long long n = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size() || n < lo) {
      bad(*f, fmt::format("expected an integer ≥ {}", lo));
      return std::nullopt;
    }
    return n;
  }
  std::optional<std::string> text(const char* name) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    return value(*f);
  }
  bool given(const char* name) const { return get(name) != nullptr; }
  template <class V>
  void set(const std::string& key, const V& v, const char* flag) {
    m_.keys[key] = v;
    m_.origin[key] = as_typed(*get(flag));
  }
  template <class V>
  void set_default(const std::string& key, const V& v, const std::string& why) {
    m_.keys[key] = v;
    m_.origin[key] = "--megatron-args (" + why + ")";
    m_.defaulted[key] = why;
  }

  void parallel() {
    if (auto v = integer("--tensor-model-parallel-size")) set("tp", *v, "--tensor-model-parallel-size");
    if (auto v = integer("--pipeline-model-parallel-size")) set("pp", *v, "--pipeline-model-parallel-size");
    if (auto v = integer("--context-parallel-size")) set("cp", *v, "--context-parallel-size");
    if (auto v = integer("--expert-model-parallel-size")) set("ep", *v, "--expert-model-parallel-size");
    if (auto v = integer("--expert-tensor-parallel-size")) m_.expert_tp = *v;
    if (auto v = integer("--num-virtual-stages-per-pipeline-rank"))
      set("virtual_stages", *v, "--num-virtual-stages-per-pipeline-rank");
    if (auto v = integer("--num-layers-per-virtual-pipeline-stage")) m_.layers_per_virtual_stage = *v;
    if (given("--num-virtual-stages-per-pipeline-rank") && given("--num-layers-per-virtual-pipeline-stage"))
      bad(*get("--num-layers-per-virtual-pipeline-stage"),
          "Megatron-LM takes only one of --num-layers-per-virtual-pipeline-stage and "
          "--num-virtual-stages-per-pipeline-rank");
    if (given("--sequence-parallel")) set("sequence_parallel", true, "--sequence-parallel");
    else if (a_.whole_command) set_default("sequence_parallel", false, "no --sequence-parallel");
    if (given("--use-distributed-optimizer")) set("zero", 1, "--use-distributed-optimizer");
    else if (a_.whole_command) set_default("zero", 0, "no --use-distributed-optimizer");
    auto onoff = [&](const char* flag, const char* key) {
      if (given(flag)) set(key, true, flag);
      else if (a_.whole_command) set_default(key, false, fmt::format("no {}", flag));
    };
    onoff("--overlap-grad-reduce", "overlap_grad_reduce");
    onoff("--overlap-param-gather", "overlap_param_gather");
    onoff("--tp-comm-overlap", "overlap_tp_comm");
    // The LM loss's kernels: Megatron-LM runs the unfused VocabParallelCrossEntropy unless
    // --cross-entropy-loss-fusion; --cross-entropy-fusion-impl picks the jit-fused passes (native, the default) or
    // Transformer Engine's one-pass kernel (te).
    if (given("--cross-entropy-loss-fusion")) {
      const auto impl = text("--cross-entropy-fusion-impl");
      if (impl && *impl != "native" && *impl != "te")
        bad(*get("--cross-entropy-fusion-impl"), "Megatron-LM's choices are native and te");
      else if (impl && *impl == "te")
        set("cross_entropy", "te", "--cross-entropy-fusion-impl");
      else
        set("cross_entropy", "native", "--cross-entropy-loss-fusion");
    } else if (a_.whole_command) {
      set_default("cross_entropy", "unfused", "no --cross-entropy-loss-fusion");
    }
    if (auto t = text("--cp-comm-type"); t && *t != "p2p")
      refuse(*get("--cp-comm-type"), "gpuplan prices context parallelism as Megatron's p2p ring; another type is");
  }

  void batch() {
    if (auto v = integer("--micro-batch-size")) set("micro_batch", *v, "--micro-batch-size");
    if (auto v = integer("--global-batch-size")) {
      set("global_batch", *v, "--global-batch-size");
      m_.global_batch_given = true;
    }
    if (auto v = integer("--seq-length")) set("seq", *v, "--seq-length");
  }

  void precision() {
    const bool bf16 = given("--bf16"), fp16 = given("--fp16");
    if (bf16 && fp16) bad(*get("--fp16"), "Megatron-LM refuses --bf16 with --fp16");
    auto fp8 = text("--fp8-format");
    if (given("--fp4-format")) refuse(*get("--fp4-format"), "FP4 training is");
    if (fp8) {
      if (*fp8 != "e4m3" && *fp8 != "hybrid") bad(*get("--fp8-format"), "expected e4m3 or hybrid");
      const auto recipe = text("--fp8-recipe").value_or("delayed");
      if (recipe != "delayed" && recipe != "tensorwise")
        refuse(*get("--fp8-recipe"),
               "gpuplan prices FP8 with per-tensor scaling (delayed or tensorwise); this recipe is");
      if (!bf16)
        refuse(*get("--fp8-format"),
               fp16 ? "FP8 GEMMs inside fp16 training are" : "FP8 GEMMs inside fp32 training are");
      else set("precision", "fp8", "--fp8-format");
    } else if (bf16) {
      set("precision", "bf16", "--bf16");
    } else if (fp16) {
      set("precision", "fp16", "--fp16");
    } else if (a_.whole_command) {
      set_default("precision", "fp32", "no --bf16 or --fp16: Megatron-LM trains in fp32");
    }
    if (given("--fp8-recipe") && !fp8) m_.ignored.push_back("--fp8-recipe");
    if (given("--fp4-recipe") && !given("--fp4-format")) m_.ignored.push_back("--fp4-recipe");
    if (given("--fp8-param-gather")) {
      if (fp8) set("fp8_params", true, "--fp8-param-gather");
      else m_.ignored.push_back("--fp8-param-gather");
    }
    // Gradient buffers: fp32 with bf16 unless --grad-reduce-in-bf16 (arguments.py, validate_args), the parameter
    // dtype otherwise unless --accumulate-allreduce-grads-in-fp32.
    if (given("--main-grads-dtype")) {
      if (auto t = text("--main-grads-dtype")) {
        if (*t == "bf16") set("gradient_bytes", 2, "--main-grads-dtype");
        else if (*t == "fp32") set("gradient_bytes", 4, "--main-grads-dtype");
        else bad(*get("--main-grads-dtype"), "expected fp32 or bf16");
      }
    } else if (given("--grad-reduce-in-bf16")) {
      set("gradient_bytes", 2, "--grad-reduce-in-bf16");
    } else if (given("--accumulate-allreduce-grads-in-fp32")) {
      set("gradient_bytes", 4, "--accumulate-allreduce-grads-in-fp32");
    } else if (a_.whole_command) {
      if (bf16) set_default("gradient_bytes", 4, "--bf16 without --grad-reduce-in-bf16: fp32 gradient buffers");
      else if (fp16) set_default("gradient_bytes", 2, "--fp16: gradient buffers in fp16");
      else set_default("gradient_bytes", 4, "fp32 training");
    }
    if (auto t = text("--main-params-dtype"); t && *t != "fp32")
      refuse(*get("--main-params-dtype"), "master weights in fp16 are");
  }

  void recompute() {
    auto gran = text("--recompute-granularity");
    if (given("--recompute-activations") && !gran) {
      set("recompute", "selective", "--recompute-activations");
      return;
    }
    if (!gran) {
      for (const char* f : {"--recompute-method", "--recompute-num-layers", "--recompute-modules"})
        if (given(f)) bad(*get(f), "needs --recompute-granularity (Megatron-LM)");
      if (a_.whole_command) set_default("recompute", "none", "no --recompute-granularity");
      return;
    }
    const MegatronFlag& g = *get("--recompute-granularity");
    if (*gran == "selective") {
      if (given("--recompute-method") || given("--recompute-num-layers"))
        bad(*get(given("--recompute-method") ? "--recompute-method" : "--recompute-num-layers"),
            "Megatron-LM takes no recompute method or layer count with selective granularity");
      if (const MegatronFlag* mods = get("--recompute-modules")) {
        if (!(mods->values.size() == 1 && mods->values[0].text == "core_attn"))
          refuse(*mods, "recomputing modules other than core attention alone (gpuplan's selective recompute) is");
      }
      set("recompute", "selective", "--recompute-granularity");
    } else if (*gran == "full") {
      auto method = text("--recompute-method");
      auto n = integer("--recompute-num-layers");
      if (!method) {
        bad(g, "Megatron-LM needs --recompute-method uniform or block with full granularity");
        return;
      }
      if (!given("--recompute-num-layers")) {
        bad(g, "Megatron-LM needs --recompute-num-layers with full granularity");
        return;
      }
      if (given("--recompute-modules")) bad(*get("--recompute-modules"), "applies only to selective granularity");
      if (!n) return;
      if (*method == "uniform") {
        if (*n == 1) set("recompute", "full", "--recompute-granularity");
        else refuse(*get("--recompute-num-layers"),
                    "uniform recompute in groups of more than one layer (one checkpoint per group) is");
      } else if (*method == "block") {
        m_.recompute_block_layers = *n;  // full when it covers every layer of a stage's chunk (apply_megatron)
        m_.recompute_block_flag = as_typed(*get("--recompute-method")) + " " + as_typed(*get("--recompute-num-layers"));
        set("recompute", "full", "--recompute-granularity");
      } else {
        bad(*get("--recompute-method"), "expected uniform or block");
      }
    } else {
      bad(g, "expected full or selective");
    }
  }

  void pipeline_split() {
    // Megatron-Core's uneven splits (transformer_block.py get_num_layers_to_build; the rules are gpuplan's
    // chunk_layers): one way at a time, as TransformerConfig.__post_init__ and arguments.py validate_args require.
    const bool layout = given("--pipeline-model-parallel-layout");
    const bool first_last =
        given("--decoder-first-pipeline-num-layers") || given("--decoder-last-pipeline-num-layers");
    const bool accounts =
        given("--account-for-embedding-in-pipeline-split") || given("--account-for-loss-in-pipeline-split");
    if (layout && (first_last || accounts))
      bad(*get("--pipeline-model-parallel-layout"),
          "Megatron-LM refuses a pipeline layout with other pipeline layout arguments ('pipeline_model_parallel_layout "
          "cannot be set with other pipeline layout arguments')");
    else if (first_last && accounts)
      bad(*get(given("--decoder-first-pipeline-num-layers") ? "--decoder-first-pipeline-num-layers"
                                                            : "--decoder-last-pipeline-num-layers"),
          "Megatron-LM refuses first/last stage layer counts with --account-for-embedding/loss-in-pipeline-split");
    if (layout && (given("--num-layers-per-virtual-pipeline-stage") || given("--num-virtual-stages-per-pipeline-rank")))
      bad(*get("--pipeline-model-parallel-layout"),
          "Megatron-LM takes no more than one of --num-layers-per-virtual-pipeline-stage, "
          "--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout (the layout gives the chunks)");
    if (first_last && given("--num-layers-per-virtual-pipeline-stage"))
      bad(*get("--num-layers-per-virtual-pipeline-stage"),
          "Megatron-LM: 'please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree "
          "when enable uneven pipeline parallelism'");
    if (auto t = text("--pipeline-model-parallel-layout")) set("pipeline_layout", *t, "--pipeline-model-parallel-layout");
    if (auto v = integer("--decoder-first-pipeline-num-layers"))
      set("first_stage_layers", *v, "--decoder-first-pipeline-num-layers");
    if (auto v = integer("--decoder-last-pipeline-num-layers"))
      set("last_stage_layers", *v, "--decoder-last-pipeline-num-layers");
    if (given("--account-for-embedding-in-pipeline-split"))
      set("embedding_in_pipeline_split", true, "--account-for-embedding-in-pipeline-split");
    if (given("--account-for-loss-in-pipeline-split"))
      set("loss_in_pipeline_split", true, "--account-for-loss-in-pipeline-split");
    // arguments.py: --no-overlap-p2p-communication (store_false, dest overlap_p2p_comm): the overlap is on by default
    // and forced off without the interleaved schedule.
    if (given("--no-overlap-p2p-communication"))
      set("overlap_p2p_comm", false, "--no-overlap-p2p-communication");
    if (auto v = integer("--mtp-num-layers", 0); v && *v > 0)
      refuse(*get("--mtp-num-layers"), "multi-token prediction modules are");
    if (auto v = integer("--cpu-offloading-num-layers", 0); v && *v > 0)
      refuse(*get("--cpu-offloading-num-layers"), "CPU offloading of activations is");
  }

  void moe() {
    const long long ep = m_.keys.contains("ep") ? m_.keys["ep"].get<long long>() : 1;
    auto disp = text("--moe-token-dispatcher-type");
    if (disp && *disp != "alltoall" && *disp != "allgather" && *disp != "flex")
      bad(*get("--moe-token-dispatcher-type"), "expected allgather, alltoall or flex");
    if (ep > 1) {
      if (!disp) {
        if (a_.whole_command)
          diags_.add(Diagnostic{Severity::error, a_.source, "--moe-token-dispatcher-type", 0, 0,
                                fmt::format("absent with --expert-model-parallel-size {}: Megatron-LM then dispatches "
                                            "tokens by all-gather, which gpuplan does not price (it prices the "
                                            "all-to-all dispatcher; give --moe-token-dispatcher-type alltoall): {}",
                                            ep, kNotModelled)});
      } else if (*disp == "allgather") {
        refuse(*get("--moe-token-dispatcher-type"),
               "gpuplan prices the all-to-all dispatcher; the all-gather one with expert parallelism is");
      } else if (*disp == "flex") {
        refuse(*get("--moe-token-dispatcher-type"),
               "gpuplan prices NCCL all-to-all; the flex dispatcher (DeepEP / HybridEP kernels) is");
      }
      if (given("--moe-enable-deepep"))
        refuse(*get("--moe-enable-deepep"), "gpuplan prices NCCL all-to-all; DeepEP dispatch is");
      if (given("--overlap-moe-expert-parallel-comm"))
        refuse(*get("--overlap-moe-expert-parallel-comm"),
               "overlapping the expert-parallel all-to-all with another micro-batch's compute is");
    } else {
      for (const char* f : {"--moe-token-dispatcher-type", "--moe-enable-deepep", "--moe-flex-dispatcher-backend",
                            "--overlap-moe-expert-parallel-comm"})
        if (given(f)) m_.ignored.push_back(fmt::format("{} (no expert parallelism)", f));
    }
    if (ep > 1 && given("--moe-flex-dispatcher-backend") && (!disp || *disp != "flex"))
      m_.ignored.push_back("--moe-flex-dispatcher-backend (not the flex dispatcher)");
  }

  void attention() {
    if (auto b = text("--attention-backend")) {
      if (*b == "flash" || *b == "fused" || *b == "auto") set("flash_attention", true, "--attention-backend");
      else if (*b == "unfused" || *b == "local") set("flash_attention", false, "--attention-backend");
      else bad(*get("--attention-backend"), "expected flash, fused, unfused, local or auto");
    } else if (given("--use-flash-attn")) {
      set("flash_attention", true, "--use-flash-attn");
    }
    if (auto t = text("--transformer-impl"); t && *t != "transformer_engine")
      refuse(*get("--transformer-impl"), "Megatron's local (non-Transformer-Engine) layers are");
    // Dropout: Megatron-LM's defaults are 0.1 for both (TransformerConfig).
    auto prob = [&](const char* flag) -> std::optional<double> {
      auto t = text(flag);
      if (!t) return std::nullopt;
      double v = 0;
      auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
      if (ec != std::errc() || p != t->data() + t->size() || !(v >= 0 && v < 1)) {
        bad(*get(flag), "expected a probability from 0 to 1");
        return std::nullopt;
      }
      return v;
    };
    const auto att = prob("--attention-dropout"), hid = prob("--hidden-dropout");
    if (att || hid || a_.whole_command) {
      const bool on = att.value_or(0.1) > 0 || hid.value_or(0.1) > 0;
      if (att || hid) set("dropout", on, att ? "--attention-dropout" : "--hidden-dropout");
      else set_default("dropout", on, "no --attention-dropout/--hidden-dropout: Megatron-LM's 0.1");
      if (att && hid)
        m_.origin["dropout"] = as_typed(*get("--attention-dropout")) + " " + as_typed(*get("--hidden-dropout"));
    }
  }

  void optimizer() {
    if (auto o = text("--optimizer")) {
      if (*o == "adam") set("optimizer", "adamw", "--optimizer");
      else if (*o == "sgd") set("optimizer", "sgd", "--optimizer");
      else refuse(*get("--optimizer"), "this optimizer is");
    }
    if (auto a = text("--exp-avg-dtype")) {
      const auto b = text("--exp-avg-sq-dtype").value_or("fp32");
      if ((*a == "bf16" || *a == "fp32") && *a == b) set("optimizer_states", *a, "--exp-avg-dtype");
      else
        refuse(*get("--exp-avg-dtype"),
               fmt::format("moment states as {} and {} (gpuplan: both fp32 or both bf16) are", *a, b));
    } else if (auto b2 = text("--exp-avg-sq-dtype"); b2 && *b2 != "fp32") {
      refuse(*get("--exp-avg-sq-dtype"), "a second moment not in fp32 with the first in fp32 is");
    }
    if (given("--optimizer-cpu-offload")) {
      auto frac = text("--optimizer-offload-fraction").value_or("1.0");
      if (frac == "1" || frac == "1.0") set("offload", "optimizer", "--optimizer-cpu-offload");
      else refuse(*get("--optimizer-offload-fraction"), "offloading part of the optimizer is");
    } else if (given("--optimizer-offload-fraction")) {
      m_.ignored.push_back("--optimizer-offload-fraction");
    }
  }

  void shape() {
    auto& s = m_.shape;
    auto num = [&](const char* flag, std::optional<std::int64_t>& field, const char* key) {
      if (auto v = integer(flag)) {
        field = *v;
        s.flag[key] = as_typed(*get(flag));
      }
    };
    num("--num-layers", s.layers, "layers");
    num("--hidden-size", s.hidden, "hidden");
    num("--ffn-hidden-size", s.ffn, "ffn");
    num("--num-attention-heads", s.heads, "heads");
    num("--kv-channels", s.head_dim, "head_dim");
    num("--num-experts", s.experts, "experts");
    num("--moe-router-topk", s.topk, "topk");
    num("--moe-ffn-hidden-size", s.moe_ffn, "moe_ffn");
    num("--moe-shared-expert-intermediate-size", s.shared_ffn, "shared_ffn");
    num("--vocab-size", s.vocab, "vocab");
    num("--max-position-embeddings", s.max_position, "max_position");
    num("--q-lora-rank", s.q_lora_rank, "q_lora_rank");
    num("--kv-lora-rank", s.kv_lora_rank, "kv_lora_rank");
    num("--qk-head-dim", s.qk_head_dim, "qk_head_dim");
    num("--qk-pos-emb-head-dim", s.qk_pos_head_dim, "qk_pos_head_dim");
    num("--v-head-dim", s.v_head_dim, "v_head_dim");
    if (given("--padded-vocab-size")) m_.ignored.push_back("--padded-vocab-size (the model file's vocabulary is used)");
    if (given("--group-query-attention")) {
      num("--num-query-groups", s.kv_heads, "kv_heads");
    } else if (given("--num-query-groups")) {
      m_.ignored.push_back("--num-query-groups (without --group-query-attention Megatron-LM ignores it)");
    } else if (a_.whole_command && s.heads) {
      s.kv_heads = s.heads;
      s.flag["kv_heads"] = "no --group-query-attention (one key/value head per query head)";
    }
    const bool whole = a_.whole_command;
    auto sw = [&](const char* flag, std::optional<bool>& field, const char* key, bool when_given, const char* absent) {
      if (given(flag)) {
        field = when_given;
        s.flag[key] = flag;
      } else if (whole) {
        field = !when_given;
        s.flag[key] = absent;
      }
    };
    sw("--swiglu", s.gated_mlp, "gated_mlp", true, "no --swiglu (a two-matrix GELU MLP)");
    sw("--untie-embeddings-and-output-weights", s.tied_embeddings, "tied_embeddings", false,
       "no --untie-embeddings-and-output-weights (tied embeddings)");
    sw("--disable-bias-linear", s.linear_bias, "linear_bias", false,
       "no --disable-bias-linear (biases on the linear layers)");
    sw("--multi-latent-attention", s.mla, "mla", true, "no --multi-latent-attention");
    if (given("--add-qkv-bias") || s.linear_bias) {
      s.qkv_bias = given("--add-qkv-bias") || s.linear_bias.value_or(false);
      s.flag["qkv_bias"] = given("--add-qkv-bias") ? "--add-qkv-bias" : s.flag["linear_bias"];
    }
    if (auto n = text("--normalization")) {
      if (*n == "RMSNorm" || *n == "LayerNorm") s.rmsnorm = *n == "RMSNorm";
      else refuse(*get("--normalization"), "this normalization is");
      s.flag["rmsnorm"] = as_typed(*get("--normalization"));
    } else if (whole) {
      s.rmsnorm = false;
      s.flag["rmsnorm"] = "no --normalization (LayerNorm)";
    }
    if (auto p = text("--position-embedding-type")) {
      if (*p == "rope" || *p == "yarn") s.position = wl::PositionKind::rope;
      else if (*p == "learned_absolute") s.position = wl::PositionKind::learned;
      else if (*p == "none") s.position = wl::PositionKind::none;
      else refuse(*get("--position-embedding-type"), "this position embedding is");
      s.flag["position"] = as_typed(*get("--position-embedding-type"));
    } else if (given("--use-rotary-position-embeddings")) {
      s.position = wl::PositionKind::rope;
      s.flag["position"] = "--use-rotary-position-embeddings";
    } else if (whole) {
      s.position = wl::PositionKind::learned;
      s.flag["position"] = "no --position-embedding-type (learned_absolute)";
    }
  }

  const MegatronArgs& a_;
  Diagnostics& diags_;
  std::map<std::string, const MegatronFlag*> last_;
  MegatronMapping m_;
};

}  // namespace

std::optional<MegatronMapping> map_megatron(const MegatronArgs& args, Diagnostics& diags) {
  Diagnostics local;
  auto m = Mapper(args, local).run();
  diags.append(local);
  return m;
}

// ---------------------------------------------------------------------------------------------------------------
// With the model: shape checks, model-dependent keys, conflicts

namespace {
std::string position_name(wl::PositionKind p) {
  switch (p) {
    case wl::PositionKind::rope: return "rope";
    case wl::PositionKind::learned: return "learned_absolute";
    case wl::PositionKind::alibi: return "alibi";
    case wl::PositionKind::none: return "none";
  }
  return "?";
}
}  // namespace

bool apply_megatron(const MegatronMapping& m, const wl::TransformerArch& arch, nlohmann::json& j,
                    std::map<std::string, std::string>& origin, Diagnostics& diags) {
  const bool before = diags.has_errors();
  auto mismatch = [&](const char* key, const std::string& megatron_value, const std::string& model_value) {
    const auto it = m.shape.flag.find(key);
    diags.error("", it != m.shape.flag.end() ? it->second : key,
                fmt::format("the Megatron-LM arguments say {} = {}, the model '{}' has {}", key, megatron_value,
                            arch.id, model_value));
  };
  const auto& s = m.shape;
  auto eq = [&](const char* key, const std::optional<std::int64_t>& want, std::int64_t have) {
    if (want && *want != have) mismatch(key, std::to_string(*want), std::to_string(have));
  };
  auto eqb = [&](const char* key, const std::optional<bool>& want, bool have, const char* yes, const char* no) {
    if (want && *want != have) mismatch(key, *want ? yes : no, have ? yes : no);
  };
  eq("layers", s.layers, arch.layers);
  eq("hidden", s.hidden, arch.hidden);
  eq("heads", s.heads, arch.heads);
  if (!arch.mla) {
    eq("kv_heads", s.kv_heads, arch.kv_heads);
    eq("head_dim", s.head_dim, arch.head_dim);
  }
  if (s.ffn) {
    // The dense FFN width; an MoE model without dense layers has none to compare.
    const bool has_dense = !arch.moe || arch.moe_layer_count() < arch.layers;
    if (has_dense) eq("ffn", s.ffn, arch.intermediate);
  }
  eq("vocab", s.vocab, arch.vocab);
  if (s.max_position && arch.position == wl::PositionKind::learned)
    eq("max_position", s.max_position, arch.max_position);
  const std::int64_t experts = arch.moe ? arch.moe->num_experts : 0;
  eq("experts", s.experts, experts);
  if (arch.moe) {
    eq("topk", s.topk, arch.moe->experts_per_token);
    eq("moe_ffn", s.moe_ffn, arch.moe->expert_intermediate);
    eq("shared_ffn", s.shared_ffn, arch.moe->shared_experts * arch.moe->shared_intermediate);
  }
  eqb("gated_mlp", s.gated_mlp, arch.mlp == wl::MlpKind::gated, "a gated (SwiGLU) MLP", "a two-matrix MLP");
  eqb("tied_embeddings", s.tied_embeddings, arch.tied_embeddings, "tied embeddings", "untied embeddings");
  eqb("rmsnorm", s.rmsnorm, arch.norm == wl::NormKind::rmsnorm, "RMSNorm", "LayerNorm");
  eqb("linear_bias", s.linear_bias, arch.o_bias || arch.mlp_bias, "biases on the linear layers",
      "no biases on the output and MLP projections");
  eqb("qkv_bias", s.qkv_bias, arch.qkv_bias, "a QKV bias", "no QKV bias");
  eqb("mla", s.mla, arch.mla.has_value(), "multi-latent attention", "no multi-latent attention");
  if (arch.mla) {
    eq("q_lora_rank", s.q_lora_rank, arch.mla->q_lora_rank);
    eq("kv_lora_rank", s.kv_lora_rank, arch.mla->kv_lora_rank);
    eq("qk_head_dim", s.qk_head_dim, arch.mla->qk_nope_head_dim);
    eq("qk_pos_head_dim", s.qk_pos_head_dim, arch.mla->qk_rope_head_dim);
    eq("v_head_dim", s.v_head_dim, arch.mla->v_head_dim);
  }
  if (s.position && *s.position != arch.position)
    mismatch("position", position_name(*s.position), position_name(arch.position));
  if (diags.has_errors() && !before) return false;

  nlohmann::json keys = m.keys;
  std::map<std::string, std::string> korigin = m.origin;
  // The layout sizes the flags set, else gpuplan's flags or scenario, else 1.
  auto size = [&](const char* key) -> long long {
    if (keys.contains(key)) return keys[key].get<long long>();
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<long long>() : 1;
  };
  const long long pp = size("pp"), tp = size("tp");
  if (m.expert_tp && *m.expert_tp != tp)
    diags.error("", "--expert-tensor-parallel-size",
                fmt::format("'--expert-tensor-parallel-size {}' with TP {}: expert tensor parallelism other than the "
                            "attention's TP is {}",
                            *m.expert_tp, tp, kNotModelled));
  if (m.layers_per_virtual_stage) {
    // arguments.py, validate_args: layers per stage = layers (+1 with the embedding, +1 with the loss accounted) / PP;
    // virtual stages = that / layers per virtual stage.
    const std::int64_t layers = arch.layers + (keys.contains("embedding_in_pipeline_split") ? 1 : 0) +
                                (keys.contains("loss_in_pipeline_split") ? 1 : 0);
    const std::string flag = fmt::format("--num-layers-per-virtual-pipeline-stage {}", *m.layers_per_virtual_stage);
    if (layers % pp != 0)
      diags.error("", flag, fmt::format("the {} layers are not divisible by PP {} (Megatron-LM: 'number of layers of "
                                        "the model must be divisible pipeline model parallel size')",
                                        layers, pp));
    else if ((layers / pp) % *m.layers_per_virtual_stage != 0)
      diags.error("", flag, fmt::format("{} layers per stage are not divisible by {} (Megatron-LM: 'number of layers "
                                        "per pipeline stage must be divisible number of layers per virtual pipeline "
                                        "stage')",
                                        layers / pp, *m.layers_per_virtual_stage));
    else {
      keys["virtual_stages"] = (layers / pp) / *m.layers_per_virtual_stage;
      korigin["virtual_stages"] = flag;
    }
  }
  const long long vp = keys.contains("virtual_stages") ? keys["virtual_stages"].get<long long>() : 1;
  if (m.recompute_block_layers) {
    const long long chunk = arch.layers / std::max(1LL, pp * vp);
    if (*m.recompute_block_layers < chunk)
      diags.error("", "--recompute-num-layers",
                  fmt::format("'{}': recomputing {} of the {} layers of each pipeline chunk (partial recompute) is {}",
                              m.recompute_block_flag, *m.recompute_block_layers, chunk, kNotModelled));
  }
  // Conflicts with gpuplan's own spellings (flags or the scenario file).
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string& key = it.key();
    if (!j.contains(key)) continue;
    const std::string where = origin.count(key) ? origin.at(key) : "/" + key;
    if (m.defaulted.count(key)) {
      if (j[key] != *it)
        diags.note("", where,
                   fmt::format("{} = {} overrides what the Megatron-LM command line implies ({} = {}: {})", key,
                               j[key].dump(), key, it->dump(), m.defaulted.at(key)));
      continue;
    }
    bool same = j[key] == *it;
    if (!same && j[key].is_number() && it->is_number()) same = j[key].get<double>() == it->get<double>();
    if (!same)
      diags.error("", korigin.at(key),
                  fmt::format("sets {} = {}, but {} sets it to {}: give the knob once", key, it->dump(), where,
                              j[key].dump()));
  }
  if (diags.has_errors() && !before) return false;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    if (j.contains(it.key()) && m.defaulted.count(it.key())) continue;
    j[it.key()] = *it;
    origin[it.key()] = korigin.at(it.key());
  }
  if (m.launcher_gpus && !j.contains("gpus")) {
    j["gpus"] = *m.launcher_gpus;
    origin["gpus"] = m.launcher_text;
    diags.note("", "--megatron-args",
               fmt::format("{} GPUs from the launcher ({}); --gpus overrides", *m.launcher_gpus, m.launcher_text));
  }
  std::string mapped;
  for (const auto& [key, from] : korigin) mapped += fmt::format("{}{} = {} ({})", mapped.empty() ? "" : "; ", key,
                                                                keys[key].dump(), from);
  if (!mapped.empty()) diags.note("", "Megatron-LM", "mapped: " + mapped);
  auto join = [](const std::vector<std::string>& v) {
    std::string o;
    for (const auto& x : v) o += (o.empty() ? "" : ", ") + x;
    return o;
  };
  if (!m.ignored.empty())
    diags.note("", "Megatron-LM",
               "ignored (they do not change the step time or memory gpuplan models): " + join(m.ignored));
  if (!m.assumed.empty()) diags.note("", "Megatron-LM", "already gpuplan's assumption: " + join(m.assumed));
  for (const auto& n : m.notes) diags.note("", "Megatron-LM", n);
  return true;
}

bool check_megatron_batch(const MegatronMapping& m, const wl::TrainingPlan& plan, Diagnostics& diags) {
  if (!m.global_batch_given) return true;
  const long long mb = plan.micro_batch, dp = plan.par.dp, gb = plan.global_batch;
  if (mb > 0 && dp > 0 && gb % (mb * dp) == 0) return true;
  diags.error("", "--global-batch-size",
              fmt::format("global batch size ({}) is not divisible by micro batch size ({}) times data parallel size "
                          "({}): Megatron-LM refuses it (megatron/core/num_microbatches_calculator.py)",
                          gb, mb, dp));
  return false;
}

}  // namespace gpuplan::cli

namespace gpuplan::cli {

std::optional<MegatronMapping> megatron_overlay(const std::string& data_dir, const std::optional<std::string>& file,
                                                const std::vector<std::string>& typed, nlohmann::json& j,
                                                std::map<std::string, std::string>& origin, Diagnostics& diags) {
  MegatronArgs all;
  if (file) {
    const std::string source = *file == "-" ? "<stdin>" : *file;
    auto text = json_io::read_text_file(*file == "-" ? "/dev/stdin" : *file, diags);
    if (!text) return std::nullopt;
    auto cmd = read_megatron_script(*text, source, diags);
    if (!cmd) return std::nullopt;
    auto args = parse_megatron_words(cmd->words, true, source, diags);
    if (!args) return std::nullopt;
    all = std::move(*args);
    all.launcher_gpus = cmd->launcher_gpus;
    all.launcher_text = cmd->launcher_text;
  }
  if (!typed.empty()) {
    std::vector<ShellWord> words;
    for (const auto& t : typed) words.push_back(ShellWord{t, {}, 0});
    auto args = parse_megatron_words(words, false, "", diags);
    if (!args) return std::nullopt;
    all.flags.insert(all.flags.end(), args->flags.begin(), args->flags.end());
    if (!file) all.source.clear();
    all.whole_command = file.has_value();
  }
  auto m = map_megatron(all, diags);
  if (!m) return std::nullopt;
  const auto model_where = origin.count("model") ? origin.at("model") : std::string("--model");
  if (!j.contains("model") || !j["model"].is_string()) {
    diags.error("", "--model",
                "the Megatron-LM arguments need -m MODEL (a library id or a config.json): gpuplan does not build a "
                "model from --num-layers, --hidden-size, ...; it checks them against the model");
    return std::nullopt;
  }
  auto lib = wl_io::load_model_library(data_dir);
  if (!lib.ok()) {
    diags.append(lib.diagnostics());
    return std::nullopt;
  }
  auto entry = wl_io::resolve_model(lib.value(), j["model"].get<std::string>());
  if (!entry.ok()) {
    for (auto d : entry.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = model_where;
      diags.add(d);
    }
    return std::nullopt;
  }
  if (!apply_megatron(*m, entry->arch, j, origin, diags)) return std::nullopt;
  return m;
}

}  // namespace gpuplan::cli
