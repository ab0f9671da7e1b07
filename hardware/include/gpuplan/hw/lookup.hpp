#pragma once
// Lookups that cross the hardware database's entities (HardwareDb's finders take an entity's own id): which node a
// GPU runs in when the user names none.
#include <string_view>

#include "gpuplan/hw/hardware.hpp"

namespace gpuplan::hw {

/// The first node (in file-name order, as the database loads them) whose GPU is `gpu_id` (an id, not an alias:
/// HardwareDb::find_gpu resolves aliases); nullptr when no node holds it.
const NodeSpec* first_node_of(const HardwareDb& db, std::string_view gpu_id);

}  // namespace gpuplan::hw
