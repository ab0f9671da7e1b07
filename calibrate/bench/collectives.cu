// NCCL collectives: all_reduce, all_gather, reduce_scatter, all_to_all (grouped send/recv), send_recv (ring
// neighbours), one process per GPU. Single host: `gpuplan-bench collectives` forks one process per GPU and passes
// the ncclUniqueId through a file in a fresh temporary directory. Any launcher (mpirun, torchrun, srun): each
// process is started with RANK/WORLD_SIZE/LOCAL_RANK (or OMPI_COMM_WORLD_*) set and --id-file (or
// GPUPLAN_NCCL_ID_FILE) naming a path on a file system all ranks share; rank 0 writes the id there.
// NVLink multicast (NVLS) is switched off: NCCL_NVLS_ENABLE=0 is forced unless GPUPLAN_BENCH_ALLOW_NVLS=1.
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "busy_gemm.hpp"
#include "collectives.hpp"
#include "device_info.cuh"

namespace gpuplan::bench {

#define GB_NCCL(call)                                                                                          \
  do {                                                                                                         \
    ncclResult_t r_ = (call);                                                                                  \
    if (r_ != ncclSuccess)                                                                                     \
      ::gpuplan::bench::fail(__FILE__, __LINE__, std::string(#call) + ": " + ncclGetErrorString(r_));          \
  } while (0)

namespace {

__global__ void k_fill_rank(float* p, std::size_t n, int rank) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
}

__global__ void k_check_coll(const float* recv, std::size_t n, int op, int rank, int nranks, std::uint64_t call_count,
                             unsigned long long* bad) {
  unsigned long long local = 0;
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += !(static_cast<double>(recv[j]) == coll_expected(op, j, rank, nranks, call_count));
  if (local) atomicAdd(bad, local);
}

void force_no_nvls() {
  const char* allow = std::getenv("GPUPLAN_BENCH_ALLOW_NVLS");
  if (!(allow && std::string(allow) == "1")) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
    setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  }
}

int env_int(const char* a, const char* b, int dflt) {
  for (const char* n : {a, b}) {
    if (!n) continue;
    if (const char* v = std::getenv(n)) return std::atoi(v);
  }
  return dflt;
}

void write_id(const std::string& path, const ncclUniqueId& id) {
  write_file_atomic(path, std::string(reinterpret_cast<const char*>(&id), sizeof id));
}

ncclUniqueId read_id(const std::string& path, double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) == sizeof(ncclUniqueId) && !ec) {
      std::ifstream f(path, std::ios::binary);
      ncclUniqueId id{};
      if (f.read(reinterpret_cast<char*>(&id), sizeof id)) return id;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s)
      throw std::runtime_error("timed out waiting for the NCCL id file " + path);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct Comm {
  ncclComm_t c = nullptr;
  int rank = 0, n = 1;
  cudaStream_t s = nullptr;
};

void enqueue(const Comm& cm, int op, const float* send, float* recv, std::uint64_t call_count) {
  switch (op) {
    case kAllReduce: GB_NCCL(ncclAllReduce(send, recv, call_count, ncclFloat, ncclSum, cm.c, cm.s)); break;
    case kAllGather: GB_NCCL(ncclAllGather(send, recv, call_count, ncclFloat, cm.c, cm.s)); break;
    case kReduceScatter: GB_NCCL(ncclReduceScatter(send, recv, call_count, ncclFloat, ncclSum, cm.c, cm.s)); break;
    case kAllToAll:
      GB_NCCL(ncclGroupStart());
      for (int p = 0; p < cm.n; ++p) {
        GB_NCCL(ncclSend(send + static_cast<std::size_t>(p) * call_count, call_count, ncclFloat, p, cm.c, cm.s));
        GB_NCCL(ncclRecv(recv + static_cast<std::size_t>(p) * call_count, call_count, ncclFloat, p, cm.c, cm.s));
      }
      GB_NCCL(ncclGroupEnd());
      break;
    case kSendRecv: {
      const int next = (cm.rank + 1) % cm.n, prev = (cm.rank + cm.n - 1) % cm.n;
      GB_NCCL(ncclGroupStart());
      GB_NCCL(ncclSend(send, call_count, ncclFloat, next, cm.c, cm.s));
      GB_NCCL(ncclRecv(recv, call_count, ncclFloat, prev, cm.c, cm.s));
      GB_NCCL(ncclGroupEnd());
      break;
    }
    default: throw std::runtime_error("unknown collective");
  }
}

// Element-wise max (or sum) of a host vector of doubles across ranks, through NCCL on a scratch buffer.
std::vector<double> reduce_across(const Comm& cm, std::vector<double> v, ncclRedOp_t rop, double* scratch) {
  GB_CUDA(cudaMemcpyAsync(scratch, v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice, cm.s));
  GB_NCCL(ncclAllReduce(scratch, scratch, v.size(), ncclDouble, rop, cm.c, cm.s));
  GB_CUDA(cudaMemcpyAsync(v.data(), scratch, v.size() * sizeof(double), cudaMemcpyDeviceToHost, cm.s));
  GB_CUDA(cudaStreamSynchronize(cm.s));
  return v;
}

std::uint64_t recv_elems(int op, std::uint64_t call_count, int n) {
  switch (op) {
    case kAllGather:
    case kAllToAll: return call_count * static_cast<std::uint64_t>(n);
    default: return call_count;  // all_reduce, reduce_scatter (recv = count), send_recv
  }
}

// Overlap of a collective with compute (what data-parallel gradient reduction and FSDP gathers do during backward):
// a bf16 GEMM loop on a compute stream and a collective loop on the NCCL stream, each timed alone and then while
// the other runs for longer than it, so that the timed loop is overlapped from its first to its last operation.
//   gemm_loss    = 1 - t_gemm_alone / t_gemm_overlap: the fraction of GEMM throughput a running collective takes;
//   coll_stretch = t_coll_overlap / t_coll_alone - 1: how much longer the collective takes beside the GEMMs.
// Both are medians over repetitions of the per-repetition maximum over ranks; each repetition is refused or
// accepted by the spread rule like every other sample.
struct OverlapResult {
  bool ok = false;
  std::string reason;
  Stats gemm_alone, gemm_over, coll_alone, coll_over;  // seconds per operation
  int gemms = 0, colls = 0;
  double cover_gemm = 0, cover_coll = 0;  // the covering loops' length / the timed loop's (predicted, alone)
};

OverlapResult measure_overlap(const Comm& cm, int op, const float* send, float* recv, std::uint64_t call_count,
                              const BusyGemm& gemm, cudaStream_t gs, double window_s, int reps, double* scratch,
                              const SpreadRule& rule) {
  OverlapResult r;
  cudaEvent_t g0, g1, c0, c1;
  GB_CUDA(cudaEventCreate(&g0));
  GB_CUDA(cudaEventCreate(&g1));
  GB_CUDA(cudaEventCreate(&c0));
  GB_CUDA(cudaEventCreate(&c1));
  auto ms = [](cudaEvent_t a, cudaEvent_t b) {
    float v = 0;
    GB_CUDA(cudaEventElapsedTime(&v, a, b));
    return static_cast<double>(v) * 1e-3;
  };
  auto gemms = [&](int n) {
    for (int i = 0; i < n; ++i) gemm.launch(gs);
  };
  auto colls = [&](int n) {
    for (int i = 0; i < n; ++i) enqueue(cm, op, send, recv, call_count);
  };
  auto barrier = [&] { reduce_across(cm, {0.0}, ncclSum, scratch); };
  // Estimates of one operation each, to size the loops.
  gemms(3);
  GB_CUDA(cudaStreamSynchronize(gs));
  GB_CUDA(cudaEventRecord(g0, gs));
  gemms(5);
  GB_CUDA(cudaEventRecord(g1, gs));
  GB_CUDA(cudaEventSynchronize(g1));
  const double tg = reduce_across(cm, {ms(g0, g1) / 5}, ncclMax, scratch)[0];
  colls(2);
  GB_CUDA(cudaEventRecord(c0, cm.s));
  colls(5);
  GB_CUDA(cudaEventRecord(c1, cm.s));
  GB_CUDA(cudaEventSynchronize(c1));
  const double tc = reduce_across(cm, {ms(c0, c1) / 5}, ncclMax, scratch)[0];
  r.gemms = std::max(8, static_cast<int>(std::ceil(window_s / tg)));
  r.colls = std::max(8, static_cast<int>(std::ceil(window_s / tc)));
  // The covering loop is sized to run `cover` times as long as the timed one (plus a lead-in of two operations).
  // A collective beside a GEMM can slow down several-fold (its blocks wait for SMs the GEMM holds), so when the
  // covering loop ends first on any rank the repetition is redone with a 3x longer one (up to 3 times). Every rank
  // takes the same decisions (the inputs are maxima over ranks), so every rank issues the same collectives.
  std::vector<double> ga, go, ca, co;
  double cover_g = 1.5, cover_c = 1.5;
  bool covered = true;
  for (int k = 0; k < reps && covered; ++k) {
    // alone
    barrier();
    GB_CUDA(cudaEventRecord(g0, gs));
    gemms(r.gemms);
    GB_CUDA(cudaEventRecord(g1, gs));
    GB_CUDA(cudaEventSynchronize(g1));
    ga.push_back(ms(g0, g1) / r.gemms);
    barrier();
    GB_CUDA(cudaEventRecord(c0, cm.s));
    colls(r.colls);
    GB_CUDA(cudaEventRecord(c1, cm.s));
    GB_CUDA(cudaEventSynchronize(c1));
    ca.push_back(ms(c0, c1) / r.colls);
    // GEMMs beside a longer collective loop. The host interleaves the two (NCCL blocks the host once enough
    // collectives are queued, so enqueueing all collectives first would start the GEMMs late): before GEMM i it has
    // issued a lead-in of two collectives plus (i+1)/(n+1) of the rest.
    for (int attempt = 0;; ++attempt) {
      const int colls_cover = static_cast<int>(std::ceil(cover_g * r.gemms * tg / tc)) + 2;
      barrier();
      GB_CUDA(cudaEventRecord(c0, cm.s));
      int issued = 0;
      auto colls_upto = [&](int n) {
        colls(n - issued);
        issued = std::max(issued, n);
      };
      colls_upto(2);
      GB_CUDA(cudaEventRecord(g0, gs));
      for (int i = 0; i < r.gemms; ++i) {
        colls_upto(2 + static_cast<int>(static_cast<long long>(i + 1) * (colls_cover - 2) / (r.gemms + 1)));
        gemm.launch(gs);
      }
      GB_CUDA(cudaEventRecord(g1, gs));
      colls_upto(colls_cover);
      GB_CUDA(cudaEventRecord(c1, cm.s));
      GB_CUDA(cudaEventSynchronize(g1));
      GB_CUDA(cudaEventSynchronize(c1));
      const bool ok = reduce_across(cm, {ms(g1, c1) > 0 && ms(c0, g0) >= 0 ? 0.0 : 1.0}, ncclMax, scratch)[0] == 0.0;
      if (ok) {
        go.push_back(ms(g0, g1) / r.gemms);
        break;
      }
      if (attempt == 3) {
        covered = false;
        break;
      }
      cover_g *= 3;
    }
    if (!covered) break;
    // Collectives beside a longer GEMM loop, interleaved the same way.
    for (int attempt = 0;; ++attempt) {
      const int gemms_cover = static_cast<int>(std::ceil(cover_c * r.colls * tc / tg)) + 2;
      barrier();
      GB_CUDA(cudaEventRecord(g0, gs));
      int issued = 0;
      auto gemms_upto = [&](int n) {
        gemms(n - issued);
        issued = std::max(issued, n);
      };
      gemms_upto(2);
      GB_CUDA(cudaEventRecord(c0, cm.s));
      for (int i = 0; i < r.colls; ++i) {
        gemms_upto(2 + static_cast<int>(static_cast<long long>(i + 1) * (gemms_cover - 2) / (r.colls + 1)));
        enqueue(cm, op, send, recv, call_count);
      }
      GB_CUDA(cudaEventRecord(c1, cm.s));
      gemms_upto(gemms_cover);
      GB_CUDA(cudaEventRecord(g1, gs));
      GB_CUDA(cudaEventSynchronize(c1));
      GB_CUDA(cudaEventSynchronize(g1));
      const bool ok = reduce_across(cm, {ms(c1, g1) > 0 && ms(g0, c0) >= 0 ? 0.0 : 1.0}, ncclMax, scratch)[0] == 0.0;
      if (ok) {
        co.push_back(ms(c0, c1) / r.colls);
        break;
      }
      if (attempt == 3) {
        covered = false;
        break;
      }
      cover_c *= 3;
    }
  }
  r.cover_gemm = cover_g;
  r.cover_coll = cover_c;
  ga = reduce_across(cm, ga, ncclMax, scratch);
  go = reduce_across(cm, go, ncclMax, scratch);
  ca = reduce_across(cm, ca, ncclMax, scratch);
  co = reduce_across(cm, co, ncclMax, scratch);
  r.gemm_alone = compute_stats(ga);
  r.gemm_over = compute_stats(go);
  r.coll_alone = compute_stats(ca);
  r.coll_over = compute_stats(co);
  r.ok = true;
  if (!covered) {
    r.ok = false;
    r.reason = "the covering loop ended before the timed one even at 81x its length (the overlap was partial)";
  }
  // Two streams sharing a GPU vary more from repetition to repetition than one (which GEMM phase a collective
  // meets): overlap items are refused above a 20% spread (or the run's threshold when that is larger).
  SpreadRule orule = rule;
  orule.threshold = std::max(rule.threshold, 0.20);
  for (const auto* st : {&r.gemm_alone, &r.gemm_over, &r.coll_alone, &r.coll_over}) {
    const Verdict v = judge(*st, orule, st->median);
    if (!v.ok && r.ok) {
      r.ok = false;
      r.reason = v.reason;
    }
  }
  GB_CUDA(cudaEventDestroy(g0));
  GB_CUDA(cudaEventDestroy(g1));
  GB_CUDA(cudaEventDestroy(c0));
  GB_CUDA(cudaEventDestroy(c1));
  return r;
}

int rank_main(const CollOptions& o, int rank, int nranks, int local_rank, const std::string& id_file) {
  force_no_nvls();
  const bool lead = rank == 0;
  const auto t_start = std::chrono::steady_clock::now();
  GB_CUDA(cudaSetDevice(local_rank));
  cudaDeviceProp prop{};
  GB_CUDA(cudaGetDeviceProperties(&prop, local_rank));
  Nvml& nvml = Nvml::get();
  const std::string uuid = format_uuid(reinterpret_cast<const unsigned char*>(prop.uuid.bytes));

  Json doc = Json::object();
  doc["schema"] = 1;
  doc["kind"] = "gpuplan-calibration-samples";
  if (lead) {
    doc["generator"] = Json::object();
    doc["device"] = device_json(local_rank, prop);
    doc["software"] = software_json();
    doc["conditions"]["start"] = nvml.snapshot(nvml.by_uuid(uuid));
  }

  ncclUniqueId id{};
  if (lead) {
    GB_NCCL(ncclGetUniqueId(&id));
    if (nranks > 1) write_id(id_file, id);
  } else {
    id = read_id(id_file, o.id_timeout_s);
  }
  Comm cm;
  cm.rank = rank;
  cm.n = nranks;
  GB_CUDA(cudaStreamCreateWithFlags(&cm.s, cudaStreamNonBlocking));
  const auto t_init = std::chrono::steady_clock::now();
  GB_NCCL(ncclCommInitRank(&cm.c, nranks, id, rank));
  const double nccl_init_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_init).count();
  if (lead && nranks > 1) std::filesystem::remove(id_file);  // every rank has joined, so every rank has read it
  if (lead) std::fprintf(stderr, "[collectives] %d ranks joined; ncclCommInitRank took %.2f s\n", nranks, nccl_init_s);

  // Who is who: host, GPU name, UUID, PCI bus id of every rank.
  constexpr std::size_t kInfo = 256;
  char* dinfo = nullptr;
  GB_CUDA(cudaMalloc(&dinfo, kInfo * static_cast<std::size_t>(nranks + 1)));
  {
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, local_rank);
    std::string mine = hostname() + "|" + prop.name + "|" + uuid + "|" + bus + "|" + std::to_string(local_rank);
    mine.resize(kInfo - 1, '\0');
    GB_CUDA(cudaMemcpy(dinfo + kInfo * static_cast<std::size_t>(nranks), mine.data(), kInfo, cudaMemcpyHostToDevice));
    GB_NCCL(ncclAllGather(dinfo + kInfo * static_cast<std::size_t>(nranks), dinfo, kInfo, ncclChar, cm.c, cm.s));
    std::vector<char> all(kInfo * static_cast<std::size_t>(nranks));
    GB_CUDA(cudaMemcpyAsync(all.data(), dinfo, all.size(), cudaMemcpyDeviceToHost, cm.s));
    GB_CUDA(cudaStreamSynchronize(cm.s));
    if (lead) {
      Json ranks = Json::array();
      for (int r = 0; r < nranks; ++r) {
        std::string line(all.data() + kInfo * static_cast<std::size_t>(r));
        std::vector<std::string> f;
        std::size_t pos = 0;
        for (;;) {
          const auto bar = line.find('|', pos);
          f.push_back(line.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos));
          if (bar == std::string::npos) break;
          pos = bar + 1;
        }
        f.resize(5);
        Json e = Json::object();
        e["rank"] = r;
        e["host"] = f[0];
        e["name"] = f[1];
        e["uuid"] = f[2];
        e["pci_bus_id"] = f[3];
        e["local_rank"] = std::atoi(f[4].c_str());
        ranks.push_back(std::move(e));
      }
      doc["ranks"] = std::move(ranks);
    }
  }
  GB_CUDA(cudaFree(dinfo));

  // Buffer size: the largest power of two up to o.max_bytes that fits twice on every rank (agreed across ranks).
  std::size_t free_b = 0, total_b = 0;
  GB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  double* scratch = nullptr;
  GB_CUDA(cudaMalloc(&scratch, 4096 * sizeof(double)));
  std::uint64_t cap = o.max_bytes;
  while (cap > o.min_bytes && 2 * cap + (2ULL << 30) > free_b) cap /= 2;
  cap = static_cast<std::uint64_t>(reduce_across(cm, {static_cast<double>(cap)}, ncclMin, scratch)[0]);
  float *send = nullptr, *recv = nullptr;
  GB_CUDA(cudaMalloc(&send, cap));
  GB_CUDA(cudaMalloc(&recv, cap));
  unsigned long long* bad = nullptr;
  GB_CUDA(cudaMalloc(&bad, sizeof *bad));
  k_fill_rank<<<1024, 256, 0, cm.s>>>(send, cap / 4, rank);
  GB_LAUNCH_CHECK();
  GB_CUDA(cudaStreamSynchronize(cm.s));

  cudaEvent_t e0, e1;
  GB_CUDA(cudaEventCreate(&e0));
  GB_CUDA(cudaEventCreate(&e1));
  Json samples = Json::array(), rejected = Json::array(), skipped = Json::array(), overlap = Json::array();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
  // Rank 0 rewrites the samples file (atomically) after every item, marked "complete": false until the sweep ends,
  // so that a run stopped by a time limit still leaves what it measured.
  auto write_doc = [&](bool complete) {
    Json d = doc;
    d["complete"] = complete;
    d["conditions"]["end"] = nvml.snapshot(nvml.by_uuid(uuid));
    Json others = Json::array();  // the other GPUs of this host in the run
    if (const Json* ranks = d.find("ranks"))
      for (std::size_t r = 1; r < ranks->size(); ++r) {
        const Json& e = ranks->at(r);
        if (e.find("host")->as_string() != hostname()) continue;
        Json snap = nvml.snapshot(nvml.by_uuid(e.find("uuid")->as_string()));
        snap["rank"] = static_cast<long>(r);
        others.push_back(std::move(snap));
      }
    d["conditions"]["end_other_ranks"] = std::move(others);
    Json settings = Json::object();
    settings["threshold"] = o.rule.threshold;
    settings["latency_bound_s"] = o.rule.latency_bound_s;
    settings["min_samples"] = static_cast<long>(o.rule.min_samples);
    settings["item_budget_s"] = o.item_budget_s;
    settings["min_sample_s"] = o.min_sample_s;
    settings["retries"] = o.retries;
    settings["time_limit_s"] = o.time_limit_s;
    settings["per_octave"] = o.per_octave;
    settings["size_offset"] = o.size_offset;
    settings["spread_rule"] =
        "per-sample time = max over ranks; refused when (max-min)/median > threshold, or (p90-p10)/median for items "
        "whose median is under latency_bound_s";
    settings["launch_mode"] = o.launch_mode;
    settings["nccl_init_s"] = nccl_init_s;
    for (const char* ev : {"NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL", "NCCL_NET", "NCCL_IB_HCA",
                           "NCCL_SOCKET_IFNAME", "NCCL_CUMEM_ENABLE", "NCCL_DEBUG"})
      if (const char* val = std::getenv(ev)) settings["env"][ev] = val;
    d["settings"] = std::move(settings);
    d["gemm"] = Json::array();
    d["hbm"] = Json::array();
    d["launch"] = Json::object();
    d["attention"] = Json::array();
    d["collectives"] = samples;
    d["overlap"] = overlap;
    d["rejected"] = rejected;
    if (skipped.size()) d["skipped"] = skipped;
    d["definitions"] =
        "bytes: nccl-tests size (all_reduce/send_recv buffer; all_gather output of all ranks; reduce_scatter input; "
        "all_to_all buffer of one rank); algbw_gbps = bytes/median_s/1e9; busbw_gbps = algbw x (2(n-1)/n "
        "all_reduce, (n-1)/n all_gather/reduce_scatter/all_to_all, 1 send_recv); send_recv: every rank sends to "
        "rank+1 and receives from rank-1 at once; data fp32, out-of-place, results checked for every size. "
        "overlap: the collective on its NCCL stream beside a bf16 GEMM loop on another stream; gemm_alone_s / "
        "gemm_overlap_s per GEMM, coll_alone_s / coll_overlap_s per collective (medians of the per-repetition "
        "maximum over ranks); gemm_loss = 1 - gemm_alone_s/gemm_overlap_s (GEMM throughput taken by the "
        "collective), coll_stretch = coll_overlap_s/coll_alone_s - 1";
    Json& g = d["generator"];
    g["program"] = "gpuplan-bench";
    g["command"] = "collectives";
    g["argv"] = o.argv;
    g["host"] = hostname();
    g["started_utc"] = o.started_utc;
    g["finished_utc"] = utc_now();
    g["wall_s"] = elapsed();
    write_file_atomic(o.out, d.dump(1) + "\n");
  };
  if (lead) write_doc(false);
  SpreadRule rule = o.rule;
  // Sizes are multiples of 4 bytes × ranks × 16, so every op's per-rank count is a whole number of 64-byte lines.
  const std::vector<std::uint64_t> sizes =
      geometric_range(o.min_bytes, cap, o.per_octave, o.size_offset, 64ULL * static_cast<std::uint64_t>(nranks));
  for (int op : o.ops) {
    if (op == kSendRecv && nranks < 2) continue;
    for (std::uint64_t size : sizes) {
      const CollCounts cc = coll_counts(coll_op_name(op), size, nranks, 4);
      if (cc.call_count == 0) continue;
      const std::string label = strprintf("%s %s x%d", coll_op_name(op), human_bytes(cc.bytes).c_str(), nranks);
      if (o.time_limit_s > 0) {  // rank 0's clock decides, so that every rank skips the same items
        const double over = reduce_across(cm, {lead && elapsed() > o.time_limit_s ? 1.0 : 0.0}, ncclMax, scratch)[0];
        if (over > 0) {
          if (lead) skipped.push_back(label);
          continue;
        }
      }
      const std::uint64_t nrecv = recv_elems(op, cc.call_count, nranks);
      GB_CUDA(cudaMemsetAsync(recv, 0xff, nrecv * 4, cm.s));  // NaN: unwritten elements fail the check
      auto timed = [&](int b) {
        GB_CUDA(cudaEventRecord(e0, cm.s));
        for (int i = 0; i < b; ++i) enqueue(cm, op, send, recv, cc.call_count);
        GB_CUDA(cudaEventRecord(e1, cm.s));
        GB_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        GB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        return static_cast<double>(ms) * 1e-3 / b;
      };
      // Every decision below depends on times the ranks agree on (maxima over ranks): a rank that issued another
      // number of collectives than its peers would wait for them for ever.
      double est = timed(1);
      for (int w = 0; w < 2; ++w) est = std::min(est, timed(1));
      est = reduce_across(cm, {est}, ncclMax, scratch)[0];
      est = timed(est < 1e-4 ? 10 : 2);
      est = reduce_across(cm, {est}, ncclMax, scratch)[0];
      const Plan plan = plan_samples(est, o.min_sample_s, o.item_budget_s, static_cast<int>(rule.min_samples),
                                     o.max_samples, 1000);
      std::vector<double> per_op;
      Stats st;
      Verdict v;
      int attempts = 0;
      for (attempts = 1; attempts <= 1 + o.retries; ++attempts) {
        per_op.clear();
        for (int k = 0; k < plan.samples; ++k) per_op.push_back(timed(plan.batch));
        per_op = reduce_across(cm, per_op, ncclMax, scratch);  // the slowest rank's time, sample by sample
        st = compute_stats(per_op);
        v = judge(st, rule, st.median);
        if (v.ok) break;
      }
      attempts = std::min(attempts, 1 + o.retries);
      // Check this rank's received data, then agree on the total of wrong elements.
      GB_CUDA(cudaMemsetAsync(bad, 0, sizeof *bad, cm.s));
      k_check_coll<<<1024, 256, 0, cm.s>>>(recv, nrecv, op, rank, nranks, cc.call_count, bad);
      GB_LAUNCH_CHECK();
      unsigned long long nbad = 0;
      GB_CUDA(cudaMemcpyAsync(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost, cm.s));
      GB_CUDA(cudaStreamSynchronize(cm.s));
      const double total_bad = reduce_across(cm, {static_cast<double>(nbad)}, ncclSum, scratch)[0];
      if (!lead) continue;
      if (total_bad > 0) {
        Json r = Json::object();
        r["bench"] = "collectives";
        r["item"] = label;
        r["reason"] = strprintf("result check failed: %.0f received elements wrong across ranks", total_bad);
        rejected.push_back(std::move(r));
        std::fprintf(stderr, "  REJECTED %s: result check failed\n", label.c_str());
        write_doc(false);
        continue;
      }
      if (!v.ok) {
        Json r = Json::object();
        r["bench"] = "collectives";
        r["item"] = label;
        r["reason"] = v.reason;
        r["samples_s"] = samples_json(per_op);
        rejected.push_back(std::move(r));
        std::fprintf(stderr, "  REJECTED %s: %s\n", label.c_str(), v.reason.c_str());
        write_doc(false);
        continue;
      }
      Json j = Json::object();
      j["op"] = coll_op_name(op);
      j["dtype"] = "fp32";
      j["ranks"] = nranks;
      j["bytes"] = static_cast<unsigned long long>(cc.bytes);
      j["count"] = static_cast<unsigned long long>(cc.call_count);
      j["median_s"] = st.median;
      j["min_s"] = st.min;
      j["max_s"] = st.max;
      j["p10_s"] = st.p10;
      j["p90_s"] = st.p90;
      j["spread"] = v.spread;
      j["spread_kind"] = spread_kind_name(v.kind);
      j["samples"] = static_cast<long>(st.n);
      j["batch"] = plan.batch;
      j["attempts"] = attempts;
      const double algbw = static_cast<double>(cc.bytes) / st.median / 1e9;
      j["algbw_gbps"] = algbw;
      j["busbw_gbps"] = algbw * busbw_factor(coll_op_name(op), nranks);
      j["check"] = "ok";
      std::fprintf(stderr,
                   "[collectives t=%6.1fs] %-28s %10.2f us  algbw %8.2f GB/s  busbw %8.2f GB/s  spread %.1f%%\n",
                   elapsed(), label.c_str(), st.median * 1e6, algbw, algbw * busbw_factor(coll_op_name(op), nranks),
                   100.0 * v.spread);
      samples.push_back(std::move(j));
      write_doc(false);
    }
  }
  if (o.overlap && nranks >= 2) {
    cudaStream_t gs = nullptr;
    GB_CUDA(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
    std::unique_ptr<BusyGemm> gemm;
    std::string gemm_error;
    try {
      gemm = std::make_unique<BusyGemm>(o.overlap_gemm[0], o.overlap_gemm[1], o.overlap_gemm[2], gs);
      GB_CUDA(cudaStreamSynchronize(gs));
    } catch (const std::exception& ex) {
      gemm_error = ex.what();
    }
    // Every rank must agree before any collective is enqueued.
    const bool all_ok = reduce_across(cm, {gemm ? 0.0 : 1.0}, ncclMax, scratch)[0] == 0.0;
    if (!all_ok) {
      if (lead) {
        Json r = Json::object();
        r["bench"] = "overlap";
        r["item"] = "overlap GEMM";
        r["reason"] = gemm_error.empty() ? std::string("the GEMM failed on another rank") : gemm_error;
        rejected.push_back(std::move(r));
        std::fprintf(stderr, "  REJECTED overlap: %s\n", gemm_error.c_str());
      }
    } else {
      for (int op : o.overlap_ops)
        for (std::uint64_t want : o.overlap_bytes) {
          const std::uint64_t size = std::min<std::uint64_t>(want, cap);
          const CollCounts cc = coll_counts(coll_op_name(op), size, nranks, 4);
          if (cc.call_count == 0) continue;
          const std::string label =
              strprintf("overlap %s %s x%d", coll_op_name(op), human_bytes(cc.bytes).c_str(), nranks);
          if (o.time_limit_s > 0) {
            const double over = reduce_across(cm, {lead && elapsed() > o.time_limit_s ? 1.0 : 0.0}, ncclMax, scratch)[0];
            if (over > 0) {
              if (lead) skipped.push_back(label);
              continue;
            }
          }
          const OverlapResult res = measure_overlap(cm, op, send, recv, cc.call_count, *gemm, gs, o.overlap_window_s,
                                                    o.overlap_reps, scratch, o.rule);
          if (!lead) continue;
          if (!res.ok) {
            Json r = Json::object();
            r["bench"] = "overlap";
            r["item"] = label;
            r["reason"] = res.reason;
            rejected.push_back(std::move(r));
            std::fprintf(stderr, "  REJECTED %s: %s\n", label.c_str(), res.reason.c_str());
            write_doc(false);
            continue;
          }
          Json j = Json::object();
          j["op"] = coll_op_name(op);
          j["dtype"] = "fp32";
          j["ranks"] = nranks;
          j["bytes"] = static_cast<unsigned long long>(cc.bytes);
          j["gemm"] = Json::object();
          j["gemm"]["dtype"] = "bf16";
          j["gemm"]["m"] = static_cast<long long>(o.overlap_gemm[0]);
          j["gemm"]["n"] = static_cast<long long>(o.overlap_gemm[1]);
          j["gemm"]["k"] = static_cast<long long>(o.overlap_gemm[2]);
          j["gemm"]["algo"] = gemm->algo();
          j["gemm"]["check_max_err"] = gemm->check_max_err();
          j["gemms_timed"] = res.gemms;
          j["colls_timed"] = res.colls;
          j["reps"] = o.overlap_reps;
          j["cover_factor_gemm"] = res.cover_gemm;
          j["cover_factor_coll"] = res.cover_coll;
          j["gemm_alone_s"] = res.gemm_alone.median;
          j["gemm_overlap_s"] = res.gemm_over.median;
          j["coll_alone_s"] = res.coll_alone.median;
          j["coll_overlap_s"] = res.coll_over.median;
          j["gemm_loss"] = 1.0 - res.gemm_alone.median / res.gemm_over.median;
          j["coll_stretch"] = res.coll_over.median / res.coll_alone.median - 1.0;
          j["gemm_tflops_alone"] = gemm->flops() / res.gemm_alone.median / 1e12;
          j["gemm_tflops_overlap"] = gemm->flops() / res.gemm_over.median / 1e12;
          std::fprintf(stderr,
                       "[collectives t=%6.1fs] %-34s GEMM %7.1f -> %7.1f TFLOP/s (loss %5.1f%%)  coll %9.1f -> %9.1f us "
                       "(stretch %+5.1f%%)\n",
                       elapsed(), label.c_str(), gemm->flops() / res.gemm_alone.median / 1e12,
                       gemm->flops() / res.gemm_over.median / 1e12,
                       100.0 * (1.0 - res.gemm_alone.median / res.gemm_over.median), res.coll_alone.median * 1e6,
                       res.coll_over.median * 1e6, 100.0 * (res.coll_over.median / res.coll_alone.median - 1.0));
          overlap.push_back(std::move(j));
          write_doc(false);
        }
    }
    gemm.reset();
    GB_CUDA(cudaStreamDestroy(gs));
  }
  GB_CUDA(cudaEventDestroy(e0));
  GB_CUDA(cudaEventDestroy(e1));
  GB_CUDA(cudaFree(send));
  GB_CUDA(cudaFree(recv));
  GB_CUDA(cudaFree(bad));
  GB_CUDA(cudaFree(scratch));
  GB_NCCL(ncclCommDestroy(cm.c));
  GB_CUDA(cudaStreamDestroy(cm.s));
  if (!lead) return 0;
  write_doc(true);
  std::fprintf(stderr, "[collectives] wrote %s (%zu samples, %zu rejected)\n", o.out.c_str(), samples.size(),
               rejected.size());
  return 0;
}

int count_devices_in_child() {
  // CUDA must not be initialised in the parent before fork: ask in a child.
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    if (write(fds[1], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  int n = -1;
  if (read(fds[0], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) n = -1;
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  return n;
}

}  // namespace

int run_collectives(CollOptions o) {
  force_no_nvls();  // before any fork, so every rank inherits it
  const int env_rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", -1);
  const int env_world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", -1);
  if (o.nranks <= 0 && env_rank >= 0 && env_world > 0) {
    // Started by an external launcher: this process is one rank.
    std::string id_file = o.id_file;
    if (id_file.empty())
      if (const char* f = std::getenv("GPUPLAN_NCCL_ID_FILE")) id_file = f;
    if (id_file.empty() && env_world > 1)
      throw std::runtime_error("collectives: started as rank " + std::to_string(env_rank) +
                               " of " + std::to_string(env_world) +
                               " but no --id-file / GPUPLAN_NCCL_ID_FILE (a path all ranks can read)");
    int ndev = 0;
    GB_CUDA(cudaGetDeviceCount(&ndev));
    const int local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", ndev > 0 ? env_rank % ndev : 0);
    o.launch_mode = "external launcher (RANK/WORLD_SIZE from the environment)";
    return rank_main(o, env_rank, env_world, local, id_file);
  }
  int n = o.nranks;
  if (n <= 0) n = count_devices_in_child();
  if (n <= 0) throw std::runtime_error("collectives: no CUDA device found");
  o.launch_mode = "single host: forked " + std::to_string(n) + " processes, one per GPU";
  char tmpl[] = "/tmp/gpuplan-nccl-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string id_file = std::string(tmpl) + "/nccl-id";
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int rc = 1;
      try {
        rc = rank_main(o, r, n, r, id_file);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gpuplan-bench collectives rank %d: %s\n", r, e.what());
        rc = 1;
      }
      std::fflush(stderr);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  // Wait; on the first failure stop the other ranks (they would wait in NCCL forever).
  int worst = 0;
  std::size_t left = kids.size();
  while (left > 0) {
    int st = 0;
    const pid_t pid = wait(&st);
    if (pid < 0) break;
    --left;
    const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (rc != 0 && worst == 0) {
      worst = rc;
      for (pid_t k : kids)
        if (k != pid) kill(k, SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return worst;
}

}  // namespace gpuplan::bench
