// The if/elif/else conditions of a launch script (shell_conditions.hpp).
#include "shell_conditions.hpp"

#include <charconv>

namespace gpuplan::cli::shell_conditions {

Tri tri_not(Tri t) { return t == Tri::unknown ? t : (t == Tri::yes ? Tri::no : Tri::yes); }

/// One operand's value; nullopt when it depends on something gpuplan cannot know (a command substitution, a variable
/// set in an undecided branch). A bare reference to a variable the script never sets (`"$WANDB_API_KEY"`, `"$1"`)
/// reads as empty, the environment gpuplan assumes (the same assumption that takes ${NAME:-default}'s default);
/// `assumed` collects those names for a note.
std::optional<std::string> operand(const ShellWord& w, std::vector<std::string>& assumed) {
  if (w.unresolved.empty()) return w.text;
  if (w.unresolved.size() == 1 && w.unresolved.front() == w.text && w.text.size() > 1 && w.text[0] == '$' &&
      w.text[1] != '(') {
    assumed.push_back(w.text);
    return std::string();
  }
  return std::nullopt;
}

std::optional<long long> integer_of(const std::string& s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// One test: `[ ... ]`, `[[ ... ]]`, `test ...` or `true`/`false`, optionally after `!`.
Tri eval_test(std::vector<ShellWord> w, std::vector<std::string>& assumed) {
  bool negate = false;
  while (!w.empty() && w.front().text == "!" && w.front().unresolved.empty()) {
    negate = !negate;
    w.erase(w.begin());
  }
  if (w.empty()) return Tri::unknown;
  auto done = [&](Tri t) { return negate ? tri_not(t) : t; };
  const std::string head = w.front().text;
  if (w.size() == 1 && (head == "true" || head == ":")) return done(Tri::yes);
  if (w.size() == 1 && head == "false") return done(Tri::no);
  std::vector<ShellWord> a;
  const bool double_bracket = head == "[[";
  if (head == "[[" && w.back().text == "]]") a.assign(w.begin() + 1, w.end() - 1);
  else if (head == "[" && w.back().text == "]") a.assign(w.begin() + 1, w.end() - 1);
  else if (head == "test") a.assign(w.begin() + 1, w.end());
  else return Tri::unknown;  // a command: its exit status is not known
  while (!a.empty() && a.front().text == "!" && a.front().unresolved.empty()) {
    negate = !negate;
    a.erase(a.begin());
  }
  auto truth = [&](bool b) { return done(b ? Tri::yes : Tri::no); };
  if (a.size() == 1) {
    auto v = operand(a[0], assumed);
    return v ? truth(!v->empty()) : Tri::unknown;
  }
  if (a.size() == 2 && (a[0].text == "-n" || a[0].text == "-z")) {
    auto v = operand(a[1], assumed);
    if (!v) return Tri::unknown;
    return truth(a[0].text == "-n" ? !v->empty() : v->empty());
  }
  if (a.size() == 3) {
    const std::string op = a[1].text;
    auto l = operand(a[0], assumed), r = operand(a[2], assumed);
    if (!l || !r) return Tri::unknown;
    if (op == "=" || op == "==" || op == "!=") {
      // Inside [[ ]] the right side is a pattern: one with glob characters is not compared as text.
      if (double_bracket && r->find_first_of("*?[") != std::string::npos) return Tri::unknown;
      return truth((*l == *r) == (op != "!="));
    }
    static const char* const kNum[] = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"};
    for (const char* n : kNum)
      if (op == n) {
        auto x = integer_of(*l), y = integer_of(*r);
        if (!x || !y) return Tri::unknown;
        const bool b = op == "-eq"   ? *x == *y
                       : op == "-ne" ? *x != *y
                       : op == "-lt" ? *x < *y
                       : op == "-le" ? *x <= *y
                       : op == "-gt" ? *x > *y
                                     : *x >= *y;
        return truth(b);
      }
  }
  return Tri::unknown;  // file tests (-f, -d), regex matches, ...
}

/// An if/elif condition: tests joined by && and || (left to right, as bash groups an and-or list).
Tri eval_condition(const std::vector<std::pair<std::string, std::vector<ShellWord>>>& list,
                   std::vector<std::string>& assumed) {
  Tri acc = Tri::unknown;
  bool first = true;
  for (const auto& [op, words] : list) {
    if (!first && op != "&&" && op != "||") return Tri::unknown;  // `;`, `|`, `&` inside a condition
    if (!first && op == "&&" && acc == Tri::no) continue;
    if (!first && op == "||" && acc == Tri::yes) continue;
    const Tri t = eval_test(words, assumed);
    if (first) acc = t;
    else if (op == "&&") acc = (acc == Tri::yes) ? t : (t == Tri::no ? Tri::no : Tri::unknown);
    else acc = (acc == Tri::no) ? t : (t == Tri::yes ? Tri::yes : Tri::unknown);
    first = false;
  }
  return acc;
}


/// Whether the statements being read run: no inside any branch that does not, unknown inside an undecided one.
Tri running(const std::vector<Block>& blocks) {
  Tri t = Tri::yes;
  for (const auto& b : blocks) {
    if (b.branch == Tri::no) return Tri::no;
    if (b.branch == Tri::unknown) t = Tri::unknown;
  }
  return t;
}

}  // namespace gpuplan::cli::shell_conditions
