#pragma once
#include <doctest/doctest.h>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::test {
/// The bundled hardware database, loaded once per test executable.
inline const hw::HardwareDb& hardware() {
  static const hw::HardwareDb d = [] {
    auto r = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  return d;
}

/// The GPU of one node of the bundled database as a training or serving system (model::ServingSystem is the same
/// type), e.g. node_system("dgx-h100").
inline model::TrainingSystem node_system(const std::string& node_id) {
  model::TrainingSystem s;
  s.db = &hardware();
  s.node = hardware().find_node(node_id);
  REQUIRE_MESSAGE(s.node != nullptr, "node not in the database: " << node_id);
  s.gpu = hardware().find_gpu(s.node->gpu);
  REQUIRE(s.gpu != nullptr);
  return s;
}

/// The shipped model library, loaded once per test executable.
inline const wl_io::ModelLibrary& library() {
  static const wl_io::ModelLibrary lib = [] {
    auto r = wl_io::load_model_library(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  return lib;
}
inline const wl::TransformerArch& arch(const std::string& id) {
  const auto* m = library().find(id);
  REQUIRE_MESSAGE(m != nullptr, "model not in library: " << id);
  return m->arch;
}
/// An architecture from an inline Hugging Face config.
inline wl::TransformerArch hf(const std::string& json_text) {
  Diagnostics d;
  auto j = json_io::parse(json_text, "inline.json", d);
  REQUIRE(j.has_value());
  auto r = wl_io::import_hf_config(*j, "inline.json");
  REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
  return r.value();
}
}  // namespace gpuplan::test
