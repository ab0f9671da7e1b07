// Static (request-level) batching in the request-level simulator (simulate.hpp, Batching::static_; issue #27 d4):
// the same requests, iteration costs (forward_cost through CostMemo) and tallies as vLLM's continuous scheduler in
// sim_engine.cpp, batched the way HF generate() and FasterTransformer serve: a batch is formed, padded, and run to
// its longest sequence's end before the next one starts.
#include <algorithm>
#include <deque>

#include "sim_engine.hpp"

namespace gpuplan::model::sim {

namespace {
/// KV blocks one padded sequence of `tokens` holds (no shared prefix: a static batch computes its prompts whole).
std::int64_t padded_blocks(std::int64_t tokens, std::int64_t block_size) { return (tokens + block_size - 1) / block_size; }
}  // namespace

double run_static(std::vector<Req>& rq, const EngineLimits& lim, std::int64_t batch, double timeout_s, CostMemo& cost,
                  SeriesSampler* series, Tally& t, SimResult& res, std::int64_t& rejected) {
  const std::size_t B = std::size_t(std::max<std::int64_t>(1, batch));
  const std::int64_t blocks = lim.total_blocks;
  auto refuses = [&](const Req& r) { return padded_blocks(r.input + r.output, lim.block_size) > blocks; };
  std::deque<std::size_t> waiting;
  std::size_t next = 0;
  auto admit = [&](double until) {
    for (; next < rq.size() && rq[next].arrival <= until; ++next) {
      if (refuses(rq[next])) ++rejected;
      else waiting.push_back(next);
    }
  };
  double now = rq.empty() ? 0.0 : rq.front().arrival;
  double slots = 0, padding = 0, batched = 0;
  std::vector<std::size_t> b;
  for (;;) {
    admit(now);
    if (waiting.empty()) {
      if (next >= rq.size()) break;
      now = rq[next].arrival;
      continue;
    }
    // The batch starts when B requests wait, or when the oldest has waited the timeout, whichever comes first.
    double start = rq[waiting.front()].arrival + timeout_s;
    if (waiting.size() >= B) {
      start = now;
    } else {
      std::size_t missing = B - waiting.size();
      for (std::size_t k = next; k < rq.size(); ++k) {
        if (refuses(rq[k])) continue;
        if (--missing == 0) {
          start = std::min(start, rq[k].arrival);
          break;
        }
      }
    }
    if (start > now) {
      now = start;  // admit what arrives until then and decide again
      continue;
    }

    // ---- form the batch: FCFS while the padded sequences' KV fits ----
    b.clear();
    std::int64_t max_in = 0, max_out = 0;
    while (!waiting.empty() && b.size() < B) {
      const Req& r = rq[waiting.front()];
      const std::int64_t in = std::max(max_in, r.input), out = std::max(max_out, r.output);
      if (std::int64_t(b.size() + 1) * padded_blocks(in + out, lim.block_size) > blocks) break;
      max_in = in;
      max_out = out;
      b.push_back(waiting.front());
      waiting.pop_front();
    }
    const double n = double(b.size());
    const double kv_used = n * double(padded_blocks(max_in + max_out, lim.block_size)) / double(blocks);
    ++res.batches;
    batched += n;
    auto tally_step = [&](double dt) {
      t.kv_area += kv_used * dt;
      t.kv_peak = std::max(t.kv_peak, kv_used);
      t.run_area += n * dt;
      t.busy_s += dt;
      ++t.iterations;
    };

    // ---- the prefill: every prompt padded to the longest ----
    IterationShape pre;
    pre.chunks = std::int64_t(b.size());
    pre.chunk_tokens = n * double(max_in);
    pre.chunk_work = n * double(max_in) * 0.5 * double(max_in);
    pre.emitting_chunks = pre.chunks;
    double dt = cost(pre);
    tally_step(dt);
    double end = now + dt;
    slots += n * double(max_in);
    for (std::size_t id : b) {
      Req& r = rq[id];
      t.queue.push_back(now - r.arrival);
      r.started = true;
      t.in_tokens += r.input;
      padding += double(max_in - r.input);
      r.computed = r.input;
      r.generated = 1;
      ++t.out_tokens;
      r.first = r.last = end;
      t.ttft.push_back(end - r.arrival);
    }
    auto finish = [&](Req& r) {
      t.e2e.push_back(r.last - r.arrival);
      if (r.output > 1) t.tpot.push_back((r.last - r.first) / double(r.output - 1));
      ++t.completed;
    };
    for (std::size_t id : b)
      if (rq[id].output == 1) finish(rq[id]);
    admit(end);
    if (series != nullptr) series->at(end, std::int64_t(b.size()), std::int64_t(waiting.size()), kv_used, t.out_tokens, res.series);

    // ---- decode steps until the longest output ends: step k holds max_in + k − 1 tokens per padded sequence ----
    for (std::int64_t k = 1; k < max_out; ++k) {
      IterationShape dec;
      dec.decodes = std::int64_t(b.size());
      dec.decode_context_sum = n * double(max_in + k - 1);
      dt = cost(dec);
      tally_step(dt);
      end += dt;
      std::int64_t emitting = 0;
      for (std::size_t id : b) {
        Req& r = rq[id];
        if (r.generated >= r.output) continue;  // done: its slot is padding until the batch ends
        ++emitting;
        ++r.generated;
        ++r.computed;
        ++t.out_tokens;
        r.last = end;
        if (r.generated == r.output) finish(r);
      }
      t.gaps.add(dt, emitting);
      slots += n;
      padding += n - double(emitting);
      admit(end);
      if (series != nullptr)
        series->at(end, std::int64_t(b.size()), std::int64_t(waiting.size()), kv_used, t.out_tokens, res.series);
    }
    now = end;
  }
  res.mean_batch = res.batches > 0 ? batched / double(res.batches) : 0.0;
  res.padding_fraction = slots > 0 ? padding / slots : 0.0;
  return now;
}

}  // namespace gpuplan::model::sim
