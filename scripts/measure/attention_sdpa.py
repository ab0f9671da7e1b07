#!/usr/bin/env python3
"""Fused-attention throughput (torch SDPA: the cuDNN and FlashAttention-2 backends), forward and backward, to
measure the attention efficiencies gpuplan's model uses (model/src/ops/efficiency.cpp: attention_fwd/_bwd for Hopper's
fused kernels, attention_fwd_fa2/_bwd_fa2 for FlashAttention-2).

For each backend, head dim d in {64, 128}, causal or not and sequence length s in 1K..16K: q, k, v of shape
[b, h, s, d] in bf16 with b*s = --tokens (default 32768) and h = 4096 / d heads, random normal (never zeros).
Correctness first: each backend's output and input gradients on one small problem are compared with the math
backend in float32 (relative Frobenius error). Timing: CUDA events around each call after warm-up, median of --reps,
forward alone and forward + backward (backward = difference of the medians). A continuous load of --preload-s seconds
of the same attention runs before the sweep, so that the GPU sits at the clock it holds under load (the power cap),
as inside a training step; nvidia-smi is sampled during the sweep.

--dropouts times each item once per attention-dropout probability in the list (torch's dropout_p, applied to the
attention probabilities inside the fused kernel, as GPT-3-style training does with attention_dropout 0.1); the
correctness check runs without dropout (the kernels' random masks cannot be compared with the math backend's).

FLOPs are counted as gpuplan counts them (model/src/ops/ops.cpp attention_cost): forward 4*b*h*s*s*d (halved when
causal), backward 2.5x the forward. Efficiency = TFLOP/s / --peak-tflops (dense bf16 datasheet peak).
Writes one JSON (default $OUT/attention_sdpa.json). --dry prints the items and their shapes on a CPU.

Short sequences (--seqs 128,177,256,...): b sequences of s tokens in one call are the same kernel work as one
varlen (THD) call over b packed documents of s tokens each (FlashAttention's varlen grid is query tiles x documents x
heads), so the sweep prices per-document attention of packed sequences at their document length.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

try:  # --dry runs without torch (a CPU with no PyTorch)
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

    BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
except ImportError:
    torch = F = SDPBackend = sdpa_kernel = None
    BACKENDS = {}


def fwd_flops(b, h, s, d, causal):
    return 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def rel_err(x, ref):
    return float((x.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def check(backend, d, causal, dev):
    """Output and gradients of one small problem against the math backend in float32."""
    torch.manual_seed(1234 + d + int(causal))
    b, h, s = 2, 4, 512
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    go = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
    with sdpa_kernel([BACKENDS[backend]]):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o.backward(go)
    got = [o.detach(), q.grad, k.grad, v.grad]
    q32, k32, v32 = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        o32 = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
    o32.backward(go.float())
    ref = [o32.detach(), q32.grad, k32.grad, v32.grad]
    errs = [rel_err(g, r) for g, r in zip(got, ref)]
    if not all(e == e for e in errs):  # NaN never passes
        raise RuntimeError(f"{backend} d={d} causal={causal}: NaN in the check")
    return max(errs)


def time_calls(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) / 1e3 for s, e in ev]
    return statistics.median(ts), min(ts), max(ts)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--backends", default="cudnn,flash")
    p.add_argument("--preload-s", type=float, default=10.0)
    p.add_argument("--peak-tflops", type=float, default=989.4)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="attention_sdpa")
    p.add_argument("--dropouts", default="0", help="comma list of attention dropout probabilities (default 0)")
    p.add_argument("--dry", action="store_true", help="print the items and their shapes, touch no GPU, write nothing")
    a = p.parse_args()
    if a.dry:
        for be in [b for b in a.backends.split(",") if b]:
            for d in [int(x) for x in a.head_dims.split(",")]:
                for s in [int(x) for x in a.seqs.split(",")]:
                    b, h = max(1, a.tokens // s), 4096 // d
                    print(f"{be:5s} d={d:3d} s={s:6d} b={b:4d} h={h:3d} causal and not: q, k, v [{b}, {h}, {s}, {d}] bf16;"
                          f" causal fwd {fwd_flops(b, h, s, d, True) / 1e9:.2f} GFLOP")
        return
    dev = torch.device("cuda")
    rec = {"name": a.name, "kind": "attention_sdpa", "dtype": "bf16",
           "op": "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal) on [b, h, s, d], one backend",
           "timing": f"CUDA events per call, median of {a.reps} after {a.warmup} warm-ups; backward = median(fwd+bwd)"
                     " - median(fwd)",
           "flops_formula": "fwd 4*b*h*s^2*d (x0.5 causal); bwd 2.5 x fwd (gpuplan's count)",
           "peak_tflops_ref": a.peak_tflops, "preload_s": a.preload_s}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["software"]["cudnn"] = torch.backends.cudnn.version()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    backends = [b for b in a.backends.split(",") if b]
    dims = [int(x) for x in a.head_dims.split(",")]
    seqs = [int(x) for x in a.seqs.split(",")]
    dropouts = [float(x) for x in a.dropouts.split(",") if x]
    rec["dropouts"] = dropouts
    checks, results, refused = [], [], []
    for be in backends:
        for d in dims:
            for causal in (True, False):
                try:
                    err = check(be, d, causal, dev)
                    checks.append({"backend": be, "d": d, "causal": causal, "max_rel_error": err})
                    print(f"check {be:5s} d={d:3d} causal={causal!s:5s} max rel error {err:.2e}", flush=True)
                except Exception as e:  # noqa: BLE001 - the record says why
                    refused.append({"backend": be, "d": d, "causal": causal, "reason": f"check: {str(e)[:300]}"})
                    print(f"check {be} d={d} causal={causal}: {str(e)[:200]}", flush=True)
    ok = {(c["backend"], c["d"], c["causal"]) for c in checks if c["max_rel_error"] < 2e-2}
    for c in checks:
        if (c["backend"], c["d"], c["causal"]) not in ok:
            refused.append({**c, "reason": "check error over 2e-2"})
    # Preload: the GPU at its loaded clock before the first timed item.
    if a.preload_s > 0 and ok:
        be, d, causal = sorted(ok)[0]
        h, s = 4096 // d, 4096
        b = max(1, a.tokens // s)
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
        t0 = time.time()
        with sdpa_kernel([BACKENDS[be]]):
            while time.time() - t0 < a.preload_s:
                for _ in range(20):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
        del q, k, v
    with common.SmiSampler(0) as sampler:
        for be in backends:
            for d in dims:
                for causal in (True, False):
                    if (be, d, causal) not in ok:
                        continue
                    for s, pdrop in [(s, pd) for s in seqs for pd in dropouts]:
                        h = 4096 // d
                        b = max(1, a.tokens // s)
                        torch.manual_seed(s + d)
                        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                                   for _ in range(3))
                        go = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
                        try:
                            with sdpa_kernel([BACKENDS[be]]):
                                def fwd():
                                    with torch.no_grad():
                                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                              dropout_p=pdrop)

                                def fwd_bwd():
                                    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=pdrop)
                                    q.grad = k.grad = v.grad = None
                                    o.backward(go)

                                tf_med, tf_min, tf_max = time_calls(fwd, a.reps, a.warmup)
                                tb_med, tb_min, tb_max = time_calls(fwd_bwd, a.reps, a.warmup)
                        except Exception as e:  # noqa: BLE001 - the record says why
                            refused.append({"backend": be, "d": d, "causal": causal, "s": s, "dropout_p": pdrop,
                                            "reason": str(e)[:300]})
                            print(f"{be} d={d} causal={causal} s={s}: {str(e)[:200]}", flush=True)
                            continue
                        ff = fwd_flops(b, h, s, d, causal)
                        bwd_t = tb_med - tf_med
                        r = {"backend": be, "d": d, "causal": causal, "s": s, "b": b, "h": h, "dropout_p": pdrop,
                             "fwd_s": tf_med, "fwd_min_s": tf_min, "fwd_max_s": tf_max,
                             "fwd_bwd_s": tb_med, "fwd_bwd_min_s": tb_min, "fwd_bwd_max_s": tb_max,
                             "bwd_s": bwd_t, "fwd_flops": ff, "bwd_flops": 2.5 * ff,
                             "fwd_tflops": ff / tf_med / 1e12, "bwd_tflops": 2.5 * ff / bwd_t / 1e12,
                             "fwd_eff": ff / tf_med / 1e12 / a.peak_tflops,
                             "bwd_eff": 2.5 * ff / bwd_t / 1e12 / a.peak_tflops}
                        results.append(r)
                        print(f"{be:5s} d={d:3d} causal={causal!s:5s} s={s:6d} p={pdrop:.2f} b={b:3d} h={h:3d}  fwd {tf_med*1e3:8.3f} ms"
                              f" {r['fwd_tflops']:6.1f} TF/s ({r['fwd_eff']:.3f})  bwd {bwd_t*1e3:8.3f} ms"
                              f" {r['bwd_tflops']:6.1f} TF/s ({r['bwd_eff']:.3f})", flush=True)
                        del q, k, v, go
                        torch.cuda.empty_cache()
    rec["checks"] = checks
    rec["results"] = results
    rec["refused"] = refused
    rec["nvidia_smi_during"] = sampler.summary()
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print("wrote", common.write_json(rec, a.name, a.out_dir), flush=True)


if __name__ == "__main__":
    main()
