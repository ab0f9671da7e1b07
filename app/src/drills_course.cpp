#include "gpuplan/app/drills_course.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/back_of_envelope.hpp"
#include "gpuplan/model/opt_stack.hpp"
#include "gpuplan/model/simulate.hpp"
#include "gpuplan/model/vision_data.hpp"

#include "drill_field_specs.hpp"

namespace gpuplan::app {

namespace {
using json_io::FieldSpec;
using json_io::FieldType;
using json_io::Presence;
using drill_specs::integer;  // drill_field_specs.hpp
using drill_specs::num;
using drill_specs::text;

}  // namespace

const std::vector<RealtimeKind>& course_drill_kinds() {
  static const std::vector<RealtimeKind> k = {
      {"loader_step", Dimension::time,
       {num("gpu_step_ms", "ms", 0, 1e7, "the GPU's step without waiting for data"),
        integer("samples", 1, 1e7, "samples per GPU per step"),
        num("sample_cpu_ms", "ms", 0, 1e6, "CPU time to produce one sample (read, decode or tokenise, collate)"),
        integer("workers", 0, 4096, "DataLoader workers per GPU (0: loaded in the training process between steps)")}},
      {"optimizer_step_floor", Dimension::time,
       {num("params_M", "M", 0, 1e9, "parameters updated by this GPU, millions"),
        num("bandwidth_TBps", "TB/s", 0, 1e3, "HBM bandwidth"),
        text("optimizer", "the optimizer (PyTorch AMP: fp32 parameters, gradients and states)", {"adamw", "sgd"}),
        text("impl", "fused (one kernel), foreach (PyTorch's default multi-tensor passes) or for-loop",
             {"fused", "foreach", "for-loop"})}},
      {"static_fill_wait", Dimension::time,
       {num("rate_per_s", "1/s", 0, 1e9, "arrival rate, evenly spaced"),
        integer("batch", 1, 1e6, "B: requests per static batch")}},
  };
  return k;
}

bool evaluate_course_kind(const std::string& kind, const json_io::ObjectReader& in, const Origin& o, KindAnswer& a) {
  auto n = [&](const char* key) { return in.num(key).value_or(0.0); };
  if (kind == "loader_step") {
    model::DataPipelinePlan p;
    p.decode = model::ImageDecode::cpu;
    p.workers_per_gpu = int(in.integer("workers").value_or(0));
    p.cpu_images_per_s_per_core = 1e3 / n("sample_cpu_ms");
    p.cpu_rate_origin = o;
    p.cores_origin = Origin::assumption("a core for every worker");
    p.item = "samples";
    p.work = "producing a sample";
    const auto r = model::vision_data_pipeline(units::milliseconds(n("gpu_step_ms")), in.integer("samples").value_or(1),
                                               p, Explain::on);
    a.value = r.step_time.raw();
    a.derivation = r.derivation;
  } else if (kind == "optimizer_step_floor") {
    wl::TrainingPlan plan;  // PyTorch AMP: the fp32 parameters are the master
    plan.mixed_precision = wl::MixedPrecision::amp;
    plan.precision.weight_bytes = 4;
    plan.precision.gradient_bytes = 4;
    plan.precision.master_bytes = 0;
    plan.optimizer = in.str("optimizer").value_or("adamw") == "sgd" ? wl::OptimizerKind::sgd : wl::OptimizerKind::adamw;
    const std::string impl = in.str("impl").value_or("fused");
    plan.optimizer_impl = impl == "foreach"    ? wl::OptimizerImpl::foreach
                          : impl == "for-loop" ? wl::OptimizerImpl::for_loop
                                               : wl::OptimizerImpl::fused;
    const double per_param = model::optimizer_step_bytes_per_param(plan);
    const double params = n("params_M") * 1e6;
    auto e = model::bandwidth_bound_time(fmt::format("the {} {} step's {:g} B a parameter", impl,
                                                     plan.optimizer == wl::OptimizerKind::sgd ? "SGD" : "AdamW",
                                                     per_param),
                                         units::bytes(params * per_param), units::tb_per_s(n("bandwidth_TBps")), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
    a.derivation.notes.push_back(fmt::format(
        "{:g} B a parameter (optimizer_step_bytes_per_param): fused AdamW reads w, g, m, v and writes w, m, v once "
        "(28 B in fp32); PyTorch's foreach AdamW makes 8 passes (80 B); launches and the CPU's issue come on top",
        per_param));
  } else if (kind == "static_fill_wait") {
    auto e = model::static_batch_fill_wait(n("rate_per_s"), in.integer("batch").value_or(1), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else {
    return false;
  }
  return true;
}

}  // namespace gpuplan::app
