#!/usr/bin/env python3
"""Decode attention as the eager-ops serving benches run it (issue #27; session 32): F.scaled_dot_product_attention
(q [b, nh, 1, D], the cache views kc[:, :, :ctx+1], enable_gqa=True), default backend choice, bf16, D = 128.

Per (b, nh, kvh, ctx): the median time of one call over --reps calls inside one CUDA graph (replayed --replays
times), and the kernels the profiler saw in one eager call (name, grid, duration). Why: gpuplan's decode attention
for this engine pads each KV head's query group to a 64- or 128-row tile (FA2's swapped-GQA layout); on two H200s
at TP 2 (Llama-3-70B shape, 4 KV heads per GPU) the model's step grows 1.5x faster with batch than measured
(session 32, serve_tp2_llama3_70b_l20_batch_steps_tp.json). This times the attention alone and names its kernel.
Usage: python3 scripts/measure/decode_attn_probe.py --out-dir $OUT      (--dry: print the plan, no GPU)
"""
import argparse, json, os, statistics, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def plan(a):
    pts = []
    for (nh, kvh) in [(32, 4), (32, 8), (16, 2), (64, 8)]:
        for b in a.batches:
            pts.append((b, nh, kvh, a.ctx))
    return pts


def kernels_of(torch, f):
    """The CUDA kernels (name, µs) one call of f runs, after three warm-up calls."""
    from torch.profiler import profile, ProfilerActivity
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        f()
        torch.cuda.synchronize()
    return [{"name": e.name[:160], "us": e.device_time_total} for e in prof.events() if e.device_type.name == "CUDA"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="1,8,16,32,33,64,128,143,160,161,176,177,192,193,256,257,288,289,384,385")
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--replays", type=int, default=10)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--prefill", default="", help="prefill kernels only: comma list of SxNHxKVH (causal, batch 1)")
    p.add_argument("--dry", action="store_true")
    a = p.parse_args()
    a.batches = [int(x) for x in a.batches.split(",")]
    pts = plan(a)
    if a.dry:
        print(json.dumps({"points": pts}))
        return
    import torch
    import torch.nn.functional as F
    dev = torch.device("cuda")
    D = 128
    if a.prefill:
        res = []
        for spec in a.prefill.split(","):
            S, nh, kvh = (int(x) for x in spec.split("x"))
            # The layout node_serve_step.py hands SDPA: q, k, v are views of one fused QKV output [1, S, (nh+2kvh)·D]
            # (heads transposed, last dim contiguous); --prefill also times each backend alone (CUDA events, median).
            qkv = torch.randn(1, S, (nh + 2 * kvh) * D, device=dev, dtype=torch.bfloat16)
            q = qkv[..., :nh * D].view(1, S, nh, D).transpose(1, 2)
            k = qkv[..., nh * D:(nh + kvh) * D].view(1, S, kvh, D).transpose(1, 2)
            v = qkv[..., (nh + kvh) * D:].view(1, S, kvh, D).transpose(1, 2)
            f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            ks = kernels_of(torch, f)
            from torch.nn.attention import SDPBackend, sdpa_kernel
            times = {}
            for name, be in [("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
                try:
                    ctx = sdpa_kernel([be]) if be is not None else None
                    if ctx is not None:
                        ctx.__enter__()
                    for _ in range(3):
                        f()
                    ts = []
                    for _ in range(20):
                        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
                        e0.record(); f(); e1.record(); e1.synchronize()
                        ts.append(e0.elapsed_time(e1) / 1e3)
                    times[name] = statistics.median(ts)
                except RuntimeError as ex:
                    times[name] = f"error: {str(ex)[:80]}"
                finally:
                    if ctx is not None:
                        ctx.__exit__(None, None, None)
            res.append({"seq": S, "heads": nh, "kv_heads": kvh, "layout": "fused QKV views (BSHD)", "kernels": ks,
                        "time_s": times})
            print(f"prefill S={S} nh={nh} kvh={kvh}: " + "; ".join(f"{k['name'][:70]} {k['us']:.1f}" for k in ks)
                  + "  times " + ", ".join(f"{n} {t*1e6:.1f} us" if isinstance(t, float) else f"{n} {t}"
                                           for n, t in times.items()), flush=True)
        if a.out_dir:
            with open(os.path.join(a.out_dir, "prefill_attn_probe.json"), "w") as fh:
                json.dump({"torch": torch.__version__, "points": res}, fh, indent=1)
        return
    out = {"ctx": a.ctx, "torch": torch.__version__, "device": torch.cuda.get_device_name(), "points": []}
    maxb = max(a.batches)
    for (b, nh, kvh, ctx) in pts:
        kc = torch.randn(b, kvh, ctx + 64, D, device=dev, dtype=torch.bfloat16)
        vc = torch.randn_like(kc)
        q = torch.randn(b, 1, nh, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        f = lambda: F.scaled_dot_product_attention(q, kc[:, :, :ctx + 1], vc[:, :, :ctx + 1], enable_gqa=True)
        ks = kernels_of(torch, f)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                f()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(a.reps):
                f()
        g.replay(); torch.cuda.synchronize()
        ts = []
        for _ in range(a.replays):
            e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
            e0.record(); g.replay(); e1.record(); e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3 / a.reps)
        t = statistics.median(ts)
        kv_bytes = 2 * b * kvh * (ctx + 1) * D * 2
        rec = {"batch": b, "heads": nh, "kv_heads": kvh, "ctx": ctx, "time_s": t, "kv_bytes": kv_bytes,
               "kv_GBps": kv_bytes / t / 1e9, "kernels": ks, "spread": (max(ts) - min(ts)) / t}
        out["points"].append(rec)
        print(f"b={b:4d} nh={nh} kvh={kvh} {t*1e6:8.1f} us  {kv_bytes/t/1e9:7.0f} GB/s  " +
              "; ".join(f"{k['name'][:60]} {k['us']:.1f}" for k in ks), flush=True)
        del kc, vc, g
        torch.cuda.empty_cache()
    if a.out_dir:
        with open(os.path.join(a.out_dir, "decode_attn_probe.json"), "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
