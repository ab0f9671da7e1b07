#!/usr/bin/env python3
"""How much memory beyond the allocated peak does a training step need when the GPU is full? And how much does a
CUDA process take outside the caching allocator (context, kernel images, cuBLAS workspace)?

Why: gpuplan's fragmentation term is 5% of the allocated peak (an outside figure), and our allocator data
(data/validation/measured/*: max_memory_reserved - max_memory_allocated = 4-40% of the allocated peak) were taken with
memory to spare, where the caching allocator never gives cached blocks back. At the capacity limit PyTorch frees its
cached, unused segments and retries before it raises out-of-memory, so what a step really needs beyond its allocated
peak is the smallest reserved-memory cap under which it still runs, minus the allocated peak. This script measures
that cap.

Parts (one GPU):
  context  - in a fresh child process: device memory used (cudaMemGetInfo: total - free) minus the allocator's
             reserved bytes, (0) before any CUDA call (nvidia-smi's memory.used, the driver's share), (1) after CUDA
             initialisation, (2) after a first bf16 GEMM (cuBLASLt handle and workspace, its kernels loaded),
             (3) after flash SDPA forward + backward, (4) after a fused AdamW step. CUDA_MODULE_LOADING is recorded.
  headroom - for each config (train_step.py's Llama-style model, bf16 autocast, fp32 params, fused AdamW):
             (a) uncapped: warm-up steps, then peak allocated P and peak reserved R over --steps steps;
             (b) bisection on a cap C (torch.cuda.set_per_process_memory_fraction(C / total)) between P and R + 1 GiB,
                 to --resolution-mib: a trial empties the cache, sets the cap and runs --steps steps; it passes when
                 none raises out-of-memory. Reports C_min, C_min - P (the headroom a full GPU needs) and its ratio to
                 P and to P - static (the step's transient allocations), and the allocator's inactive-split peak.

  --layout contiguous (session 31, issue #22 item 4): the same step with Megatron-Core's static layout instead of one
             tensor per parameter: bf16 weights as views of one buffer (ParamAndGradBuffer.param_data), their gradients
             added into views of one bf16 buffer (main_grad, the unfused accumulation: autograd's fresh gradient, then
             main_grad.add_ in a post-accumulate hook), the fp32 master copy and AdamW's two states as flat fp32
             tensors (the distributed optimizer's shard at DP 1), the master gradient made from the buffer as a fresh
             fp32 tensor before each step (DistributedOptimizer._copy_model_grads_to_main_grads). It asks whether the
             reserve a full GPU needs scales with the allocations that churn within a step (activations, logits,
             gradients in flight) or with everything allocated, i.e. whether buffers allocated once add to it.
             --layout both runs each config both ways.

Output: $OUT/mem_headroom.json (or --out-dir). Needs PyTorch with CUDA; no Transformer Engine, no Megatron.
--dry: print the plan (configs × layouts) and write it as mem_headroom_plan.json; no torch, no GPU.
Example: python3 scripts/measure/mem_headroom.py --layout both --configs w7b_L8_s4096_b4,llama1b_s2048_b4 --out-dir $OUT
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GiB = 1 << 30
MiB = 1 << 20

# (name, hidden, layers, heads, kv_heads, intermediate, vocab, seq, micro_batch, ckpt): two of our measured configs
# (mem_llama1b_s2048_b4.json, w7b_L8_s4096_b4.json) and the 7B-layer one with full recomputation.
CONFIGS = {
    "llama1b_s2048_b4": dict(hidden=2048, layers=16, heads=32, kv_heads=8, intermediate=8192, vocab=128256,
                             seq=2048, micro_batch=4, ckpt="none"),
    "w7b_L8_s4096_b4": dict(hidden=4096, layers=8, heads=32, kv_heads=32, intermediate=11008, vocab=32000,
                            seq=4096, micro_batch=4, ckpt="none"),
    "w7b_L8_s4096_b4_ckpt": dict(hidden=4096, layers=8, heads=32, kv_heads=32, intermediate=11008, vocab=32000,
                                 seq=4096, micro_batch=4, ckpt="full"),
}


def bisect_cap(lo, hi, resolution, passes):
    """Smallest cap in (lo, hi] (multiples of `resolution` above lo) for which passes(cap) is true, assuming
    monotonicity; hi must pass. Returns (cap, trials) with trials = [(cap, ok), ...]."""
    trials = []
    if not passes(hi):
        trials.append((hi, False))
        return None, trials
    trials.append((hi, True))
    while hi - lo > resolution:
        mid = lo + ((hi - lo) // (2 * resolution)) * resolution
        if mid <= lo:
            mid = lo + resolution
        if mid >= hi:
            break
        ok = passes(mid)
        trials.append((mid, ok))
        if ok:
            hi = mid
        else:
            lo = mid
    return hi, trials


def headroom_summary(peak_alloc, peak_reserved, static, cap_min):
    """The derived numbers of one config (pure arithmetic, tested on the CPU)."""
    out = {"peak_allocated_bytes": peak_alloc, "peak_reserved_uncapped_bytes": peak_reserved,
           "static_bytes": static, "min_cap_bytes": cap_min,
           "reserve_uncapped_bytes": peak_reserved - peak_alloc,
           "reserve_uncapped_over_allocated": (peak_reserved - peak_alloc) / peak_alloc}
    if cap_min is not None:
        need = cap_min - peak_alloc
        out["headroom_at_cap_bytes"] = need
        out["headroom_over_allocated"] = need / peak_alloc
        out["headroom_over_transient"] = need / max(1, peak_alloc - static)
    return out


# ------------------------------------------------------------------------------------------------------ CUDA context
def smi_used_mib(gpu):
    try:
        r = subprocess.run(["nvidia-smi", f"--id={gpu}", "--query-gpu=memory.used,memory.total",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        used, total = (float(x) for x in r.stdout.strip().split(","))
        return used, total
    except Exception:  # noqa: BLE001
        return None, None


def context_probe():
    """Runs in a fresh child process; prints one JSON line."""
    rec = {"CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING")}
    used0, total0 = smi_used_mib(0)
    rec["smi_used_before_cuda_MiB"] = used0
    rec["smi_total_MiB"] = total0
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda", 0)
    steps = {}

    def point(name):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info(dev)
        reserved = torch.cuda.memory_reserved(dev)
        steps[name] = {"device_used_bytes": total - free, "allocator_reserved_bytes": reserved,
                       "outside_allocator_bytes": total - free - reserved}
        smi, _ = smi_used_mib(0)
        steps[name]["smi_used_MiB"] = smi

    torch.cuda.init()
    torch.empty(1, device=dev)
    point("after_init")
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    (a @ a).sum().item()
    point("after_bf16_gemm")
    q = torch.randn(2, 32, 2048, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.FLASH_ATTENTION]):
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    point("after_flash_sdpa_fwd_bwd")
    w = torch.nn.Parameter(torch.randn(4096, 4096, device=dev))
    opt = torch.optim.AdamW([w], fused=True)
    w.grad = torch.randn_like(w)
    opt.step()
    point("after_fused_adamw")
    rec["points"] = steps
    rec["torch"] = torch.__version__
    rec["cuda_runtime"] = torch.version.cuda
    rec["device"] = torch.cuda.get_device_name(dev)
    print("CONTEXT_JSON " + json.dumps(rec), flush=True)


def run_context_probe():
    env = dict(os.environ)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--context-probe"], capture_output=True, text=True,
                       env=env, timeout=300)
    for line in r.stdout.splitlines():
        if line.startswith("CONTEXT_JSON "):
            return json.loads(line[len("CONTEXT_JSON "):])
    return {"error": (r.stderr or r.stdout)[-2000:]}


# ---------------------------------------------------------------------------------------------------------- headroom
def contiguous_layout(torch, model, dev):
    """Megatron-Core's static buffers (--layout contiguous, see the module doc): returns (step_fn, zero_fn, keep)."""
    params = [p for p in model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    pbuf = torch.empty(n, dtype=torch.bfloat16, device=dev)
    gbuf = torch.zeros(n, dtype=torch.bfloat16, device=dev)
    off = 0
    for p in params:
        k = p.numel()
        pbuf[off:off + k].copy_(p.detach().reshape(-1))
        p.data = pbuf[off:off + k].view_as(p)
        p.main_grad = gbuf[off:off + k].view_as(p)
        off += k
    gc.collect()
    torch.cuda.empty_cache()  # the per-tensor fp32 parameters are gone; only the buffers stay

    def accumulate(p):
        p.main_grad.add_(p.grad)
        p.grad = None

    for p in params:
        p.register_post_accumulate_grad_hook(accumulate)
    master = pbuf.float().requires_grad_()
    opt = torch.optim.AdamW([master], lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)

    def optimizer_step():
        master.grad = gbuf.float()  # a fresh fp32 main gradient, as the distributed optimizer makes it
        opt.step()
        master.grad = None
        pbuf.copy_(master.detach())
        gbuf.zero_()

    def zero():
        gbuf.zero_()
        for p in params:
            p.grad = None
        master.grad = None

    return optimizer_step, zero, (pbuf, gbuf, master, opt)


def measure_config(name, cfg, steps, warmup, resolution, layout="per_tensor"):
    import torch

    import train_step as ts

    dev = torch.device("cuda", 0)
    a = types.SimpleNamespace(rope_theta=500000.0, **cfg)
    ts.configure_sdpa("flash")
    torch.manual_seed(1234)
    with torch.device(dev):
        model = ts.Llama(a)
        ts.init_weights(model)
    keep = None
    if layout == "contiguous":
        optimizer_step, zero_grads, keep = contiguous_layout(torch, model, dev)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)

        def optimizer_step():
            opt.step()
            opt.zero_grad(set_to_none=True)

        def zero_grads():
            opt.zero_grad(set_to_none=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1000)
    batches = []
    for _ in range(2):
        t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=dev, generator=gen)
        batches.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
    model.train()

    def step(i):
        inp, tgt = batches[i % 2]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        loss.backward()
        optimizer_step()
        return float(loss.detach())

    total = torch.cuda.get_device_properties(dev).total_memory
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    static = torch.cuda.memory_allocated(dev)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    for i in range(steps):
        step(i)
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats(dev)
    peak_alloc = torch.cuda.max_memory_allocated(dev)
    peak_reserved = torch.cuda.max_memory_reserved(dev)
    uncapped = {"inactive_split_bytes_peak": stats.get("inactive_split_bytes.all.peak"),
                "num_alloc_retries": stats.get("num_alloc_retries")}

    def passes(cap):
        ok = True
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), dev)
        try:
            for i in range(steps):
                step(i)
            torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError:
            ok = False
        zero_grads()
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return ok

    lo = peak_alloc - resolution  # below the allocated peak nothing can run
    hi = min(total, peak_reserved + GiB)
    hi = lo + -(-(hi - lo) // resolution) * resolution
    cap_min, trials = bisect_cap(lo, hi, resolution, passes)
    torch.cuda.set_per_process_memory_fraction(1.0, dev)
    # The allocator's state at the smallest passing cap: one more run there, its retries and inactive-split peak.
    at_cap = {}
    if cap_min is not None:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_min / total), dev)
        before = torch.cuda.memory_stats(dev).get("num_alloc_retries", 0)
        ok = passes(cap_min)
        s2 = torch.cuda.memory_stats(dev)
        at_cap = {"rerun_ok": ok, "num_alloc_retries": s2.get("num_alloc_retries", 0) - before,
                  "peak_allocated_bytes": torch.cuda.max_memory_allocated(dev),
                  "peak_reserved_bytes": torch.cuda.max_memory_reserved(dev),
                  "inactive_split_bytes_peak": s2.get("inactive_split_bytes.all.peak")}
        torch.cuda.set_per_process_memory_fraction(1.0, dev)
    out = {"name": name, "layout": layout, "config": cfg, "steps_per_trial": steps, "warmup": warmup,
           "resolution_bytes": resolution, "total_memory_bytes": total,
           "uncapped": uncapped, "trials": [{"cap_bytes": c, "ok": o} for c, o in trials], "at_min_cap": at_cap}
    out.update(headroom_summary(peak_alloc, peak_reserved, static, cap_min))
    del model, batches, keep
    if layout != "contiguous":
        del opt
    gc.collect()
    torch.cuda.empty_cache()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--context-probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names from CONFIGS")
    p.add_argument("--steps", type=int, default=2, help="steps per trial")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--resolution-mib", type=int, default=64)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--layout", default="per_tensor", choices=["per_tensor", "contiguous", "both"],
                   help="per_tensor: one tensor per parameter (as before); contiguous: Megatron-Core's static buffers")
    p.add_argument("--dry", action="store_true", help="print and write the plan; no torch, no GPU")
    a = p.parse_args()
    layouts = ["per_tensor", "contiguous"] if a.layout == "both" else [a.layout]
    names = a.configs.split(",")
    for name in names:
        if name not in CONFIGS:
            p.error(f"--configs: unknown config {name!r} (known: {', '.join(CONFIGS)})")
    if a.dry:
        plan = {"kind": "mem_headroom_plan", "configs": {n: CONFIGS[n] for n in names}, "layouts": layouts,
                "steps_per_trial": a.steps, "warmup": a.warmup, "resolution_mib": a.resolution_mib}
        out_dir = a.out_dir or os.environ.get("OUT") or "."
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "mem_headroom_plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        print(json.dumps(plan))
        return 0
    if a.context_probe:
        context_probe()
        return 0
    import common

    out_dir = a.out_dir or os.environ.get("OUT") or "."
    os.makedirs(out_dir, exist_ok=True)

    def write(rec):
        with open(os.path.join(out_dir, "mem_headroom.json"), "w") as f:
            json.dump(rec, f, indent=1)

    rec = {"kind": "mem_headroom", "method": __doc__.split("Parts")[0].strip()}
    rec.update(common.run_metadata())
    rec["context"] = run_context_probe()
    print("context:", json.dumps(rec["context"])[:800], flush=True)
    import torch

    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["configs"] = []
    for name in names:
        for layout in layouts:
            try:
                r = measure_config(name, CONFIGS[name], a.steps, a.warmup, a.resolution_mib * MiB, layout)
            except Exception as e:  # noqa: BLE001  (record, go on with the next config)
                r = {"name": name, "layout": layout, "error": repr(e)[-2000:]}
            rec["configs"].append(r)
            print(name, layout, json.dumps({k: v for k, v in r.items() if k not in ("trials", "config")}), flush=True)
            write(rec)  # after each config: a run stopped by a time limit keeps what it measured
    del torch
    return 0


if __name__ == "__main__":
    sys.exit(main())
