#pragma once
#include <functional>
#include <memory>

#include "app_data.hpp"

namespace gpuplan::gui::test {

/// The shipped data directory, loaded once for all tests.
std::shared_ptr<const AppData> data();
/// Runs the event loop until `done()` or `timeout_ms`; returns done().
bool wait_until(const std::function<bool()>& done, int timeout_ms = 60000);

}  // namespace gpuplan::gui::test
