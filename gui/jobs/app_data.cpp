#include "app_data.hpp"

#include "gpuplan/app/workspace.hpp"  // app::open_workspace: the same bootstrap as the CLI

namespace gpuplan::gui {

std::shared_ptr<const AppData> load_app_data(const std::string& flag, Diagnostics& diags) {
  auto ws = app::open_workspace(flag);
  diags.append(ws.diagnostics());
  if (!ws.ok()) return nullptr;
  auto loaded = std::move(ws).value();
  auto d = std::make_shared<AppData>();
  d->data_dir = std::move(loaded.data_dir);
  d->db = std::move(loaded.db);
  d->library = std::move(loaded.library);
  return d;
}

}  // namespace gpuplan::gui
