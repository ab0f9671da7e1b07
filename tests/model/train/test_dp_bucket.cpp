// The data-parallel gradient buckets (dp_bucket_size, model/src/train/dp_buckets.cpp dp_buckets,
// dp_terms.cpp dp_last_unit_params; compose_step.cpp dp_calls). Sources (NVIDIA/Megatron-LM core_r0.14.0,
// 32ad5c89a6b6d7bb1ed75b81a4f845751d8955cc): DistributedDataParallelConfig.bucket_size ("Maximum number of
// parameters in each bucket"; training.py get_model: unset, max(40000000, 1000000 x DP·CP));
// param_and_grad_buffer.py _ParamAndGradBuffer.__init__ walks the parameters in reverse (backward) order and closes
// a bucket at the first tensor boundary at or past bucket_size, so the embedding's bucket is the last one reduced;
// distributed_data_parallel.py buckets only pipeline rank 0's first model chunk. NeMo 2 MegatronCommOverlapCallback
// sets 128 Mi parameters with the distributed optimizer; MLPerf Training v5.1 Llama 3.1 8B config_common_8b.sh
// BUCKET_SIZE=768000000.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
// Llama 3.1 8B on one DGX H100 (one NVLink domain): TP 1, DP 8, ZeRO-1, 8 micro-batches of 4096 tokens per GPU.
wl::TrainingPlan h100_zero1(std::int64_t bucket) {
  wl::TrainingPlan p;
  p.par.dp = 8;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 4096;
  p.zero = wl::ZeroStage::optimizer;
  p.dp_bucket_size = bucket;
  return p;
}

const model::CommCost* comm(const model::TrainingEstimate& e, const char* kind) {
  for (const auto& c : e.comm)
    if (c.kind == kind) return &c;
  return nullptr;
}

std::string explain_text(const Derivation& d) {
  std::string s = d.title + " | ";
  for (const auto& i : d.inputs) s += i.symbol + ": " + i.value + " | ";
  for (const auto& c : d.children) s += explain_text(c);
  return s;
}
}  // namespace

TEST_CASE("the last bucket stays exposed whole: 768M instead of 600M buckets move its RS + AG") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto b600 = model::estimate_training(a, h100_zero1(600000000), sys, Explain::off);
  const auto b768 = model::estimate_training(a, h100_zero1(768000000), sys, Explain::off);
  REQUIRE(b600.feasibility.ok);
  REQUIRE(b768.feasibility.ok);
  const auto* d0 = comm(b600, "dp");
  const auto* d1 = comm(b768, "dp");
  REQUIRE(d0 != nullptr);
  REQUIRE(d1 != nullptr);
  // The same bytes travel: only what stays exposed moves.
  CHECK(d1->time.raw() == gptest::approx(d0->time.raw()).epsilon(1e-12));
  // The last bucket is what the walk leaves for the embedding (tensors of "the explain tree names ..." below):
  //  - 600M: the output layer + final norm + layer 31's fc2 and fc1 close bucket 1 (701,501,440), the next closes
  //    at 654,336,000 (3 layers, ending at an fc1) ten times, leaving layer 1's last four tensors (42,000,128),
  //    layer 0 (218,112,000) and the embedding: 785,399,808 (12 calls);
  //  - 768M: 1,221,623,808 (9 calls).
  // Both are few enough calls that the backward (and forward) of one micro-batch hide everything but that bucket's
  // reduce-scatter and all-gather, which the step waits for whole (the timeline's DP wait spans):
  //   Δwait = RS(last768·b_g) − RS(last600·b_g) + AG(last768·b_w) − AG(last600·b_w),
  // b_g = b_w = 2 B: 436.2M more parameters, 872 MB more each way, of which each GPU moves 7/8 over NVLink 4.
  const model::CommGroup g = model::training_comm_group(8, 1, sys);
  auto rs = [&](double params) {
    return model::collective_time(model::Collective::reduce_scatter, units::bytes(params * 2.0), g).raw();
  };
  auto ag = [&](double params) {
    return model::collective_time(model::Collective::all_gather, units::bytes(params * 2.0), g).raw();
  };
  const double l600 = 785399808.0, l768 = 1221623808.0;
  const double expected = rs(l768) - rs(l600) + ag(l768) - ag(l600);
  // By hand at NVLink 4's 450 GB/s per direction and the built-in ring bus efficiency 0.81 (364.5 GB/s):
  // 2 · 7/8 · 872,448,000 B / 364.5 GB/s = 4.189 ms (the latency terms cancel in the difference).
  CHECK(expected == gptest::approx(2.0 * 0.875 * 872448000.0 / (450e9 * 0.81)).epsilon(1e-3));
  const auto t0 = model::training_timeline(a, h100_zero1(600000000), sys);
  const auto t1 = model::training_timeline(a, h100_zero1(768000000), sys);
  REQUIRE(t0.ok);
  REQUIRE(t1.ok);
  const double wait0 = t0.compute_time(model::SpanKind::dp_wait).raw();
  const double wait1 = t1.compute_time(model::SpanKind::dp_wait).raw();
  CHECK(wait1 - wait0 == gptest::approx(expected).epsilon(1e-6));
  // The rest of the exposed DP time is the compute's loss beside the hidden calls (parallel_dims.hpp
  // dp_beside_compute_share): it falls, with less hidden and fewer calls.
  const double loss0 = t0.compute_time(model::SpanKind::sm_contention).raw();
  const double loss1 = t1.compute_time(model::SpanKind::sm_contention).raw();
  CHECK(d0->exposed.raw() == gptest::approx(wait0 + loss0).epsilon(1e-9));
  CHECK(d1->exposed.raw() == gptest::approx(wait1 + loss1).epsilon(1e-9));
  CHECK(loss1 < loss0);
}

TEST_CASE("the default 40M bucket (98 calls) leaves less exposed than 100M (65) or 768M (9), and costs more waits") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto def = model::training_timeline(a, h100_zero1(0), sys);
  const auto b100 = model::training_timeline(a, h100_zero1(100000000), sys);
  const auto b768 = model::training_timeline(a, h100_zero1(768000000), sys);
  REQUIRE(def.ok);
  REQUIRE(b100.ok);
  REQUIRE(b768.ok);
  // 40M leaves the embedding with layer 0's input norm (525,340,672) as the last bucket, 100M the embedding with
  // layer 0's last four tensors (567,287,808), 768M 1,221,623,808. Each call beside compute waits for the kernel in
  // flight (the overlap items' wait), but at 98 calls instead of the count-and-divide rule's 201 the waits no longer
  // stretch the reduction past the backward that hides it: what the step waits for is the last bucket's
  // reduce-scatter and all-gather, so the wait rises with the last bucket.
  const auto wait = [](const model::StepTimeline& t) { return t.compute_time(model::SpanKind::dp_wait).raw(); };
  CHECK(wait(def) < wait(b100));
  CHECK(wait(b100) < wait(b768));
  // The other side of each call: the compute kernels beside it wait for its kernel, at most one kernel each
  // (dp_beside_compute_share), so more, shorter calls cost the compute more.
  const auto loss = [](const model::StepTimeline& t) { return t.compute_time(model::SpanKind::sm_contention).raw(); };
  CHECK(loss(def) > loss(b100));
  CHECK(loss(b100) > loss(b768));
}

TEST_CASE("the explain tree names the bucket, the calls per step and the exposed last bucket, with their origin") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  // Llama 3.1 8B at TP 1, tensors in reverse parameter order (Megatron-Core's fused linear_qkv and linear_fc1):
  //   output_layer 128256 x 4096 = 525,336,576; final norm 4,096; per layer (from the last): fc2 4096 x 14336 =
  //   58,720,256, fc1 2 x 14336 x 4096 = 117,440,512, its norm 4,096, proj 4096 x 4096 = 16,777,216, qkv
  //   (4096 + 2 x 1024) x 4096 = 25,165,824, its norm 4,096 — 218,112,000 per layer; the embedding 525,336,576.
  // 768M: the output layer + final norm + layer 31 (743,452,672) + layer 30's fc2 closes bucket 1 at 802,172,928;
  // layer 30's rest (159,391,744) + layers 29-28 + layer 27's fc2 and fc1 close bucket 2 at 771,776,512; from there
  // each bucket is 4 whole layers (872,448,000 ≥ 768M at the fourth layer's fc1, the 42,000,128 after it carried
  // over), six times; what is left — 5 layers and 42,000,128 less, and the embedding — is the last bucket:
  // 8,030,261,248 − 802,172,928 − 771,776,512 − 6 x 872,448,000 = 1,221,623,808. 9 calls (the count-and-divide
  // rule gave ceil(8.03e9 / 768e6) = 11 and a last bucket of 768M).
  // 40M: output layer (1); per layer fc2 + the norm before it (58,724,352), fc1 (117,440,512), proj + qkv + the
  // norm between (41,947,136): 3 x 32; the last layer's input norm + the embedding (525,340,672): 98 calls (the
  // count-and-divide rule: 201).
  const auto big = model::estimate_training(a, h100_zero1(768000000), sys, Explain::on);
  const std::string t = explain_text(big.derivation);
  CHECK(t.find("DP bucket: 768,000,000 parameters: 9 per step (9 dense, 0 expert), the last (exposed) "
               "1,221,623,808 |") != std::string::npos);
  const auto base = model::estimate_training(a, h100_zero1(0), sys, Explain::on);
  const std::string t0 = explain_text(base.derivation);
  CHECK(t0.find("DP bucket: 40,000,000 parameters: 98 per step (98 dense, 0 expert), the last (exposed) "
                "525,340,672 |") != std::string::npos);
}

namespace {
std::string bucket_line(const wl::TransformerArch& a, const wl::TrainingPlan& p) {
  const auto e = model::estimate_training(a, p, test::node_system("dgx-h100"), Explain::on);
  const std::string t = explain_text(e.derivation);
  const auto i = t.find("DP bucket: ");
  REQUIRE(i != std::string::npos);
  return t.substr(i, t.find(" |", i) - i);
}
// A small Llama-type model whose buckets can be listed by hand: hidden 1024, FFN 4096, 8 heads of 128, 2 KV heads,
// 4 layers, vocabulary 32000, untied.
wl::TransformerArch small_llama(bool tied) {
  return test::hf(std::string(R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
      "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 32000,
      "tie_word_embeddings": )") + (tied ? "true" : "false") + "}");
}
}  // namespace

TEST_CASE("buckets close at the first tensor boundary at or past the size, walking the tensors backwards") {
  // Tensors at TP 1 (Megatron-Core fuses Q, K, V into linear_qkv and gate + up into linear_fc1):
  //   embedding = LM head = 32000 x 1024 = 32,768,000; final norm 1,024;
  //   per layer: norm 1,024, qkv (1024 + 2 x 2 x 128) x 1024 = 1,572,864, proj 1024 x 1024 = 1,048,576,
  //   norm 1,024, fc1 2 x 4096 x 1024 = 8,388,608, fc2 4096 x 1024 = 4,194,304: 15,206,400 per layer;
  //   all 126,362,624.
  // Bucket 10,000,000, PP 1, walked from the LM head:
  //   1. LM head 32,768,000 (past 10M alone);
  //   2. final norm 1,024 + layer 3's fc2 4,194,304 + fc1 8,388,608 = 12,583,936;
  //   3-5. layer l's norm, proj, qkv, norm (2,623,488) + layer l−1's fc2 and fc1 (12,582,912) = 15,206,400,
  //        three times;
  //   6. layer 0's norm, proj, qkv, norm 2,623,488 + the embedding 32,768,000 = 35,391,488.
  // 32,768,000 + 12,583,936 + 3 x 15,206,400 + 35,391,488 = 126,362,624. The count-and-divide rule gave
  // ceil(126.4M / 10M) = 13 calls and a last bucket of max(10M, embedding) = 32,768,000.
  auto p = h100_zero1(10000000);
  CHECK(bucket_line(small_llama(false), p) ==
        "DP bucket: 10,000,000 parameters: 6 per step (6 dense, 0 expert), the last (exposed) 35,391,488");
  // PP 2 (8 GPUs: DP 4): only pipeline rank 0 is bucketed, layers 0-1 and the embedding: layer 1's fc2 + fc1
  // (12,582,912), layer 1's rest + layer 0's fc2 + fc1 (15,206,400), layer 0's rest + the embedding (35,391,488):
  // 3 buckets.
  p.par.dp = 4;
  p.par.pp = 2;
  p.global_batch = 64;
  CHECK(bucket_line(small_llama(false), p) ==
        "DP bucket: 10,000,000 parameters: 3 per step (3 dense, 0 expert), the last (exposed) 35,391,488");
  // Interleaved, 2 chunks per stage: rank 0 holds layer 0 (chunk 0, bucketed: 12,582,912 and 35,391,488) and layer
  // 2 (chunk 1, one bucket): 3 calls.
  p.par.virtual_stages = 2;
  CHECK(bucket_line(small_llama(false), p) ==
        "DP bucket: 10,000,000 parameters: 3 per step (3 dense, 0 expert), the last (exposed) 35,391,488");
  // Tied embeddings with PP 2 and the distributed optimizer: the shared embedding is a bucket of its own
  // (_does_param_require_new_bucket): 12,582,912, 15,206,400, layer 0's rest 2,623,488, the embedding 32,768,000.
  p.par.virtual_stages = 1;
  CHECK(bucket_line(small_llama(true), p) ==
        "DP bucket: 10,000,000 parameters: 4 per step (4 dense, 0 expert), the last (exposed) 32,768,000");
}

TEST_CASE("PyTorch DDP: a 1 MiB first bucket, then 25 MiB, closed at the modules' parameter tensors (66 calls)") {
  // Our 1B-like step on 4 GPUs under DDP (scripts/measure/train_step.py; AMP: fp32 gradients, 4 B): 25 MiB =
  // 6,553,600 parameters, the first bucket 1 MiB = 262,144 (dist._DEFAULT_FIRST_BUCKET_BYTES). Tensors in reverse
  // parameter order: lm_head 128256 x 2048 = 262,668,288 (bucket 1, past 1 MiB alone); the final norm 2,048; per
  // layer (from the last) down 8192 x 2048 = 16,777,216, up and gate 16,777,216 each, the post-attention norm 2,048,
  // wo 4,194,304, wv and wk 512 x 2048 = 1,048,576 each, wq 4,194,304, the input norm 2,048. Per layer: [norm +
  // down] (past 6,553,600 at down), [up], [gate], [norm, wo, wv, wk = 6,293,504 < 6,553,600, + wq = 10,487,808]:
  // 4 buckets, 64 for 16 layers; then layer 0's input norm + the embedding (262,670,336): 1 + 64 + 1 = 66 calls,
  // the count of NCCL all-reduce kernels in our profile of this step (data/validation/ANALYSIS.md, session 32).
  // Fused Q/K/V and gate/up tensors would close 3 buckets per layer (50 calls); ceil(P / 25 MiB) gave 229.
  wl::TrainingPlan p;
  p.par.dp = 4;
  p.micro_batch = 4;
  p.global_batch = 16;
  p.seq_len = 2048;
  p.kernels = wl::KernelStyle::eager;
  p.mixed_precision = wl::MixedPrecision::amp;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  const auto& a = test::arch("bench-llama-1b-like");
  CHECK(bucket_line(a, p) ==
        "DP bucket: 6,553,600 parameters: 66 per step (66 dense, 0 expert), the last (exposed) 262,670,336");
}
