// The "GEMM shapes" tab (issue #27 d6): the course's Tensor-Core alignment what-if. Its numbers are
// app::gemm_padding / gemm_shape_sweep's (model::gemm_cost on the panel's GPU with its calibration profile), the same
// as `gpuplan roofline --gemm` with the sweep it shows.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <QComboBox>
#include <QLabel>
#include <QSpinBox>

#include "gemm_chart.hpp"
#include "gemm_page.hpp"
#include "gpuplan/app/hardware_setup.hpp"
#include "support.hpp"

using namespace gpuplan;

TEST_CASE("GEMM shapes page: 4096×4096×4097 bf16 on an H100 runs the element class, padded to 4104 it is ~5.7× faster") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::GemmPage page(data);
  page.resize(1400, 800);
  page.show();
  page.setGpu("h100-sxm5-80gb", true);
  REQUIRE(page.shapes().size() == 2);
  const auto& as = page.shapes()[0];
  const auto& pad = page.shapes()[1];
  CHECK(as.k == 4097);
  CHECK(pad.k == 4104);
  CHECK(pad.n == 4096);
  // Our H100 measurement (gemm_alignment.json, F.linear): 1025.3 µs at K = 4097 against 186.0 at K = 4104, 5.51×;
  // the model's element class (a = 0.176) gives (4097/4104)/0.176 = 5.67×, within the 10%.
  const double speedup = as.cost.time.raw() / pad.cost.time.raw();
  CHECK(speedup == gptest::approx(5.51).epsilon(0.10));
  CHECK(page.summary()->text().contains("faster"));
  CHECK(page.summary()->text().contains("0.176"));
  CHECK(page.summary()->text().contains("gpuplan roofline --gemm 4096x4096x4088..4104 --gpu h100-sxm5-80gb"));
  // The default sweep: K from 4088 to 4104, the odd K slowest, the multiples of 8 fastest.
  const auto& ts = page.chart()->times_us();
  const auto& xs = page.chart()->xs();
  REQUIRE(ts.size() == 17);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    CAPTURE(xs[i]);
    if (int(xs[i]) % 8 == 0) CHECK(ts[i] < 0.25 * ts[9]);  // xs[9] = 4097
    if (int(xs[i]) % 2 == 1) CHECK(ts[i] == gptest::approx(ts[9]).epsilon(0.01));
  }
  // Sweeping M shows the tile staircase: time never falls as M grows by more than the tile margin.
  page.axisCombo()->setCurrentIndex(0);
  page.dim(2)->setValue(4096);
  page.dim(1)->setValue(22016);
  CHECK(page.fromSpin()->value() == 1);
  REQUIRE(page.chart()->times_us().size() == 4096);
  CHECK(page.chart()->times_us().back() > page.chart()->times_us().front());
  // An aligned shape has nothing to pad.
  CHECK(page.summary()->text().contains("nothing to pad"));
}
