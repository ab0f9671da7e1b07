#include "gpuplan/hw_io/hardware_io.hpp"

#include "decode_common.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

namespace gpuplan::hw_io {

// The field builders and the fields common to every entity file, shared with the other hardware decoders
// (decode_common.hpp; efficiency_io.cpp).
namespace detail {

// Plausibility bounds are 10x the largest shipping part in ../shared/reference/hardware_facts.json at the time of
// writing (e.g. 2,500 dense bf16 TFLOP/s on GB200/MI355X -> 25,000). Anything above is a typo (a sparse figure, a
// bidirectional figure in a per-direction key, GB for MB...) that must not pass silently.
// The floor is a millionth of that bound (0.025 bf16 TFLOP/s, 80 MB/s of HBM, 1 ns of latency, 2.6 kB of L2): far
// below any part (the closest shipped value, a 0.5 µs latency, is 500x above it), yet large enough that no time or ratio
// the model divides by it overflows to inf. A positive value below it (1e-310 TFLOP/s) is a typo or a unit mix-up.
FieldSpec positive(std::string key, std::string unit, double max, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::number;
  f.presence = p;
  f.unit = std::move(unit);
  f.min = max / 1e6;
  f.max = max;
  f.plausibility_bound = true;
  f.plausibility_floor = true;
  f.doc = std::move(doc);
  return f;
}
FieldSpec count(std::string key, double max, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::integer;
  f.presence = p;
  f.min = 1;
  f.max = max;
  f.plausibility_bound = true;
  f.doc = std::move(doc);
  return f;
}
FieldSpec text(std::string key, std::string doc, Presence p, std::vector<std::string> choices) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::string;
  f.presence = p;
  f.doc = std::move(doc);
  f.choices = std::move(choices);
  return f;
}
FieldSpec nested(std::string key, const FieldTable& table, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::object;
  f.presence = p;
  f.doc = std::move(doc);
  f.nested = &table;
  return f;
}
FieldSpec typed(std::string key, FieldType t, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = t;
  f.presence = p;
  f.doc = std::move(doc);
  return f;
}

const FieldTable& source_fields() {
  static const FieldTable t{
      text("id", "source id (S-number of the reference sheet, or a short tag)", kReq),
      text("ref", "what the source is: document, page, repository@commit", kReq),
      typed("for", FieldType::string_list, "JSON pointers of the fields this source backs (absent = whole file)"),
  };
  return t;
}

// Fields common to every entity file.
FieldTable common(const std::string& kind) {
  FieldSpec schema;
  schema.key = "schema";
  schema.type = FieldType::integer;
  schema.presence = kReq;
  schema.min = 1;
  schema.max = 1;
  schema.doc = "schema version (1)";
  return {schema,
          text("kind", "entity kind", kReq, {kind}),
          text("id", "identifier; equal to the file name without .json", kReq),
          text("name", "display name", kReq),
          typed("sources", FieldType::any, "list of {id, ref, for} citing every number", kReq),
          text("notes", "free text: caveats, derivations, what is not sourced")};
}

FieldTable with_common(const std::string& kind, FieldTable own) {
  FieldTable t = common(kind);
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

std::vector<hw::SourceRef> decode_sources(const ObjectReader& r, Diagnostics& diags) {
  std::vector<hw::SourceRef> out;
  const Json* s = r.raw("sources");
  if (s == nullptr) return out;
  if (!s->is_array() || s->empty()) {
    r.error("sources", fmt::format("expected a non-empty array of {{id, ref, for}}, found {}",
                                   s->is_array() ? std::string("an empty array") : json_io::describe_type(*s)));
    return out;
  }
  for (std::size_t i = 0; i < s->size(); ++i) {
    ObjectReader e((*s)[i], source_fields(), r.file(), r.pointer("sources") + "/" + std::to_string(i), diags);
    if (!e.valid()) continue;
    hw::SourceRef ref;
    ref.id = e.str("id").value_or("");
    ref.ref = e.str("ref").value_or("");
    ref.fields = e.strings("for").value_or(std::vector<std::string>{});
    out.push_back(std::move(ref));
  }
  return out;
}

hw::EntityInfo decode_info(const ObjectReader& r, const std::string& file, Diagnostics& diags) {
  hw::EntityInfo info;
  info.id = r.str("id").value_or("");
  info.name = r.str("name").value_or("");
  info.file = file;
  info.notes = r.str("notes").value_or("");
  info.sources = decode_sources(r, diags);
  if (!info.id.empty() && !file.empty()) {
    const std::string stem = std::filesystem::path(file).stem().string();
    if (stem != info.id)
      r.error("id", fmt::format("id '{}' does not match the file name '{}.json'", info.id, stem));
  }
  return info;
}

}  // namespace detail
using namespace detail;

void load_hardware_file(const std::string& path, hw::HardwareDb& db, Diagnostics& diags) {
  auto text_ = json_io::read_text_file(path, diags);
  if (!text_) return;
  auto j = json_io::parse(*text_, path, diags);
  if (!j) return;
  if (!j->is_object()) {
    diags.error(path, "/", fmt::format("expected an object, found {}", json_io::describe_type(*j)));
    return;
  }
  const auto kind_it = j->find("kind");
  if (kind_it == j->end() || !kind_it->is_string()) {
    diags.error(path, "/kind", "missing or non-string 'kind' (one of 'gpu', 'link', 'node', 'cluster')");
    return;
  }
  const std::string kind = kind_it->get<std::string>();
  auto take = [&](auto result, auto& into) {
    diags.append(result.diagnostics());
    if (result.ok()) into.push_back(std::move(result).value());
  };
  if (kind == "gpu") take(decode_gpu(*j, path), db.gpus);
  else if (kind == "link") take(decode_link(*j, path), db.links);
  else if (kind == "node") take(decode_node(*j, path), db.nodes);
  else if (kind == "cluster") take(decode_cluster(*j, path), db.clusters);
  else if (kind == "efficiency") take(decode_efficiency(*j, path), db.efficiency);
  else
    diags.error(path, "/kind",
                fmt::format("unknown kind '{}': expected 'gpu', 'link', 'node', 'cluster' or 'efficiency'{}", kind,
                            did_you_mean(kind, {"gpu", "link", "node", "cluster", "efficiency"})));
}

void check_references(const hw::HardwareDb& db, Diagnostics& diags) {
  std::map<std::string, std::string> seen;  // id or alias -> file
  auto claim = [&](const std::string& name, const std::string& file, const std::string& ptr) {
    auto [it, inserted] = seen.emplace(name, file);
    if (!inserted)
      diags.error(file, ptr, fmt::format("'{}' is already used by {}", name, it->second));
  };
  for (const auto& g : db.gpus) {
    claim(g.info.id, g.info.file, "/id");
    for (std::size_t i = 0; i < g.aliases.size(); ++i) claim(g.aliases[i], g.info.file, "/aliases/" + std::to_string(i));
  }
  auto check_link = [&](const std::string& id, const std::string& file, const std::string& ptr,
                        std::initializer_list<hw::LinkType> allowed) {
    if (id.empty()) return;
    const hw::LinkSpec* l = db.find_link(id);
    if (l == nullptr) {
      diags.error(file, ptr, fmt::format("unknown link '{}'{}", id, did_you_mean(id, db.link_ids())));
      return;
    }
    if (std::find(allowed.begin(), allowed.end(), l->type) == allowed.end()) {
      std::string list;
      for (auto t : allowed) list += (list.empty() ? "" : ", ") + std::string(hw::to_string(t));
      diags.error(file, ptr, fmt::format("link '{}' is of type {}, but this field takes a link of type {}", id,
                                         hw::to_string(l->type), list));
    }
  };
  using LT = hw::LinkType;
  for (const auto& g : db.gpus) {
    if (g.scale_up) check_link(g.scale_up->link, g.info.file, "/scale_up/link", {LT::nvlink, LT::xgmi, LT::pcie});
    check_link(g.pcie, g.info.file, "/pcie", {LT::pcie});
    check_link(g.host_link, g.info.file, "/host_link", {LT::c2c});
  }
  for (const auto& n : db.nodes) {
    if (db.find_gpu(n.gpu) == nullptr)
      diags.error(n.info.file, "/gpu", fmt::format("unknown GPU '{}'{}", n.gpu, did_you_mean(n.gpu, db.gpu_names())));
    check_link(n.scale_up.link, n.info.file, "/scale_up/link", {LT::nvlink, LT::xgmi, LT::pcie});
    check_link(n.scale_up.switch_id, n.info.file, "/scale_up/switch", {LT::nvswitch});
    if (n.scale_out) check_link(n.scale_out->link, n.info.file, "/scale_out/link", {LT::infiniband, LT::ethernet});
  }
  for (const auto& c : db.clusters) {
    if (db.find_node(c.node) == nullptr)
      diags.error(c.info.file, "/node", fmt::format("unknown node '{}'{}", c.node, did_you_mean(c.node, db.node_ids())));
    check_link(c.fabric.link, c.info.file, "/fabric/link", {LT::infiniband, LT::ethernet});
  }
  auto unique = [&](const auto& v, const char* what) {
    std::map<std::string, std::string> ids;
    for (const auto& e : v) {
      auto [it, inserted] = ids.emplace(e.info.id, e.info.file);
      if (!inserted) diags.error(e.info.file, "/id", fmt::format("duplicate {} id '{}' (also in {})", what, e.info.id, it->second));
    }
  };
  unique(db.links, "link");
  unique(db.nodes, "node");
  unique(db.clusters, "cluster");
}

Result<hw::HardwareDb> load_hardware_db(const std::string& data_dir) {
  Diagnostics diags;
  hw::HardwareDb db;
  namespace fs = std::filesystem;
  const fs::path root = fs::path(data_dir) / "hardware";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    diags.error(root.string(), "", "hardware data directory not found (set --data-dir or GPUPLAN_DATA_DIR)");
    return Result<hw::HardwareDb>(std::move(diags));
  }
  for (const char* sub : {"links", "gpus", "nodes", "clusters", "efficiency"}) {
    const fs::path dir = root / sub;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_hardware_file(f.string(), db, diags);
  }
  check_references(db, diags);
  resolve_efficiency(db, diags);
  if (diags.has_errors()) return Result<hw::HardwareDb>(std::move(diags));
  // Citations name a file relative to the data directory; diagnostics above named the path as loaded.
  const fs::path base(data_dir);
  auto relative = [&](hw::EntityInfo& info) {
    if (info.file.empty()) return;
    const fs::path rel = fs::path(info.file).lexically_relative(base);
    if (!rel.empty() && *rel.begin() != "..") info.cited_file = rel.generic_string();
  };
  for (auto& g : db.gpus) relative(g.info);
  for (auto& l : db.links) relative(l.info);
  for (auto& n : db.nodes) relative(n.info);
  for (auto& c : db.clusters) relative(c.info);
  for (auto& e : db.efficiency) relative(e.info);
  return Result<hw::HardwareDb>(std::move(db), std::move(diags));
}

}  // namespace gpuplan::hw_io
