// Issue #27 d2/d5 in the GUI: the serving page's "Iteration timeline" view (the serving job's model::serving_timeline
// of the operating point, decode and prefill, on the step timeline's chart) and its "Compression" view (the serving
// job's model::compression_study of `gpuplan compress`'s default choices: table, bars per metric, the accuracy note).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <QComboBox>
#include <QLabel>
#include <QTableWidget>

#include "compress_chart.hpp"
#include "compress_view.hpp"
#include "serving_job.hpp"
#include "serving_timeline_view.hpp"
#include "support.hpp"
#include "timeline_chart.hpp"

using namespace gpuplan;

namespace {
gui::ServingResult llama8b_h100() {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::ServingRequest req;
  req.model = "llama-3.1-8b";
  req.gpu = "h100-sxm5-80gb";
  req.tp = 1;
  req.prompt_tokens = 1024;
  req.output_tokens = 256;
  req.batch = 32;
  req.capacity = false;
  return gui::evaluate_serving(*data, req);
}
}  // namespace

TEST_CASE("serving views: the iteration timeline shows the job's decode and prefill passes") {
  const auto r = llama8b_h100();
  REQUIRE(r.valid);
  REQUIRE(r.decode_timeline.ok);
  REQUIRE(r.prefill_timeline.ok);
  // Decode of 32 sequences is far shorter than a 1024-token prefill on one H100.
  CHECK(r.decode_timeline.end.raw() < r.prefill_timeline.end.raw());
  gui::ServingTimelineView view;
  view.resize(1200, 600);
  view.show();
  view.setResult(r);
  CHECK(view.chart()->timeline().spans.size() == r.decode_timeline.spans.size());
  CHECK(view.summary()->text().contains("decode step of 32 sequences"));
  view.passCombo()->setCurrentIndex(1);
  CHECK(view.chart()->timeline().spans.size() == r.prefill_timeline.spans.size());
  CHECK(view.chart()->timeline().end.raw() == r.prefill_timeline.end.raw());
  CHECK(view.summary()->text().contains("prefill of one 1024-token prompt"));
}

TEST_CASE("serving views: the compression view lists every default choice with the accuracy note") {
  const auto r = llama8b_h100();
  REQUIRE(r.valid);
  REQUIRE(r.compression.has_value());
  const auto& st = *r.compression;
  // The baseline and the eight default choices of `gpuplan compress` (Llama 3.1 8B has 32 layers: drop-layers=8).
  REQUIRE(st.rows.size() == 9);
  gui::CompressView view;
  view.resize(1200, 700);
  view.show();
  view.setResult(r);
  CHECK(view.table()->rowCount() == 9);
  CHECK(view.table()->item(0, 0)->text() == QString::fromStdString(st.rows[0].label));
  CHECK(view.note()->text().count("Accuracy is out of scope") == 1);  // said once (it was printed twice)
  // Bars: decode tokens/s per choice; on an H100 W8A8 fp8 decodes faster than the bf16 baseline, NVFP4 is refused
  // (no fp4 tensor cores) and gets no bar.
  const auto& vals = view.chart()->values();
  REQUIRE(vals.size() == 9);
  CHECK(vals[0] == gptest::approx(st.rows[0].decode_tokens_per_s));
  for (std::size_t i = 0; i < st.rows.size(); ++i) {
    if (st.rows[i].label == "w8a8-fp8") CHECK(vals[i] > vals[0]);
    if (st.rows[i].label == "nvfp4") {
      CHECK_FALSE(st.rows[i].refused.empty());
      CHECK(vals[i] == 0.0);
    }
  }
  // Switching the metric to weights: W4A16 stores the layers in 4 bits (+ group scales) while the embedding and LM head
  // (1.05 B of Llama 3.1 8B's 8.03 B parameters) stay 16-bit: well under half of the baseline.
  view.metricCombo()->setCurrentIndex(gui::charts::CompressChart::kWeights);
  double w4 = 0, base = view.chart()->values()[0];
  for (std::size_t i = 0; i < st.rows.size(); ++i)
    if (st.rows[i].label == "w4a16") w4 = view.chart()->values()[i];
  CHECK(w4 > 0);
  CHECK(w4 < 0.45 * base);
}
