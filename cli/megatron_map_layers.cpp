// Megatron-LM flags mapped to the model's layers (megatron_mapper.hpp): the MoE token dispatcher and expert
// capacity, attention (backend, Transformer Engine, dropout) and the shape checked against -m MODEL.
#include "megatron_mapper.hpp"

namespace gpuplan::cli::detail {

void Mapper::moe() {
  const long long ep = m_.keys.contains("ep") ? m_.keys["ep"].get<long long>() : 1;
  auto disp = text("--moe-token-dispatcher-type");
  if (disp && *disp != "alltoall" && *disp != "allgather" && *disp != "flex")
    bad(*get("--moe-token-dispatcher-type"), "expected allgather, alltoall or flex");
  if (ep > 1) {
    if (!disp) {
      if (a_.whole_command)
        diags_.add(Diagnostic{Severity::error, a_.source, "--moe-token-dispatcher-type", 0, 0,
                              fmt::format("absent with --expert-model-parallel-size {}: Megatron-LM then dispatches "
                                          "tokens by all-gather, which gpuplan does not price (it prices the "
                                          "all-to-all dispatcher; give --moe-token-dispatcher-type alltoall): {}",
                                          ep, kNotModelled)});
    } else if (*disp == "allgather") {
      refuse(*get("--moe-token-dispatcher-type"),
             "gpuplan prices the all-to-all dispatcher; the all-gather one with expert parallelism is");
    } else if (*disp == "flex") {
      // The flex dispatcher runs DeepEP's kernels (--moe-enable-deepep, or --moe-flex-dispatcher-backend deepep,
      // Megatron-Core's default backend) or HybridEP's; gpuplan prices DeepEP's (wl::EpDispatch::deepep).
      auto backend = text("--moe-flex-dispatcher-backend");
      if (backend && *backend != "deepep")
        refuse(*get("--moe-flex-dispatcher-backend"),
               fmt::format("gpuplan prices NCCL all-to-all and DeepEP; the '{}' backend of the flex dispatcher is",
                           *backend));
      else set("ep_dispatch", "deepep", "--moe-token-dispatcher-type");
    }
    if (given("--moe-enable-deepep") && (!disp || *disp != "flex"))
      bad(*get("--moe-enable-deepep"), "Megatron-Core: 'DeepEP backend is only supported with flex token dispatcher.'");
    // TransformerConfig overlap_moe_expert_parallel_comm (the combined 1F1B schedule) with delay_wgrad_compute.
    if (given("--overlap-moe-expert-parallel-comm")) {
      set("ep_a2a_overlap", true, "--overlap-moe-expert-parallel-comm");
      if (!given("--delay-wgrad-compute"))
        m_.notes.push_back("--overlap-moe-expert-parallel-comm without --delay-wgrad-compute: gpuplan hides the "
                           "all-to-all behind the whole partner pass, as with the delayed weight gradients");
    }
    capacity();
  } else {
    for (const char* f : {"--moe-token-dispatcher-type", "--moe-enable-deepep", "--moe-flex-dispatcher-backend",
                          "--overlap-moe-expert-parallel-comm"})
      if (given(f)) m_.ignored.push_back(fmt::format("{} (no expert parallelism)", f));
  }
  if (ep > 1 && given("--moe-flex-dispatcher-backend") && (!disp || *disp != "flex"))
    m_.ignored.push_back("--moe-flex-dispatcher-backend (not the flex dispatcher)");
  // TransformerConfig.moe_router_fusion (default False): Transformer Engine's fused top-k and aux-loss kernels, at any
  // EP (the router runs on every MoE layer).
  if (given("--moe-router-fusion")) set("moe_router_fusion", true, "--moe-router-fusion");
  else if (a_.whole_command && given("--num-experts")) set_default("moe_router_fusion", false, "no --moe-router-fusion");
}

/// --moe-expert-capacity-factor f (moe_capacity_factor) and --moe-pad-expert-input-to-capacity (moe_pad_to_capacity;
/// Megatron-Bridge's apply_moe_token_drop: f = 1 with padding): each expert takes at most f·k·T/E tokens
/// (moe_utils.py get_capacity), padded to exactly that with the flag, so the dispatcher's split sizes are fixed.
void Mapper::capacity() {
  const MegatronFlag* cf = get("--moe-expert-capacity-factor");
  if (cf == nullptr) {
    if (given("--moe-pad-expert-input-to-capacity"))
      bad(*get("--moe-pad-expert-input-to-capacity"), "Megatron-LM needs --moe-expert-capacity-factor with it");
    return;
  }
  auto v = value(*cf);
  if (!v) return;
  double f = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), f);
  if (ec != std::errc() || p != v->data() + v->size()) {
    bad(*cf, "expected a number");
    return;
  }
  if (f < 0) return;  // Megatron-LM: a negative factor means no capacity limit (dropless)
  set("moe_capacity_factor", f, "--moe-expert-capacity-factor");
  if (given("--moe-pad-expert-input-to-capacity"))
    set("moe_pad_to_capacity", true, "--moe-pad-expert-input-to-capacity");
}

void Mapper::attention() {
  if (auto b = text("--attention-backend")) {
    if (*b == "flash" || *b == "fused" || *b == "auto") set("flash_attention", true, "--attention-backend");
    else if (*b == "unfused" || *b == "local") set("flash_attention", false, "--attention-backend");
    else bad(*get("--attention-backend"), "expected flash, fused, unfused, local or auto");
  } else if (given("--use-flash-attn")) {
    set("flash_attention", true, "--use-flash-attn");
  }
  if (auto t = text("--transformer-impl"); t && *t != "transformer_engine")
    refuse(*get("--transformer-impl"), "Megatron's local (non-Transformer-Engine) layers are");
  // TransformerConfig.masked_softmax_fusion feeds only Megatron's local DotProductAttention
  // (megatron/core/transformer/dot_product_attention.py, FusedScaleMaskSoftmax); Transformer Engine's attention
  // backends compute their softmax in their own kernels, so there the switch changes nothing.
  if (given("--no-masked-softmax-fusion")) {
    if (auto b = text("--attention-backend"); b && *b == "local")
      refuse(*get("--no-masked-softmax-fusion"),
             "with --attention-backend local, Megatron's unfused masked softmax is");
    else
      m_.ignored.push_back("--no-masked-softmax-fusion (only Megatron's local attention uses that kernel)");
  }
  // Document masks (Megatron-LM d98e8a64, megatron/training/arguments.py and pretrain_gpt.py get_batch): with
  // --dataloader-inter-document-masking (or --sft) the batch carries cu_seqlens and the attention runs per document
  // (THD); --reset-attention-mask only builds a dense s x s mask in the dataloader (megatron/core/datasets/
  // gpt_dataset.py _get_ltor_masks_and_position_ids), which does not shorten the fused kernel's key loop. The command
  // line does not say how long the documents are: --packed-documents does.
  for (const char* f : {"--dataloader-inter-document-masking", "--sft"})
    if (given(f)) {
      m_.notes.push_back(fmt::format(
          "{}: attention per document (cu_seqlens); the documents' lengths are not on the command line: priced per "
          "document only with --packed-documents (TOKENS, lognormal:MEAN,SD or TOKENS:WEIGHT,...), else over the "
          "whole sequence",
          f));
      break;
    }
  if (given("--reset-attention-mask") && !given("--dataloader-inter-document-masking"))
    m_.notes.push_back(
        "--reset-attention-mask: a dense s x s document mask built in the dataloader; the fused attention kernel's work "
        "is not cut by it (per-document attention is --dataloader-inter-document-masking): priced over the whole "
        "sequence");
  // Dropout: Megatron-LM's defaults are 0.1 for both (TransformerConfig).
  auto prob = [&](const char* flag) -> std::optional<double> {
    auto t = text(flag);
    if (!t) return std::nullopt;
    double v = 0;
    auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
    if (ec != std::errc() || p != t->data() + t->size() || !(v >= 0 && v < 1)) {
      bad(*get(flag), "expected a probability from 0 to 1");
      return std::nullopt;
    }
    return v;
  };
  const auto att = prob("--attention-dropout"), hid = prob("--hidden-dropout");
  if (att || hid || a_.whole_command) {
    const bool on = att.value_or(0.1) > 0 || hid.value_or(0.1) > 0;
    if (att || hid) set("dropout", on, att ? "--attention-dropout" : "--hidden-dropout");
    else set_default("dropout", on, "no --attention-dropout/--hidden-dropout: Megatron-LM's 0.1");
    if (att && hid)
      m_.origin["dropout"] = as_typed(*get("--attention-dropout")) + " " + as_typed(*get("--hidden-dropout"));
  }
}

void Mapper::shape() {
  auto& s = m_.shape;
  auto num = [&](const char* flag, std::optional<std::int64_t>& field, const char* key) {
    if (auto v = integer(flag)) {
      field = *v;
      s.flag[key] = as_typed(*get(flag));
    }
  };
  num("--num-layers", s.layers, "layers");
  num("--hidden-size", s.hidden, "hidden");
  num("--ffn-hidden-size", s.ffn, "ffn");
  num("--num-attention-heads", s.heads, "heads");
  num("--kv-channels", s.head_dim, "head_dim");
  num("--num-experts", s.experts, "experts");
  num("--moe-router-topk", s.topk, "topk");
  num("--moe-ffn-hidden-size", s.moe_ffn, "moe_ffn");
  num("--moe-shared-expert-intermediate-size", s.shared_ffn, "shared_ffn");
  num("--vocab-size", s.vocab, "vocab");
  num("--max-position-embeddings", s.max_position, "max_position");
  num("--q-lora-rank", s.q_lora_rank, "q_lora_rank");
  num("--kv-lora-rank", s.kv_lora_rank, "kv_lora_rank");
  num("--qk-head-dim", s.qk_head_dim, "qk_head_dim");
  num("--qk-pos-emb-head-dim", s.qk_pos_head_dim, "qk_pos_head_dim");
  num("--v-head-dim", s.v_head_dim, "v_head_dim");
  // tokenizer.py _vocab_size_with_padding: the vocabulary padded to a multiple of this × TP (default 128).
  if (auto v = integer("--make-vocab-size-divisible-by")) set("vocab_divisible_by", *v, "--make-vocab-size-divisible-by");
  else if (a_.whole_command) set_default("vocab_divisible_by", 128, "no --make-vocab-size-divisible-by: Megatron-LM's 128");
  if (given("--padded-vocab-size")) m_.ignored.push_back("--padded-vocab-size (the model file's vocabulary is used)");
  if (given("--group-query-attention")) {
    num("--num-query-groups", s.kv_heads, "kv_heads");
  } else if (given("--num-query-groups")) {
    m_.ignored.push_back("--num-query-groups (without --group-query-attention Megatron-LM ignores it)");
  } else if (a_.whole_command && s.heads) {
    s.kv_heads = s.heads;
    s.flag["kv_heads"] = "no --group-query-attention (one key/value head per query head)";
  }
  const bool whole = a_.whole_command;
  auto sw = [&](const char* flag, std::optional<bool>& field, const char* key, bool when_given, const char* absent) {
    if (given(flag)) {
      field = when_given;
      s.flag[key] = flag;
    } else if (whole) {
      field = !when_given;
      s.flag[key] = absent;
    }
  };
  sw("--swiglu", s.gated_mlp, "gated_mlp", true, "no --swiglu (a two-matrix GELU MLP)");
  sw("--untie-embeddings-and-output-weights", s.tied_embeddings, "tied_embeddings", false,
     "no --untie-embeddings-and-output-weights (tied embeddings)");
  sw("--disable-bias-linear", s.linear_bias, "linear_bias", false,
     "no --disable-bias-linear (biases on the linear layers)");
  sw("--multi-latent-attention", s.mla, "mla", true, "no --multi-latent-attention");
  if (given("--add-qkv-bias") || s.linear_bias) {
    s.qkv_bias = given("--add-qkv-bias") || s.linear_bias.value_or(false);
    s.flag["qkv_bias"] = given("--add-qkv-bias") ? "--add-qkv-bias" : s.flag["linear_bias"];
  }
  if (auto n = text("--normalization")) {
    if (*n == "RMSNorm" || *n == "LayerNorm") s.rmsnorm = *n == "RMSNorm";
    else refuse(*get("--normalization"), "this normalization is");
    s.flag["rmsnorm"] = as_typed(*get("--normalization"));
  } else if (whole) {
    s.rmsnorm = false;
    s.flag["rmsnorm"] = "no --normalization (LayerNorm)";
  }
  if (auto p = text("--position-embedding-type")) {
    if (*p == "rope" || *p == "yarn") s.position = wl::PositionKind::rope;
    else if (*p == "learned_absolute") s.position = wl::PositionKind::learned;
    else if (*p == "none") s.position = wl::PositionKind::none;
    else refuse(*get("--position-embedding-type"), "this position embedding is");
    s.flag["position"] = as_typed(*get("--position-embedding-type"));
  } else if (given("--use-rotary-position-embeddings")) {
    s.position = wl::PositionKind::rope;
    s.flag["position"] = "--use-rotary-position-embeddings";
  } else if (whole) {
    s.position = wl::PositionKind::learned;
    s.flag["position"] = "no --position-embedding-type (learned_absolute)";
  }
}

}  // namespace gpuplan::cli::detail
