// The optimizer instances of a hybrid shard group (dp_terms.cpp): one count, read by the DP collectives, their
// explain entry and the layout check.
#pragma once

#include "gpuplan/wl/training.hpp"

namespace gpuplan::model::detail {

/// The replicas of the dense shard group in the gradient group: Megatron-Core's partial distributed optimizer
/// (--num-distributed-optimizer-instances N: dp·cp / shard_group = N), Megatron-FSDP's HSDP and FSDP's HYBRID_SHARD.
/// 1 without ZeRO, without a hybrid group, or where the group does not slice dp·cp (the layout check reports that).
int dp_optimizer_instances(const wl::TrainingPlan& plan);

}  // namespace gpuplan::model::detail
