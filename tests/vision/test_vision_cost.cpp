// The vision pricer (model/src/vision/vision_cost.cpp): one op priced by hand from the same roofline functions, FLOP
// conventions, and the properties every plan must keep.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace {
using namespace gpuplan;

const hw::HardwareDb& hardware() {
  static const hw::HardwareDb d = [] {
    auto r = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  return d;
}

model::Device h100() {
  const hw::GpuSpec* g = hardware().find_gpu("h100-sxm5-80gb");
  REQUIRE(g != nullptr);
  return model::make_device(*g);
}

wl::VisionGraph graph(const std::string& id) {
  static const wl_io::VisionLibrary lib = [] {
    auto r = wl_io::load_vision_library(GPUPLAN_TEST_DATA_DIR);
    if (!r.ok()) FAIL(r.diagnostics().to_string());
    return r.value();
  }();
  const auto* e = lib.find(id);
  REQUIRE(e != nullptr);
  return wl::build_vision_graph(e->arch);
}

/// A one-op graph.
wl::VisionGraph single(const wl::VisionOp& op) {
  wl::VisionGraph g;
  g.id = "one";
  g.resolution = op.h_in;
  g.ops.push_back(op);
  return g;
}

model::VisionRunPlan plan(std::int64_t batch) {
  model::VisionRunPlan p;
  p.batch = batch;
  p.autocast = false;
  p.cuda_graphs = true;
  return p;
}
}  // namespace

TEST_CASE("a 3x3 convolution is the implicit GEMM M = N*Ho*Wo, N = Cout, K = Cin*9, moving only its real tensors") {
  wl::VisionOp op;
  op.kind = wl::VisionOpKind::conv;
  op.name = "conv";
  op.c_in = op.c_out = 256;
  op.h_in = op.w_in = op.h_out = op.w_out = 14;
  op.kernel = 3;
  const auto p = plan(64);
  model::Device d = h100();
  d.eff.kernel_launch = p.launch.kernel_overhead_graph;
  const auto pc = model::vision_forward(single(op), p, d, true);
  REQUIRE(pc.ops.size() == 1);
  // By hand: compute at gemm_cost's efficiency for (64·14·14) × 256 × 2304 under the fastest of cuDNN's tiles
  // (autotuned: 128×256, 256×128, 128×128, 256×64, 128×64, 64×64); bytes = input + output maps + weights.
  double best_eff = 0;
  for (const auto& t : std::vector<std::pair<int, int>>{{128, 256}, {256, 128}, {128, 128}, {256, 64}, {128, 64}, {64, 64}}) {
    model::Device dt = d;
    dt.eff.tile_m = t.first;
    dt.eff.tile_n = t.second;
    best_eff = std::max(best_eff, model::gemm_cost("ref", {64 * 14 * 14, 256, 256 * 9, 1}, hw::Precision::bf16, dt).efficiency);
  }
  const double flops = 2.0 * 64 * 14 * 14 * 256 * 256 * 9;
  CHECK(pc.flops.raw() == gptest::approx(flops).epsilon(1e-12));
  const double tc = flops / (d.peak(hw::Precision::bf16).raw() * best_eff);
  const double bytes = (2.0 * 64 * 14 * 14 * 256) * 2 + 256.0 * 256 * 9 * 2;
  CHECK(pc.ops[0].bytes.raw() == gptest::approx(bytes));
  const double eta = d.eff.gemm_hbm > 0 ? d.eff.gemm_hbm : d.eff.hbm;
  const double tm = bytes / (d.gpu->memory.bandwidth.raw() * eta);
  CHECK(pc.time.raw() == gptest::approx(std::max(tc, tm) + p.launch.kernel_overhead_graph.raw()));
  // This GEMM (intensity ≈ 230 FLOP/B over the real tensors) is compute-bound on an H100.
  CHECK(pc.ops[0].bound == model::Bound::compute);
}

TEST_CASE("a stem convolution of 3 channels runs on channels padded to 8, each filter tap a 32-channel K-tile") {
  // ResNet-50's stem: 3 -> 64 channels, 7x7, stride 2, 224 -> 112 px. cuDNN pads the input to 8 channels (its own
  // kernel: read 3, write 8 channels) and the implicit GEMM steps through the 49 taps with a K-tile of 32 channels:
  // K = 49 x 32 = 1568, aligned (not the odd K = 147 of the fallback class).
  wl::VisionOp op;
  op.kind = wl::VisionOpKind::conv;
  op.name = "stem";
  op.c_in = 3;
  op.c_out = 64;
  op.h_in = op.w_in = 224;
  op.h_out = op.w_out = 112;
  op.kernel = 7;
  op.stride = 2;
  const auto p = plan(64);
  model::Device d = h100();
  d.eff.kernel_launch = p.launch.kernel_overhead_graph;
  const auto pc = model::vision_forward(single(op), p, d, true);
  REQUIRE(pc.ops.size() == 2);
  const double in = 64.0 * 3 * 224 * 224;
  CHECK(pc.ops[0].bytes.raw() == gptest::approx(in * 2 + in * 8.0 / 3.0 * 2));  // the padding kernel
  CHECK(pc.ops[0].flops.raw() == 0);
  CHECK(pc.ops[1].flops.raw() == gptest::approx(2.0 * 64 * 112 * 112 * 64 * 49 * 32));
  // Compute-bound: the padded GEMM's FLOPs at the best of cuDNN's tiles' efficiencies.
  double best_eff = 0;
  for (const auto& t : std::vector<std::pair<int, int>>{{128, 256}, {256, 128}, {128, 128}, {256, 64}, {128, 64}, {64, 64}}) {
    model::Device dt = d;
    dt.eff.tile_m = t.first;
    dt.eff.tile_n = t.second;
    best_eff = std::max(best_eff, model::gemm_cost("ref", {64 * 112 * 112, 64, 1568, 1}, hw::Precision::bf16, dt).efficiency);
  }
  CHECK(pc.ops[1].bound == model::Bound::compute);
  CHECK(pc.ops[1].time.raw() == gptest::approx(pc.ops[1].flops.raw() / (d.peak(hw::Precision::bf16).raw() * best_eff) +
                                                p.launch.kernel_overhead_graph.raw()));
}

TEST_CASE("a depthwise convolution streams its two maps: memory-bound, priced like any streaming kernel") {
  wl::VisionOp op;
  op.kind = wl::VisionOpKind::conv;
  op.name = "dw";
  op.c_in = op.c_out = op.groups = 672;
  op.h_in = op.w_in = op.h_out = op.w_out = 24;
  op.kernel = 5;
  const auto p = plan(32);
  model::Device d = h100();
  d.eff.kernel_launch = p.launch.kernel_overhead_graph;
  const auto pc = model::vision_forward(single(op), p, d, true);
  REQUIRE(pc.ops.size() == 1);
  const double elements = 2.0 * 32 * 672 * 24 * 24;
  CHECK(pc.ops[0].bytes.raw() == gptest::approx(elements * 2));
  CHECK(pc.ops[0].flops.raw() == gptest::approx(2.0 * 32 * 672 * 24 * 24 * 25));
  CHECK(pc.ops[0].bound == model::Bound::memory);
  CHECK(pc.time.raw() == gptest::approx(elements * 2 / d.stream_bandwidth().raw() + p.launch.kernel_overhead_graph.raw()));
  CHECK(pc.depthwise.raw() == gptest::approx(pc.time.raw()));
}

TEST_CASE("inference latency grows with the batch and throughput with it, up to the GPU's rate") {
  const auto g = graph("resnet50");
  const model::Device d = h100();
  double prev_latency = 0, prev_tput = 0;
  for (std::int64_t b : {1, 8, 64, 256}) {
    const auto r = model::vision_inference(g, plan(b), d, Explain::off);
    CAPTURE(b);
    CHECK(r.latency.raw() > prev_latency);
    CHECK(r.images_per_second > prev_tput);
    prev_latency = r.latency.raw();
    prev_tput = r.images_per_second;
  }
  // Bounded by the dense bf16 peak: 2·4.09 GMACs per image.
  CHECK(prev_tput < d.peak(hw::Precision::bf16).raw() / (2.0 * static_cast<double>(g.macs())));
}

TEST_CASE("eager execution is never faster than a CUDA graph, and BN folding and epilogue fusion remove kernels and time") {
  const auto g = graph("efficientnet-b4");
  const model::Device d = h100();
  auto p = plan(8);
  p.autocast = true;
  const auto graphed = model::vision_inference(g, p, d, Explain::off);
  p.cuda_graphs = false;
  const auto eager = model::vision_inference(g, p, d, Explain::off);
  CHECK(eager.latency > graphed.latency);
  CHECK(eager.pass.kernels == graphed.pass.kernels);
  // Eager: never faster than the host's issue time — the measured per-module costs (host_ops), which for
  // EfficientNet's multi-kernel modules (a batch norm issues 3 kernels for 43.2 µs) come to less than
  // kernels × the single-kernel median (22.2 µs): the per-module table, not the per-kernel figure, prices it.
  CHECK(eager.pass.cpu_issue.raw() > 0);
  CHECK(eager.latency.raw() >= eager.pass.cpu_issue.raw());
  CHECK(eager.pass.cpu_issue.raw() < eager.pass.kernels * p.launch.cpu_per_kernel.raw());
  p.cuda_graphs = true;
  p.fold_bn = true;
  const auto folded = model::vision_inference(g, p, d, Explain::off);
  CHECK(folded.pass.kernels < graphed.pass.kernels);
  CHECK(folded.latency < graphed.latency);
  p.fuse_epilogue = true;
  const auto fused = model::vision_inference(g, p, d, Explain::off);
  CHECK(fused.pass.kernels < folded.pass.kernels);
  CHECK(fused.latency < folded.latency);
  // The FLOPs of the GEMMs do not change: only elementwise passes disappear.
  CHECK(fused.pass.gemm.raw() == gptest::approx(folded.pass.gemm.raw()));
}

// int8 GEMMs run at the measured int8 ceiling (torch._int_mm: 0.418 of the int8 peak, data/hardware/efficiency/
// measured.json H100-COMPRESS, about bf16's rate): the int8 pass gains through its halved bytes, fp8 also in its GEMMs.
TEST_CASE("int8 and fp8 run ResNet-50 faster than bf16 at a large batch, fp8 also in its convolutions") {
  const auto g = graph("resnet50");
  const model::Device d = h100();
  auto p = plan(256);
  const auto bf16 = model::vision_inference(g, p, d, Explain::off);
  p.compute = hw::Precision::int8;
  const auto int8 = model::vision_inference(g, p, d, Explain::off);
  p.compute = hw::Precision::fp8;
  const auto fp8 = model::vision_inference(g, p, d, Explain::off);
  CHECK(fp8.pass.gemm < bf16.pass.gemm);
  CHECK(int8.latency < bf16.latency);
  CHECK(fp8.latency < bf16.latency);
}

TEST_CASE("a ViT's attention is priced as fused (flash) attention over batch x heads, non-causal") {
  const auto g = graph("vit-b-16");
  model::Device d = h100();
  auto p = plan(16);
  const auto pc = model::vision_forward(g, p, d, true);
  d.eff.kernel_launch = p.launch.kernel_overhead_graph;
  const auto ref = model::attention_cost("a", 16 * 12, 197, 197, 64, 64, false, true, false, hw::Precision::bf16, d);
  REQUIRE(ref.size() == 1);
  CHECK(pc.attention.raw() == gptest::approx(12 * ref[0].time.raw()));
  // FLOPs: 2 · 2·T²·hidden per image per block, the convention of wl/vision.hpp.
  CHECK(ref[0].flops.raw() == gptest::approx(2.0 * 16 * 2 * 197.0 * 197 * 768));
}

TEST_CASE("a training step: model FLOPs 6 x MACs per image, fp32 weights, gradients and optimizer states") {
  const auto g = graph("resnet50");
  const model::Device d = h100();
  model::VisionTrainPlan tp;
  tp.run = plan(64);
  tp.run.cuda_graphs = false;
  tp.run.autocast = true;
  const auto r = model::vision_training(g, tp, d, Explain::on);
  const double params = static_cast<double>(g.parameters());
  CHECK(r.model_flops.raw() == gptest::approx(6.0 * static_cast<double>(g.macs()) * 64));
  CHECK(r.memory.weights.raw() == gptest::approx(4 * params));
  CHECK(r.memory.gradients.raw() == gptest::approx(4 * params));
  CHECK(r.memory.optimizer.raw() == gptest::approx(4 * params));  // SGD momentum
  // Eager: host and GPU in series per phase (vision_cost.cpp issue_flow): never more than the phases' own maxima
  // summed, never less than either resource's sum.
  CHECK(r.step_time.raw() <= r.forward.time.raw() + r.backward.time.raw() + r.optimizer.raw() + 1e-12);
  CHECK(r.step_time.raw() >= r.forward.gpu_time.raw() + r.backward.gpu_time.raw() - 1e-12);
  CHECK(r.step_time.raw() >= r.forward.cpu_issue.raw() + r.backward.cpu_issue.raw() - 1e-12);
  {  // Under CUDA graphs the host issues nothing: the step is the GPU's phases summed.
    auto gp = tp;
    gp.run.cuda_graphs = true;
    const auto gr = model::vision_training(g, gp, d, Explain::off);
    CHECK(gr.step_time.raw() == gptest::approx(gr.forward.time.raw() + gr.backward.time.raw() + gr.optimizer.raw()));
  }
  // The backward runs two GEMMs per convolution (one for the stem): about twice the forward's GEMM time.
  CHECK(r.backward.gemm.raw() > 1.5 * r.forward.gemm.raw());
  CHECK(r.backward.gemm.raw() < 2.6 * r.forward.gemm.raw());
  CHECK(r.mfu > 0.0);
  CHECK(r.mfu < 1.0);
  CHECK(r.derivation.find("vision.forward") != nullptr);
  // AdamW holds two states; gradient accumulation repeats forward and backward, not the optimizer.
  tp.optimizer = model::VisionOptimizer::adamw;
  tp.accumulation = 4;
  const auto a = model::vision_training(g, tp, d, Explain::off);
  CHECK(a.memory.optimizer.raw() == gptest::approx(8 * params));
  CHECK(a.step_time.raw() <= 4 * (a.forward.time.raw() + a.backward.time.raw()) + a.optimizer.raw() + 1e-12);
  CHECK(a.step_time.raw() >= 4 * (a.forward.gpu_time.raw() + a.backward.gpu_time.raw()) - 1e-12);
  CHECK(a.model_flops.raw() == gptest::approx(4 * r.model_flops.raw()));
  // Saved activations scale with the micro-batch.
  tp.run.batch = 128;
  tp.accumulation = 1;
  const auto big = model::vision_training(g, tp, d, Explain::off);
  CHECK(big.memory.activations.raw() == gptest::approx(2 * r.memory.activations.raw()));
}

TEST_CASE("the explain tree of a forward pass has one child per kernel, and the kernels add up to the GPU time") {
  const auto g = graph("resnet50");
  const auto r = model::vision_inference(g, plan(8), h100(), Explain::on);
  CHECK(r.derivation.children.size() == static_cast<std::size_t>(r.pass.kernels));
  REQUIRE(r.pass.ops.size() == r.derivation.children.size());
  double sum = 0;
  for (const auto& op : r.pass.ops) sum += op.time.raw();
  CHECK(sum == gptest::approx(r.pass.gpu_time.raw()));
  CHECK(r.derivation.children.front().title == "conv1 channel pad");  // cuDNN pads the 3 input channels first
  CHECK(r.derivation.children[1].title == "conv1");
  // Inference batch norm (not folded): three kernels each, 53 of them in ResNet-50.
  std::size_t bn = 0;
  for (const auto& op : r.pass.ops) bn += op.name.find("bn") != std::string::npos || op.name.find("downsample.1") != std::string::npos;
  CHECK(bn == 3 * 53);
}

TEST_CASE("DDP: the fp32 gradients all-reduced in 25 MiB buckets, only the last one exposed when the backward is long") {
  const auto g = graph("resnet50");
  model::TrainingSystem sys;
  sys.db = &hardware();
  sys.gpu = hardware().find_gpu("h100-sxm5-80gb");
  sys.node = hardware().find_node("dgx-h100");
  REQUIRE(sys.node != nullptr);
  const model::Device d = h100();
  model::VisionTrainPlan tp;
  tp.run = plan(256);
  tp.run.cuda_graphs = false;
  tp.run.autocast = true;
  const auto one = model::vision_training(g, tp, d, Explain::off);
  tp.dp = model::training_comm_group(4, 1, sys);
  REQUIRE(tp.dp.size == 4);
  const auto four = model::vision_training(g, tp, d, Explain::off);
  // By hand: 4 B × 25,557,032 parameters = 102.2 MB = 3 full buckets of 25 MiB and a rest.
  const double grad = 4.0 * 25557032, bucket = 25.0 * 1024 * 1024;
  const double full = std::floor(grad / bucket), rest = grad - full * bucket;
  CHECK(full == 3);
  auto ar = [&](double b) {
    return model::collective_cost(model::Collective::all_reduce, units::bytes(b), tp.dp,
                                  model::CollectiveAlgorithm::automatic, Explain::off)
        .time.raw();
  };
  CHECK(four.allreduce.raw() == gptest::approx(full * ar(bucket) + ar(rest)));
  // The backward (tens of ms) hides all buckets but the last.
  CHECK(four.exposed_comm.raw() == gptest::approx(ar(rest)));
  CHECK(four.step_time > one.step_time);
  CHECK(four.images_per_second == gptest::approx(4.0 * 256 / four.step_time.raw()));
  CHECK(four.forward.time.raw() == gptest::approx(one.forward.time.raw()));
}

TEST_CASE("DDP broadcast_buffers: ResNet-50's 53 batch norms broadcast 212,904 B in 159 tensors before every forward") {
  const auto g = graph("resnet50");
  model::TrainingSystem sys;
  sys.db = &hardware();
  sys.gpu = hardware().find_gpu("h100-sxm5-80gb");
  sys.node = hardware().find_node("dgx-h100");
  REQUIRE(sys.node != nullptr);
  const model::Device d = h100();
  model::VisionTrainPlan tp;
  tp.run = plan(128);
  tp.run.cuda_graphs = false;
  tp.run.autocast = true;
  CHECK(model::vision_training(g, tp, d, Explain::off).buffer_sync.raw() == 0);  // one GPU: no DDP
  tp.dp = model::training_comm_group(2, 1, sys);
  REQUIRE(tp.dp.size == 2);
  const auto on = model::vision_training(g, tp, d, Explain::off);
  // By hand, BN channels of torchvision's ResNet-50: stem 64; layer1 3 × (64 + 64 + 256) + 256 (downsample);
  // layer2 4 × (128 + 128 + 512) + 512; layer3 6 × (256 + 256 + 1024) + 1024; layer4 3 × (512 + 512 + 2048) + 2048.
  const std::int64_t channels = 64 + (3 * 384 + 256) + (4 * 768 + 512) + (6 * 1536 + 1024) + (3 * 3072 + 2048);
  CHECK(channels == 26560);
  // running_mean + running_var in fp32 (8 B a channel) and num_batches_tracked (one int64) per BN, 3 tensors each.
  CHECK(on.buffer_bytes.raw() == 8.0 * channels + 8.0 * 53);
  CHECK(on.buffer_tensors == 159);
  // Measured (data/validation/measured/h100-sxm5-80gb, 2026-11-27): ResNet-50 b256's forward runs 662 kernels under
  // 2-GPU DDP (vision_ddp_profile_x2.json) against 499 on one GPU (vision_train_profile.json); the 163 extra are
  // 159 "Memcpy DtoD", 2 CatArrayBatchedCopy and 2 ncclDevKernel_Broadcast — the term's tensors + one cat and one
  // broadcast per dtype.
  CHECK(on.buffer_tensors + 2 + 2 == 662 - 499);
  // The term: both broadcasts, then the longer of the copies' GPU time and the host's issue of 161 kernels at
  // t_cpu (22.2 µs by default, the median single-kernel op of eager_host_ops.json — GELU 12.5, conv 19.3, channel mul
  // 20.0, depthwise 21.2, token add 22.2, add 23.6, max-pool 26.7, layer norm 32.9, linear 38.4 µs: 3.574 ms, longer
  // than 161 eager launches of 5 µs plus 0.85 MB streamed).
  auto bcast = [&](double b) {
    return model::collective_cost(model::Collective::broadcast, units::bytes(b), tp.dp,
                                  model::CollectiveAlgorithm::automatic, Explain::off)
        .time.raw();
  };
  const double host = 161 * 22.2e-6;
  CHECK(tp.run.launch.cpu_per_kernel.raw() == gptest::approx(22.2e-6));
  const double expected = bcast(8.0 * channels) + bcast(8.0 * 53) + host;
  CHECK(std::abs(on.buffer_sync.raw() - expected) <= 1e-12 * expected);
  // Paid once per forward: with 2 micro-batches twice; off (broadcast_buffers=False) nothing.
  tp.broadcast_buffers = false;
  const auto off = model::vision_training(g, tp, d, Explain::off);
  CHECK(off.buffer_sync.raw() == 0);
  CHECK(std::abs((on.gpu_step_time - off.gpu_step_time).raw() - on.buffer_sync.raw()) <= 1e-12);
  tp.broadcast_buffers = true;
  tp.accumulation = 2;
  const auto acc = model::vision_training(g, tp, d, Explain::off);
  tp.broadcast_buffers = false;
  const auto acc_off = model::vision_training(g, tp, d, Explain::off);
  CHECK(std::abs((acc.gpu_step_time - acc_off.gpu_step_time).raw() - 2 * on.buffer_sync.raw()) <= 1e-12);
  // Layer norm holds no buffers: ViT-B/16 pays nothing.
  tp.accumulation = 1;
  tp.broadcast_buffers = true;
  const auto vit = model::vision_training(graph("vit-b-16"), tp, d, Explain::off);
  CHECK(vit.buffer_tensors == 0);
  CHECK(vit.buffer_sync.raw() == 0);
}

TEST_CASE("training batch norm: the channels-last statistics pass at 0.218 of the streaming rate, the transform at 0.733") {
  // The measured bandwidth fractions of PyTorch's batch_norm_collect_statistics / batch_norm_transform_input
  // channels-last kernels (vision_train_profile.json, ResNet-50 b 256), and four small kernels for the running stats.
  wl::VisionOp op;
  op.kind = wl::VisionOpKind::norm;
  op.norm = wl::VisionNorm::batch;
  op.name = "bn";
  op.c_in = op.c_out = 64;
  op.h_in = op.w_in = op.h_out = op.w_out = 56;
  model::VisionTrainPlan tp;
  tp.run.batch = 256;
  tp.run.autocast = false;
  const auto r = model::vision_training(single(op), tp, h100(), Explain::on);
  REQUIRE(r.forward.ops.size() == 6);
  const model::Device d = h100();
  const double map = 256.0 * 64 * 56 * 56 * 2;  // one pass over the bf16 map
  const double launch = tp.run.launch.kernel_overhead_eager.raw();
  CHECK(r.forward.ops[0].name == "bn statistics");
  CHECK(r.forward.ops[0].time.raw() == gptest::approx(map / (d.stream_bandwidth().raw() * 0.218) + launch));
  CHECK(r.forward.ops[1].time.raw() == gptest::approx(2 * map / (d.stream_bandwidth().raw() * 0.733) + launch));
  CHECK(r.forward.ops[2].name == "bn running stats");
  // Backward: the reduction (reads x and dy) at 0.689, the element pass (x, dy read, dx written) at 0.840.
  REQUIRE(r.backward.ops.size() == 2);
  CHECK(r.backward.ops[0].time.raw() == gptest::approx(2 * map / (d.stream_bandwidth().raw() * 0.689) + launch));
  CHECK(r.backward.ops[1].time.raw() == gptest::approx(3 * map / (d.stream_bandwidth().raw() * 0.840) + launch));
}
