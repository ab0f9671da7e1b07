#!/usr/bin/env python3
"""gpuplan's prediction vs our MoE serving measurement (serve_qwen3_30b_a3b.json, scripts/measure/serve_moe_step.py).

Not wired into `gpuplan validate`: the shipped library has no qwen3-30b-a3b model file, and adding these cases to
data/validation/measured_inference_cases.json would move the counts and error bounds that tests/validation pins
(a C++ change). So this script prices the points out of tree: it copies data/ to a temporary directory, adds the
Qwen3-30B-A3B config (Qwen/Qwen3-30B-A3B config.json) as models/qwen3-30b-a3b.json, replaces
validation/measured_inference_cases.json there by the MoE cases only (same case layout as
scripts/validation/make_measured_inference_cases.py: decode steps in CUDA graphs, kernels "eager", FlashAttention-2;
prefill eager, cuda_graphs false) and runs `gpuplan validate --format json --data-dir TMP` (built-in defaults and the
calibrated profile). For reference it also runs `gpuplan serve -m qwen3-30b-a3b --batch B --input-tokens C
--output-tokens 2 --engine plain --format json` (the serve command's own kernel style) and records decode_step_s.

Usage (repo root): python3 scripts/measure/serve_moe_vs_model.py [--gpuplan build/ci/cli/gpuplan]
Writes data/validation/measured/h100-sxm5-80gb/serve_qwen3_30b_a3b_vs_model.json and prints the table.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

GPU = "h100-sxm5-80gb"
MEAS = f"data/validation/measured/{GPU}/serve_qwen3_30b_a3b.json"
OUT = f"data/validation/measured/{GPU}/serve_qwen3_30b_a3b_vs_model.json"
MODEL = {
    "schema": 1, "kind": "model", "id": "qwen3-30b-a3b", "name": "Qwen3 30B-A3B", "aliases": ["Qwen/Qwen3-30B-A3B"],
    "family": "qwen", "hf_repo": "Qwen/Qwen3-30B-A3B",
    "config": {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128,
        "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960,
        "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
        "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_scaling": None,
        "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "use_sliding_window": False, "vocab_size": 151936},
    "sources": [{"id": "hf-config", "ref": "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"}],
    "notes": "Out-of-tree copy for scripts/measure/serve_moe_vs_model.py (not a shipped model file).",
}


def cases(d):
    src = f"own-{GPU}-qwen3-30b-a3b"
    common = {"source": src, "engine": "pytorch-eager-ops-in-cuda-graph", "model": "qwen3-30b-a3b", "gpu": GPU,
              "tp": 1, "pp": 1, "weights": "bf16", "kv": "bf16", "compute": "bf16", "kernels": "eager",
              "attention_kernel": "fa2", "cuda_graphs": True}
    out = []
    for p in d["decode_points"]:
        c = {"id": f"{src}-decode-b{p['batch']}-ctx{p['context_tokens']}", **common, "metric": "decode_step_time_s",
             "inputs": {"batch": p["batch"], "context_tokens": p["context_tokens"]},
             "measured": {"value": p.get("decode_step_time_s", 0.0)}, "runnable": p.get("status") == "ok"}
        if not c["runnable"]:
            c["excluded_reason"] = f"status {p.get('status')}"
        out.append(c)
    for p in d["prefill_points"]:
        c = {"id": f"{src}-prefill-b{p['batch']}-p{p['prompt_tokens']}", **common, "cuda_graphs": False,
             "metric": "prefill_time_s", "inputs": {"batch": p["batch"], "prompt_tokens": p["prompt_tokens"]},
             "measured": {"value": p.get("prefill_time_eager_s", 0.0)}, "runnable": p.get("status") == "ok"}
        if not c["runnable"]:
            c["excluded_reason"] = f"status {p.get('status')}"
        out.append(c)
    return {"schema": 1, "description": "MoE cases (out of tree)", "sources": {src: MEAS}, "cases": out}


def rows_of(o):
    if isinstance(o, dict):
        if "qwen3-30b-a3b" in str(o.get("id", "")) and "predicted" in o:
            yield o
        for v in o.values():
            yield from rows_of(v)
    elif isinstance(o, list):
        for v in o:
            yield from rows_of(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuplan", default="build/ci/cli/gpuplan")
    a = ap.parse_args()
    d = json.load(open(MEAS))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    with tempfile.TemporaryDirectory() as tmp:
        dd = os.path.join(tmp, "data")
        shutil.copytree("data", dd)
        json.dump(MODEL, open(os.path.join(dd, "models", "qwen3-30b-a3b.json"), "w"), indent=2)
        json.dump(cases(d), open(os.path.join(dd, "validation", "measured_inference_cases.json"), "w"), indent=2)
        r = subprocess.run([a.gpuplan, "validate", "--format", "json", "--data-dir", dd], capture_output=True,
                           text=True, env=env, check=True)
        seen, rows = set(), []
        for x in rows_of(json.loads(r.stdout)):
            if x["id"] not in seen:
                seen.add(x["id"])
                rows.append({k: x.get(k) for k in ("id", "metric", "measured", "predicted", "error",
                                                   "predicted_calibrated", "error_calibrated", "status")})
        serve = []
        for p in d["decode_points"]:
            b, c = p["batch"], p["context_tokens"]
            s = subprocess.run([a.gpuplan, "serve", "-m", "qwen3-30b-a3b", "--data-dir", dd, "--batch", str(b),
                                "--input-tokens", str(c), "--output-tokens", "2", "--engine", "plain", "--format",
                                "json"], capture_output=True, text=True, env=env)
            try:
                sj = json.loads(s.stdout)
                v, sb = sj.get("decode_step_s"), sj.get("batch")
            except json.JSONDecodeError:
                v, sb = None, None
            if sb != b:  # serve caps the batch at the KV capacity of --engine plain: not the measured point
                v = None
            serve.append({"batch": b, "context_tokens": c, "measured_s": p.get("decode_step_time_s"),
                          "serve_batch": sb, "serve_decode_step_s": v,
                          "error": (v / p["decode_step_time_s"] - 1) if v and p.get("decode_step_time_s") else None})
    dec = [r_ for r_ in rows if r_["metric"] == "decode_step_time_s" and r_["error"] is not None]
    summ = {
        "decode_median_abs_error_defaults": statistics.median(abs(r_["error"]) for r_ in dec),
        "decode_median_abs_error_calibrated": statistics.median(abs(r_["error_calibrated"]) for r_ in dec
                                                                if r_["error_calibrated"] is not None),
        "serve_cmd_decode_median_abs_error": statistics.median(abs(s["error"]) for s in serve if s["error"] is not None),
    }
    res = {"what": "gpuplan validate path (kernels eager, fa2, CUDA graphs for decode; eager prefill) and gpuplan "
                   "serve (its default kernel style, --engine plain, calibration profile) vs serve_qwen3_30b_a3b.json",
           "gpuplan": a.gpuplan, "git_head": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                                            text=True).stdout.strip(),
           "units": "seconds; error = predicted / measured - 1", "validate_rows": rows, "serve_decode": serve,
           "summary": summ}
    with open(OUT, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"{'case':<58} {'meas ms':>8} {'pred ms':>8} {'err':>7} {'cal ms':>8} {'err':>7}")
    for r_ in rows:
        print(f"{r_['id']:<58} {r_['measured'] * 1e3:8.2f} {r_['predicted'] * 1e3:8.2f} {r_['error'] * 100:+6.1f}% "
              f"{r_['predicted_calibrated'] * 1e3:8.2f} {r_['error_calibrated'] * 100:+6.1f}%")
    print("gpuplan serve decode_step_s:")
    for s in serve:
        e = f"{s['error'] * 100:+6.1f}%" if s["error"] is not None else f"- (serve ran batch {s['serve_batch']})"
        v = f"{s['serve_decode_step_s'] * 1e3:8.2f}" if s["serve_decode_step_s"] else "-"
        print(f"  b={s['batch']:>3} ctx={s['context_tokens']}: measured {s['measured_s'] * 1e3:8.2f} ms serve {v} ms {e}")
    print(summ, "->", OUT)


if __name__ == "__main__":
    main()
