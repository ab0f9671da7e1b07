// The report's small document model rendered as Markdown, text or one HTML page (report_doc.hpp).
#include "report_doc.hpp"

#include "report_svg.hpp"

namespace gpuplan::cli {
namespace {

/// "**bold**" markers: kept in Markdown, dropped in text, <strong> in HTML.
std::string strip_bold(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "**") == 0) {
      ++i;
      continue;
    }
    o += s[i];
  }
  return o;
}
std::string html_inline(const std::string& s) {
  std::string o;
  bool open = false;
  const std::string e = html_escape(s);
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (e.compare(i, 2, "**") == 0) {
      o += open ? "</strong>" : "<strong>";
      open = !open;
      ++i;
      continue;
    }
    if (e[i] == '`') {
      // `code` spans
      const auto end = e.find('`', i + 1);
      if (end != std::string::npos) {
        o += "<code>" + e.substr(i + 1, end - i - 1) + "</code>";
        i = end;
        continue;
      }
    }
    o += e[i];
  }
  if (open) o += "</strong>";
  return o;
}

}  // namespace

std::string render_md(const Doc& doc) {
  std::string o;
  for (const auto& b : doc.blocks) {
    switch (b.kind) {
      case Block::Kind::title: o += "# " + b.text + "\n\n"; break;
      case Block::Kind::heading: o += "## " + b.text + "\n\n"; break;
      case Block::Kind::para: o += b.text + "\n\n"; break;
      case Block::Kind::table: o += b.table.render(Format::md) + "\n"; break;
      case Block::Kind::bullets:
        for (const auto& i : b.items) o += "- " + i + "\n";
        o += "\n";
        break;
      case Block::Kind::code:
        o += "```sh\n";
        for (const auto& l : b.items) o += l + "\n";
        o += "```\n\n";
        break;
      case Block::Kind::chart: break;
      case Block::Kind::raw_md: o += b.text + "\n"; break;
    }
  }
  while (o.size() > 1 && o[o.size() - 1] == '\n' && o[o.size() - 2] == '\n') o.pop_back();
  return o;
}

std::string render_text(const Doc& doc) {
  std::string o;
  auto underline = [](const std::string& t, char c) {
    std::size_t n = 0;
    for (unsigned char ch : t)
      if ((ch & 0xC0) != 0x80) ++n;
    return t + "\n" + std::string(n, c) + "\n\n";
  };
  for (const auto& b : doc.blocks) {
    switch (b.kind) {
      case Block::Kind::title: o += underline(strip_bold(b.text), '='); break;
      case Block::Kind::heading: o += underline(strip_bold(b.text), '-'); break;
      case Block::Kind::para: o += strip_bold(b.text) + "\n\n"; break;
      case Block::Kind::table: {
        Table t = b.table;
        for (auto& r : t.rows)
          for (auto& cell : r) cell = strip_bold(cell);
        o += t.render(Format::text) + "\n";
        break;
      }
      case Block::Kind::bullets:
        for (const auto& i : b.items) o += "  - " + strip_bold(i) + "\n";
        o += "\n";
        break;
      case Block::Kind::code:
        for (const auto& l : b.items) o += "    " + l + "\n";
        o += "\n";
        break;
      case Block::Kind::chart: break;
      case Block::Kind::raw_md: o += b.text + "\n"; break;
    }
  }
  while (o.size() > 1 && o[o.size() - 1] == '\n' && o[o.size() - 2] == '\n') o.pop_back();
  return o;
}

namespace {

constexpr const char* kCss = R"(body{font-family:-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#1d2329;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #d8dee4;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}th,td{border:1px solid #d8dee4;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.num{text-align:right;white-space:nowrap}tr.best td{background:#eaf6ec}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}pre{background:#f6f8fa;padding:.8em;overflow-x:auto;white-space:pre-wrap}
svg.chart{display:block;margin:.4em 0 1.2em;width:100%;max-width:720px;height:auto}svg .grid{stroke:#e6eaee;stroke-width:1}svg .axis{stroke:#8c959f;stroke-width:1}svg .tick,svg .axis-title{fill:#57606a;font-size:11px}
div.table-wrap{overflow-x:auto;max-width:100%}svg .bar{fill:#8aa4c8}svg .bar.best{fill:#2e8b57}svg text{font-size:12px;fill:#1d2329}
svg .chart-title{font-weight:600;font-size:13px}svg .missing{fill:#9aa3ab;font-style:italic}svg .reference{stroke:#c0392b;stroke-width:2;stroke-dasharray:5 3}
svg .reference-label{fill:#c0392b}p.note{color:#57606a;font-size:.9em}
@media (max-width:600px){body{margin:1em auto;padding:0 .6em}table{font-size:.85em}}
@media print{body{max-width:none;margin:0;padding:0;font-size:10.5pt}h2{break-after:avoid}svg.chart,tr{break-inside:avoid}div.table-wrap{overflow:visible}pre{white-space:pre-wrap;background:none;border:1px solid #d8dee4}tr.best td{background:#eaf6ec;-webkit-print-color-adjust:exact;print-color-adjust:exact}})";

}  // namespace

std::string render_html(const Doc& doc, const std::string& title) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" + html_escape(title) +
                  "</title>\n<style>\n" + kCss + "\n</style>\n</head>\n<body>\n";
  for (const auto& b : doc.blocks) {
    switch (b.kind) {
      case Block::Kind::title: o += "<h1>" + html_inline(b.text) + "</h1>\n"; break;
      case Block::Kind::heading: o += "<h2>" + html_inline(b.text) + "</h2>\n"; break;
      case Block::Kind::para: o += "<p>" + html_inline(b.text) + "</p>\n"; break;
      case Block::Kind::table: {
        o += "<div class=\"table-wrap\"><table>\n<thead><tr>";
        for (const auto& c : b.table.columns) o += "<th>" + html_escape(c.title) + "</th>";
        o += "</tr></thead>\n<tbody>\n";
        for (const auto& r : b.table.rows) {
          const bool best = !r.empty() && r.back().find("cheapest") != std::string::npos;
          o += best ? "<tr class=\"best\">" : "<tr>";
          for (std::size_t c = 0; c < r.size(); ++c)
            o += (b.table.columns[c].numeric ? "<td class=\"num\">" : "<td>") +
                 (r[c].empty() ? std::string("—") : html_inline(r[c])) + "</td>";
          o += "</tr>\n";
        }
        o += "</tbody>\n</table></div>\n";
        break;
      }
      case Block::Kind::bullets:
        o += "<ul>\n";
        for (const auto& i : b.items) o += "<li>" + html_inline(i) + "</li>\n";
        o += "</ul>\n";
        break;
      case Block::Kind::code: {
        o += "<pre><code>";
        for (const auto& l : b.items) o += html_escape(l) + "\n";
        o += "</code></pre>\n";
        break;
      }
      case Block::Kind::chart: o += b.svg; break;
      case Block::Kind::raw_md: o += "<pre>" + html_escape(b.text) + "</pre>\n"; break;
    }
  }
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace gpuplan::cli
