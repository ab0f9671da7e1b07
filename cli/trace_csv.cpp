#include "trace_csv.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace gpuplan::cli {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (std::isspace(static_cast<unsigned char>(s.back())) != 0)) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (std::isspace(static_cast<unsigned char>(s[i])) != 0)) ++i;
  s.erase(0, i);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    if (c == ',' && !quoted) {
      f.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  f.push_back(trim(cur));
  return f;
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's days_from_civil).
long long days_from_civil(long long y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const long long era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = unsigned(y - era * 400);
  const unsigned mp = m > 2 ? m - 3 : m + 9;
  const unsigned doy = (153 * mp + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long long>(doe) - 719468;
}

/// Seconds: a plain number, or "YYYY-MM-DD HH:MM:SS[.fraction]" (also with 'T').
std::optional<double> parse_time(const std::string& v) {
  double x = 0;
  const char* b = v.data();
  const char* e = v.data() + v.size();
  auto r = std::from_chars(b, e, x);
  if (r.ec == std::errc() && r.ptr == e && std::isfinite(x) && x >= 0) return x;
  int Y = 0, M = 0, D = 0, h = 0, mi = 0;
  double sec = 0;
  char sep = 0;
  if (v.size() < 19 || std::sscanf(v.c_str(), "%4d-%2d-%2d%c%2d:%2d:%lf", &Y, &M, &D, &sep, &h, &mi, &sec) != 7)
    return std::nullopt;
  if ((sep != ' ' && sep != 'T') || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || sec < 0 || sec >= 61)
    return std::nullopt;
  return double(days_from_civil(Y, unsigned(M), unsigned(D))) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
}

std::optional<long long> parse_count(const std::string& v) {
  long long x = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < 0) return std::nullopt;
  return x;
}

}  // namespace

std::optional<ParsedTrace> parse_trace_csv(const std::string& text, const std::string& file, Diagnostics& diags) {
  ParsedTrace t;
  std::vector<std::pair<double, model::SimRequest>> rows;
  std::size_t pos = 0, line_no = 0;
  int time_col = -1, in_col = -1, out_col = -1;
  std::vector<std::string> header;
  int errors = 0;
  auto bad = [&](std::size_t line, const std::string& col, const std::string& value, const std::string& rule) {
    if (++errors <= 20)
      diags.error(file, fmt::format("line {}, column {}", line, col), fmt::format("'{}': {}", value, rule));
  };
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    auto f = split(line);
    if (header.empty()) {
      header = f;
      for (std::size_t i = 0; i < f.size(); ++i) {
        const std::string h = lower(f[i]);
        if (h == "timestamp") time_col = int(i);
        if (h == "contexttokens" || h == "request tokens") in_col = int(i);
        if (h == "generatedtokens" || h == "response tokens") out_col = int(i);
      }
      if (time_col < 0 || in_col < 0 || out_col < 0) {
        diags.error(file, "line 1",
                    fmt::format("header '{}' lacks the columns of a known trace: Azure 2023 (TIMESTAMP, ContextTokens, "
                                "GeneratedTokens) or BurstGPT (Timestamp, Request tokens, Response tokens)",
                                trim(line)));
        return std::nullopt;
      }
      t.format = lower(f[std::size_t(in_col)]) == "contexttokens" ? "azure-2023" : "burstgpt";
      continue;
    }
    const auto need = std::size_t(std::max({time_col, in_col, out_col})) + 1;
    if (f.size() < need) {
      bad(line_no, header[std::min(f.size(), header.size() - 1)], trim(line),
          fmt::format("a row needs {} fields, this one has {}", need, f.size()));
      continue;
    }
    const auto& tv = f[std::size_t(time_col)];
    const auto& iv = f[std::size_t(in_col)];
    const auto& ov = f[std::size_t(out_col)];
    auto tm = parse_time(tv);
    auto in = parse_count(iv);
    auto out = parse_count(ov);
    if (!tm)
      bad(line_no, header[std::size_t(time_col)], tv,
          "not a time: seconds ≥ 0 or a date and time 'YYYY-MM-DD HH:MM:SS[.fraction]'");
    if (!in || *in < 1) bad(line_no, header[std::size_t(in_col)], iv, "prompt tokens must be an integer ≥ 1");
    if (!out) bad(line_no, header[std::size_t(out_col)], ov, "generated tokens must be an integer ≥ 0");
    if (!tm || !in || *in < 1 || !out) continue;
    if (*out == 0) {
      ++t.skipped_zero_output;
      continue;
    }
    rows.push_back({*tm, model::SimRequest{0, *in, *out}});
  }
  if (errors > 20) diags.error(file, "", fmt::format("{} bad rows in all (the first 20 shown)", errors));
  if (errors > 0) return std::nullopt;
  if (header.empty() || rows.empty()) {
    diags.error(file, "", "the trace has no request rows");
    return std::nullopt;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const double t0 = rows.front().first;
  t.requests.reserve(rows.size());
  for (auto& r : rows) {
    r.second.arrival_s = r.first - t0;
    t.requests.push_back(r.second);
  }
  return t;
}

}  // namespace gpuplan::cli
