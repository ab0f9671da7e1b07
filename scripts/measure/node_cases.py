#!/usr/bin/env python3
"""Validation case files from one run of scripts/measure/run_node.sh (issue #30): standard library only, so it runs
on the device at the end of the batch and again here on the unpacked tarball.

usage: node_cases.py RESULTS_DIR [--out-dir DIR] [--gpu ID] [--date YYYY-MM-DD] [--source-dir REPO_PATH]

Reads the run's JSON files in RESULTS_DIR and writes, for N = the run's GPU count:
  node-x<N>-serving-cases.json       the inference case format (data/validation/measured_inference_cases.json): every
                                     timed point of node_serve_step.py --model dense — TP-N decode (CUDA graphs) and
                                     prefill, the TP(N/2) replicas' decode steps (each replica's step at its own batch,
                                     run beside the other replicas) — one case each;
  node-x<N>-moe-serving-cases.json   the same format: the TP-N/EP-N MoE decode and prefill points (eager);
  node-x<N>-training-cases.json      the training case format (measured_cases.json): the DDP and FSDP2 steps of
                                     train_step.py (tokens/s per GPU and peak memory);
  node-x<N>-moe-training-cases.json  the same format: moe_train_step.py at EP-N and EP-(N/2) x DP2 (tokens/s per GPU).
Points the measurement refused (spread) or skipped (memory, time) stay in the files as not runnable, with the reason.
`gpuplan validate` reads both files from data/validation/measured/<gpu>/ (any N), together with the held-out
collectives sweep (heldout-collectives-<N>gpu-node-between*.json, the bench's own format, read as it is).
The GPU id (data/hardware/gpus/<id>.json) comes from the device name nvidia-smi gave, unless --gpu is given.
"""
import argparse
import glob
import json
import os
import sys

GPU_IDS = [("H200", "h200-sxm-141gb", "hgx-h200"), ("H100 80GB HBM3", "h100-sxm5-80gb", "dgx-h100")]
NODES = {gid: node for _, gid, node in GPU_IDS}
TRAIN_IMPL = ("bf16 autocast; fp32 master params, grads and AdamW states; bf16 residual stream; fp32 loss; "
              "attention: PyTorch SDPA flash backend (FlashAttention-2 kernels), optimizer AdamW fused; step time = "
              "median of timed steps. Implementation: PyTorch eager modules (rotate_half RoPE, silu·mul SwiGLU, "
              "fused RMSNorm, log-softmax cross-entropy) with AMP autocast over fp32 parameters -> kernels eager, "
              "mixed_precision amp.")
MOE_TRAIN_IMPL = ("scripts/measure/moe_train_step.py: a 4-layer decoder with Qwen3-30B-A3B-shaped MoE layers "
                  "(128 experts, top-8, width 768), bf16 autocast over fp32 parameters, torch._grouped_mm experts, "
                  "all-to-all dispatcher with a host sync of the split sizes; fp32 gradients and fused AdamW; "
                  "gradients all-reduced after backward without overlap: dense over all ranks, experts over the "
                  "expert-data-parallel ranks. -> kernels eager, mixed_precision amp, overlap_grad_reduce false.")
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
L1B = dict(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=128256)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"node_cases: {path}: {e}", file=sys.stderr)
        return None


def gpu_of(docs, forced):
    if forced:
        return forced
    for d in docs:
        for row in (d.get("nvidia_smi_before") or []):
            name = row.get("name", "")
            for key, gid, _ in GPU_IDS:
                if key in name:
                    return gid
        name = (d.get("device") or {}).get("name", "")
        for key, gid, _ in GPU_IDS:
            if key in name:
                return gid
    return None


def when(d):
    return (d.get("timestamp_utc") or "")[:16].replace("T", " ")


def serving_cases(docs, gpu, world, src_dir, want_moe):
    """node_serve_step.py records (dense or MoE) -> inference cases."""
    cases, sources = [], {}
    for fname, d in docs:
        if d.get("kind") != "node_serve_step" or (d.get("model_shape") == "moe") != want_moe:
            continue
        key = f"own-{gpu}-x{world}-{d['name']}"
        sw = d.get("software") or {}
        smi = (d.get("nvidia_smi_before") or [{}])[0]
        sources[key] = (f"our measurement: {src_dir}/{fname} (scripts/measure/node_serve_step.py, "
                        f"{d.get('timestamp_utc')}, {smi.get('name')}, driver {smi.get('driver_version')}, torch "
                        f"{sw.get('torch')}, NCCL {sw.get('nccl')}, host {d.get('hostname')}, {world} GPUs)")
        moe = d.get("model_shape") == "moe"
        model = d.get("model_file")
        t, ep, R = d["tp"], d["ep"], d.get("replicas", 1)
        for p in d.get("points", []):
            kind, b = p["kind"], p["batch"]
            if kind == "decode":
                s = p["context_tokens"]
                metric, inputs, val = "decode_step_time_s", {"batch": b, "context_tokens": s}, p.get("step_time_s")
                pid = f"decode-b{b}-ctx{s}"
            else:
                s = p["prompt_tokens"]
                metric, inputs, val = "prefill_time_s", {"batch": b, "prompt_tokens": s}, p.get("prefill_time_s")
                pid = f"prefill-b{b}-p{s}"
            graphs = bool(p.get("cuda_graph"))
            case = {"id": f"{key}-{pid}", "source": key,
                    "engine": "pytorch-eager-ops-in-cuda-graph" if graphs else "pytorch-eager-ops",
                    "model": model or "unknown", "gpu": gpu, "tp": t, "pp": 1}
            if ep > 1:
                case["ep"] = ep
            case.update({"weights": "bf16", "kv": "bf16", "compute": "bf16", "kernels": "eager",
                         # node_serve_step.py leaves SDPA's backend to PyTorch: with torch 2.11 / cuDNN 9.19 on Hopper it
                         # dispatches cuDNN's fused attention for decode and prefill (decode_attn_probe.py, session 32)
                         "attention_kernel": "cudnn", "cuda_graphs": graphs, "metric": metric, "inputs": inputs})
            shipped = model is not None and os.path.isfile(os.path.join(REPO, "data", "models", model + ".json"))
            ok = p.get("status") == "ok" and val is not None and shipped
            spread = p.get("max_spread_over_ranks")
            how = "median of graph replays" if graphs else "eager, median of steps"
            case["measured"] = {"value": val or 0.0,
                                "as_published": (f"{val * 1e3:.4g} ms ({how}, max over {world} ranks, spread "
                                                 f"{(spread or 0) * 100:.1f}%)") if ok else f"status {p.get('status')}"}
            case["runnable"] = ok
            if not ok:
                case["excluded_reason"] = (f"measurement status {p.get('status')}" if shipped
                                           else f"no data/models/{model}.json (layers {d.get('layers')})")
            layout = (f"TP{t} over {t} GPUs" if R == 1 else
                      f"one of {R} TP{t} replicas running at once on the {world} GPUs (each at batch {b}; "
                      f"{R * b} sequences in all)")
            if moe:
                how = ("fixed-capacity all-to-all dispatch/combine without a host sync, one torch._grouped_mm per "
                       "projection" if d.get("ep_impl", "sync") == "static" else
                       "all-to-all dispatch/combine with a host sync of the split sizes, torch._grouped_mm experts")
                note = (f"{layout}, experts EP{ep} (row blocks, {how}, all-gather of the blocks); "
                        + ("the whole step in one CUDA graph." if graphs else "eager."))
            else:
                note = (f"{layout}; Megatron-style column/row-parallel linears, two all-reduces per layer, "
                        f"vocab-parallel LM head; {d.get('layers')} layers of Llama-3-70B's shape; "
                        + ("the whole step in one CUDA graph." if graphs else "eager."))
            case["notes"] = note
            cases.append(case)
    return cases, sources


def training_cases(docs, gpu, world, src_dir, want_moe):
    cases = []
    node = NODES.get(gpu)
    for fname, d in docs:
        kind = d.get("kind")
        if (kind == "moe_train_step") != want_moe:
            continue
        src = f"gpuplan measurement, {src_dir}/{fname}"
        if kind == "train_step" and d.get("world_size", 1) > 1:
            cfg = d.get("config") or {}
            fsdp = d.get("parallel") == "fsdp"
            if any(cfg.get(k) != v for k, v in L1B.items()):
                print(f"node_cases: {fname}: not the 1B-like config, skipped", file=sys.stderr)
                continue
            mb, seq = cfg.get("micro_batch"), cfg.get("seq")
            scen = {"model": "bench-llama-1b-like", "gpus": world, "micro_batch": mb, "global_batch": mb * world,
                    "seq": seq, "precision": "bf16", "attention_kernel": "fa2", "recompute": "none", "node": node,
                    "zero": 3 if fsdp else 0, "kernels": "eager", "mixed_precision": "amp"}
            how = "FSDP2 fully_shard per layer" if fsdp else "DDP"
            note = (f"full. Our own measurement (run_node.sh, {when(d)} UTC, torchrun {world} processes, {how}), "
                    f"{TRAIN_IMPL} File: {src_dir}/{fname}.")
            ok = d.get("status") == "ok"
            for metric, key, unit, suffix in (
                    ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu", "tokens/s per GPU", ""),
                    ("peak_allocated_bytes", "peak_allocated_bytes",
                     "bytes (torch.cuda.max_memory_allocated after the timed steps)", "-memory")):
                if not ok or d.get(key) is None:
                    continue
                cases.append({"id": f"M-{gpu}-x{world}-{d['name']}{suffix}", "source": src, "scenario": scen,
                              "measured": {"metric": metric, "value": d[key], "unit": unit}, "notes": note})
        elif kind == "moe_train_step":
            cfg = d.get("config") or {}
            ep, w = d.get("ep"), d.get("world_size")
            if d.get("status") != "ok" or w != world:
                continue
            if (cfg.get("layers"), cfg.get("hidden"), cfg.get("experts"), cfg.get("vocab")) != (4, 2048, 128, 32768):
                print(f"node_cases: {fname}: not the bench-moe-30b-a3b-shape-l4 config, skipped", file=sys.stderr)
                continue
            mb, seq = cfg.get("micro_batch"), cfg.get("seq")
            tps = cfg["seq"] * mb / d["step_s"]
            scen = {"model": "bench-moe-30b-a3b-shape-l4", "gpus": world, "micro_batch": mb,
                    "global_batch": mb * world, "seq": seq, "precision": "bf16", "attention_kernel": "fa2",
                    "recompute": "none", "node": node, "zero": 0, "tp": 1, "ep": ep, "kernels": "eager",
                    "mixed_precision": "amp", "overlap_grad_reduce": False}
            parts = " + ".join(f"{k[:-2].replace('_', ' ')} {d[k] * 1e3:.1f}" for k in
                               ("forward_s", "backward_s", "grad_sync_s", "optimizer_s") if d.get(k) is not None)
            note = (f"full. Our own MoE training-step measurement (run_node.sh, {when(d)} UTC, torchrun {world} "
                    f"processes, EP {ep} x expert-DP {world // ep}; step {d['step_s'] * 1e3:.1f} ms = {parts} ms), "
                    f"{MOE_TRAIN_IMPL} File: {src_dir}/{fname}.")
            cases.append({"id": f"M-{gpu}-x{world}-{d['name']}", "source": src, "scenario": scen,
                          "measured": {"metric": "tokens_per_s_per_gpu", "value": tps, "unit": "tokens/s per GPU"},
                          "notes": note})
    return cases


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results_dir")
    p.add_argument("--out-dir", default=None, help="default: RESULTS_DIR")
    p.add_argument("--gpu", default=None, help="GPU id (default: from the device name in the files)")
    p.add_argument("--source-dir", default=None,
                   help="where the files will live in the repo (default data/validation/measured/<gpu>)")
    a = p.parse_args(argv)
    if not os.path.isdir(a.results_dir):
        print(f"node_cases: {a.results_dir}: not a directory", file=sys.stderr)
        return 2
    docs = []
    for path in sorted(glob.glob(os.path.join(a.results_dir, "*.json"))):
        base = os.path.basename(path)
        if base.startswith(("node-x", "samples-", "heldout-")):
            continue
        d = load(path)
        if isinstance(d, dict) and d.get("kind") in ("node_serve_step", "train_step", "moe_train_step"):
            docs.append((base, d))
    if not docs:
        print(f"node_cases: no node_serve_step / train_step / moe_train_step files in {a.results_dir}", file=sys.stderr)
        return 1
    gpu = gpu_of([d for _, d in docs], a.gpu)
    if gpu is None:
        print("node_cases: unknown GPU (not an H100 SXM or H200 in nvidia-smi's name); give --gpu", file=sys.stderr)
        return 2
    worlds = sorted({d.get("world_size") for _, d in docs if d.get("world_size")})
    world = max(worlds)
    src_dir = a.source_dir or f"data/validation/measured/{gpu}"
    out_dir = a.out_dir or a.results_dir
    os.makedirs(out_dir, exist_ok=True)
    h = world // 2
    files = []
    for moe in (False, True):
        cases, sources = serving_cases(docs, gpu, world, src_dir, moe)
        what = (f"a Qwen3-30B-A3B-shaped decoder with attention TP{world} and experts EP{world}" if moe else
                f"TP{world} and TP{h} x 2 replicas of a Llama-3-70B-shaped decoder")
        files.append((f"node-x{world}-{'moe-' if moe else ''}serving-cases.json",
                      {"schema": 1,
                       "description": (f"Our own serving measurements on {world} GPUs of one host ({gpu}): {what}; "
                                       "generated by scripts/measure/node_cases.py from scripts/measure/run_node.sh's "
                                       "files."),
                       "sources": sources, "cases": cases}))
        what = (f"MoE training steps at EP{world} and EP{h} x DP2" if moe else
                "DDP and FSDP2 training steps of the 1B-like Llama")
        files.append((f"node-x{world}-{'moe-' if moe else ''}training-cases.json",
                      {"schema": 1, "kind": "validation-set", "source_file": src_dir + "/",
                       "description": (f"Our own measurements on {world} GPUs of one host ({gpu}): {what}; "
                                       "generated by scripts/measure/node_cases.py."),
                       "cases": training_cases(docs, gpu, world, src_dir, moe)}))
    synthetic = [d["synthetic"] for _, d in docs if d.get("synthetic")]
    for fname, doc in files:
        if synthetic:  # a test fixture's made-up records: say so in every file and case
            doc["description"] = f"{synthetic[0]}. " + doc["description"]
            for c in doc["cases"]:
                c["notes"] = "SYNTHETIC. " + c.get("notes", "")
        path = os.path.join(out_dir, fname)
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False)
            f.write("\n")
        os.replace(path + ".tmp", path)
        runnable = sum(1 for c in doc["cases"] if c.get("runnable", True))
        print(f"node_cases: {len(doc['cases'])} cases, {runnable} runnable -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
