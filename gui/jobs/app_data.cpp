#include "app_data.hpp"

#include "gpuplan/app/workspace.hpp"  // app::find_data_dir: the same lookup as the CLI
#include "gpuplan/hw_io/hardware_io.hpp"

namespace gpuplan::gui {

std::shared_ptr<const AppData> load_app_data(const std::string& flag, Diagnostics& diags) {
  auto dir = app::find_data_dir(flag, diags);
  if (!dir) return nullptr;
  auto db = hw_io::load_hardware_db(*dir);
  diags.append(db.diagnostics());
  if (!db.ok()) return nullptr;
  auto lib = wl_io::load_model_library(*dir);
  diags.append(lib.diagnostics());
  if (!lib.ok()) return nullptr;
  auto d = std::make_shared<AppData>();
  d->data_dir = *dir;
  d->db = std::move(db).value();
  d->library = std::move(lib).value();
  return d;
}

}  // namespace gpuplan::gui
