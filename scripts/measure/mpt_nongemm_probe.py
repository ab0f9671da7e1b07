#!/usr/bin/env python3
"""The non-GEMM work of an eager-PyTorch llm-foundry-MPT step, kernel by kernel, on one GPU (issue #24).

Why: on the H200 (data/validation/measured/h200-sxm-141gb/mptfsdp_*.json) an MPT-1b step spends 111 ms of 398 in
kernels that are neither GEMMs nor attention, where gpuplan prices ~52 ms. The earlier profile did not record kernel
names. This probe records them and times each non-GEMM op class in isolation with its bytes, so that each class has a
measured bytes/time.

Part A (step): the MPT block of mpt_fsdp_step.py (residual stream in bf16 as under FSDP PURE unless --residual fp32) (GPT-2 layout: bias LayerNorm in bf16, fused QKV with bias, causal
SDPA flash, 4x tanh-GELU MLP with biases, learned positions, tied embedding, fp32 loss; bf16 autocast, fused AdamW,
fp32 master weights) on one GPU; step time by CUDA events (median of --steps), then a CUDA-only torch.profiler run of
2 steps: every kernel by name with calls and microseconds per step, and a class for each.
Part B (ops): each non-GEMM op of the block at the step's token count T = micro_batch * seq, alone, forward and
backward under a CUDA-only profile (kernel time per call, median of 10 calls), with the bytes each pass must move
(written in 'bytes' per op; bf16 = 2 B, fp32 = 4 B). Output: $OUT/<name>.json (one file for A and B).
Usage: OUT=$OUT python3 scripts/measure/mpt_nongemm_probe.py --shape mpt-1b --micro-batch 6
"""
import argparse
import os
import statistics
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import mpt_fsdp_step as mpt  # noqa: E402  (the same MPT module as the FSDP runs)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def kernel_class(name):
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "xmma", "nvjet", "sm90_", "sm80_", "ampere_", "cublas", "splitk")):
        return "gemm"
    if "layer_norm" in n or "layernorm" in n or "gammabeta" in n:
        return "layernorm"
    if "gelu" in n:
        return "gelu"
    if "softmax" in n or "nll_loss" in n or "cross_entropy" in n:
        return "loss"
    if "embedding" in n or "indexselect" in n or "index_select" in n or "radix" in n or "sort" in n or \
            "unique" in n or "scan" in n or "index_put" in n or "segment" in n:
        return "embedding"
    if "multi_tensor_apply" in n or "adam" in n:
        return "optimizer"
    if "reduce_kernel" in n:
        return "reduce"
    if "catarray" in n or "copy" in n or "cat_" in n:
        return "copy"
    if "fill" in n:
        return "fill"
    if "elementwise" in n or "vectorized" in n:
        return "elementwise"
    return "other"


def profile_kernels(fn, n):
    """fn() n times under a CUDA-only profile: per kernel name, calls and microseconds per run."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    agg, ivs = {}, []
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        nm = e.name[:300]
        a = agg.setdefault(nm, [0, 0.0, kernel_class(e.name)])
        a[0] += 1
        a[1] += e.time_range.end - e.time_range.start
        ivs.append((e.time_range.start, e.time_range.end))
    ks = [{"name": k, "class": v[2], "calls": v[0] / n, "us": v[1] / n} for k, v in agg.items()]
    ks.sort(key=lambda k: -k["us"])
    by_class = {}
    for k in ks:
        by_class[k["class"]] = by_class.get(k["class"], 0.0) + k["us"]
    span = (max(e for _, e in ivs) - min(s for s, _ in ivs)) / n if ivs else 0.0
    return {"runs": n, "span_us": span, "busy_us": common.interval_union(ivs) / n, "by_class_us": by_class,
            "kernels": ks}


class MPTBf16Residual(mpt.MPT):
    """The residual stream in bf16, as under FSDP's "PURE" mixed precision (bf16 parameters, so a bf16 embedding
    output): with fp32 parameters and autocast alone, the embedding's output and so the whole residual stream is
    fp32, and every LayerNorm and residual add moves fp32."""

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        x = (self.wte(tokens) + self.wpe(torch.arange(s, device=tokens.device))).to(torch.bfloat16)
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.norm_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def step_part(a, dev, rec):
    torch.manual_seed(1234)
    with torch.device(dev):
        model = MPTBf16Residual(a) if a.residual == "bf16" else mpt.MPT(a)
    for m in model.modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(m.weight, std=0.02)
    rec["params_total"] = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
    g = torch.Generator(device=dev)
    g.manual_seed(1000)
    t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=dev, generator=g)
    inp, tgt = t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    model.train()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    for i in range(a.steps):
        st[i].record()
        step()
        en[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) / 1e3 for s, e in zip(st, en)]
    med, _, _, spread = common.median_and_spread(times)
    rec["step_times_s"] = [round(x, 6) for x in times]
    rec["step_time_s"], rec["step_time_spread_frac"] = med, spread
    rec["tokens_per_s"] = a.micro_batch * a.seq / med
    rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
    rec["step_profile"] = profile_kernels(step, 2)
    del model, opt
    torch.cuda.empty_cache()


def op_cases(a, dev):
    """(name, fn building inputs and returning a closure that runs fwd+bwd, bytes dict)."""
    T, d, V, s = a.micro_batch * a.seq, a.d_model, a.vocab, a.seq
    b, h, hd = a.micro_batch, a.heads, a.d_model // a.heads
    bf, f32 = torch.bfloat16, torch.float32
    E = 2  # bf16 bytes

    def ln():
        x = torch.randn(T, d, device=dev, dtype=bf, requires_grad=True)
        w = torch.randn(d, device=dev, dtype=bf, requires_grad=True)
        bb = torch.randn(d, device=dev, dtype=bf, requires_grad=True)
        dy = torch.randn(T, d, device=dev, dtype=bf)
        return lambda: torch.autograd.grad(F.layer_norm(x, (d,), w, bb, 1e-5), (x, w, bb), dy)

    def gelu():
        x = torch.randn(T, 4 * d, device=dev, dtype=bf, requires_grad=True)
        dy = torch.randn(T, 4 * d, device=dev, dtype=bf)
        return lambda: torch.autograd.grad(F.gelu(x, approximate="tanh"), x, dy)

    def bias_grad(n):
        def mk():
            dy = torch.randn(T, n, device=dev, dtype=bf)
            return lambda: dy.sum(0)
        return mk

    def qkv_split():  # the view/select/transpose of the block and its backward (dq, dk, dv back into [b, s, 3d])
        x = torch.randn(b, s, 3 * d, device=dev, dtype=bf, requires_grad=True)
        g3 = [torch.randn(b, h, s, hd, device=dev, dtype=bf) for _ in range(3)]

        def run():
            qkv = x.view(b, s, 3, h, hd)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            return torch.autograd.grad((q, k, v), x, g3)
        return run

    def attn_out():  # o.transpose(1, 2).reshape(b, s, d): a copy forward; its backward a view
        o = torch.randn(b, h, s, hd, device=dev, dtype=bf, requires_grad=True)
        dy = torch.randn(b, s, d, device=dev, dtype=bf)
        return lambda: torch.autograd.grad(o.transpose(1, 2).reshape(b, s, d), o, dy)

    def residual():
        x = torch.randn(T, d, device=dev, dtype=bf)
        y = torch.randn(T, d, device=dev, dtype=bf)
        return lambda: x + y

    def embedding():  # wte forward gather + dense backward (V x d fp32 grad), as autocast leaves it (fp32 weight)
        w = torch.randn(V, d, device=dev, dtype=f32, requires_grad=True)
        idx = torch.randint(0, V, (b, s), device=dev)
        dy = torch.randn(b, s, d, device=dev, dtype=f32)
        return lambda: torch.autograd.grad(F.embedding(idx, w), w, dy)

    def logits_loss():  # bf16 logits -> fp32 -> cross entropy, forward and backward to the bf16 logits
        lg = torch.randn(T, V, device=dev, dtype=bf, requires_grad=True)
        tg = torch.randint(0, V, (T,), device=dev)
        return lambda: torch.autograd.grad(F.cross_entropy(lg.float(), tg), lg)

    def weight_cast():  # autocast's fp32 -> bf16 weight copy of a 4d x d layer (per forward)
        w = torch.randn(4 * d, d, device=dev, dtype=f32)
        return lambda: w.to(bf)

    return [
        ("layernorm_fwd_bwd", ln, {"fwd": 2 * T * d * E, "bwd": 3 * T * d * E}),
        ("gelu_tanh_fwd_bwd", gelu, {"fwd": 2 * T * 4 * d * E, "bwd": 3 * T * 4 * d * E}),
        ("bias_grad_3d", bias_grad(3 * d), {"bwd": T * 3 * d * E}),
        ("bias_grad_4d", bias_grad(4 * d), {"bwd": T * 4 * d * E}),
        ("bias_grad_d", bias_grad(d), {"bwd": T * d * E}),
        ("qkv_split_bwd", qkv_split, {"bwd_min": 2 * T * 3 * d * E}),
        ("attn_out_transpose", attn_out, {"fwd": 2 * T * d * E}),
        ("residual_add", residual, {"fwd": 3 * T * d * E}),
        ("embedding_fwd_bwd", embedding, {"fwd": 2 * T * d * 4, "bwd_min": T * d * 4 + V * d * 4}),
        ("logits_fp32_cross_entropy", logits_loss, {"cast_fwd": T * V * (E + 4), "lse_fwd": T * V * 4,
                                                    "bwd_min": T * V * (4 + E)}),
        ("weight_cast_4dxd", weight_cast, {"fwd": 4 * d * d * (4 + E)}),
    ]


def ops_part(a, dev, rec):
    out = []
    for name, mk, by in op_cases(a, dev):
        try:
            fn = mk()
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            runs = []
            for _ in range(10):
                runs.append(profile_kernels(fn, 1))
            us = statistics.median(r["busy_us"] for r in runs)
            total_b = sum(by.values())
            out.append({"op": name, "bytes": by, "kernel_us": us,
                        "GBps_if_bytes_all": total_b / (us * 1e-6) / 1e9 if us > 0 else None,
                        "kernels": runs[len(runs) // 2]["kernels"]})
            print(f"[mpt_nongemm] {name}: {us:.1f} us, {total_b/1e6:.1f} MB -> "
                  f"{total_b / (us * 1e-6) / 1e9:.0f} GB/s", flush=True)
            del fn
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            out.append({"op": name, "error": str(e)[:300]})
    rec["ops"] = out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=sorted(mpt.SHAPES), default="mpt-1b")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=50368)
    p.add_argument("--micro-batch", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--residual", choices=["bf16", "fp32"], default="bf16",
                   help="bf16: the residual stream as under FSDP PURE (default); fp32: fp32 parameters + autocast")
    p.add_argument("--skip-step", action="store_true")
    p.add_argument("--skip-ops", action="store_true", help="the step only (no Part B)")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    a.d_model, a.heads, a.layers = mpt.SHAPES[a.shape]
    a.ckpt = "none"
    name = f"mpt_nongemm_{a.shape}_s{a.seq}_b{a.micro_batch}_res{a.residual}"
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    bk = torch.backends.cuda
    bk.enable_flash_sdp(True), bk.enable_mem_efficient_sdp(False), bk.enable_math_sdp(False)
    if hasattr(bk, "enable_cudnn_sdp"):
        bk.enable_cudnn_sdp(False)
    rec = {"name": name, "kind": "mpt_nongemm_probe", "status": "started",
           "config": {k: getattr(a, k) for k in ("shape", "d_model", "heads", "layers", "seq", "vocab", "micro_batch",
                                                 "steps", "warmup", "residual")},
           "precision": "bf16 autocast, bf16 LayerNorm, fp32 loss, fp32 master weights, fused AdamW"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rc = 0
    try:
        if not a.skip_step:
            step_part(a, dev, rec)
            pr = rec["step_profile"]
            print(f"[mpt_nongemm {name}] step={rec['step_time_s']*1e3:.1f} ms spread="
                  f"{rec['step_time_spread_frac']*100:.1f}% busy={pr['busy_us']/1e3:.1f} ms by class (ms): " +
                  ", ".join(f"{k} {v/1e3:.1f}" for k, v in sorted(pr["by_class_us"].items(), key=lambda kv: -kv[1])),
                  flush=True)
        if not a.skip_ops:
            ops_part(a, dev, rec)
        rec["status"] = "ok" if rec.get("step_time_spread_frac", 0) <= 0.10 else "rejected_spread"
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["oom_message"] = str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-2000:]
        print(f"[mpt_nongemm {name}] ERROR {e}", flush=True)
        rc = 1
    print(f"[mpt_nongemm] wrote {common.write_json(rec, name, a.out_dir)}", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
