#pragma once
// Internal to gpuplan_hw_io: the json_io names the decoders use, the field builders and the common entity fields
// (schema, kind, id, name, sources, notes) of hardware_io.cpp, shared by the decoders of the other hardware data kinds
// (gpu_io.cpp, network_io.cpp, efficiency_io.cpp).
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::hw_io {

// The json_io names every hardware decoder uses unqualified, declared once for gpu_io.cpp, network_io.cpp,
// hardware_io.cpp and efficiency_io.cpp.
using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;
namespace u = gpuplan::units;

namespace detail {

constexpr auto kReq = json_io::Presence::required;
constexpr auto kOpt = json_io::Presence::optional;

json_io::FieldSpec positive(std::string key, std::string unit, double max, std::string doc,
                            json_io::Presence p = kOpt);
json_io::FieldSpec count(std::string key, double max, std::string doc, json_io::Presence p = kOpt);
json_io::FieldSpec text(std::string key, std::string doc, json_io::Presence p = kOpt,
                        std::vector<std::string> choices = {});
json_io::FieldSpec nested(std::string key, const json_io::FieldTable& table, std::string doc,
                          json_io::Presence p = kOpt);
json_io::FieldSpec typed(std::string key, json_io::FieldType t, std::string doc, json_io::Presence p = kOpt);
/// The common fields followed by the kind's own.
json_io::FieldTable with_common(const std::string& kind, json_io::FieldTable own);
/// The decoded value, or only the diagnostics when they hold an error.
template <class T>
Result<T> finish(T value, Diagnostics diags) {
  if (diags.has_errors()) return Result<T>(std::move(diags));
  return Result<T>(std::move(value), std::move(diags));
}

/// id, name, notes and sources; checks that the id is the file name.
hw::EntityInfo decode_info(const json_io::ObjectReader& r, const std::string& file, Diagnostics& diags);

}  // namespace detail
}  // namespace gpuplan::hw_io
