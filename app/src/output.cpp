#include "gpuplan/app/output.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::app {

Format parse_format(const std::string& s) {
  if (s == "md") return Format::md;
  if (s == "json") return Format::json;
  if (s == "csv") return Format::csv;
  return Format::text;
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
      for (std::size_t c = 0; c < columns.size(); ++c) {
        if (c) o += ',';
        o += csv_cell(columns[c].key);
      }
      o += '\n';
      for (const auto& r : rows) {
        for (std::size_t c = 0; c < r.size(); ++c) {
          if (c) o += ',';
          o += csv_cell(r[c]);
        }
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
    o += ind + "- **" + d.title + "** = " + d.result_text() + (d.formula.empty() ? "" : "  \n" + ind + "  `" + d.formula + "`") + "\n";
    for (const auto& in : d.inputs)
      o += ind + "  - " + in.symbol + " = " + in.value + " — " + in.meaning + " (" + to_string(in.origin.kind) +
           (in.origin.ref.empty() ? "" : ": " + in.origin.ref) + ")\n";
    for (const auto& n : d.notes) o += ind + "  - note: " + n + "\n";
  } else {
    o += ind + d.title + " = " + d.result_text() + "\n";
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
  j["result"] = d.result_text();
  if (d.has_value()) {  // the number the text shows, unrounded, in its unit
    j["value"] = d.value;
    j["unit"] = to_string(d.unit);
    if (d.fold == Fold::sum) j["sum_of_children"] = true;
  }
  j["inputs"] = nlohmann::json::array();
  for (const auto& in : d.inputs)
    j["inputs"].push_back({{"symbol", in.symbol}, {"value", in.value}, {"meaning", in.meaning},
                           {"origin", to_string(in.origin.kind)}, {"ref", in.origin.ref}});
  j["notes"] = d.notes;
  j["children"] = nlohmann::json::array();
  for (const auto& c : d.children) j["children"].push_back(derivation_json(c));
  return j;
}

std::string plain_number(double v) { return fmt::format("{:.10g}", v); }

const char* recompute_key(wl::Recompute r) { return wl::to_string(r); }

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

}  // namespace gpuplan::app
