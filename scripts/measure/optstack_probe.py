#!/usr/bin/env python3
"""Why the optimisation stack's AMP and flash steps are mispriced (issue #27 d3): three probes on one GPU.

The model of optstack.py's GPT-2-small-class step predicts AMP x5.12 (measured x2.27) and flash attention x1.52
(measured x2.01). Candidate causes, each settled by one probe here:
 1. gemm: fp32 GEMMs with TF32 off (PyTorch's default for matmul) run on the FMA units; is their rate what the model
    takes, and do SIMT kernels lose anything on an odd leading dimension (GPT-2's vocabulary 50,257) as the
    tensor-core kernels do? F.linear(X[M,K], W[N,K]) forward, and the two backward products (dgrad X = dY.W,
    wgrad W = dY^T.X) at the step's shapes (M = batch*seq = 16384) in fp32 (TF32 off), tf32 and bf16; plus 4096^3 with
    K or N in {4095, 4096, 4097, 4100, 4104} in fp32 (TF32 off).
 2. attention: the eager attention of optstack.py (materialised scores, scale, mask, softmax, att@v) forward and
    backward alone at b16 h12 s1024 d64, fp32 and under autocast bf16, against SDPA flash: CUDA kernel time per kernel
    name (torch.profiler, CUDA activity only).
 3. step: whole training steps (no data loader: tensors made once) of stages baseline (fp32, foreach=False AdamW),
    amp_bf16 and flash_attn under the same profiler: GPU busy vs span (host gaps), kernel count, top kernels; and the
    step's wall time unprofiled.
And for the GEMM staircase's small-m end (issue #27 d6; 4096x4096 at M <= 64 takes ~35 us where its weights stream in
12 us): 4. smallm: F.linear bf16 at M in {1, 8, 16, 32, 64, 128} over (N, K) with N from 1024 to 32768 and K from 1024
to 16384, median time and the kernel names (grid size is in cuBLAS's kernel name only partly: the names tell gemv,
split-K reduction and tile shape).
Writes <out-dir>/optstack_probe.json. About 60-90 s on an H100.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import optstack  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEV = torch.device("cuda")


def time_fn(fn, reps=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts), min(ts), max(ts)


def gemm_probe(a):
    out = []
    m = a.batch * a.seq
    d = a.hidden
    shapes = [("qkv", 3 * d, d), ("proj", d, d), ("fc", 4 * d, d), ("out", d, 4 * d), ("head", a.vocab, d),
              ("head_pad64", 50304, d)]
    for mode in ("fp32", "tf32", "bf16"):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        dt = torch.bfloat16 if mode == "bf16" else torch.float32
        for name, n, k in shapes:
            x = torch.randn(m, k, device=DEV, dtype=dt)
            w = torch.randn(n, k, device=DEV, dtype=dt)
            dy = torch.randn(m, n, device=DEV, dtype=dt)
            for op, fn in (("fwd", lambda: F.linear(x, w)), ("dgrad", lambda: dy @ w), ("wgrad", lambda: dy.t() @ x)):
                try:
                    t, lo, hi = time_fn(fn, reps=5 if mode == "fp32" else 10)
                    out.append({"mode": mode, "layer": name, "op": op, "M": m, "N": n, "K": k, "time_s": t,
                                "min_s": lo, "max_s": hi, "tflops": 2 * m * n * k / t / 1e12})
                except Exception as e:  # noqa: BLE001
                    out.append({"mode": mode, "layer": name, "op": op, "error": str(e)[:300]})
            del x, w, dy
            torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    for var in ("K", "N"):
        for v in (4095, 4096, 4097, 4100, 4104):
            mm, k, n = 4096, (v if var == "K" else 4096), (v if var == "N" else 4096)
            x = torch.randn(mm, k, device=DEV)
            w = torch.randn(n, k, device=DEV)
            t, lo, hi = time_fn(lambda: F.linear(x, w), reps=5)
            out.append({"mode": "fp32", "layer": f"align_{var}", "op": "fwd", "M": mm, "N": n, "K": k, "time_s": t,
                        "min_s": lo, "max_s": hi, "tflops": 2 * mm * n * k / t / 1e12})
    return out


def attention_probe(a):
    res = {}
    b, h, s, dh = a.batch, a.heads, a.seq, a.hidden // a.heads
    for mode in ("eager_fp32", "eager_amp", "flash_amp"):
        q, k, v = (torch.randn(b, h, s, dh, device=DEV, requires_grad=True) for _ in range(3))
        amp = mode != "eager_fp32"

        def fn():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                if mode == "flash_amp":
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                else:
                    att = (q @ k.transpose(-2, -1)) * (1.0 / dh ** 0.5)
                    mask = torch.ones(s, s, device=DEV, dtype=torch.bool).triu(1)
                    att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
                    y = att @ v
            y.float().sum().backward()

        for _ in range(3):
            fn()
        res[mode] = common.cuda_kernel_profile(fn, 5, top=25)
        res[mode]["wall_s"] = time_fn(fn, reps=5)[0]
        del q, k, v
        torch.cuda.empty_cache()
    return res


def step_probe(a):
    res = {}
    for idx, stage in ((0, "baseline"), (2, "amp_bf16"), (3, "flash_attn")):
        on = set(optstack.STAGES[1:idx + 1])
        torch.manual_seed(0)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        optstack.Attn.flash = "flash_attn" in on
        model = optstack.GPT(a).to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=False)
        x = torch.randint(0, a.vocab, (a.batch, a.seq), device=DEV)
        y = torch.randint(0, a.vocab, (a.batch, a.seq), device=DEV)
        amp = "amp_bf16" in on

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = model(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        walls = []
        for _ in range(5):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t0)
        r = common.cuda_kernel_profile(step, 3, top=40)
        r["wall_s_median_unprofiled"] = statistics.median(walls)
        # The host's issue time alone: the optimizer's Python step (foreach=False) with the GPU idle before it.
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.step()
        r["optimizer_step_host_s"] = time.perf_counter() - t0
        torch.cuda.synchronize()
        r["optimizer_step_wall_s"] = time.perf_counter() - t0
        res[stage] = r
        del model, opt
        torch.cuda.empty_cache()
    return res


def smallm_probe(a):
    out = []
    nks = [(1024, 4096), (2048, 4096), (4096, 4096), (8192, 4096), (16384, 4096), (32768, 4096), (4096, 1024),
           (4096, 2048), (4096, 8192), (4096, 11008), (4096, 16384), (12288, 4096), (22016, 4096)]
    for n, k in nks:
        w = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(4)]
        for m in (1, 8, 16, 32, 64, 128):
            x = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
            i = [0]

            def fn():
                i[0] = (i[0] + 1) % 4
                return F.linear(x, w[i[0]])
            t, lo, hi = time_fn(fn, reps=20, warmup=5)
            prof = common.cuda_kernel_profile(fn, 4, top=4)
            out.append({"M": m, "N": n, "K": k, "time_s": t, "min_s": lo, "max_s": hi,
                        "weight_GBps": n * k * 2 / t / 1e9,
                        "kernels": [{"name": kk["name"], "us": kk["us"]} for kk in prof.get("kernels_top_us_per_run", [])]})
        del w
        torch.cuda.empty_cache()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    rec = {"kind": "optstack_probe", "config": vars(a)}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    t0 = time.perf_counter()
    for name, fn in (("gemm", gemm_probe), ("attention", attention_probe), ("step", step_probe),
                     ("smallm", smallm_probe)):
        try:
            rec[name] = fn(a)
        except Exception as e:  # noqa: BLE001
            rec[name] = {"error": str(e)[:500]}
        print(f"[optstack_probe] {name} done at {time.perf_counter() - t0:.1f} s", flush=True)
    for g in rec.get("gemm", []) if isinstance(rec.get("gemm"), list) else []:
        if "time_s" in g:
            print(f"[gemm] {g['mode']:5s} {g['layer']:10s} {g['op']:5s} {g['M']}x{g['N']}x{g['K']} "
                  f"{g['time_s']*1e3:8.3f} ms {g['tflops']:7.1f} TF/s", flush=True)
    for k, v in (rec.get("attention") or {}).items():
        if isinstance(v, dict) and "gpu_busy_us_per_run" in v:
            print(f"[attn] {k:10s} busy {v['gpu_busy_us_per_run']/1e3:7.2f} ms span {v['gpu_span_us_per_run']/1e3:7.2f} ms "
                  f"kernels {v['kernel_count_per_run']:.0f}", flush=True)
    for k, v in (rec.get("step") or {}).items():
        if isinstance(v, dict) and "gpu_busy_us_per_run" in v:
            print(f"[step] {k:10s} wall {v['wall_s_median_unprofiled']*1e3:7.1f} ms busy "
                  f"{v['gpu_busy_us_per_run']/1e3:7.1f} ms span {v['gpu_span_us_per_run']/1e3:7.1f} ms kernels "
                  f"{v['kernel_count_per_run']:.0f} opt host {v['optimizer_step_host_s']*1e3:.1f} ms", flush=True)
    out_dir = a.out_dir or os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, "optstack_probe.json"), "w") as f:
        json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
