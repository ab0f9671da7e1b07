// `gpuplan hw list|show|validate`
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/roofline.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using hw::Precision;

// Numeric cells keep full precision (JSON/CSV carry the datasheet value); text and Markdown round for display.
std::string num(std::optional<double> v) { return v ? fmt::format("{:.10g}", *v) : std::string{}; }
std::optional<double> tf(const hw::GpuSpec& g, Precision p) {
  if (auto r = g.peak(p)) return u::to_TFLOPs(*r);
  return std::nullopt;
}

struct HwOptions {
  std::string kind = "gpus";
  std::string id;
  std::vector<std::string> paths;
};

Result<hw::HardwareDb> load_db(const GlobalOptions& g) {
  auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return Result<hw::HardwareDb>(ws.diagnostics());
  return Result<hw::HardwareDb>(std::move(ws).value().db, ws.diagnostics());
}

/// Resolves a GPU by id or alias; a short name that is not the id gets a note naming the part.
const hw::GpuSpec* resolve_gpu(const hw::HardwareDb& db, const std::string& name, Diagnostics& diags) {
  const hw::GpuSpec* g = db.find_gpu(name);
  if (g == nullptr) {
    diags.error("", "ID", fmt::format("unknown GPU '{}'{}; `gpuplan hw list` shows them", name,
                                      did_you_mean(name, db.gpu_names())));
    return nullptr;
  }
  if (g->info.id != name) diags.note("", "ID", fmt::format("'{}' is {} ({})", name, g->info.id, g->info.name));
  return g;
}

int list(const GlobalOptions& g, const HwOptions& o) {
  auto db = load_db(g);
  if (!db.ok()) return report(db.diagnostics());
  Table t;
  if (o.kind == "gpus") {
    t.columns = {{"id", "id"},
                 {"name", "name"},
                 {"bf16_TFLOPs", "bf16 TFLOP/s", true},
                 {"fp16_TFLOPs", "fp16 TFLOP/s", true},
                 {"fp8_TFLOPs", "fp8 TFLOP/s", true},
                 {"fp4_TFLOPs", "fp4 TFLOP/s", true},
                 {"hbm_GB", "HBM GB", true},
                 {"hbm_TBps", "HBM TB/s", true},
                 {"scale_up_uni_GBps", "scale-up GB/s/dir", true},
                 {"tdp_W", "TDP W", true},
                 {"price_usd_per_hour", "$/GPU-h", true},
                 {"price_kind", "price kind"}};
    for (const auto& x : db->gpus) {
      t.rows.push_back({x.info.id, x.info.name, num(tf(x, Precision::bf16)), num(tf(x, Precision::fp16)),
                        num(tf(x, Precision::fp8)),
                        num(tf(x, Precision::fp4)), num(u::to_GB(x.memory.capacity_label)),
                        num(u::to_TBps(x.memory.bandwidth)),
                        x.scale_up ? num(u::to_GBps(x.scale_up->per_gpu_uni)) : "",
                        x.tdp ? num(x.tdp->raw()) : "", x.price ? num(u::to_usd_per_hour(*x.price)) : "",
                        x.price ? std::string(hw::to_string(x.price_kind)) : ""});
    }
  } else if (o.kind == "links") {
    t.columns = {{"id", "id"}, {"name", "name"}, {"type", "type"}, {"generation", "gen"},
                 {"uni_GBps", "GB/s per dir", true}, {"per", "per"}, {"latency_us", "latency µs", true},
                 {"in_network_reduction", "in-network reduction"}};
    for (const auto& l : db->links) {
      std::optional<u::Bandwidth> bw;
      std::string per;
      if (l.per_link_uni) bw = l.per_link_uni, per = "link";
      else if (l.x16_uni) bw = l.x16_uni, per = "x16";
      else if (l.port) bw = l.port, per = "port";
      else if (l.gpu_to_gpu_bidir) bw = *l.gpu_to_gpu_bidir / 2.0, per = "GPU pair";
      t.rows.push_back({l.info.id, l.info.name, std::string(hw::to_string(l.type)), l.generation,
                        bw ? num(u::to_GBps(*bw)) : "", per, l.latency ? num(l.latency->raw() * 1e6) : "",
                        l.in_network_reduction ? (*l.in_network_reduction ? "yes" : "no") : ""});
    }
  } else if (o.kind == "nodes") {
    t.columns = {{"id", "id"}, {"name", "name"}, {"gpu", "gpu"}, {"gpus", "GPUs", true},
                 {"domain_gpus", "scale-up domain", true}, {"scale_up", "scale-up"}, {"scale_out", "scale-out"},
                 {"scale_out_Gbps", "scale-out Gb/s", true}};
    for (const auto& n : db->nodes) {
      t.rows.push_back({n.info.id, n.info.name, n.gpu, std::to_string(n.gpus), std::to_string(n.scale_up.domain_gpus),
                        n.scale_up.link + (n.scale_up.switch_id.empty() ? "" : " + " + n.scale_up.switch_id),
                        n.scale_out ? fmt::format("{}× {}", n.scale_out->nics, n.scale_out->link) : "",
                        n.scale_out ? num(n.scale_out->nic.raw() * 8.0 / 1e9 * n.scale_out->nics) : ""});
    }
  } else {
    t.columns = {{"id", "id"}, {"name", "name"}, {"node", "node"}, {"nodes", "nodes", true},
                 {"gpus", "GPUs", true}, {"fabric", "fabric"}};
    for (const auto& c : db->clusters) {
      const hw::NodeSpec* n = db->find_node(c.node);
      t.rows.push_back({c.info.id, c.info.name, c.node, std::to_string(c.nodes),
                        n ? std::to_string(static_cast<long long>(c.nodes) * n->gpus) : "",
                        c.fabric.link + (c.fabric.topology ? " " + std::string(hw::to_string(*c.fabric.topology)) : "")});
    }
  }
  out(t.render(parse_format(g.format)));
  return report(db.diagnostics());
}

std::string peak_key(Precision p) { return std::string(hw::to_string(p)) + (p == Precision::int8 ? "_TOPs" : "_TFLOPs"); }
std::string peak_text(Precision p, u::FlopRate r) {
  return u::format_number(u::to_TFLOPs(r)) + (p == Precision::int8 ? " TOP/s" : " TFLOP/s");
}
nlohmann::ordered_json peak_json(const hw::PeakTable& t) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (Precision p : hw::kAllPrecisions)
    if (auto r = t[static_cast<std::size_t>(p)]) o[peak_key(p)] = u::to_TFLOPs(*r);
  return o;
}

nlohmann::ordered_json gpu_json(const hw::GpuSpec& x, const std::optional<Estimate<u::Intensity>>& ridge) {
  nlohmann::ordered_json j;
  j["id"] = x.info.id;
  j["name"] = x.info.name;
  j["aliases"] = x.aliases;
  j["vendor"] = x.vendor;
  j["family"] = x.family;
  j["form_factor"] = x.form_factor;
  if (x.compute_units) j["compute_units"] = x.compute_units;
  if (x.boost_clock_MHz) j["boost_clock_MHz"] = *x.boost_clock_MHz;
  nlohmann::ordered_json peaks;
  for (Precision p : hw::kAllPrecisions)
    if (auto r = x.peak(p)) peaks[std::string(hw::to_string(p)) + (p == Precision::int8 ? "_TOPs" : "_TFLOPs")] = u::to_TFLOPs(*r);
  j["dense_peak"] = peaks;
  if (auto sp = peak_json(x.sparse_peak); !sp.empty()) j["sparse_peak"] = sp;
  if (!x.engines.empty()) {
    nlohmann::ordered_json e = nlohmann::ordered_json::array();
    for (const auto& en : x.engines) {
      nlohmann::ordered_json o{{"kind", en.kind}, {"name", en.name}, {"count", en.count}};
      if (en.clock_MHz) o["clock_MHz"] = *en.clock_MHz;
      o["dense_peak"] = peak_json(en.dense_peak);
      if (auto sp = peak_json(en.sparse_peak); !sp.empty()) o["sparse_peak"] = sp;
      e.push_back(o);
    }
    j["engines"] = e;
  }
  j["memory_capacity_GB"] = u::to_GB(x.memory.capacity_label);
  if (x.memory.shared_with_cpu) j["memory_shared_with_cpu"] = true;
  if (x.memory.device_reported) {
    j["memory_device_reported_GiB"] = u::to_GiB(*x.memory.device_reported);
    j["memory_device_reported_by"] = std::string(hw::to_string(x.memory.reported_by));
  }
  j["memory_bandwidth_TBps"] = u::to_TBps(x.memory.bandwidth);
  if (ridge) j["ridge_point_bf16_FLOP_per_B"] = ridge->value.raw();
  if (x.l2) j["l2_MB"] = x.l2->raw() / 1e6;
  if (x.tdp) j["tdp_W"] = x.tdp->raw();
  if (x.scale_up) j["scale_up"] = {{"link", x.scale_up->link}, {"links", x.scale_up->links},
                                   {"per_gpu_uni_GBps", u::to_GBps(x.scale_up->per_gpu_uni)}};
  if (!x.pcie.empty()) j["pcie"] = x.pcie;
  if (x.price) {
    j["price_usd_per_hour"] = u::to_usd_per_hour(*x.price);
    j["price_kind"] = std::string(hw::to_string(x.price_kind));
    j["price_provider"] = x.price_provider;
    j["price_date"] = x.price_date.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(x.price_date);
  }
  j["file"] = x.info.file;
  nlohmann::ordered_json src = nlohmann::ordered_json::array();
  for (const auto& s : x.info.sources) src.push_back({{"id", s.id}, {"ref", s.ref}, {"for", s.fields}});
  j["sources"] = src;
  if (!x.info.notes.empty()) j["notes"] = x.info.notes;
  return j;
}

int show(const GlobalOptions& g, const HwOptions& o) {
  auto db = load_db(g);
  if (!db.ok()) return report(db.diagnostics());
  Diagnostics diags = db.diagnostics();
  const Format f = parse_format(g.format);
  if (const hw::GpuSpec* x = db->find_gpu(o.id); x != nullptr || (db->find_link(o.id) == nullptr &&
                                                                    db->find_node(o.id) == nullptr &&
                                                                    db->find_cluster(o.id) == nullptr)) {
    x = resolve_gpu(*db, o.id, diags);
    if (x == nullptr) {
      std::vector<std::string> all = db->gpu_names();
      for (const auto& v : {db->link_ids(), db->node_ids(), db->cluster_ids()}) all.insert(all.end(), v.begin(), v.end());
      Diagnostics d2;
      d2.error("", "ID", fmt::format("unknown hardware id '{}'{}; `gpuplan hw list [--kind gpus|links|nodes|clusters]` "
                                     "shows them", o.id, did_you_mean(o.id, all)));
      return report(d2);
    }
    std::optional<Estimate<u::Intensity>> ridge;
    if (auto peak = x->peak(Precision::bf16).has_value() ? x->peak(Precision::bf16) : x->peak(Precision::fp16))
      ridge = model::ridge_point(*peak, x->memory.bandwidth, Origin::datasheet(x->info.cite("/dense_peak")),
                                 Origin::datasheet(x->info.cite("/memory/bandwidth_TBps")));
    if (f == Format::json) {
      out(json_text(gpu_json(*x, ridge)));
      return report(diags);
    }
    std::vector<Section> s;
    Section id{x->info.name, {}};
    id.rows = {{"id", x->info.id}, {"vendor / family", x->vendor + " " + x->family}, {"form factor", x->form_factor}};
    if (!x->aliases.empty()) {
      std::string a;
      for (const auto& al : x->aliases) a += (a.empty() ? "" : ", ") + al;
      id.rows.emplace_back("aliases", a);
    }
    if (x->compute_units) id.rows.emplace_back("compute units", fmt::format("{} {}", x->compute_units, x->compute_unit_kind));
    if (x->boost_clock_MHz) id.rows.emplace_back("boost clock", u::format_number(*x->boost_clock_MHz) + " MHz");
    s.push_back(id);
    Section peaks{"Dense peak (no 2:4 sparsity)", {}};
    for (Precision p : hw::kAllPrecisions)
      if (auto r = x->peak(p))
        peaks.rows.emplace_back(std::string(hw::to_string(p)),
                                u::format_number(u::to_TFLOPs(*r)) + (p == Precision::int8 ? " TOP/s" : " TFLOP/s"));
    if (!x->sparsity.empty()) peaks.rows.emplace_back("sparsity", x->sparsity);
    s.push_back(peaks);
    Section sparse{"2:4 structured-sparse peak (as the vendor quotes it; the model uses the dense rates)", {}};
    for (Precision p : hw::kAllPrecisions)
      if (auto r = x->sparse(p)) sparse.rows.emplace_back(std::string(hw::to_string(p)), peak_text(p, *r));
    if (!sparse.rows.empty()) s.push_back(sparse);
    for (const auto& en : x->engines) {
      Section e{fmt::format("On-chip engine: {} × {} ({}; not in the GPU's peaks)", en.count, en.name, en.kind), {}};
      if (en.clock_MHz) e.rows.emplace_back("clock", u::format_number(*en.clock_MHz) + " MHz");
      for (Precision p : hw::kAllPrecisions)
        if (auto r = en.dense_peak[static_cast<std::size_t>(p)])
          e.rows.emplace_back(std::string(hw::to_string(p)) + " dense", peak_text(p, *r));
      for (Precision p : hw::kAllPrecisions)
        if (auto r = en.sparse_peak[static_cast<std::size_t>(p)])
          e.rows.emplace_back(std::string(hw::to_string(p)) + " sparse", peak_text(p, *r));
      s.push_back(e);
    }
    Section mem{"Memory", {}};
    mem.rows.emplace_back("capacity", fmt::format("{} {} (label; = {})", u::format(x->memory.capacity_label),
                                                  x->memory.type, u::format(x->memory.capacity_label, u::BytePrefix::binary)));
    if (x->memory.device_reported)
      mem.rows.emplace_back("device reports", fmt::format("{} ({})",
                                                          u::format(*x->memory.device_reported, u::BytePrefix::binary, 4),
                                                          hw::to_string(x->memory.reported_by)));
    mem.rows.emplace_back("bandwidth", u::format(x->memory.bandwidth));
    if (x->memory.shared_with_cpu)
      mem.rows.emplace_back("shared", "unified with the CPU (system-on-chip): CPU, GPU and engines share the capacity "
                                      "and the bandwidth above");
    if (ridge) mem.rows.emplace_back("ridge point (bf16)", u::format(ridge->value, 4));
    if (x->l2) mem.rows.emplace_back("L2", u::format(*x->l2));
    if (x->llc) mem.rows.emplace_back("last-level cache", u::format(*x->llc));
    s.push_back(mem);
    Section io{"Power, links, price", {}};
    if (x->tdp) io.rows.emplace_back("TDP", u::format(*x->tdp));
    if (x->scale_up)
      io.rows.emplace_back("scale-up", fmt::format("{} × {} links, {} per direction", x->scale_up->link,
                                                   x->scale_up->links, u::format(x->scale_up->per_gpu_uni)));
    if (!x->pcie.empty()) io.rows.emplace_back("PCIe", x->pcie);
    if (x->price) io.rows.emplace_back("indicative price", describe_price(std::nullopt, x));
    s.push_back(io);
    Section src{"Sources (" + x->info.cited() + ")", {}};
    for (const auto& so : x->info.sources) src.rows.emplace_back(so.id, so.ref);
    if (!x->info.notes.empty()) src.rows.emplace_back("notes", x->info.notes);
    s.push_back(src);
    out(render_sections(s, f));
    if (g.explain && ridge) out(render_derivation(ridge->derivation, f));
    return report(diags);
  }
  // links, nodes and clusters: show the decoded file as JSON-ish sections
  auto sources = [](const hw::EntityInfo& info) {
    Section src{"Sources (" + info.cited() + ")", {}};
    for (const auto& so : info.sources) src.rows.emplace_back(so.id, so.ref);
    if (!info.notes.empty()) src.rows.emplace_back("notes", info.notes);
    return src;
  };
  auto src_json = [](const hw::EntityInfo& info) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& so : info.sources) a.push_back({{"id", so.id}, {"ref", so.ref}, {"for", so.fields}});
    return a;
  };
  if (f == Format::json) {
    nlohmann::ordered_json j;
    if (const hw::LinkSpec* l = db->find_link(o.id)) {
      j = {{"id", l->info.id}, {"name", l->info.name}, {"type", std::string(hw::to_string(l->type))},
           {"generation", l->generation}};
      if (l->per_link_uni) j["per_link_uni_GBps"] = u::to_GBps(*l->per_link_uni);
      if (l->x16_uni) j["x16_uni_GBps"] = u::to_GBps(*l->x16_uni);
      if (l->port) j["port_Gbps"] = l->port->raw() * 8.0 / 1e9;
      if (l->gpu_to_gpu_bidir) j["gpu_to_gpu_bidir_GBps"] = u::to_GBps(*l->gpu_to_gpu_bidir);
      if (l->max_domain_gpus) j["max_domain_gpus"] = *l->max_domain_gpus;
      if (l->in_network_reduction) j["in_network_reduction"] = *l->in_network_reduction;
      if (l->reduction) j["reduction_GBps"] = u::to_GBps(*l->reduction);
      if (l->latency) j["latency_us"] = l->latency->raw() * 1e6;
      j["file"] = l->info.file;
      j["sources"] = src_json(l->info);
    } else if (const hw::NodeSpec* n = db->find_node(o.id)) {
      j = {{"id", n->info.id}, {"name", n->info.name}, {"gpu", n->gpu}, {"gpus", n->gpus},
           {"scale_up", {{"link", n->scale_up.link}, {"switch", n->scale_up.switch_id},
                         {"domain_gpus", n->scale_up.domain_gpus}, {"topology", std::string(hw::to_string(n->scale_up.topology))}}}};
      if (n->scale_out)
        j["scale_out"] = {{"link", n->scale_out->link}, {"nics", n->scale_out->nics},
                          {"nic_Gbps", n->scale_out->nic.raw() * 8.0 / 1e9}};
      j["file"] = n->info.file;
      j["sources"] = src_json(n->info);
    } else if (const hw::ClusterSpec* c = db->find_cluster(o.id)) {
      j = {{"id", c->info.id}, {"name", c->info.name}, {"node", c->node}, {"nodes", c->nodes},
           {"fabric", {{"link", c->fabric.link}}}};
      if (c->fabric.topology) j["fabric"]["topology"] = std::string(hw::to_string(*c->fabric.topology));
      if (c->fabric.oversubscription) j["fabric"]["oversubscription"] = *c->fabric.oversubscription;
      j["file"] = c->info.file;
      j["sources"] = src_json(c->info);
    }
    out(json_text(j));
    return report(diags);
  }
  std::vector<Section> s;
  if (const hw::LinkSpec* l = db->find_link(o.id)) {
    Section a{l->info.name, {{"id", l->info.id}, {"type", std::string(hw::to_string(l->type))}, {"generation", l->generation}}};
    if (l->per_link_uni) a.rows.emplace_back("per link, one direction", u::format(*l->per_link_uni));
    if (l->x16_uni) a.rows.emplace_back("x16, one direction", u::format(*l->x16_uni));
    if (l->port) a.rows.emplace_back("port, one direction", u::format(*l->port) + fmt::format(" ({} Gb/s)", u::format_number(l->port->raw() * 8 / 1e9)));
    if (l->gpu_to_gpu_bidir) a.rows.emplace_back("GPU pair, both directions", u::format(*l->gpu_to_gpu_bidir));
    if (l->max_domain_gpus) a.rows.emplace_back("max NVLink domain", std::to_string(*l->max_domain_gpus) + " GPUs");
    if (l->in_network_reduction) a.rows.emplace_back("in-network reduction", *l->in_network_reduction ? "yes" : "no");
    if (l->reduction) a.rows.emplace_back("reduction bandwidth", u::format(*l->reduction));
    if (l->latency) a.rows.emplace_back("latency", u::format(*l->latency));
    s = {a, sources(l->info)};
  } else if (const hw::NodeSpec* n = db->find_node(o.id)) {
    Section a{n->info.name, {{"id", n->info.id}, {"GPU", n->gpu}, {"GPUs per node", std::to_string(n->gpus)},
                             {"scale-up", fmt::format("{}{}, {} topology, domain of {} GPUs", n->scale_up.link,
                                                      n->scale_up.switch_id.empty() ? "" : " via " + n->scale_up.switch_id,
                                                      hw::to_string(n->scale_up.topology), n->scale_up.domain_gpus)}}};
    if (n->scale_out)
      a.rows.emplace_back("scale-out", fmt::format("{} × {} at {} per direction", n->scale_out->nics, n->scale_out->link,
                                                   u::format(n->scale_out->nic)));
    if (!n->host_cpu.empty()) a.rows.emplace_back("host CPU", n->host_cpu);
    if (n->host_cores) a.rows.emplace_back("host CPU cores", std::to_string(*n->host_cores));
    if (n->host_memory) a.rows.emplace_back("host memory", u::format(*n->host_memory));
    if (n->host_memory_bandwidth)
      a.rows.emplace_back("host memory bandwidth", u::format(*n->host_memory_bandwidth) + " peak");
    s = {a, sources(n->info)};
  } else if (const hw::ClusterSpec* c = db->find_cluster(o.id)) {
    Section a{c->info.name, {{"id", c->info.id}, {"node", c->node}, {"nodes", std::to_string(c->nodes)},
                             {"fabric link", c->fabric.link},
                             {"fabric topology", c->fabric.topology ? std::string(hw::to_string(*c->fabric.topology)) : "not sourced"},
                             {"oversubscription", c->fabric.oversubscription ? u::format_number(*c->fabric.oversubscription) : "not sourced"}}};
    s = {a, sources(c->info)};
  }
  out(render_sections(s, f));
  return report(diags);
}

int validate(const GlobalOptions& g, const HwOptions& o) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (o.paths.empty()) {
    if (!dir) return report(diags);
    const auto ws = app::load_workspace(*dir, {.hardware = true, .models = false});
    if (!ws.ok()) return report(ws.diagnostics());
    const hw::HardwareDb& db = ws->db;
    std::size_t rows = 0;
    for (const auto& t : db.efficiency) rows += t.rows.size();
    out(fmt::format("ok: {} GPUs, {} links, {} nodes, {} clusters, {} measured-efficiency rows in {}\n",
                    db.gpus.size(), db.links.size(), db.nodes.size(), db.clusters.size(), rows,
                    *dir + "/hardware"));
    return report(ws.diagnostics());
  }
  // Given files (or folders): decode them, then check their references against the data directory's entities.
  hw::HardwareDb mine;
  std::size_t files = 0;
  for (const auto& p : o.paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> v;
      for (const auto& e : std::filesystem::recursive_directory_iterator(p, ec))
        if (e.path().extension() == ".json") v.push_back(e.path());
      std::sort(v.begin(), v.end());
      for (const auto& f : v) hw_io::load_hardware_file(f.string(), mine, diags), ++files;
    } else {
      hw_io::load_hardware_file(p, mine, diags);
      ++files;
    }
  }
  if (!diags.has_errors()) {
    hw::HardwareDb merged = mine;
    if (dir) {
      Diagnostics ignore;
      auto base_ws = app::load_workspace(*dir, {.hardware = true, .models = false});
      if (base_ws.ok()) {
        const hw::HardwareDb* base = &base_ws->db;
        auto add = [](auto& into, const auto& from, const auto& mine_v) {
          for (const auto& e : from) {
            bool shadowed = false;
            for (const auto& m : mine_v) shadowed = shadowed || m.info.id == e.info.id;
            if (!shadowed) into.push_back(e);
          }
        };
        add(merged.gpus, base->gpus, mine.gpus);
        add(merged.links, base->links, mine.links);
        add(merged.nodes, base->nodes, mine.nodes);
        add(merged.clusters, base->clusters, mine.clusters);
      }
    }
    hw_io::check_references(merged, diags);
  }
  if (!diags.has_errors()) out(fmt::format("ok: {} file(s) valid\n", files));
  return report(diags);
}

}  // namespace

void register_hw(CLI::App& app, GlobalOptions& g, int& rc) {
  auto* hw = app.add_subcommand("hw", "hardware database: GPUs, links, nodes, clusters");
  hw->require_subcommand(1);
  auto o = std::make_shared<HwOptions>();

  auto* l = hw->add_subcommand("list", "list GPUs (default), links, nodes or clusters");
  l->add_option("--kind,-k", o->kind, "what to list")->check(CLI::IsMember({"gpus", "links", "nodes", "clusters"}))->capture_default_str();
  add_format_option(*l, g);
  l->callback([&g, o, &rc] { rc = list(g, *o); });

  auto* s = hw->add_subcommand("show", "show one GPU, link, node or cluster with its sources");
  s->add_option("ID", o->id, "id or short name (h100, b200...)")->required();
  add_format_option(*s, g);
  s->add_flag("--explain", g.explain, "print derivations of computed values");
  s->callback([&g, o, &rc] { rc = show(g, *o); });

  auto* v = hw->add_subcommand("validate", "validate hardware files (default: the whole data directory)");
  v->add_option("PATH", o->paths, "files or folders to validate");
  v->callback([&g, o, &rc] { rc = validate(g, *o); });
}

}  // namespace gpuplan::cli
