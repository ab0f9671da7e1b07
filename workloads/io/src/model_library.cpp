#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gpuplan/wl_io/model_io.hpp"
#include "io_common.hpp"

namespace gpuplan::wl_io {

namespace fs = std::filesystem;

namespace {
const FieldTable& published_fields() {
  static const FieldTable t = [] {
    FieldSpec total = field("total_params_B", FieldType::number, Presence::required, "publisher's total parameters, billions");
    total.min = 0;
    total.min_exclusive = true;
    total.max = 1e6;
    FieldSpec active = field("active_params_B", FieldType::number, Presence::optional, "active parameters per token (MoE), billions");
    active.min = 0;
    active.min_exclusive = true;
    active.max = 1e6;
    FieldSpec convention = field("active_convention", FieldType::string, Presence::optional,
                                 "whether the publisher's active count includes the input embedding (default: with)");
    convention.choices = {"with-input-embedding", "without-input-embedding"};
    FieldSpec rounded = field("rounded_to_B", FieldType::number, Presence::optional,
                              "the publisher rounds the counts to this many billions (\"22B\" -> 1)");
    rounded.min = 0;
    rounded.min_exclusive = true;
    rounded.max = 1000;
    return FieldTable{total, active, convention, rounded,
                      field("source", FieldType::string, Presence::required, "where the count is published")};
  }();
  return t;
}
const FieldTable& source_fields() {
  static const FieldTable t{field("id", FieldType::string, Presence::required, "short tag"),
                            field("ref", FieldType::string, Presence::required, "what the source is"),
                            field("for", FieldType::string_list, Presence::optional, "JSON pointers it backs")};
  return t;
}
}  // namespace

const FieldTable& model_file_fields() {
  static const FieldTable t = [] {
    FieldSpec schema = field("schema", FieldType::integer, Presence::required, "schema version (1)");
    schema.min = 1;
    schema.max = 1;
    FieldSpec kind = field("kind", FieldType::string, Presence::required, "entity kind");
    kind.choices = {"model"};
    FieldSpec published = field("published", FieldType::object, Presence::optional, "publisher's parameter counts");
    published.nested = &published_fields();
    return FieldTable{schema,
                      kind,
                      field("id", FieldType::string, Presence::required, "identifier; equal to the file name"),
                      field("name", FieldType::string, Presence::required, "display name"),
                      field("aliases", FieldType::string_list, Presence::optional, "other names"),
                      field("family", FieldType::string, Presence::required, "model family"),
                      field("hf_repo", FieldType::string, Presence::optional, "Hugging Face repository of the config"),
                      field("benchmark_shape", FieldType::boolean, Presence::optional,
                            "true: a shape defined by a benchmark or paper, not a released checkpoint (listed apart)"),
                      published,
                      field("config", FieldType::object, Presence::required, "Hugging Face config.json fields"),
                      field("sources", FieldType::any, Presence::required, "list of {id, ref, for}"),
                      field("notes", FieldType::string, Presence::optional, "free text")};
  }();
  return t;
}

Result<ModelEntry> load_model_file(const std::string& path) {
  Diagnostics diags;
  auto text = json_io::read_text_file(path, diags);
  if (!text) return Result<ModelEntry>(std::move(diags));
  Diagnostics strict;
  auto j = json_io::parse(*text, path, strict);
  if (!j) {
    // Hugging Face configs are written by Python's json module, which writes Infinity and NaN (Nemotron-H's
    // "time_step_limit": [0.0, Infinity]). They are accepted in a bare config.json only, as strings that no size
    // key accepts; gpuplan's own files stay strict JSON.
    Diagnostics lenient;
    std::vector<json_io::NonFiniteLiteral> found;
    auto hf = json_io::parse_allowing_non_finite(*text, path, lenient, &found);
    if (hf && !found.empty() && hf->is_object() && !hf->contains("kind")) {
      j = std::move(hf);
      for (const auto& f : found) {
        Diagnostic d;
        d.severity = Severity::note;
        d.file = path;
        d.line = f.line;
        d.column = f.column;
        d.message = fmt::format("non-standard JSON literal {} (Python's json writes it) read as the string \"{}\": "
                                "accepted in a Hugging Face config.json only, where no size key takes it",
                                f.text, f.text);
        diags.add(std::move(d));
      }
    } else {
      diags.append(strict);
      return Result<ModelEntry>(std::move(diags));
    }
  }
  if (!j->is_object()) {
    diags.error(path, "/", fmt::format("expected an object, found {}", json_io::describe_type(*j)));
    return Result<ModelEntry>(std::move(diags));
  }
  ModelEntry e;
  e.file = path;
  const std::string stem = fs::path(path).stem().string();
  if (!j->contains("kind")) {
    // A bare Hugging Face config.json.
    if (!j->contains("model_type") && !j->contains("architectures") && !j->contains("hidden_size") &&
        !j->contains("n_embd") && !j->contains("text_config")) {
      diags.error(path, "/",
                  "neither a gpuplan model file (no 'kind') nor a Hugging Face config.json (no 'model_type', "
                  "'architectures' or 'hidden_size')");
      return Result<ModelEntry>(std::move(diags));
    }
    auto arch = import_hf_config(*j, path, "", &e.ignored_keys);
    diags.append(arch.diagnostics());
    if (!arch.ok()) return Result<ModelEntry>(std::move(diags));
    e.arch = std::move(arch).value();
    const std::string dir = fs::path(path).parent_path().filename().string();
    e.arch.id = stem == "config" && !dir.empty() ? dir : stem;
    e.arch.name = e.arch.id;
    e.family = e.arch.model_type;
    return Result<ModelEntry>(std::move(e), std::move(diags));
  }
  ObjectReader r(*j, model_file_fields(), path, "", diags);
  e.aliases = r.strings("aliases").value_or(std::vector<std::string>{});
  e.family = r.str("family").value_or("");
  e.hf_repo = r.str("hf_repo").value_or("");
  e.benchmark_shape = r.boolean("benchmark_shape").value_or(false);
  e.notes = r.str("notes").value_or("");
  if (auto p = r.object("published"); p && p->valid()) {
    PublishedCounts c;
    c.total_params_B = p->num("total_params_B").value_or(0);
    c.active_params_B = p->num("active_params_B");
    c.active_includes_input_embedding = p->str("active_convention").value_or("with-input-embedding") == "with-input-embedding";
    c.rounded_to_B = p->num("rounded_to_B");
    c.source = p->str("source").value_or("");
    e.published = c;
  }
  if (const Json* s = r.raw("sources")) {
    if (!s->is_array() || s->empty()) {
      r.error("sources", "expected a non-empty array of {id, ref, for}");
    } else {
      for (std::size_t i = 0; i < s->size(); ++i) {
        ObjectReader sr((*s)[i], source_fields(), path, "/sources/" + std::to_string(i), diags);
        if (sr.valid()) e.sources.push_back(sr.str("id").value_or("") + ": " + sr.str("ref").value_or(""));
      }
    }
  }
  if (const Json* cfg = r.raw("config")) {
    auto arch = import_hf_config(*cfg, path, "/config", &e.ignored_keys);
    diags.append(arch.diagnostics());
    if (arch.ok()) e.arch = std::move(arch).value();
  }
  e.arch.id = r.str("id").value_or("");
  e.arch.name = r.str("name").value_or("");
  if (!e.arch.id.empty() && e.arch.id != stem)
    r.error("id", fmt::format("id '{}' does not match the file name '{}.json'", e.arch.id, stem));
  if (diags.has_errors()) return Result<ModelEntry>(std::move(diags));
  return Result<ModelEntry>(std::move(e), std::move(diags));
}

const ModelEntry* ModelLibrary::find(const std::string& id_or_alias) const {
  for (const auto& m : models)
    if (m.arch.id == id_or_alias) return &m;
  for (const auto& m : models)
    for (const auto& a : m.aliases)
      if (a == id_or_alias) return &m;
  return nullptr;
}

std::vector<std::string> ModelLibrary::names() const {
  std::vector<std::string> out;
  for (const auto& m : models) {
    out.push_back(m.arch.id);
    out.insert(out.end(), m.aliases.begin(), m.aliases.end());
  }
  return out;
}

Result<ModelLibrary> load_model_library(const std::string& data_dir) {
  Diagnostics diags;
  ModelLibrary lib;
  const fs::path dir = fs::path(data_dir) / "models";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    diags.error(dir.string(), "", "model library directory not found (set --data-dir or GPUPLAN_DATA_DIR)");
    return Result<ModelLibrary>(std::move(diags));
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::string> seen;
  for (const auto& f : files) {
    auto m = load_model_file(f.string());
    diags.append(m.diagnostics());
    if (!m.ok()) continue;
    bool clash = false;
    auto claim = [&](const std::string& n, const std::string& ptr) {
      auto [it, inserted] = seen.emplace(n, f.string());
      if (!inserted) {
        diags.error(f.string(), ptr, fmt::format("'{}' is already used by {}", n, it->second));
        clash = true;
      }
    };
    claim(m->arch.id, "/id");
    for (std::size_t i = 0; i < m->aliases.size(); ++i) claim(m->aliases[i], "/aliases/" + std::to_string(i));
    if (clash) continue;
    ModelEntry entry = std::move(m).value();
    // Citations name the file relative to the data directory ("models/llama-3.1-8b.json"), not this machine's path.
    entry.arch.source = (fs::path("models") / f.filename()).generic_string();
    lib.models.push_back(std::move(entry));
  }
  if (diags.has_errors()) return Result<ModelLibrary>(std::move(diags));
  return Result<ModelLibrary>(std::move(lib), std::move(diags));
}

Result<ModelEntry> resolve_model(const ModelLibrary& lib, const std::string& name_or_path) {
  if (const ModelEntry* m = lib.find(name_or_path)) return *m;
  std::error_code ec;
  const bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                               (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (looks_like_path || fs::exists(name_or_path, ec)) return load_model_file(name_or_path);
  Diagnostics diags;
  diags.error("", "MODEL",
              fmt::format("unknown model '{}'{}; `gpuplan model list` shows the library, or give a path to a "
                          "config.json",
                          name_or_path, did_you_mean(name_or_path, lib.names())));
  return Result<ModelEntry>(std::move(diags));
}

}  // namespace gpuplan::wl_io
