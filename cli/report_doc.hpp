#pragma once
// The small document model of `gpuplan report` (report_render.hpp builds one): title, headings, paragraphs, tables,
// bullets, code and charts, rendered as Markdown, as plain text or as one self-contained HTML page.
#include <string>
#include <vector>

#include "common.hpp"

namespace gpuplan::cli {

/// A small document model: the report's content once, rendered as Markdown, text or HTML.
struct Block {
  enum class Kind { title, heading, para, table, bullets, code, chart, raw_md } kind = Kind::para;
  std::string text;
  Table table;
  std::vector<std::string> items;
  std::string svg;  ///< chart: HTML only
};

struct Doc {
  std::vector<Block> blocks;
  void title(std::string t) { blocks.push_back({Block::Kind::title, std::move(t), {}, {}, {}}); }
  void heading(std::string t) { blocks.push_back({Block::Kind::heading, std::move(t), {}, {}, {}}); }
  void para(std::string t) { blocks.push_back({Block::Kind::para, std::move(t), {}, {}, {}}); }
  void table(Table t) { blocks.push_back({Block::Kind::table, {}, std::move(t), {}, {}}); }
  void bullets(std::vector<std::string> items) {
    if (!items.empty()) blocks.push_back({Block::Kind::bullets, {}, {}, std::move(items), {}});
  }
  void code(std::vector<std::string> lines) {
    if (!lines.empty()) blocks.push_back({Block::Kind::code, {}, {}, std::move(lines), {}});
  }
  void chart(std::string svg) { blocks.push_back({Block::Kind::chart, {}, {}, {}, std::move(svg)}); }
  /// Text that is already Markdown (derivations); text format gets the same, HTML a <pre>.
  void raw(std::string t) { blocks.push_back({Block::Kind::raw_md, std::move(t), {}, {}, {}}); }
};

/// The document as Markdown, as plain text (underlined headings, no bold markers) and as one HTML page.
std::string render_md(const Doc& doc);
std::string render_text(const Doc& doc);
std::string render_html(const Doc& doc, const std::string& title);

}  // namespace gpuplan::cli
