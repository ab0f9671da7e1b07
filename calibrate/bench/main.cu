// gpuplan-bench: the calibration microbenchmarks. One raw samples JSON per run (schema 1, kind
// "gpuplan-calibration-samples"), written atomically. See calibrate/bench/README.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.cuh"
#include "device_info.cuh"
#ifdef GPUPLAN_BENCH_HAVE_NCCL
#include "collectives.hpp"
#endif

namespace gb = gpuplan::bench;

namespace {

const char* kUsage =
    "usage: gpuplan-bench <command> [options]\n"
    "commands:\n"
    "  suite        gemm + attention + hbm + launch + sustained on one GPU (the single-GPU calibration)\n"
    "  gemm | attention | hbm | launch | sustained   one bench on one GPU\n"
    "  accumulate   weight-gradient GEMMs three ways: 16-bit output, fp32 output, fp32 accumulated into (beta = 1)\n"
    "  depth        bf16 and fp8 GEMMs at full waves with the reduction length K swept 256 .. 32768 (the cost per\n"
    "               output tile that does not scale with K)\n"
    "  collectives  NCCL all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, one process per GPU\n"
    "  info         device, software and conditions only\n"
    "options:\n"
    "  --out FILE            samples JSON to write (required except for info)\n"
    "  --device N            CUDA device (single-GPU benches; default 0)\n"
    "  --quick               short sweeps (smoke test)\n"
    "  --threshold F         refuse samples whose spread exceeds F (default 0.10)\n"
    "  --latency-bound-us F  items faster than this use (p90-p10)/median (default 20)\n"
    "  --item-budget-ms F    timed samples per item take about this long (default 40)\n"
    "  --retries N           re-measure a refused item N times (default 1)\n"
    "  --gemm-dtypes LIST    comma list of bf16,fp16,tf32,fp32,fp8 (default all the GPU supports)\n"
    "  --fp8-split-accumulation   fp8 GEMMs with fast accumulation off (Transformer Engine's dgrad and wgrad)\n"
    "  --sustained-s S       the sustained bench keeps a bf16 (then an fp8) GEMM running this long (default 20;\n"
    "                        --quick: 3); --gemm-dtypes bf16 or fp8 runs one of the two\n"
    "collectives:\n"
    "  --nranks N            fork N processes on this host, one per GPU (default: all GPUs; or, when RANK and\n"
    "                        WORLD_SIZE are set by a launcher, run as that one rank)\n"
    "  --id-file PATH        with an external launcher: shared path for the ncclUniqueId (or GPUPLAN_NCCL_ID_FILE)\n"
    "  --min-bytes B --max-bytes B   size sweep (powers of two; default 1024 .. 4294967296)\n"
    "  --per-octave N        N sizes per doubling (default 1: the powers of two)\n"
    "  --size-offset F       shift the size grid by F of one step, 0 <= F < 1 (0.5: between the default sizes)\n"
    "  --ops LIST            comma list of all_reduce,all_gather,reduce_scatter,all_to_all,send_recv\n"
    "  --time-limit-s S      stop sweeping after S seconds (the rest is listed under \"skipped\"); the samples file\n"
    "                        is rewritten after every item, \"complete\": false until the sweep ends\n"
    "  --no-overlap          skip the overlap items (each collective beside a bf16 GEMM loop; on by default)\n"
    "  --overlap-bytes LIST  comma list of message sizes for the overlap items (default 33554432,268435456)\n"
    "  --overlap-gemm M,N,K  the GEMM beside the collective (default 8192,8192,4096)\n";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const auto e = s.find(sep, pos);
    std::string part = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    if (!part.empty()) out.push_back(part);
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return out;
}

struct Args {
  std::string command, out, id_file, gemm_dtypes, ops, overlap_bytes, overlap_gemm;
  bool fp8_split_accumulation = false;
  bool overlap = true;
  int device = 0, retries = 1, nranks = 0;
  bool quick = false;
  double threshold = 0.10, latency_bound_us = 20, item_budget_ms = 40;
  unsigned long long min_bytes = 1ULL << 10, max_bytes = 4ULL << 30;
  int per_octave = 1;
  double size_offset = 0;
  double time_limit_s = 0;
  double sustained_s = 20;
  gb::Json argv = gb::Json::array();
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.argv.push_back(argv[i]);
  if (argc < 2) throw std::invalid_argument("no command");
  a.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--out") a.out = val();
    else if (k == "--device") a.device = std::stoi(val());
    else if (k == "--quick") a.quick = true;
    else if (k == "--threshold") a.threshold = std::stod(val());
    else if (k == "--latency-bound-us") a.latency_bound_us = std::stod(val());
    else if (k == "--item-budget-ms") a.item_budget_ms = std::stod(val());
    else if (k == "--retries") a.retries = std::stoi(val());
    else if (k == "--gemm-dtypes") a.gemm_dtypes = val();
    else if (k == "--fp8-split-accumulation") a.fp8_split_accumulation = true;
    else if (k == "--nranks") a.nranks = std::stoi(val());
    else if (k == "--id-file") a.id_file = val();
    else if (k == "--min-bytes") a.min_bytes = std::stoull(val());
    else if (k == "--max-bytes") a.max_bytes = std::stoull(val());
    else if (k == "--per-octave") {
      a.per_octave = std::stoi(val());
      if (a.per_octave < 1 || a.per_octave > 64) throw std::invalid_argument("--per-octave must be 1..64");
    }
    else if (k == "--size-offset") {
      a.size_offset = std::stod(val());
      if (!(a.size_offset >= 0 && a.size_offset < 1)) throw std::invalid_argument("--size-offset must be in [0, 1)");
    }
    else if (k == "--ops") a.ops = val();
    else if (k == "--time-limit-s") a.time_limit_s = std::stod(val());
    else if (k == "--no-overlap") a.overlap = false;
    else if (k == "--sustained-s") {
      a.sustained_s = std::stod(val());
      if (!(a.sustained_s > 0)) throw std::invalid_argument("--sustained-s must be positive");
    }
    else if (k == "--overlap-bytes") a.overlap_bytes = val();
    else if (k == "--overlap-gemm") a.overlap_gemm = val();
    else if (k == "-h" || k == "--help") a.command = "help";
    else throw std::invalid_argument("unknown option " + k);
  }
  return a;
}

int run_single(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string started = gb::utc_now();
  gb::Json doc = gb::Json::object();
  doc["schema"] = 1;
  doc["kind"] = "gpuplan-calibration-samples";
  doc["generator"] = gb::Json::object();
  GB_CUDA(cudaSetDevice(a.device));
  cudaDeviceProp prop{};
  GB_CUDA(cudaGetDeviceProperties(&prop, a.device));
  gb::Nvml& nvml = gb::Nvml::get();
  const auto ndev = nvml.by_uuid(gb::format_uuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes)));
  doc["device"] = gb::device_json(a.device, prop);
  doc["software"] = gb::software_json();
  doc["conditions"]["start"] = nvml.snapshot(ndev);
  std::size_t free_b = 0, total_b = 0;
  GB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  doc["conditions"]["start"]["device_memory_free_bytes"] = static_cast<unsigned long long>(free_b);

  gb::Context ctx;
  ctx.device = a.device;
  ctx.prop = prop;
  ctx.rule.threshold = a.threshold;
  ctx.rule.latency_bound_s = a.latency_bound_us * 1e-6;
  ctx.item_budget_s = a.item_budget_ms * 1e-3;
  ctx.retries = a.retries;
  ctx.quick = a.quick;
  ctx.sustained_s = a.quick ? 3.0 : a.sustained_s;
  ctx.gemm_dtypes = split(a.gemm_dtypes, ',');
  ctx.fp8_split_accumulation = a.fp8_split_accumulation;
  ctx.doc = &doc;
  GB_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));

  gb::Json settings = gb::Json::object();
  settings["threshold"] = ctx.rule.threshold;
  settings["latency_bound_s"] = ctx.rule.latency_bound_s;
  settings["min_samples"] = static_cast<long>(ctx.rule.min_samples);
  settings["item_budget_s"] = ctx.item_budget_s;
  settings["min_sample_s"] = ctx.min_sample_s;
  settings["graph_below_s"] = ctx.graph_below_s;
  settings["max_samples"] = ctx.max_samples;
  settings["retries"] = ctx.retries;
  settings["quick"] = ctx.quick;
  settings["spread_rule"] =
      "per-operation time of each sample = (events around `batch` back-to-back operations)/batch; an item is "
      "refused when (max-min)/median > threshold, or (p90-p10)/median > threshold for items whose median is under "
      "latency_bound_s; a refused item is re-measured `retries` times, then recorded under rejected; operations "
      "faster than graph_below_s are captured into a CUDA graph (timing: cuda_graph) so that the host's launch rate "
      "does not set their time";
  doc["settings"] = std::move(settings);
  doc["gemm"] = gb::Json::array();
  doc["hbm"] = gb::Json::array();
  doc["launch"] = gb::Json::object();
  doc["attention"] = gb::Json::array();
  doc["collectives"] = gb::Json::array();
  doc["rejected"] = gb::Json::array();

  std::vector<std::string> benches;
  if (a.command == "suite") benches = {"launch", "hbm", "gemm", "attention", "sustained"};
  else benches = {a.command};
  int errors = 0;
  for (const auto& b : benches) {
    const auto tb = std::chrono::steady_clock::now();
    std::fprintf(stderr, "== %s on GPU %d (%s) %s\n", b.c_str(), a.device, prop.name, gb::utc_now().c_str());
    try {
      if (b == "gemm") gb::run_gemm(ctx);
      else if (b == "attention") gb::run_attention(ctx);
      else if (b == "hbm") gb::run_hbm(ctx);
      else if (b == "launch") gb::run_launch(ctx);
      else if (b == "sustained") gb::run_sustained(ctx);
      else if (b == "accumulate") gb::run_accumulate(ctx);
      else if (b == "depth") gb::run_gemm_depth(ctx);
    } catch (const std::exception& e) {
      ++errors;
      ctx.reject(b, "*", std::string("bench aborted: ") + e.what());
      cudaGetLastError();
    }
    gb::Json snap = nvml.snapshot(ndev);
    snap["after"] = b;
    snap["bench_wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - tb).count();
    doc["conditions"]["checkpoints"].push_back(std::move(snap));
  }
  doc["conditions"]["end"] = nvml.snapshot(ndev);
  doc["definitions"] =
      "times in seconds per operation; gemm: Y[m,n] = X[m,k] . W[n,k]^T (m tokens, k in-features, n out-features), "
      "cuBLASLt TN, fp32 accumulation (fp8: e4m3 inputs, scale pointers = 1, bf16 output, fast accumulation), "
      "tflops = 2mnk/median_s/1e12; attention: per-head QK^T and PV GEMMs (cuBLASLt strided-batched, bf16), no "
      "softmax, no flash kernel; hbm: bytes = bytes read + bytes written by one operation, gbps = bytes/median_s/1e9 "
      "(1e9 bytes per GB)";
  gb::Json& g = doc["generator"];
  g["program"] = "gpuplan-bench";
  g["command"] = a.command;
  g["argv"] = a.argv;
  g["host"] = gb::hostname();
  g["started_utc"] = started;
  g["finished_utc"] = gb::utc_now();
  g["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gb::write_file_atomic(a.out, doc.dump(1) + "\n");
  std::fprintf(stderr, "wrote %s: %zu gemm, %zu attention, %zu hbm samples, launch %s, %zu rejected (%.1f s)\n",
               a.out.c_str(), doc.find("gemm")->size(), doc.find("attention")->size(), doc.find("hbm")->size(),
               doc.find("launch")->size() ? "yes" : "no", doc.find("rejected")->size(),
               g.find("wall_s")->as_double());
  return errors ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuplan-bench: %s\n%s", e.what(), kUsage);
    return 64;
  }
  try {
    if (a.command == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.command == "info") {
      GB_CUDA(cudaSetDevice(a.device));
      cudaDeviceProp prop{};
      GB_CUDA(cudaGetDeviceProperties(&prop, a.device));
      gb::Json doc = gb::Json::object();
      doc["device"] = gb::device_json(a.device, prop);
      doc["software"] = gb::software_json();
      doc["conditions"] = gb::Nvml::get().snapshot(
          gb::Nvml::get().by_uuid(gb::format_uuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes))));
      std::printf("%s\n", doc.dump(1).c_str());
      return 0;
    }
    if (a.out.empty()) throw std::invalid_argument("--out FILE is required");
    if (a.command == "collectives") {
#ifdef GPUPLAN_BENCH_HAVE_NCCL
      gb::CollOptions o;
      o.out = a.out;
      o.nranks = a.nranks;
      o.min_bytes = a.min_bytes;
      o.max_bytes = a.max_bytes;
      o.per_octave = a.per_octave;
      o.size_offset = a.size_offset;
      o.id_file = a.id_file;
      o.rule.threshold = a.threshold;
      o.rule.latency_bound_s = a.latency_bound_us * 1e-6;
      o.item_budget_s = a.item_budget_ms * 1e-3;
      o.retries = a.retries;
      o.time_limit_s = a.time_limit_s;
      o.argv = a.argv;
      o.started_utc = gb::utc_now();
      if (!a.ops.empty()) {
        o.ops.clear();
        for (const auto& name : split(a.ops, ',')) {
          const int op = gb::coll_op_from_name(name);
          if (op < 0) throw std::invalid_argument("unknown collective " + name);
          o.ops.push_back(op);
        }
      }
      o.overlap = a.overlap;
      if (!a.overlap_bytes.empty()) {
        o.overlap_bytes.clear();
        for (const auto& b : split(a.overlap_bytes, ',')) o.overlap_bytes.push_back(std::stoull(b));
      }
      if (!a.overlap_gemm.empty()) {
        const auto mnk = split(a.overlap_gemm, ',');
        if (mnk.size() != 3) throw std::invalid_argument("--overlap-gemm needs M,N,K");
        for (int i = 0; i < 3; ++i) {
          o.overlap_gemm[i] = std::stoll(mnk[static_cast<std::size_t>(i)]);
          if (o.overlap_gemm[i] <= 0) throw std::invalid_argument("--overlap-gemm: sizes must be positive");
        }
      }
      if (a.quick) {
        o.max_bytes = std::min<std::uint64_t>(o.max_bytes, 64ULL << 20);
        o.overlap_bytes = {32ULL << 20};
        o.overlap_window_s = 0.03;
      }
      return gb::run_collectives(o);
#else
      throw std::runtime_error("this gpuplan-bench was built without NCCL (nccl.h / libnccl not found at configure)");
#endif
    }
    if (a.command == "suite" || a.command == "gemm" || a.command == "attention" || a.command == "hbm" ||
        a.command == "launch" || a.command == "sustained" || a.command == "accumulate" ||
        a.command == "depth")
      return run_single(a);
    throw std::invalid_argument("unknown command " + a.command);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "gpuplan-bench: %s\n%s", e.what(), kUsage);
    return 64;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuplan-bench: error: %s\n", e.what());
    return 1;
  }
}
