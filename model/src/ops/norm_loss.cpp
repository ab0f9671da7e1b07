// The norm and loss kernels of a training step, as ops (norm_loss.hpp).
#include "norm_loss.hpp"

#include <utility>

namespace gpuplan::model::detail {

/// PyTorch's eager LayerNorm kernels at their measured rate: our H100 (2026-11-27, issue #24;
/// scripts/measure/mpt_nongemm_probe.py; data/validation/measured/h100-sxm5-80gb/
/// mpt_nongemm_mpt-1b_s2048_b6_resbf16.json: each op alone at the MPT-1b layer's T = 12288 tokens, d = 2048, bf16;
/// CUDA-only profile, kernel time). LayerNorm with bias (vectorized_layer_norm_kernel forward; layer_norm_grad_input
/// and GammaBetaBackward backward, the last a column reduction at 1.3 TB/s) takes 190.6 µs for the bytes priced here
/// (2·T·d·a_b forward, 4·T·d·a_b backward: 101.5 µs at the streaming rate, 0.887 × 3.35 TB/s): 0.533 of it. Other
/// GPUs: the same fraction of their streaming rate (an assumption: the kernels are PyTorch's). RMSNorm's fused kernels
/// were not measured and keep the streaming rate.
constexpr double kEagerLayerNormRate = 0.533;

/// RMSNorm as PyTorch ops (NormImpl::composite) at its measured rates: our H200 (2026-11-29, issue #22;
/// scripts/measure/torchtitan_norm_rope.py; data/validation/measured/h200-sxm-141gb/torchtitan_norm_rope.json: TorchTitan
/// 9dec370's RMSNorm on [2, 8192, 4096] bf16, eager). Forward 867.6 µs, backward 1,739.8 µs; the 36 and 92 B per element
/// counted take 577.2 and 1,475.1 µs at the streaming rate (4.8 TB/s × the calibrated 0.872), after 8 and 14 kernels'
/// 5 µs: 0.70 and 0.88 of it (the row reductions and the broadcast products run below the copy rate). Other GPUs: the
/// same fractions of their streaming rate (an assumption, as for kEagerLayerNormRate).
constexpr double kCompositeNormFwdRate = 0.70;
constexpr double kCompositeNormBwdRate = 0.88;

NormImpl norm_impl(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  if (plan.norm_kernel == wl::NormKernel::composite && a.norm == wl::NormKind::rmsnorm) return NormImpl::composite;
  return plan.kernels == wl::KernelStyle::eager && a.norm == wl::NormKind::layernorm ? NormImpl::eager_layernorm
                                                                                     : NormImpl::fused;
}

namespace {

std::string norm_op_name(bool names, const std::string& name, const char* suffix) {
  return names ? name + suffix : std::string();
}

/// RMSNorm written as PyTorch ops (wl::NormKernel::composite; pytorch/torchtitan 9dec370ad26b
/// torchtitan/models/norms.py RMSNorm: `(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps))
/// .type_as(x) * weight`), each op a kernel. Bytes per element, a = a_b, f = 4 (fp32):
///  forward: upcast a + f, pow 2f, mean f, the multiply by rsqrt 2f, the cast back f + a, the weight multiply 2a
///  (+ eps and rsqrt act on one value per token) = 4a + 7f in 8 kernels;
///  backward (autograd's formulas, tools/autograd/derivatives.yaml and FunctionsManual.cpp pow_backward): the weight
///  multiply's input gradient 2a and weight gradient (product 3a, sum over tokens a), the cast back's f + a, the
///  multiply's two products 2f and 3f with the sum over the row f, mean's expanded gradient f, pow's x^1 copy 2f,
///  the scalar multiply 2f and the product with the gradient 3f, the sum of x's two gradients 3f, the upcast's
///  f + a = 8a + 19f in 14 kernels. With fp32 activations the two casts are no-ops.
NormCost composite_rmsnorm_cost(const std::string& name, bool names, double elems, double e, const Device& d) {
  const double f = 4.0;
  const bool casts = e < f;
  const double fwd_b = 2.0 * e + 5.0 * f + (casts ? 2.0 * (e + f) : 0.0);
  const double bwd_b = 6.0 * e + 17.0 * f + (casts ? 2.0 * (e + f) : 0.0);
  const int fwd_k = casts ? 8 : 6, bwd_k = casts ? 14 : 12;
  OpCost fc = streaming_cost(norm_op_name(names, name, " (composite: upcast, pow, mean, rsqrt, mul, cast, weight mul)"),
                             OpClass::elementwise, units::bytes(elems * fwd_b), units::flop(4.0 * elems), d);
  OpCost bc = streaming_cost(norm_op_name(names, name, " bwd (composite: autograd of each op)"), OpClass::elementwise,
                             units::bytes(elems * bwd_b), units::flop(8.0 * elems), d);
  // streaming_cost charges one kernel's fixed cost; the composite runs fwd_k and bwd_k kernels at their measured
  // rates.
  const units::Seconds k = kernel_fixed(d, OpClass::elementwise);
  fc.time = (fc.time - k) / kCompositeNormFwdRate + k * double(fwd_k);
  bc.time = (bc.time - k) / kCompositeNormBwdRate + k * double(bwd_k);
  return {std::move(fc), std::move(bc), true};
}

}  // namespace

NormCost training_norm_cost(const std::string& name, bool names, NormImpl impl, double elems, std::int64_t row,
                            double a_b, const Device& d) {
  if (!(elems > 0)) return {};  // no such norm (MLA without a query latent)
  if (impl == NormImpl::composite) return composite_rmsnorm_cost(name, names, elems, a_b, d);
  // One kernel each way: read the input and write the output (2·a_b) forward, twice that backward.
  const double bytes = elems * a_b * 2.0, flops = 4.0 * elems;
  OpCost f = norm_cost(norm_op_name(names, name, ""), units::bytes(bytes), units::flop(flops), row, d);
  OpCost b = norm_cost(norm_op_name(names, name, " bwd"), units::bytes(bytes * 2.0), units::flop(flops * 2.0), row, d);
  if (impl == NormImpl::eager_layernorm) {
    const units::Seconds fixed = norm_fixed(d, row);
    for (OpCost* c : {&f, &b}) c->time = (c->time - fixed) / kEagerLayerNormRate + fixed;
  }
  return {std::move(f), std::move(b), true};
}

LossBytes loss_bytes_per_logit(const wl::TrainingPlan& plan) {
  // HBM traffic per logit of the vocabulary shard (16-bit logits of a_b bytes, fp32 = 4 B).
  const double e = plan.precision.activation_bytes;
  // FlashAttention's xentropy (any kernel style): the forward reads the logits once (a_b; the per-row loss and lse are
  // negligible), the backward reads them again and writes the gradient (a_b + a_b).
  if (plan.cross_entropy == wl::CrossEntropyKernel::flash) return {e, 2.0 * e, "FlashAttention xentropy"};
  if (plan.eager_loss())
    // PyTorch's cross_entropy under autocast (or over logits upcast by .float(), TorchTitan's loss_fn: the same
    // passes): upcast (2 + 4 B) and log_softmax forward; fill (4 B),
    // log_softmax_backward and the cast back (4 + 2 B) backward. A vocabulary row (V/tp fp32 values, 128 KiB and
    // more) does not fit in shared memory, so the softmax kernels make a pass per reduction: forward reads the row
    // for its max, for its sum of exponentials and for the output (3 × 4 + 4 B), backward reads the gradient for its
    // sum and again with the output (3 × 4 + 4 B). 22 + 26 B; measured on H100 (scripts/measure/loss_kernels.py,
    // data/validation/measured/h100-sxm5-80gb/loss_kernels.json: T = 8192, V = 32K-128K) at 49-51 B per logit in
    // units of the copy bandwidth.
    return {22.0, 26.0, "PyTorch eager"};
  switch (plan.cross_entropy) {
    case wl::CrossEntropyKernel::unfused:
      // megatron/core/tensor_parallel/cross_entropy.py: .float() (a_b + 4), max (4), in-place subtract (4 + 4),
      // exp (4 + 4), sum (4), softmax div_ (4 + 4) forward; the gradient's mul_ (4 + 4) and autograd's cast back to
      // the logits' dtype (4 + a_b) backward. The target gathers touch one logit per token (not counted). Measured
      // (the same passes in PyTorch, loss_kernels.json): 58.6 B per logit at the calibrated streaming rate, i.e. this
      // count is 11% fast (the row reductions run below the copy rate).
      return {e + 36.0, 12.0 + e, "Megatron-Core unfused"};
    case wl::CrossEntropyKernel::native:
      // megatron/core/fusions/fused_cross_entropy.py: the same steps in three jit-fused kernels forward — upcast
      // with max (a_b + 4), subtract+exp+sum (4 + 4), normalisation (4 + 4) — and one backward (4 + 4) plus the
      // cast back (4 + a_b).
      return {e + 20.0, 12.0 + e, "Megatron-Core jit-fused"};
    case wl::CrossEntropyKernel::te:
    case wl::CrossEntropyKernel::eager:  // handled above
    case wl::CrossEntropyKernel::flash:
      break;
  }
  // One fused pass: read the logits, keep fp32 row statistics and write the gradient (a_b + 4); the backward scales
  // the gradient (4 + a_b). Measured: Inductor's fused cross_entropy forward and backward, 11.6 B per logit
  // (loss_kernels.json).
  return {e + 4.0, 4.0 + e, "fused, one pass"};
}

LossCost cross_entropy_cost(const wl::TrainingPlan& plan, double logits, bool names, const Device& d) {
  const LossBytes ce = loss_bytes_per_logit(plan);
  const std::string none;
  return {streaming_cost(names ? "cross-entropy (" + ce.kernel + ")" : none, OpClass::loss,
                         units::bytes(logits * ce.forward), units::flop(5.0 * logits), d),
          streaming_cost(names ? "cross-entropy bwd (" + ce.kernel + ")" : none, OpClass::loss,
                         units::bytes(logits * ce.backward), units::flop(3.0 * logits), d)};
}

}  // namespace gpuplan::model::detail
