#!/usr/bin/env python3
"""Add the MLPerf Training v4.1 GPT-3 175B and v5.0 / v5.1 Llama 3.1 405B rows to data/validation/training_cases.json.

Usage: add_mlperf_cases.py MIRROR_ROOT   (MIRROR_ROOT holds mlcommons+training_results_v4.1/repo, ..._v5.0/repo, ..._v5.1/repo)

Each row's throughput comes from mlperf_steady_state.py over the submission's result_*.txt (three runs each); the
layout from the submission's config_*.sh (named in the row). Rows already present (same id) are replaced.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "..", "data", "validation", "training_cases.json")


def steady(root, rnd, results, block_unit=None):
    repo = os.path.join(root, f"mlcommons+training_results_{rnd}", "repo")
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    cmd = [sys.executable, os.path.join(HERE, "mlperf_steady_state.py"), repo, commit, results]
    if block_unit:
        cmd += ["--block-unit", block_unit]
    return commit, json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


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
        status = ("underspecified: not expressible exactly - the precision of this run is not recorded: the "
                  f"implementation directory holds an FP8 config and an NVFP4 config with the same layout ({config}) "
                  "and neither the MLLOG nor the system description says which one ran, so the case is kept with its "
                  "layout and measured value but not priced.")
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
    case = {
        "id": f"A-mlperf{rnd[1:].replace('.', '')}-llama31-405b-{ {'dgx-h100': 'h100'}.get(node, node.split('-')[0])}-{name.split('_')[0]}-{gpus}gpu",
        "source": (f"mlcommons/training_results_{rnd} (commit {commit}), {results}/result_0..{len(s['runs']) - 1}.txt "
                   f"(MLLOG) + {impl}/{config}, config_common.sh, conf/custom.yaml"),
        "scenario": sc,
        "measured": {"metric": "tokens_per_s_per_gpu", "value": round(per_gpu, 1),
                     "unit": f"tokens/s per GPU (derived: {gbs} x 8192 tokens / median step {s['median_step_time_s']:.3f} s / {gpus})"},
        "also_measured": {"time_to_train_minutes": {
            "metric": "est_minutes_to_train", "value": round(s["run_minutes"], 3),
            "unit": "minutes, run_start..run_stop, median of the runs (includes evaluation and warm-up)"}},
        "notes": notes,
    }
    return case


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
    return {
        "id": f"A-mlperf41-gpt3-175b-{node.split('-')[1]}-{gpus}gpu",
        "source": (f"mlcommons/training_results_v4.1 (commit {commit}), {results}/result_0..{len(s['runs']) - 1}.txt "
                   f"(MLLOG) + NVIDIA/benchmarks/gpt3/implementations/{name}/{config}, config_common.sh, config_fp8.sh, "
                   f"conf/custom.yaml, conf/optim/distributed_fused_adam.yaml"),
        "scenario": sc,
        "measured": {"metric": "tokens_per_s_per_gpu", "value": round(per_gpu, 1),
                     "unit": f"tokens/s per GPU (derived: median block throughput {round(s['block_tokens_per_s'])} tokens/s over all GPUs / {gpus})"},
        "also_measured": {"time_to_train_minutes": {
            "metric": "est_minutes_to_train", "value": round(s["run_minutes"], 3),
            "unit": "minutes, run_start..run_stop, median of the runs (includes evaluation and warm-up)"}},
        "notes": notes,
    }


def main():
    root = sys.argv[1]
    new = [gpt3_case(root, *g) for g in GPT3] + [llama_case(root, *l) for l in LLAMA]
    with open(CASES) as f:
        data = json.load(f)
    ids = {c["id"] for c in new}
    assert len(ids) == len(new)
    data["cases"] = [c for c in data["cases"] if c["id"] not in ids] + new
    with open(CASES, "w") as f:
        f.write(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    for c in new:
        print(c["id"], c["measured"]["value"])


if __name__ == "__main__":
    main()
