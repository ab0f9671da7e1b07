// Shell text read into commands (shell_words.hpp): the lexer of pasted command lines and launch scripts that
// Megatron-LM's, vLLM's and SGLang's readers share (read_shell_commands).
#include "shell_words.hpp"
#include "shell_arithmetic.hpp"
#include "shell_conditions.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace gpuplan::cli {

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
  std::set<std::string> exported;          ///< names given to `export` where it ran
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

/// Whether `field` shows the unset reference `u` ("${PWD}", or "${NAME} (set inside ... )": the part before " (").
bool shows(const std::string& field, const std::string& u) {
  const auto cut = u.find(" (");
  return field.find(cut == std::string::npos ? u : u.substr(0, cut)) != std::string::npos;
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
        // Unquoted: each value splits on blanks; the first field joins the word being built. A value's unset
        // variables stay with the fields that show them ("--data-cache-path ${PWD}/cache" splits into a flag that
        // is resolved and a value that is not), or with every field when none does.
        bool first = true;
        for (const auto& p : parts) {
          // An arithmetic expansion is one number, never split (an unevaluated one keeps its text whole).
          const bool arith = !p.unresolved.empty() && p.text.rfind("$((", 0) == 0;
          auto fs = arith ? std::vector<std::string>{p.text} : fields(p.text);
          if (!p.unresolved.empty() && fs.empty()) fs.push_back(p.text);
          for (const auto& f : fs) {
            if (!first) end_word();
            cur_.text += f;
            for (const auto& u : p.unresolved)
              if (fs.size() == 1 || shows(f, u) || std::none_of(fs.begin(), fs.end(), [&](const std::string& g) {
                    return shows(g, u);
                  }))
                cur_.unresolved.push_back(u);
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
    // Built by appending: GCC 12 at -O3 misreads "literal" + std::string&& as an overlapping copy (-Wrestrict).
    std::string wrapped;
    wrapped.reserve(text.size() + 2);
    wrapped.push_back('"');
    wrapped.append(text);
    wrapped.push_back('"');
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

  /// $(( expr )) written as `text`: the parameters inside expanded first (as bash does), then the arithmetic
  /// (shell_arithmetic.hpp) over the script's variables; a value that cannot be had stays unresolved with the line
  /// and the reason, refused where a mapped flag uses it.
  bool arithmetic(const std::string& text, std::string_view expr, std::vector<ShellWord>& parts, std::string& error) {
    std::string err;
    const ShellWord w = expand_quoted(expr, line_, vars_, err);
    if (!err.empty()) return fail(error, err);
    if (!w.unresolved.empty()) {
      parts.push_back(unresolved(text, fmt::format("line {}: uses {}", line_, w.unresolved.front())));
      return true;
    }
    auto lookup = [this](const std::string& name) -> shell_arithmetic::VarValue {
      if (auto c = vars_.conditional.find(name); c != vars_.conditional.end())
        return {std::nullopt, fmt::format("is set inside an if/for/while/case block at line {}", c->second)};
      const ShellWord* v = nullptr;
      if (auto a = vars_.arrays.find(name); a != vars_.arrays.end() && !a->second.empty()) v = &a->second.front();
      if (auto sc = vars_.scalars.find(name); sc != vars_.scalars.end()) v = &sc->second;
      if (v == nullptr) return {std::nullopt, "is not set; bash would read it as 0"};
      if (!v->unresolved.empty()) return {std::nullopt, fmt::format("uses {}", v->unresolved.front())};
      return {v->text, {}};
    };
    const shell_arithmetic::Result r = shell_arithmetic::evaluate(w.text, lookup);
    if (r.value) parts.push_back(ShellWord{std::to_string(*r.value), {}, line_});
    else parts.push_back(unresolved(text, fmt::format("line {}: {}", line_, r.why)));
    return true;
  }

  bool dollar(std::vector<ShellWord>& parts, std::string& error) {
    const std::size_t at = i_;
    if (at + 1 >= s_.size()) {
      ++i_;
      parts.push_back(ShellWord{"$", {}, line_});
      return true;
    }
    const char n = s_[at + 1];
    if (n == '(' && at + 2 < s_.size() && s_[at + 2] == '(') {
      // $(( ... )): arithmetic when the inner parenthesis closes right before the outer one (else a command
      // substitution of a subshell, "$( (cd x; pwd) )").
      const auto e = closing(at + 1, '(', ')');
      if (e != std::string_view::npos && s_[e - 1] == ')' && closing(at + 2, '(', ')') == e - 1) {
        i_ = e + 1;
        return arithmetic(std::string(s_.substr(at, e - at + 1)), s_.substr(at + 3, e - 1 - (at + 3)), parts, error);
      }
    }
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

}  // namespace

std::string unresolved_phrase(const std::string& u) {
  return u.rfind("$((", 0) == 0 ? u + ", which gpuplan cannot evaluate" : u + ", which the script does not set";
}

void script_error_at(Diagnostics& diags, const std::string& file, int line, const std::string& pointer,
                     std::string message) {
  diags.add(Diagnostic{Severity::error, file, pointer, line, 0, std::move(message)});
}

namespace {
using shell_conditions::Block;
using shell_conditions::eval_condition;
using shell_conditions::running;
using shell_conditions::Tri;
}  // namespace

std::optional<std::vector<ShellCommand>> read_shell_commands(std::string_view text, const std::string& source,
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
  std::vector<Block> blocks;
  std::vector<ShellCommand> commands;
  // Assignments where the statements run: set; where they may run: marked unresolved at their uses (with the line
  // of the assignment); where they do not run: dropped.
  auto assign_scalar = [&](const std::string& name, const ShellWord& v, int line) {
    const Tri run = running(blocks);
    if (run == Tri::no) return;
    if (run == Tri::unknown) {
      vars.conditional.emplace(name, line);
      return;
    }
    vars.conditional.erase(name);
    vars.scalars[name] = v;
    vars.arrays.erase(name);
  };
  auto assign_array = [&](const std::string& name, bool append, std::vector<ShellWord> elems, int line) {
    const Tri run = running(blocks);
    if (run == Tri::no) return;
    if (run == Tri::unknown) {
      vars.conditional.emplace(name, line);
      return;
    }
    if (append && vars.conditional.count(name)) return;  // appending to an undecided value stays undecided
    vars.conditional.erase(name);
    auto& a = vars.arrays[name];
    if (!append) a.clear();
    else if (auto sc = vars.scalars.find(name); sc != vars.scalars.end()) a.insert(a.begin(), sc->second);
    a.insert(a.end(), elems.begin(), elems.end());
    vars.scalars.erase(name);
  };
  // An if/elif condition being read (it may run over several lines until `then`).
  bool in_condition = false, condition_elif = false;
  int condition_line = 0;
  std::vector<std::pair<std::string, std::vector<ShellWord>>> condition;
  auto open_branch = [&]() {
    std::vector<std::string> assumed;
    const Tri c = eval_condition(condition, assumed);
    // Inside a branch that does not run, nothing is decided (an elif's own if block is not counted).
    const std::vector<Block> outer(blocks.begin(), blocks.end() - (condition_elif && !blocks.empty() ? 1 : 0));
    const bool decides = running(outer) != Tri::no;
    if (!condition_elif) {
      blocks.push_back(Block{true, c, c == Tri::yes, c == Tri::unknown, condition_line});
    } else if (!blocks.empty() && blocks.back().is_if) {
      Block& b = blocks.back();
      b.branch = b.taken ? Tri::no : (b.maybe ? (c == Tri::no ? Tri::no : Tri::unknown) : c);
      b.taken = b.taken || (!b.maybe && c == Tri::yes);
      b.maybe = b.maybe || c == Tri::unknown;
      b.line = condition_line;
    }
    if (decides && c != Tri::unknown)
      for (const auto& name : assumed)
        diags.add(Diagnostic{Severity::note, source, "", condition_line, 0,
                             fmt::format("the condition reads {}, which the script does not set: taken as empty (gpuplan "
                                         "assumes an environment that sets nothing, as for ${{NAME:-default}})",
                                         name)});
    in_condition = false;
    condition.clear();
  };
  for (std::size_t li = 0; li < lines.size(); ++li) {
    auto [line, raw] = lines[li];
    // An array assignment may run over several lines: gather them until its parenthesis closes.
    if (!in_condition) {
      std::size_t k = 0;
      while (k < raw.size() && (raw[k] == ' ' || raw[k] == '\t')) ++k;
      const auto as = assignment(std::string_view(raw).substr(k));
      if (as) {
        const std::size_t eq = raw.find('=', k);
        if (eq + 1 < raw.size() && raw[eq + 1] == '(') {
          while (paren_balance(raw) > 0 && li + 1 < lines.size()) raw += "\n" + lines[++li].second;
          if (paren_balance(raw) > 0) {
            script_error_at(diags, source, line, "", fmt::format("the array {}=( is not closed", as->first));
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
              script_error_at(diags, source, eline, "", err);
              return std::nullopt;
            }
            for (auto& t : toks) elems.push_back(t.w);
            p = nl + 1;
            ++eline;
          }
          assign_array(as->first, as->second, std::move(elems), line);
          continue;
        }
      }
    }
    std::vector<Tok> toks;
    std::string err;
    Lexer lx(raw, line, vars);
    if (!lx.run(toks, err)) {
      script_error_at(diags, source, line, "", err);
      return std::nullopt;
    }
    // Statements split at ; && || | &, each with the operator before it.
    std::vector<std::pair<std::string, std::vector<ShellWord>>> statements(1);
    for (auto& t : toks) {
      if (t.op) statements.emplace_back(t.w.text, std::vector<ShellWord>{});
      else statements.back().second.push_back(t.w);
    }
    for (auto& [op, st] : statements) {
      if (st.empty()) continue;
      if (in_condition) {
        if (st.front().text != "then") {
          condition.emplace_back(condition.empty() ? std::string() : op, st);
          continue;
        }
        open_branch();
        st.erase(st.begin());
        if (st.empty()) continue;
      }
      const std::string first = st.front().text;
      if (first == "if" || first == "elif") {
        in_condition = true;
        condition_elif = first == "elif";
        condition_line = line;
        st.erase(st.begin());
        if (!st.empty()) condition.emplace_back(std::string(), st);
        continue;
      }
      if (first == "for" || first == "while" || first == "until" || first == "case" || first == "select") {
        blocks.push_back(Block{false, Tri::unknown, false, true, line, first == "case"});  // not evaluated
        continue;
      }
      if (first == "fi" || first == "done" || first == "esac") {
        if (!blocks.empty()) blocks.pop_back();
        continue;
      }
      if (first == "else") {
        if (!blocks.empty() && blocks.back().is_if) {
          Block& b = blocks.back();
          b.branch = b.taken ? Tri::no : (b.maybe ? Tri::unknown : Tri::yes);
          b.line = line;
        }
        st.erase(st.begin());
        if (st.empty()) continue;
      }
      if (first == "then" || first == "do") {
        st.erase(st.begin());
        if (st.empty()) continue;
      }
      // A case pattern (`--checkpoint-path)`, `-h|--help)`) opens its branch: it is no command.
      if (!blocks.empty() && blocks.back().is_case && st.front().text.ends_with(")")) {
        st.erase(st.begin());
        if (st.empty()) continue;
      }
      if (running(blocks) == Tri::no) continue;  // a branch that does not run
      // An array assignment inside a compound line (`then A+=(--mock-data); fi`): the words from NAME=( to the one
      // that ends in ')'.
      if (const auto as = assignment(st[0].text); as && st[0].text.size() > as->first.size() + (as->second ? 2 : 1) &&
                                                  st[0].text[as->first.size() + (as->second ? 2 : 1)] == '(' &&
                                                  st.back().text.ends_with(")")) {
        std::vector<ShellWord> elems(st.begin(), st.end());
        elems.front().text.erase(0, as->first.size() + (as->second ? 3 : 2));
        elems.back().text.pop_back();
        std::erase_if(elems, [](const ShellWord& w) { return w.text.empty() && w.unresolved.empty(); });
        assign_array(as->first, as->second, std::move(elems), line);
        continue;
      }
      std::size_t k = 0;
      const bool exporting = st[0].text == "export";
      if (exporting || st[0].text == "declare" || st[0].text == "local" || st[0].text == "readonly") k = 1;
      if (exporting && running(blocks) == Tri::yes)
        for (std::size_t j = 1; j < st.size(); ++j) {
          const auto as = assignment(st[j].text);
          const std::string name = as ? as->first : st[j].text;
          if (!name.empty() && std::all_of(name.begin(), name.end(), [&](char c) { return name_char(c, false); }))
            vars.exported.insert(name);
        }
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
        for (auto& [name, v] : assigns) assign_scalar(name, v, line);
        continue;
      }
      ShellCommand cmd;
      cmd.words.assign(st.begin() + static_cast<std::ptrdiff_t>(k), st.end());
      cmd.line = line;
      for (const auto& name : vars.exported)
        if (auto it = vars.scalars.find(name); it != vars.scalars.end() && it->second.unresolved.empty() &&
                                               !vars.conditional.count(name))
          cmd.environment[name] = it->second.text;
      for (const auto& [name, v] : assigns)
        if (v.unresolved.empty()) cmd.environment[name] = v.text;
      commands.push_back(std::move(cmd));
    }
  }
  return commands;
}

}  // namespace gpuplan::cli
