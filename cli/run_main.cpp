// The gpuplan command line: every subcommand registered, the flag guard, the parse and the exit code. main.cpp calls
// it; the hostile-input test calls it in a forked copy of itself for each of its ~2,000 flag cases (a fresh process of
// the sanitizer build costs ~0.45 s to start, a fork a few milliseconds).
#include <CLI/CLI.hpp>

#include "commands.hpp"

namespace gpuplan::cli {

int run_main(int argc, char** argv) {
  CLI::App app{"gpuplan: analytical performance model and capacity planner for LLMs on GPU clusters"};
  app.set_version_flag("--version", std::string("gpuplan ") + GPUPLAN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions g;
  app.add_option("--data-dir", g.data_dir, "data directory (default: $GPUPLAN_DATA_DIR, installed, or source tree)");
  int rc = kExitOk;
  register_hw(app, g, rc);
  register_model(app, g, rc);
  register_schema(app, g, rc);
  register_train(app, g, rc);
  register_validate(app, g, rc);
  register_roofline(app, g, rc);
  register_kv(app, g, rc);
  register_serve(app, g, rc);
  register_simulate(app, g, rc);
  register_autoscale(app, g, rc);
  register_calibrate(app, g, rc);
  register_bench(app, g, rc);
  register_report(app, g, rc);
  register_drill(app, g, rc);
  register_collective(app, g, rc);
  register_mfu(app, g, rc);
  register_pipeline(app, g, rc);
  register_compress(app, g, rc);
  guard_flag_values(app);
  try {
    refuse_empty_switch_values(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return finish_output(exit_for_parse_error(app, e));
  }
  return finish_output(rc);
}

}  // namespace gpuplan::cli
