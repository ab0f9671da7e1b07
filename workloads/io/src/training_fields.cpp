// The training scenario's field table (scenario_fields.hpp): every key of `gpuplan train` and its scenario files, once.
// The reader (scenario_io.cpp decode_training_scenario) checks the `spec` part; cli/cmd_train.cpp generates its flags
// and the overlay from `flags`; the GUI takes `label` and the tooltip; `gpuplan schema` prints the whole row.
#include "gpuplan/wl_io/scenario_fields.hpp"

#include <fmt/format.h>

#include "gpuplan/wl_io/scenario_io.hpp"
#include "scenario_row.hpp"

namespace gpuplan::wl_io {

using json_io::FieldType;

namespace {
constexpr double kMaxGpus = 1e7;  // far beyond any cluster; catches typos and overflow
using scenario_row::row;
}  // namespace

const ScenarioFieldTable& training_fields() {
  static const ScenarioFieldTable t{
      row("model", FieldType::string, "Model")
          .flags({"--model", "-m"})
          .help("model: library id or path to a config.json")
          .doc("library id or path to a model JSON / config.json"),
      row("gpu", FieldType::string, "GPU")
          .flags({"--gpu"})
          .help("GPU id or alias")
          .doc("GPU id or alias"),
      row("node", FieldType::string, "Node")
          .flags({"--node"})
          .help("node id (dgx-h100, ...)")
          .doc("node id (sets the GPU and the links)"),
      row("cluster", FieldType::string, "Cluster")
          .flags({"--cluster"})
          .help("cluster id")
          .doc("cluster id (sets node and fabric)"),
      row("gpus", FieldType::integer, "GPUs")
          .flags({"--gpus"})
          .help("total GPUs")
          .range(1, kMaxGpus)
          .doc("total GPUs"),
      row("tp", FieldType::integer, "TP")
          .flags({"--tp"})
          .help("tensor parallel")
          .otherwise("1")
          .range(1, 1024)
          .doc("tensor parallel size"),
      row("pp", FieldType::integer, "PP")
          .flags({"--pp"})
          .help("pipeline parallel")
          .otherwise("1")
          .range(1, 4096)
          .doc("pipeline parallel size"),
      row("dp", FieldType::integer, "DP")
          .flags({"--dp"})
          .help("data parallel")
          .otherwise("gpus / (tp·pp·cp)")
          .range(1, kMaxGpus)
          .doc("data parallel size"),
      row("cp", FieldType::integer, "CP")
          .flags({"--cp"})
          .help("context parallel")
          .otherwise("1")
          .range(1, 4096)
          .doc("context parallel size"),
      row("ep", FieldType::integer, "EP")
          .flags({"--ep"})
          .help("expert parallel")
          .otherwise("1")
          .range(1, 4096)
          .doc("expert parallel size"),
      row("etp", FieldType::integer, "Expert TP")
          .flags({"--etp"})
          .help("expert tensor parallel (MoE parallel folding): the routed experts split over etp·ep of the "
                "stage's tp·cp·dp GPUs")
          .otherwise("tp")
          .range(1, 1024)
          .doc("expert tensor parallel size (MoE parallel folding, Megatron-Core "
                "expert_tensor_parallel_size; default: tp): etp·ep must divide tp·cp·dp"),
      row("sequence_parallel", FieldType::boolean, "Sequence parallel")
          .flags({"--sp"})
          .help("sequence parallelism")
          .otherwise("on when TP > 1")
          .doc("Megatron sequence parallelism"),
      row("virtual_stages", FieldType::integer, "Virtual stages")
          .flags({"--virtual-stages"})
          .help("interleaved pipeline chunks per stage")
          .otherwise("1")
          .range(1, 1024)
          .doc("interleaved pipeline chunks per stage"),
      row("schedule", FieldType::string, "Schedule")
          .flags({"--schedule"})
          .help("1f1b, interleaved or dualpipe (DeepSeek-V3's bidirectional schedule: PP even, "
                "micro-batches even and at least 2·PP)")
          .otherwise("1f1b; interleaved when virtual_stages > 1")
          .choices({"1f1b", "interleaved", "dualpipe"})
          .doc("pipeline schedule: 1f1b, interleaved, or dualpipe (DeepSeek-V3's bidirectional schedule, "
                "arXiv:2412.19437 §3.2.1: PP even, an even number of micro-batches, at least 2·PP)"),
      row("micro_batch", FieldType::integer, "Micro-batch")
          .flags({"--micro-batch"})
          .help("sequences per micro-batch")
          .otherwise("1")
          .range(1, 1e6)
          .doc("sequences per micro-batch"),
      row("global_batch", FieldType::integer, "Global batch")
          .flags({"--global-batch"})
          .help("sequences per step")
          .otherwise("micro_batch × dp")
          .range(1, 1e9)
          .doc("sequences per optimizer step"),
      row("seq", FieldType::integer, "Sequence")
          .flags({"--seq"})
          .help("sequence length")
          .otherwise("2048")
          .range(1, 1e8)
          .doc("sequence length (tokens)"),
      row("precision", FieldType::string, "Precision")
          .flags({"--precision"})
          .help("bf16, fp16, fp8, fp4 (NVFP4), tf32, fp32")
          .otherwise("bf16")
          .choices({"bf16", "fp16", "fp8", "fp4", "fp32", "tf32"})
          .doc("GEMM precision (fp8 with fp8_recipe; fp4 = NVFP4 training, Transformer Engine "
                "NVFP4BlockScaling, on GPUs with FP4 tensor cores)"),
      row("fp8_recipe", FieldType::string, "FP8 recipe")
          .help("FP8 scaling recipe: delayed, tensorwise, mxfp8 or blockwise (needs precision fp8)")
          .otherwise("delayed")
          .choices({"delayed", "tensorwise", "mxfp8", "blockwise"})
          .doc("FP8 scaling (Megatron-LM --fp8-recipe): delayed (per tensor, amax history; the default), "
                "tensorwise (per tensor, current amax), mxfp8 (E8M0 scale per 32 elements; needs "
                "block-scaled tensor cores), blockwise (1x128 / 128x128 tiles, DeepSeek-V3)"),
      row("gradient_bytes", FieldType::number, "Gradient bytes")
          .flags({"--gradient-bytes"})
          .help("bytes per gradient element (2 or 4)")
          .otherwise("2; 4 with fp32, tf32 or amp")
          .range(1, 4)
          .doc("bytes per gradient element"),
      row("master_bytes", FieldType::number, "Master weight bytes")
          .flags({"--master-bytes"})
          .help("bytes per master weight in the optimizer (4 fp32, 2, 0 none)")
          .otherwise("4; 0 with fp32, tf32 or amp")
          .range(0, 4)
          .doc("bytes per parameter of the optimizer's master copy of the weights: 4 (an fp32 copy, Megatron's "
                "distributed optimizer), 2 (Apex DistributedFusedAdam's store_param_remainders, NeMo 1.x's "
                "distributed_fused_adam with bf16 parameters and fp32 optimizer dtype: the low 16 bits of each fp32 "
                "value beside the bf16 parameter; or its bf16 optimizer dtype with FP8 parameters) or 0 (the "
                "optimizer updates the 16-bit parameters directly: distributed_fused_adam with optimizer dtype = "
                "parameter dtype); sharded as the optimizer states are"),
      row("optimizer", FieldType::string, "Optimizer")
          .flags({"--optimizer"})
          .help("adamw, adamw-8bit, sgd; adam is Megatron-LM's spelling of adamw (--optimizer adam)")
          .otherwise("adamw")
          .choices({"adamw", "adamw-8bit", "sgd", "adam"})
          .spellings({"adam"})
          .doc("optimizer; adam is Megatron-LM's spelling (its default, --optimizer adam: Transformer Engine's or "
               "Apex's FusedAdam with decoupled weight decay, the same two moment states and step as adamw), "
               "priced as adamw"),
      row("optimizer_states", FieldType::string, "Optimizer states")
          .flags({"--optimizer-states"})
          .help("storage of the optimizer's moment states: fp32 or bf16 (DeepSeek-V3, NeMo optim.dtype "
                "bf16, Megatron --exp-avg-dtype bf16)")
          .otherwise("fp32")
          .choices({"fp32", "bf16"})
          .doc("storage of the optimizer's moment states (AdamW m, v; SGD momentum): fp32, or bf16 "
                "(DeepSeek-V3, NeMo optim.dtype bf16, Megatron --exp-avg-dtype bf16); adamw-8bit keeps its "
                "own 8-bit states"),
      row("optimizer_impl", FieldType::string, "Optimizer step")
          .flags({"--optimizer-impl"})
          .help("optimizer step: fused, foreach (PyTorch's default multi-tensor passes) or for-loop")
          .otherwise("fused")
          .choices({"fused", "foreach", "for-loop"})
          .doc("how the optimizer step runs: fused (one kernel: torch fused=True, Apex/Megatron/TE; the "
                "default), foreach (PyTorch's default on CUDA: one multi-tensor pass per elementwise op, 8 "
                "for AdamW) or for-loop (foreach=False: those ops per parameter tensor)"),
      row("fp8_params", FieldType::boolean, "FP8 parameters")
          .flags({"--fp8-params"})
          .help("FP8 working weights (Transformer Engine fp8_model_init, NeMo/Megatron fp8_params; needs "
                "precision fp8)")
          .otherwise("false")
          .doc("FP8 working weights (Transformer Engine fp8_model_init, NeMo/Megatron fp8_params): 1 B per "
                "weight, no bf16 copy; the fp32 master stays in the optimizer; needs precision fp8"),
      row("zero", FieldType::integer, "ZeRO")
          .flags({"--zero"})
          .help("ZeRO / FSDP stage 0-3: what is sharded across the data-parallel group")
          .otherwise("0")
          .range(0, 3)
          .doc("ZeRO / FSDP stage"),
      row("shard_group", FieldType::integer, "Shard group")
          .flags({"--shard-group"})
          .help("hybrid shard group size")
          .otherwise("the whole DP group")
          .range(1, kMaxGpus)
          .doc("hybrid sharding group size"),
      row("recompute", FieldType::string, "Recompute")
          .flags({"--recompute"})
          .help("activation recomputation: none, selective, full, selective_op (TorchTitan's op-level policy)")
          .otherwise("none")
          .choices({"none", "selective", "full", "selective_op"})
          .doc("activation recomputation: selective = Megatron's (the attention core recomputed); selective_op = "
               "TorchTitan's op-level selective AC (selective_ac_option 'op': the outputs of every odd matmul of a "
               "block, SDPA and the block input kept, every other op recomputed; dense attention + MLP layers "
               "without linear biases, TP 1, fused attention)"),
      row("recompute_method", FieldType::string, "Recompute method")
          .help("with recompute full: uniform or block (Megatron-Core --recompute-method)")
          .otherwise("uniform")
          .choices({"uniform", "block"})
          .doc("with recompute full: uniform = the layers of each pipeline chunk in groups of "
                "recompute_num_layers, each group checkpointed at its input and recomputed whole; block = "
                "only the first recompute_num_layers layers of each chunk recomputed, the rest keep their "
                "activations (Megatron-Core --recompute-method)"),
      row("recompute_num_layers", FieldType::integer, "Recompute layers")
          .help("with recompute full: the group size (uniform) or the recomputed layers per chunk (block)")
          .otherwise("1")
          .range(1, 1e6)
          .doc("with recompute full: the group size (uniform) or the recomputed layers per chunk (block) "
                "(Megatron-Core --recompute-num-layers); default 1 with uniform"),
      row("vocab_divisible_by", FieldType::integer, "Vocabulary padding")
          .flags({"--vocab-divisible-by"})
          .help("pad the vocabulary to a multiple of this × TP (Megatron-LM --make-vocab-size-divisible-by)")
          .otherwise("128 with fused kernels, 1 with eager")
          .range(1, 65536)
          .doc("pad the vocabulary to a multiple of this × TP (Megatron-LM "
                "--make-vocab-size-divisible-by); default 128 with fused kernels, 1 with eager kernels; 1 = "
                "unpadded (Megatron-Bridge when the model config sets vocab_size)"),
      row("flash_attention", FieldType::boolean, "Flash attention")
          .flags({"--flash"})
          .help("fused attention")
          .otherwise("true")
          .doc("fused attention"),
      row("dropout", FieldType::boolean, "Dropout")
          .flags({"--dropout"})
          .help("train with dropout or without")
          .otherwise("as the model's config says")
          .doc("train with dropout (attention probabilities and block outputs) or without; absent: as the "
                "model's config says"),
      row("attention_kernel", FieldType::string, "Attention kernel")
          .flags({"--attention-kernel"})
          .help("fa1, fa2 or fa3 (FA3/cuDNN on Hopper+, FA2 on Ampere; fa1: flash-attn <= 1.0.x or its Triton port)")
          .otherwise("fa3")
          .choices({"fa1", "fa2", "fa3"})
          .doc("fused attention generation"),
      row("packed_documents", FieldType::string, "Packed documents")
          .flags({"--packed-documents"})
          .help("sequences packed from documents that attend only to themselves: their length, TOKENS, "
                "lognormal:MEAN,SD or TOKENS:WEIGHT,... (NeMo packed_sequence; Megatron-LM "
                "--dataloader-inter-document-masking or --sft)")
          .otherwise("off: one document per sequence")
          .doc("sequence packing with per-document attention (Transformer Engine's THD layout with cu_seqlens: NeMo "
               "`packed_sequence` with `packed_sequence_specs.packed_sequence_size` = seq_len; Megatron-LM "
               "--dataloader-inter-document-masking, or --sft): the documents' length in tokens as one length, "
               "lognormal:MEAN,SD or TOKENS:WEIGHT,...; attention is priced per document (Σ d_i²/2 causal pairs "
               "per sequence), the GEMMs, norms and memory see seq_len tokens; needs flash_attention"),
      row("kernels", FieldType::string, "Kernels")
          .flags({"--kernels"})
          .help("fused (Megatron/TE) or eager (PyTorch modules)")
          .otherwise("fused")
          .choices({"fused", "eager"})
          .doc("non-GEMM op implementation"),
      row("cross_entropy", FieldType::string, "Cross-entropy kernels")
          .flags({"--cross-entropy"})
          .help("LM-loss kernels with fused kernels: te (one fused pass), native (Megatron-Core's jit-fused "
                "passes), unfused (Megatron-LM's default: one pass per op over fp32 logits), eager (PyTorch's "
                "cross_entropy, as a stack that compiles only its blocks runs it); flash (FlashAttention's fused "
                "cross entropy, also with eager kernels)")
          .otherwise("te")
          .choices({"te", "native", "unfused", "eager", "flash"})
          .doc("LM-loss cross-entropy kernels under fused kernels: te = one fused pass (Transformer "
                "Engine; Megatron-LM --cross-entropy-fusion-impl te), native = Megatron-Core's jit-fused "
                "passes (--cross-entropy-loss-fusion), unfused = Megatron-Core's unfused passes over fp32 "
                "logits (Megatron-LM's default), eager = PyTorch's F.cross_entropy over fp32-upcast logits, "
                "as eager kernels run it (TorchTitan compiles its transformer blocks, not the loss); flash = "
                "FlashAttention's xentropy kernel (llm-foundry's fused_crossentropy), the one value eager kernels "
                "take: logits and a new gradient, 16-bit"),
      row("norm_kernel", FieldType::string, "RMSNorm kernels")
          .flags({"--norm-kernel"})
          .help("RMSNorm as one fused kernel each way (fused) or as PyTorch ops, one kernel each (composite: "
                "TorchTitan's and Hugging Face's RMSNorm in eager mode)")
          .otherwise("fused")
          .choices({"fused", "composite"})
          .doc("RMSNorm implementation: fused = one kernel forward and one backward (Transformer Engine, "
               "Apex, PyTorch's fused rms_norm, torch.compile); composite = the norm written as PyTorch ops "
               "(fp32 upcast, pow, mean, rsqrt, multiply, cast back, weight multiply), each its own kernel "
               "forward and in autograd's backward (TorchTitan's RMSNorm, Hugging Face's LlamaRMSNorm)"),
      row("mixed_precision", FieldType::string, "Mixed precision")
          .flags({"--mixed-precision"})
          .help("megatron (bf16 params + fp32 main) or amp (fp32 params, autocast)")
          .otherwise("megatron")
          .choices({"megatron", "amp"})
          .doc("mixed-precision scheme"),
      row("zero3_gather", FieldType::string, "ZeRO-3 gather style")
          .flags({"--zero3-gather"})
          .help("with zero 3: per_unit (one flat collective per layer, prefetched: FSDP, DeepSpeed >= 0.6) or "
                "per_tensor_blocking (DeepSpeed 0.3.13-0.5.x: one collective per parameter tensor, not overlapped)")
          .otherwise("per_unit")
          .choices({"per_unit", "per_tensor_blocking"})
          .doc("with zero 3: per_unit = one flat all-gather and reduce-scatter per decoder layer, prefetched "
                "behind compute (PyTorch FSDP, DeepSpeed >= 0.6); per_tensor_blocking = DeepSpeed 0.3.13-0.5.x: "
                "one all-gather per parameter tensor after a device synchronize, gathers not overlapped, one "
                "reduce-scatter per parameter tensor"),
      row("offload", FieldType::string, "CPU offload")
          .flags({"--offload"})
          .help("none or optimizer: ZeRO-Offload, master weights + optimizer states in host memory, "
                "optimizer step on the CPU (needs ZeRO ≥ 1)")
          .otherwise("none")
          .choices({"none", "optimizer"})
          .doc("CPU offload: optimizer = ZeRO-Offload (master weights + optimizer states in host memory, "
                "optimizer step on the CPU; needs zero ≥ 1)"),
      row("activation_offload_layers", FieldType::integer, "Activation offload layers")
          .flags({"--activation-offload-layers"})
          .help("saved activations of the first N decoder layers offloaded to host memory (Megatron-Core "
                "--cpu-offloading-num-layers)")
          .otherwise("0")
          .range(0, 1e6)
          .doc("activation CPU offloading: the saved activations of the first N decoder layers copied to "
                "host memory during the forward and back before their backward, beside the compute "
                "(Megatron-Core --cpu-offloading-num-layers; N < layers, PP 1, no recompute)"),
      row("lora_rank", FieldType::integer, "LoRA rank")
          .flags({"--lora-rank"})
          .help("LoRA fine-tuning: adapter rank (0 = full fine-tuning); the base weights are frozen")
          .otherwise("0")
          .range(0, 65536)
          .doc("LoRA adapter rank; 0 = full fine-tuning (the base weights frozen otherwise: no weight "
                "gradients or optimizer states for them)"),
      row("lora_targets", FieldType::string, "LoRA targets")
          .flags({"--lora-targets"})
          .help("linear layers with adapters: qkv, attention, mlp, all")
          .otherwise("all")
          .choices({"qkv", "attention", "mlp", "all"})
          .doc("linear layers with LoRA adapters"),
      row("lora_base", FieldType::string, "LoRA base")
          .flags({"--lora-base"})
          .help("storage of the frozen base weights: same, int8, fp8, nf4 (QLoRA)")
          .otherwise("same")
          .choices({"same", "int8", "fp8", "nf4"})
          .doc("storage of the frozen base weights: same (the precision's), int8, fp8, nf4 (QLoRA: 4.127 "
                "bits per weight)"),
      row("lora_dropout", FieldType::number, "LoRA dropout")
          .flags({"--lora-dropout"})
          .help("dropout probability on the LoRA adapters' input (NeMo adapter_dropout, position 'pre')")
          .otherwise("0")
          .range(0, 0.99)
          .doc("dropout probability on each LoRA adapter's input (NeMo ParallelLinearAdapter dropout_position "
                "'pre'; MLPerf Llama 2 70B LoRA: 0.1): a dropout pass forward and backward over the adapter's "
                "input and its 1-byte mask kept for the backward; 0 = none"),
      row("overlap_grad_reduce", FieldType::boolean, "Overlap DP gradient reduction")
          .flags({"--overlap-grad-reduce"})
          .help("overlap DP reduction with backward")
          .otherwise("true")
          .doc("overlap DP gradient reduction with backward"),
      row("overlap_param_gather", FieldType::boolean, "Overlap parameter all-gather")
          .flags({"--overlap-param-gather"})
          .help("overlap parameter gathers")
          .otherwise("true")
          .doc("overlap parameter all-gather with compute"),
      row("dp_max_ctas", FieldType::integer, "DP communicator max CTAs")
          .flags({"--dp-max-ctas"})
          .help("the most CTAs (NCCL channels) of the data-parallel communicator (NCCL_MAX_CTAS; Megatron-Core "
                "nccl_communicator_config_path max_ctas of dp / dp_cp); 0 = NCCL's own channel count")
          .otherwise("0")
          .range(0, 64)
          .doc("the most CTAs (NCCL channels) the data-parallel communicator may use (NCCL_MAX_CTAS, or Megatron-"
                "Core's per-communicator max_ctas for dp / dp_cp; MLPerf v4.1-v5.1 NeMo: 8): its gradient "
                "reduce-scatter and parameter all-gather move at most that many CTAs' rate (one CTA: 0.778 of an "
                "NVLink link, measured on H200) and take that many SMs from compute; 0 = NCCL's own count"),
      row("dp_bucket_size", FieldType::integer, "DP bucket size (parameters)")
          .flags({"--dp-bucket-size"})
          .help("parameters per data-parallel gradient bucket (Megatron --ddp-bucket-size); 0 = the framework's "
                "default: Megatron max(40M, 1M x DP·CP), PyTorch DDP 25 MiB")
          .otherwise("0")
          .range(0, 1e12)
          .doc("parameters per data-parallel gradient bucket (Megatron-Core DistributedDataParallelConfig "
               "bucket_size, --ddp-bucket-size; NeMo 2 with the distributed optimizer: 134217728; MLPerf v5.1 "
               "Llama 3.1 8B: 768000000): sets the DP collective calls per step and the bucket reduced last and "
               "gathered first, which stays exposed; 0 (default) = Megatron's max(40M, 1M x DP·CP), PyTorch DDP's "
               "25 MiB; otherwise at least 1000000; not with zero 3"),
      row("sharp", FieldType::boolean, "SHARP for the DP reductions")
          .flags({"--sharp"})
          .help("in-network reduction (InfiniBand SHARP through NCCL CollNet) for the data-parallel collectives "
                "(Megatron-LM --use-sharp, NeMo sharp: true)")
          .otherwise("false")
          .doc("the data-parallel group's collectives may run as NCCL CollNet over a scale-out fabric whose switches "
               "reduce (InfiniBand SHARP: the link file's in_network_reduction), the fastest algorithm kept: an "
               "all-reduce sends each rank's 1/s share across once each way instead of a ring's 2(d−1)/d, at 0.85 of "
               "the NIC's bus rate; a reduce-scatter / all-gather (distributed optimizer, FSDP) moves a ring's bytes "
               "at 0.9 of it in one network step instead of d − 1 (NCCL tuning.cc CollNet Direct); Megatron-LM "
               "--use-sharp (NCCL_COLLNET_ENABLE=1 on the dp and dp_cp groups), NeMo's sharp: true; NVLink SHARP "
               "(NVLS) inside a domain is NCCL's default and needs no flag"),
      row("defer_embedding_wgrad", FieldType::boolean, "Defer the LM-head wgrad")
          .flags({"--defer-embedding-wgrad-compute"})
          .help("the last stage's LM-head weight-gradient GEMMs run in the pipeline flush (Megatron-LM "
                "--defer-embedding-wgrad-compute; needs pp > 1)")
          .otherwise("false")
          .doc("Megatron-LM --defer-embedding-wgrad-compute: the last pipeline stage buffers the output layer's "
               "input and output gradient and runs its weight-gradient GEMMs after its last backward, beside the "
               "pipeline drain (the other stages' backwards of the last micro-batch); what outlasts the drain is "
               "exposed; needs pp > 1 (Megatron-Core refuses it without pipeline parallelism)"),
      row("wgrad_deferral_limit", FieldType::integer, "Deferred micro-batches")
          .flags({"--wgrad-deferral-limit"})
          .help("micro-batches whose LM-head wgrad is deferred (Megatron-LM --wgrad-deferral-limit); 0 = all")
          .otherwise("0")
          .range(0, 1e9)
          .doc("micro-batches whose LM-head weight gradient is deferred to the flush, the first N of the step "
               "(Megatron-LM --wgrad-deferral-limit); 0 = all of them; only with defer_embedding_wgrad"),
      row("overlap_tp_comm", FieldType::boolean, "Overlap TP communication")
          .flags({"--overlap-tp"})
          .help("overlap TP communication with GEMMs")
          .otherwise("false")
          .doc("overlap TP communication with GEMMs"),
      row("tp_async_backward", FieldType::boolean, "Async TP backward all-reduce")
          .flags({"--tp-async-backward"})
          .help("the column-parallel linears' backward TP collective runs beside the weight-gradient GEMM (Megatron-LM "
                "from September 2021, Megatron-Core); false: after the linear's backward, blocking (Megatron-LM 2021)")
          .otherwise("true")
          .doc("the column-parallel linears' backward TP all-reduce (reduce-scatter under sequence parallelism) "
               "launched asynchronously beside the weight-gradient GEMM (Megatron-LM "
               "async_tensor_model_parallel_allreduce, September 2021; Megatron-Core); false: issued after the "
               "linear's whole backward and waited for (Megatron-LM before it: mpu/mappings.py "
               "_CopyToModelParallelRegion.backward), so all of the TP time is exposed"),
      row("fused_wgrad_accumulation", FieldType::boolean, "Fused weight-gradient accumulation")
          .flags({"--fused-wgrad-accumulation"})
          .help("the weight-gradient GEMM accumulates into the gradient buffer in its epilogue (Megatron-LM "
                "gradient_accumulation_fusion, Transformer Engine); false: a fresh 16-bit gradient added by a separate "
                "kernel (Megatron-LM 2021)")
          .otherwise("true")
          .doc("with Megatron mixed precision and fused kernels, the weight-gradient GEMM accumulates into the "
               "gradient buffer in its epilogue (Megatron-LM gradient_accumulation_fusion from February 2022, "
               "Transformer Engine fuse_wgrad_accumulation); false: it writes a fresh 16-bit gradient that a separate "
               "kernel adds into the buffer (PyTorch's AccumulateGrad or Megatron-LM's main_grad.add_ hook, as "
               "Megatron-LM ran in 2021): 2 + 2·b_g bytes per weight element instead of 2·b_g − 2"),
      row("embedding_in_pipeline_split", FieldType::boolean, "Embedding in pipeline split")
          .flags({"--embedding-in-pipeline-split"})
          .help("count the embedding as a layer of the first pipeline chunk (Megatron "
                "--account-for-embedding-in-pipeline-split)")
          .otherwise("false")
          .doc("count the embedding as one layer of the first pipeline chunk when splitting the layers "
                "(Megatron --account-for-embedding-in-pipeline-split)"),
      row("loss_in_pipeline_split", FieldType::boolean, "Loss in pipeline split")
          .flags({"--loss-in-pipeline-split"})
          .help("count the loss as a layer of the last pipeline chunk (Megatron "
                "--account-for-loss-in-pipeline-split)")
          .otherwise("false")
          .doc("count the loss as one layer of the last pipeline chunk when splitting the layers (Megatron "
                "--account-for-loss-in-pipeline-split)"),
      row("first_stage_layers", FieldType::integer, "First-stage layers")
          .flags({"--first-stage-layers"})
          .help("decoder layers of the first pipeline stage (Megatron --decoder-first-pipeline-num-layers)")
          .range(1, 1e6)
          .doc("decoder layers of the first pipeline stage, the rest split evenly (Megatron "
                "--decoder-first-pipeline-num-layers)"),
      row("last_stage_layers", FieldType::integer, "Last-stage layers")
          .flags({"--last-stage-layers"})
          .help("decoder layers of the last pipeline stage (Megatron --decoder-last-pipeline-num-layers)")
          .range(1, 1e6)
          .doc("decoder layers of the last pipeline stage, the rest split evenly (Megatron "
                "--decoder-last-pipeline-num-layers)"),
      row("pipeline_layout", FieldType::string, "Pipeline layout")
          .flags({"--pipeline-layout"})
          .help("layers of every pipeline chunk in Megatron's layout syntax, e.g. 'Et*3|(tt|)*29,t|L' "
                "(Megatron --pipeline-model-parallel-layout)")
          .doc("layers of every pipeline chunk, Megatron --pipeline-model-parallel-layout syntax (e.g. "
                "\"Et*3|(tt|)*29,t|L\": E embedding, t decoder layer, m multi-token-prediction layer (in "
                "the loss's chunk), L loss, | between chunks, (...)*N and c*N repeat); chunks = pp × "
                "virtual stages"),
      row("overlap_p2p_comm", FieldType::boolean, "Overlap pipeline sends")
          .flags({"--overlap-p2p"})
          .help("interleaved schedule: overlap pipeline sends with the neighbouring chunks' compute (as "
                "Megatron-LM)")
          .otherwise("true")
          .doc("interleaved schedule: pipeline sends overlapped with the neighbouring chunks' compute "
                "(Megatron's default; --no-overlap-p2p-communication turns it off)"),
      row("ep_a2a_overlap", FieldType::boolean, "Overlap EP all-to-all")
          .flags({"--ep-a2a-overlap"})
          .help("MoE: the expert-parallel all-to-all of one micro-batch beside another's compute in the "
                "steady 1F1B phase (Megatron-Core --overlap-moe-expert-parallel-comm with "
                "--delay-wgrad-compute)")
          .otherwise("false")
          .doc("MoE: the expert-parallel all-to-all of one micro-batch overlapped with another's compute "
                "in the steady 1F1B phase (Megatron-Core --overlap-moe-expert-parallel-comm with "
                "--delay-wgrad-compute)"),
      row("cuda_graphs", FieldType::string, "CUDA graphs")
          .flags({"--cuda-graphs"})
          .help("kernels replayed from CUDA graphs: none, layer (each decoder layer forward and backward: "
                "Megatron-LM --enable-cuda-graph, scope full; Megatron-Bridge / NeMo cuda_graphs), attn (the "
                "attention half only), full_iteration (the whole forward-backward, not the optimizer)")
          .otherwise("none")
          .choices({"none", "layer", "attn", "full_iteration"})
          .doc("CUDA graphs in training (Megatron-LM --enable-cuda-graph with --cuda-graph-scope full | attn | "
               "full_iteration, core_v0.14.0 megatron/training/arguments.py; Megatron-Bridge and NeMo 2 "
               "cuda_graphs = layer): a captured kernel pays the in-graph fixed cost (the GPU's measured per-class "
               "costs, else 2.5 µs) instead of the eager launch (5 µs); layer and full_iteration capture each "
               "decoder layer except a dropless MoE block (its split sizes go to the host), attn only the input "
               "norm, attention and its residual add; full_iteration also the embedding, LM head and loss; the "
               "optimizer step, the gradient and parameter collectives and the pipeline sends stay eager"),
      row("moe_router_fusion", FieldType::boolean, "Fused MoE router")
          .flags({"--moe-router-fusion"})
          .help("MoE: Megatron-Core's fused router kernels (Transformer Engine fused top-k and aux loss; "
                "--moe-router-fusion) or its unfused PyTorch ops")
          .otherwise("true")
          .doc("MoE, fused kernels: Megatron-Core's router with Transformer Engine's fused top-k/score and "
               "aux-loss kernels (--moe-router-fusion; 6 + 6 small kernels per layer and micro-batch beyond the "
               "gating GEMM) or as PyTorch ops (false: Megatron-LM's default, 24 + 11 with softmax scores; "
               "docs/megatron-moe-layer.md)"),
      row("pp_scatter_gather", FieldType::boolean, "Pipeline scatter/gather")
          .flags({"--pp-scatter-gather"})
          .help("split pipeline sends over TP without sequence parallelism, all-gathered by the receiver "
                "(Megatron-LM before Megatron-Core)")
          .otherwise("false")
          .doc("pipeline sends split over TP and all-gathered by the receiver without sequence parallelism "
                "(Megatron-LM's scatter/gather optimisation before Megatron-Core, 2021-2023)"),
      row("recompute_modules", FieldType::string_list, "Recompute modules")
          .flags({"--recompute-modules"})
          .help("modules recomputed in the backward instead of kept (Megatron --recompute-modules): "
                "layernorm, mla_up_proj, moe_act, mlp (comma-separated)")
          .doc("modules whose outputs are recomputed in the backward instead of kept (Megatron-Core "
                "--recompute-modules): layernorm (every norm), mla_up_proj (MLA's q/kv up-projections), "
                "moe_act (the experts' activation), mlp (the dense MLP of the non-MoE layers, run again in "
                "the backward); DeepSeek-V3 recomputes all three (arXiv:2412.19437 §3.2.3, §3.3.2)"),
      row("ep_dispatch", FieldType::string, "EP dispatch")
          .flags({"--ep-dispatch"})
          .help("MoE dispatch/combine: all-to-all (NCCL) or deepep (DeepSeek-V3/DeepEP: once per node over "
                "InfiniBand, NVLink forwarding inside it; FP8 dispatch under precision fp8)")
          .otherwise("all-to-all")
          .choices({"all-to-all", "deepep"})
          .doc("MoE token dispatch/combine: all-to-all (NCCL, one copy per token and expert; "
                "Megatron-Core's alltoall dispatcher) or deepep (DeepSeek-V3 §3.2.2 / DeepEP normal "
                "kernels: once per destination node over InfiniBand, forwarded inside the node over NVLink; "
                "FP8 dispatch under FP8 GEMMs, BF16 combine)"),
      row("activation_func_fp8_input_store", FieldType::boolean, "FP8 SwiGLU input store")
          .flags({"--activation-func-fp8-input-store"})
          .help("keep the SwiGLU input (the fc1 output) for the backward in FP8, 1 B instead of 2 (Megatron-Core "
                "activation_func_fp8_input_store; MLPerf FP8_ACT)")
          .otherwise("false")
          .doc("the SwiGLU input (the fc1 output [gate | up]) kept for the backward in FP8, 1 B instead of 2 "
               "(Megatron-Core TransformerConfig.activation_func_fp8_input_store, NeMo's activation_func_fp8_input_store, "
               "MLPerf's FP8_ACT=1); SwiGLU models with fused kernels only"),
      row("fp8_dot_product_attention", FieldType::boolean, "FP8 dot-product attention")
          .flags({"--fp8-dot-product-attention"})
          .help("run the fused attention in FP8 and keep its Q, K, V and output for the backward in FP8 (Megatron-Core "
                "fp8_dot_product_attention; MLPerf FP8_DPA); needs precision fp8 or fp4")
          .otherwise("false")
          .doc("Transformer Engine's FP8 dot-product attention (Megatron-Core TransformerConfig.fp8_dot_product_attention, "
               "--fp8-dot-product-attention; NeMo/MLPerf FP8_DPA=1): Q, K, V quantised to FP8 before the fused kernel and "
               "its output dequantised after it (the backward likewise for dO and dQ, dK, dV); the saved Q, K, V and "
               "output at 1 B (the output at 2 B under the tensorwise recipe); the kernel itself at the 16-bit "
               "fused-attention rate (no FP8 fused-attention rate measured); needs precision fp8 (or fp4), fused kernels "
               "and fused attention"),
      row("attention_output_store", FieldType::string, "Attention output store")
          .flags({"--attention-output-store"})
          .help("attention output kept for the backward under FP8: separate (16-bit for the attention "
                "kernel + FP8 for the O projection) or e5m6 (one shared 12-bit copy, DeepSeek-V3 §3.3.3)")
          .otherwise("separate")
          .choices({"separate", "e5m6"})
          .doc("how the attention output is kept for the backward under FP8 GEMMs: separate (the attention "
                "kernel's 16-bit output and the O projection's FP8 copy, Transformer Engine's way; the "
                "default) or e5m6 (one 12-bit E5M6 copy shared by both, DeepSeek-V3 arXiv:2412.19437 "
                "§3.3.3)"),
      row("fp8_weight_copies", FieldType::string, "FP8 weight copies")
          .flags({"--fp8-weight-copies"})
          .help("quantised GEMM weights under FP8/FP4: cached (kept across micro-batches; Megatron-Core's default) "
                "per_microbatch (disable_parameter_transpose_cache under Transformer Engine <= 1.10) or "
                "cached_one_layout (one FP8 copy kept, transposed in each micro-batch: DeepSeek-V3's framework)")
          .otherwise("cached")
          .choices({"cached", "per_microbatch", "cached_one_layout"})
          .doc("whether Transformer Engine keeps the quantised copies of the GEMM weights across micro-batches: "
               "cached (Megatron-Core passes is_first_microbatch: a 16-bit weight is quantised once per step, an "
               "FP8 parameter keeps its transpose; the default) or per_microbatch (Megatron-Core / NeMo "
               "disable_parameter_transpose_cache=True under Transformer Engine <= 1.10: a 16-bit weight is "
               "quantised in each micro-batch and the copy kept until its backward; an FP8 parameter is transposed "
               "in each backward GEMM and the transpose freed). From Transformer Engine 1.11 an FP8 parameter keeps "
               "its transpose whatever Megatron passes: there, per_microbatch holds for 16-bit weights only. "
               "cached_one_layout: one FP8 copy per GEMM weight kept across micro-batches and the other layout "
               "made from it by an FP8 transpose in every micro-batch and freed, as DeepSeek-V3's framework runs "
               "(deepseek-ai/profile-data train.json: no weight quantisation and one 128x128-tile FP8 transpose "
               "per GEMM weight in each chunk; DeepGEMM takes only the NT layout on SM90); for the delayed, "
               "tensorwise and blockwise recipes, whose weight copies transpose exactly"),
      row("param_layout", FieldType::string, "Parameter layout")
          .flags({"--param-layout"})
          .help("how the framework allocates weights, gradients and optimizer states: per_tensor (one tensor per "
                "parameter: PyTorch loops, DDP, FSDP2/TorchTitan, DeepSpeed) or contiguous (Megatron-Core's "
                "param_and_grad_buffer); sets the allocator fragmentation reserve, 5% or 0.5% of the allocated peak")
          .otherwise("per_tensor")
          .choices({"per_tensor", "contiguous"})
          .doc("how the static training state is allocated, which sets the caching allocator's fragmentation "
               "reserve on the allocated peak. per_tensor (the default): one tensor per parameter, gradient and "
               "optimizer state, gradients made afresh each step (PyTorch's zero_grad(set_to_none=True), DDP, "
               "FSDP2 / TorchTitan's per-parameter DTensors, DeepSpeed): 5% (vllm-project/compressed-tensors PR#587; "
               "4.97-6.61% measured on an H200, mem_headroom.json). contiguous: the 16-bit weights and gradients are "
               "views of one buffer each (Megatron-Core DDP's _ParamAndGradBuffer, megatron/core/distributed/"
               "param_and_grad_buffer.py; Megatron-FSDP's DataParallelBuffer, Megatron-LM d98e8a64): 0.5%, the larger "
               "of 0.14% and 0.48% measured on an H200 with that layout emulated (mem_headroom_contiguous.json). "
               "--megatron-args sets contiguous"),
      row("moe_imbalance", FieldType::number, "MoE imbalance")
          .flags({"--moe-imbalance"})
          .help("MoE load imbalance: busiest expert-parallel rank's tokens over the mean (1: balanced)")
          .otherwise("1")
          .range(1, 1024)
          .doc("MoE load imbalance: tokens of the busiest expert-parallel rank over the mean (1 = "
                "balanced, the default)"),
      row("moe_capacity_factor", FieldType::number, "MoE capacity factor")
          .flags({"--moe-capacity-factor"})
          .help("MoE expert capacity f (Megatron --moe-expert-capacity-factor): each expert takes at most "
                "f·k·T/E tokens, the rest dropped (unset: dropless)")
          .range(0.01, 64)
          .doc("MoE expert capacity factor f (Megatron-Core --moe-expert-capacity-factor): each expert takes at "
                "most ⌈f·k·T/E⌉ of a micro-batch's routed tokens and drops the rest; the busiest EP rank carries "
                "min(moe_imbalance, f) times the balanced rows (f < 1 drops tokens even when balanced). Unset: "
                "dropless"),
      row("moe_pad_to_capacity", FieldType::boolean, "MoE pad to capacity")
          .flags({"--moe-pad-to-capacity"})
          .help("MoE: pad every expert's input to its capacity (Megatron --moe-pad-expert-input-to-capacity; "
                "needs --moe-capacity-factor): fixed split sizes, no host sync")
          .otherwise("false")
          .doc("MoE: every expert's input padded to exactly its capacity (Megatron-Core "
                "--moe-pad-expert-input-to-capacity, Megatron-Bridge's token-drop runs with capacity factor 1): "
                "the expert GEMMs and the all-to-all carry f·k·T rows, padding included, and the dispatcher knows "
                "its split sizes without a host synchronisation. Needs moe_capacity_factor"),
      row("mtp_layers", FieldType::integer, "MTP layers")
          .flags({"--mtp-layers"})
          .help("multi-token-prediction modules trained with the model (DeepSeek-V3: 1; at most the "
                "model's)")
          .otherwise("0")
          .range(0, 64)
          .doc("multi-token-prediction modules trained with the model (DeepSeek-V3 §2.2; Megatron "
                "--mtp-num-layers), at most the model's"),
      row("description", FieldType::string, "Description")
          .help("what the scenario is (free text)")
          .doc("what the scenario is (free text, not read by the model)"),
      row("sources", FieldType::string_list, "Sources")
          .help("where each setting comes from (free text)")
          .doc("where each setting comes from (free text, not read by the model)"),
      row("tokens", FieldType::number, "Tokens")
          .flags({"--tokens"})
          .help("token budget for time to train and cost")
          .range(1, 1e18)
          .doc("token budget"),
      row("price_usd_per_hour", FieldType::number, "$/GPU-h")
          .flags({"--price"})
          .help("$/GPU-hour")
          .otherwise("the GPU's indicative price")
          .range(0, 1e4)
          .doc("$/GPU-hour"),
  };
  return t;
}

const json_io::FieldTable& training_scenario_fields() {
  static const json_io::FieldTable t = field_specs(training_fields());
  return t;
}

}  // namespace gpuplan::wl_io
