// gpuplan-gui: what-if exploration of LLM training and serving plans. Renders and adapts; the model computes.
#include <cstdio>

#include <QApplication>
#include <QCommandLineParser>
#include <QMessageBox>
#include <QTimer>

#include "app_data.hpp"
#include "main_window.hpp"
#include "screenshots.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("gpuplan");
  QApplication::setApplicationName("gpuplan-gui");
  QApplication::setApplicationVersion(GPUPLAN_VERSION);
  QCommandLineParser cli;
  cli.setApplicationDescription("gpuplan what-if explorer: LLM training and serving on GPU clusters");
  cli.addHelpOption();
  cli.addVersionOption();
  QCommandLineOption data_dir("data-dir", "data directory (default: as the gpuplan CLI finds it)", "DIR");
  QCommandLineOption scenario("scenario", "open this scenario file (the JSON of gpuplan train --scenario)", "FILE");
  QCommandLineOption shots("screenshot", "write a PNG of every view to DIR and exit", "DIR");
  cli.addOptions({data_dir, scenario, shots});
  cli.process(app);

  gpuplan::Diagnostics diags;
  auto data = gpuplan::gui::load_app_data(cli.value(data_dir).toStdString(), diags);
  if (!data) {
    const QString text = QString::fromStdString(diags.to_string());
    std::fprintf(stderr, "%s\n", qPrintable(text));
    if (!cli.isSet(shots)) QMessageBox::critical(nullptr, "gpuplan", "No usable data directory:\n" + text);
    return 2;
  }
  gpuplan::gui::MainWindow w(data);
  if (cli.isSet(scenario)) w.openScenario(cli.value(scenario));
  w.show();
  if (cli.isSet(shots)) {
    gpuplan::gui::take_screenshots(w, cli.value(shots), [](bool ok) {
      std::fprintf(stderr, ok ? "screenshots written\n" : "some screenshots failed\n");
      QApplication::exit(ok ? 0 : 1);
    });
  }
  return QApplication::exec();
}
