// Bash arithmetic expansion (shell_arithmetic.hpp): a recursive-descent evaluator over bash(1)'s operator table,
// highest precedence last: ?: < || < && < | < ^ < & < == != < comparisons < << >> < + - < * / % < ** < unary.
#include "shell_arithmetic.hpp"

#include <cctype>
#include <climits>

#include <fmt/format.h>

namespace gpuplan::cli::shell_arithmetic {

namespace {

/// Variables whose values are expressions nest (A="B*2", B=3): bash's own limit on that recursion is 1024; a script
/// that goes deeper than a few levels is a loop.
constexpr int kMaxArithDepth = 32;

class ArithParser {
 public:
  ArithParser(std::string_view s, const std::function<VarValue(const std::string&)>& lookup, int depth)
      : s_(s), lookup_(lookup), depth_(depth) {}

  Result run() {
    skip();
    if (i_ >= s_.size()) return Result{0, {}};  // $(( )) is 0 in bash
    const long long v = ternary();
    skip();
    if (why_.empty() && i_ < s_.size()) fail(fmt::format("unexpected '{}'", s_.substr(i_)));
    if (!why_.empty()) return Result{std::nullopt, why_};
    return Result{v, {}};
  }

 private:
  bool failed() const { return !why_.empty(); }
  long long fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return 0;
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }
  /// Consumes `op` when it comes next and is not the start of a longer operator in `longer` ("<" but not "<<").
  bool eat(std::string_view op, std::string_view longer = {}) {
    skip();
    if (s_.substr(i_, op.size()) != op) return false;
    for (std::size_t k = 0; k < longer.size(); ++k)
      if (i_ + op.size() < s_.size() && s_[i_ + op.size()] == longer[k]) return false;
    i_ += op.size();
    return true;
  }
  long long overflow(const char* op) { return fail(fmt::format("the result of '{}' overflows 64-bit integers", op)); }

  long long ternary() {
    const long long c = logical_or();
    if (failed()) return 0;
    if (!eat("?")) return c;
    const long long a = ternary();
    if (!eat(":")) return fail("'?' without its ':'");
    const long long b = ternary();
    return c != 0 ? a : b;
  }
  long long logical_or() {
    long long v = logical_and();
    while (!failed() && eat("||")) {
      const long long r = logical_and();
      v = (v != 0 || r != 0) ? 1 : 0;
    }
    return v;
  }
  long long logical_and() {
    long long v = bit_or();
    while (!failed() && eat("&&")) {
      const long long r = bit_or();
      v = (v != 0 && r != 0) ? 1 : 0;
    }
    return v;
  }
  long long bit_or() {
    long long v = bit_xor();
    while (!failed() && eat("|", "|=")) v |= bit_xor();
    return v;
  }
  long long bit_xor() {
    long long v = bit_and();
    while (!failed() && eat("^", "=")) v ^= bit_and();
    return v;
  }
  long long bit_and() {
    long long v = equality();
    while (!failed() && eat("&", "&=")) v &= equality();
    return v;
  }
  long long equality() {
    long long v = relational();
    while (!failed()) {
      if (eat("==")) v = v == relational() ? 1 : 0;
      else if (eat("!=")) v = v != relational() ? 1 : 0;
      else break;
    }
    return v;
  }
  long long relational() {
    long long v = shift();
    while (!failed()) {
      if (eat("<=")) v = v <= shift() ? 1 : 0;
      else if (eat(">=")) v = v >= shift() ? 1 : 0;
      else if (eat("<", "<=")) v = v < shift() ? 1 : 0;
      else if (eat(">", ">=")) v = v > shift() ? 1 : 0;
      else break;
    }
    return v;
  }
  long long shift() {
    long long v = additive();
    while (!failed()) {
      const bool left = eat("<<", "=");
      if (!left && !eat(">>", "=")) break;
      const long long n = additive();
      if (n < 0 || n > 62) return fail(fmt::format("a shift by {} bits", n));
      if (left) {
        if (v < 0 || v > (LLONG_MAX >> n)) return overflow("<<");
        v <<= n;
      } else {
        v >>= n;
      }
    }
    return v;
  }
  long long additive() {
    long long v = multiplicative();
    while (!failed()) {
      skip();
      if (s_.substr(i_, 2) == "++" || s_.substr(i_, 2) == "--")
        return fail("++ and -- change variables, which gpuplan does not evaluate");
      const bool plus = eat("+", "+=");
      if (!plus && !eat("-", "-=")) break;
      const long long r = multiplicative();
      if (plus ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v)) return overflow(plus ? "+" : "-");
    }
    return v;
  }
  long long multiplicative() {
    long long v = power();
    while (!failed()) {
      char op = 0;
      if (eat("*", "*=")) op = '*';
      else if (eat("/", "=")) op = '/';
      else if (eat("%", "=")) op = '%';
      else break;
      const long long r = power();
      if (failed()) return 0;
      if (op == '*') {
        if (__builtin_mul_overflow(v, r, &v)) return overflow("*");
      } else if (r == 0) {
        return fail(op == '/' ? "division by zero, which bash refuses" : "remainder by zero, which bash refuses");
      } else if (v == LLONG_MIN && r == -1) {
        return overflow(op == '/' ? "/" : "%");
      } else {
        v = op == '/' ? v / r : v % r;
      }
    }
    return v;
  }
  long long power() {
    const long long base = unary();
    if (failed() || !eat("**")) return base;
    const long long e = power();  // right to left
    if (failed()) return 0;
    if (e < 0) return fail("a negative exponent, which bash refuses");
    long long v = 1;
    for (long long k = 0; k < e; ++k) {
      if (__builtin_mul_overflow(v, base, &v)) return overflow("**");
      if (v == 0 || v == 1) break;
    }
    return v;
  }
  long long unary() {
    skip();
    if (failed() || i_ >= s_.size()) return fail("an operand is missing");
    const char c = s_[i_];
    if ((c == '+' || c == '-') && i_ + 1 < s_.size() && s_[i_ + 1] == c)
      return fail("++ and -- change variables, which gpuplan does not evaluate");
    if (c == '-') {
      ++i_;
      const long long v = unary();
      if (v == LLONG_MIN) return overflow("-");
      return -v;
    }
    if (c == '+') {
      ++i_;
      return unary();
    }
    if (c == '!') {
      ++i_;
      return unary() == 0 ? 1 : 0;
    }
    if (c == '~') {
      ++i_;
      return ~unary();
    }
    return primary();
  }
  long long primary() {
    skip();
    if (i_ >= s_.size()) return fail("an operand is missing");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      const long long v = ternary();
      if (!failed() && !eat(")")) return fail("a '(' is not closed");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return constant();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t at = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      const std::string name(s_.substr(at, i_ - at));
      skip();
      if (i_ < s_.size() && s_[i_] == '=' && (i_ + 1 >= s_.size() || s_[i_ + 1] != '='))
        return fail(fmt::format("'{}=' assigns, which gpuplan does not evaluate", name));
      return variable(name);
    }
    return fail(fmt::format("unexpected '{}'", s_.substr(i_)));
  }
  long long constant() {
    const std::size_t at = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '#' || s_[i_] == '.'))
      ++i_;
    const std::string t(s_.substr(at, i_ - at));
    int base = 10;
    std::string digits = t;
    if (const auto hash = t.find('#'); hash != std::string::npos) {
      // base#digits (bash: bases 2 to 64; 2 to 36 here, the digits 0-9 and a-z in either case)
      int b = 0;
      for (std::size_t k = 0; k < hash; ++k)
        b = t[k] >= '0' && t[k] <= '9' && b < 100 ? b * 10 + (t[k] - '0') : 100;
      if (b < 2 || b > 36 || hash + 1 >= t.size()) return fail(fmt::format("'{}' is not an integer in a base 2 to 36", t));
      base = b;
      digits = t.substr(hash + 1);
    } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
      base = 16;
      digits = t.substr(2);
    } else if (t.size() > 1 && t[0] == '0') {
      base = 8;
      digits = t.substr(1);
    }
    long long v = 0;
    for (char d : digits) {
      int x = -1;
      if (d >= '0' && d <= '9') x = d - '0';
      else if (d >= 'a' && d <= 'z') x = d - 'a' + 10;
      else if (d >= 'A' && d <= 'Z') x = d - 'A' + 10;
      if (x < 0 || x >= base)
        return fail(fmt::format("'{}' is not an integer{}", t,
                                t.find('.') != std::string::npos ? " (bash arithmetic has no fractions)" : ""));
      if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, x, &v))
        return fail(fmt::format("'{}' does not fit 64-bit integers", t));
    }
    return v;
  }
  long long variable(const std::string& name) {
    const VarValue vv = lookup_(name);
    if (!vv.text) return fail(fmt::format("{} {}", name, vv.why));
    std::string_view text = *vv.text;
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    if (text.empty()) return 0;  // set but empty: 0, as bash reads it
    if (depth_ >= kMaxArithDepth) return fail(fmt::format("{}'s value refers to itself", name));
    // bash evaluates a variable's value as an expression of its own ("2*3", "OTHER+1").
    const Result r = ArithParser(text, lookup_, depth_ + 1).run();
    if (!r.value) {
      // A value that is no expression at all is reported as it is ("1.5", "auto").
      return fail(r.why.rfind("unexpected", 0) == 0 || r.why.find("is not an integer") != std::string::npos
                      ? fmt::format("{} is '{}', not an integer", name, text)
                      : r.why);
    }
    return *r.value;
  }

  std::string_view s_;
  const std::function<VarValue(const std::string&)>& lookup_;
  int depth_;
  std::size_t i_ = 0;
  std::string why_;
};

}  // namespace

Result evaluate(std::string_view expr, const std::function<VarValue(const std::string&)>& lookup) {
  return ArithParser(expr, lookup, 0).run();
}

}  // namespace gpuplan::cli::shell_arithmetic
