// ONNX import (workloads/io/src/onnx_import.cpp, issue #25 "an ONNX file of each imports with the same counts"):
// - graph-only files written by scripts/make_onnx_fixtures.py, against parameter and MAC counts worked out by hand
//   from the architecture stated in that script;
// - torchvision exports made by the lead on the GPU machine (torch 2.11 / torchvision 0.26, opset 17, weights
//   stripped; scripts/measure/export_onnx.py), against the library's own op lists, which match torchvision's
//   num_params and "GFLOPS" (test_vision_graph.cpp);
// - refusals: an unsupported op type names its node, a file that is no ONNX model, a missing file.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "test_paths.hpp"
#include "cli_runner.hpp"
#include "gpuplan/wl_io/onnx_io.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace {
using namespace gpuplan;

const std::string kDir = std::string(GPUPLAN_TEST_FIXTURES) + "/onnx/";

wl_io::OnnxImport import(const std::string& file) {
  auto r = wl_io::import_onnx_vision(kDir + file, file);
  INFO(r.diagnostics().to_string());
  REQUIRE(r.ok());
  return r.value();
}

wl::VisionGraph library(const std::string& id) {
  auto lib = wl_io::load_vision_library(GPUPLAN_TEST_DATA_DIR);
  REQUIRE(lib.ok());
  const auto* e = lib->find(id);
  REQUIRE(e != nullptr);
  return wl::build_vision_graph(e->arch);
}

std::int64_t count_kind(const wl::VisionGraph& g, wl::VisionOpKind k) { return g.count(k); }

}  // namespace

TEST_CASE("tiny conv net: conv-BN-ReLU, max pool, strided conv with bias, global pool, Gemm") {
  const auto r = import("tiny_convnet.onnx");
  // conv1 16·3·3² = 432; bn1 2·16; conv2 32·16·3² + 32 = 4640; fc 32·10 + 10 = 330.
  CHECK(r.graph.parameters() == 432 + 32 + 4640 + 330);
  // conv1 on 32×32: 1024·432; conv2 (stride 2 after the 2×2 pool: 8×8): 64·4608; fc 320.
  CHECK(r.graph.macs() == 1024 * 432 + 64 * 4608 + 320);
  CHECK(count_kind(r.graph, wl::VisionOpKind::conv) == 2);
  CHECK(count_kind(r.graph, wl::VisionOpKind::linear) == 1);
  CHECK(count_kind(r.graph, wl::VisionOpKind::pool) == 2);
  CHECK(r.views == 1);  // Flatten
  CHECK(r.buffers == 32);  // bn1's running mean and variance
  CHECK(r.graph.resolution == 32);
  CHECK(r.opset == 17);
}

TEST_CASE("depthwise block: 1×1 expand, ReLU6, 3×3 depthwise, hard-swish, SE, project, residual") {
  const auto r = import("depthwise_block.onnx");
  const std::int64_t px = 56 * 56;
  // expand 128·32; 3 BNs 2·(128+128+32); dw 128·9; SE 128·32+32 and 32·128+128; project 32·128.
  CHECK(r.graph.parameters() == 4096 + 2 * (128 + 128 + 32) + 1152 + 4128 + 4224 + 4096);
  CHECK(r.graph.macs() == px * 4096 + px * 1152 + 4096 + 4096 + px * 4096);
  const wl::VisionOp* dw = nullptr;
  for (const auto& op : r.graph.ops)
    if (op.name == "dw") dw = &op;
  REQUIRE(dw != nullptr);
  CHECK(dw->depthwise());
  CHECK(dw->groups == 128);
  CHECK(count_kind(r.graph, wl::VisionOpKind::add) == 1);  // the residual: two full-size maps
  CHECK(count_kind(r.graph, wl::VisionOpKind::mul) == 1);  // the SE scale: the map times a 128×1×1 vector
  CHECK(r.graph.ops.back().kind == wl::VisionOpKind::add);
  CHECK(r.graph.ops.back().residual_from == -1);  // the block's input is a graph input, no op wrote it
}

TEST_CASE("attention block: LayerNormalization, packed QKV, MatMul-Softmax-MatMul fused, decomposed LN, Erf GELU") {
  const auto r = import("attention_block.onnx");
  const std::int64_t t = 50, d = 64, mlp = 256;
  // ln1 2d; qkv d·3d + 3d; proj d² + d; ln2 (Mul γ, Add β) 2d; fc1 d·mlp + mlp; fc2 mlp·d + d.
  CHECK(r.graph.parameters() == 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * mlp + mlp) + (mlp * d + d));
  // Linear layers over t tokens, plus QKᵀ and PV: t·t·d each.
  CHECK(r.graph.macs() == t * (d * 3 * d + d * d + d * mlp + mlp * d) + 2 * t * t * d);
  CHECK(r.attention_patterns == 1);
  const wl::VisionOp* att = nullptr;
  for (const auto& op : r.graph.ops)
    if (op.kind == wl::VisionOpKind::attention) att = &op;
  REQUIRE(att != nullptr);
  CHECK(att->heads == 4);
  CHECK(att->c_out == d);
  CHECK(att->h_in * att->w_in == t);
  CHECK(att->kv_tokens == 0);
  CHECK(count_kind(r.graph, wl::VisionOpKind::linear) == 4);
  CHECK(count_kind(r.graph, wl::VisionOpKind::norm) == 1);  // the decomposed one is priced as its parts
}

TEST_CASE("upsample block: transposed conv, Resize, Concat, conv with bias, average pool") {
  const auto r = import("upsample_block.onnx");
  // up: 64·32·2² + 32; side 32·64; fuse 16·64·3² + 16.
  CHECK(r.graph.parameters() == 8224 + 2048 + 9232);
  // The transposed conv: every input pixel (16×16) meets the whole kernel: 256·8192; side 256·2048; fuse 32²·9216.
  CHECK(r.graph.macs() == 256 * 8192 + 256 * 2048 + 1024 * 9216);
  CHECK(count_kind(r.graph, wl::VisionOpKind::resize) == 1);
  CHECK(count_kind(r.graph, wl::VisionOpKind::copy) == 1);
  const auto& up = r.graph.ops.front();
  CHECK(up.transposed);
  CHECK(up.h_out == 32);
}

TEST_CASE("torchvision exports import with the library's parameter and MAC counts") {
  struct Case {
    const char* file;
    const char* id;
  };
  for (const Case c : {Case{"resnet50.onnx", "resnet50"}, Case{"efficientnet-b4.onnx", "efficientnet-b4"},
                       Case{"vit-b-16-eval.onnx", "vit-b-16"}}) {
    INFO(c.file);
    const auto r = import(c.file);
    const auto lib = library(c.id);
    CHECK(r.graph.parameters() == lib.parameters());
    CHECK(r.graph.macs() == lib.macs());
    CHECK(r.graph.resolution == lib.resolution);
    for (auto k : {wl::VisionOpKind::conv, wl::VisionOpKind::attention}) CHECK(r.graph.count(k) == lib.count(k));
    std::int64_t dw_onnx = 0, dw_lib = 0;
    for (const auto& op : r.graph.ops) dw_onnx += op.depthwise() ? 1 : 0;
    for (const auto& op : lib.ops) dw_lib += op.depthwise() ? 1 : 0;
    CHECK(dw_onnx == dw_lib);
  }
}

TEST_CASE("ResNet-50 exported in eval mode: BN folded into the convs, parameters = library − one per BN channel") {
  const auto r = import("resnet50-eval.onnx");
  const auto lib = library("resnet50");
  // Folding replaces a BN's scale and shift (2C) by a conv bias (C).
  std::int64_t bn_channels = 0;
  for (const auto& op : lib.ops)
    if (op.kind == wl::VisionOpKind::norm) bn_channels += op.c_out;
  CHECK(bn_channels == 26560);
  CHECK(r.graph.parameters() == lib.parameters() - bn_channels);
  CHECK(r.graph.macs() == lib.macs());
  CHECK(r.graph.count(wl::VisionOpKind::norm) == 0);
}

TEST_CASE("ViT-B/16 export: 12 attention chains of 12 heads over 197 tokens, initializers shared through Identity "
          "count once per parameter") {
  const auto r = import("vit-b-16-eval.onnx");
  CHECK(r.attention_patterns == 12);
  for (const auto& op : r.graph.ops) {
    if (op.kind != wl::VisionOpKind::attention) continue;
    CHECK(op.heads == 12);
    CHECK(op.h_in == 197);
    CHECK(op.c_out == 768);
  }
  CHECK(r.graph.parameters() == 86567656);  // torchvision ViT_B_16_Weights num_params
}

TEST_CASE("an op type outside the supported list is refused, naming the node and the type") {
  auto r = wl_io::import_onnx_vision(kDir + "unknown_op.onnx", "unknown_op.onnx");
  REQUIRE_FALSE(r.ok());
  const std::string msg = r.diagnostics().to_string();
  CHECK(msg.find("node 'nms' (NonMaxSuppression)") != std::string::npos);
  CHECK(msg.find("/graph/node/0") != std::string::npos);
}

TEST_CASE("a file that is no ONNX model, an empty file and a missing file are errors, not crashes") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto bad = dir / ("gpuplan-onnx-bad-" + std::to_string(::getpid()) + ".onnx");
  {
    std::ofstream o(bad, std::ios::binary);
    o << "{\"not\": \"protobuf\"} \x01\x02\xff";
  }
  auto a = wl_io::import_onnx_vision(bad.string(), "bad.onnx");
  CHECK_FALSE(a.ok());
  CHECK(a.diagnostics().to_string().find("not an ONNX model") != std::string::npos);
  { std::ofstream o(bad, std::ios::binary | std::ios::trunc); }
  CHECK_FALSE(wl_io::import_onnx_vision(bad.string(), "empty.onnx").ok());
  std::filesystem::remove(bad);
  auto m = wl_io::import_onnx_vision((dir / "gpuplan-no-such-file.onnx").string(), "missing.onnx");
  CHECK_FALSE(m.ok());
  CHECK(m.diagnostics().to_string().find("no such file") != std::string::npos);
}

TEST_CASE("docs/onnx-import.md lists every supported op type") {
  std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/onnx-import.md");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const auto& op : wl_io::onnx_supported_ops()) CHECK_MESSAGE(doc.find("`" + op + "`") != std::string::npos, op);
}

TEST_CASE("gpuplan model show / serve / train take an ONNX file, serve prices ResNet-50's export as the library's") {
  using namespace gpuplan::cli_test;
  auto show = run({"model", "show", kDir + "resnet50.onnx", "--format", "json"});
  REQUIRE(show.rc == 0);
  const auto j = parse_json(show);
  CHECK(j["params"] == 25557032);
  CHECK(j["family"] == "onnx");
  CHECK(j["onnx"]["opset"] == 17);

  auto lib = run({"serve", "-m", "resnet50", "--gpu", "h100", "--batch", "8", "--format", "json"});
  auto onnx = run({"serve", "-m", kDir + "resnet50.onnx", "--gpu", "h100", "--batch", "8", "--format", "json"});
  REQUIRE(lib.rc == 0);
  REQUIRE(onnx.rc == 0);
  const double a = parse_json(lib)["latency_s"].get<double>(), b = parse_json(onnx)["latency_s"].get<double>();
  // The same ops in the same order (conv, BN, ReLU, pools, adds, fc): the same price, to rounding.
  CHECK(std::abs(b / a - 1.0) < 1e-9);

  auto train = run({"train", "-m", kDir + "vit-b-16-eval.onnx", "--gpu", "h100", "--global-batch", "64", "--format",
                    "json"});
  REQUIRE(train.rc == 0);
  CHECK(parse_json(train)["step_time_s"].get<double>() > 0);

  auto res = run({"serve", "-m", kDir + "tiny_convnet.onnx", "--resolution", "64"});
  CHECK(res.rc == kInvalid);
  CHECK(contains(res.err, "exported with"));
  auto unk = run({"model", "show", kDir + "unknown_op.onnx"});
  CHECK(unk.rc == kInvalid);
  CHECK(contains(unk.err, "NonMaxSuppression"));
}
