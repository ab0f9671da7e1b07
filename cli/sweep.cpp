#include "sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace gpuplan::cli {
namespace {

constexpr std::size_t kMaxPoints = 100'000;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  v.push_back(cur);
  return v;
}

std::optional<double> number(const std::string& t) {
  double v = 0;
  const auto* e = t.data() + t.size();
  auto [p, ec] = std::from_chars(t.data(), e, v);
  if (t.empty() || ec != std::errc() || p != e || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return fmt::format("{:.10g}", v.get<double>());
  if (v.is_array()) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : "; ") + cell(x);
    return s;
  }
  return json_inline(v);
}

}  // namespace

std::optional<SweepAxis> parse_sweep(const std::string& spec, const json_io::FieldTable& table, Diagnostics& diags) {
  auto bad = [&](const std::string& why) {
    diags.error("", "--sweep", fmt::format("'{}': {}", spec, why));
    return std::nullopt;
  };
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return bad("expected KEY=A..B, KEY=A..B:STEP or KEY=V1,V2,...");
  SweepAxis axis;
  axis.key = spec.substr(0, eq);
  const std::string rest = spec.substr(eq + 1);
  const json_io::FieldSpec* field = nullptr;
  std::vector<std::string> keys;
  for (const auto& f : table) {
    keys.push_back(f.key);
    if (f.key == axis.key) field = &f;
  }
  if (field == nullptr) return bad(fmt::format("unknown key '{}'{}", axis.key, did_you_mean(axis.key, keys)));
  const bool integer = field->type == json_io::FieldType::integer;
  const bool numeric = integer || field->type == json_io::FieldType::number;
  auto typed = [&](const std::string& t) -> std::optional<nlohmann::json> {
    if (field->type == json_io::FieldType::boolean) {
      if (t == "true") return nlohmann::json(true);
      if (t == "false") return nlohmann::json(false);
      return std::nullopt;
    }
    if (!numeric) return nlohmann::json(t);
    const auto v = number(t);
    if (!v) return std::nullopt;
    if (integer && *v == std::floor(*v) && std::fabs(*v) < 9e15) return nlohmann::json(static_cast<long long>(*v));
    return nlohmann::json(*v);  // the decoder reports a non-integer for an integer key
  };
  const auto dots = rest.find("..");
  if (dots != std::string::npos) {
    if (!numeric) return bad(fmt::format("a range needs a numeric key; '{}' takes a list: {}=A,B,...", axis.key, axis.key));
    const std::string hi_step = rest.substr(dots + 2);
    const auto colon = hi_step.find(':');
    const auto lo = number(rest.substr(0, dots));
    const auto hi = number(hi_step.substr(0, colon));
    const auto step = colon == std::string::npos ? std::optional<double>() : number(hi_step.substr(colon + 1));
    if (!lo || !hi || (colon != std::string::npos && !step)) return bad("expected A..B (doubling from A) or A..B:STEP");
    // The step as a plain value (0 for a doubling range): GCC 12 at -O3 cannot see that *step is read only when set
    // and raises a false -Wmaybe-uninitialized.
    const bool stepped = step.has_value();
    const double step_v = step.value_or(0.0);
    if (*lo > *hi || (stepped && !(step_v > 0)) || (!stepped && !(*lo > 0)))
      return bad("expected A <= B, A > 0 for a doubling range, STEP > 0");
    // B's tolerance for rounding in the steps; B near the top of double range has none to spare.
    const double last = std::isfinite(*hi * (1 + 1e-12)) ? *hi * (1 + 1e-12) : *hi;
    for (std::size_t i = 0;; ++i) {
      const double v = stepped ? *lo + double(i) * step_v : *lo * std::pow(2.0, double(i));
      if (!(v <= last)) break;  // also ends a range whose next value leaves double range
      auto value = typed(fmt::format("{:.15g}", v));
      if (!value) return bad(fmt::format("the value {:.15g} is not a number the key takes", v));
      if (!axis.values.empty() && *value == axis.values.back())
        return bad(fmt::format("STEP {:g} is too small to change {:.15g}: the range would repeat one value", step_v, v));
      axis.values.push_back(*value);
      if (axis.values.size() > kMaxPoints) return bad(fmt::format("more than {} values", kMaxPoints));
    }
    return axis;
  }
  for (const auto& t : split(rest, ',')) {
    auto v = typed(t);
    if (!v || t.empty())
      return bad(fmt::format("'{}' is not {}", t,
                             field->type == json_io::FieldType::boolean ? "true or false" : numeric ? "a number" : "a value"));
    axis.values.push_back(*v);
  }
  return axis;
}

int run_sweep(const std::vector<SweepAxis>& axes, const nlohmann::json& base,
              const std::function<std::optional<nlohmann::ordered_json>(const nlohmann::json&, Diagnostics&)>& eval,
              const std::vector<SweepColumn>& columns, Format format) {
  std::size_t total = 1;
  for (const auto& a : axes) {
    total *= a.values.size();
    if (total > kMaxPoints) {
      Diagnostics d;
      d.error("", "--sweep", fmt::format("the grid has more than {} points", kMaxPoints));
      return report(d);
    }
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  // Rows are written as each point finishes (a long sweep shows its results as it goes, and an interrupted one keeps
  // them); the JSON array is laid out as nlohmann's dump(2) of the whole array would be.
  std::vector<std::string> keys;
  for (const auto& a : axes) keys.push_back(a.key);
  for (const auto& c : columns)
    if (std::find(keys.begin(), keys.end(), c.key) == keys.end()) keys.push_back(c.key);
  auto write_row = [&](const nlohmann::ordered_json& row, std::size_t n) {
    std::string o;
    if (format == Format::json) {
      const std::string body = row.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      o = n == 0 ? "[\n  " : ",\n  ";
      for (const char c : body) o += c == '\n' ? std::string("\n  ") : std::string(1, c);
    } else {
      if (n == 0) {
        for (std::size_t i = 0; i < keys.size(); ++i) o += (i ? "," : "") + csv_cell(keys[i]);
        o += '\n';
      }
      for (std::size_t i = 0; i < keys.size(); ++i) o += (i ? "," : "") + csv_cell(cell(row[keys[i]]));
      o += '\n';
    }
    out(o);
  };
  auto close_rows = [&](std::size_t written) {
    if (format == Format::json) out(written == 0 ? "[]\n" : "\n]\n");
  };
  std::vector<std::size_t> idx(axes.size(), 0);
  bool any_feasible = false;
  std::vector<std::string> seen;
  std::vector<std::string> price_kinds;  // the price_kind column, where the sweep has one
  for (std::size_t n = 0; n < total; ++n) {
    nlohmann::json point = base;
    nlohmann::ordered_json row;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      point[axes[a].key] = axes[a].values[idx[a]];
      row[axes[a].key] = axes[a].values[idx[a]];
    }
    Diagnostics d;
    const auto result = eval(point, d);
    Diagnostics notes;  // each note once, when first seen
    for (const auto& x : d.items()) {
      if (x.severity == Severity::error) continue;
      const std::string s = x.to_string();
      if (std::find(seen.begin(), seen.end(), s) == seen.end()) {
        seen.push_back(s);
        notes.add(x);
      }
    }
    if (tty && !notes.items().empty()) std::fputs("\r\033[K", stderr);
    report(notes);
    if (!result || d.has_errors()) {
      if (tty) std::fputs("\r\033[K", stderr);
      Diagnostics errs;
      for (const auto& x : d.items())
        if (x.severity == Severity::error) errs.add(x);
      std::string at;
      for (const auto& a : axes) at += (at.empty() ? "" : ", ") + a.key + "=" + cell(row[a.key]);
      errs.note("", "--sweep", fmt::format("at the point {} ({} of {}; the rows before it are written)", at, n + 1,
                                           total));
      close_rows(n);
      return report(errs);
    }
    for (const auto& c : columns) {
      if (row.contains(c.key)) continue;  // a swept key is its own column
      const nlohmann::json::json_pointer p(c.pointer);
      row[c.key] = result->contains(p) ? (*result)[p] : nlohmann::ordered_json();
    }
    if (row.contains("feasible") && row["feasible"].is_boolean() && row["feasible"].get<bool>()) any_feasible = true;
    if (row.contains("price_kind") && row["price_kind"].is_string()) price_kinds.push_back(row["price_kind"].get<std::string>());
    write_row(row, n);
    if (tty) {
      std::fprintf(stderr, "\r\033[K  sweep %zu / %zu points", n + 1, total);
      std::fflush(stderr);
    }
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++idx[a] < axes[a].values.size()) break;
      idx[a] = 0;
    }
  }
  if (tty) std::fputs("\r\033[K", stderr);
  close_rows(total);
  if (const std::string mixed = mixed_price_note(price_kinds); !mixed.empty()) {
    std::string cost_columns;  // train: cost_usd; serve: cost_per_hour_usd, cost_per_mtok_usd
    for (const auto& c : columns)
      if (c.key.rfind("cost", 0) == 0) {
        if (!cost_columns.empty()) cost_columns += ", ";
        cost_columns += c.key;
      }
    Diagnostics d;
    d.note("", "--sweep", "the cost columns (" + cost_columns + "): " + mixed + "; see the price_kind column");
    report(d);
  }
  return any_feasible ? kExitOk : kExitInfeasible;
}

}  // namespace gpuplan::cli
