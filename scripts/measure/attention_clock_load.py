#!/usr/bin/env python3
"""Burst against sustained: does fused attention lose the same clock under its board's power cap as a GEMM?

gpuplan prices every compute-bound kernel of a training step at the clock the GPU holds under load (the GEMM ceilings
are sustained cuBLASLt rates; our Hopper attention was measured after a 10 s load, attention_sdpa.py). The Blackwell
attention rows come from NVIDIA's cuDNN SDPA sweep, which pauses between calls (burst clocks), and are brought to the
sustained clock by the GEMM's measured sustained/burst ratio (data/hardware/efficiency/measured.json, BLACKWELL-ATTN).
This script checks that step on the part we have: for each item it times
  burst:     --burst-reps single calls, each after a --pause-s idle pause (clocks back at their maximum) and two
             untimed calls (a few ms of load, far below the power controller's averaging window), and
  sustained: back-to-back calls for --load-s seconds, then the median of the last --reps calls,
sampling the SM clock, power and clock-event reasons with nvidia-smi in each phase. Items: a bf16 GEMM (M = N = K =
--gemm-n, torch.matmul) and cuDNN SDPA forward + backward (torch SDPA's cuDNN backend, bf16, d 128, causal, s =
--seq, b*s = --tokens, 32 heads; the cudnn-frontend sweep's shape was 128 query / 8 KV heads, b 1).
Correctness first: the GEMM against a float32 matmul on a slice, the attention output against the math backend on a
small problem (relative Frobenius error). FLOPs: GEMM 2*M*N*K; attention as gpuplan counts it (fwd 4*b*h*s^2*d, x0.5
causal, bwd 2.5x fwd). The figure of interest is (sustained rate / burst rate) of the attention against the GEMM's. A last phase runs the
three kernels of a training step's kinds in a loop (GEMM, GEMM, attention fwd+bwd, a 1 GiB elementwise pass) for
--load-s seconds and times each inside the mix: the clock a step's kernels share, against each kernel's own.
Writes $OUT/attention_clock_load.json. --dry prints the items and the phases on a CPU without torch.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

try:  # --dry runs without torch
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
except ImportError:
    torch = F = SDPBackend = sdpa_kernel = None


def attention_flops(b, h, s, d):
    fwd = 4.0 * b * h * s * s * d * 0.5
    return fwd * 3.5  # forward + backward (2.5x)


def rel_err(x, ref):
    return float((x.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def make_gemm(n, dev):
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.matmul(a, b)
    ref = torch.matmul(a[:256].float(), b.float())
    err = rel_err(c[:256], ref)
    return (lambda: torch.matmul(a, b)), 2.0 * n ** 3, err


def make_attention(seq, tokens, dev):
    b, h, d = max(1, tokens // seq), 32, 128
    q, k, v = (torch.randn(b, h, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    go = torch.randn(b, h, seq, d, device=dev, dtype=torch.bfloat16)
    # correctness on a small problem against the math backend in float32
    qs, ks, vs = (x[:1, :4, :512].detach().contiguous() for x in (q, k, v))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)
    ref = F.scaled_dot_product_attention(qs.float(), ks.float(), vs.float(), is_causal=True)
    err = rel_err(o, ref)

    def call():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(go)
        q.grad = k.grad = v.grad = None

    return call, attention_flops(b, h, seq, d), err, {"b": b, "h": h, "s": seq, "d": d}


def timed(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3


def burst(fn, reps, pause_s):
    ts = []
    with common.SmiSampler(0, period_s=0.2) as smi:
        for _ in range(reps):
            time.sleep(pause_s)
            fn()
            fn()
            ts.append(timed(fn))
    return ts, smi.summary()


def sustained(fn, load_s, reps):
    ts = []
    with common.SmiSampler(0, period_s=0.5) as smi:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < load_s:
            for _ in range(8):
                fn()
            torch.cuda.synchronize()
        for _ in range(reps):
            ts.append(timed(fn))
    return ts, smi.summary()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--gemm-n", type=int, default=8192)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--burst-reps", type=int, default=10)
    p.add_argument("--pause-s", type=float, default=1.0)
    p.add_argument("--load-s", type=float, default=25.0)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--peak-tflops", type=float, default=989.4)
    p.add_argument("--dry", action="store_true", help="print the plan, touch no GPU, write nothing")
    a = p.parse_args()
    b = max(1, a.tokens // a.seq)
    items = [("gemm_bf16", f"torch.matmul [{a.gemm_n}]^3 bf16, {2.0 * a.gemm_n ** 3 / 1e12:.2f} TFLOP a call"),
             ("sdpa_cudnn_fwd_bwd", f"cuDNN SDPA fwd+bwd causal q,k,v [{b}, 32, {a.seq}, 128] bf16, "
                                    f"{attention_flops(b, 32, a.seq, 128) / 1e12:.2f} TFLOP a call")]
    if a.dry:
        for name, what in items:
            print(f"{name}: {what}; burst {a.burst_reps} calls after {a.pause_s} s pauses; sustained {a.load_s} s "
                  f"back-to-back then {a.reps} timed calls")
        print(f"mix: gemm, gemm, attention, elementwise (1 GiB bf16 addcmul) for {a.load_s} s, then {a.reps} timed each")
        print(f"about {len(items) * (a.burst_reps * (a.pause_s + 0.1) + a.load_s + 5) + a.load_s + 5:.0f} s of GPU time")
        return
    dev = torch.device("cuda")
    rec = {"name": "attention_clock_load", "kind": "burst_vs_sustained",
           "timing": "CUDA events per call; burst = median of single calls after idle pauses; sustained = median of"
                     " the last calls after a back-to-back load",
           "peak_tflops_ref": a.peak_tflops, "args": vars(a)}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    gemm, gemm_flops, gemm_err = make_gemm(a.gemm_n, dev)
    attn, attn_flops, attn_err, shape = make_attention(a.seq, a.tokens, dev)
    rec["checks"] = {"gemm_rel_err_vs_fp32": gemm_err, "sdpa_rel_err_vs_math_fp32": attn_err}
    if gemm_err > 2e-2 or attn_err > 2e-2:
        rec["refused"] = "correctness check failed"
        print(common.write_json(rec, "attention_clock_load"))
        sys.exit(1)
    results = {}
    for name, fn, flops in (("gemm_bf16", gemm, gemm_flops), ("sdpa_cudnn_fwd_bwd", attn, attn_flops)):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        tb, smi_b = burst(fn, a.burst_reps, a.pause_s)
        ts, smi_s = sustained(fn, a.load_s, a.reps)
        mb, ms = statistics.median(tb), statistics.median(ts)
        results[name] = {
            "flops_per_call": flops,
            "burst": {"median_s": mb, "min_s": min(tb), "max_s": max(tb), "tflops": flops / mb / 1e12,
                      "eff": flops / mb / 1e12 / a.peak_tflops, "smi": smi_b},
            "sustained": {"median_s": ms, "min_s": min(ts), "max_s": max(ts), "tflops": flops / ms / 1e12,
                          "eff": flops / ms / 1e12 / a.peak_tflops, "smi": smi_s},
            "sustained_over_burst_rate": mb / ms,
        }
        print(f"{name}: burst {flops / mb / 1e12:.1f} TFLOP/s, sustained {flops / ms / 1e12:.1f} TFLOP/s, "
              f"ratio {mb / ms:.3f}; SM clock burst {smi_b['sm_clock_MHz']}, sustained {smi_s['sm_clock_MHz']}")
        time.sleep(5.0)  # let the board cool before the next item's burst phase
    # A training-like mix: GEMM, attention fwd+bwd and a streaming elementwise pass (y = x * w + b over 1 GiB of
    # bf16) back to back for --load-s seconds, then each timed inside the mix: the clock a step's kernels share.
    xs = torch.randn(1 << 29, device=dev, dtype=torch.bfloat16)
    ws, bs = torch.randn_like(xs), torch.randn_like(xs)
    elem = lambda: torch.addcmul(bs, xs, ws)  # noqa: E731
    mix_t = {"gemm_bf16": [], "sdpa_cudnn_fwd_bwd": [], "elementwise_3x1GiB": []}
    with common.SmiSampler(0, period_s=0.5) as smi_m:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < a.load_s:
            for _ in range(4):
                gemm(); gemm(); attn(); elem()  # noqa: E702
            torch.cuda.synchronize()
        for _ in range(a.reps):
            mix_t["gemm_bf16"].append(timed(gemm))
            mix_t["sdpa_cudnn_fwd_bwd"].append(timed(attn))
            mix_t["elementwise_3x1GiB"].append(timed(elem))
    results["mix"] = {k: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v)} for k, v in mix_t.items()}
    results["mix"]["smi"] = smi_m.summary()
    for k in ("gemm_bf16", "sdpa_cudnn_fwd_bwd"):
        results["mix"][k]["over_sustained_alone_rate"] = results[k]["sustained"]["median_s"] / results["mix"][k]["median_s"]
        results["mix"][k]["over_burst_rate"] = results[k]["burst"]["median_s"] / results["mix"][k]["median_s"]
    print(f"mix: SM clock {results['mix']['smi']['sm_clock_MHz']}; gemm rate vs sustained alone "
          f"{results['mix']['gemm_bf16']['over_sustained_alone_rate']:.3f}, attention "
          f"{results['mix']['sdpa_cudnn_fwd_bwd']['over_sustained_alone_rate']:.3f}")
    rec["attention_shape"] = shape
    rec["results"] = results
    rec["attention_vs_gemm_ratio"] = (results["sdpa_cudnn_fwd_bwd"]["sustained_over_burst_rate"]
                                      / results["gemm_bf16"]["sustained_over_burst_rate"])
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print(common.write_json(rec, "attention_clock_load"))


if __name__ == "__main__":
    main()
