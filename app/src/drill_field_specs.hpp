#pragma once
// The field builders of the drills' input tables (drills.cpp and its kind files: drills_realtime, drills_course,
// drills_compress): one definition of what a required number, integer or text input of a drill kind is.
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::app::drill_specs {

/// A number in (min, max] (or [min, max] with exclusive = false), in `unit`.
inline json_io::FieldSpec num(std::string key, std::string unit, double min, double max, std::string doc,
                              bool exclusive = true, json_io::Presence p = json_io::Presence::required) {
  json_io::FieldSpec f;
  f.key = std::move(key);
  f.type = json_io::FieldType::number;
  f.presence = p;
  f.unit = std::move(unit);
  f.min = min;
  f.max = max;
  f.min_exclusive = exclusive;
  f.doc = std::move(doc);
  return f;
}

/// A whole number in [min, max].
inline json_io::FieldSpec integer(std::string key, double min, double max, std::string doc,
                                  json_io::Presence p = json_io::Presence::required) {
  json_io::FieldSpec f = num(std::move(key), "", min, max, std::move(doc), false, p);
  f.type = json_io::FieldType::integer;
  return f;
}

/// A required string, one of `choices` when they are given.
inline json_io::FieldSpec text(std::string key, std::string doc, std::vector<std::string> choices = {}) {
  json_io::FieldSpec f;
  f.key = std::move(key);
  f.type = json_io::FieldType::string;
  f.presence = json_io::Presence::required;
  f.doc = std::move(doc);
  f.choices = std::move(choices);
  return f;
}

/// The model input that several drill kinds share (drills.cpp, drills_compress.cpp): one definition, so the key and
/// its documentation cannot drift apart between kinds.
inline json_io::FieldSpec model_field() { return text("model", "a model of the library (data/models)"); }

}  // namespace gpuplan::app::drill_specs
