#pragma once
// Internal to wl_io: the builder of a scenario field table's rows (training_fields.cpp, serving_fields.cpp), by name:
// row("tp", integer, "TP").flags({"--tp"}).help(...).otherwise("1").range(1, 1024).doc(...).
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/wl_io/scenario_fields.hpp"

namespace gpuplan::wl_io::scenario_row {

class Row {
 public:
  Row(std::string key, json_io::FieldType type, std::string label) {
    f_.spec.key = std::move(key);
    f_.spec.type = type;
    f_.spec.presence = json_io::Presence::optional;
    f_.label = std::move(label);
  }
  Row&& flags(std::vector<std::string> names) && {
    f_.flags = std::move(names);
    return std::move(*this);
  }
  /// A boolean flag given without a value, that sets the key true (--disaggregated).
  Row&& switch_flag() && {
    f_.switch_flag = true;
    return std::move(*this);
  }
  /// Serving: a key only the capacity planner reads; the commands that run one replica leave its flag out.
  Row&& planner() && {
    f_.planner_only = true;
    return std::move(*this);
  }
  Row&& help(std::string text) && {
    f_.help = std::move(text);
    return std::move(*this);
  }
  Row&& otherwise(std::string default_text) && {
    f_.default_text = std::move(default_text);
    return std::move(*this);
  }
  Row&& range(double lo, double hi) && {
    f_.spec.min = lo;
    f_.spec.max = hi;
    return std::move(*this);
  }
  Row&& choices(std::vector<std::string> values) && {
    f_.spec.choices = std::move(values);
    return std::move(*this);
  }
  /// Choices that spell one listed before them in another framework's words: read, not offered by a picker.
  Row&& spellings(std::vector<std::string> values) && {
    f_.spellings = std::move(values);
    return std::move(*this);
  }
  /// An object key read with its own table (the autoscale file's load and policy).
  Row&& nested(const json_io::FieldTable* table) && {
    f_.spec.nested = table;
    return std::move(*this);
  }
  Row&& doc(std::string text) && {
    f_.spec.doc = std::move(text);
    return std::move(*this);
  }
  operator ScenarioField() && { return std::move(f_); }  // NOLINT(google-explicit-constructor): the table's rows

 private:
  ScenarioField f_;
};

inline Row row(std::string key, json_io::FieldType type, std::string label) {
  return Row(std::move(key), type, std::move(label));
}

}  // namespace gpuplan::wl_io::scenario_row
