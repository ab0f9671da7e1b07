#include <doctest/doctest.h>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/diagnostics.hpp"

using namespace gpuplan;

TEST_CASE("a diagnostic renders file, line, column, pointer and severity") {
  Diagnostic d{Severity::error, "gpus/x.json", "/memory/bandwidth_TBps", 3, 7, "value -1 is out of range"};
  CHECK(d.to_string() == "gpus/x.json:3:7: /memory/bandwidth_TBps: error: value -1 is out of range");
  Diagnostic n{Severity::note, "", "--gpu", 0, 0, "'h100' is h100-sxm5-80gb"};
  CHECK(n.to_string() == "--gpu: note: 'h100' is h100-sxm5-80gb");
}

TEST_CASE("Diagnostics collects every problem and counts errors only") {
  Diagnostics ds;
  ds.error("a.json", "/x", "bad");
  ds.warning("a.json", "/y", "odd");
  ds.error("b.json", "", "missing");
  CHECK(ds.error_count() == 2);
  CHECK(ds.has_errors());
  CHECK(ds.to_string() == "a.json: /x: error: bad\na.json: /y: warning: odd\nb.json: error: missing\n");
}

TEST_CASE("Result carries a value or the diagnostics explaining its absence") {
  Result<int> ok = 42;
  CHECK(ok.ok());
  CHECK(ok.value() == 42);
  Diagnostics ds;
  ds.error("f", "/p", "no");
  Result<int> bad = ds;
  CHECK_FALSE(bad.ok());
  CHECK(bad.diagnostics().error_count() == 1);
  Diagnostics warn;
  warn.warning("f", "/p", "assumed");
  Result<int> with_warning(7, warn);
  CHECK(with_warning.ok());
}

TEST_CASE("did-you-mean suggests a near key and nothing for an unrelated word") {
  const std::vector<std::string> keys{"bandwidth_TBps", "capacity_GB", "type"};
  CHECK(closest_match("bandwith_TBps", keys) == "bandwidth_TBps");
  CHECK(did_you_mean("capacity_gb", keys) == " (did you mean 'capacity_GB'?)");
  CHECK(did_you_mean("zzzzzzzz", keys).empty());
  CHECK(edit_distance("kitten", "sitting") == 3);
}

TEST_CASE("JSON pointer tokens escape ~ and /") {
  CHECK(json_pointer_token("a/b~c") == "a~1b~0c");
}

TEST_CASE("Derivation::find searches the tree depth-first") {
  Derivation root{"params", "Parameters", "", {}, "", {}, {}};
  root.children.push_back({"params.attention", "Attention", "", {}, "", {}, {}});
  REQUIRE(root.find("params.attention") != nullptr);
  CHECK(root.find("params.attention")->title == "Attention");
  CHECK(root.find("nope") == nullptr);
}
