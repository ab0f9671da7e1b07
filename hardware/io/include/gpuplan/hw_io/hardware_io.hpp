#pragma once
// Decoding of hardware data files (data/hardware/{gpus,links,nodes,clusters}/*.json) into hw value types, and the
// database loader. Every problem is reported with file and JSON pointer; nothing is defaulted silently.
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::hw_io {

/// The field tables (one per entity kind). They drive decoding and the generated field reference.
const json_io::FieldTable& gpu_fields();
const json_io::FieldTable& link_fields();
const json_io::FieldTable& node_fields();
const json_io::FieldTable& cluster_fields();
const json_io::FieldTable& efficiency_fields();
const json_io::FieldTable& efficiency_row_fields();     ///< efficiency: rows[]
const json_io::FieldTable& efficiency_family_fields();  ///< efficiency: families[]

/// Decoders from parsed JSON. `file` is used in diagnostics and citations. On error the result has diagnostics.
Result<hw::GpuSpec> decode_gpu(const json_io::Json& j, const std::string& file);
Result<hw::LinkSpec> decode_link(const json_io::Json& j, const std::string& file);
Result<hw::NodeSpec> decode_node(const json_io::Json& j, const std::string& file);
Result<hw::ClusterSpec> decode_cluster(const json_io::Json& j, const std::string& file);
/// A file of measured kernel efficiencies (data/hardware/efficiency/*.json).
Result<hw::EfficiencyTable> decode_efficiency(const json_io::Json& j, const std::string& file);
/// Checks the efficiency rows against the GPUs (known ids, one row per GPU, family members with rows) and sets each
/// GPU's `efficiency`: its own row, else its family's member's (with `efficiency_via`), else none.
void resolve_efficiency(hw::HardwareDb& db, Diagnostics& diags);

/// Reads one file of any hardware kind (dispatch on "kind") and adds it to `db`.
void load_hardware_file(const std::string& path, hw::HardwareDb& db, Diagnostics& diags);

/// Loads every *.json under <data_dir>/hardware/{gpus,links,nodes,clusters,efficiency}/ and checks cross references
/// (dangling ids, duplicate ids and aliases, id == file name). Files are read in sorted order (deterministic).
Result<hw::HardwareDb> load_hardware_db(const std::string& data_dir);

/// Cross-reference checks on an assembled database (used by load_hardware_db and `hw validate` on single files).
void check_references(const hw::HardwareDb& db, Diagnostics& diags);

}  // namespace gpuplan::hw_io
