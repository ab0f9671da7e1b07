#pragma once
// The model list of the scenario panel and the serving page: released models first, then, under a disabled heading,
// the benchmark and paper shapes (ModelEntry::benchmark_shape: llm-foundry's MPT sizes, Megatron's SC'21 GPT shapes,
// our own measurement decoders), so that the list opens on real models and the shapes stay selectable (validation
// scenarios use them). Imported model files (a Hugging Face config.json) join the released group.
#include <QComboBox>
#include <QString>

#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::gui {

enum class ModelKind { released = 0, benchmark_shape = 1, imported = 2, heading = 3 };
/// Item data role of the entries' ModelKind (as int); Qt::UserRole holds the model id (or the imported file's path).
inline constexpr int kModelKindRole = Qt::UserRole + 1;

/// Fills `combo` (cleared first) from the library: released models, a separator, a disabled heading and the benchmark
/// shapes.
void fill_model_combo(QComboBox* combo, const wl_io::ModelLibrary& lib);
/// Adds a model file (id = its path) at the end of the released group unless present; returns its index.
int add_imported_model(QComboBox* combo, const QString& path, const QString& label);
/// The kind of entry `index`.
ModelKind model_kind(const QComboBox* combo, int index);

}  // namespace gpuplan::gui
