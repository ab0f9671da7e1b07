#pragma once
// The autoscale scenario file's field tables (cmd_autoscale.cpp): for `gpuplan schema` and the decoder.
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::cli {
/// The top level (description, serving, load, autoscale, e2e_ms), with the load and autoscale objects nested.
const json_io::FieldTable& autoscale_file_fields();
const json_io::FieldTable& autoscale_load_fields();
const json_io::FieldTable& autoscale_policy_fields();
}  // namespace gpuplan::cli
