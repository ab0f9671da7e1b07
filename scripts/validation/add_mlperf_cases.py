#!/usr/bin/env python3
"""Add the MLPerf Training v4.1 GPT-3 175B, v5.0 / v5.1 Llama 3.1 405B and v4.1 / v5.0 Llama 2 70B LoRA rows, the v5.1 Llama 3.1 8B rows and AMD's v5.1 LoRA
rows to
data/validation/training_cases.json.

Usage: add_mlperf_cases.py MIRROR_ROOT   (MIRROR_ROOT holds mlcommons+training_results_v4.1/repo, ..._v5.0/repo, ..._v5.1/repo)
       add_mlperf_cases.py --express-fp8-attention   (re-map FP8_DPA in the rows already written)

Each row's throughput comes from mlperf_steady_state.py over the submission's result_*.txt (three runs each); the
layout from the submission's config_*.sh (named in the row). Rows already present (same id) are replaced.
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "..", "data", "validation", "training_cases.json")


def steady(root, rnd, results, block_unit=None, seq=None):
    repo = os.path.join(root, f"mlcommons+training_results_{rnd}", "repo")
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    cmd = [sys.executable, os.path.join(HERE, "mlperf_steady_state.py"), repo, commit, results]
    if block_unit:
        cmd += ["--block-unit", block_unit]
    if seq:
        cmd += ["--seq", str(seq)]
    return commit, json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def row(case_id, rnd, commit, results, s, files, sc, per_gpu, unit, notes):
    """One validation case in training_cases.json's layout (data/validation/README.md)."""
    if "NVIDIA/results" in results:
        # NVIDIA's recipes run NeMo on Megatron-Core, whose DDP keeps weights and gradients in one buffer each
        # (megatron/core/distributed/param_and_grad_buffer.py): the contiguous fragmentation reserve (#22 item 4).
        sc = {"param_layout": "contiguous", **sc}
    return {
        "id": case_id,
        "source": (f"mlcommons/training_results_{rnd} (commit {commit}), {results}/result_0..{len(s['runs']) - 1}.txt "
                   f"(MLLOG) + {files}"),
        "scenario": sc,
        "measured": {"metric": "tokens_per_s_per_gpu", "value": round(per_gpu, 1), "unit": unit},
        "also_measured": {"time_to_train_minutes": {
            "metric": "est_minutes_to_train", "value": round(s["run_minutes"], 3),
            "unit": "minutes, run_start..run_stop, median of the runs (includes evaluation and warm-up)"}},
        "notes": notes,
    }


LLAMA_COMMON = {
    "model": "llama-3.1-405b", "cp": 2, "micro_batch": 1, "seq": 8192, "zero": 1, "recompute": "none",
    "sequence_parallel": True, "overlap_grad_reduce": True, "overlap_param_gather": True, "kernels": "fused",
    "embedding_in_pipeline_split": True, "loss_in_pipeline_split": True, "schedule": "interleaved",
    "virtual_stages": 8, "pp": 8, "cross_entropy": "native",
}

# (round, submitter dir, results dir, node, gpus, tp, fp settings, config file, notes on the system and extras)
LLAMA = [
    ("v5.0", "NVIDIA", "eos-dfw_n64_ngc25.01_nemo", "dgx-h100", 512, 8, "fp8-h100", "config_DGXH100_64x8x288xtp8pp8cp2.sh"),
    ("v5.0", "NVIDIA", "eos-dfw_n256_ngc25.01_nemo", "dgx-h100", 2048, 8, "fp8-h100", "config_DGXH100_256x8x72xtp8pp8cp2.sh"),
    ("v5.0", "NVIDIA", "eos-dfw_n304_ngc25.01_nemo", "dgx-h100", 2432, 8, "fp8-h100", "config_DGXH100_304x8x64xtp8pp8cp2.sh"),
    ("v5.0", "NVIDIA", "eos-dfw_n320_ngc25.01_nemo", "dgx-h100", 2560, 8, "fp8-h100", "config_DGXH100_320x8x56xtp8pp8cp2.sh"),
    ("v5.0", "NVIDIA", "eos-dfw_n1024_ngc25.01_nemo", "dgx-h100", 8192, 8, "fp8-h100", "config_DGXH100_1024x8x24xtp8pp8cp2.sh"),
    ("v5.0", "NVIDIA", "tyche_ngpu256_ngc25.04_nemo", "gb200-nvl72", 256, 4, "fp8-gb200-50", "config_GB200_64x4x112xtp4pp8cp2_cg.sh"),
    ("v5.0", "NVIDIA", "tyche_ngpu512_ngc25.04_nemo", "gb200-nvl72", 512, 4, "fp8-gb200-50", "config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh"),
    ("v5.0", "IBM+CoreWeave+NVIDIA", "carina_ngpu512_ngc25.04_nemo", "gb200-nvl72", 512, 4, "fp8-gb200-50", "config_GB200_128x4x112xtp4pp8cp2.sh"),
    ("v5.0", "IBM+CoreWeave+NVIDIA", "carina_ngpu1024_ngc25.04_nemo", "gb200-nvl72", 1024, 4, "fp8-gb200-50", "config_GB200_256x4x48xtp4pp8cp2.sh"),
    ("v5.0", "IBM+CoreWeave+NVIDIA", "carina_ngpu1536_ngc25.04_nemo", "gb200-nvl72", 1536, 4, "fp8-gb200-50", "config_GB200_384x4x48xtp4pp8cp2.sh"),
    ("v5.0", "IBM+CoreWeave+NVIDIA", "carina_ngpu2048_ngc25.04_nemo", "gb200-nvl72", 2048, 4, "fp8-gb200-50", "config_GB200_512x4x40xtp4pp8cp2.sh"),
    ("v5.0", "IBM+CoreWeave+NVIDIA", "carina_ngpu2496_ngc25.04_nemo", "gb200-nvl72", 2496, 4, "fp8-gb200-50", "config_GB200_624x4x32xtp4pp8cp2.sh"),
    ("v5.1", "NVIDIA", "hsg_ngpu2560_ngc25.09_nemo", "gb200-nvl72", 2560, 4, "fp4-51", "config_GB200_640x4x24xtp4pp8cp2_cg_fp4.sh"),
    ("v5.1", "NVIDIA", "hsg_ngpu5120_ngc25.09_nemo", "gb200-nvl72", 5120, 4, "fp4-51", "config_GB200_1280x4x16xtp4pp8cp2_cg_fp4.sh"),
    ("v5.1", "NVIDIA", "theia_ngpu512_ngc25.09_nemo", "gb300-nvl72", 512, 2, "ambiguous-51", "config_GB300_128x4x72xtp2pp8cp2_cg.sh or config_GB300_128x4x72xtp2pp8cp2_cg_fp4.sh"),
    ("v5.1", "NVIDIA", "tyche_ngpu512_ngc25.09_nemo", "gb200-nvl72", 512, 4, "ambiguous-51", "config_GB200_128x4x144xtp4pp8cp2_cg.sh or config_GB200_128x4x144xtp4pp8cp2_cg_fp4.sh"),
]

SYSTEM = {
    "dgx-h100": "SYSJSON 'NVIDIA H100-SXM5-80GB', 8 per node, 8x ConnectX-7 IB NDR 400 Gb/s -> dgx-h100",
    "gb200-nvl72": "SYSJSON 'NVIDIA Blackwell GPU (GB200)' (189471 MiB), GB200 NVL72 racks (NVLink 5 + NVSwitch, 4 GPUs per compute tray), 4x ConnectX-7 IB NDR 400 Gb/s per tray -> gb200-nvl72",
    "gb300-nvl72": "SYSJSON 'NVIDIA Blackwell Ultra GPU (GB300)' (284208 MiB), GB300 NVL72 racks, 4x ConnectX-8 IB XDR 800 Gb/s per tray -> gb300-nvl72",
}


def llama_case(root, rnd, sub, name, node, gpus, tp, fp, config):
    results = f"{sub}/results/{name}/llama31_405b"
    commit, s = steady(root, rnd, results)
    gbs = s["runs"][0]["global_batch_size"]
    dp = gpus // (tp * 8 * 2)
    assert gbs % dp == 0, (name, gbs, dp)
    sc = {"model": "llama-3.1-405b", "node": node, "gpus": gpus, "tp": tp}
    sc.update({k: v for k, v in LLAMA_COMMON.items() if k != "model"})
    sc["dp"] = dp
    sc["global_batch"] = gbs
    impl = f"{sub}/benchmarks/llama31_405b/implementations/{name}"
    if fp == "fp8-h100":
        sc.update({"precision": "fp8", "fp8_recipe": "delayed", "fp8_params": True, "overlap_tp_comm": True})
        prec = ("config_common.sh FP8=True (FP8_HYBRID unset: E4M3 throughout), conf/custom.yaml fp8_recipe default "
                "'delayed' -> precision fp8, fp8_recipe delayed; FP8_PARAMS=True -> fp8_params true; TP_COMM_OVERLAP=True "
                "-> overlap_tp_comm true. Not expressible: SHARP for the DP reductions (NCCL_SHARP_GROUP_SIZE_THRESH=2), "
                "deferred embedding wgrad (DEFER_EMBEDDING_WGRAD_COMPUTE). No CUDA graphs.")
    elif fp == "fp8-gb200-50":
        sc.update({"precision": "fp8", "fp8_recipe": "delayed", "fp8_params": True, "overlap_tp_comm": True})
        prec = ("config_common.sh FP8=True (FP8_HYBRID unset: E4M3 throughout), conf/custom.yaml fp8_recipe default "
                "'delayed' -> precision fp8, fp8_recipe delayed; FP8_PARAM_GATHER=True -> fp8_params true; "
                "TP_COMM_OVERLAP=True -> overlap_tp_comm true. Not expressible: full-iteration CUDA graphs "
                "(config_common_cg.sh FULL_CUDA_GRAPH=True).")
    elif fp == "fp4-51":
        sc.update({"precision": "fp4", "fp8_params": False, "overlap_tp_comm": False})
        prec = ("config_common_fp4.sh FP4=True, FP8=False, FP4_RECIPE nvfp4 -> precision fp4 (NVFP4 training); "
                "FP8_PARAM_GATHER=False -> fp8_params false; TP_COMM_OVERLAP=False -> overlap_tp_comm false. Not "
                "expressible: full-iteration CUDA graphs (config_common_cg.sh FULL_CUDA_GRAPH=1, MCORE_CUDA_GRAPH=1), "
                "NVFP4 with random Hadamard transforms, stochastic rounding and 2D quantisation disabled "
                "(NVTE_NVFP4_DISABLE_*=1), FP8 current-scaling attention (NVTE_DPA_FP8_RECIPE=Float8CurrentScaling), "
                "SM caps for the userbuffer GEMMs (QKV/FC1_*_SM=16).")
    else:
        sc.update({"precision": "fp8", "fp8_params": True, "overlap_tp_comm": True})
        prec = None
    per_gpu = s["step_tokens_per_s"] / gpus
    runs = ", ".join(f"{r['median_step_time_s']:.3f}" for r in s["runs"])
    mlperf = "MLPerf Training " + rnd + " closed division"
    if prec is None:
        status = ("underspecified: the source does not record the precision of this run: the implementation "
                  f"directory holds an FP8 config and an NVFP4 config with the same layout ({config}), its README's "
                  "launch example is the same generic one in every directory, and neither the MLLOG nor the system "
                  "description says which one ran, so the case is kept with its layout and measured value but not "
                  "priced (either precision is expressible: fp8 with fp8_recipe tensorwise, or fp4).")
    else:
        status = "partial."
    notes = (f"{status} {mlperf}, {sub}, NeMo ({name.split('_')[-2]}). Measured value: steady-state throughput from the "
             f"MLLOG tracked_stats train_step_time of every optimizer step (the first step excluded): median step time "
             f"per run ({runs} s), median over the {len(s['runs'])} runs = {s['median_step_time_s']:.3f} s; tokens/s "
             f"= global_batch_size {gbs} x max_sequence_length 8192 / step; per GPU = that / {gpus}. "
             f"System: {SYSTEM[node]}. Layout from {config}: TP {tp}, PP 8, INTERLEAVED_PIPELINE 8 -> virtual_stages 8, "
             f"CONTEXT_PARALLEL 2, MICRO_BATCH_SIZE 1, dp = {gpus}/({tp}x8x2) = {dp}; global_batch from the log "
             f"({gbs} = MINIBS {gbs // dp} x DP {dp}); ASYM_PP_EMBED / ASYM_PP_LOSS True -> embedding_in_pipeline_split "
             f"and loss_in_pipeline_split (126 layers + 2 = 128 = 64 chunks of 2). USE_DIST_OPTIMIZER=True -> zero 1; "
             f"OVERLAP_GRAD_REDUCE / OVERLAP_PARAM_GATHER True; conf/custom.yaml: sequence_parallel True, "
             f"activations_checkpoint_granularity null -> recompute none, cross_entropy_loss_fusion True with the "
             f"default (native) fusion -> cross_entropy native, overlap_p2p_comm True (gpuplan's default). "
             + (prec + " " if prec else "")
             + "Model: llama-3.1-405b library file (MLPerf's Llama 3.1 405B, seq 8192). Time to train in also_measured.")
    gpu_tag = {"dgx-h100": "h100"}.get(node, node.split("-")[0])
    case_id = f"A-mlperf{rnd[1:].replace('.', '')}-llama31-405b-{gpu_tag}-{name.split('_')[0]}-{gpus}gpu"
    return row(case_id, rnd, commit, results, s,
               f"{impl}/{config}, config_common.sh, conf/custom.yaml", sc, per_gpu,
               f"tokens/s per GPU (derived: {gbs} x 8192 tokens / median step {s['median_step_time_s']:.3f} s / {gpus})", notes)


GPT3 = [
    ("eos_n32_ngc24.09_nemo", "dgx-h100", 256, 6, 2, "config_DGXH100_32x8x256x4x8_mbs2.sh", ""),
    ("eos_n64_ngc24.09_nemo", "dgx-h100", 512, 6, 2, "config_DGXH100_64x8x128x4x8_mbs2.sh", ""),
    ("b200_n8_preview_nemo", "dgx-b200", 64, 6, 2, "config_DGXB200_8x8x1024x4x8_mbs2_cg.sh",
     " Not expressible: per-layer CUDA graphs (LAYER_CUDA_GRAPH=1), FP8 reduce-scatter in the TP overlap (NVTE_UB_FP8_RS=1)."),
]


def gpt3_case(root, name, node, gpus, vp, mbs, config, extra):
    rnd = "v4.1"
    results = f"NVIDIA/results/{name}/gpt3"
    commit, s = steady(root, rnd, results, "tokens")
    gbs = s["runs"][0]["global_batch_size"]
    dp = gpus // 32
    assert gbs % (dp * mbs) == 0
    per_gpu = s["block_tokens_per_s"] / gpus
    sysd = ("SYSJSON 'NVIDIA H100-SXM5-80GB', 8 per node, 8x ConnectX-7 NDR 400 Gb/s, NVLink4 + NVSwitch -> dgx-h100"
            if node == "dgx-h100" else "SYSJSON NVIDIA B200 (preview category), 8 per node (DGX B200) -> dgx-b200")
    sc = {"model": "gpt3-175b", "node": node, "gpus": gpus, "tp": 4, "pp": 8, "cp": 1, "dp": dp,
          "micro_batch": mbs, "global_batch": gbs, "seq": 2048, "precision": "fp8", "fp8_recipe": "delayed", "zero": 1,
          "recompute": "none", "sequence_parallel": True, "overlap_grad_reduce": True, "overlap_param_gather": True,
          "kernels": "fused", "virtual_stages": vp, "fp8_params": True, "overlap_tp_comm": True,
          "cross_entropy": "native", "schedule": "interleaved"}
    runs = ", ".join(str(round(r["block_tokens_per_s"])) for r in s["runs"])
    notes = (f"partial. MLPerf Training v4.1 closed division, NVIDIA, NeMo ({name}). Measured value: steady-state "
             f"training throughput from the MLLOG block_start/block_stop pairs: tokens per block (the block's "
             f"epoch_count, which GPT-3 logs in tokens) / block wall time, the first block (warm-up) and the "
             f"evaluations between blocks excluded; median over the blocks of each run, then median of the "
             f"{len(s['runs'])} runs ({runs} tokens/s); per GPU = that / {gpus}. System: {sysd}. Layout from {config}: "
             f"TP 4, PP 8, INTERLEAVED_PIPELINE {vp} -> virtual_stages {vp} (96 layers = 48 chunks of 2), "
             f"MICRO_BATCH_SIZE {mbs}, dp = {gpus}/32 = {dp}; global_batch from the log ({gbs}). config_fp8.sh: FP8 "
             f"hybrid, delayed scaling (amax history 1024) -> precision fp8, fp8_recipe delayed; config_common.sh "
             f"FP8_PARAMS=True -> fp8_params true; USE_DIST_OPTIMIZER=True -> zero 1; conf/custom.yaml sequence_parallel "
             f"True, activations_checkpoint_granularity null -> recompute none, cross_entropy_loss_fusion True "
             f"(Megatron-Core's fused cross entropy in this container) -> cross_entropy native; TP_COMM_OVERLAP=True -> "
             f"overlap_tp_comm true; distributed_fused_adam overlap_grad_sync / overlap_param_sync True. Not "
             f"expressible: SHARP for DP reductions, deferred embedding wgrad (DEFER_EMBEDDING_WGRAD_COMPUTE).{extra} "
             f"Model: gpt3-175b library file. MLPerf v4.1 GPT-3 is not the held-out v3.1 round (the v4.1 11,616-GPU "
             f"row re-publishes the v4.0 run's logs, A-mlperf40-gpt3-175b-11616gpu, and is not repeated). Time to "
             f"train in also_measured.")
    return row(f"A-mlperf41-gpt3-175b-{node.split('-')[1]}-{gpus}gpu", "v4.1", commit, results, s,
               (f"NVIDIA/benchmarks/gpt3/implementations/{name}/{config}, config_common.sh, config_fp8.sh, "
                "conf/custom.yaml, conf/optim/distributed_fused_adam.yaml"), sc, per_gpu,
               f"tokens/s per GPU (derived: median block throughput {round(s['block_tokens_per_s'])} tokens/s over all GPUs / {gpus})", notes)


V51_EXTRAS = ("FP8 attention (FP8_DPA=1), Megatron-Core CUDA graphs (MCORE_CUDA_GRAPH=1), Transformer Engine's fused "
              "ops and fused QKV+RoPE (USE_TE_OPS=1, FUSED_SINGLE_QKV_ROPE=1)")

# Llama 2 70B LoRA (rank 16 on linear_qkv and linear_proj, alpha 32, seq 8192):
# (round, results dir, node, gpus, tp, cp, minibs, sp, config, settings line, extras not expressible)
LORA = [
    ("v4.1", "eos_ngc24.09_nemo", "dgx-h100", 8, 4, 1, 4, True, "config_DGXH100_1x8x4xtp4pp1cp1.sh", "v41", "FP8 attention (FP8_DPA=1)"),
    ("v4.1", "eos_n8_ngc24.09_nemo", "dgx-h100", 64, 4, 2, 1, True, "config_DGXH100_8x8x1xtp4pp1cp2.sh", "v41", "per-layer CUDA graphs (LAYER_CUDA_GRAPH=1), SHARP"),
    ("v4.1", "eos_n128_ngc24.09_nemo", "dgx-h100", 1024, 4, 2, 1, True, "config_DGXH100_128x8x1xtp4pp1cp2.sh", "v41", "per-layer CUDA graphs (LAYER_CUDA_GRAPH=1), SHARP"),
    ("v4.1", "h200_ngc24.09_nemo", "dgx-h200", 8, 1, 2, 2, False, "config_DGXH200_1x8x2xtp1pp1cp2.sh", "v41", "FP8 storage of the MLP activation input (FP8_ACTIVATION=True)"),
    ("v4.1", "b200_preview_nemo", "dgx-b200", 8, 1, 2, 2, False, "config_DGXB200_1x8x2xtp1pp1cp2.sh", "v41", "FP8 attention (FP8_DPA=1), per-layer CUDA graphs (LAYER_CUDA_GRAPH=1)"),
    ("v5.0", "nyx_n1_ngc25.04_nemo", "dgx-b200", 8, 1, 1, 1, False, "config_DGXB200_1x8x1xtp1pp1cp1.sh", "v50", "FP8 attention (FP8_DPA=1), FP8 storage of the MLP activation input (FP8_ACT=1)"),
    ("v5.0", "tyche_ngpu8_ngc25.04_nemo", "gb200-nvl72", 8, 1, 1, 1, False, "config_GB200_2x4x1xtp1pp1cp1.sh", "v50", "FP8 attention (FP8_DPA=1), FP8 storage of the MLP activation input (FP8_ACT=1)"),
    ("v5.0", "tyche_ngpu72_ngc25.04_nemo", "gb200-nvl72", 72, 1, 8, 1, False, "config_GB200_18x4x1xtp1pp1cp8.sh", "v50", "FP8 attention (FP8_DPA=1), Megatron-Core CUDA graphs (MCORE_CUDA_GRAPH=1)"),
    ("v5.0", "tyche_ngpu144_ngc25.04_nemo", "gb200-nvl72", 144, 1, 8, 1, False, "config_GB200_36x4x1xtp1pp1cp8.sh", "v50", "FP8 attention (FP8_DPA=1), Megatron-Core CUDA graphs (MCORE_CUDA_GRAPH=1)"),
    ("v5.0", "tyche_ngpu512_ngc25.04_nemo", "gb200-nvl72", 512, 1, 8, 1, False, "config_GB200_128x4x1xtp1pp1cp8.sh", "v50", "FP8 attention (FP8_DPA=1), Megatron-Core CUDA graphs (MCORE_CUDA_GRAPH=1)"),
    # v5.1: one shared implementation directory (nemo/); the 8-GPU rows are left out: their NVFP4 configs switch to
    # FP8 after HEALING_ITER=350 steps (config_common_fp4.sh HEALING_PRECISION FP8_DS), one precision per run in gpuplan.
    ("v5.1", "theia_ngpu72_ngc25.09_nemo", "gb300-nvl72", 72, 1, 8, 1, False, "nemo/config_GB300_18x4x1xtp1pp1cp8.sh", "v51", V51_EXTRAS),
    ("v5.1", "theia_ngpu512_ngc25.09_nemo", "gb300-nvl72", 512, 1, 8, 1, False, "nemo/config_GB300_128x4x1xtp1pp1cp8.sh", "v51", V51_EXTRAS),
    ("v5.1", "tyche_ngpu72_ngc25.09_nemo", "gb200-nvl72", 72, 1, 8, 1, False, "nemo/config_GB200_18x4x1xtp1pp1cp8.sh", "v51", V51_EXTRAS),
    ("v5.1", "tyche_ngpu512_ngc25.09_nemo", "gb200-nvl72", 512, 1, 8, 1, False, "nemo/config_GB200_128x4x1xtp1pp1cp8.sh", "v51", V51_EXTRAS),
]

LORA_SETTINGS = {
    "v41": ("configs/config_common.sh: FP8=True (conf/megatron_gpt_peft_tuning_config.yaml fp8_hybrid default True, delayed "
            "scaling, amax history 32) -> precision fp8, fp8_recipe delayed; fp8_params = FP8 -> the frozen base weights are "
            "FP8 -> lora_base fp8 and fp8_params true; {copies} MBS=1; SP=1 unless the config sets SP=0; TP_COMM_OVERLAP=True; optim "
            "mcore_distributed_optim -> zero 1, overlap_grad_sync True; the yaml sets no cross-entropy fusion (Megatron's "
            "default off) -> cross_entropy unfused; activations_checkpoint_granularity null -> recompute none; cpu_offloading "
            "False; peft lora_tuning adapter_dim 16, target_modules ['attention'] (QKV and output projection) -> lora_rank 16, "
            "lora_targets attention."),
    "v50": ("config_common.sh: FP8=True, FP8_AMAX_HISTORY=4 (conf/megatron_gpt_peft_tuning_config.yaml fp8_hybrid default "
            "True, delayed scaling) -> precision fp8, fp8_recipe delayed; fp8_params = FP8 -> lora_base fp8 and fp8_params true; MBS=1; SP=0; "
            "use_distributed_optimizer True -> zero 1, DDP overlap_grad_reduce / overlap_param_gather default False; "
            "train.py: Llama2Config70B(cross_entropy_loss_fusion=False) -> cross_entropy unfused, LoRA(dim=16, alpha=32, "
            "dropout=0.1, target_modules=['linear_proj', 'linear_qkv']) -> lora_rank 16, lora_targets attention, "
            "disable_parameter_transpose_cache=False -> fp8_weight_copies cached (the default); no "
            "activation checkpointing set -> recompute none; cpu_offloading default False."),
    "v51": ("nemo/config_common.sh: FP8=True, FP8_AMAX_HISTORY=4 (conf/megatron_gpt_peft_tuning_config.yaml fp8_recipe "
            "'delayed', fp8_hybrid True) -> precision fp8, fp8_recipe delayed; custom_llama.py "
            "CustomLlamaModel.configure_model builds the model inside te.fp8_model_init(recipe=DelayedScaling()) "
            "whenever cfg.model.fp8 -> the frozen base weights are FP8 parameters -> lora_base fp8 and fp8_params true "
            "(FP8_PARAM_GATHER=0 only keeps the DDP gather in bf16; nothing is gathered with TP 1 and frozen weights); "
            "train.py disable_parameter_transpose_cache=False -> fp8_weight_copies cached (the default); TP=1, SP=0, "
            "MBS=1; use_distributed_optimizer True -> zero 1, DDP overlap_grad_reduce default False; train.py: "
            "cross_entropy_loss_fusion=False -> cross_entropy unfused, LoRA dim 16 on linear_proj and linear_qkv -> "
            "lora_rank 16, lora_targets attention; no activation checkpointing -> recompute none; cpu_offloading default "
            "False."),
}


def lora_case(root, rnd, name, node, gpus, tp, cp, minibs, sp, config, settings, extras):
    results = f"NVIDIA/results/{name}/llama2_70b_lora"
    commit, s = steady(root, rnd, results, seq=8192)
    gbs = s["runs"][0]["global_batch_size"]
    dp = gpus // (tp * cp)
    assert gbs == minibs * gpus // tp // cp, (name, gbs)
    sc = {"model": "llama-2-70b", "node": node, "gpus": gpus, "tp": tp, "pp": 1, "cp": cp, "dp": dp, "micro_batch": 1,
          "global_batch": gbs, "seq": 8192, "precision": "fp8", "fp8_recipe": "delayed", "zero": 1, "recompute": "none",
          "sequence_parallel": sp and tp > 1, "kernels": "fused", "cross_entropy": "unfused", "lora_rank": 16,
          "lora_targets": "attention", "lora_base": "fp8", "fp8_params": True, "lora_dropout": 0.1}
    settings_text = LORA_SETTINGS[settings]
    if settings == "v41":
        if "ngc24.09" in name:
            sc["fp8_weight_copies"] = "per_microbatch"
            copies = ("the yaml's disable_parameter_transpose_cache True under the container's Transformer Engine "
                      "(Dockerfile FROM nvcr.io/nvidia/pytorch:24.09-py3 with TE_REVISION=SKIP: TE 1.10, tagged "
                      "2024-09-11; 1.11 was tagged 2024-10-08) -> fp8_weight_copies per_microbatch (TE 1.10 creates an "
                      "FP8 parameter without a transpose and fills none when Megatron passes is_first_microbatch=None: "
                      "each backward GEMM transposes afresh);")
        else:
            copies = ("the yaml's disable_parameter_transpose_cache True, but the submission names no container (no "
                      "Dockerfile), so the Transformer Engine release is unknown -> fp8_weight_copies left at cached "
                      "(on B200 either way no FP8 transpose is kept);")
        settings_text = settings_text.format(copies=copies)
    if rnd == "v4.1":
        sc["overlap_grad_reduce"] = True
        if tp > 1:
            sc["overlap_tp_comm"] = True
    else:
        sc["overlap_grad_reduce"] = False
    fp8_act = next((e for e in ("FP8 storage of the MLP activation input (FP8_ACTIVATION=True)",
                                "FP8 storage of the MLP activation input (FP8_ACT=1)") if e in extras), None)
    act_note = ""
    if fp8_act:
        # Megatron-Core's activation_func_fp8_input_store, which the yaml sets from that variable.
        sc["activation_func_fp8_input_store"] = True
        extras = extras.replace(", " + fp8_act, "").replace(fp8_act + ", ", "").replace(fp8_act, "")
        act_note = (f" {fp8_act.split(' (')[1].rstrip(')')} (conf/megatron_gpt_peft_tuning_config.yaml "
                    f"activation_func_fp8_input_store) -> activation_func_fp8_input_store true.")
    if "throughput_tokens_per_s" in s:
        per_gpu = s["throughput_tokens_per_s"] / gpus
        runs = ", ".join(f"{r['throughput_samples_per_s']:.3f}" for r in s["runs"])
        method = (f"the MLLOG tracked_stats throughput (samples/s, logged once per training block between evaluations), "
                  f"the first block excluded (warm-up); median per run, median over the {len(s['runs'])} runs ({runs} "
                  f"samples/s); tokens/s = samples/s x 8192")
        unit = f"tokens/s per GPU (derived: median {s['throughput_samples_per_s']:.3f} samples/s x 8192 / {gpus})"
    else:  # v5.1 logs the block's train_step_time only
        per_gpu = s["step_tokens_per_s"] / gpus
        runs = ", ".join(f"{r['median_step_time_s']:.4f}" for r in s["runs"])
        method = (f"the MLLOG tracked_stats train_step_time (s per step, logged once per training block), the first "
                  f"block excluded (warm-up); median per run, median over the {len(s['runs'])} runs ({runs} s); "
                  f"tokens/s = global batch {gbs} x 8192 / step")
        unit = f"tokens/s per GPU (derived: {gbs} x 8192 / median step {s['median_step_time_s']:.4f} s / {gpus})"
    mems = [r["max_memory_usage"] for r in s["runs"] if "max_memory_usage" in r]
    mem_note = (f" The log's tracked_stats max_memory_usage reads up to {max(mems):.1f} (mlperf_common's figure; its unit "
                f"is not stated in the log), kept here for the memory model, not as a case." if mems else "")
    system = {"dgx-h100": SYSTEM["dgx-h100"], "gb200-nvl72": SYSTEM["gb200-nvl72"], "gb300-nvl72": SYSTEM["gb300-nvl72"],
              "dgx-h200": "SYSJSON NVIDIA H200-SXM-141GB, 8 per node (DGX H200) -> dgx-h200",
              "dgx-b200": "SYSJSON NVIDIA B200, 8 per node (DGX B200) -> dgx-b200"}[node]
    notes = (f"partial. MLPerf Training {rnd} closed division, NVIDIA, Llama 2 70B LoRA fine-tuning, NeMo ({name}). "
             f"Measured value: {method} (MAX_SEQLEN 8192: every sample is one 8192-token sequence); per GPU = that / "
             f"{gpus}. System: {system}. Layout from {config}: TP {tp}, PP 1, CP {cp}, "
             f"MINIBS {minibs} -> global_batch {gbs} (= MINIBS x GPUs / TP / CP, as the log's global_batch_size), "
             f"dp = {dp}, micro_batch 1 (MBS). {settings_text} sequence_parallel "
             f"{'true' if sc['sequence_parallel'] else 'false'}"
             f"{' (SP with TP 1 is moot)' if sp and tp == 1 else ''}. The adapters' dropout (0.1 on the LoRA input, "
             f"dropout_position 'pre'; the model's own dropout stays the model's) -> lora_dropout 0.1."
             f"{' Not expressible: ' + extras + '.' if extras else ''}{act_note} Model: llama-2-70b library file. "
             f"Time to train in also_measured.{mem_note}")
    gpu_tag = node.split("-")[1] if node.startswith("dgx") else node.split("-")[0]
    case_id = f"A-mlperf{rnd[1:].replace('.', '')}-llama2-70b-lora-{gpu_tag}-{gpus}gpu"
    return row(case_id, rnd, commit, results, s,
               (f"NVIDIA/benchmarks/llama2_70b_lora/implementations/"
                f"{config if config.startswith('nemo/') else name + '/' + config}, config_common.sh, "
                "conf/megatron_gpt_peft_tuning_config.yaml" + (", train.py" if rnd != "v4.1" else "")), sc, per_gpu,
               unit, notes)


# MLPerf v5.1 Llama 3.1 8B pre-training (NVIDIA Theia GB300 and Tyche GB200; one config per system and size in nemo/):
# (results dir, node, gpus, tp, cp, mbs, config, fp4)
LLAMA8B = [
    ("theia_ngpu8_ngc25.09_nemo", "gb300-nvl72", 8, 1, 1, 2, "config_GB300_2x4x2xtp1pp1cp1_8b_fp4.sh", True),
    ("theia_ngpu72_ngc25.09_nemo", "gb300-nvl72", 72, 1, 2, 1, "config_GB300_18x4x1xtp1pp1cp2_8b.sh", False),
    ("theia_ngpu512_ngc25.09_nemo", "gb300-nvl72", 512, 2, 4, 1, "config_GB300_128x4x1xtp2pp1cp4_8b.sh", False),
    ("tyche_ngpu8_ngc25.09_nemo", "gb200-nvl72", 8, 1, 1, 2, "config_GB200_2x4x2xtp1pp1cp1_8b_fp4.sh", True),
    ("tyche_ngpu72_ngc25.09_nemo", "gb200-nvl72", 72, 1, 2, 1, "config_GB200_18x4x1xtp1pp1cp2_8b.sh", False),
    ("tyche_ngpu512_ngc25.09_nemo", "gb200-nvl72", 512, 2, 4, 1, "config_GB200_128x4x1xtp2pp1cp4_8b.sh", False),
]


def llama8b_case(root, name, node, gpus, tp, cp, mbs, config, fp4):
    rnd = "v5.1"
    results = f"NVIDIA/results/{name}/llama31_8b"
    commit, s = steady(root, rnd, results)
    gbs = s["runs"][0]["global_batch_size"]
    dp = gpus // (tp * cp)
    assert gbs % (dp * mbs) == 0, (name, gbs, dp, mbs)
    sc = {"model": "llama-3.1-8b", "node": node, "gpus": gpus, "tp": tp, "pp": 1, "cp": cp, "dp": dp,
          "micro_batch": mbs, "global_batch": gbs, "seq": 8192, "zero": 1, "recompute": "none",
          "sequence_parallel": tp > 1, "overlap_grad_reduce": True, "overlap_param_gather": True, "kernels": "fused",
          "cross_entropy": "te"}
    if fp4:
        sc.update({"precision": "fp4"})
        prec = ("config_common_fp4.sh FP4=True, FP8=False, FP4_RECIPE nvfp4 -> precision fp4 (NVFP4 training), "
                "FP8_PARAM_GATHER=False -> no fp8_params; MICRO_BATCH_SIZE 2. Not expressible: FP8 attention "
                "(config_common_fp8attn.sh FP8_DPA=True), NVFP4 with random Hadamard transforms off "
                "(NVTE_NVFP4_DISABLE_RHT=1) and stochastic rounding / 2D quantisation on (config_common_8b.sh), "
                "Megatron-Core CUDA graphs (MCORE_CUDA_GRAPH=1).")
    else:
        sc.update({"precision": "fp8", "fp8_recipe": "tensorwise", "fp8_params": True})
        if tp > 1:
            sc["overlap_tp_comm"] = True
        prec = ("config_common.sh FP8=True, FP8_RECIPE tensorwise (config_common_8b.sh FP8_HYBRID=True) -> precision "
                "fp8, fp8_recipe tensorwise; FP8_PARAM_GATHER=True -> fp8_params true"
                + ("; TP_COMM_OVERLAP=True -> overlap_tp_comm true" if tp > 1 else "") +
                ". Not expressible: Megatron-Core and full-iteration CUDA graphs (config_common_cg.sh), Transformer "
                "Engine's fused ops and fused QKV+RoPE (USE_TE_OPS, FUSED_QKV_ROPE).")
    per_gpu = s["step_tokens_per_s"] / gpus
    runs = ", ".join(f"{r['median_step_time_s']:.4f}" for r in s["runs"])
    notes = (f"partial. MLPerf Training v5.1 closed division, NVIDIA, Llama 3.1 8B pre-training, NeMo ({name}). "
             f"Measured value: steady-state throughput from the MLLOG tracked_stats train_step_time (the first step "
             f"excluded): median step per run ({runs} s), median over the {len(s['runs'])} runs = "
             f"{s['median_step_time_s']:.4f} s; tokens/s = global_batch_size {gbs} x max_sequence_length 8192 / step; per "
             f"GPU = that / {gpus}. System: {SYSTEM[node]}. Layout from nemo/{config} (the one config of this system "
             f"and size): TP {tp}, PP 1, CP {cp}, dp = {dp}, MICRO_BATCH_SIZE {mbs}; global_batch from the log "
             f"({gbs}); SEQ_PARALLEL {'True' if tp > 1 else 'False'}. config_common.sh USE_DIST_OPTIMIZER=True -> zero "
             f"1, OVERLAP_GRAD_REDUCE / OVERLAP_PARAM_GATHER True; config_common_8b.sh CE_FUSION_IMPL=te -> "
             f"cross_entropy te; conf/custom.yaml activations_checkpoint_granularity null -> recompute none. {prec} "
             f"Model: llama-3.1-8b library file (32 layers, seq 8192). Time to train in also_measured.")
    gpu_tag = node.split("-")[0]
    return row(f"A-mlperf51-llama31-8b-{gpu_tag}-{gpus}gpu", rnd, commit, results, s,
               f"NVIDIA/benchmarks/llama31_8b/implementations/nemo/{config}, config_common.sh, config_common_8b.sh, "
               "conf/custom.yaml", sc, per_gpu,
               f"tokens/s per GPU (derived: {gbs} x 8192 tokens / median step {s['median_step_time_s']:.4f} s / {gpus})",
               notes)


# AMD's MLPerf v5.1 Llama 2 70B LoRA on one 8-GPU node (MI350X left out: no library GPU file).
# (results dir, implementation dir, node, gpu name, recompute block layers or None)
AMD_LORA = [
    ("MI300X_EPYC_9575F_pytorch_llama2_70b", "MI300X_EPYC_9575F_pytorch_llama2_70b", "mi300x-8", "MI300X", 21),
    ("MI325X_EPYC_9575F_pytorch_llama2_70b", "MI325X_EPYC_9575F_pytorch_llama2_70b", "mi325x-8", "MI325X", None),
    ("MI355X_EPYC_9575F_pytorch", "MI355X_EPYC_9575F_pytorch_llama2_70b", "mi355x-8", "MI355X", None),
]


def amd_lora_case(root, name, impl, node, gpu, ckpt_layers):
    rnd = "v5.1"
    results = f"AMD/results/{name}/llama2_70b_lora"
    commit, s = steady(root, rnd, results, seq=8192)
    gbs = s["runs"][0]["global_batch_size"]
    assert gbs == 8, (name, gbs)
    sc = {"model": "llama-2-70b", "node": node, "gpus": 8, "tp": 1, "pp": 1, "cp": 1, "dp": 8, "micro_batch": 1,
          "global_batch": gbs, "seq": 8192, "precision": "fp8", "fp8_recipe": "delayed", "fp8_params": True,
          "zero": 0, "recompute": "none", "sequence_parallel": False, "kernels": "fused", "cross_entropy": "unfused",
          "lora_rank": 16, "lora_targets": "attention", "lora_base": "fp8", "lora_dropout": 0.1,
          "fp8_weight_copies": "per_microbatch"}
    ckpt = "no activation checkpointing (ACG unset) -> recompute none"
    if ckpt_layers:
        sc.update({"recompute": "full", "recompute_method": "block", "recompute_num_layers": ckpt_layers})
        ckpt = (f"ACG=full, ACM=block, ACL={ckpt_layers} -> recompute full, recompute_method block, "
                f"recompute_num_layers {ckpt_layers}")
    per_gpu = s["throughput_tokens_per_s"] / 8
    runs = ", ".join(f"{r['throughput_samples_per_s']:.3f}" for r in s["runs"])
    config = f"config_{gpu}_1x8x1.sh"
    notes = (f"partial. MLPerf Training v5.1 closed division, AMD, Llama 2 70B LoRA fine-tuning on one 8-GPU {gpu} node "
             f"(PyTorch 2.8 + ROCm 7.0, NeMo 2.3, Megatron-LM, Transformer Engine per the system file). Measured value: "
             f"the MLLOG tracked_stats throughput (samples/s, once per training block), the first block excluded; "
             f"median per run, median over the {len(s['runs'])} runs ({runs} samples/s); tokens/s = samples/s x 8192 "
             f"(MAX_SEQLEN 8192); per GPU = that / 8. System: SYSJSON 'AMD Instinct {gpu}', 8 per node, XGMI -> {node}. "
             f"Layout from {config}: TP 1, PP 1, CP 1, SP False, MBS 1, MINIBS 1 -> global_batch 8 (the log's), dp 8. "
             f"FP8=True (src/conf/megatron_gpt_peft_tuning_config.yaml fp8_hybrid default True, delayed scaling, amax "
             f"history 4) -> precision fp8, fp8_recipe delayed; fp8_params = FP8 -> fp8_params true, lora_base fp8; "
             f"{ckpt}; "
             f"the yaml sets disable_parameter_transpose_cache True and the config ENABLE_TRANSPOSE_CACHE=0, "
             f"AMD's switch for keeping the FP8 weights' transpose (ROCm's Transformer Engine adds a "
             f"keep_fp8_weight_transpose_cache parameter to te.pytorch.Linear, which AMD-AGI/Primus f670d91 "
             f"primus/backends/megatron/patches/te_patches/linear_fp8_cache_patches.py sets False 'to reduce "
             f"memory usage') -> fp8_weight_copies per_microbatch (the transpose made at each backward use and "
             f"freed); the code that reads ENABLE_TRANSPOSE_CACHE in this stack (ROCm Megatron-LM bc0be960, ROCm "
             f"Transformer Engine d0ef413b) is in neither mirror, but AMD's own recompute depth agrees: 21 "
             f"recomputed layers on the 192 GB MI300X and none on the 256 and 288 GB parts need 186 and 222 GiB "
             f"per GPU with per-use transposes, 253 and 289 GiB with cached ones;"
             f" the yaml's optimizer is fused_adam on one node (mcore_distributed_optim only with more than one "
             f"node) -> zero 0; no cross-entropy fusion in the yaml (Megatron's default off) -> cross_entropy unfused; "
             f"peft lora_tuning adapter_dim 16, adapter_dropout 0.1 (dropout_position 'pre'), target_modules "
             f"['attention'] -> lora_rank 16, lora_targets attention, lora_dropout 0.1. "
             f"FP8_ACTIVATION=True sets the yaml's model.fp8_activation_input_store, a name no Megatron-Core "
             f"TransformerConfig field has (the field is activation_func_fp8_input_store in NVIDIA/Megatron-LM "
             f"d98e8a64 and ROCm/Megatron-LM e6f97367), and NeMo v2.3.0's build_transformer_config "
             f"(nlp/models/language_modeling/megatron_base_model.py) passes only TransformerConfig field names: "
             f"the key reaches nothing in the sources we could read -> activation_func_fp8_input_store left "
             f"false (set, it would take 35 GiB of SwiGLU inputs off each GPU). Not expressible: the CK / "
             f"AOTriton fused attention kernels (NVTE_FUSED_ATTN_CK, _AOTRITON) and Triton RMSNorm / "
             f"cast-transpose kernels."
             f" Model: llama-2-70b library file. Time to train in also_measured.")
    return row(f"A-mlperf51-llama2-70b-lora-{gpu.lower()}-8gpu", rnd, commit, results, s,
               f"AMD/benchmarks/llama2_70b_lora/implementations/{impl}/{config}, "
               "src/conf/megatron_gpt_peft_tuning_config.yaml", sc, per_gpu,
               f"tokens/s per GPU (derived: median {s['throughput_samples_per_s']:.3f} samples/s x 8192 / 8)", notes)


FP8_ATTENTION = re.compile(r"FP8 attention \((?:config_common_fp8attn\.sh )?FP8_DPA=(?:1|True)\)")


def express_fp8_attention(case):
    """FP8_DPA (NeMo's fp8_dot_product_attention) became a scenario key: move it from the row's 'Not expressible'
    list to the keys it sets. Idempotent; rows without FP8_DPA are returned unchanged."""
    notes = case["notes"]
    m = FP8_ATTENTION.search(notes)
    if m is None:
        return case
    item = m.group(0)
    notes = notes.replace(item + ", ", "").replace(", " + item, "")
    notes = notes.replace(" Not expressible: " + item + ".", "")
    knob = item[len("FP8 attention ("):-1]
    notes = notes.replace(" Model: ", f" {knob} -> fp8_dot_product_attention true (Transformer Engine's FP8 "
                                      f"dot-product attention). Model: ", 1)
    case["notes"] = notes
    case["scenario"]["fp8_dot_product_attention"] = True
    return case


DP_CTAS = (" NCCL_CFG_PATH (config_common.sh) -> conf/nccl/custom_communicator_cta.yaml, Megatron-Core's "
           "nccl_communicator_config_path: the dp and dp_cp communicators min_ctas 1, max_ctas 8 -> dp_max_ctas 8.")
BUCKET_8B = (" Not expressible: config_common_8b.sh BUCKET_SIZE=768000000 (Megatron DDP bucket of 768M parameters; the "
             "model uses Megatron's default max(40M, 1M x DP)).")


def express_dp_ctas(case):
    """NVIDIA's GPT-3, Llama 3.1 405B and 8B recipes load conf/nccl/custom_communicator_cta.yaml (the DP communicator
    capped at 8 CTAs; the LoRA recipes and AMD's do not): dp_max_ctas 8, appended to the notes. Idempotent."""
    case["scenario"]["dp_max_ctas"] = 8
    if DP_CTAS not in case["notes"]:
        case["notes"] += DP_CTAS
    return case


# The DP gradient bucket (dp_bucket_size, Megatron-Core DistributedDataParallelConfig.bucket_size, parameters) of the
# NeMo 2 recipes. pretrain.py passes conf/custom.yaml model.optim.bucket_size (env BUCKET_SIZE) to the DDP config
# and, from v5.1, to NeMo's MegatronCommOverlapCallback; that callback, with the distributed optimizer and DP > 1, sets
# the DDP bucket to its own 128 x 1024 x 1024 unless it is given one (NVIDIA/NeMo
# nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py _apply_optimizer_overlap_cfgs, read at commit 03ec8969).
DP_BUCKET = {
    "8b": (768000000,
           " config_common_8b.sh BUCKET_SIZE=768000000 -> conf/custom.yaml model.optim.bucket_size, which pretrain.py "
           "passes to Megatron-Core's DistributedDataParallelConfig and NeMo's MegatronCommOverlapCallback -> "
           "dp_bucket_size 768000000 (parameters per DP gradient bucket)."),
    "405b-v5.1": (134217728,
                  " conf/custom.yaml model.optim.bucket_size default 134217728 (BUCKET_SIZE is not set for 405B), "
                  "which pretrain.py passes to Megatron-Core's DistributedDataParallelConfig and NeMo's "
                  "MegatronCommOverlapCallback -> dp_bucket_size 134217728 (parameters per DP gradient bucket)."),
    "405b-v5.0": (134217728,
                  " conf/custom.yaml model.optim.bucket_size default 200 goes to the DistributedDataParallelConfig, "
                  "but pretrain.py's MegatronCommOverlapCallback is given no bucket_size and, with the distributed "
                  "optimizer and DP > 1, sets the DDP bucket to its own 128 x 1024 x 1024 (NeMo "
                  "megatron_comm_overlap.py _apply_optimizer_overlap_cfgs) -> dp_bucket_size 134217728 (parameters "
                  "per DP gradient bucket)."),
}


def express_dp_bucket(case):
    """The NeMo 2 recipes of Llama 3.1 8B (v5.1) and 405B (v5.0, v5.1) run a DP gradient bucket other than Megatron's
    default: dp_bucket_size, with the 8B rows' 'Not expressible' BUCKET_SIZE note replaced. Idempotent; other rows
    (GPT-3's Apex optimizer, LoRA, AMD) are returned unchanged."""
    cid = case["id"]
    kind = ("8b" if "-llama31-8b-" in cid else "405b-v5.1" if cid.startswith("A-mlperf51-llama31-405b-")
            else "405b-v5.0" if cid.startswith("A-mlperf50-llama31-405b-") else None)
    if kind is None:
        return case
    size, text = DP_BUCKET[kind]
    case["notes"] = case["notes"].replace(BUCKET_8B, "")
    if text not in case["notes"]:
        case["notes"] += text
    case["scenario"]["dp_bucket_size"] = size
    return case


def main():
    express = {"--express-fp8-attention": express_fp8_attention, "--express-dp-bucket": express_dp_bucket}
    if len(sys.argv) == 2 and sys.argv[1] in express:
        # Re-apply one expression to the rows already in the file (no mirrors needed).
        fn = express[sys.argv[1]]
        with open(CASES) as f:
            data = json.load(f)
        data["cases"] = [fn(c) if c["id"].startswith("A-mlperf") else c for c in data["cases"]]
        with open(CASES, "w") as f:
            f.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        return
    root = sys.argv[1]
    new = ([express_dp_ctas(gpt3_case(root, *g)) for g in GPT3] +
           [express_dp_ctas(llama_case(root, *l)) for l in LLAMA] + [lora_case(root, *l) for l in LORA] +
           [express_dp_ctas(llama8b_case(root, *l)) for l in LLAMA8B] + [amd_lora_case(root, *l) for l in AMD_LORA])
    new = [express_dp_bucket(express_fp8_attention(c)) for c in new]
    with open(CASES) as f:
        data = json.load(f)
    ids = {c["id"] for c in new}
    assert len(ids) == len(new)
    by_id = {c["id"]: c for c in new}
    kept = [by_id.pop(c["id"], c) for c in data["cases"]]  # rows already present are replaced in place
    data["cases"] = kept + [c for c in new if c["id"] in by_id]
    with open(CASES, "w") as f:
        f.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    for c in new:
        print(c["id"], c["measured"]["value"])


if __name__ == "__main__":
    main()
