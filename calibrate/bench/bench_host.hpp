// Host-only logic of gpuplan-bench: statistics and the spread/rejection rule, sample planning, the sweep
// definitions, NCCL bus-bandwidth factors, a small ordered JSON writer and atomic file output.
// No CUDA here: this header is compiled by nvcc (inside the benches) and by the host C++ compiler (doctest, CI).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include <unistd.h>

namespace gpuplan::bench {

// ---------------------------------------------------------------------------------------------------------------
// JSON: an ordered value (objects keep insertion order, so the files read in the order they were written).
// ---------------------------------------------------------------------------------------------------------------
class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() : v_(nullptr) {}
  Json(std::nullptr_t) : v_(nullptr) {}
  Json(bool b) : v_(b) {}
  Json(int i) : v_(static_cast<std::int64_t>(i)) {}
  Json(long i) : v_(static_cast<std::int64_t>(i)) {}
  Json(long long i) : v_(static_cast<std::int64_t>(i)) {}
  Json(unsigned i) : v_(static_cast<std::int64_t>(i)) {}
  Json(unsigned long i) : v_(static_cast<std::int64_t>(i)) {}
  Json(unsigned long long i) : v_(static_cast<std::int64_t>(i)) {}
  Json(double d) : v_(d) {}
  Json(float f) : v_(static_cast<double>(f)) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(std::string_view s) : v_(std::string(s)) {}
  Json(Array a) : v_(std::move(a)) {}

  static Json object() {
    Json j;
    j.v_ = Object{};
    return j;
  }
  static Json array() {
    Json j;
    j.v_ = Array{};
    return j;
  }

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v_); }
  bool is_object() const { return std::holds_alternative<Object>(v_); }
  bool is_array() const { return std::holds_alternative<Array>(v_); }

  // Object access: inserts a null member when the key is new (like nlohmann::json).
  Json& operator[](std::string_view key) {
    if (is_null()) v_ = Object{};
    auto& o = std::get<Object>(v_);
    for (auto& [k, val] : o)
      if (k == key) return val;
    o.emplace_back(std::string(key), Json());
    return o.back().second;
  }
  const Json* find(std::string_view key) const {
    if (!is_object()) return nullptr;
    for (const auto& [k, val] : std::get<Object>(v_))
      if (k == key) return &val;
    return nullptr;
  }
  void push_back(Json j) {
    if (is_null()) v_ = Array{};
    std::get<Array>(v_).push_back(std::move(j));
  }
  std::size_t size() const {
    if (is_array()) return std::get<Array>(v_).size();
    if (is_object()) return std::get<Object>(v_).size();
    return 0;
  }
  const Json& at(std::size_t i) const { return std::get<Array>(v_).at(i); }
  double as_double() const {
    if (auto* d = std::get_if<double>(&v_)) return *d;
    if (auto* i = std::get_if<std::int64_t>(&v_)) return static_cast<double>(*i);
    throw std::runtime_error("json: not a number");
  }
  const std::string& as_string() const { return std::get<std::string>(v_); }

  std::string dump(int indent = -1) const {
    std::string out;
    write(out, indent, 0);
    return out;
  }

  static void escape(std::string& out, std::string_view s) {
    out += '"';
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out += buf;
          } else {
            out += ch;
          }
      }
    }
    out += '"';
  }

  // Shortest round-trip form; NaN and infinities (not JSON) become null.
  static void number(std::string& out, double d) {
    if (!std::isfinite(d)) {
      out += "null";
      return;
    }
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, d);
    out.append(buf, res.ptr);
  }

 private:
  void write(std::string& out, int indent, int level) const {
    auto newline = [&](int lvl) {
      if (indent < 0) return;
      out += '\n';
      out.append(static_cast<std::size_t>(indent * lvl), ' ');
    };
    if (std::holds_alternative<std::nullptr_t>(v_)) {
      out += "null";
    } else if (auto* b = std::get_if<bool>(&v_)) {
      out += *b ? "true" : "false";
    } else if (auto* i = std::get_if<std::int64_t>(&v_)) {
      out += std::to_string(*i);
    } else if (auto* d = std::get_if<double>(&v_)) {
      number(out, *d);
    } else if (auto* s = std::get_if<std::string>(&v_)) {
      escape(out, *s);
    } else if (auto* a = std::get_if<Array>(&v_)) {
      if (a->empty()) {
        out += "[]";
        return;
      }
      // Arrays of scalars stay on one line; arrays of objects get one element per line.
      const bool flat = std::none_of(a->begin(), a->end(), [](const Json& e) { return e.is_object() || e.is_array(); });
      out += '[';
      for (std::size_t k = 0; k < a->size(); ++k) {
        if (k) out += flat && indent >= 0 ? ", " : ",";
        if (!flat) newline(level + 1);
        (*a)[k].write(out, flat ? -1 : indent, level + 1);
      }
      if (!flat) newline(level);
      out += ']';
    } else if (auto* o = std::get_if<Object>(&v_)) {
      if (o->empty()) {
        out += "{}";
        return;
      }
      // Objects whose members are all scalars (one sample) stay on one line: a samples file reads as a table.
      const bool flat = std::none_of(o->begin(), o->end(), [](const auto& kv) {
        return kv.second.is_object() || (kv.second.is_array() && kv.second.size() > 0);
      });
      out += '{';
      for (std::size_t k = 0; k < o->size(); ++k) {
        if (k) out += flat && indent >= 0 ? ", " : ",";
        if (!flat) newline(level + 1);
        escape(out, (*o)[k].first);
        out += indent >= 0 ? ": " : ":";
        (*o)[k].second.write(out, flat ? -1 : indent, level + 1);
      }
      if (!flat) newline(level);
      out += '}';
    }
  }

  std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, Array, Object> v_;
};

// Writes `text` to `path` atomically: a temporary file beside it, flushed and closed, then renamed over `path`.
inline void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  namespace fs = std::filesystem;
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
    f << text;
    f.flush();
    if (!f) throw std::runtime_error("write failed: " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics and the rejection rule.
// ---------------------------------------------------------------------------------------------------------------
struct Stats {
  std::size_t n = 0;
  double median = 0, min = 0, max = 0, mean = 0, p10 = 0, p90 = 0;
};

// Percentile with linear interpolation between order statistics (q in [0,1]); `sorted` must be sorted.
inline double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

inline Stats compute_stats(std::vector<double> xs) {
  Stats s;
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  s.n = xs.size();
  s.min = xs.front();
  s.max = xs.back();
  s.median = percentile_sorted(xs, 0.5);
  s.p10 = percentile_sorted(xs, 0.1);
  s.p90 = percentile_sorted(xs, 0.9);
  double sum = 0;
  for (double x : xs) sum += x;
  s.mean = sum / static_cast<double>(xs.size());
  return s;
}

enum class SpreadKind { MaxMin, P90P10 };

inline const char* spread_kind_name(SpreadKind k) { return k == SpreadKind::MaxMin ? "max-min" : "p90-p10"; }

struct Verdict {
  bool ok = true;
  double spread = 0;  // (max-min)/median or (p90-p10)/median
  SpreadKind kind = SpreadKind::MaxMin;
  std::string reason;  // empty when ok
};

struct SpreadRule {
  double threshold = 0.10;           // refuse a sample whose spread exceeds this fraction of the median
  double latency_bound_s = 20e-6;    // items whose median (per operation) is below this use the robust spread
  std::size_t min_samples = 5;
};

// The refusal rule: (max-min)/median must not exceed the threshold; tiny latency-bound items (median per operation
// under rule.latency_bound_s) use the robust (p90-p10)/median instead, since one late launch is not throttling.
inline Verdict judge(const Stats& s, const SpreadRule& rule, double per_op_median_s) {
  Verdict v;
  v.kind = per_op_median_s < rule.latency_bound_s ? SpreadKind::P90P10 : SpreadKind::MaxMin;
  if (s.n < rule.min_samples) {
    v.ok = false;
    v.reason = "only " + std::to_string(s.n) + " samples (need " + std::to_string(rule.min_samples) + ")";
    return v;
  }
  if (!(s.median > 0) || !std::isfinite(s.median)) {
    v.ok = false;
    v.spread = 0;
    v.reason = "median time is not positive";
    return v;
  }
  v.spread = v.kind == SpreadKind::MaxMin ? (s.max - s.min) / s.median : (s.p90 - s.p10) / s.median;
  if (v.spread > rule.threshold) {
    v.ok = false;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "spread %s/median = %.1f%% > %.1f%% (min %.4g s, median %.4g s, max %.4g s over %zu samples): "
                  "timing unstable (thermal/power throttling or a noisy neighbour); sample refused",
                  spread_kind_name(v.kind), 100.0 * v.spread, 100.0 * rule.threshold, s.min, s.median, s.max, s.n);
    v.reason = buf;
  }
  return v;
}

// How to time one item: `batch` operations back to back per timed sample (so a sample is long enough for event
// resolution), and `samples` samples (enough for a median, within the item's time budget).
struct Plan {
  int batch = 1;
  int samples = 5;
};

inline Plan plan_samples(double est_op_s, double min_sample_s, double item_budget_s, int min_samples, int max_samples,
                         int max_batch) {
  Plan p;
  if (!(est_op_s > 0) || !std::isfinite(est_op_s)) est_op_s = 1e-6;
  const double b = std::ceil(min_sample_s / est_op_s);
  p.batch = static_cast<int>(std::clamp(b, 1.0, static_cast<double>(max_batch)));
  const double n = std::floor(item_budget_s / (est_op_s * p.batch));
  p.samples = static_cast<int>(std::clamp(n, static_cast<double>(min_samples), static_cast<double>(max_samples)));
  return p;
}

// ---------------------------------------------------------------------------------------------------------------
// Sweeps.
// ---------------------------------------------------------------------------------------------------------------
struct LlmShape {
  const char* name;   // layer kind: qkv, o, up, down, lm_head (suffix _70b for the 70B-like layers)
  const char* model;  // "llama3-8b-like" or "llama3-70b-like"
  std::int64_t k;     // input features
  std::int64_t n;     // output features
};

inline const std::vector<LlmShape>& llm_shapes() {
  static const std::vector<LlmShape> shapes = {
      {"qkv", "llama3-8b-like", 4096, 6144},      {"o", "llama3-8b-like", 4096, 4096},
      {"up", "llama3-8b-like", 4096, 28672},      {"down", "llama3-8b-like", 14336, 4096},
      {"lm_head", "llama3-8b-like", 4096, 128256}, {"qkv_70b", "llama3-70b-like", 8192, 10240},
      {"o_70b", "llama3-70b-like", 8192, 8192},   {"up_70b", "llama3-70b-like", 8192, 57344},
      {"down_70b", "llama3-70b-like", 28672, 8192},
  };
  return shapes;
}

inline const std::vector<std::int64_t>& llm_tokens() {
  static const std::vector<std::int64_t> t = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192, 16384};
  return t;
}

inline std::vector<std::int64_t> square_sizes() { return {256, 512, 1024, 2048, 4096, 8192, 16384}; }

// Powers of two from lo to hi inclusive (lo, hi powers of two).
inline std::vector<std::uint64_t> pow2_range(std::uint64_t lo, std::uint64_t hi) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t x = lo; x <= hi && x != 0; x *= 2) v.push_back(x);
  return v;
}

// Message sizes lo·2^((k + offset)/per_octave) for k = 0, 1, ... up to hi: `per_octave` sizes per doubling, shifted by
// `offset` of one step (0 ≤ offset < 1; offset 0.5 lands halfway, in log size, between the sizes of offset 0). Sizes
// other than the base grid's powers of two are rounded down to a multiple of `align` bytes (at least `align`);
// repeats after rounding are dropped. per_octave 1 and offset 0 give pow2_range.
inline std::vector<std::uint64_t> geometric_range(std::uint64_t lo, std::uint64_t hi, int per_octave, double offset,
                                                  std::uint64_t align) {
  std::vector<std::uint64_t> v;
  if (lo == 0 || per_octave < 1 || !(offset >= 0 && offset < 1) || align == 0) return v;
  for (int k = 0;; ++k) {
    const double x = static_cast<double>(lo) * std::exp2((k + offset) / per_octave);
    if (x > static_cast<double>(hi) * (1 + 1e-12)) break;
    std::uint64_t b = static_cast<std::uint64_t>(std::llround(x));
    if (offset == 0 && k % per_octave == 0) b = lo << (k / per_octave);  // the base grid's powers of two, exact
    else b = std::max(align, b / align * align);
    if (b > hi) break;
    if (v.empty() || b > v.back()) v.push_back(b);
  }
  return v;
}

inline double gemm_flops(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch = 1) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
}

// Number of rotating input sets so that their total is at least `factor` x L2 (at least 1, at most max_sets).
inline int rotation_sets(std::uint64_t set_bytes, std::uint64_t l2_bytes, double factor = 3.0, int max_sets = 4096) {
  if (set_bytes == 0) return 1;
  const double need = std::ceil(factor * static_cast<double>(l2_bytes) / static_cast<double>(set_bytes));
  return static_cast<int>(std::clamp(need, 1.0, static_cast<double>(max_sets)));
}

// ---------------------------------------------------------------------------------------------------------------
// Collectives: nccl-tests definitions. `bytes` is nccl-tests' size: the all-reduce/send-recv buffer, the all-gather
// output (all ranks' parts), the reduce-scatter input, the all-to-all buffer of one rank.
// algbw = bytes / time; busbw = algbw * factor.
// ---------------------------------------------------------------------------------------------------------------
inline double busbw_factor(std::string_view op, int nranks) {
  const double n = nranks;
  if (nranks <= 1) return op == "send_recv" ? 1.0 : 0.0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return (n - 1) / n;
  if (op == "send_recv" || op == "broadcast" || op == "reduce") return 1.0;
  throw std::invalid_argument("busbw_factor: unknown op " + std::string(op));
}

// Elements per rank-buffer for a collective of `bytes` (nccl-tests size) over `nranks` with `elem` bytes each:
// rounds down so that the count divides evenly among ranks where the op needs it. Returns the per-call element
// count of the nccl call (all_gather: send count; reduce_scatter: recv count; all_to_all: per-peer count).
struct CollCounts {
  std::uint64_t call_count = 0;  // count passed to NCCL (per peer for all_to_all)
  std::uint64_t bytes = 0;       // actual nccl-tests size after rounding
};

inline CollCounts coll_counts(std::string_view op, std::uint64_t bytes, int nranks, std::uint64_t elem) {
  CollCounts c;
  const std::uint64_t total = bytes / elem;
  const auto n = static_cast<std::uint64_t>(std::max(nranks, 1));
  if (op == "all_reduce" || op == "send_recv") {
    c.call_count = total;
    c.bytes = total * elem;
  } else if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") {
    c.call_count = total / n;
    c.bytes = c.call_count * n * elem;
  } else {
    throw std::invalid_argument("coll_counts: unknown op " + std::string(op));
  }
  return c;
}

// Collective ops by index (device code switches on these; names are the JSON "op" values).
enum CollOp : int { kAllReduce = 0, kAllGather = 1, kReduceScatter = 2, kAllToAll = 3, kSendRecv = 4, kCollOps = 5 };
inline const char* coll_op_name(int op) {
  static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
  return op >= 0 && op < kCollOps ? names[op] : "?";
}
inline int coll_op_from_name(std::string_view name) {
  for (int i = 0; i < kCollOps; ++i)
    if (name == coll_op_name(i)) return i;
  return -1;
}

#if defined(__CUDACC__)
#define GPUPLAN_BENCH_HD __host__ __device__
#else
#define GPUPLAN_BENCH_HD
#endif

// Expected value of element j of rank r's receive buffer, when every rank s filled its send buffer with
// f(s, i) = (s + 1) * ((i % 7) + 1) (exact in float for up to 8 ranks and far more). `call_count` as above.
// Shared by the device check kernel and the host tests.
GPUPLAN_BENCH_HD inline double coll_expected(int op, std::uint64_t j, int r, int nranks, std::uint64_t call_count) {
  const auto n = static_cast<std::uint64_t>(nranks);
  const auto rr = static_cast<std::uint64_t>(r);
  const double ranksum = static_cast<double>(n * (n + 1) / 2);
  switch (op) {
    case kAllReduce: return static_cast<double>((j % 7) + 1) * ranksum;
    case kAllGather: return static_cast<double>((j / call_count + 1) * ((j % call_count) % 7 + 1));
    case kReduceScatter: return static_cast<double>(((rr * call_count + j) % 7) + 1) * ranksum;
    case kAllToAll: return static_cast<double>((j / call_count + 1) * ((rr * call_count + j % call_count) % 7 + 1));
    case kSendRecv: return static_cast<double>(((rr + n - 1) % n + 1) * (j % 7 + 1));
    default: return -1.0;
  }
}

// GEMM check tolerance: |got - ref| <= tol * sqrt(sum_k (a_ik b_kj)^2). A wrong layout or unwritten output gives
// an error of order 1 in these units; rounding of the output type and accumulation order give far less.
inline double gemm_tolerance(std::string_view dtype) {
  if (dtype == "fp32") return 1e-4;
  if (dtype == "tf32") return 2e-2;
  if (dtype == "fp16") return 2e-2;
  if (dtype == "bf16") return 5e-2;
  if (dtype == "fp8") return 1e-1;
  return 1e-1;
}

inline std::string human_bytes(std::uint64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double x = static_cast<double>(b);
  while (x >= 1024.0 && u < 4) {
    x /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, x == std::floor(x) ? "%.0f %s" : "%.2f %s", x, unit[u]);
  return buf;
}

// Formats a 16-byte CUDA UUID as NVML spells it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
inline std::string format_uuid(const unsigned char* b) {
  std::string s = "GPU-";
  char buf[4];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(b[i]));
    s += buf;
  }
  return s;
}

}  // namespace gpuplan::bench
