#pragma once
// What the field-table tests (test_scenario_fields.cpp, test_serving_fields.cpp) read from the docs and the commands:
// a section of a Markdown file, the keys its table rows name, a flag named as a whole word, a command's options.
#include <doctest/doctest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "gpuplan/wl_io/scenario_fields.hpp"

namespace field_docs {

/// The lines of a Markdown file from the first that starts with `from` up to (without) the next that starts with `to`.
inline std::string section(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string out, line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside) {
      if (line.rfind(from, 0) != 0) continue;
      inside = true;
    } else if (line.rfind(to, 0) == 0) {
      break;
    }
    out += line + "\n";
  }
  return out;
}

/// The keys named in the first cell of the section's table rows ("| `tp`, `pp` | ..." gives tp and pp).
inline std::set<std::string> documented_keys(const std::string& text) {
  std::set<std::string> keys;
  for (std::size_t pos = text.find("| `"); pos != std::string::npos; pos = text.find("\n| `", pos + 1)) {
    const std::size_t start = text[pos] == '\n' ? pos + 3 : pos + 2;
    const std::string first = text.substr(start, text.find(" |", start) - start);
    for (std::size_t a = first.find('`'); a != std::string::npos; a = first.find('`', first.find('`', a + 1) + 1))
      keys.insert(first.substr(a + 1, first.find('`', a + 1) - a - 1));
  }
  return keys;
}

/// Checks that `documented` are exactly the keys of `table`.
inline void check_documented(const std::set<std::string>& documented, const gpuplan::wl_io::ScenarioFieldTable& table) {
  std::set<std::string> keys;
  for (const auto& f : table) keys.insert(f.key());
  for (const auto& k : keys) {
    CAPTURE(k);
    CHECK(documented.count(k) == 1);
  }
  for (const auto& k : documented) {
    CAPTURE(k);
    CHECK(keys.count(k) == 1);
  }
}

/// `flag` as a whole word in `text` ("`--tp`, `--pp`": "--tp" yes, "--t" no).
inline bool names_flag(const std::string& text, const std::string& flag) {
  for (auto at = text.find(flag); at != std::string::npos; at = text.find(flag, at + 1)) {
    const char next = at + flag.size() < text.size() ? text[at + flag.size()] : ' ';
    if (!(std::isalnum(static_cast<unsigned char>(next)) || next == '-' || next == '_')) return true;
  }
  return false;
}

/// A command's options by every long name ("--tp").
inline std::map<std::string, const CLI::Option*> options_of(const CLI::App& cmd) {
  std::map<std::string, const CLI::Option*> options;
  for (const CLI::Option* o : cmd.get_options())
    for (const auto& n : o->get_lnames()) options["--" + n] = o;
  return options;
}

}  // namespace field_docs
