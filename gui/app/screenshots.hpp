#pragma once
// `gpuplan-gui --screenshot DIR`: drives the real window through each view, waits for the worker's results, and
// writes one PNG per view (docs/screenshots/ is regenerated with scripts/gui-screenshots.sh).
#include <functional>
#include <QObject>
#include <QString>

namespace gpuplan::gui {

class MainWindow;

/// Runs the steps and calls `done(ok)` when every PNG is written.
void take_screenshots(MainWindow& w, const QString& dir, std::function<void(bool)> done);

}  // namespace gpuplan::gui
