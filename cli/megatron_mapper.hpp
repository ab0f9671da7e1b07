#pragma once
// Internal to gpuplan_cli_lib: the mapper behind map_megatron (megatron_args.hpp), one Megatron-LM command's flags to
// gpuplan's scenario keys. megatron_map.cpp classifies every flag (ignored, assumed, handled, refused) and runs the
// steps; megatron_map_plan.cpp maps the plan's keys (parallelism, batch, precision, recompute, pipeline split,
// optimizer); megatron_map_layers.cpp the model's layers (MoE dispatch and capacity, attention, the shape checked
// against -m MODEL).
#include <charconv>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "megatron_args.hpp"

namespace gpuplan::cli::detail {

/// The flag with its values as typed ("--tensor-model-parallel-size 8").
std::string as_typed(const MegatronFlag& f);

class Mapper {
 public:
  Mapper(const MegatronArgs& a, Diagnostics& d) : a_(a), diags_(d) {
    for (const auto& f : a.flags) last_[f.name] = &f;
  }

  std::optional<MegatronMapping> run();

 private:
  const MegatronFlag* get(const char* name) const {
    auto it = last_.find(name);
    return it == last_.end() ? nullptr : it->second;
  }
  Diagnostic at(const MegatronFlag& f, std::string msg) const {
    const int line = f.line != 0 ? f.line : (f.values.empty() ? 0 : f.values.front().line);
    return Diagnostic{Severity::error, a_.source, f.name, line, 0, std::move(msg)};
  }
  void refuse(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {} {}", as_typed(f), why, kNotModelled)));
  }
  void bad(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {}", as_typed(f), why)));
  }

  /// The single value of `f`, refused when it uses a variable the script does not set.
  std::optional<std::string> value(const MegatronFlag& f) {
    if (f.values.empty()) return std::string();
    if (!f.values.front().unresolved.empty()) {
      bad(f, "uses " + unresolved_phrase(f.values.front().unresolved.front()));
      return std::nullopt;
    }
    return f.values.front().text;
  }
  std::optional<long long> integer(const char* name, long long lo = 1) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    auto v = value(*f);
    if (!v) return std::nullopt;
    long long n = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size() || n < lo) {
      bad(*f, fmt::format("expected an integer ≥ {}", lo));
      return std::nullopt;
    }
    return n;
  }
  std::optional<std::string> text(const char* name) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    return value(*f);
  }
  bool given(const char* name) const { return get(name) != nullptr; }
  template <class V>
  void set(const std::string& key, const V& v, const char* flag) {
    m_.keys[key] = v;
    m_.origin[key] = as_typed(*get(flag));
  }
  template <class V>
  void set_default(const std::string& key, const V& v, const std::string& why) {
    m_.keys[key] = v;
    m_.origin[key] = "--megatron-args (" + why + ")";
    m_.defaulted[key] = why;
  }

  // The plan's keys (megatron_map_plan.cpp).
  void parallel();
  void batch();
  void precision();
  void map_fp8_recipe(const std::string& recipe);
  void recompute();
  void pipeline_split();
  void optimizer();
  void megatron_fsdp();
  void optimizer_instances();
  void wgrad_fusion();
  void dp_sharp();
  void deferred_head_wgrad();
  /// Replaces a key another mapping step set (or defaulted), with its new origin.
  template <class V>
  void reset(const std::string& key, const V& v, std::string origin) {
    m_.keys[key] = v;
    m_.origin[key] = std::move(origin);
    m_.defaulted.erase(key);
  }
  // The model's layers (megatron_map_layers.cpp).
  void moe();
  void capacity();
  void attention();
  void shape();

  const MegatronArgs& a_;
  Diagnostics& diags_;
  std::map<std::string, const MegatronFlag*> last_;
  MegatronMapping m_;
};

}  // namespace gpuplan::cli::detail
