#include "gpuplan/app/gemm_shapes.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/model/efficiency.hpp"

namespace gpuplan::app {

namespace {
constexpr std::int64_t kMaxDim = 1'000'000'000;
constexpr std::size_t kMaxPoints = 100'000;

bool to_int(const std::string& s, std::int64_t& v) {
  const char* e = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), e, v);
  return ec == std::errc() && p == e;
}
}  // namespace

std::vector<std::int64_t> parse_gemm_dim(const std::string& text, std::string& error) {
  std::vector<std::int64_t> out;
  const auto dots = text.find("..");
  std::int64_t a = 0, b = 0, step = 1;
  bool ok = false;
  if (dots == std::string::npos) {
    ok = to_int(text, a);
    b = a;
  } else {
    const std::string rest = text.substr(dots + 2);
    const auto colon = rest.find(':');
    ok = to_int(text.substr(0, dots), a) && to_int(rest.substr(0, colon), b) &&
         (colon == std::string::npos || to_int(rest.substr(colon + 1), step));
  }
  if (!ok || a < 1 || b > kMaxDim || a > b || step < 1) {
    error = fmt::format("'{}' is not a dimension: a value or a range A..B[:STEP] from 1 to 1e9 with A ≤ B", text);
    return {};
  }
  if ((b - a) / step + 1 > std::int64_t(kMaxPoints)) {
    error = fmt::format("'{}' has more than {} values", text, kMaxPoints);
    return {};
  }
  for (std::int64_t v = a; v <= b; v += step) out.push_back(v);
  return out;
}

std::optional<std::array<std::vector<std::int64_t>, 3>> parse_gemm_shapes(const std::string& text, std::string& error) {
  std::vector<std::string> parts;
  std::string cur;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == 'x' || text[i] == 'X') {
      parts.push_back(cur);
      cur.clear();
    } else if (text.compare(i, 2, "×") == 0) {  // U+00D7, two bytes in UTF-8
      parts.push_back(cur);
      cur.clear();
      ++i;
    } else {
      cur += text[i];
    }
  }
  parts.push_back(cur);
  if (parts.size() != 3) {
    error = fmt::format("'{}' is not M×N×K (e.g. 8192x8192x8192, or a range in a dimension: 4096x4096x4088..4104)", text);
    return std::nullopt;
  }
  std::array<std::vector<std::int64_t>, 3> dims;
  std::size_t points = 1;
  for (std::size_t i = 0; i < 3; ++i) {
    dims[i] = parse_gemm_dim(parts[i], error);
    if (dims[i].empty()) return std::nullopt;
    points *= dims[i].size();
    if (points > kMaxPoints) {
      error = fmt::format("'{}' is more than {} shapes", text, kMaxPoints);
      return std::nullopt;
    }
  }
  return dims;
}

std::vector<GemmShapePoint> gemm_shape_sweep(const model::Device& d, hw::Precision p,
                                             const std::array<std::vector<std::int64_t>, 3>& dims) {
  std::vector<GemmShapePoint> out;
  out.reserve(dims[0].size() * dims[1].size() * dims[2].size());
  for (std::int64_t m : dims[0])
    for (std::int64_t n : dims[1])
      for (std::int64_t k : dims[2]) {
        GemmShapePoint pt{m, n, k, model::gemm_cost(fmt::format("{}x{}x{}", m, n, k), {m, n, k, 1}, p, d), 0.0};
        pt.tflops = pt.cost.time.raw() > 0 ? pt.cost.flops.raw() / pt.cost.time.raw() / 1e12 : 0.0;
        out.push_back(std::move(pt));
      }
  return out;
}

std::array<std::int64_t, 3> gemm_padded_shape(std::int64_t m, std::int64_t n, std::int64_t k, hw::Precision p) {
  const double e = hw::bytes_per_element(p);
  const auto step = std::int64_t(std::max(1.0, std::ceil(model::kGemmAlignmentBytes / e)));
  auto up = [step](std::int64_t v) { return (v + step - 1) / step * step; };
  return {m, up(n), up(k)};
}

GemmPadding gemm_padding(const model::Device& d, hw::Precision p, std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmPadding r;
  const auto pad = gemm_padded_shape(m, n, k, p);
  r.as_given = gemm_shape_sweep(d, p, {std::vector<std::int64_t>{m}, {n}, {k}}).front();
  r.padded = gemm_shape_sweep(d, p, {std::vector<std::int64_t>{pad[0]}, {pad[1]}, {pad[2]}}).front();
  model::gemm_cost(r.as_given.cost.name, {m, n, k, 1}, p, d, &r.derivation);
  r.speedup = r.padded.cost.time.raw() > 0 ? r.as_given.cost.time.raw() / r.padded.cost.time.raw() : 1.0;
  r.extra_flops = r.as_given.cost.flops.raw() > 0 ? r.padded.cost.flops.raw() / r.as_given.cost.flops.raw() - 1.0 : 0.0;
  return r;
}

}  // namespace gpuplan::app
