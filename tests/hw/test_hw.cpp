// Hardware data: the shipped database, the decoders' units, and every diagnostic of bad input with its exact text
// (DESIGN.md §7: "Every diagnostic has a test on its text"; §8: bad-input files paired with their expected messages).
//
// Bad-input files live in tests/fixtures/hw/bad/, one problem per file (many-errors.json has several on purpose).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <sys/stat.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_paths.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/hw/lookup.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "../cli/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
namespace u = gpuplan::units;
using gpuplan::Diagnostics;
using gpuplan::hw::HardwareDb;
using gpuplan::hw::Precision;
using gpuplan::json_io::Json;

const std::string kData = GPUPLAN_TEST_DATA_DIR;

// The shared fixtures are in tests/fixtures. GPUPLAN_TEST_FIXTURES is set from the calling folder
// (tests/hw/fixtures), so fall back to the repository's tests/fixtures when it has no hw/ folder.
std::string fixtures() {
  const fs::path given = GPUPLAN_TEST_FIXTURES;
  if (fs::is_directory(given / "hw")) return given.string();
  return (fs::path(kData).parent_path() / "tests" / "fixtures").string();
}
std::string bad(const std::string& name) { return fixtures() + "/hw/bad/" + name; }

/// Loads one file on its own (no cross references) and returns all diagnostics as text.
std::string load_alone(const std::string& path) {
  HardwareDb db;
  Diagnostics diags;
  gpuplan::hw_io::load_hardware_file(path, db, diags);
  return diags.to_string();
}

/// Loads the shipped database, adds one file and runs the cross-reference checks (what `hw validate FILE` does).
std::string load_with_data(const std::string& path) {
  auto base = gpuplan::hw_io::load_hardware_db(kData);
  REQUIRE(base.ok());
  HardwareDb db = base.value();
  Diagnostics diags;
  gpuplan::hw_io::load_hardware_file(path, db, diags);
  if (!diags.has_errors()) gpuplan::hw_io::check_references(db, diags);
  return diags.to_string();
}

const HardwareDb& shipped() {
  static const HardwareDb db = [] {
    auto r = gpuplan::hw_io::load_hardware_db(kData);
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    return r.value();
  }();
  return db;
}

double tflops(const gpuplan::hw::GpuSpec& g, Precision p) {
  auto r = g.peak(p);
  REQUIRE(r.has_value());
  return u::to_TFLOPs(*r);
}

// A minimal valid GPU; tests change one thing at a time.
Json minimal_gpu() {
  return Json::parse(R"({
    "schema": 1, "kind": "gpu", "id": "test-gpu", "name": "Test GPU",
    "vendor": "NVIDIA", "family": "Hopper", "form_factor": "SXM5",
    "dense_peak": { "bf16_TFLOPs": 989.4 },
    "memory": { "type": "HBM3", "capacity_GB": 80, "bandwidth_TBps": 3.35 },
    "sources": [ { "id": "T1", "ref": "test" } ]
  })");
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("shipped hardware database") {
  TEST_CASE("the data directory loads with 27 GPUs and no diagnostics at all") {
    auto r = gpuplan::hw_io::load_hardware_db(kData);
    INFO(r.diagnostics().to_string());
    REQUIRE(r.ok());
    CHECK(r.diagnostics().empty());
    CHECK(r->gpus.size() == 27);
    const std::vector<std::string> ids{"v100-sxm2",      "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-80gb",
                                       "h100-sxm5-80gb", "h100-pcie-80gb", "h100-nvl",       "h800-sxm5",
                                       "h20",            "h200-sxm-141gb", "b100",           "b200-hgx",
                                       "gb200-gpu",      "b300-hgx",       "gb300-gpu",      "l40s",
                                       "l4",             "mi250x",         "mi300x",         "mi325x",
                                       "mi355x",         "jetson-agx-orin-64gb", "jetson-agx-orin-32gb",
                                       "jetson-agx-thor", "rtx-4090",     "rtx-5090",
                                       "h100-sxm-96gb-hbm2e"};
    for (const auto& id : ids) {
      CAPTURE(id);
      const auto* g = r->find_gpu(id);
      REQUIRE(g != nullptr);
      CHECK(g->info.id == id);
      CHECK(g->info.file == (fs::path(kData) / "hardware" / "gpus" / (id + ".json")).string());
      // Citations name the file relative to the data directory, not the absolute path of this machine.
      CHECK(g->info.cited() == "hardware/gpus/" + id + ".json");
      CHECK(g->info.cite("/memory").rfind("hardware/gpus/" + id + ".json#/memory", 0) == 0);
    }
    for (const auto& n : r->nodes) CHECK(n.info.cited() == "hardware/nodes/" + n.info.id + ".json");
  }

  TEST_CASE("every GPU has a dense bf16 or fp16 peak, an HBM capacity and an HBM bandwidth") {
    for (const auto& g : shipped().gpus) {
      CAPTURE(g.info.id);
      const auto peak = g.peak(Precision::bf16) ? g.peak(Precision::bf16) : g.peak(Precision::fp16);
      REQUIRE(peak.has_value());
      CHECK(peak->raw() > 0.0);
      CHECK(g.memory.capacity_label.raw() > 0.0);
      CHECK(g.memory.bandwidth.raw() > 0.0);
      CHECK_FALSE(g.info.sources.empty());
    }
  }

  TEST_CASE("every alias resolves to its own part and is unique") {
    const auto& db = shipped();
    for (const auto& g : db.gpus)
      for (const auto& a : g.aliases) {
        CAPTURE(a);
        REQUIRE(db.find_gpu(a) != nullptr);
        CHECK(db.find_gpu(a)->info.id == g.info.id);
      }
  }

  TEST_CASE("find_gpu resolves the short name h100 to h100-sxm5-80gb") {
    const auto* g = shipped().find_gpu("h100");
    REQUIRE(g != nullptr);
    CHECK(g->info.id == "h100-sxm5-80gb");
    CHECK(shipped().find_gpu("nosuchgpu") == nullptr);
  }

  // Reference values: ../shared/reference/hardware_facts.md, §1 (A100: S1, S6, S42), §2 (H100 SXM5: S5, S10, S11;
  // H200: S1, S23) and §3 (B200: S9, S7). They check the decoder and its units end to end: TFLOP/s -> FLOP/s,
  // TB/s -> B/s, GB -> 10^9 B.
  TEST_CASE("known datasheet values decode into base units") {
    const auto& db = shipped();
    SUBCASE("H100 SXM5: 989.4 dense bf16 TFLOP/s, 3.35 TB/s, 80 GB") {
      const auto* g = db.find_gpu("h100-sxm5-80gb");
      REQUIRE(g != nullptr);
      CHECK(g->peak(Precision::bf16)->raw() == gptest::approx(989.4e12));
      CHECK(tflops(*g, Precision::fp16) == gptest::approx(989.4));
      CHECK(g->memory.bandwidth.raw() == gptest::approx(3.35e12));
      CHECK(g->memory.capacity_label.raw() == gptest::approx(80e9));
    }
    SUBCASE("H200 SXM: 141 GB at 4.8 TB/s") {
      const auto* g = db.find_gpu("h200");
      REQUIRE(g != nullptr);
      CHECK(g->info.id == "h200-sxm-141gb");
      CHECK(g->memory.capacity_label.raw() == gptest::approx(141e9));
      CHECK(g->memory.bandwidth.raw() == gptest::approx(4.8e12));
      CHECK(tflops(*g, Precision::bf16) == gptest::approx(989.4));
    }
    SUBCASE("A100 SXM4 80 GB: 312 dense bf16 TFLOP/s, 2.039 TB/s") {
      const auto* g = db.find_gpu("a100");
      REQUIRE(g != nullptr);
      CHECK(g->info.id == "a100-sxm4-80gb");
      CHECK(g->peak(Precision::bf16)->raw() == gptest::approx(312e12));
      CHECK(g->memory.bandwidth.raw() == gptest::approx(2.039e12));
    }
    SUBCASE("B200: 2250 dense bf16 TFLOP/s") {
      const auto* g = db.find_gpu("b200");
      REQUIRE(g != nullptr);
      CHECK(g->info.id == "b200-hgx");
      CHECK(g->peak(Precision::bf16)->raw() == gptest::approx(2250e12));
    }
    SUBCASE("V100 has no bf16 unit: absent, not zero") {
      const auto* g = db.find_gpu("v100-sxm2");
      REQUIRE(g != nullptr);
      CHECK_FALSE(g->peak(Precision::bf16).has_value());
      CHECK(tflops(*g, Precision::fp16) == gptest::approx(125));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("units the decoder relies on") {
  TEST_CASE("capacity_GB 80 is 80e9 bytes, not 80 GiB") {
    auto r = gpuplan::hw_io::decode_gpu(minimal_gpu(), "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    CHECK(r->memory.capacity_label.raw() == 80e9);
    CHECK_FALSE(r->memory.device_reported.has_value());
    CHECK(r->memory_capacity().raw() == 80e9);  // no device figure: the label is what the driver is assumed to show
  }

  TEST_CASE("device_reported_MiB is mebibytes and takes precedence over the label") {
    Json j = minimal_gpu();
    j["memory"]["device_reported_MiB"] = 81559;
    j["memory"]["device_reported_by"] = "nvidia-smi";
    auto r = gpuplan::hw_io::decode_gpu(j, "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    REQUIRE(r->memory.device_reported.has_value());
    CHECK(r->memory.device_reported->raw() == 81559.0 * 1024.0 * 1024.0);
    CHECK(r->memory_capacity().raw() == 81559.0 * 1048576.0);
    // The shipped B200: MLPerf reports 183,359 MiB (hardware_facts.md §3, S21) = 192.3e9 B, above the 180 GB label.
    const auto* b200 = shipped().find_gpu("b200-hgx");
    REQUIRE(b200 != nullptr);
    CHECK(b200->memory_capacity().raw() == 183359.0 * 1048576.0);
    CHECK(b200->memory.capacity_label.raw() == gptest::approx(180e9));
  }

  TEST_CASE("context_MiB is mebibytes and needs its basis") {
    Json j = minimal_gpu();
    j["memory"]["context_MiB"] = 685;
    j["memory"]["context_basis"] = "measured";
    auto r = gpuplan::hw_io::decode_gpu(j, "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    REQUIRE(r->memory.context.has_value());
    CHECK(r->memory.context->raw() == 685.0 * 1048576.0);
    CHECK(r->memory.context_basis == "measured");
    CHECK_FALSE(gpuplan::hw_io::decode_gpu(minimal_gpu(), "")->memory.context.has_value());
    j["memory"].erase("context_basis");
    auto bad = gpuplan::hw_io::decode_gpu(j, "g.json");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.diagnostics().to_string().find("/memory/context_MiB: error: context_MiB needs 'context_basis'") !=
          std::string::npos);
  }

  TEST_CASE("Blackwell SM counts agree with the dense bf16 peaks at a clock no higher than the max SM clock") {
    // A Blackwell SM does 8,192 dense bf16 FLOP per clock (4 tensor cores; NVIDIA Blackwell Ultra blog: 160 SMs, 640
    // tensor cores). The datasheet peak / (SMs x 8,192) is the clock the datasheet assumes; it cannot exceed the
    // device-reported max SM clock. B200: 2,250e12 / (148 x 8,192) = 1.856 GHz <= 1.965; GB200 (152 SMs,
    // device-reported): 2,500e12 / (152 x 8,192) = 2.008 GHz <= 2.062. A wrong SM count (Hopper's 132) would give
    // 2.08 and 2.31 GHz, above both.
    for (const auto& [id, sms, ghz] : {std::tuple{"b200-hgx", 148, 1.856}, std::tuple{"gb200-gpu", 152, 2.008}}) {
      // A named copy: clang 14 refuses capturing a structured binding in CAPTURE's lambda (C++20 P1091).
      const auto& captured_id = id;
      CAPTURE(captured_id);
      const auto* g = shipped().find_gpu(id);
      REQUIRE(g != nullptr);
      CHECK(g->compute_units == sms);
      REQUIRE(g->boost_clock_MHz.has_value());
      const double clock_GHz = g->peak(gpuplan::hw::Precision::bf16)->raw() / (double(g->compute_units) * 8192.0) / 1e9;
      CHECK(clock_GHz == gptest::approx(ghz).epsilon(0.001));
      CHECK(clock_GHz * 1000.0 <= double(*g->boost_clock_MHz));
    }
  }

  TEST_CASE("port_Gbps 400 is 50e9 bytes per second (gigabits, not gigabytes)") {
    const auto* ndr = shipped().find_link("ib-ndr");
    REQUIRE(ndr != nullptr);
    REQUIRE(ndr->port.has_value());
    CHECK(ndr->port->raw() == gptest::approx(50e9));

    auto r = gpuplan::hw_io::decode_link(Json::parse(R"({"schema": 1, "kind": "link", "id": "x", "name": "x",
        "type": "ethernet", "generation": "800G", "port_Gbps": 800, "latency_us": 2.5,
        "sources": [{"id": "T1", "ref": "test"}]})"),
                                         "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    CHECK(r->port->raw() == gptest::approx(100e9));
    CHECK(r->latency->raw() == gptest::approx(2.5e-6));
  }

  TEST_CASE("GB/s, MB, W and $/hour keys convert to B/s, B, W and $/s") {
    Json j = minimal_gpu();
    j["scale_up"] = {{"link", "nvlink4"}, {"links", 18}, {"per_gpu_uni_GBps", 450}};
    j["l2_MB"] = 50;
    j["tdp_W"] = 700;
    j["price_usd_per_hour"] = 3.6;
    j["price_kind"] = "on_demand";
    j["price_provider"] = "Example Cloud";
    j["dense_peak"]["int8_TOPs"] = 1978.9;
    auto r = gpuplan::hw_io::decode_gpu(j, "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    REQUIRE(r->scale_up.has_value());
    CHECK(r->scale_up->per_gpu_uni.raw() == gptest::approx(450e9));
    CHECK(r->scale_up->links == 18);
    CHECK(r->l2->raw() == gptest::approx(50e6));
    CHECK(r->tdp->raw() == gptest::approx(700));
    CHECK(r->price->raw() == gptest::approx(3.6 / 3600.0));
    CHECK(r->peak(Precision::int8)->raw() == gptest::approx(1978.9e12));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("bad hardware files: exact diagnostics") {
  TEST_CASE("malformed JSON names the file, line and column") {
    const std::string f = bad("malformed-json.json");
    // Line 4 lacks its comma; the parser notices at the end of the next token, the key "name" (line 5, column 8).
    CHECK(load_alone(f) == f + ":5:8: error: malformed JSON: syntax error while parsing object - unexpected string "
                               "literal; expected '}'\n");
  }

  TEST_CASE("a string where a number is expected") {
    const std::string f = bad("wrong-type.json");
    CHECK(load_alone(f) == f + ": /memory/bandwidth_TBps: error: expected a number, found a string \"3.35\"\n");
  }

  TEST_CASE("null where a number is expected says 'null' once") {
    const std::string f = bad("null-bandwidth.json");
    CHECK(load_alone(f) == f + ": /memory/bandwidth_TBps: error: expected a number, found null\n");
  }

  TEST_CASE("a negative bandwidth is out of range with its unit") {
    const std::string f = bad("negative-bandwidth.json");
    CHECK(load_alone(f) ==
          f + ": /memory/bandwidth_TBps: error: value -3.35 TB/s is out of range: expected >= 8e-05 and <= 80 TB/s\n");
  }

  TEST_CASE("an absurd value above the 10x plausibility bound (bf16 25001 TFLOP/s)") {
    const std::string f = bad("absurd-bf16.json");
    CHECK(load_alone(f) == f +
                               ": /dense_peak/bf16_TFLOPs: error: value 25001 TFLOP/s is out of range: expected >= "
                               "0.025 and <= 25000 TFLOP/s (the plausibility bound is 10x the largest known part)\n");
  }

  TEST_CASE("an unknown key gets a did-you-mean, and the key it replaced is reported missing") {
    const std::string f = bad("unknown-key.json");
    CHECK(load_alone(f) ==
          f + ": /memory/bandwith_TBps: error: unknown key 'bandwith_TBps' (did you mean 'bandwidth_TBps'?)\n" + f +
              ": /memory: error: missing required key 'bandwidth_TBps' (peak memory bandwidth)\n");
  }

  TEST_CASE("a missing required key is reported at its parent object") {
    const std::string f = bad("missing-required.json");
    CHECK(load_alone(f) == f + ": /memory: error: missing required key 'capacity_GB' (vendor capacity label)\n");
  }

  TEST_CASE("a dangling link id gets a did-you-mean from the data directory's links") {
    const std::string f = bad("dangling-link.json");
    CHECK(load_alone(f).empty());  // the file itself is well-formed
    CHECK(load_with_data(f) == f + ": /scale_up/link: error: unknown link 'nvlink-4' (did you mean 'nvlink4'?)\n");
  }

  TEST_CASE("a node naming nvlink9 is pointed at an existing NVLink generation") {
    Json j = Json::parse(R"({"schema": 1, "kind": "node", "id": "n", "name": "n", "gpu": "h100-sxm5-80gb",
        "gpus": 8, "scale_up": {"link": "nvlink9", "switch": "nvswitch-gen3", "domain_gpus": 8, "topology": "switched"},
        "sources": [{"id": "T1", "ref": "test"}]})");
    auto n = gpuplan::hw_io::decode_node(j, "n.json");
    REQUIRE_MESSAGE(n.ok(), n.diagnostics().to_string());
    HardwareDb db = shipped();
    db.nodes.push_back(n.value());
    Diagnostics diags;
    gpuplan::hw_io::check_references(db, diags);
    REQUIRE(diags.items().size() == 1);
    // nvlink2..nvlink5 are all one edit away; the first in file order wins.
    CHECK(diags.to_string() == "n.json: /scale_up/link: error: unknown link 'nvlink9' (did you mean 'nvlink2'?)\n");
  }

  TEST_CASE("a node naming an unknown GPU and a link of the wrong type") {
    Json j = Json::parse(R"({"schema": 1, "kind": "node", "id": "n", "name": "n", "gpu": "h100-sxm6-80gb",
        "gpus": 8, "scale_up": {"link": "ib-ndr", "switch": "nvswitch-gen3", "domain_gpus": 8, "topology": "switched"},
        "sources": [{"id": "T1", "ref": "test"}]})");
    auto n = gpuplan::hw_io::decode_node(j, "n.json");
    REQUIRE_MESSAGE(n.ok(), n.diagnostics().to_string());
    HardwareDb db = shipped();
    db.nodes.push_back(n.value());
    Diagnostics diags;
    gpuplan::hw_io::check_references(db, diags);
    CHECK(diags.to_string() ==
          "n.json: /gpu: error: unknown GPU 'h100-sxm6-80gb' (did you mean 'h100-sxm5-80gb'?)\n"
          "n.json: /scale_up/link: error: link 'ib-ndr' is of type infiniband, but this field takes a link of type nvlink, xgmi, pcie\n");
  }

  TEST_CASE("an unknown kind gets a did-you-mean") {
    const std::string f = bad("unknown-kind.json");
    CHECK(load_alone(f) ==
          f + ": /kind: error: unknown kind 'gpus': expected 'gpu', 'link', 'node', 'cluster' or 'efficiency' (did you mean 'gpu'?)\n");
  }

  TEST_CASE("an id that does not match the file name") {
    const std::string f = bad("id-mismatch.json");
    CHECK(load_alone(f) == f + ": /id: error: id 'h100-sxm5-80gb' does not match the file name 'id-mismatch.json'\n");
  }

  TEST_CASE("a missing file") {
    const std::string f = bad("does-not-exist.json");
    CHECK(load_alone(f) == f + ": error: file not found\n");
    const std::string dir = fixtures() + "/hw/bad";
    CHECK(load_alone(dir) == dir + ": error: is a directory, expected a JSON file\n");
  }

  TEST_CASE("a missing data directory") {
    auto r = gpuplan::hw_io::load_hardware_db("/nonexistent-gpuplan-data");
    CHECK_FALSE(r.ok());
    CHECK(r.diagnostics().to_string() == "/nonexistent-gpuplan-data/hardware: error: hardware data directory not found "
                                         "(set --data-dir or GPUPLAN_DATA_DIR)\n");
  }

  TEST_CASE("the same alias in two files is reported on the second, naming the first") {
    const std::string dir = fixtures() + "/hw/dup-alias";
    const std::string a = (fs::path(dir) / "hardware" / "gpus" / "dup-a.json").string();
    const std::string b = (fs::path(dir) / "hardware" / "gpus" / "dup-b.json").string();
    auto r = gpuplan::hw_io::load_hardware_db(dir);
    CHECK_FALSE(r.ok());
    CHECK(r.diagnostics().to_string() == b + ": /aliases/1: error: 'dup' is already used by " + a + "\n");
  }

  TEST_CASE("an alias already taken by another part, as alias or as id, is a clash") {
    HardwareDb db = shipped();
    auto g = gpuplan::hw_io::decode_gpu(minimal_gpu(), "test-gpu.json");
    REQUIRE(g.ok());
    gpuplan::hw::GpuSpec x = g.value();
    x.aliases = {"h100", "a100-sxm4-80gb"};
    db.gpus.push_back(x);
    Diagnostics diags;
    gpuplan::hw_io::check_references(db, diags);
    CHECK(diags.to_string() ==
          "test-gpu.json: /aliases/0: error: 'h100' is already used by " + shipped().find_gpu("h100")->info.file +
              "\ntest-gpu.json: /aliases/1: error: 'a100-sxm4-80gb' is already used by " +
              shipped().find_gpu("a100-sxm4-80gb")->info.file + "\n");
  }

  TEST_CASE("a subnormal peak (1e-310 TFLOP/s) is refused: it would turn every time into inf") {
    const std::string f = bad("denormal-peak.json");
    CHECK(load_alone(f) == f +
                               ": /dense_peak/bf16_TFLOPs: error: value 1e-310 TFLOP/s is too small to mean anything (a "
                               "subnormal number, below 2.2e-308 in magnitude): expected >= 0.025 and <= 25000 "
                               "TFLOP/s\n");
  }

  TEST_CASE("a positive value below the floor, a millionth of the plausibility bound (1e-300 TB/s), is out of range") {
    const std::string f = bad("tiny-bandwidth.json");
    CHECK(load_alone(f) == f +
                               ": /memory/bandwidth_TBps: error: value 1e-300 TB/s is out of range: expected >= 8e-05 "
                               "and <= 80 TB/s (the floor is a millionth of the plausibility bound: no real part is "
                               "that small)\n");
  }

  TEST_CASE("a key given twice in one object is an error at its pointer, not a silent last-one-wins") {
    const std::string f = bad("duplicate-key.json");
    CHECK(load_alone(f) == f +
                               ": /dense_peak/bf16_TFLOPs: error: duplicate key \"bf16_TFLOPs\": the object already "
                               "has this key (keys must be unique; one of the two values would be dropped silently)\n");
  }

  TEST_CASE("a wrong enum value lists the choices") {
    const std::string f = bad("wrong-enum.json");
    CHECK(load_alone(f) == f + ": /scale_up/topology: error: 'mesh' is not one of 'switched', 'fully-connected', "
                               "'hybrid-cube-mesh', 'pcie' (did you mean 'hybrid-cube-mesh'?)\n");
  }

  TEST_CASE("an empty source list") {
    const std::string f = bad("empty-sources.json");
    CHECK(load_alone(f) == f + ": /sources: error: expected a non-empty array of {id, ref, for}, found an empty array\n");
  }

  TEST_CASE("all problems of one file are reported at once") {
    const std::string f = bad("many-errors.json");
    const std::string p = f + ": ";
    const std::string got = load_alone(f);
    // Order: top-level keys (alphabetical, as nlohmann stores them), missing top-level keys, entity info (sources,
    // id), then each nested object as the decoder reads it.
    CHECK(got == p + "/compute_units: error: expected an integer, found a number 132.5\n" +  //
                     p + "/l2_MB: error: value 0 MB is out of range: expected >= 0.0026 and <= 2600 MB\n" +
                     p + "/tdp_W: error: value -700 W is out of range: expected >= 0.014 and <= 14000 W\n" +
                     p + "/vendor: error: 'Nvidia' is not one of 'NVIDIA', 'AMD' (did you mean 'NVIDIA'?)\n" +
                     p + "/: error: missing required key 'family' (architecture family)\n" +
                     p + "/sources/0: error: missing required key 'ref' (what the source is: document, page, "
                         "repository@commit)\n" +
                     p + "/id: error: id 'not-many-errors' does not match the file name 'many-errors.json'\n" +
                     p + "/dense_peak/bf16_TFLOPs: error: expected a number, found a string \"989.4\"\n" +
                     p + "/dense_peak/fp8_TFLOPS: error: unknown key 'fp8_TFLOPS' (did you mean 'fp8_TFLOPs'?)\n" +
                     p + "/memory/bandwith_TBps: error: unknown key 'bandwith_TBps' (did you mean 'bandwidth_TBps'?)\n" +
                     p + "/memory: error: missing required key 'bandwidth_TBps' (peak memory bandwidth)\n");
    Diagnostics diags;
    HardwareDb db;
    gpuplan::hw_io::load_hardware_file(f, db, diags);
    CHECK(diags.error_count() == 11);
    CHECK(db.gpus.empty());  // nothing half-decoded gets into the database
  }

  TEST_CASE("a schema version above 1 is not called implausible") {
    // The plausibility remark is about datasheet values (10x the largest known part), not about a version number.
    Json j = minimal_gpu();
    j["schema"] = 2;
    auto r = gpuplan::hw_io::decode_gpu(j, "test-gpu.json");
    CHECK_FALSE(r.ok());
    const std::string got = r.diagnostics().to_string();
    CHECK(got.find("test-gpu.json: /schema: error: value 2 is out of range") == 0);
    CHECK(got.find("plausib") == std::string::npos);
  }

  TEST_CASE("cross-field rules of the decoders") {
    SUBCASE("a GPU needs at least one peak rate") {
      Json j = minimal_gpu();
      j["dense_peak"] = Json::object();
      auto r = gpuplan::hw_io::decode_gpu(j, "test-gpu.json");
      CHECK(r.diagnostics().to_string() ==
            "test-gpu.json: /dense_peak: error: no peak rate given: at least one precision is required\n");
    }
    SUBCASE("a link needs the bandwidth key of its type") {
      auto r = gpuplan::hw_io::decode_link(Json::parse(R"({"schema": 1, "kind": "link", "id": "x", "name": "x",
          "type": "infiniband", "generation": "NDR", "x16_uni_GBps": 50, "sources": [{"id": "T1", "ref": "t"}]})"),
                                           "x.json");
      CHECK(r.diagnostics().to_string() == "x.json: /: error: an infiniband link needs 'port_Gbps'\n");
    }
    SUBCASE("a switched node needs a switch, and its domain must divide or be divided by its GPUs") {
      auto r = gpuplan::hw_io::decode_node(Json::parse(R"({"schema": 1, "kind": "node", "id": "x", "name": "x",
          "gpu": "h100", "gpus": 8, "scale_up": {"link": "nvlink4", "domain_gpus": 12, "topology": "switched"},
          "sources": [{"id": "T1", "ref": "t"}]})"),
                                           "x.json");
      CHECK(r.diagnostics().to_string() ==
            "x.json: /scale_up/switch: error: a switched scale-up domain needs the 'switch' id\n"
            "x.json: /scale_up/domain_gpus: error: domain of 12 GPUs is neither a multiple nor a divisor of the "
            "node's 8 GPUs\n");
    }
    SUBCASE("a cluster's oversubscription is at least 1") {
      auto r = gpuplan::hw_io::decode_cluster(Json::parse(R"({"schema": 1, "kind": "cluster", "id": "x", "name": "x",
          "node": "dgx-h100", "nodes": 32, "fabric": {"link": "ib-ndr", "oversubscription": 0.5},
          "sources": [{"id": "T1", "ref": "t"}]})"),
                                              "x.json");
      CHECK(r.diagnostics().to_string() ==
            "x.json: /fabric/oversubscription: error: value 0.5 is out of range: expected >= 1 and <= 64\n");
    }
    SUBCASE("a source entry must be an object") {
      Json j = minimal_gpu();
      j["sources"] = Json::array({"S5"});
      auto r = gpuplan::hw_io::decode_gpu(j, "test-gpu.json");
      CHECK(r.diagnostics().to_string() == "test-gpu.json: /sources/0: error: expected an object, found a string\n");
    }
    SUBCASE("the top level must be an object") {
      auto r = gpuplan::hw_io::decode_gpu(Json::array(), "test-gpu.json");
      CHECK(r.diagnostics().to_string() == "test-gpu.json: /: error: expected an object, found an array\n");
    }
  }

  TEST_CASE("a valid fixture file decodes with no diagnostics") {
    const std::string f = fixtures() + "/hw/good/test-gpu.json";
    HardwareDb db;
    Diagnostics diags;
    gpuplan::hw_io::load_hardware_file(f, db, diags);
    CHECK(diags.empty());
    REQUIRE(db.gpus.size() == 1);
    CHECK(db.gpus[0].info.id == "test-gpu");
    CHECK(db.gpus[0].info.file == f);
    CHECK(db.gpus[0].info.cite("/memory/bandwidth_TBps") == f + "#/memory/bandwidth_TBps [T1]");
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("json_io reader") {
  using gpuplan::json_io::FieldSpec;
  using gpuplan::json_io::FieldTable;
  using gpuplan::json_io::FieldType;
  using gpuplan::json_io::ObjectReader;
  using gpuplan::json_io::Presence;
  using gpuplan::json_io::UnknownKeys;

  const FieldTable& table() {
    static const FieldTable t = [] {
      FieldSpec n;
      n.key = "n";
      n.type = FieldType::integer;
      n.min = 1;
      n.max = 10;
      n.doc = "a count";
      FieldSpec x;
      x.key = "x_GBps";
      x.type = FieldType::number;
      x.unit = "GB/s";
      x.nullable = true;
      x.doc = "a rate";
      FieldSpec s;
      s.key = "s";
      s.presence = Presence::required;
      s.doc = "a name";
      return FieldTable{n, x, s};
    }();
    return t;
  }

  TEST_CASE("parse: valid JSON gives a value and no diagnostics") {
    Diagnostics d;
    auto j = gpuplan::json_io::parse(R"({"a": [1, 2]})", "f.json", d);
    REQUIRE(j.has_value());
    CHECK(d.empty());
    CHECK((*j)["a"][1] == 2);
  }

  TEST_CASE("parse: a syntax error becomes one diagnostic with line and column") {
    Diagnostics d;
    auto j = gpuplan::json_io::parse("{\n  \"a\": 1,\n  \"b\": tru\n}", "f.json", d);
    CHECK_FALSE(j.has_value());
    REQUIRE(d.items().size() == 1);
    CHECK(d.items()[0].line == 3);
    CHECK(d.items()[0].column == 11);
    CHECK(d.items()[0].file == "f.json");
    CHECK(d.items()[0].to_string().rfind("f.json:3:11: error: malformed JSON: syntax error while parsing value", 0) ==
          0);
  }

  TEST_CASE("parse: truncated input points at its end") {
    Diagnostics d;
    CHECK_FALSE(gpuplan::json_io::parse("{\"a\": [1, 2", "f.json", d).has_value());
    REQUIRE(d.items().size() == 1);
    CHECK(d.items()[0].line == 1);
    CHECK(d.items()[0].column == 12);
  }

  TEST_CASE("ObjectReader: every problem at once, getters only return valid values") {
    Diagnostics d;
    const Json j = Json::parse(R"({"n": 0, "x_GBPS": 3, "a/b~c": 1})");
    ObjectReader r(j, table(), "f.json", "/cfg", d);
    CHECK_FALSE(r.valid());
    CHECK(d.to_string() ==
          "f.json: /cfg/a~1b~0c: error: unknown key 'a/b~c'\n"
          "f.json: /cfg/n: error: value 0 is out of range: expected >= 1 and <= 10\n"
          "f.json: /cfg/x_GBPS: error: unknown key 'x_GBPS' (did you mean 'x_GBps'?)\n"
          "f.json: /cfg: error: missing required key 's' (a name)\n");
    CHECK_FALSE(r.integer("n").has_value());
    CHECK_FALSE(r.has("n"));
  }

  TEST_CASE("ObjectReader: integers accept 8.0 but not 8.5, and null in a nullable field is absent") {
    Diagnostics d;
    const Json ok = Json::parse(R"({"n": 8.0, "x_GBps": null, "s": "a"})");
    ObjectReader r(ok, table(), "f.json", "", d);
    CHECK(r.valid());
    CHECK(d.empty());
    CHECK(r.integer("n") == 8);
    CHECK_FALSE(r.has("x_GBps"));
    CHECK_FALSE(r.num("x_GBps").has_value());
    CHECK(r.str("s") == "a");

    Diagnostics d2;
    const Json no = Json::parse(R"({"n": 8.5, "s": "a"})");
    ObjectReader r2(no, table(), "f.json", "", d2);
    CHECK(d2.to_string() == "f.json: /n: error: expected an integer, found a number 8.5\n");
  }

  TEST_CASE("ObjectReader: foreign formats ignore unknown keys, and error() on the object itself uses '/'") {
    Diagnostics d;
    const Json j = Json::parse(R"({"s": "a", "torch_dtype": "bfloat16"})");
    ObjectReader r(j, table(), "f.json", "", d, UnknownKeys::ignore);
    CHECK(r.valid());
    CHECK(d.empty());
    r.error("", "whole object");
    r.error("n", "one key");
    CHECK(d.to_string() == "f.json: /: error: whole object\nf.json: /n: error: one key\n");
  }

  TEST_CASE("ObjectReader: a non-object value") {
    Diagnostics d;
    const Json three(3);
    ObjectReader r(three, table(), "f.json", "/cfg", d);
    CHECK_FALSE(r.valid());
    CHECK(d.to_string() == "f.json: /cfg: error: expected an object, found an integer\n");
    CHECK_FALSE(r.has("s"));
  }

  TEST_CASE("describe_type and describe_value") {
    CHECK(gpuplan::json_io::describe_type(Json()) == "null");
    CHECK(gpuplan::json_io::describe_type(Json("x")) == "a string");
    CHECK(gpuplan::json_io::describe_type(Json(1.5)) == "a number");
    CHECK(gpuplan::json_io::describe_type(Json(2)) == "an integer");
    CHECK(gpuplan::json_io::describe_value(Json("x")) == "\"x\"");
    CHECK(gpuplan::json_io::describe_value(Json(std::string(100, 'a'))).size() == 40);
  }

  TEST_CASE("the hardware field tables document every key with a unit suffix") {
    for (const auto* t : {&gpuplan::hw_io::gpu_fields(), &gpuplan::hw_io::link_fields(),
                          &gpuplan::hw_io::node_fields(), &gpuplan::hw_io::cluster_fields()}) {
      for (const auto& f : *t) {
        CAPTURE(f.key);
        CHECK_FALSE(f.doc.empty());
        if (f.type == FieldType::number && f.key != "oversubscription") CHECK(f.key.find('_') != std::string::npos);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Hostile input (issue #26): never a crash, a hang or a silent choice; always a diagnostic with file and place.
TEST_SUITE("json_io reader: hostile input") {
  using gpuplan::json_io::describe_value;
  using gpuplan::json_io::FieldSpec;
  using gpuplan::json_io::FieldTable;
  using gpuplan::json_io::FieldType;
  using gpuplan::json_io::ObjectReader;
  using gpuplan::json_io::kMaxInputBytes;
  using gpuplan::json_io::kMaxJsonDepth;
  using gpuplan::json_io::parse;
  using gpuplan::json_io::read_text_file;

  /// A fresh empty folder for one test.
  fs::path scratch(const std::string& name) {
    const fs::path d =
        fs::temp_directory_path() / (std::string("gpuplan-test-hw-") + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }

  TEST_CASE("endless devices are refused before they are read: /dev/zero, /dev/urandom") {
    for (const std::string dev : {"/dev/zero", "/dev/urandom"}) {
      if (!fs::exists(dev)) continue;
      Diagnostics d;
      CHECK_FALSE(read_text_file(dev, d).has_value());
      CHECK(d.to_string() == dev + ": error: is a character device (such as /dev/zero, /dev/urandom or a terminal), "
                                   "not a file: gpuplan reads JSON from files and pipes\n");
    }
  }

  TEST_CASE("a file larger than the 64 MiB limit is refused from its size, without reading it") {
    CHECK(kMaxInputBytes == 64u * 1024 * 1024);
    const fs::path dir = scratch("oversize");
    const fs::path big = dir / "big.json";
    { std::ofstream(big) << "{}"; }
    fs::resize_file(big, kMaxInputBytes + 1);  // sparse: no disk space used
    Diagnostics d;
    CHECK_FALSE(read_text_file(big.string(), d).has_value());
    CHECK(d.to_string() ==
          big.string() + ": error: file is larger than the 64 MiB limit for JSON input (67108865 bytes)\n");
    // At the limit a file is read (a smaller limit stands in for 64 MiB).
    const fs::path small = dir / "ten.json";
    { std::ofstream(small) << "[1,2,3,4]\n"; }
    Diagnostics d2;
    CHECK(read_text_file(small.string(), d2, 10) == "[1,2,3,4]\n");
    CHECK(d2.empty());
    Diagnostics d3;
    CHECK_FALSE(read_text_file(small.string(), d3, 9).has_value());
    CHECK(d3.to_string() ==
          small.string() + ": error: file is larger than the 9-byte limit for JSON input (10 bytes)\n");
    fs::remove_all(dir);
  }

  TEST_CASE("a pipe is read, but never beyond the limit") {
    // The writer may still be writing when the reader stops at the limit and closes the pipe: its write then fails
    // with EPIPE instead of killing the test process with SIGPIPE (a race that failed this test now and then).
    const auto previous = std::signal(SIGPIPE, SIG_IGN);
    const fs::path dir = scratch("fifo");
    const fs::path fifo = dir / "in.json";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto feed = [&](std::size_t bytes) {
      return std::thread([&fifo, bytes] {
        std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens the pipe
        out << "[" << std::string(bytes - 2, '0') << "]";
      });
    };
    {
      std::thread w = feed(100);
      Diagnostics d;
      const auto text = read_text_file(fifo.string(), d, 1000);
      w.join();
      REQUIRE(text.has_value());
      CHECK(text->size() == 100);
      CHECK(d.empty());
    }
    {
      // 2,000 bytes fit the pipe's buffer, so the writer finishes even though the reader stops at 1,001.
      std::thread w = feed(2000);
      Diagnostics d;
      CHECK_FALSE(read_text_file(fifo.string(), d, 1000).has_value());
      w.join();
      CHECK(d.to_string() == fifo.string() +
                                 ": error: file is larger than the 1000-byte limit for JSON input (stopped reading "
                                 "after 1001 bytes)\n");
    }
    fs::remove_all(dir);
    std::signal(SIGPIPE, previous);
  }

  TEST_CASE("nesting deeper than 128 levels is refused with the line and column of the first bracket too many") {
    CHECK(kMaxJsonDepth == 128);
    SUBCASE("200,000 levels, as a fuzzer writes them") {
      const std::string deep = std::string(200000, '[') + std::string(200000, ']');
      Diagnostics d;
      CHECK_FALSE(parse(deep, "deep.json", d).has_value());
      CHECK(d.to_string() == "deep.json:1:129: error: JSON nested deeper than the 128-level limit for JSON input "
                             "(arrays and objects inside one another; gpuplan's files need fewer than 10)\n");
    }
    SUBCASE("inside an object on the second line, with brackets inside strings not counted") {
      const std::string deep = std::string("{\"a[{\": \"[[[\\\"[\",\n \"b\": ") + std::string(200000, '[');
      Diagnostics d;
      CHECK_FALSE(parse(deep, "deep.json", d).has_value());
      REQUIRE(d.items().size() == 1);
      CHECK(d.items()[0].line == 2);
      CHECK(d.items()[0].column == 7 + 127);  // the object is level 1: the 128th '[' is level 129
    }
    SUBCASE("exactly 128 levels parse") {
      const std::string ok = std::string(127, '[') + "{\"k\": 1}" + std::string(127, ']');
      Diagnostics d;
      const auto j = parse(ok, "ok.json", d);
      CHECK(j.has_value());
      CHECK(d.empty());
    }
    SUBCASE("a syntax error before the depth limit is still reported as one") {
      Diagnostics d;
      CHECK_FALSE(parse("[[[tru", "bad.json", d).has_value());
      CHECK(d.to_string().rfind("bad.json:1:7: error: malformed JSON: syntax error while parsing value", 0) == 0);
    }
  }

  TEST_CASE("a key given twice in one object is an error naming the file, the RFC 6901 pointer and the key") {
    const std::string tail = ": the object already has this key (keys must be unique; one of the two values would be "
                             "dropped silently)\n";
    SUBCASE("at the top") {
      Diagnostics d;
      CHECK_FALSE(parse(R"({"a": 1, "b": 2, "a": 3})", "f.json", d).has_value());
      CHECK(d.to_string() == std::string("f.json: /a: error: duplicate key \"a\"") + tail);
    }
    SUBCASE("nested in arrays and objects, every duplicate at once") {
      Diagnostics d;
      CHECK_FALSE(parse(R"({"x": [0, {"y": {"k": 1, "k": 2}}, {"z": 1, "z": 1}], "w": {"k": 1}})", "f.json", d)
                      .has_value());
      CHECK(d.to_string() == std::string("f.json: /x/1/y/k: error: duplicate key \"k\"") + tail +
                                 std::string("f.json: /x/2/z: error: duplicate key \"z\"") + tail);
    }
    SUBCASE("keys with ~ and / are escaped in the pointer (~0, ~1)") {
      Diagnostics d;
      CHECK_FALSE(parse(R"({"a/b": {"m~n": 1, "m~n": 2}})", "f.json", d).has_value());
      CHECK(d.to_string() == std::string("f.json: /a~1b/m~0n: error: duplicate key \"m~n\"") + tail);
    }
    SUBCASE("the same key spelt with an escape is the same key") {
      Diagnostics d;
      CHECK_FALSE(parse(R"({"ab": 1, "\u0061b": 2})", "f.json", d).has_value());
      CHECK(d.to_string() == std::string("f.json: /ab: error: duplicate key \"ab\"") + tail);
    }
    SUBCASE("the same key in sibling objects is fine") {
      Diagnostics d;
      const auto j = parse(R"([{"k": 1}, {"k": 2}, {"o": {"k": 3}, "k": 4}])", "f.json", d);
      REQUIRE(j.has_value());
      CHECK(d.empty());
      CHECK((*j)[2]["k"] == 4);
    }
  }

  TEST_CASE("parse builds the same value as nlohmann's parser") {
    const std::string text = R"({"s": "a\u00e9\n", "i": -7, "u": 18446744073709551615, "f": 1.5, "e": 1e30,
      "n": null, "t": true, "a": [[], {}, [1, [2, {"k": "v"}]]], "o": {"z": 0, "a": 1}})";
    Diagnostics d;
    const auto j = parse(text, "f.json", d);
    REQUIRE(j.has_value());
    CHECK(d.empty());
    const Json ref = Json::parse(text);
    CHECK(*j == ref);
    CHECK(j->dump() == ref.dump());
    CHECK((*j)["u"].is_number_unsigned());
    CHECK((*j)["i"].is_number_integer());
    CHECK((*j)["f"].is_number_float());
    Diagnostics d2;
    CHECK(*parse("3", "f.json", d2) == Json(3));
    CHECK(*parse("\"x\"", "f.json", d2) == Json("x"));
    CHECK(d2.empty());
  }

  /// describe_value as it was (a whole dump, then cut): the new one must give the same bytes.
  std::string reference_describe(const Json& v) {
    std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
  }

  TEST_CASE("describe_value gives the same text as before for ordinary values") {
    std::vector<Json> values{Json(), Json(true), Json(0), Json(-3), Json(18446744073709551615ULL), Json(1.5),
                             Json(-0.0), Json(1e-310), Json(1e300), Json(3.35), Json(""), Json("x"),
                             Json("tab\there \"quoted\" \\ back"), Json("\x01\x1f control"),
                             Json::array(), Json::object(), Json::parse(R"([1, 2.5, "three", null])"),
                             Json::parse(R"({"b": [1, {"c": "d"}], "a": {}})"),
                             Json::parse(R"({"key with a long name": "and a long value that is cut"})")};
    // Strings around the cut, with two-, three- and four-byte UTF-8 characters and bytes that are not UTF-8 placed
    // across it.
    for (std::size_t n = 30; n <= 200; n += 1) {
      values.emplace_back(std::string(n, 'a'));
      values.emplace_back(std::string(n % 45, 'b') + "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" + std::string(n, 'c'));
      values.emplace_back(std::string(n % 41, 'd') + "\xff\xfe\xc3" + std::string(n, 'e'));
      values.emplace_back(std::string(n % 43, 'f') + "\x01\"\\" + std::string(n, 'g'));
      values.push_back(Json::array({std::string(n % 39, 'h'), std::string(n, 'i')}));
    }
    for (const auto& v : values) {
      CAPTURE(v.dump(-1, ' ', true, Json::error_handler_t::replace));
      CHECK(describe_value(v) == reference_describe(v));
    }
  }

  TEST_CASE("describe_value is bounded on deep, huge and non-UTF-8 values, and never throws") {
    SUBCASE("100,000 nested arrays (built in place, as no parse would allow)") {
      Json deep = Json::array();
      Json* p = &deep;
      for (int i = 0; i < 100000; ++i) {
        p->push_back(Json::array());
        p = &p->back();
      }
      CHECK(describe_value(deep) == std::string(37, '[') + "...");
    }
    SUBCASE("an array of a million numbers and a 10 MB string") {
      Json big = Json::array();
      for (int i = 0; i < 1000000; ++i) big.push_back(i);
      CHECK(describe_value(big) == "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,1...");
      CHECK(describe_value(Json(std::string(10'000'000, 'z'))) == std::string("\"") + std::string(36, 'z') + "...");
    }
    SUBCASE("bytes that are not UTF-8 become U+FFFD") {
      CHECK(describe_value(Json(std::string("\xff\xfeok"))) == "\"\xef\xbf\xbd\xef\xbf\xbdok\"");
      const std::string junk(1000, '\xff');
      const std::string shown = describe_value(Json(junk));
      CHECK(shown.size() == 40);
      CHECK(shown.rfind("\"\xef\xbf\xbd", 0) == 0);
      Json keyed = Json::object();
      keyed[junk.substr(0, 5)] = 1;  // an object key that is not UTF-8 (from code: parse would not make one)
      const std::string fffd = "\xef\xbf\xbd";
      CHECK(describe_value(keyed) == std::string("{\"") + fffd + fffd + fffd + fffd + fffd + "\":1}");
    }
  }

  TEST_CASE("ObjectReader: a subnormal number is refused in any number field, and an integer must fit 64 bits") {
    FieldSpec x;
    x.key = "x";
    x.type = FieldType::number;
    x.doc = "any number";
    FieldSpec n;
    n.key = "n";
    n.type = FieldType::integer;
    n.doc = "any integer";
    const FieldTable t{x, n};
    {
      Diagnostics d;
      const Json j = Json::parse(R"({"x": -4.9e-324, "n": 1e300})");
      ObjectReader r(j, t, "f.json", "", d);
      CHECK_FALSE(r.valid());
      CHECK(d.to_string() ==
            "f.json: /n: error: value 1e+300 is out of range: expected an integer from -2^63 to 2^63 - 1\n"
            "f.json: /x: error: value -5e-324 is too small to mean anything (a subnormal number, below 2.2e-308 in "
            "magnitude)\n");
      CHECK_FALSE(r.num("x").has_value());
      CHECK_FALSE(r.integer("n").has_value());
    }
    {
      Diagnostics d;
      const Json j = Json::parse(R"({"x": 2.3e-308, "n": 18446744073709551615})");
      ObjectReader r(j, t, "f.json", "", d);
      CHECK(d.to_string() ==
            "f.json: /n: error: value 18446744073709551615 is out of range: expected an integer from -2^63 to "
            "2^63 - 1\n");
      CHECK(r.num("x") == 2.3e-308);  // the smallest normal doubles are still numbers
    }
    {
      Diagnostics d;
      const Json j = Json::parse(R"({"x": 0, "n": -9223372036854775808})");
      ObjectReader r(j, t, "f.json", "", d);
      CHECK(d.empty());
      CHECK(r.integer("n") == std::numeric_limits<long long>::min());
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan hw validate: hostile files exit 2 with a diagnostic") {
  using gpuplan::cli_test::contains;
  using gpuplan::cli_test::kInvalid;
  using gpuplan::cli_test::Run;

  TEST_CASE("/dev/zero is refused at once") {
    const Run r = gpuplan::cli_test::run({"hw", "validate", "/dev/zero"});
    CHECK(r.rc == kInvalid);
    CHECK(r.err == "/dev/zero: error: is a character device (such as /dev/zero, /dev/urandom or a terminal), not a "
                   "file: gpuplan reads JSON from files and pipes\n");
  }

  TEST_CASE("a 200,000-level document, a duplicate key and a subnormal peak") {
    const fs::path dir = fs::temp_directory_path() / (std::string("gpuplan-test-hw-cli-") + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path deep = dir / "deep.json";
    { std::ofstream(deep) << std::string(200000, '['); }
    const Run d = gpuplan::cli_test::run({"hw", "validate", deep.string()});
    CHECK(d.rc == kInvalid);
    CHECK(contains(d.err, deep.string() + ":1:129: error: JSON nested deeper than the 128-level limit"));
    fs::remove_all(dir);

    const Run k = gpuplan::cli_test::run({"hw", "validate", bad("duplicate-key.json")});
    CHECK(k.rc == kInvalid);
    CHECK(contains(k.err, "duplicate-key.json: /dense_peak/bf16_TFLOPs: error: duplicate key \"bf16_TFLOPs\""));

    const Run s = gpuplan::cli_test::run({"hw", "validate", bad("denormal-peak.json")});
    CHECK(s.rc == kInvalid);
    CHECK(contains(s.err, "/dense_peak/bf16_TFLOPs: error: value 1e-310 TFLOP/s is too small to mean anything"));
    CHECK(s.out.empty());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Hardware completeness (#22 item 3): every GPU can be planned on a node, every price says what kind it is, and the
// fit checks use the driver's figure where one is sourced.
TEST_SUITE("hardware completeness") {
  TEST_CASE("every GPU file has at least one node file that uses it") {
    const auto& db = shipped();
    REQUIRE(db.gpus.size() >= 21);  // the 21 GPU files of data/hardware/gpus when this test was written
    for (const auto& g : db.gpus) {
      int nodes = 0;
      for (const auto& n : db.nodes)
        if (n.gpu == g.info.id) ++nodes;
      CHECK_MESSAGE(nodes >= 1, g.info.id << " has no node in data/hardware/nodes");
    }
  }

  TEST_CASE("a GPU's default node is the first node file, by file name, that holds it") {
    const auto& db = shipped();
    // Two node files hold the H200: dgx-h200.json and hgx-h200.json; the first by name is the default.
    const auto* h200 = gpuplan::hw::first_node_of(db, "h200-sxm-141gb");
    REQUIRE(h200 != nullptr);
    CHECK(h200->info.id == "dgx-h200");
    REQUIRE(gpuplan::hw::first_node_of(db, "h100-sxm5-80gb") != nullptr);
    CHECK(gpuplan::hw::first_node_of(db, "h100-sxm5-80gb")->info.id == "dgx-h100");
    CHECK(gpuplan::hw::first_node_of(db, "no-such-gpu") == nullptr);
    // An alias is not an id: the lookup takes the GPU file's id (find_gpu resolves aliases first).
    CHECK(gpuplan::hw::first_node_of(db, "h100") == nullptr);
  }

  TEST_CASE("every GPU with a price says its kind and who rents at it") {
    int priced = 0;
    for (const auto& g : shipped().gpus) {
      if (!g.price) continue;
      ++priced;
      CHECK_MESSAGE(!g.price_provider.empty(), g.info.id << " has a price without a provider");
      const std::string kind(gpuplan::hw::to_string(g.price_kind));
      CHECK_MESSAGE((kind == "on-demand" || kind == "spot"), g.info.id);
      bool cited = false;
      for (const auto& s : g.info.sources)
        for (const auto& f : s.fields) cited = cited || f == "/price_usd_per_hour";
      CHECK_MESSAGE(cited, g.info.id << " price has no source entry for /price_usd_per_hour");
    }
    CHECK(priced >= 10);
    // The one spot price in the data: Azure's NC40ads_H100_v5 spot VM (caleta.io), $1.61/h.
    const auto* nvl = shipped().find_gpu("h100-nvl");
    REQUIRE(nvl != nullptr);
    REQUIRE(nvl->price.has_value());
    CHECK(nvl->price_kind == gpuplan::hw::PriceKind::spot);
    CHECK(u::to_usd_per_hour(*nvl->price) == gptest::approx(1.61));
    const auto* h100 = shipped().find_gpu("h100-sxm5-80gb");
    REQUIRE(h100 != nullptr);
    CHECK(h100->price_kind == gpuplan::hw::PriceKind::on_demand);
    CHECK(h100->price_provider == "RunPod Secure Cloud");
    CHECK(h100->price_date == "2026-05");
    // Vast.ai's on-demand tier, June 2026 (usagepricing.com): the low end of each range; GB200: Spheron's $9.08 per
    // Superchip of two GPUs; MI325X: TensorWave's $1.95 (cliffcenter.com research note, 2026-05-18).
    for (const auto& [id, usd, date] : {std::tuple{"rtx-4090", 0.682, "2026-06"}, std::tuple{"rtx-5090", 0.865, "2026-06"},
                                       std::tuple{"gb200-gpu", 9.08 / 2, "2026-03"}, std::tuple{"mi325x", 1.95, "2026-05"}}) {
      const std::string name = id;
      CAPTURE(name);
      const auto* g = shipped().find_gpu(name);
      REQUIRE(g != nullptr);
      REQUIRE(g->price.has_value());
      CHECK(g->price_kind == gpuplan::hw::PriceKind::on_demand);
      CHECK(u::to_usd_per_hour(*g->price) == gptest::approx(usd));
      CHECK(g->price_date == date);
    }
  }

  TEST_CASE("A100 80GB fit checks use CUDA's 81157.75 MiB, not the 80 GB label") {
    const auto* a100 = shipped().find_gpu("a100-sxm4-80gb");
    REQUIRE(a100 != nullptr);
    REQUIRE(a100->memory.device_reported.has_value());
    CHECK(a100->memory.reported_by == gpuplan::hw::MemoryReportedBy::cuda);
    // deviceQuery (thamada/nvidia-smi, driver 12.5): 85,100,068,864 bytes = 81157.75 x 2^20 (deviceQuery rounds it to 81158).
    CHECK(a100->memory_capacity().raw() == 85100068864.0);
    // By hand: 85,100,068,864 / 2^30 = 79.256 GiB, against the label's 80e9 / 2^30 = 74.506 GiB: 6.4% more room.
    CHECK(u::to_GiB(a100->memory_capacity()) == gptest::approx(79.2559).epsilon(1e-5));
    CHECK(u::to_GiB(a100->memory.capacity_label) == gptest::approx(74.5058).epsilon(1e-5));
    // A 78 GiB footprint fits on the device figure and would not on the label.
    const double need = 78.0 * 1073741824.0;
    CHECK(need <= a100->memory_capacity().raw());
    CHECK(need > a100->memory.capacity_label.raw());
  }

  TEST_CASE("MI325X fit checks use rocminfo's 262128 MiB pool, not the 256 GB label") {
    const auto* g = shipped().find_gpu("mi325x");
    REQUIRE(g != nullptr);
    REQUIRE(g->memory.device_reported.has_value());
    CHECK(g->memory.reported_by == gpuplan::hw::MemoryReportedBy::rocminfo);
    // ROCm/ROCm issue #6023: 'Pool 1: GLOBAL; COARSE GRAINED 268419072 KB' = 262,128 MiB = 255.98 GiB, 16 MiB under
    // 256 GiB (as MI300X's and MI355X's pools); the label's 256e9 B is 238.4 GiB.
    CHECK(g->memory_capacity().raw() == 268419072.0 * 1024.0);
    CHECK(u::to_GiB(g->memory_capacity()) == gptest::approx(255.984).epsilon(1e-5));
  }

  TEST_CASE("nvidia-smi figures are kept apart from CUDA's") {
    const auto* l40s = shipped().find_gpu("l40s");
    REQUIRE(l40s != nullptr);
    REQUIRE(l40s->memory.device_reported.has_value());
    CHECK(l40s->memory.reported_by == gpuplan::hw::MemoryReportedBy::nvidia_smi);
    CHECK(l40s->memory_capacity().raw() == 46068.0 * 1048576.0);
    const auto* h100 = shipped().find_gpu("h100-sxm5-80gb");
    REQUIRE(h100 != nullptr);
    CHECK(h100->memory.reported_by == gpuplan::hw::MemoryReportedBy::cuda);
  }

  TEST_CASE("H100 NVL, RTX 4090, RTX 5090 and V100 fit checks use the device's figure, not the label") {
    // deviceQuery bytes (thamada/nvidia-smi): H100 NVL 99,861,594,112 = 95235.4375 MiB = 93.00 GiB against the label's
    // 94e9 B = 87.54 GiB; RTX 4090 25,386,352,640 = 24210.3125 MiB = 23.64 GiB against 24e9 B = 22.35 GiB. RTX 5090:
    // nvidia-smi's 32607 MiB = 31.84 GiB against 32e9 B = 29.80 GiB. V100 SXM2 32 GB: nvidia-smi's 32480 MiB = 31.72 GiB.
    for (const auto& [id, bytes, by, gib, label_gib] :
         {std::tuple{"h100-nvl", 99861594112.0, gpuplan::hw::MemoryReportedBy::cuda, 93.00336, 87.54432},
          std::tuple{"rtx-4090", 25386352640.0, gpuplan::hw::MemoryReportedBy::cuda, 23.64288, 22.35174},
          std::tuple{"rtx-5090", 32607.0 * 1048576.0, gpuplan::hw::MemoryReportedBy::nvidia_smi, 31.84277, 29.80232},
          std::tuple{"v100-sxm2", 32480.0 * 1048576.0, gpuplan::hw::MemoryReportedBy::nvidia_smi, 31.71875, 29.80232},
          // MI300X: rocminfo's GPU pool 201,310,208 KB = 206,141,652,992 B = 191.98 GiB against the label's 192e9 B =
          // 178.81 GiB (stas00/ml-engineering@1c4d240 compute/accelerator/amd/debug.md, NPS1/SPX).
          std::tuple{"mi300x", 206141652992.0, gpuplan::hw::MemoryReportedBy::rocminfo, 191.98438, 178.81393}}) {
      const std::string name = id;
      CAPTURE(name);
      const auto* g = shipped().find_gpu(name);
      REQUIRE(g != nullptr);
      REQUIRE(g->memory.device_reported.has_value());
      CHECK(g->memory.reported_by == by);
      CHECK(g->memory_capacity().raw() == bytes);
      CHECK(u::to_GiB(g->memory_capacity()) == gptest::approx(gib).epsilon(1e-5));
      CHECK(u::to_GiB(g->memory.capacity_label) == gptest::approx(label_gib).epsilon(1e-5));
    }
  }
}

TEST_SUITE("shipped hardware database: the TorchTitan paper's Grand Teton H100") {
  TEST_CASE("96 GB HBM2e at 2.4 TB/s, fit checks at the 95 GiB CUDA reports, its own 500 W efficiency row") {
    // pytorch/torchtitan docs/performance.md: 96GB HBM2e, 2.4 TB/sec; torchtitan pull request #800: 95 GiB.
    const auto* g = shipped().find_gpu("h100-grand-teton");  // an alias
    REQUIRE(g != nullptr);
    CHECK(g->info.id == "h100-sxm-96gb-hbm2e");
    CHECK(g->memory.bandwidth.raw() == gptest::approx(2.4e12));
    CHECK(u::to_GiB(g->memory_capacity()) == gptest::approx(95.0));
    CHECK(u::to_GiB(g->memory.capacity_label) == gptest::approx(89.40697).epsilon(1e-5));  // 96e9 B
    // The peak is unpublished ("between SXM and NVL"): the file takes the SXM datasheet's, the top of that range.
    const auto* sxm = shipped().find_gpu("h100-sxm5-80gb");
    const auto* nvl = shipped().find_gpu("h100-nvl");
    REQUIRE((sxm != nullptr && nvl != nullptr));
    CHECK(g->peak(Precision::bf16)->raw() == sxm->peak(Precision::bf16)->raw());
    CHECK(g->peak(Precision::bf16)->raw() > nvl->peak(Precision::bf16)->raw());
    REQUIRE(g->efficiency.has_value());
    // Its own row: the H100's at the sustained-clock law's 500 W clock (tests/model/ops/test_power_limit.cpp).
    CHECK(g->efficiency->gpu == "h100-sxm-96gb-hbm2e");
    CHECK(g->efficiency_via.empty());
    CHECK(g->efficiency->gemm_bf16 == gptest::approx(0.647));
    CHECK(g->efficiency->hbm == gptest::approx(sxm->efficiency->hbm));
    const auto* n = shipped().find_node("grand-teton-h100");
    REQUIRE(n != nullptr);
    CHECK(n->gpu == "h100-sxm-96gb-hbm2e");
    CHECK(n->gpus == 8);
    CHECK(n->scale_up.domain_gpus == 8);
    CHECK(n->scale_up.topology == gpuplan::hw::ScaleUpTopology::switched);
    REQUIRE(n->scale_out.has_value());
    CHECK(n->scale_out->nics == 8);
    CHECK(n->scale_out->nic.raw() == gptest::approx(50e9));  // 400 Gb/s per GPU, one direction
  }
}

TEST_SUITE("shipped hardware database: PCIe parts' device-reported memory") {
  TEST_CASE("A100 PCIe 80GB and H100 PCIe fit checks use CUDA's figure, not the 80 GB label") {
    // A100 80GB PCIe: mixbench-cuda 'Total global mem: 81049 MB' (totalGlobalMem / 2^20; ekondis/mixbench issue #47).
    // H100 PCIe: XLA's device description, device_memory_size 84,942,979,072 B (openxla/xla gpu_specs/h100_pcie.txtpb).
    // By hand: 81049 MiB = 79.149 GiB and 84,942,979,072 B = 79.109 GiB, against the label's 80e9 B = 74.506 GiB.
    for (const auto& [id, mib, gib] :
         {std::tuple{"a100-pcie-80gb", 81049.0, 79.14941}, std::tuple{"h100-pcie-80gb", 81007.94, 79.10932}}) {
      const std::string name = id;
      CAPTURE(name);
      const auto* g = shipped().find_gpu(name);
      REQUIRE(g != nullptr);
      REQUIRE(g->memory.device_reported.has_value());
      CHECK(g->memory.reported_by == gpuplan::hw::MemoryReportedBy::cuda);
      CHECK(g->memory_capacity().raw() == gptest::approx(mib * 1048576.0));
      CHECK(u::to_GiB(g->memory_capacity()) == gptest::approx(gib).epsilon(1e-5));
      CHECK(g->memory_capacity().raw() > g->memory.capacity_label.raw() * 1.06);
    }
  }
}

TEST_SUITE("shipped hardware database: H800's device-reported memory") {
  TEST_CASE("H800 SXM fit checks use CUDA's 81,008 MiB from DeepSeek's own H800s, not the 80 GB label") {
    // deepseek-ai/profile-data train.json (commit 449602428a1b), the profiler's deviceProperties of DeepSeek's H800s:
    // totalGlobalMem 84,943,110,144 B (data/hardware/gpus/h800-sxm5.json, source S-h800-mem). By hand:
    // 84943110144 / 2^20 = 81,008.06 MiB = 79.1094 GiB against 80e9 B = 74.506 GiB; nvidia-smi's 81,559 MiB would
    // add the driver's reserved 551 MiB.
    const auto* g = shipped().find_gpu("h800-sxm5");
    REQUIRE(g != nullptr);
    REQUIRE(g->memory.device_reported.has_value());
    CHECK(g->memory.reported_by == gpuplan::hw::MemoryReportedBy::cuda);
    CHECK(g->memory_capacity().raw() == gptest::approx(84943110144.0).epsilon(1e-6));
    CHECK(u::to_GiB(g->memory_capacity()) == gptest::approx(79.10944).epsilon(1e-5));
  }
}

TEST_SUITE("price and device-memory fields: bad input") {
  Json priced_gpu() {
    Json j = minimal_gpu();
    j["price_usd_per_hour"] = 2.5;
    j["price_kind"] = "on_demand";
    j["price_provider"] = "Example Cloud";
    j["price_date"] = "2026-05";
    return j;
  }
  std::string errors_of(const Json& j) {
    auto r = gpuplan::hw_io::decode_gpu(j, "gpus/test-gpu.json");
    if (r.ok()) return "";
    return r.diagnostics().to_string();
  }

  TEST_CASE("a complete price decodes") {
    auto r = gpuplan::hw_io::decode_gpu(priced_gpu(), "");
    REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
    CHECK(u::to_usd_per_hour(*r->price) == gptest::approx(2.5));
    CHECK(r->price_kind == gpuplan::hw::PriceKind::on_demand);
    CHECK(r->price_provider == "Example Cloud");
    CHECK(r->price_date == "2026-05");
  }

  TEST_CASE("an unknown price_kind is an error at its pointer") {
    Json j = priced_gpu();
    j["price_kind"] = "reserved";
    const std::string e = errors_of(j);
    CHECK(e.find("/price_kind") != std::string::npos);
    CHECK(e.find("reserved") != std::string::npos);
    CHECK(e.find("on_demand") != std::string::npos);
  }

  TEST_CASE("a price without its kind is an error") {
    Json j = priced_gpu();
    j.erase("price_kind");
    const std::string e = errors_of(j);
    CHECK(e.find("/price_usd_per_hour") != std::string::npos);
    CHECK(e.find("a price needs 'price_kind' (on_demand or spot)") != std::string::npos);
  }

  TEST_CASE("a price without its provider is an error") {
    Json j = priced_gpu();
    j.erase("price_provider");
    CHECK(errors_of(j).find("a price needs 'price_provider'") != std::string::npos);
  }

  TEST_CASE("a price kind without a price is an error") {
    Json j = minimal_gpu();
    j["price_kind"] = "spot";
    const std::string e = errors_of(j);
    CHECK(e.find("/price_kind") != std::string::npos);
    CHECK(e.find("'price_kind' is given without 'price_usd_per_hour'") != std::string::npos);
  }

  TEST_CASE("a price date must be YYYY-MM or YYYY-MM-DD") {
    for (const char* bad : {"May 2026", "2026-13", "2026-05-32", "2026/05", "26-05"}) {
      Json j = priced_gpu();
      j["price_date"] = bad;
      const std::string e = errors_of(j);
      CHECK_MESSAGE(e.find("/price_date") != std::string::npos, bad);
      CHECK_MESSAGE(e.find("is not a date of the form YYYY-MM or YYYY-MM-DD") != std::string::npos, bad);
    }
    for (const char* good : {"2026-05", "2025-08-12"}) {
      Json j = priced_gpu();
      j["price_date"] = good;
      CHECK_MESSAGE(errors_of(j).empty(), good);
    }
  }

  TEST_CASE("device_reported_MiB needs the tool it was read with") {
    Json j = minimal_gpu();
    j["memory"]["device_reported_MiB"] = 81920;
    const std::string e = errors_of(j);
    CHECK(e.find("/memory/device_reported_MiB") != std::string::npos);
    CHECK(e.find("needs 'device_reported_by' (cuda, nvidia-smi, mlperf or rocminfo)") != std::string::npos);
    j["memory"]["device_reported_by"] = "rocm";
    const std::string e2 = errors_of(j);
    CHECK(e2.find("/memory/device_reported_by") != std::string::npos);
    CHECK(e2.find("rocm") != std::string::npos);
    j["memory"]["device_reported_by"] = "cuda";
    CHECK(errors_of(j).empty());
  }

  TEST_CASE("device_reported_by without a figure is an error") {
    Json j = minimal_gpu();
    j["memory"]["device_reported_by"] = "cuda";
    CHECK(errors_of(j).find("'device_reported_by' is given without 'device_reported_MiB'") != std::string::npos);
  }
}

// Measured kernel efficiencies as data (data/hardware/efficiency/measured.json, issue #20 deliverable 6).
TEST_SUITE("efficiency rows") {
  Json table(const std::string& rows, const std::string& families) {
    return Json::parse(R"({"schema": 1, "kind": "efficiency", "id": "t", "name": "t",
        "sources": [{"id": "S1", "ref": "a test source"}], "rows": )" + rows + R"(, "families": )" + families + "}");
  }
  const std::string kRow = R"({"gpu": "h100-sxm5-80gb", "gemm_bf16": 0.5, "gemm_fp8": 0.0, "hbm": 0.9,
      "attention_fwd": 0.6, "attention_bwd": 0.4, "fa2_fwd": 0.3, "fa2_bwd": 0.2, "tile_m": 128, "tile_n": 256,
      "origin": "test row", "sources": ["S1"]})";

  TEST_CASE("each GPU gets its own row, or its family's member's with the reason, or none") {
    const HardwareDb db = shipped();
    const auto* h100 = db.find_gpu("h100-sxm5-80gb");
    REQUIRE(h100 != nullptr);
    REQUIRE(h100->efficiency.has_value());
    CHECK(h100->efficiency->gpu == "h100-sxm5-80gb");
    CHECK(h100->efficiency->gemm_bf16 == 0.757);  // the sustained GEMM fraction of our H100 profiles, as written
    CHECK(h100->efficiency_via.empty());
    const auto* h800 = db.find_gpu("h800-sxm5");  // Hopper, no row of its own
    REQUIRE(h800 != nullptr);
    REQUIRE(h800->efficiency.has_value());
    CHECK(h800->efficiency->gpu == "h100-sxm5-80gb");
    CHECK(h800->efficiency_via == "no measurement for h800-sxm5: uses its family's (h100-sxm5-80gb)");
    for (const auto& g : db.gpus) {
      INFO(g.info.id);
      // Every shipped family but AMD CDNA2/CDNA4 has a measured member (those take the generic assumption).
      CHECK(g.efficiency.has_value() == (g.family != "CDNA2" && g.family != "CDNA4"));
    }
  }

  TEST_CASE("a row decodes with its fields and sources") {
    auto t = gpuplan::hw_io::decode_efficiency(table("[" + kRow + "]", R"([{"family": "Hopper", "gpu": "h100-sxm5-80gb"}])"), "t.json");
    REQUIRE_MESSAGE(t.ok(), t.diagnostics().to_string());
    REQUIRE(t.value().rows.size() == 1);
    const auto& r = t.value().rows[0];
    CHECK(r.gemm_bf16 == 0.5);
    CHECK(r.gemm_fp8 == 0.0);
    CHECK(r.tile_n == 256);
    CHECK(r.origin == "test row");
    CHECK(t.value().families.size() == 1);
  }

  TEST_CASE("a row may carry its fused attention's sequence-law tile costs (absent: 0), and refuses one above 100 key tiles") {
    std::string with = kRow;
    with.replace(with.find("\"tile_m\""), 8, "\"attention_tile_fwd\": 6.2, \"attention_tile_bwd\": 11.1, \"tile_m\"");
    auto t = gpuplan::hw_io::decode_efficiency(table("[" + with + "]", R"([{"family": "Hopper", "gpu": "h100-sxm5-80gb"}])"), "t.json");
    REQUIRE_MESSAGE(t.ok(), t.diagnostics().to_string());
    CHECK(t.value().rows[0].attention_tile_fwd == 6.2);
    CHECK(t.value().rows[0].attention_tile_bwd == 11.1);
    auto plain = gpuplan::hw_io::decode_efficiency(table("[" + kRow + "]", R"([{"family": "Hopper", "gpu": "h100-sxm5-80gb"}])"), "t.json");
    REQUIRE(plain.ok());
    CHECK(plain.value().rows[0].attention_tile_fwd == 0.0);  // the kernel family's built-in law
    std::string bad = kRow;
    bad.replace(bad.find("\"tile_m\""), 8, "\"attention_tile_bwd\": 150, \"tile_m\"");
    auto b = gpuplan::hw_io::decode_efficiency(table("[" + bad + "]", R"([{"family": "Hopper", "gpu": "h100-sxm5-80gb"}])"), "t.json");
    CHECK_FALSE(b.ok());
    CHECK(b.diagnostics().to_string().find("t.json: /rows/0/attention_tile_bwd: error:") != std::string::npos);
  }

  TEST_CASE("bad rows: a fraction above 1, a zero where zero means nothing, a source the file does not have") {
    std::string bad = kRow;
    bad.replace(bad.find("\"hbm\": 0.9"), 10, "\"hbm\": 1.5");
    auto t = gpuplan::hw_io::decode_efficiency(table("[" + bad + "]", "[]"), "t.json");
    CHECK_FALSE(t.ok());
    CHECK(t.diagnostics().to_string().find("t.json: /rows/0/hbm: error:") != std::string::npos);
    std::string zero = kRow;
    zero.replace(zero.find("\"fa2_fwd\": 0.3"), 14, "\"fa2_fwd\": 0.0");
    auto z = gpuplan::hw_io::decode_efficiency(table("[" + zero + "]", R"([{"family": "Hopper", "gpu": "x"}])"), "t.json");
    CHECK_FALSE(z.ok());
    CHECK(z.diagnostics().to_string().find("t.json: /rows/0/fa2_fwd: error:") != std::string::npos);
    std::string src = kRow;
    src.replace(src.find("[\"S1\"]"), 6, "[\"S9\"]");
    auto s = gpuplan::hw_io::decode_efficiency(table("[" + src + "]", R"([{"family": "Hopper", "gpu": "x"}])"), "t.json");
    CHECK_FALSE(s.ok());
    CHECK(s.diagnostics().to_string() ==
          "t.json: /rows/0/sources/0: error: 'S9' is not the id of one of this file's sources\n");
  }

  TEST_CASE("per-class in-graph fixed costs (issue #27): optional, above 0 and at most 100 µs, decoded, and the Hopper rows have them") {
    const std::string kFamily = R"([{"family": "Hopper", "gpu": "h100-sxm5-80gb"}])";  // the file needs a family
    std::string with = kRow;
    with.replace(with.find("\"tile_m\""), 8,
                 "\"graph_gemm_us\": 4.5, \"graph_attention_us\": 11, \"graph_elementwise_us\": 2.25, \"tile_m\"");
    auto t = gpuplan::hw_io::decode_efficiency(table("[" + with + "]", kFamily), "t.json");
    REQUIRE_MESSAGE(t.ok(), t.diagnostics().to_string());
    CHECK(t.value().rows[0].graph_gemm_us == 4.5);
    CHECK(t.value().rows[0].graph_attention_us == 11.0);
    CHECK(t.value().rows[0].graph_elementwise_us == 2.25);
    auto plain = gpuplan::hw_io::decode_efficiency(table("[" + kRow + "]", kFamily), "t.json");
    REQUIRE(plain.ok());
    CHECK(plain.value().rows[0].graph_attention_us == 0.0);  // absent: not measured
    for (const char* bad : {"0", "-1", "250"}) {
      std::string b = with;
      b.replace(b.find("\"graph_attention_us\": 11"), 24, std::string("\"graph_attention_us\": ") + bad);
      auto r = gpuplan::hw_io::decode_efficiency(table("[" + b + "]", kFamily), "t.json");
      INFO(bad);
      CHECK_FALSE(r.ok());
      CHECK(r.diagnostics().to_string().find("t.json: /rows/0/graph_attention_us: error:") != std::string::npos);
    }
    const HardwareDb db = shipped();
    for (const char* id : {"h100-sxm5-80gb", "h200-sxm-141gb"}) {
      const auto* g = db.find_gpu(id);
      REQUIRE(g != nullptr);
      REQUIRE(g->efficiency.has_value());
      INFO(id);
      // GEMM above a streaming kernel, the decode attention call (two kernels) above both: what the sweeps measured.
      CHECK(g->efficiency->graph_gemm_us > g->efficiency->graph_elementwise_us);
      CHECK(g->efficiency->graph_attention_us > g->efficiency->graph_gemm_us);
      CHECK(g->efficiency->graph_elementwise_us >= 1.0);
    }
  }

  TEST_CASE("cross references: an unknown GPU, a second row for a GPU, a family member without a row") {
    HardwareDb db = shipped();
    std::string unknown = kRow;
    unknown.replace(unknown.find("h100-sxm5-80gb"), 14, "h100-sxm6-80gb");
    auto t = gpuplan::hw_io::decode_efficiency(
        table("[" + unknown + ", " + kRow + "]", R"([{"family": "Volta", "gpu": "v100-sxm2"}])"), "t.json");
    REQUIRE_MESSAGE(t.ok(), t.diagnostics().to_string());
    db.efficiency.push_back(t.value());
    Diagnostics diags;
    gpuplan::hw_io::resolve_efficiency(db, diags);
    CHECK(diags.to_string() ==
          "t.json: /rows/0/gpu: error: unknown GPU id 'h100-sxm6-80gb' (did you mean 'h100-sxm5-80gb'?)\n"
          "t.json: /rows/1/gpu: error: a second efficiency row for 'h100-sxm5-80gb'\n"
          "t.json: /families/0/gpu: error: 'v100-sxm2' has no efficiency row to stand for its family\n");
  }
}
