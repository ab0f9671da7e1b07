// long_functions ROOT DIR... [--max N] [--allow FILE]: lists every function body in the C++ sources under ROOT/DIR
// (.cpp, .hpp, recursively) longer than N lines (default 150), and exits 1 if one is not in the allow-list, or if an
// allow-list entry names no such function any more (so the list only shrinks). Issue #20: no function over ~150 lines
// in model/.
//
// A function's length runs from the first line of its declaration (return type, name, parameters) to its closing brace,
// inclusive. A lambda counts as part of the function it is written in; one at namespace scope counts as a function.
// The scan is lexical, not a parser: comments, string and character literals (raw strings too) and preprocessor lines
// are blanked first; then a '{' outside any function opens a function body if the text since the last ';', '{' or '}'
// holds a '(' and is not a namespace, class, struct, union or enum head, nor an initializer ('=' outside parentheses,
// unless a lambda follows it).
//
// Allow-list lines: `path/relative/to/ROOT function_name` ('#' starts a comment).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Function {
  std::string file;
  std::string name;
  int first_line = 0;
  int lines = 0;
};

// The source with comments, literals and preprocessor lines replaced by spaces (newlines kept, so lines still count).
std::string blank_non_code(const std::string& s) {
  std::string out = s;
  const std::size_t n = s.size();
  std::size_t i = 0;
  bool line_start = true;
  auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < n; ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < n) {
    const char c = s[i];
    if (line_start && c == '#') {  // a preprocessor line, with its continuations
      std::size_t j = i;
      while (j < n && !(s[j] == '\n' && (j == 0 || s[j - 1] != '\\'))) ++j;
      blank(i, j);
      i = j;
      continue;
    }
    if (c == '\n') { line_start = true; ++i; continue; }
    if (c != ' ' && c != '\t') line_start = false;
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      std::size_t j = s.find('\n', i);
      if (j == std::string::npos) j = n;
      blank(i, j);
      i = j;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      std::size_t j = s.find("*/", i + 2);
      j = j == std::string::npos ? n : j + 2;
      blank(i, j);
      i = j;
      continue;
    }
    if (c == 'R' && i + 1 < n && s[i + 1] == '"' &&
        (i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_') || s[i - 1] == 'u' ||
         s[i - 1] == 'U' || s[i - 1] == 'L' || s[i - 1] == '8')) {
      const std::size_t open = s.find('(', i + 2);
      if (open != std::string::npos) {
        // Built by append, not `")" + std::string&&`: GCC 12's -Wrestrict misfires on the latter at -O2+.
        std::string close(1, ')');
        close.append(s, i + 2, open - (i + 2));
        close.push_back('"');
        std::size_t j = s.find(close, open);
        j = j == std::string::npos ? n : j + close.size();
        blank(i, j);
        i = j;
        continue;
      }
    }
    if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1])) &&
                                    i + 1 < n && std::isxdigit(static_cast<unsigned char>(s[i + 1]))))) {
      // A digit separator (1'000) is not a character literal.
      std::size_t j = i + 1;
      while (j < n && s[j] != c && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
      blank(i, std::min(j + 1, n));
      i = j + 1;
      continue;
    }
    ++i;
  }
  return out;
}

bool has_word(const std::string& text, const std::string& word) {
  std::size_t p = 0;
  while ((p = text.find(word, p)) != std::string::npos) {
    const bool left = p == 0 || !(std::isalnum(static_cast<unsigned char>(text[p - 1])) || text[p - 1] == '_');
    const std::size_t e = p + word.size();
    const bool right = e >= text.size() || !(std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_');
    if (left && right) return true;
    p = e;
  }
  return false;
}

std::string first_word(const std::string& text) {
  std::size_t b = 0;
  while (b < text.size() && !(std::isalpha(static_cast<unsigned char>(text[b])) || text[b] == '_')) ++b;
  std::size_t e = b;
  while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
  return text.substr(b, e - b);
}

std::string last_identifier(const std::string& text) {
  std::size_t e = text.size();
  while (e > 0 && !(std::isalnum(static_cast<unsigned char>(text[e - 1])) || text[e - 1] == '_')) --e;
  std::size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(text[b - 1])) || text[b - 1] == '_')) --b;
  return text.substr(b, e - b);
}

// The text after a leading `template <...>`, if any.
std::string strip_template(const std::string& head) {
  std::size_t b = head.find_first_not_of(" \t\n");
  if (b == std::string::npos || head.compare(b, 8, "template") != 0) return head;
  std::size_t p = head.find('<', b);
  if (p == std::string::npos) return head;
  int depth = 0;
  for (; p < head.size(); ++p) {
    if (head[p] == '<') ++depth;
    if (head[p] == '>' && --depth == 0) return head.substr(p + 1);
  }
  return head;
}

enum class Block { Namespace, Class, Function, Other };

// What a '{' outside any function opens, from the text since the last ';', '{' or '}'; for a function, its name.
Block classify(const std::string& head, std::string& name) {
  const std::string h = strip_template(head);
  if (has_word(h, "namespace") || has_word(h, "extern")) return Block::Namespace;
  const std::string w = first_word(h);
  if (w == "class" || w == "struct" || w == "union" || w == "enum") return Block::Class;
  // '=' at parenthesis depth 0, not part of a comparison or an operator's name: an initializer, unless a lambda follows.
  int depth = 0;
  std::size_t first_paren = std::string::npos;
  for (std::size_t k = 0; k < h.size(); ++k) {
    const char c = h[k];
    if (c == '(') {
      if (depth == 0 && first_paren == std::string::npos) first_paren = k;
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '=' && depth == 0) {
      const char prev = k > 0 ? h[k - 1] : ' ';
      const char next = k + 1 < h.size() ? h[k + 1] : ' ';
      const bool comparison = prev == '=' || prev == '!' || prev == '<' || prev == '>' || next == '=';
      const bool op = h.rfind("operator", k) != std::string::npos && k - h.rfind("operator", k) <= 10;
      if (!comparison && !op) {
        if (h.find('[', k) == std::string::npos || h.find('(', k) == std::string::npos) return Block::Other;
        name = last_identifier(h.substr(0, k));
        return Block::Function;
      }
    }
  }
  if (first_paren == std::string::npos) return Block::Other;
  // The name: the identifier (with its qualifiers and operator spelling) just before the first '('.
  std::size_t e = first_paren;
  while (e > 0 && std::isspace(static_cast<unsigned char>(h[e - 1]))) --e;
  std::size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(h[b - 1])) || h[b - 1] == '_' || h[b - 1] == ':' ||
                   h[b - 1] == '~'))
    --b;
  name = h.substr(b, e - b);
  if (name.empty()) {  // operator(), operator==, ...
    const std::size_t op = h.rfind("operator", first_paren);
    name = op == std::string::npos ? "(unnamed)" : h.substr(op, first_paren - op);
  }
  return Block::Function;
}

std::vector<Function> scan(const std::string& path, const std::string& rel) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string code = blank_non_code(ss.str());
  std::vector<Function> found;
  struct Open {
    Block kind;
    std::string name;
    int first_line;
  };
  std::vector<Open> stack;
  std::size_t head_start = 0;
  int line = 1;
  std::vector<int> line_of(code.size() + 1, 1);
  for (std::size_t k = 0; k < code.size(); ++k) {
    line_of[k] = line;
    if (code[k] == '\n') ++line;
  }
  auto inside_body = [&] {
    return std::any_of(stack.begin(), stack.end(),
                       [](const Open& o) { return o.kind == Block::Function || o.kind == Block::Other; });
  };
  for (std::size_t k = 0; k < code.size(); ++k) {
    const char c = code[k];
    if (c == '{') {
      if (inside_body()) {
        stack.push_back({Block::Other, "", 0});
      } else {
        const std::string head = code.substr(head_start, k - head_start);
        std::string name;
        const Block kind = classify(head, name);
        std::size_t first = head_start;
        while (first < k && std::isspace(static_cast<unsigned char>(code[first]))) ++first;
        stack.push_back({kind, name, line_of[first]});
      }
      head_start = k + 1;
    } else if (c == '}') {
      if (!stack.empty()) {
        const Open o = stack.back();
        stack.pop_back();
        if (o.kind == Block::Function && !inside_body())
          found.push_back({rel, o.name, o.first_line, line_of[k] - o.first_line + 1});
      }
      head_start = k + 1;
    } else if (c == ';') {
      head_start = k + 1;
    }
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: long_functions ROOT DIR... [--max N] [--allow FILE] [--all]\n");
    return 2;
  }
  const fs::path root = argv[1];
  std::vector<std::string> dirs;
  int max_lines = 150;
  std::string allow_file;
  bool list_all = false;
  for (int a = 2; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--max" && a + 1 < argc) max_lines = std::stoi(argv[++a]);
    else if (arg == "--allow" && a + 1 < argc) allow_file = argv[++a];
    else if (arg == "--all") list_all = true;
    else dirs.push_back(arg);
  }
  std::set<std::pair<std::string, std::string>> allowed;
  if (!allow_file.empty()) {
    std::ifstream in(allow_file);
    if (!in) {
      std::fprintf(stderr, "long_functions: cannot read the allow-list %s\n", allow_file.c_str());
      return 2;
    }
    std::string l;
    while (std::getline(in, l)) {
      if (const auto hash = l.find('#'); hash != std::string::npos) l.erase(hash);
      std::istringstream ls(l);
      std::string file, name;
      if (ls >> file >> name) allowed.insert({file, name});
    }
  }
  std::vector<Function> all;
  std::size_t files = 0;
  for (const auto& d : dirs) {
    std::vector<fs::path> paths;
    for (const auto& e : fs::recursive_directory_iterator(root / d)) {
      const auto ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".cpp" || ext == ".hpp")) paths.push_back(e.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
      const auto f = scan(p.string(), fs::relative(p, root).generic_string());
      all.insert(all.end(), f.begin(), f.end());
      ++files;
    }
  }
  int bad = 0;
  std::set<std::pair<std::string, std::string>> still_long;
  std::sort(all.begin(), all.end(), [](const Function& a, const Function& b) { return a.lines > b.lines; });
  for (const auto& f : all) {
    if (list_all) std::printf("%5d  %s:%d  %s\n", f.lines, f.file.c_str(), f.first_line, f.name.c_str());
    if (f.lines <= max_lines) continue;
    const bool ok = allowed.count({f.file, f.name}) > 0;
    still_long.insert({f.file, f.name});
    if (!list_all)
      std::printf("%s:%d: %s is %d lines (limit %d)%s\n", f.file.c_str(), f.first_line, f.name.c_str(), f.lines,
                  max_lines, ok ? " [allow-listed]" : "");
    if (!ok) ++bad;
  }
  for (const auto& a : allowed) {
    if (still_long.count(a) == 0) {
      std::printf("%s: allow-list entry %s is no longer over %d lines (or is gone): remove it\n", a.first.c_str(),
                  a.second.c_str(), max_lines);
      ++bad;
    }
  }
  std::printf("long_functions: %zu functions in %zu files, %zu over %d lines, %zu allow-listed, %d failing\n",
              all.size(), files, still_long.size(), max_lines, allowed.size(), bad);
  return bad == 0 ? 0 : 1;
}
