#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::cli {

std::optional<std::string> find_data_dir(const std::string& flag, Diagnostics& diags) {
  namespace fs = std::filesystem;
  auto usable = [](const std::string& p) {
    std::error_code ec;
    return !p.empty() && (fs::is_directory(fs::path(p) / "hardware", ec) || fs::is_directory(fs::path(p) / "models", ec));
  };
  if (!flag.empty()) {
    if (usable(flag)) return flag;
    std::error_code ec_flag;
    diags.error("", "--data-dir", fs::exists(flag, ec_flag) ? fmt::format("'{}' has no hardware/ or models/ folder", flag)
                                                         : fmt::format("'{}' does not exist", flag));
    return std::nullopt;
  }
  if (const char* env = std::getenv("GPUPLAN_DATA_DIR"); env != nullptr && *env != '\0') {
    if (usable(env)) return std::string(env);
    diags.error("", "GPUPLAN_DATA_DIR", fmt::format("'{}' has no hardware/ or models/ folder", env));
    return std::nullopt;
  }
  // The share directory next to the running binary (a relocated install or a .deb), then the configured install
  // prefix, then the source tree this binary was built from.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string rel = (exe.parent_path().parent_path() / "share" / "gpuplan").string();
    if (usable(rel)) return rel;
  }
  for (const char* candidate : {GPUPLAN_INSTALL_DATA_DIR, GPUPLAN_SOURCE_DATA_DIR})
    if (usable(candidate)) return std::string(candidate);
  diags.error("", "--data-dir",
              fmt::format("no data directory found: tried --data-dir, $GPUPLAN_DATA_DIR, {} and {}",
                          GPUPLAN_INSTALL_DATA_DIR, GPUPLAN_SOURCE_DATA_DIR));
  return std::nullopt;
}

Format parse_format(const std::string& s) {
  if (s == "md") return Format::md;
  if (s == "json") return Format::json;
  if (s == "csv") return Format::csv;
  return Format::text;
}

void add_format_option(CLI::App& cmd, GlobalOptions& g) {
  cmd.add_option("--format,-f", g.format, "output format")
      ->check(CLI::IsMember({"text", "md", "json", "csv"}))
      ->capture_default_str();
}

namespace {
std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}
std::size_t display_width(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;  // count UTF-8 code points, not bytes
  return n;
}
std::string pad(const std::string& s, std::size_t w, bool right) {
  const std::size_t n = display_width(s);
  if (n >= w) return s;
  return right ? std::string(w - n, ' ') + s : s + std::string(w - n, ' ');
}
// Numeric cells rounded to 4 significant digits for people; integers are never rounded.
std::vector<std::vector<std::string>> display_rows(const Table& t) {
  auto rows = t.rows;
  for (auto& r : rows)
    for (std::size_t c = 0; c < t.columns.size() && c < r.size(); ++c)
      if (t.columns[c].numeric && !r[c].empty()) {
        char* end = nullptr;
        const double v = std::strtod(r[c].c_str(), &end);
        if (end != nullptr && *end == '\0') r[c] = units::format_number(v, 4);
      }
  return rows;
}
}  // namespace

std::string Table::render(Format f) const {
  std::string o;
  switch (f) {
    case Format::csv: {
      for (std::size_t c = 0; c < columns.size(); ++c) o += (c ? "," : "") + csv_cell(columns[c].key);
      o += '\n';
      for (const auto& r : rows) {
        for (std::size_t c = 0; c < r.size(); ++c) o += (c ? "," : "") + csv_cell(r[c]);
        o += '\n';
      }
      return o;
    }
    case Format::json: {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& r : rows) {
        nlohmann::ordered_json obj;
        for (std::size_t c = 0; c < columns.size(); ++c) {
          const std::string& cell = r[c];
          if (cell.empty()) obj[columns[c].key] = nullptr;
          else if (columns[c].numeric) obj[columns[c].key] = std::strtod(cell.c_str(), nullptr);
          else obj[columns[c].key] = cell;
        }
        arr.push_back(obj);
      }
      return json_text(arr);
    }
    case Format::md: {
      const auto shown = display_rows(*this);
      o += "|";
      for (const auto& c : columns) o += " " + c.title + " |";
      o += "\n|";
      for (const auto& c : columns) o += c.numeric ? " ---: |" : " --- |";
      o += '\n';
      for (const auto& r : shown) {
        o += "|";
        for (const auto& cell : r) o += " " + (cell.empty() ? std::string("—") : cell) + " |";
        o += '\n';
      }
      return o;
    }
    case Format::text: {
      const auto shown = display_rows(*this);
      std::vector<std::size_t> w(columns.size());
      for (std::size_t c = 0; c < columns.size(); ++c) {
        w[c] = display_width(columns[c].title);
        for (const auto& r : shown) w[c] = std::max(w[c], display_width(r[c].empty() ? "—" : r[c]));
      }
      for (std::size_t c = 0; c < columns.size(); ++c)
        o += (c ? "  " : "") + pad(columns[c].title, w[c], columns[c].numeric);
      o += '\n';
      for (std::size_t c = 0; c < columns.size(); ++c) o += (c ? "  " : "") + std::string(w[c], '-');
      o += '\n';
      for (const auto& r : shown) {
        std::string line;
        for (std::size_t c = 0; c < columns.size(); ++c)
          line += (c ? "  " : "") + pad(r[c].empty() ? "—" : r[c], w[c], columns[c].numeric);
        while (!line.empty() && line.back() == ' ') line.pop_back();
        o += line + '\n';
      }
      return o;
    }
  }
  return o;
}

std::string render_sections(const std::vector<Section>& sections, Format f) {
  std::string o;
  for (const auto& s : sections) {
    if (f == Format::md) {
      o += "## " + s.title + "\n\n| | |\n| --- | --- |\n";
      for (const auto& [k, v] : s.rows) o += "| " + k + " | " + v + " |\n";
      o += "\n";
    } else {
      o += s.title + "\n";
      std::size_t w = 0;
      for (const auto& r : s.rows) w = std::max(w, display_width(r.first));
      for (const auto& [k, v] : s.rows) o += "  " + pad(k, w, false) + "  " + v + "\n";
      o += "\n";
    }
  }
  return o;
}

namespace {
void render_node(const Derivation& d, int depth, Format f, std::string& o) {
  const std::string ind(static_cast<std::size_t>(depth) * 2, ' ');
  if (f == Format::md) {
    o += ind + "- **" + d.title + "** = " + d.result + (d.formula.empty() ? "" : "  \n" + ind + "  `" + d.formula + "`") + "\n";
    for (const auto& in : d.inputs)
      o += ind + "  - " + in.symbol + " = " + in.value + " — " + in.meaning + " (" + to_string(in.origin.kind) +
           (in.origin.ref.empty() ? "" : ": " + in.origin.ref) + ")\n";
    for (const auto& n : d.notes) o += ind + "  - note: " + n + "\n";
  } else {
    o += ind + d.title + " = " + d.result + "\n";
    if (!d.formula.empty()) o += ind + "  formula: " + d.formula + "\n";
    for (const auto& in : d.inputs)
      o += ind + "  " + in.symbol + " = " + in.value + "  (" + in.meaning + "; " + to_string(in.origin.kind) +
           (in.origin.ref.empty() ? "" : ": " + in.origin.ref) + ")\n";
    for (const auto& n : d.notes) o += ind + "  note: " + n + "\n";
  }
  for (const auto& c : d.children) render_node(c, depth + 1, f, o);
}
}  // namespace

std::string render_derivation(const Derivation& d, Format f) {
  std::string o;
  render_node(d, 0, f, o);
  return o;
}

nlohmann::json derivation_json(const Derivation& d) {
  nlohmann::json j;
  j["id"] = d.id;
  j["title"] = d.title;
  j["formula"] = d.formula;
  j["result"] = d.result;
  j["inputs"] = nlohmann::json::array();
  for (const auto& in : d.inputs)
    j["inputs"].push_back({{"symbol", in.symbol}, {"value", in.value}, {"meaning", in.meaning},
                           {"origin", to_string(in.origin.kind)}, {"ref", in.origin.ref}});
  j["notes"] = d.notes;
  j["children"] = nlohmann::json::array();
  for (const auto& c : d.children) j["children"].push_back(derivation_json(c));
  return j;
}

int report(const Diagnostics& diags) {
  for (const auto& d : diags.items()) std::cerr << d.to_string() << '\n';
  return diags.has_errors() ? kExitInvalid : kExitOk;
}

void out(const std::string& s) { std::cout << s; }

namespace {
/// A numeric option's text that is NaN or an infinity in any spelling C and CLI11 accept ("nan", "-NaN(0x1)",
/// "inf", "+Infinity"), or a finite-looking number beyond double range ("1e999", which strtod turns into inf).
bool non_finite_number(const std::string& text) {
  std::string t;
  for (const char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t i = 0;
  while (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  if (t.compare(i, 3, "nan") == 0 || t.compare(i, 3, "inf") == 0) return true;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  return end != t.c_str() && !std::isfinite(v);
}

/// An integer option's text that is a decimal integer beyond int64 ("18446744073709551616"): CLI11 converts it with
/// strtoll, which saturates at 9223372036854775807 without a word.
bool beyond_int64(const std::string& text) {
  std::size_t i = text.size() > 0 && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (i == text.size() || text.find_first_not_of("0123456789", i) != std::string::npos) return false;
  errno = 0;
  (void)std::strtoll(text.c_str(), nullptr, 10);
  return errno == ERANGE;
}

void guard_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a switch takes no value
    const std::string type = opt->get_type_name();
    const bool integer = type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0;
    const bool numeric = integer || type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0;
    // First of the option's checks (transform() puts it in front; it changes nothing), so that a range check does not
    // speak first about a NaN; an empty description keeps the option's help text as it was.
    opt->transform(CLI::Validator(
        [numeric, integer](std::string& v) -> std::string {
          if (v.empty()) return "an empty value is not allowed (leave the flag out for its default)";
          if (numeric && non_finite_number(v))
            return "'" + v + "' is not a finite number (NaN and infinities are not allowed)";
          if (integer && beyond_int64(v)) return "'" + v + "' is outside the 64-bit integer range";
          return {};
        },
        "", "finite, non-empty"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) guard_options(*sub);
}
}  // namespace

void guard_flag_values(CLI::App& app) { guard_options(app); }

int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e) {
  const int code = e.get_exit_code();
  if (code == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // help, version: print, exit 0
  std::string what = e.what();
  // CLI11 writes "--tp: Value 0 not in range 1 to 1024" for an option's value; other errors have no flag in front.
  const auto colon = what.find(": ");
  if (!what.empty() && what[0] == '-' && colon != std::string::npos)
    what = what.substr(0, colon) + ": error: " + what.substr(colon + 2);
  else
    what = "error: " + what;
  std::cerr << what << "\nRun with --help for the flags and their ranges.\n";
  return kExitInvalid;
}

int finish_output(int rc) {
  std::cout.flush();
  errno = 0;
  const bool failed = !std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return rc;
  const int err = errno;
  std::cerr << "error: the output could not be written to stdout" << (err != 0 ? ": " : "")
            << (err != 0 ? std::strerror(err) : "") << '\n';
  return kExitInvalid;
}

std::string plain_number(double v) { return fmt::format("{:.10g}", v); }

const char* recompute_key(wl::Recompute r) {
  return r == wl::Recompute::none ? "none" : r == wl::Recompute::selective ? "selective" : "full";
}

std::optional<std::string> price_kind(const std::optional<units::UsdPerSecond>& given, const hw::GpuSpec* gpu) {
  if (given) return std::string("as given");
  if (gpu != nullptr && gpu->price) return std::string(hw::to_string(gpu->price_kind));
  return std::nullopt;
}

std::string describe_price(const std::optional<units::UsdPerSecond>& given, const hw::GpuSpec* gpu,
                           std::string_view given_by) {
  if (given) return fmt::format("${:.2f}/GPU-h as given ({})", units::to_usd_per_hour(*given), given_by);
  if (gpu == nullptr || !gpu->price) return "";
  std::string who = gpu->price_provider;
  who += gpu->price_date.empty() ? std::string(", undated") : ", " + gpu->price_date;
  return fmt::format("${:.2f}/GPU-h {} ({})", units::to_usd_per_hour(*gpu->price), hw::to_string(gpu->price_kind), who);
}

std::string mixed_price_note(const std::vector<std::string>& kinds) {
  const bool on_demand = std::find(kinds.begin(), kinds.end(), "on-demand") != kinds.end();
  const bool spot = std::find(kinds.begin(), kinds.end(), "spot") != kinds.end();
  if (!(on_demand && spot)) return "";
  return "these costs mix on-demand and spot prices: a spot GPU can be pre-empted and often rents for half the "
         "on-demand rate, so the costs are not comparable as they stand (give one price with --price to compare)";
}

}  // namespace gpuplan::cli
